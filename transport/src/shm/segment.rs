//! The shared-memory segment: one memfd mapped by every rank of a node, holding every rank's
//! inbox.
//!
//! # Layout
//! ```text
//! [segment header, 64 B] [inbox 0] [inbox 1] ... [inbox N-1]
//! inbox  = [doorbell u32 | sleeping u32 | active lanes u64 | pad to 64 B] [lane 0] ... [lane L-1]
//! lane   = [owner u32, own cache line] [tail u64, head_seen u64: the producers' line]
//!          [head u64, the consumer's line] [ring bytes]
//! ```
//! Counters sit on separate cache lines so producers (tail, owner) and the consumer (head) do not
//! false-share. The segment lives in a memfd that children inherit: there is no file under
//! /dev/shm to leak when the launcher is killed, and the memory is freed when the last process
//! holding it exits.

#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::MmapRaw;

use crate::TransportError;

const SEGMENT_MAGIC: u64 = 0x6674_636f_6c6c_7368;
const SEGMENT_VERSION: u32 = 1;
/// Header word 4 when senders may publish with plain stores.
const PUBLISH_PLAIN: u64 = 0x0070_6c61_696e;
const LINE: usize = 64;
const SEGMENT_HEADER_BYTES: usize = LINE;
const INBOX_HEADER_BYTES: usize = LINE;
const LANE_HEADER_BYTES: usize = 3 * LINE;

/// The geometry of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Ranks with an inbox.
    pub ranks: u32,
    /// Lanes per inbox: how many senders can write to one receiver at the same moment.
    pub lanes: u32,
    /// Ring bytes per lane (a power of two, at least 256): the largest frame is a little less
    /// than half.
    pub lane_bytes: u32,
}

impl Geometry {
    fn lane_stride(&self) -> usize {
        LANE_HEADER_BYTES + self.lane_bytes as usize
    }

    fn inbox_stride(&self) -> usize {
        INBOX_HEADER_BYTES + self.lanes as usize * self.lane_stride()
    }

    /// Total bytes of the segment.
    pub fn total_bytes(&self) -> usize {
        SEGMENT_HEADER_BYTES + self.ranks as usize * self.inbox_stride()
    }

    fn validate(&self) -> Result<(), TransportError> {
        if self.ranks == 0 || self.lanes == 0 || self.lanes > 64 {
            return Err(TransportError::Segment(format!(
                "bad geometry: {} ranks, {} lanes per inbox (1..=64)",
                self.ranks, self.lanes
            )));
        }
        // A power of two turns every ring position into a mask, not a division: the receive
        // path computes one per poll.
        if self.lane_bytes < 256 || !self.lane_bytes.is_power_of_two() {
            return Err(TransportError::Segment(format!(
                "lane size {} must be a power of two and at least 256 bytes",
                self.lane_bytes
            )));
        }
        Ok(())
    }
}

/// A mapped segment.
#[derive(Debug)]
pub struct Segment {
    map: MmapRaw,
    geometry: Geometry,
    /// Keeps the memfd open for children to inherit (launcher side) or for the mapping's life.
    fd: OwnedFd,
}

// The mapping is shared memory accessed only through atomics and through byte ranges the lane
// protocol hands to exactly one writer or reader at a time.
// SAFETY: MmapRaw is a raw pointer plus length; every access goes through the methods below,
// whose callers uphold the lane protocol's exclusivity.
unsafe impl Send for Segment {}
// SAFETY: as above; concurrent access from threads is the same as from processes.
unsafe impl Sync for Segment {}

/// Segments up to this size are mapped with every page faulted in at once.
const PREFAULT_MAX_BYTES: usize = 16 << 20;

/// Maps the segment file. A small segment is faulted in whole (`MAP_POPULATE`): otherwise the
/// first lap of every ring takes a page fault in the sender and one in the receiver every 64
/// records, a few microseconds each, which were most of the 99th percentile of short runs. A
/// larger one faults in as used: every rank mapping all of it costs more than the faults it
/// saves (at 64 ranks, 34 MB each doubled the wire-up time, 62 to 125 ms).
fn map_segment(file: &File, len: usize) -> Result<MmapRaw, TransportError> {
    let mut options = memmap2::MmapOptions::new();
    if len <= PREFAULT_MAX_BYTES {
        options.populate();
    }
    options
        .map_raw(file)
        .map_err(|e| TransportError::io("mapping the shared-memory segment", e))
}

impl Segment {
    /// Creates a segment in a new memfd that child processes inherit (no close-on-exec).
    pub fn create(geometry: Geometry, job_id: u64) -> Result<Segment, TransportError> {
        geometry.validate()?;
        let fd = rustix::fs::memfd_create("ftcoll-shm", rustix::fs::MemfdFlags::empty())
            .map_err(|e| TransportError::io("memfd_create", e.into()))?;
        let file = File::from(fd);
        file.set_len(geometry.total_bytes() as u64)
            .map_err(|e| TransportError::io("sizing the shared-memory segment", e))?;
        let map = map_segment(&file, geometry.total_bytes())?;
        let segment = Segment {
            map,
            geometry,
            fd: OwnedFd::from(file),
        };
        let header = segment.map.as_mut_ptr().cast::<u64>();
        // SAFETY: the mapping is at least 64 bytes, page-aligned, and nobody else maps it yet.
        unsafe {
            header.write(SEGMENT_MAGIC);
            header
                .add(1)
                .write(u64::from(SEGMENT_VERSION) | u64::from(geometry.ranks) << 32);
            header
                .add(2)
                .write(u64::from(geometry.lanes) | u64::from(geometry.lane_bytes) << 32);
            header.add(3).write(job_id);
        }
        Ok(segment)
    }

