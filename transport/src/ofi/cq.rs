//! The completion queue: tagged-format entries for sends and receives alike, with a file
//! descriptor to block on when the provider offers one.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::os::fd::{BorrowedFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use ftcoll_ofi_sys as sys;

use super::fabric::{check, close_fid, error_text, library_error, no_object, Domain};
use crate::TransportError;

/// One completion, as the provider reports it.
pub(super) type Entry = sys::fi_cq_tagged_entry;

/// What one read of the queue found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Read {
    /// This many entries were written to the front of the buffer.
    Entries(usize),
    /// Nothing completed.
    Empty,
    /// An error completion is at the head: read it with [`CompletionQueue::read_error`].
    ErrorAvailable,
}

/// An error completion, copied out of the provider's buffers.
#[derive(Debug, Clone)]
pub(super) struct ErrorEntry {
    /// The failed operation's context pointer (an address, compared, never dereferenced).
    pub(super) context: usize,
    /// The operation's tag, if the provider filled it in.
    pub(super) tag: u64,
    /// Positive libfabric error code (FI_ECANCELED, FI_ETRUNC, ...).
    pub(super) code: i32,
    /// Provider text for the error.
    pub(super) why: String,
}

/// An open completion queue, keeping its domain alive; closed on drop (after the endpoint that
/// owns it: see `endpoint::Endpoint`).
pub(super) struct CompletionQueue {
    fid: NonNull<sys::fid_cq>,
    /// The wait object, when the provider gave one; open as long as the queue is.
    wait_fd: Option<RawFd>,
    domain: Arc<Domain>,
}

// SAFETY: used only by the thread that owns the transport (the domain is FI_THREAD_DOMAIN).
unsafe impl Send for CompletionQueue {}

impl CompletionQueue {
    /// Opens a queue of `entries` tagged entries, with a file-descriptor wait object if the
    /// provider supports one, else with none (the caller then sleeps in short steps).
    pub(super) fn open(
        domain: &Arc<Domain>,
        entries: usize,
    ) -> Result<CompletionQueue, TransportError> {
        match CompletionQueue::open_with(domain, entries, sys::FI_WAIT_FD) {
            Ok(cq) => Ok(cq),
            Err(e) => {
                tracing::debug!(error = %e, "no file-descriptor wait object; polling the completion queue");
                CompletionQueue::open_with(domain, entries, sys::FI_WAIT_NONE)
            }
        }
    }

    fn open_with(
        domain: &Arc<Domain>,
        entries: usize,
        wait_obj: sys::fi_wait_obj,
    ) -> Result<CompletionQueue, TransportError> {
        let mut attr = sys::fi_cq_attr {
            size: entries,
            format: sys::FI_CQ_FORMAT_TAGGED,
            wait_obj,
            wait_cond: sys::FI_CQ_COND_NONE,
            ..Default::default()
        };
        let mut fid = ptr::null_mut();
        // SAFETY: the domain is open; attr is read during the call only.
        let code = unsafe {
            sys::ftcoll_fi_cq_open(domain.as_ptr(), &mut attr, &mut fid, ptr::null_mut())
        };
        check("fi_cq_open", code)?;
        let fid = NonNull::new(fid).ok_or_else(|| no_object("fi_cq_open"))?;
        let mut cq = CompletionQueue {
            fid,
            wait_fd: None,
            domain: Arc::clone(domain),
        };
        if wait_obj == sys::FI_WAIT_FD {
            let mut fd: RawFd = -1;
            // SAFETY: FI_GETWAIT on an FI_WAIT_FD queue writes one int.
            let code = unsafe {
                sys::ftcoll_fi_control(cq.as_fid(), sys::FI_GETWAIT as i32, (&raw mut fd).cast())
            };
            // Dropping `cq` on error closes it; the caller then opens one without a wait object.
            check("fi_control(FI_GETWAIT)", code)?;
            if fd < 0 {
                return Err(library_error(
                    "fi_control(FI_GETWAIT)",
                    -(sys::FI_ENOSYS as isize),
                ));
            }
            cq.wait_fd = Some(fd);
        }
        Ok(cq)
    }

