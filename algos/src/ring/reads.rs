//! The ring allreduce by remote reads: the schedule of a single-copy data path.
//!
//! Where ranks can read each other's memory (one node, `process_vm_readv`), a rank need not
//! send its blocks at all: it says which step of the ring its vector is ready for, and its right
//! neighbour reads the block straight out of the user's vector and combines it into its own.
//! A byte then crosses memory once, against twice through a shared-memory lane (written by the
//! sender, read by the receiver) and once more for the outbox's encoding.
//!
//! The steps and blocks are those of [`super::RingAllreduce`]: reduce-scatter step s combines
//! block r − s − 2 of the left neighbour into block r − s − 2 here, allgather step s copies
//! block r − s − 1. What the single copy adds is that a block must not change while a peer
//! reads it, and the user's vector must not be handed back while a peer may still read it.
//! Two notices suffice:
//! - **Ready(k)** to the right neighbour: "I have finished k steps", so the block the right
//!   neighbour reads at its step k is final here. Sent at the start (k = 0) and after each
//!   step but the last.
//! - **Released** to the left neighbour after this rank's last read: the left neighbour may
//!   return (its vector is no longer read).
//!
//! Why nothing else is needed: a rank overwrites a block in its allgather only once that
//! block's reduction has gone all the way around the ring, which includes the right
//! neighbour's read of it (the reduction of block b reads at ranks b + 2, …, b + N in turn, and
//! the allgather brings it to rank r after rank b finished it); and in its reduce-scatter a
//! rank writes a block only one step before the right neighbour reads it, after the Ready that
//! says so. The property test below checks both on every interleaving it draws.
//!
//! This is a schedule, not a protocol: it holds no data and performs no reads. The runtime's
//! single-copy ring feeds it notices and completed reads and does what it asks.

use std::ops::Range;

use crate::rank::Rank;

/// Vectors from this many bytes on take the single-copy ring where ranks can read each
/// other's memory; below, blocks travel through the shared segment. Copying a block through a
/// lane costs two passes from cache, while a cross-memory read pays per page it pins (about
/// 0.3 µs per 4 KiB page): the single copy wins once the vectors outgrow the caches, and where
/// that happens depends on the machine. `bench allreduce`, both paths in turn:
/// - a 2-core VM with 20-21 GB/s of `memcpy`: at 256 KiB the copying ring took 17-18 µs at
///   n = 2 against 24-25 (75 against 101-114 at n = 4), the two were even at 1 MiB, and from
///   2 MiB on the single copy was ahead (4 MiB at n = 2: 342-345 µs against 910-917);
/// - a 2-core VM with 11.7 GB/s: the single copy was ahead from 256 KiB on (n = 2: 43 µs
///   against 56; 1 MiB: 159 against 315; n = 4, 1 MiB: 722 against 1,219).
///
/// 1 MiB loses nothing on the first and halves the time on the second; below it, the first
/// machine's caches favour the lanes. `FTCOLL_SINGLE_COPY_MIN_BYTES` sets it per job.
pub const SINGLE_COPY_MIN_BYTES: usize = 1 << 20;

/// Message kind of a Ready notice (the ring's own frames are kinds 1 and 2): the step count in
/// the header, the sender's region in the payload.
pub const KIND_READY: u8 = 3;
/// Message kind of a Released notice.
pub const KIND_RELEASED: u8 = 4;
/// Message kind of a rank's notice that it gave up the operation (a refused or corrupt read):
/// its peers end with the same error instead of waiting.
pub const KIND_ABANDONED: u8 = 5;

/// What the rank must do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadAction {
    /// Tell the right neighbour that `done` steps are finished here.
    Ready {
        /// The right neighbour.
        to: Rank,
        /// Steps finished.
        done: u32,
    },
    /// Read elements `block` of the left neighbour's vector into the same elements here,
    /// combining (reduce-scatter) or copying (allgather); then call
    /// [`ReadRing::read_done`].
    Read {
        /// The left neighbour.
        from: Rank,
        /// The elements, the same at both ranks.
        block: Range<usize>,
        /// Combine with the operator rather than overwrite.
        combine: bool,
    },
    /// Tell the left neighbour that this rank reads its vector no more.
    Release {
        /// The left neighbour.
        to: Rank,
    },
}

