//! RAII handles for a fabric and a domain, and the translation of libfabric return codes into
//! [`TransportError`]s.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ftcoll_ofi_sys as sys;

use super::info::Info;
use crate::TransportError;

/// libfabric's own text for an error code (either sign).
pub(super) fn error_text(code: isize) -> String {
    let errnum = i32::try_from(code.unsigned_abs()).unwrap_or(i32::MAX);
    // SAFETY: fi_strerror accepts any number and returns a pointer to a static, NUL-terminated
    // string (or NULL, handled below).
    let text = unsafe { sys::fi_strerror(errnum) };
    if text.is_null() {
        return format!("error {errnum}");
    }
    // SAFETY: non-null, NUL-terminated and static (see above).
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// The [`TransportError`] for a failed libfabric call.
pub(super) fn library_error(call: &'static str, code: isize) -> TransportError {
    TransportError::Library {
        library: "libfabric",
        call,
        why: error_text(code),
    }
}

/// The [`TransportError`] for a call that reported success but returned no object.
pub(super) fn no_object(call: &'static str) -> TransportError {
    TransportError::Library {
        library: "libfabric",
        call,
        why: "the provider returned no object".into(),
    }
}

/// `Ok` for a non-negative return code, the library error otherwise.
pub(super) fn check(call: &'static str, code: impl Into<i64>) -> Result<(), TransportError> {
    match code.into() {
        code if code >= 0 => Ok(()),
        code => Err(library_error(
            call,
            isize::try_from(code).unwrap_or(isize::MIN),
        )),
    }
}

/// Closes a libfabric object, logging (not failing) a refusal: Drop cannot do better.
///
/// # Safety
/// `fid` is an open libfabric object that nothing uses any more.
pub(super) unsafe fn close_fid(what: &'static str, fid: *mut sys::fid) {
    // SAFETY: the caller's contract.
    let code = unsafe { sys::ftcoll_fi_close(fid) };
    if code != 0 {
        tracing::warn!(
            object = what,
            error = %error_text(code as isize),
            "libfabric refused to close an object"
        );
    }
}

/// An open fabric (`fi_fabric`), closed on drop.
pub(super) struct Fabric {
    fid: NonNull<sys::fid_fabric>,
}

// SAFETY: a fabric is only used to open domains and for fi_trywait, both from the thread that
// owns the transport; the last reference (whichever thread holds it) only closes it.
unsafe impl Send for Fabric {}
// SAFETY: as for Send; no method mutates Rust-visible state.
unsafe impl Sync for Fabric {}

impl Fabric {
    /// Opens the fabric `info` describes.
    pub(super) fn open(info: &Info<'_>) -> Result<Arc<Fabric>, TransportError> {
        let mut fid = ptr::null_mut();
        // SAFETY: fabric_attr is valid for the info's lifetime; libfabric copies what it keeps.
        let code = unsafe { sys::fi_fabric(info.raw().fabric_attr, &mut fid, ptr::null_mut()) };
        check("fi_fabric", code)?;
        let fid = NonNull::new(fid).ok_or_else(|| no_object("fi_fabric"))?;
        Ok(Arc::new(Fabric { fid }))
    }

    /// The raw handle, for calls that take the fabric (fi_trywait).
    pub(super) fn as_ptr(&self) -> *mut sys::fid_fabric {
        self.fid.as_ptr()
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        // SAFETY: every domain holds an Arc to this fabric, so none is open any more.
        unsafe { close_fid("fabric", &raw mut (*self.fid.as_ptr()).fid) };
    }
}

/// An open domain (`fi_domain`), keeping its fabric alive; closed on drop, after every
/// endpoint, queue, address vector and memory region of it (they all hold an `Arc<Domain>`).
pub(super) struct Domain {
    fid: NonNull<sys::fid_domain>,
    /// Next requested key for `fi_mr_reg`: keys must be unique within a domain unless the
    /// provider picks them (FI_MR_PROV_KEY).
    next_mr_key: AtomicU64,
    fabric: Arc<Fabric>,
}

// SAFETY: the domain is opened with FI_THREAD_DOMAIN. Its objects are used from the thread that
// owns the transport; memory regions of user buffers dropped on other threads are handed back to
// that thread (see `mr::Graveyard`) or, once the transport is gone, closed one at a time under
// the graveyard's lock. The last reference only closes the domain.
unsafe impl Send for Domain {}
// SAFETY: as for Send; `next_mr_key` is atomic.
unsafe impl Sync for Domain {}

impl Domain {
    /// Opens the domain `info` describes on `fabric`.
    pub(super) fn open(
        fabric: &Arc<Fabric>,
        info: &Info<'_>,
    ) -> Result<Arc<Domain>, TransportError> {
        let mut fid = ptr::null_mut();
        // SAFETY: the fabric is open and `info` valid; libfabric copies what it keeps of it.
        let code = unsafe {
            sys::ftcoll_fi_domain(fabric.as_ptr(), info.raw_mut(), &mut fid, ptr::null_mut())
        };
        check("fi_domain", code)?;
        let fid = NonNull::new(fid).ok_or_else(|| no_object("fi_domain"))?;
        Ok(Arc::new(Domain {
            fid,
            next_mr_key: AtomicU64::new(1),
            fabric: Arc::clone(fabric),
        }))
    }

    /// The raw handle, for opening the domain's objects.
    pub(super) fn as_ptr(&self) -> *mut sys::fid_domain {
        self.fid.as_ptr()
    }

    /// The fabric the domain belongs to.
    pub(super) fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// A memory-region key not used before in this domain.
    pub(super) fn next_mr_key(&self) -> u64 {
        self.next_mr_key.fetch_add(1, Ordering::Relaxed)
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        // SAFETY: all objects of the domain hold an Arc to it, so none is open any more.
        unsafe { close_fid("domain", &raw mut (*self.fid.as_ptr()).fid) };
    }
}
