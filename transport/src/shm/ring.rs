//! The record format inside a lane and the two sides of the lane protocol.
//!
//! A record starts on a 64-byte line: an 8-byte header word `[len u32 | from u31 | ready u1]`,
//! then the frame (so the frame's payload is 8-byte aligned and read in place), padded to whole
//! lines. A record never wraps: when it does not fit before the end of the ring, a pad record
//! fills the rest and the record starts at offset 0.
//!
//! Small records wrap early: past the first [`HOT_BYTES`] of the ring, a small record goes
//! back to offset 0 behind a pad whenever the consumer is close behind and has read far enough
//! for it to fit there. Lanes are sized for large frames (up to 2 MiB), and a stream of small
//! messages walking the whole ring meets a line no cache holds and a page no TLB maps at every
//! message: on the development VM an 8-byte allreduce of two ranks took 0.9 µs (p99 23 µs)
//! through 2 MiB lanes against 0.56 µs through 64 KiB ones. Kept in the first 64 KiB, those
//! lines stay cached.
//!
//! The producer writes the frame, then publishes the header word with its ready bit (release);
//! the consumer polls the header word at its `head` (acquire). A small frame and its header share
//! one cache line, so a message costs that one line crossing cores, as an MPI "fast box" does.
//! The consumer zeroes the first word of every line it consumes, so stale bytes of an old lap can
//! never look like a ready header; `tail` is the producers' own bookkeeping.
//!
//! A producer killed mid-write never set the ready bit, so nothing of its record is read. When the
//! receiver learns of the death it repairs the lane ([`reclaim_after_published`]): published records
//! stay, the tail moves just past them, every free line is cleared, so the next producer starts
//! clean.

use std::sync::atomic::{AtomicU64, Ordering};

use super::segment::Lane;

/// Record header bytes.
pub const RECORD_HEADER_BYTES: usize = 8;
/// Records start on cache lines.
const LINE: usize = 64;
/// The `len` of a pad record.
const PAD: u32 = u32::MAX;
/// The part of a ring small records keep to while the consumer keeps up (see the module docs).
pub const HOT_BYTES: usize = 64 << 10;
const READY: u64 = 1 << 63;

/// Bytes a frame of `len` bytes occupies in a ring.
pub fn record_bytes(len: usize) -> usize {
    (RECORD_HEADER_BYTES + len).div_ceil(LINE) * LINE
}

/// Largest frame a ring of `capacity` bytes carries.
pub fn max_frame_bytes(capacity: usize) -> usize {
    // A record may need a pad of up to its own size before it; keeping records to half the
    // ring means one always fits into an empty ring.
    capacity / 2 - RECORD_HEADER_BYTES
}

fn header_word(len: u32, from: u32) -> u64 {
    READY | u64::from(from & 0x7FFF_FFFF) << 32 | u64::from(len)
}

/// How a producer makes a record visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// A SeqCst swap: the publish is also the producer's side of the doorbell handshake (see
    /// `push`). Costs a locked instruction per record.
    Fenced,
    /// A release store: the consumer issues a barrier on every registered producer
    /// (`membarrier`) before it decides to sleep, which orders their publishes for them.
    Plain,
}

/// Appends one record; false if the ring has no room now. The caller holds the lane's lease.
pub fn push(lane: &Lane<'_>, from: u32, frame: &[u8], publish: Publish) -> bool {
    let need = record_bytes(frame.len());
    // Relaxed suffices: the lease CAS (acquire) ordered us after the previous holder's release.
    let tail = lane.tail.load(Ordering::Relaxed);
    let at = lane.offset(tail);
    let to_end = lane.capacity - at;
    let early_wrap =
        at > 0 && at <= HOT_BYTES && at + need > HOT_BYTES && need <= HOT_BYTES / 2 && {
            let unread = tail.wrapping_sub(lane.head.load(Ordering::Acquire)) as usize;
            unread <= HOT_BYTES / 4 && unread + need <= at
        };
    // An early wrap is the first small record to cross the hot part, when the consumer is at
    // most a quarter of the hot part behind and has read the ring's start of this lap far
    // enough for the record to fit there (one look at `head` per lap): it goes back to the
    // ring's start. The ring's room is then short of the pad only until the consumer, close
    // behind, passes it; a consumer further behind keeps the whole ring and the stream goes
    // on round it. Waiting for a consumer that has read everything sent a stream of pipelined
    // blocks (the ring allreduce's 4 KiB blocks at n = 2) round the whole 2 MiB lane at most
    // crossings, a page fault every 4 KiB on the first lap: a job's first few hundred
    // operations of 8 KiB took 2 to 3 times as long.
    let pad = if need > to_end || early_wrap {
        to_end
    } else {
        0
    };
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
    let start = if pad > 0 { 0 } else { at };
    lane.write(start + RECORD_HEADER_BYTES, frame);
    let record = header_word(frame.len() as u32, from);
    // The store that makes the record visible must be ordered before the sender's later read
    // of the receiver's `sleeping` flag (the doorbell's Dekker handshake: the receiver stores
    // `sleeping`, then loads this header). A plain release store could pass that read, and a
    // receiver falling asleep at that moment would miss the record, unless the receiver forces
    // the ordering itself with a membarrier before it sleeps (`Publish::Plain`).
    let (visible, word) = if pad > 0 {
        // The consumer meets the pad first: publishing it publishes the record behind it.
        lane.header(start).store(record, Ordering::Release);
        (lane.header(at), header_word(PAD, from))
    } else {
        (lane.header(start), record)
    };
    match publish {
        Publish::Fenced => {
            visible.swap(word, Ordering::SeqCst);
        }
        Publish::Plain => visible.store(word, Ordering::Release),
    }
    lane.tail
        .store(tail + (pad + need) as u64, Ordering::Release);
    true
}

