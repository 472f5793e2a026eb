//! The UCP context (one per rank) and memory registrations made with it.
//!
//! A [`Context`] is shared through `Arc`: the worker, every registration and every
//! [`UcxRegistration`] handed out in a [`RegisteredBuffer`] hold it, so it is cleaned up only
//! after the last of them is gone.

#![allow(unsafe_code)]

use std::any::Any;
use std::ffi::{CStr, CString};
use std::ptr;
use std::sync::Arc;

use ftcoll_ucx_sys as sys;

use super::super::{RegisteredBuffer, Registration, TransportError};

/// UCX's own text for `status`.
pub(super) fn status_text(status: sys::ucs_status_t) -> String {
    // SAFETY: ucs_status_string accepts any status value and returns a static NUL-terminated
    // string (an "unknown" text for values it does not know).
    let text = unsafe { CStr::from_ptr(sys::ucs_status_string(status)) };
    text.to_string_lossy().into_owned()
}

/// The library error for `call` returning `status`, with UCX's own text.
pub(super) fn library_error(call: &'static str, status: sys::ucs_status_t) -> TransportError {
    TransportError::Library {
        library: "ucx",
        call,
        why: status_text(status),
    }
}

/// `Ok` for `UCS_OK`, else the library error.
pub(super) fn check(call: &'static str, status: sys::ucs_status_t) -> Result<(), TransportError> {
    if status == sys::UCS_OK {
        Ok(())
    } else {
        Err(library_error(call, status))
    }
}

/// A `ucp_config_t` read from the environment, released on drop.
struct Config(*mut sys::ucp_config_t);

impl Config {
    fn read() -> Result<Config, TransportError> {
        let mut raw = ptr::null_mut();
        // SAFETY: NULL prefix and file mean "UCX_ variables, default file"; `raw` is written
        // only on success.
        check("ucp_config_read", unsafe {
            sys::ucp_config_read(ptr::null(), ptr::null(), &mut raw)
        })?;
        Ok(Config(raw))
    }

    fn set(&mut self, name: &str, value: &str) -> Result<(), TransportError> {
        let invalid = |_| TransportError::Library {
            library: "ucx",
            call: "ucp_config_modify",
            why: format!("'{name}={value}' contains a NUL byte"),
        };
        let (name, value) = (
            CString::new(name).map_err(invalid)?,
            CString::new(value).map_err(invalid)?,
        );
        // SAFETY: self.0 is a live config; both strings are NUL-terminated and outlive the call
        // (UCX copies the value).
        check("ucp_config_modify", unsafe {
            sys::ucp_config_modify(self.0, name.as_ptr(), value.as_ptr())
        })
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: self.0 came from ucp_config_read and is released exactly once.
        unsafe { sys::ucp_config_release(self.0) }
    }
}

/// A UCP application context; `ucp_cleanup` on drop.
#[derive(Debug)]
pub(super) struct Context {
    raw: sys::ucp_context_h,
}

// SAFETY: the context is created with `mt_workers_shared`, which makes UCX serialise the calls
// that may come from several threads at once (memory map and unmap: a `RegisteredBuffer` may be
// dropped on any thread); worker creation happens once, and cleanup only when the last `Arc`
// is gone, so no other call can race with it.
unsafe impl Send for Context {}
// SAFETY: as for Send.
unsafe impl Sync for Context {}

impl Context {
    /// Initialises UCP for tag matching with wakeup and RMA, restricted to `tls` (`UCX_TLS` syntax) if
    /// given. `estimated_eps` is a sizing hint (the job size).
    pub(super) fn new(
        tls: Option<&str>,
        estimated_eps: usize,
    ) -> Result<Arc<Context>, TransportError> {
        let mut config = Config::read()?;
        if let Some(tls) = tls {
            config.set("TLS", tls)?;
        }
        let params = sys::ucp_params_t {
            field_mask: u64::from(
                sys::UCP_PARAM_FIELD_FEATURES
                    | sys::UCP_PARAM_FIELD_MT_WORKERS_SHARED
                    | sys::UCP_PARAM_FIELD_ESTIMATED_NUM_EPS,
            ),
            // RMA for remote reads (`rma`): in hardware over RDMA devices, emulated by UCX over
            // TCP.
            features: u64::from(
                sys::UCP_FEATURE_TAG | sys::UCP_FEATURE_WAKEUP | sys::UCP_FEATURE_RMA,
            ),
            mt_workers_shared: 1,
            estimated_num_eps: estimated_eps,
            ..Default::default()
        };
        let mut raw = ptr::null_mut();
        // SAFETY: params and config are valid for the call; `raw` is written only on success.
        check("ucp_init", unsafe {
            sys::ftcoll_ucp_init(&params, config.0, &mut raw)
        })?;
        Ok(Arc::new(Context { raw }))
    }

