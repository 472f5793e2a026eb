//! Endpoints to peers, with UCX's peer-failure handling, and tagged sends on them.
//!
//! Every endpoint is created with `UCP_ERR_HANDLING_MODE_PEER`, so a peer that dies makes UCX
//! call [`on_peer_error`] instead of aborting this process. The callback only records the
//! status in the endpoint's [`ErrorSlot`] and raises a worker-wide flag; the transport notices
//! the flag after progressing and closes the endpoint.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ftcoll_ucx_sys as sys;

use super::super::TransportError;
use super::context::check;
use super::request::Started;
use super::worker::Worker;

/// How long closing an endpoint may progress the worker before giving up on a confirmation.
const CLOSE_WAIT: Duration = Duration::from_millis(500);
/// Progress calls per check while closing.
const CLOSE_PROGRESS_ROUNDS: usize = 16;

/// Where the error callback of one endpoint records what happened. Boxed, so its address is
/// stable for UCX.
#[derive(Debug)]
struct ErrorSlot {
    /// The error status, or `UCS_OK` while the endpoint is healthy.
    status: AtomicI8,
    /// Raised on any endpoint's error: tells the transport to look.
    any_failed: Arc<AtomicBool>,
}

/// The error callback UCX calls (from within `ucp_worker_progress`) when a peer fails.
unsafe extern "C" fn on_peer_error(
    arg: *mut c_void,
    _ep: sys::ucp_ep_h,
    status: sys::ucs_status_t,
) {
    // SAFETY: `arg` is the ErrorSlot registered with this endpoint; it is freed only after the
    // endpoint is closed, after which UCX no longer calls this.
    let slot = unsafe { &*arg.cast::<ErrorSlot>() };
    // A status of UCS_OK would read as healthy; UCX never passes it, but be sure.
    let status = if status == sys::UCS_OK {
        sys::UCS_ERR_CONNECTION_RESET
    } else {
        status
    };
    slot.status.store(status, Ordering::Release);
    slot.any_failed.store(true, Ordering::Release);
}

/// Something a send reads from: the exact bytes of one frame, and the memory handle of its
/// registration if it has one.
///
/// # Safety
/// The bytes must not move or be freed while the value is moved around (heap memory owned or
/// shared by the value), and no one may write them while the value exists.
pub(super) unsafe trait SendMemory: Send {
    /// The frame.
    fn frame(&self) -> &[u8];
    /// The registration covering [`SendMemory::frame`], if any.
    fn memh(&self) -> Option<sys::ucp_mem_h>;
}

/// A connection to one peer; closed on drop. Holds the worker, so the worker outlives it.
#[derive(Debug)]
pub(super) struct Endpoint {
    raw: sys::ucp_ep_h,
    /// Owned (from `Box::into_raw`); freed after the endpoint is closed.
    slot: *mut ErrorSlot,
    /// Whether the close is forced (cancelling what is in flight) rather than flushed (bounded
    /// by [`CLOSE_WAIT`]); atomic because a shared endpoint (a remote reader holds one) is
    /// marked through `&self`.
    force_close: AtomicBool,
    worker: Arc<Worker>,
}

// SAFETY: the endpoint handle is only passed to UCX under the worker's lock (serialised-mode
// worker); the slot is only touched through atomics.
unsafe impl Send for Endpoint {}
// SAFETY: as for Send: every use of the handle takes the worker's lock, and the other fields
// are atomics or immutable.
unsafe impl Sync for Endpoint {}

impl Endpoint {
    /// Connects to the worker whose address is `address`; `any_failed` is raised when this (or
    /// any) endpoint fails.
    pub(super) fn connect(
        worker: &Arc<Worker>,
        address: &[u8],
        any_failed: &Arc<AtomicBool>,
    ) -> Result<Endpoint, TransportError> {
        let slot = Box::into_raw(Box::new(ErrorSlot {
            status: AtomicI8::new(sys::UCS_OK),
            any_failed: Arc::clone(any_failed),
        }));
        let params = sys::ucp_ep_params_t {
            field_mask: u64::from(
                sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
                    | sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
                    | sys::UCP_EP_PARAM_FIELD_ERR_HANDLER,
            ),
            address: address.as_ptr().cast(),
            err_mode: sys::UCP_ERR_HANDLING_MODE_PEER,
            err_handler: sys::ucp_err_handler_t {
                cb: Some(on_peer_error),
                arg: slot.cast(),
            },
            ..Default::default()
        };
        let mut raw = std::ptr::null_mut();
        let status = {
            let guard = worker.lock();
            // SAFETY: the worker is live and locked; UCX copies what it needs of the address
            // during the call; the slot outlives the endpoint (see Drop).
            unsafe { sys::ucp_ep_create(guard.handle(), &params, &mut raw) }
        };
        if let Err(e) = check("ucp_ep_create", status) {
            // SAFETY: no endpoint was created, so nothing refers to the slot.
            drop(unsafe { Box::from_raw(slot) });
            return Err(e);
        }
        Ok(Endpoint {
            raw,
            slot,
            force_close: AtomicBool::new(false),
            worker: Arc::clone(worker),
        })
    }

    /// The error UCX reported for this endpoint, if any.
    pub(super) fn failure(&self) -> Option<sys::ucs_status_t> {
        // SAFETY: the slot is live until Drop.
        let status = unsafe { &*self.slot }.status.load(Ordering::Acquire);
        (status != sys::UCS_OK).then_some(status)
    }

    /// Makes the close on drop forced (it is anyway after a failure).
    pub(super) fn force_close_on_drop(&self) {
        self.force_close.store(true, Ordering::Release);
    }