/// What draining a lane found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Frames handed to the handler.
    pub frames: usize,
    /// The lane held a header that cannot be valid (corrupted shared memory); the lane was
    /// reset.
    pub corrupt: bool,
}

/// Zeroes the first word of every line in `[from, from + len)` (ring offsets, line-aligned).
fn clear_lines(lane: &Lane<'_>, from: usize, len: usize) {
    for line in (from..from + len).step_by(LINE) {
        lane.header(line).store(0, Ordering::Relaxed);
    }
}

/// Hands up to `max` published records of the lane to `handler`, in place, and frees them.
pub fn drain(lane: &Lane<'_>, max: usize, handler: &mut dyn FnMut(u32, &[u8])) -> Drained {
    let mut head = lane.head.load(Ordering::Relaxed);
    let mut drained = Drained::default();
    // Each pass consumes one record or ends; `max` bounds the frames, the ring bounds the pads.
    while drained.frames < max {
        let at = lane.offset(head);
        let word: &AtomicU64 = lane.header(at);
        let header = word.load(Ordering::Acquire);
        if header & READY == 0 {
            break;
        }
        let len = header as u32;
        let from = (header >> 32) as u32 & 0x7FFF_FFFF;
        let (size, written) = if len == PAD {
            // A pad writes its header line only; the lines behind it are still clear from
            // the lap before (clearing them again would cost a store per line of the ring at
            // every early wrap).
            (lane.capacity - at, LINE)
        } else {
            let size = record_bytes(len as usize);
            if size > lane.capacity - at {
                // A length that cannot be right: never trust it.
                drained.corrupt = true;
                reset(lane);
                return drained;
            }
            handler(from, lane.read(at + RECORD_HEADER_BYTES, len as usize));
            drained.frames += 1;
            (size, size)
        };
        // Clear before freeing: once `head` passes, a producer may write here again.
        clear_lines(lane, at, written);
        head += size as u64;
        lane.head.store(head, Ordering::Release);
    }
    drained
}

/// Whether the lane holds a published record at its head.
pub fn has_records(lane: &Lane<'_>) -> bool {
    let head = lane.head.load(Ordering::Relaxed);
    let at = lane.offset(head);
    // SeqCst: the receiver's side of the doorbell handshake (see `push`); as cheap as acquire
    // on x86.
    lane.header(at).load(Ordering::SeqCst) & READY != 0
}

/// Makes a lane whose lease holder died usable again. The records it published stay for the
/// consumer to read; the tail is set just past them (the dead producer may have published without
/// advancing it, or begun a record it never published), every line of the free space is cleared
/// so half-written bytes never look ready, and the lease is released. Only the consumer calls
/// this, after the lease holder is known dead, so nobody writes the lane meanwhile.
pub fn reclaim_after_published(lane: &Lane<'_>) {
    let capacity = lane.capacity as u64;
    let head = lane.head.load(Ordering::Relaxed);
    let mut end = head;
    // Walks at most one ring of records.
    while end - head < capacity {
        let at = lane.offset(end);
        let header = lane.header(at).load(Ordering::Acquire);
        if header & READY == 0 {
            break;
        }
        let len = header as u32;
        let size = if len == PAD {
            lane.capacity - at
        } else {
            record_bytes(len as usize)
        };
        if size > lane.capacity - at {
            break;
        }
        end += size as u64;
    }
    let mut free = end;
    while free < head + capacity {
        lane.header(lane.offset(free)).store(0, Ordering::Relaxed);
        free += LINE as u64;
    }
    lane.tail.store(end, Ordering::Relaxed);
    lane.head_seen.store(head, Ordering::Relaxed);
    lane.owner.store(0, Ordering::Release);
}

/// Empties a lane whose contents cannot be trusted (the consumer's side only: producers keep
/// writing at their tail, which the consumer skips to).
fn reset(lane: &Lane<'_>) {
    let tail = lane.tail.load(Ordering::Acquire);
    clear_lines(lane, 0, lane.capacity);
    lane.head.store(tail, Ordering::Release);
}
