//! The record format inside a lane and the two sides of the lane protocol.
//!
//! A record is an 8-byte header `[len u32 | from u32]` followed by the frame, padded to 8 bytes,
//! so every frame starts 8-byte aligned and its f64 payload is read in place. A record never wraps:
//! when it does not fit before the end of the ring, a pad record (`len = PAD`) fills the rest and
//! the record starts at offset 0. The producer publishes by advancing `tail` (release); the
//! consumer reads up to `tail` (acquire) and frees space by advancing `head` (release). Records
//! beyond `tail` are never read, so a sender killed mid-write leaves nothing visible.

use std::sync::atomic::Ordering;

use super::segment::Lane;

/// Record header bytes.
pub const RECORD_HEADER_BYTES: usize = 8;
/// The `len` of a pad record.
const PAD: u32 = u32::MAX;

fn padded(len: usize) -> usize {
    len.div_ceil(8) * 8
}

/// Bytes a frame of `len` bytes occupies in a ring.
pub fn record_bytes(len: usize) -> usize {
    RECORD_HEADER_BYTES + padded(len)
}

/// Largest frame a ring of `capacity` bytes carries.
pub fn max_frame_bytes(capacity: usize) -> usize {
    // A record may need a pad of up to its own size before it when the tail sits just past the
    // middle; keeping records to half the ring means one always fits into an empty ring.
    capacity / 2 - RECORD_HEADER_BYTES
}

/// Appends one record; false if the ring has no room now. The caller holds the lane's lease.
pub fn push(lane: &Lane<'_>, from: u32, frame: &[u8]) -> bool {
    let need = record_bytes(frame.len());
    // Relaxed suffices: the lease CAS (acquire) ordered us after the previous holder's release.
    let tail = lane.tail.load(Ordering::Relaxed);
    let at = (tail % lane.capacity as u64) as usize;
    let to_end = lane.capacity - at;
    let pad = if need > to_end { to_end } else { 0 };
    // The consumer's `head` lives on its own cache line; reading it every push would pull that
    // line across cores per message. A stale view only underestimates free space, so the real
    // one is read only when the stale one says the record does not fit.
    let mut head = lane.head_seen.load(Ordering::Relaxed);
    if tail.wrapping_sub(head) as usize + pad + need > lane.capacity {
        head = lane.head.load(Ordering::Acquire);
        lane.head_seen.store(head, Ordering::Relaxed);
        if tail.wrapping_sub(head) as usize + pad + need > lane.capacity {
            return false;
        }
    }
    let mut start = at;
    if pad > 0 {
        lane.write(at, &header(PAD, from));
        start = 0;
    }
    lane.write(start, &header(frame.len() as u32, from));
    lane.write(start + RECORD_HEADER_BYTES, frame);
    lane.tail
        .store(tail + (pad + need) as u64, Ordering::Release);
    true
}

fn header(len: u32, from: u32) -> [u8; 8] {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&len.to_le_bytes());
    bytes[4..].copy_from_slice(&from.to_le_bytes());
    bytes
}

/// What draining a lane found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Frames handed to the handler.
    pub frames: usize,
    /// The lane held a record that cannot be valid (corrupted shared memory); it was skipped to
    /// the tail.
    pub corrupt: bool,
}

/// Hands up to `max` published records of the lane to `handler`, in place, and frees them.
pub fn drain(lane: &Lane<'_>, max: usize, handler: &mut dyn FnMut(u32, &[u8])) -> Drained {
    let tail = lane.tail.load(Ordering::Acquire);
    let mut head = lane.head.load(Ordering::Relaxed);
    let mut drained = Drained::default();
    while head < tail && drained.frames < max {
        let at = (head % lane.capacity as u64) as usize;
        let raw = lane.read(at, RECORD_HEADER_BYTES);
        let len = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
        let from = u32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]);
        let skip = if len == PAD {
            lane.capacity - at
        } else {
            let need = record_bytes(len as usize);
            if need > lane.capacity - at || head + need as u64 > tail {
                // A length that cannot be right: never trust it, drop what is published.
                drained.corrupt = true;
                head = tail;
                break;
            }
            handler(from, lane.read(at + RECORD_HEADER_BYTES, len as usize));
            drained.frames += 1;
            need
        };
        head += skip as u64;
        // Publish progress per record so a blocked producer sees room as early as possible.
        lane.head.store(head, Ordering::Release);
    }
    lane.head.store(head, Ordering::Release);
    drained
}

/// Whether the lane holds unconsumed records.
pub fn has_records(lane: &Lane<'_>) -> bool {
    lane.tail.load(Ordering::Acquire) != lane.head.load(Ordering::Relaxed)
}