    /// The raw handle, for the worker and registrations made from this context.
    pub(super) fn raw(&self) -> sys::ucp_context_h {
        self.raw
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every worker and registration holds an Arc to this context, so none is left;
        // the handle is released exactly once.
        unsafe { sys::ucp_cleanup(self.raw) }
    }
}

/// A `ucp_mem_map` registration of an address range; `ucp_mem_unmap` on drop. It holds the
/// context, so the context outlives it.
#[derive(Debug)]
pub(super) struct MemMap {
    context: Arc<Context>,
    memh: sys::ucp_mem_h,
    address: usize,
    bytes: usize,
}

// SAFETY: the handle is only passed to UCX calls that `mt_workers_shared` makes safe from any
// thread (unmap) or that run under the worker's lock (sends); the address is plain data.
unsafe impl Send for MemMap {}
// SAFETY: as for Send; shared references only read the fields.
unsafe impl Sync for MemMap {}

impl MemMap {
    /// Registers `bytes` bytes at `address` (not empty).
    ///
    /// # Safety
    /// The range must stay allocated for as long as the registration is used for I/O (passed
    /// as the memory handle of a send). If the memory is freed first, the registration may
    /// only be dropped: unmapping a range that is gone just deregisters it.
    pub(super) unsafe fn new(
        context: &Arc<Context>,
        address: *const u8,
        bytes: usize,
    ) -> Result<MemMap, TransportError> {
        let params = sys::ucp_mem_map_params_t {
            field_mask: u64::from(
                sys::UCP_MEM_MAP_PARAM_FIELD_ADDRESS | sys::UCP_MEM_MAP_PARAM_FIELD_LENGTH,
            ),
            address: address.cast_mut().cast(),
            length: bytes,
            ..Default::default()
        };
        let mut memh = ptr::null_mut();
        // SAFETY: the context is live; the caller guarantees the range; without the ALLOCATE
        // flag UCX registers the existing memory and never frees it.
        check("ucp_mem_map", unsafe {
            sys::ucp_mem_map(context.raw, &params, &mut memh)
        })?;
        Ok(MemMap {
            context: Arc::clone(context),
            memh,
            address: address as usize,
            bytes,
        })
    }

    /// The memory handle, for the request parameters of a send from inside the range.
    pub(super) fn memh(&self) -> sys::ucp_mem_h {
        self.memh
    }

    /// Whether `len` bytes at `address` lie inside the registered range.
    pub(super) fn covers(&self, address: *const u8, len: usize) -> bool {
        let start = address as usize;
        start >= self.address
            && start
                .checked_add(len)
                .is_some_and(|end| end <= self.address + self.bytes)
    }

    /// Whether the registration was made with `context`.
    pub(super) fn belongs_to(&self, context: &Arc<Context>) -> bool {
        Arc::ptr_eq(&self.context, context)
    }
}

impl Drop for MemMap {
    fn drop(&mut self) {
        // SAFETY: memh came from ucp_mem_map on this context (still alive through the Arc) and
        // is unmapped exactly once.
        let status = unsafe { sys::ucp_mem_unmap(self.context.raw, self.memh) };
        if status != sys::UCS_OK {
            let error = library_error("ucp_mem_unmap", status);
            tracing::warn!(%error, "leaking a UCX registration");
        }
    }
}

/// The registration behind a [`RegisteredBuffer`] that [`super::UcxTransport`] made.
///
/// It cannot hold the buffer's words itself: any second reference would make
/// [`RegisteredBuffer::words_mut`] return `None` forever. Instead [`RegisteredBuffer`] and
/// [`super::super::PinnedBuffer`] declare the registration before the words, so whichever
/// holds the memory last unmaps before it frees; and a registration kept alive past its buffer
/// (through [`RegisteredBuffer::registration`]) is only ever unmapped, never used for a send,
/// because a send takes the memory handle only from the buffer it sends, after checking that
/// the range covers it.
#[derive(Debug)]
pub(super) struct UcxRegistration {
    pub(super) map: MemMap,
}

impl Registration for UcxRegistration {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A zeroed buffer of `bytes` bytes (rounded up to whole words) registered with `context`.
pub(super) fn registered_buffer(
    context: &Arc<Context>,
    bytes: usize,
) -> Result<RegisteredBuffer, TransportError> {
    let words: Arc<[u64]> = Arc::from(vec![0u64; bytes.div_ceil(8)]);
    if words.is_empty() {
        // UCX refuses empty ranges, and there is nothing to send from.
        return Ok(RegisteredBuffer::zeroed(0));
    }
    let bytes_mapped = words.len() * 8;
    // SAFETY: the range is exactly the allocation of `words`, which the RegisteredBuffer built
    // below owns; see UcxRegistration for why the registration ends before the memory is freed
    // and is never used for I/O without it.
    let map = unsafe { MemMap::new(context, words.as_ptr().cast(), bytes_mapped)? };
    Ok(RegisteredBuffer::with_registration(
        words,
        Arc::new(UcxRegistration { map }),
    ))
}
