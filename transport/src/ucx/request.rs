//! Non-blocking UCP operations that own their memory until they complete.
//!
//! A [`Request`] holds what the operation reads or writes (a send buffer, a receive buffer)
//! and gives it back only once UCX reports completion. Dropping an unfinished request cancels
//! it and progresses the worker for a bounded time; if UCX still has not let go, the request is
//! released to UCX and its memory is leaked rather than freed under the library's feet.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ftcoll_ucx_sys as sys;

use super::worker::{Worker, WorkerGuard};

/// How long dropping an unfinished request waits for the cancellation to complete.
const DROP_WAIT: Duration = Duration::from_millis(200);
/// Progress calls per check while waiting for a dropped request.
const DROP_PROGRESS_ROUNDS: usize = 16;

/// An operation in flight; see the [module documentation](self).
#[derive(Debug)]
pub(super) struct Request<H> {
    raw: NonNull<c_void>,
    /// Declared after `raw` only for reading order; Drop decides when this is released.
    hold: Option<H>,
    worker: Arc<Worker>,
}

// SAFETY: the request handle is only passed to UCX under the worker's lock (serialised-mode
// worker); the memory it covers is owned through `hold`, which is Send itself.
unsafe impl<H: Send> Send for Request<H> {}

/// How starting an operation went.
#[derive(Debug)]
pub(super) enum Started<H> {
    /// Finished at once (or failed to start): the memory is free again.
    Done {
        /// What the operation used.
        hold: H,
        /// `UCS_OK` or the error.
        status: sys::ucs_status_t,
    },
    /// Still running.
    Pending(Request<H>),
}

impl<H> Started<H> {
    /// Interprets the `ucs_status_ptr_t` an `*_nbx` call returned.
    ///
    /// # Safety
    /// `ptr` must be the fresh return value of a non-blocking UCP call on `worker` made
    /// without a user-supplied request, and `hold` the memory that call uses.
    pub(super) unsafe fn from_status_ptr(
        worker: &Arc<Worker>,
        ptr: sys::ucs_status_ptr_t,
        hold: H,
    ) -> Started<H> {
        // SAFETY: inspecting a status pointer reads no memory.
        let status = unsafe { sys::ftcoll_ucs_ptr_status(ptr) };
        match NonNull::new(ptr) {
            Some(raw) if status == sys::UCS_INPROGRESS => Started::Pending(Request {
                raw,
                hold: Some(hold),
                worker: Arc::clone(worker),
            }),
            _ => Started::Done { hold, status },
        }
    }
}

impl<H> Request<H> {
    /// The final status, or `None` while the operation runs.
    pub(super) fn status(&self) -> Option<sys::ucs_status_t> {
        let _guard = self.worker.lock();
        // SAFETY: the handle is live (freed only in Drop) and the worker is locked.
        let status = unsafe { sys::ucp_request_check_status(self.raw.as_ptr()) };
        (status != sys::UCS_INPROGRESS).then_some(status)
    }

    /// The memory back and the final status if the operation completed, else the request.
    pub(super) fn finish(mut self) -> Result<(H, sys::ucs_status_t), Request<H>> {
        let Some(status) = self.status() else {
            return Err(self);
        };
        // Drop then frees the completed handle and has nothing left to release.
        match self.hold.take() {
            Some(hold) => Ok((hold, status)),
            None => Err(self),
        }
    }

    /// Status of a request while the worker is already locked.
    fn status_locked(&self, _guard: &WorkerGuard<'_>) -> sys::ucs_status_t {
        // SAFETY: the handle is live and the caller holds the worker's lock.
        unsafe { sys::ucp_request_check_status(self.raw.as_ptr()) }
    }
}

impl<H> Drop for Request<H> {
    fn drop(&mut self) {
        let mut guard = self.worker.lock();
        let mut status = self.status_locked(&guard);
        if status == sys::UCS_INPROGRESS {
            // SAFETY: the handle is live and the worker locked; cancelling a finished or
            // uncancellable request is a no-op.
            unsafe { sys::ucp_request_cancel(guard.handle(), self.raw.as_ptr()) };
            let deadline = Instant::now() + DROP_WAIT;
            while status == sys::UCS_INPROGRESS && Instant::now() < deadline {
                guard.progress(DROP_PROGRESS_ROUNDS);
                status = self.status_locked(&guard);
            }
        }
        // SAFETY: the handle came from a UCP call and is released exactly once; UCX keeps
        // running an unfinished operation but never touches the handle's owner again.
        unsafe { sys::ucp_request_free(self.raw.as_ptr()) };
        if status == sys::UCS_INPROGRESS {
            if let Some(hold) = self.hold.take() {
                // UCX may still read or write this memory: leaking it is the only safe choice.
                tracing::warn!("a UCX operation outlived its cancellation; leaking its buffer");
                std::mem::forget(hold);
            }
        }
    }
}

/// A tagged message taken off the worker's queue and being received.
#[derive(Debug)]
pub(super) struct Incoming {
    /// The sender's tag.
    pub(super) tag: u64,
    /// The message length in bytes.
    pub(super) len: usize,
    /// The receive into the buffer `choose` picked.
    pub(super) started: Started<Box<[u64]>>,
}

/// Takes the oldest waiting tagged message, if any, and starts receiving it into the buffer
/// `choose(tag, len)` returns. A buffer shorter than the message makes the receive fail with
/// `UCS_ERR_MESSAGE_TRUNCATED`, which is how unwanted messages are discarded.
pub(super) fn take_message(
    worker: &Arc<Worker>,
    choose: impl FnOnce(u64, usize) -> Box<[u64]>,
) -> Option<Incoming> {
    let guard = worker.lock();
    let mut info = sys::ucp_tag_recv_info_t::default();
    // SAFETY: the worker is live and locked; tag mask 0 matches any message; remove = 1 hands
    // the message to us, and it is received (which releases it) just below.
    let message = unsafe { sys::ucp_tag_probe_nb(guard.handle(), 0, 0, 1, &mut info) };
    if message.is_null() {
        return None;
    }
    let (tag, len) = (info.sender_tag, info.length);
    let mut buffer = choose(tag, len);
    let capacity_bytes = buffer.len() * 8;
    let param = sys::ucp_request_param_t::default();
    // SAFETY: `message` was just removed from the queue and is received exactly once; the
    // buffer is `capacity_bytes` long and lives on the heap, so moving the Box into the request
    // does not move it; the request keeps the Box until UCX reports completion.
    let ptr = unsafe {
        sys::ucp_tag_msg_recv_nbx(
            guard.handle(),
            buffer.as_mut_ptr().cast(),
            capacity_bytes,
            message,
            &param,
        )
    };
    drop(guard);
    // SAFETY: `ptr` is the fresh result of the receive above, which uses `buffer`.
    let started = unsafe { Started::from_status_ptr(worker, ptr, buffer) };
    Some(Incoming { tag, len, started })
}