/// Where one rank is in the single-copy ring allreduce.
#[derive(Clone, Debug)]
pub struct ReadRing {
    rank: u32,
    size: u32,
    len: usize,
    /// Steps this rank has finished (0 ..= 2N − 2).
    done: u32,
    /// Whether a read is outstanding (asked and not yet reported done).
    reading: bool,
    /// Steps the left neighbour has said it finished; `None` before its first Ready.
    left_done: Option<u32>,
    /// Whether the right neighbour has released this rank's vector.
    released: bool,
    /// Whether the first Ready (done = 0) has been asked for.
    started: bool,
    /// The largest `done` a Ready was asked for.
    ready_sent: u32,
    /// Whether the Release has been asked for.
    release_sent: bool,
    /// Abandoned: nothing more to do.
    stopped: bool,
}

impl ReadRing {
    /// Rank `rank` of `size`, over a vector of `len` elements.
    pub fn new(rank: Rank, size: u32, len: usize) -> ReadRing {
        ReadRing {
            rank: rank.0,
            size: size.max(1),
            len,
            done: 0,
            reading: false,
            left_done: None,
            released: false,
            started: false,
            ready_sent: 0,
            release_sent: false,
            stopped: false,
        }
    }

    /// Steps in all: N − 1 of reduce-scatter and N − 1 of allgather.
    pub fn steps(&self) -> u32 {
        2 * (self.size - 1)
    }

    fn left(&self) -> Rank {
        Rank((self.rank + self.size - 1) % self.size)
    }

    fn right(&self) -> Rank {
        Rank((self.rank + 1) % self.size)
    }

    /// Elements of block `b` (mod N): the ring's blocks, as [`super::RingAllreduce`] cuts them.
    pub fn block(&self, b: u32) -> Range<usize> {
        let (n, b) = (self.size as usize, (b % self.size) as usize);
        (b * self.len / n)..((b + 1) * self.len / n)
    }

    /// The block this rank reads at `step`, and whether it combines it.
    pub fn read_of(&self, step: u32) -> (Range<usize>, bool) {
        let (n, r) = (self.size, self.rank);
        let back = |k: u32| (r + 2 * n - k % n) % n;
        if step < n - 1 {
            (self.block(back(step + 2)), true)
        } else {
            (self.block(back(step - (n - 1) + 1)), false)
        }
    }

    /// The left neighbour has finished `done` steps (notices may come out of order: the
    /// largest counts).
    pub fn on_ready(&mut self, done: u32) {
        self.left_done = Some(self.left_done.map_or(done, |d| d.max(done)));
    }

    /// The right neighbour reads this rank's vector no more.
    pub fn on_released(&mut self) {
        self.released = true;
    }

    /// The read asked by the last [`ReadAction::Read`] is complete.
    pub fn read_done(&mut self) {
        if self.reading {
            self.reading = false;
            self.done += 1;
        }
    }

    /// The next thing to do, or `None` while waiting for a notice, a read, or at the end.
    pub fn next_action(&mut self) -> Option<ReadAction> {
        if self.size == 1 || self.stopped {
            return None;
        }
        if !self.started {
            self.started = true;
            return Some(ReadAction::Ready {
                to: self.right(),
                done: 0,
            });
        }
        if self.reading {
            return None;
        }
        // The right neighbour's last step needs `steps − 1` finished here.
        if self.ready_sent < self.done && self.done < self.steps() {
            self.ready_sent = self.done;
            return Some(ReadAction::Ready {
                to: self.right(),
                done: self.done,
            });
        }
        if self.done == self.steps() {
            if !self.release_sent {
                self.release_sent = true;
                return Some(ReadAction::Release { to: self.left() });
            }
            return None;
        }
        if self.left_done.is_some_and(|d| d >= self.done) {
            let (block, combine) = self.read_of(self.done);
            self.reading = true;
            return Some(ReadAction::Read {
                from: self.left(),
                block,
                combine,
            });
        }
        None
    }

    /// The operation is abandoned here (a failure, a mismatch): no more reads. Returns the
    /// left neighbour if it is still owed a Release, which the driver sends so that the left
    /// neighbour need not wait for it. A rank that abandons gives its vector back at once: its
    /// reader may have stopped already and never release it. The driver must then keep the
    /// reader from counting a block read after that (the runtime's lent word).
    pub fn stop(&mut self) -> Option<Rank> {
        self.stopped = true;
        self.reading = false;
        if self.size == 1 || self.release_sent {
            return None;
        }
        self.release_sent = true;
        Some(self.left())
    }

    /// Whether the right neighbour has released this rank's vector.
    pub fn released(&self) -> bool {
        self.released || self.size == 1
    }

    /// Whether every step is done and the right neighbour has released this rank's vector:
    /// the vector may go back to the caller.
    pub fn finished(&self) -> bool {
        self.size == 1 || (self.done == self.steps() && self.release_sent && self.released)
    }

    /// Steps finished here.
    pub fn done(&self) -> u32 {
        self.done
    }
}

#[cfg(test)]
mod tests;
