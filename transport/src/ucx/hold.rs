//! What an in-flight send owns: a pool slot holding a copy of the frame, or a pin on a
//! [`RegisteredBuffer`] sent from in place.

#![allow(unsafe_code)]

use std::sync::Arc;

use ftcoll_ucx_sys as sys;

use super::super::{PinnedBuffer, RegisteredBuffer};
use super::context::{Context, UcxRegistration};
use super::endpoint::SendMemory;
use super::pool::PoolSlot;

/// A send straight from a registered buffer: the pin keeps the memory (and its registration)
/// alive and read-only until the send completes.
#[derive(Debug)]
pub(super) struct PinnedSend {
    pin: PinnedBuffer,
    len: usize,
    /// The memory handle of the pin's registration, when it is ours and covers the frame. The
    /// pin holds the registration, so the handle stays valid as long as this value.
    memh: Option<sys::ucp_mem_h>,
}

impl PinnedSend {
    /// Pins the first `len` bytes of `buffer` (at most its length); registrations made by
    /// another context (or another backend) are not passed to UCX, which then registers the
    /// memory itself.
    pub(super) fn new(buffer: &RegisteredBuffer, len: usize, context: &Arc<Context>) -> PinnedSend {
        let pin = buffer.pin();
        let len = len.min(pin.bytes().len());
        let start = pin.bytes().as_ptr();
        let memh = pin
            .registration()
            .and_then(|r| r.as_any().downcast_ref::<UcxRegistration>())
            .filter(|r| r.map.belongs_to(context) && r.map.covers(start, len))
            .map(|r| r.map.memh());
        PinnedSend { pin, len, memh }
    }
}

// SAFETY: the memory handle is only passed to UCX under the worker's lock, and the registration
// it belongs to is kept alive by the pin, which is Send itself.
unsafe impl Send for PinnedSend {}

/// Memory an in-flight send owns.
#[derive(Debug)]
pub(super) enum SendHold {
    /// A copy in the send pool.
    Slot(PoolSlot),
    /// A registered buffer sent in place.
    Pinned(PinnedSend),
}

impl SendHold {
    /// The frame's length in bytes.
    pub(super) fn len(&self) -> usize {
        match self {
            SendHold::Slot(slot) => slot.len(),
            SendHold::Pinned(pinned) => pinned.len,
        }
    }
}

// SAFETY: a pool slot's bytes live in its slab (see PoolSlot); a pinned buffer's bytes live in
// the Arc allocation the pin shares, which `RegisteredBuffer` lets no one write while a pin
// exists (`words_mut` returns None). Moving either value moves only the handles.
unsafe impl SendMemory for SendHold {
    fn frame(&self) -> &[u8] {
        match self {
            SendHold::Slot(slot) => slot.frame(),
            SendHold::Pinned(pinned) => pinned.pin.bytes().get(..pinned.len).unwrap_or_default(),
        }
    }

    fn memh(&self) -> Option<sys::ucp_mem_h> {
        match self {
            SendHold::Slot(slot) => slot.memh(),
            SendHold::Pinned(pinned) => pinned.memh,
        }
    }
}