    /// The queue as a generic libfabric object.
    pub(super) fn as_fid(&self) -> *mut sys::fid {
        // SAFETY: `fid` is the first member of the open queue `self.fid` points to.
        unsafe { &raw mut (*self.fid.as_ptr()).fid }
    }

    /// Reads up to `entries.len()` completions.
    #[inline]
    pub(super) fn read(&self, entries: &mut [Entry]) -> Result<Read, TransportError> {
        // SAFETY: the buffer holds entries.len() tagged entries, the queue's format.
        let code = unsafe {
            sys::ftcoll_fi_cq_read(
                self.fid.as_ptr(),
                entries.as_mut_ptr().cast(),
                entries.len(),
            )
        };
        match code {
            n if n > 0 => Ok(Read::Entries(n.unsigned_abs().min(entries.len()))),
            0 => Ok(Read::Empty),
            code if code == -(sys::FI_EAGAIN as isize) => Ok(Read::Empty),
            code if code == -(sys::FI_EAVAIL as isize) => Ok(Read::ErrorAvailable),
            code => Err(library_error("fi_cq_read", code)),
        }
    }

    /// Reads the error completion at the head, if there is one.
    #[cold]
    pub(super) fn read_error(&self) -> Result<Option<ErrorEntry>, TransportError> {
        let mut raw = sys::fi_cq_err_entry::default();
        // SAFETY: `raw` is a valid entry; with err_data_size 0 the provider points err_data at
        // its own buffer, valid until the next read, and we copy the text out before that.
        let code = unsafe { sys::ftcoll_fi_cq_readerr(self.fid.as_ptr(), &mut raw, 0) };
        if code == -(sys::FI_EAGAIN as isize) || code == 0 {
            return Ok(None);
        }
        if code < 0 {
            return Err(library_error("fi_cq_readerr", code));
        }
        let mut text = [0u8; 256];
        // SAFETY: the error data is the provider's from the read above; `text` is writable for
        // its length. The result is NULL or a NUL-terminated string (ours or the provider's).
        let why = unsafe {
            let s = sys::ftcoll_fi_cq_strerror(
                self.fid.as_ptr(),
                raw.prov_errno,
                raw.err_data,
                text.as_mut_ptr().cast(),
                text.len(),
            );
            if s.is_null() {
                error_text(raw.err as isize)
            } else {
                let provider = CStr::from_ptr(s).to_string_lossy();
                format!("{} ({provider})", error_text(raw.err as isize))
            }
        };
        Ok(Some(ErrorEntry {
            context: raw.op_context as usize,
            tag: raw.tag,
            code: raw.err,
            why,
        }))
    }

    /// The descriptor to `poll` for readability before blocking, if the provider gave one.
    pub(super) fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        // SAFETY: the provider keeps the descriptor open as long as the queue, which the
        // returned borrow cannot outlive.
        self.wait_fd.map(|fd| unsafe { BorrowedFd::borrow_raw(fd) })
    }

    /// Whether it is safe to block on the [`CompletionQueue::wait_fd`]s of `queues` (of one
    /// fabric) now (`fi_trywait`); `false` means completions may be ready without a descriptor
    /// signalling: read the queues first.
    pub(super) fn try_wait_all(queues: &[&CompletionQueue]) -> bool {
        let Some(first) = queues.first() else {
            return true;
        };
        let mut fids: Vec<*mut sys::fid> = queues.iter().map(|cq| cq.as_fid()).collect();
        // SAFETY: the fabric and the queues are open; the array holds that many valid fids.
        let code = unsafe {
            sys::ftcoll_fi_trywait(
                first.domain.fabric().as_ptr(),
                fids.as_mut_ptr(),
                fids.len() as i32,
            )
        };
        code == sys::FI_SUCCESS
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: the endpoint bound to the queue closed first (it owns the queue).
        unsafe { close_fid("completion queue", self.as_fid()) };
    }
}
