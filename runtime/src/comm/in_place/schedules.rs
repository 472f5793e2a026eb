//! Which blocks each step of an allreduce over the caller's vector sends and takes: the ring's
//! and recursive halving and doubling's, the same schedules as their state machines in
//! `ftcoll_algos` ([`ring::phase_blocks`], [`RhdSchedule`]), so the frames are the same too.

use std::ops::Range;

use ftcoll_algos::rhd::RhdSchedule;
use ftcoll_algos::ring::{self, KIND_ALLGATHER, KIND_REDUCE_SCATTER};
use ftcoll_algos::{Algorithm, Rank};

/// What a rank takes at a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Take {
    /// The sender.
    pub from: Rank,
    /// Elements of the segment the block lands on.
    pub range: Range<usize>,
    /// The frame's kind.
    pub kind: u8,
    /// Whether the block is combined into the vector (or written over it).
    pub combine: bool,
}

/// One rank's schedule of an allreduce in place: every segment runs it whole.
pub(crate) trait StepSchedule {
    /// The algorithm the frames name.
    const ALGORITHM: Algorithm;

    /// The schedule of `rank` of `size`.
    fn of(rank: Rank, size: u32) -> Self;

    /// Steps of one segment.
    fn steps(&self) -> u32;

    /// What this rank sends at `step` of a segment of `len` elements: to whom, which
    /// elements, which kind.
    fn send(&self, step: u32, len: usize) -> Option<(Rank, Range<usize>, u8)>;

    /// What this rank takes at `step` of a segment of `len` elements.
    fn take(&self, step: u32, len: usize) -> Option<Take>;
}

/// The ring: N − 1 steps of reduce-scatter, N − 1 of allgather, each sending one block of N to
/// the right neighbour and taking one from the left.
pub(crate) struct RingSteps {
    rank: u32,
    size: u32,
}

impl RingSteps {
    /// The block sent or taken at `step`, and whether the step combines.
    fn block(&self, step: u32, len: usize, sending: bool) -> (Range<usize>, bool) {
        let phase = self.size - 1;
        let (combine, s) = if step < phase {
            (true, step)
        } else {
            (false, step - phase)
        };
        let (send, take) = ring::phase_blocks(self.rank, self.size, combine, s);
        let block = if sending { send } else { take };
        (ring::block_range(block, self.size, len), combine)
    }
}

impl StepSchedule for RingSteps {
    const ALGORITHM: Algorithm = Algorithm::Ring;

    fn of(rank: Rank, size: u32) -> Self {
        RingSteps {
            rank: rank.0,
            size: size.max(1),
        }
    }

    fn steps(&self) -> u32 {
        2 * (self.size - 1)
    }

    fn send(&self, step: u32, len: usize) -> Option<(Rank, Range<usize>, u8)> {
        let (range, combine) = self.block(step, len, true);
        let kind = if combine {
            KIND_REDUCE_SCATTER
        } else {
            KIND_ALLGATHER
        };
        let right = Rank((self.rank + 1) % self.size);
        (step < self.steps()).then_some((right, range, kind))
    }

    fn take(&self, step: u32, len: usize) -> Option<Take> {
        let (range, combine) = self.block(step, len, false);
        let kind = if combine {
            KIND_REDUCE_SCATTER
        } else {
            KIND_ALLGATHER
        };
        let from = Rank((self.rank + self.size - 1) % self.size);
        (step < self.steps()).then_some(Take {
            from,
            range,
            kind,
            combine,
        })
    }
}

/// Recursive halving and doubling (see `ftcoll_algos::rhd`).
pub(crate) struct RhdSteps(RhdSchedule);

impl StepSchedule for RhdSteps {
    const ALGORITHM: Algorithm = Algorithm::Rhd;

    fn of(rank: Rank, size: u32) -> Self {
        RhdSteps(RhdSchedule::of(rank.0, size))
    }

    fn steps(&self) -> u32 {
        self.0.steps()
    }

    fn send(&self, step: u32, len: usize) -> Option<(Rank, Range<usize>, u8)> {
        let (to, blocks, kind) = self.0.send(step)?;
        Some((to, self.0.elements(blocks, len), kind))
    }

    fn take(&self, step: u32, len: usize) -> Option<Take> {
        let (from, blocks, kind, combine) = self.0.take(step)?;
        Some(Take {
            from,
            range: self.0.elements(blocks, len),
            kind,
            combine,
        })
    }
}
