//! The registered memory that [`Transport::send`](super::super::Transport::send) copies frames
//! into, so that UCX sends from memory it has already registered.
//!
//! Frames up to [`MAX_SMALL_SLOT_BYTES`] take a slot of the next power-of-two size carved from
//! a slab (one `ucp_mem_map` per slab, so registrations stay few however many small frames are
//! in flight); larger frames get a registered buffer of their own, a few of which are kept for
//! reuse. A slot is owned by one [`PoolSlot`] at a time and goes back to its free list when the
//! send completes; slabs stay mapped for the life of the pool. The transport bounds the bytes
//! in flight, which bounds the slabs: at most twice the bound (power-of-two rounding) plus one
//! slab per size class.

#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::sync::Arc;

use ftcoll_ucx_sys as sys;

use super::super::TransportError;
use super::context::{Context, MemMap};
use super::endpoint::SendMemory;

/// The smallest slot.
const MIN_SLOT_BYTES: usize = 256;
/// The largest slot carved from a slab; larger frames get buffers of their own.
pub(super) const MAX_SMALL_SLOT_BYTES: usize = 1 << 20;
/// Size classes from [`MIN_SLOT_BYTES`] to [`MAX_SMALL_SLOT_BYTES`].
const SMALL_CLASSES: usize =
    (MAX_SMALL_SLOT_BYTES.trailing_zeros() - MIN_SLOT_BYTES.trailing_zeros()) as usize + 1;
/// Slots per slab, within the bounds below.
const SLOTS_PER_SLAB: usize = 64;
const MIN_SLAB_BYTES: usize = 64 << 10;
const MAX_SLAB_BYTES: usize = 4 << 20;
/// Large buffers are sized in steps of this, so frames of similar size can reuse them.
const LARGE_STEP_BYTES: usize = 1 << 20;
/// Free large buffers kept mapped for reuse; more are unmapped when their send completes.
const MAX_CACHED_LARGE: usize = 4;

/// Registered memory divided into slots.
#[derive(Debug)]
struct Slab {
    // Declared before `memory`: unmapped before the memory is freed.
    map: MemMap,
    memory: Box<[UnsafeCell<u64>]>,
}

// SAFETY: each slot range is written only by the one PoolSlot that owns it (while UCX is not
// sending from it), and read by UCX and that PoolSlot; distinct slots never overlap, so shared
// references to the slab from several threads never touch the same bytes mutably.
unsafe impl Sync for Slab {}

impl Slab {
    fn new(context: &Arc<Context>, bytes: usize) -> Result<Arc<Slab>, TransportError> {
        let memory: Box<[UnsafeCell<u64>]> =
            (0..bytes.div_ceil(8)).map(|_| UnsafeCell::new(0)).collect();
        // SAFETY: the range is exactly `memory`, which the slab owns and frees only after
        // `map` (declared first) is dropped.
        let map = unsafe { MemMap::new(context, memory.as_ptr().cast(), memory.len() * 8)? };
        Ok(Arc::new(Slab { map, memory }))
    }

    fn bytes(&self) -> usize {
        self.memory.len() * 8
    }

    /// The first byte of the slot at `offset_bytes`.
    fn slot_ptr(&self, offset_bytes: usize) -> *mut u8 {
        debug_assert!(offset_bytes.is_multiple_of(8) && offset_bytes < self.bytes());
        UnsafeCell::raw_get(self.memory[offset_bytes / 8..].as_ptr()).cast()
    }
}

/// Which free list a slot returns to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotClass {
    Small(usize),
    Large,
}

/// A frame copied into registered memory, owned until its send completes.
#[derive(Debug)]
pub(super) struct PoolSlot {
    slab: Arc<Slab>,
    offset_bytes: usize,
    len: usize,
    class: SlotClass,
}

impl PoolSlot {
    /// The frame's length in bytes.
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

// SAFETY: the frame lives in the slab's heap memory, which the Arc keeps in place wherever the
// slot moves, and the slot's range is written only in SendPool::copy_in, before the slot exists.
unsafe impl SendMemory for PoolSlot {
    fn frame(&self) -> &[u8] {
        // SAFETY: offset + len lies inside the slab (checked when the slot was made), the bytes
        // were initialised by copy_in, and nothing writes them while this slot exists.
        unsafe { std::slice::from_raw_parts(self.slab.slot_ptr(self.offset_bytes), self.len) }
    }