    /// Maps an inherited segment and checks that it is the one of this job.
    ///
    /// `fd` must be the inherited memfd's descriptor number; it is adopted (closed with the
    /// segment).
    pub fn open_inherited(fd: RawFd, job_id: u64) -> Result<Segment, TransportError> {
        if fd < 0 {
            return Err(TransportError::Segment(format!("bad descriptor {fd}")));
        }
        // The descriptor must be open before we adopt it: adopting a number that is not ours
        // would close someone else's file on drop.
        rustix::io::fcntl_getfd(
            // SAFETY: borrowed only for this call; validity is what the call checks.
            unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
        )
        .map_err(|_| {
            TransportError::Segment(format!(
                "descriptor {fd} is not open; was this rank started by the ftcoll launcher?"
            ))
        })?;
        // SAFETY: the descriptor is open and was handed to this process for exactly this use.
        let file = unsafe { File::from_raw_fd(fd) };
        let len = file
            .metadata()
            .map_err(|e| TransportError::io("reading the segment size", e))?
            .len() as usize;
        if len < SEGMENT_HEADER_BYTES {
            return Err(TransportError::Segment(format!(
                "segment of {len} bytes is too small"
            )));
        }
        let map = map_segment(&file, len)?;
        let header = map.as_ptr().cast::<u64>();
        // SAFETY: at least 64 mapped bytes, page-aligned; the creator wrote the header before
        // starting any rank.
        let words = unsafe {
            [
                header.read(),
                header.add(1).read(),
                header.add(2).read(),
                header.add(3).read(),
            ]
        };
        if words[0] != SEGMENT_MAGIC || words[1] as u32 != SEGMENT_VERSION {
            return Err(TransportError::Segment(
                "not an ftcoll segment of this version".into(),
            ));
        }
        if words[3] != job_id {
            return Err(TransportError::Segment(format!(
                "segment belongs to job {:x}, not {job_id:x}",
                words[3]
            )));
        }
        let geometry = Geometry {
            ranks: (words[1] >> 32) as u32,
            lanes: words[2] as u32,
            lane_bytes: (words[2] >> 32) as u32,
        };
        geometry.validate()?;
        if geometry.total_bytes() != len {
            return Err(TransportError::Segment(format!(
                "segment is {len} bytes, its header describes {}",
                geometry.total_bytes()
            )));
        }
        Ok(Segment {
            map,
            geometry,
            fd: OwnedFd::from(file),
        })
    }

    /// The descriptor children inherit.
    pub fn raw_fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// The segment's descriptor.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The job-wide publishing mode (header word 4; a new segment is zeroed, so `false` until
    /// the creator says otherwise): whether senders may publish records with plain stores,
    /// leaving the doorbell's ordering to sleeping receivers (see `ring::Publish`). Every rank
    /// must agree, so the creator decides once, before starting any rank.
    pub fn plain_publish(&self) -> bool {
        self.publish_word().load(Ordering::Acquire) == PUBLISH_PLAIN
    }

    /// Sets the job-wide publishing mode; only the creator calls it, before starting ranks.
    pub fn set_plain_publish(&self, plain: bool) {
        let word = if plain { PUBLISH_PLAIN } else { 0 };
        self.publish_word().store(word, Ordering::Release);
    }

    fn publish_word(&self) -> &AtomicU64 {
        // SAFETY: word 4 of the 64-byte header is 8-aligned, inside the mapping, and only ever
        // accessed atomically.
        unsafe { &*self.map.as_ptr().cast::<u64>().add(4).cast::<AtomicU64>() }
    }

    fn inbox_offset(&self, rank: u32) -> usize {
        debug_assert!(rank < self.geometry.ranks);
        SEGMENT_HEADER_BYTES + rank as usize * self.geometry.inbox_stride()
    }

    fn lane_offset(&self, rank: u32, lane: u32) -> usize {
        debug_assert!(lane < self.geometry.lanes);
        self.inbox_offset(rank) + INBOX_HEADER_BYTES + lane as usize * self.geometry.lane_stride()
    }

    fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset.is_multiple_of(4) && offset + 4 <= self.map.len(),
            "segment offset out of range"
        );
        // SAFETY: in bounds and aligned (checked); AtomicU32 has u32's layout; the mapping lives
        // as long as &self; all access to this word is atomic.
        unsafe { &*self.map.as_mut_ptr().add(offset).cast::<AtomicU32>() }
    }

    fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        assert!(
            offset.is_multiple_of(8) && offset + 8 <= self.map.len(),
            "segment offset out of range"
        );
        // SAFETY: as in `atomic_u32`.
        unsafe { &*self.map.as_mut_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// The doorbell of `rank`'s inbox: bumped after every publish, futex-waited on.
    pub fn doorbell(&self, rank: u32) -> &AtomicU32 {
        self.atomic_u32(self.inbox_offset(rank))
    }

    /// Set by `rank` while it sleeps on its doorbell, so senders know to wake it.
    pub fn sleeping(&self, rank: u32) -> &AtomicU32 {
        self.atomic_u32(self.inbox_offset(rank) + 4)
    }

    /// Bit `l` is set once any sender has used lane `l` of `rank`'s inbox, so the receiver
    /// scans only lanes that ever carried data.
    pub fn active_lanes(&self, rank: u32) -> &AtomicU64 {
        self.atomic_u64(self.inbox_offset(rank) + 8)
    }

    /// The lane `lane` of `rank`'s inbox.
    pub fn lane(&self, rank: u32, lane: u32) -> Lane<'_> {
        let base = self.lane_offset(rank, lane);
        let capacity = self.geometry.lane_bytes as usize;
        // One check covers the header words and the ring; offsets are multiples of 64.
        assert!(
            rank < self.geometry.ranks
                && lane < self.geometry.lanes
                && base + LANE_HEADER_BYTES + capacity <= self.map.len(),
            "lane out of range"
        );
        let word = |offset: usize| self.map.as_mut_ptr().wrapping_add(base + offset);
        // SAFETY: the whole lane lies inside the mapping (checked above) and every header word
        // is aligned (the lane starts on a 64-byte boundary); atomics have their integer's
        // layout; the mapping lives as long as &self.
        let (owner, tail, head_seen, head) = unsafe {
            (
                &*word(0).cast::<AtomicU32>(),
                &*word(LINE).cast::<AtomicU64>(),
                &*word(LINE + 8).cast::<AtomicU64>(),
                &*word(2 * LINE).cast::<AtomicU64>(),
            )
        };
        Lane {
            owner,
            tail,
            head_seen,
            head,
            segment: self,
            ring_offset: base + LANE_HEADER_BYTES,
            capacity,
        }
    }
}

/// One lane of an inbox: a single-producer, single-consumer byte ring whose producer is whoever
/// holds the `owner` lease.
#[derive(Clone, Copy, Debug)]
pub struct Lane<'a> {
    /// 0 when free, else the leasing rank + 1.
    pub owner: &'a AtomicU32,
    /// Bytes ever published (written only by the lease holder).
    pub tail: &'a AtomicU64,
    /// The last `head` a producer read, kept on the producers' cache line so that a push reads
    /// the consumer's line only when the ring looks full.
    pub head_seen: &'a AtomicU64,
    /// Bytes ever consumed (written only by the inbox's rank).
    pub head: &'a AtomicU64,
    segment: &'a Segment,
    ring_offset: usize,
    /// Ring bytes (a power of two).
    pub capacity: usize,
}

impl<'a> Lane<'a> {
    /// The ring offset of `position` (a count of bytes ever produced or consumed).
    pub fn offset(&self, position: u64) -> usize {
        (position & (self.capacity as u64 - 1)) as usize
    }

    /// The record header word at ring offset `at` (a multiple of 64).
    pub fn header(&self, at: usize) -> &'a AtomicU64 {
        assert!(
            at.is_multiple_of(64) && at + 8 <= self.capacity,
            "ring header out of bounds"
        );
        // SAFETY: in bounds and 8-byte aligned (the ring starts on a 64-byte line and `at` is a
        // multiple of 64); AtomicU64 has u64's layout; header words are only accessed
        // atomically; the mapping outlives 'a.
        unsafe {
            &*self
                .segment
                .map
                .as_mut_ptr()
                .add(self.ring_offset + at)
                .cast::<AtomicU64>()
        }
    }

    /// Copies `bytes` into the ring at `at` (which must be a range the caller exclusively owns
    /// by the lane protocol: unpublished space while holding the lease).
    pub fn write(&self, at: usize, bytes: &[u8]) {
        assert!(
            at + bytes.len() <= self.capacity,
            "ring write out of bounds"
        );
        // SAFETY: in bounds of the ring (checked); the range is unpublished space that only the
        // lease holder writes, and no reference to it exists in this process.
        unsafe {
            let dst = self.segment.map.as_mut_ptr().add(self.ring_offset + at);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
        }
    }

    /// Borrows `len` ring bytes at `at` (a published, not yet consumed range: the producer does
    /// not touch it until `head` passes it).
    pub fn read(&self, at: usize, len: usize) -> &'a [u8] {
        assert!(at + len <= self.capacity, "ring read out of bounds");
        // SAFETY: in bounds (checked); the range is published and unconsumed, so no process
        // writes it while the borrow lives (the consumer advances `head` only after use).
        unsafe {
            std::slice::from_raw_parts(self.segment.map.as_ptr().add(self.ring_offset + at), len)
        }
    }
}