    /// Sends `memory`'s frame with `tag`, passing its registration to UCX when it has one.
    pub(super) fn send_tagged<M: SendMemory>(&self, tag: u64, memory: M) -> Started<M> {
        let frame = memory.frame();
        let mut param = sys::ucp_request_param_t::default();
        if let Some(memh) = memory.memh() {
            param.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_MEMH;
            param.memh = memh;
        }
        let ptr = {
            let _guard = self.worker.lock();
            // SAFETY: the endpoint and worker are live and the worker locked; by SendMemory's
            // contract the frame stays put and unwritten while `memory` exists, and `memory` is
            // kept by the returned request until UCX completes the send.
            unsafe {
                sys::ucp_tag_send_nbx(self.raw, frame.as_ptr().cast(), frame.len(), tag, &param)
            }
        };
        // SAFETY: `ptr` is the fresh result of the send above, which uses `memory`.
        unsafe { Started::from_status_ptr(&self.worker, ptr, memory) }
    }

    /// Unpacks a peer's packed remote key for gets on this endpoint.
    pub(super) fn unpack_rkey(&self, packed: &[u8]) -> Result<RemoteKey, sys::ucs_status_t> {
        let mut rkey = std::ptr::null_mut();
        let status = {
            let _guard = self.worker.lock();
            // SAFETY: the endpoint is live and the worker locked; UCX trusts the lengths inside
            // a packed key, so only keys exactly as `ucp_rkey_pack` made them may come here
            // (the runtime passes keys from notices whose check word shows them whole); it
            // writes `rkey` only on success.
            unsafe { sys::ucp_ep_rkey_unpack(self.raw, packed.as_ptr().cast(), &mut rkey) }
        };
        if status != sys::UCS_OK || rkey.is_null() {
            return Err(status);
        }
        Ok(RemoteKey {
            raw: rkey,
            worker: Arc::clone(&self.worker),
        })
    }

    /// Starts reading `len` bytes at the peer's `addr` under `rkey` into `buffer`, which the
    /// returned request keeps until UCX completes the read.
    pub(super) fn get(
        &self,
        mut buffer: Box<[u64]>,
        len: usize,
        (addr, rkey): (u64, &RemoteKey),
    ) -> Started<Box<[u64]>> {
        debug_assert!(len <= buffer.len() * 8);
        let param = sys::ucp_request_param_t::default();
        let ptr = {
            let _guard = self.worker.lock();
            // SAFETY: the endpoint, worker and rkey are live and the worker locked; the buffer
            // is on the heap with at least `len` bytes, so moving the Box into the request
            // does not move it, and the request keeps it until UCX completes the read.
            unsafe {
                sys::ucp_get_nbx(
                    self.raw,
                    buffer.as_mut_ptr().cast(),
                    len,
                    addr,
                    rkey.raw,
                    &param,
                )
            }
        };
        // SAFETY: `ptr` is the fresh result of the get above, which uses `buffer`.
        unsafe { Started::from_status_ptr(&self.worker, ptr, buffer) }
    }
}

/// A peer's remote key unpacked on an endpoint; `ucp_rkey_destroy` on drop.
#[derive(Debug)]
pub(super) struct RemoteKey {
    raw: sys::ucp_rkey_h,
    worker: Arc<Worker>,
}

// SAFETY: the handle is only used under the worker's lock (gets) or destroyed once on drop.
unsafe impl Send for RemoteKey {}

impl Drop for RemoteKey {
    fn drop(&mut self) {
        let _guard = self.worker.lock();
        // SAFETY: raw came from ucp_ep_rkey_unpack and is destroyed exactly once.
        unsafe { sys::ucp_rkey_destroy(self.raw) }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let force = self.force_close.load(Ordering::Acquire) || self.failure().is_some();
        let mut param = sys::ucp_request_param_t::default();
        if force {
            param.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_FLAGS;
            param.flags = sys::UCP_EP_CLOSE_FLAG_FORCE;
        }
        let mut guard = self.worker.lock();
        // SAFETY: the endpoint is live and closed exactly once; the worker is locked.
        let request = unsafe { sys::ucp_ep_close_nbx(self.raw, &param) };
        // SAFETY: inspecting a status pointer reads no memory.
        let mut status = unsafe { sys::ftcoll_ucs_ptr_status(request) };
        // A forced close is not waited for: after a peer's death it can take UCX hundreds of
        // milliseconds to confirm, and a rank that stalls that long inside `peer_failed` is
        // itself taken for dead by protocols with per-message timeouts (FTCO). UCX finishes
        // the close on its own; the error slot is then kept (below), at most one per peer.
        if status == sys::UCS_INPROGRESS && force {
            // SAFETY: released exactly once; UCX finishes an unfinished close on its own.
            unsafe { sys::ucp_request_free(request) };
        } else if status == sys::UCS_INPROGRESS {
            let deadline = Instant::now() + CLOSE_WAIT;
            loop {
                guard.progress(CLOSE_PROGRESS_ROUNDS);
                // SAFETY: `request` is the live close request, freed only below.
                status = unsafe { sys::ucp_request_check_status(request) };
                if status != sys::UCS_INPROGRESS || Instant::now() >= deadline {
                    break;
                }
            }
            // SAFETY: released exactly once; UCX finishes an unfinished close on its own.
            unsafe { sys::ucp_request_free(request) };
        }
        if status == sys::UCS_INPROGRESS {
            // The error callback may still run until UCX finishes the close: keep its slot.
            tracing::debug!("UCX endpoint close unconfirmed; keeping its error slot");
            return;
        }
        // SAFETY: the endpoint is closed, so UCX no longer calls the error callback; the slot
        // came from Box::into_raw and is freed exactly once.
        drop(unsafe { Box::from_raw(self.slot) });
    }
}