    fn memh(&self) -> Option<sys::ucp_mem_h> {
        Some(self.slab.map.memh())
    }
}

/// Free slots and buffers; see the [module documentation](self).
#[derive(Debug)]
pub(super) struct SendPool {
    context: Arc<Context>,
    /// Free slots per size class: the slab and the slot's byte offset in it.
    free_small: Vec<Vec<(Arc<Slab>, usize)>>,
    free_large: Vec<Arc<Slab>>,
    /// Bytes registered by all slabs and large buffers made (for diagnostics).
    mapped_bytes: usize,
}

impl SendPool {
    /// An empty pool registering with `context`.
    pub(super) fn new(context: &Arc<Context>) -> SendPool {
        SendPool {
            context: Arc::clone(context),
            free_small: (0..SMALL_CLASSES).map(|_| Vec::new()).collect(),
            free_large: Vec::new(),
            mapped_bytes: 0,
        }
    }

    /// Bytes of memory the pool has registered.
    pub(super) fn mapped_bytes(&self) -> usize {
        self.mapped_bytes
    }

    /// Copies `frame` (not empty) into a free slot, registering more memory if none fits.
    pub(super) fn copy_in(&mut self, frame: &[u8]) -> Result<PoolSlot, TransportError> {
        let len = frame.len();
        let (slab, offset_bytes, class) = if len <= MAX_SMALL_SLOT_BYTES {
            let slot_bytes = len.next_power_of_two().max(MIN_SLOT_BYTES);
            let class = (slot_bytes.trailing_zeros() - MIN_SLOT_BYTES.trailing_zeros()) as usize;
            if self.free_small[class].is_empty() {
                self.carve(class, slot_bytes)?;
            }
            let (slab, offset) = self.free_small[class]
                .pop()
                .ok_or(TransportError::Library {
                    library: "ucx",
                    call: "ucp_mem_map",
                    why: "new slab has no slots".into(),
                })?;
            (slab, offset, SlotClass::Small(class))
        } else {
            // The smallest cached buffer that fits without wasting more than the frame's size.
            let fit = self
                .free_large
                .iter()
                .enumerate()
                .filter(|(_, slab)| slab.bytes() >= len && slab.bytes() <= 2 * len)
                .min_by_key(|(_, slab)| slab.bytes())
                .map(|(index, _)| index);
            let slab = match fit {
                Some(index) => self.free_large.swap_remove(index),
                None => {
                    let bytes = len.next_multiple_of(LARGE_STEP_BYTES);
                    self.mapped_bytes += bytes;
                    Slab::new(&self.context, bytes)?
                }
            };
            (slab, 0, SlotClass::Large)
        };
        assert!(offset_bytes + len <= slab.bytes(), "slot outside its slab");
        // SAFETY: the slot range [offset, offset + len) lies inside the slab (asserted) and
        // belongs to no other PoolSlot (it was on a free list); UCX is not sending from it, since
        // slots return to the free list only after their send completed.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slab.slot_ptr(offset_bytes), len);
        }
        Ok(PoolSlot {
            slab,
            offset_bytes,
            len,
            class,
        })
    }

    /// Returns the slot of a completed send to its free list.
    pub(super) fn give_back(&mut self, slot: PoolSlot) {
        match slot.class {
            SlotClass::Small(class) => self.free_small[class].push((slot.slab, slot.offset_bytes)),
            SlotClass::Large if self.free_large.len() < MAX_CACHED_LARGE => {
                self.free_large.push(slot.slab)
            }
            SlotClass::Large => self.mapped_bytes -= slot.slab.bytes(),
        }
    }

    /// Registers a slab for `class` and puts all its slots on the free list.
    fn carve(&mut self, class: usize, slot_bytes: usize) -> Result<(), TransportError> {
        let slab_bytes = (slot_bytes * SLOTS_PER_SLAB)
            .clamp(MIN_SLAB_BYTES, MAX_SLAB_BYTES)
            .max(slot_bytes);
        let slab = Slab::new(&self.context, slab_bytes)?;
        self.mapped_bytes += slab_bytes;
        let free = &mut self.free_small[class];
        free.extend((0..slab_bytes / slot_bytes).map(|k| (Arc::clone(&slab), k * slot_bytes)));
        Ok(())
    }
}
