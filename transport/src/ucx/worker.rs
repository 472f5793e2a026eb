//! The UCP worker of one rank, and the lock that serialises every call into it.
//!
//! The worker runs in `UCS_THREAD_MODE_SERIALIZED`: the runtime moves a rank's transport
//! between its application thread and its agreement progress thread (one at a time, under the
//! endpoint mutex), which UCX's `SINGLE` mode ("only the thread that created it") does not
//! allow. The [`Worker`] keeps the handle behind a `Mutex` so that the serialisation UCX asks
//! for is a property of the type rather than of its callers: endpoints and requests share the
//! worker through `Arc`, and every call that touches it goes through [`Worker::lock`].

#![allow(unsafe_code)]

use std::os::fd::{BorrowedFd, RawFd};
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ftcoll_ucx_sys as sys;
use rustix::event::{PollFd, PollFlags, Timespec};

use super::super::TransportError;
use super::context::{check, library_error, Context};

/// The raw handle; only reachable through the worker's lock.
#[derive(Debug)]
struct RawWorker(sys::ucp_worker_h);

// SAFETY: a serialised-mode worker may be called from any thread as long as calls do not
// overlap, which the Mutex around this handle guarantees.
unsafe impl Send for RawWorker {}

/// A UCP worker; `ucp_worker_destroy` on drop. Holds the context, so the context outlives it.
#[derive(Debug)]
pub(super) struct Worker {
    raw: Mutex<RawWorker>,
    /// The worker's event file descriptor (owned and closed by UCX).
    efd: RawFd,
    /// Keeps the context alive until the worker is destroyed (fields drop after `Drop::drop`).
    _context: Arc<Context>,
}

impl Worker {
    /// Creates the worker of `context`, with its event file descriptor.
    pub(super) fn new(context: &Arc<Context>) -> Result<Arc<Worker>, TransportError> {
        let params = sys::ucp_worker_params_t {
            field_mask: u64::from(sys::UCP_WORKER_PARAM_FIELD_THREAD_MODE),
            thread_mode: sys::UCS_THREAD_MODE_SERIALIZED,
            ..Default::default()
        };
        let mut raw = ptr::null_mut();
        // SAFETY: the context is live (held by the Arc); `raw` is written only on success.
        check("ucp_worker_create", unsafe {
            sys::ucp_worker_create(context.raw(), &params, &mut raw)
        })?;
        // From here on the handle is owned by `worker`, whose Drop destroys it on error paths.
        let mut worker = Worker {
            raw: Mutex::new(RawWorker(raw)),
            efd: -1,
            _context: Arc::clone(context),
        };
        let mut efd = -1;
        // SAFETY: the worker is live and was created with the WAKEUP feature on its context.
        check("ucp_worker_get_efd", unsafe {
            sys::ucp_worker_get_efd(raw, &mut efd)
        })?;
        worker.efd = efd;
        Ok(Arc::new(worker))
    }

    /// Exclusive access to the worker for a few calls. Never hold it while dropping an
    /// endpoint or a request: they lock it themselves.
    pub(super) fn lock(&self) -> WorkerGuard<'_> {
        // A panic while the lock was held leaves a worker UCX can still use: calls are whole.
        WorkerGuard(self.raw.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The worker's address, for peers to connect to.
    pub(super) fn address(&self) -> Result<Vec<u8>, TransportError> {
        let guard = self.lock();
        let mut address = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: the worker is live and locked; both outputs are written only on success.
        check("ucp_worker_get_address", unsafe {
            sys::ucp_worker_get_address(guard.handle(), &mut address, &mut len)
        })?;
        // SAFETY: on success UCX returned `len` readable bytes at `address`, valid until
        // released just below.
        let bytes = unsafe { std::slice::from_raw_parts(address.cast::<u8>(), len) }.to_vec();
        // SAFETY: `address` came from ucp_worker_get_address on this worker; released once.
        unsafe { sys::ucp_worker_release_address(guard.handle(), address) };
        Ok(bytes)
    }

    /// Blocks until the worker's event descriptor or `wake` is readable, or `timeout` passes.
    /// Call only after [`WorkerGuard::arm`] returned [`Armed::Yes`].
    pub(super) fn block(
        &self,
        wake: BorrowedFd<'_>,
        timeout: Option<Duration>,
    ) -> Result<(), TransportError> {
        // SAFETY: the descriptor belongs to the worker, which `&self` keeps alive for the
        // duration of this borrow.
        let efd = unsafe { BorrowedFd::borrow_raw(self.efd) };
        let mut fds = [
            PollFd::from_borrowed_fd(efd, PollFlags::IN),
            PollFd::from_borrowed_fd(wake, PollFlags::IN),
        ];
        // A timeout too large for a timespec is as good as none.
        let timeout = timeout.and_then(|t| Timespec::try_from(t).ok());
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            // A signal ends the wait early, which callers allow.
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(TransportError::io("waiting for UCX events", e.into())),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let raw = self.raw.get_mut().unwrap_or_else(|p| p.into_inner()).0;
        // SAFETY: every endpoint and request holds an Arc to this worker, so none is left; the
        // context is still alive (our Arc is released after this body); destroyed exactly once.
        unsafe { sys::ucp_worker_destroy(raw) }
    }
}

/// The worker, locked: see [`Worker::lock`].
pub(super) struct WorkerGuard<'a>(MutexGuard<'a, RawWorker>);

/// What [`WorkerGuard::arm`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Armed {
    /// The event descriptor will signal the next event.
    Yes,
    /// Events are already pending: progress instead of blocking.
    Busy,
}

impl WorkerGuard<'_> {
    /// The raw handle, for calls made while the guard is held.
    pub(super) fn handle(&self) -> sys::ucp_worker_h {
        self.0 .0
    }

    /// Progresses the worker until it reports no more work or `max_rounds` calls were made;
    /// returns the number of events processed.
    pub(super) fn progress(&mut self, max_rounds: usize) -> usize {
        let mut events = 0usize;
        for _ in 0..max_rounds {
            // SAFETY: the worker is live and locked.
            let n = unsafe { sys::ucp_worker_progress(self.handle()) };
            if n == 0 {
                break;
            }
            events += n as usize;
        }
        events
    }

    /// Arms the event descriptor for [`Worker::block`].
    pub(super) fn arm(&mut self) -> Result<Armed, TransportError> {
        // SAFETY: the worker is live and locked.
        match unsafe { sys::ucp_worker_arm(self.handle()) } {
            sys::UCS_OK => Ok(Armed::Yes),
            sys::UCS_ERR_BUSY => Ok(Armed::Busy),
            status => Err(library_error("ucp_worker_arm", status)),
        }
    }

    /// Whether a tagged message is waiting to be received (without taking it).
    pub(super) fn message_waiting(&mut self) -> bool {
        let mut info = sys::ucp_tag_recv_info_t::default();
        // SAFETY: the worker is live and locked; tag mask 0 matches any message, remove = 0
        // leaves it queued (the returned handle is only compared with NULL).
        !unsafe { sys::ucp_tag_probe_nb(self.handle(), 0, 0, 0, &mut info) }.is_null()
    }
}
