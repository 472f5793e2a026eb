//! Which blocks each step of an allreduce over the caller's vector sends and takes: the
//! ring's, recursive halving and doubling's and recursive doubling's, the same schedules as
//! their state machines in `ftcoll_algos` ([`ring::phase_blocks`], [`RhdSchedule`], the
//! exact `RecursiveDoubling`), so the frames carry the same steps and kinds too (recursive
//! doubling's header `aux`, its contribution count for the approximate variant, stays 0).

use std::ops::Range;

use ftcoll_algos::protocol::Detail;
use ftcoll_algos::rdb::RdbKind;
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

    /// What the console shows of a rank whose segments are at `step` on average.
    fn detail(&self, step: u32) -> Detail {
        Detail::Ring {
            steps_done: step,
            steps_total: self.steps(),
        }
    }
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

/// Recursive doubling (000 Alg. 1): log2 p exchanges of the whole segment with the rank whose
/// number differs in one bit, the ranks beyond the largest power of two p folded into a
/// neighbour first and sent the result last (see `ftcoll_algos::rdb`).
pub(crate) struct RdbSteps {
    /// The neighbour this rank folds into (an even rank below 2(N − p)), or folds in.
    fold: Option<(Rank, bool)>,
    /// Its number in the power-of-two schedule, if it takes part.
    vrank: Option<u32>,
    levels: u32,
    extras: u32,
}

impl RdbSteps {
    fn real(&self, vrank: u32) -> Rank {
        if vrank < self.extras {
            Rank(2 * vrank + 1)
        } else {
            Rank(vrank + self.extras)
        }
    }

    /// The exchange partner at `step` (1 ..= log2 p), if this rank exchanges.
    fn partner(&self, step: u32) -> Option<Rank> {
        let vrank = self.vrank?;
        (1..=self.levels)
            .contains(&step)
            .then(|| self.real(vrank ^ (1 << (step - 1))))
    }
}

impl StepSchedule for RdbSteps {
    const ALGORITHM: Algorithm = Algorithm::Rdb;

    fn of(rank: Rank, size: u32) -> Self {
        let size = size.max(1);
        let pow2 = 1u32 << (31 - size.leading_zeros());
        let extras = size - pow2;
        let r = rank.0;
        let (fold, vrank) = if r < 2 * extras && r.is_multiple_of(2) {
            (Some((Rank(r + 1), true)), None)
        } else if r < 2 * extras {
            (Some((Rank(r - 1), false)), Some(r / 2))
        } else {
            (None, Some(r - extras))
        };
        RdbSteps {
            fold,
            vrank,
            levels: pow2.trailing_zeros(),
            extras,
        }
    }

    fn steps(&self) -> u32 {
        self.levels + 2
    }

    fn send(&self, step: u32, len: usize) -> Option<(Rank, Range<usize>, u8)> {
        let last = self.levels + 1;
        match (self.fold, step) {
            (Some((keeper, true)), 0) => Some((keeper, 0..len, RdbKind::Fold as u8)),
            (Some((folded, false)), s) if s == last => {
                Some((folded, 0..len, RdbKind::Result as u8))
            }
            _ => self
                .partner(step)
                .map(|to| (to, 0..len, RdbKind::Exchange as u8)),
        }
    }

    fn detail(&self, step: u32) -> Detail {
        // Inputs in the local value once `step` steps are done: the fold's two, then those of
        // the 2^k schedule ranks of its block after k exchanges (each folded one counting
        // twice); a folded rank holds its own until the result comes.
        let contributions = match (self.vrank, step) {
            (_, s) if s >= self.steps() => u64::from((1u32 << self.levels) + self.extras),
            (None, _) => 1,
            (Some(vrank), s) => {
                let block = 1u32 << s.saturating_sub(1).min(self.levels);
                let first = vrank / block * block;
                let folded = self.extras.saturating_sub(first).min(block);
                u64::from(if s == 0 { 1 } else { block + folded })
            }
        };
        Detail::RecursiveDoubling {
            steps_done: step,
            steps_total: self.steps(),
            contributions,
        }
    }

    fn take(&self, step: u32, len: usize) -> Option<Take> {
        let last = self.levels + 1;
        let whole = |from, kind: RdbKind, combine| Take {
            from,
            range: 0..len,
            kind: kind as u8,
            combine,
        };
        match (self.fold, step) {
            (Some((keeper, true)), s) if s == last => Some(whole(keeper, RdbKind::Result, false)),
            (Some((folded, false)), 0) => Some(whole(folded, RdbKind::Fold, true)),
            _ => self
                .partner(step)
                .map(|from| whole(from, RdbKind::Exchange, true)),
        }
    }
}
