//! What one attempt of the fault-tolerant ring runs: any ring allreduce that either completes
//! with the exact reduction over the attempt's members or aborts, started again from the
//! operation's input at every attempt.
//!
//! The copying ring ([`CopyingRing`], segments through frames) is the one every transport and
//! the simulator run. The runtime adds the single-copy ring on one node, which reduces in the
//! caller's vector and reads its neighbour's; the agreement between attempts, and with it the
//! argument of [`super`], is the same for both, since it asks of the ring only that a rank
//! which completes holds every member's input counted once.

use crate::protocol::{
    AbortReason, Assembled, Input, Outbox, Phase, Protocol, RankStatus, Segmented, ShellConfig,
};
use crate::registry::Algorithm;
use crate::ring::RingAllreduce;
use crate::time::Time;
use crate::values::{Dtype, Values, ValuesRef};

/// A ring allreduce run attempt after attempt by [`super::FtRing`].
///
/// Between [`AttemptRing::restart`] and the attempt's end its frames and failure notices
/// arrive through [`Protocol::handle`], with ranks numbered by position among the attempt's
/// members; it reports its end through [`Protocol::phase`]. Its own completion events are
/// dropped: the fault-tolerant ring completes only after the agreement.
pub trait AttemptRing: Assembled {
    /// The algorithm whose wire id the attempt's own frames carry (the agreement's travel
    /// under [`Algorithm::FtRing`]'s).
    const FRAMES: Algorithm = Algorithm::Ring;

    /// Whether an attempt runs on when members fail: then it starts even with members known
    /// dead (told at once), since a peer that did not know may already be in it and waiting
    /// for this rank. A ring cannot, so an attempt with a dead member is skipped.
    const TOLERATES_FAILURES: bool = false;

    /// Elements of a segment whose largest frame holds `frame_elems` elements, with `members`
    /// ranks in the attempt. A ring's frame holds one block, 1/members of a segment, so that
    /// frames keep their size as the ring shrinks.
    fn segment_elems(frame_elems: usize, members: u32) -> usize
    where
        Self: Sized,
    {
        frame_elems.max(1).saturating_mul(members.max(1) as usize)
    }

    /// Whether the attempt's result, once done, counts the input of every member. A ring's
    /// always does (it completes only with all of them); a fault-tolerant attempt may complete
    /// without a member that failed in some segments and not in others, and then the
    /// operation must not return it.
    fn counts_every_member(&self) -> bool {
        true
    }

    /// Keeps the operation's input for every attempt; `data` is what the operation was
    /// started with (a ring that works in the caller's own vector keeps a copy of that).
    fn keep_input(&mut self, data: ValuesRef<'_>);
    /// The kept input's type and length.
    fn shape(&self) -> (Dtype, u64);
    /// Makes the ring ready for the attempt `shell` describes (its rank and size are this
    /// rank's position among the attempt's members and their count).
    fn restart(&mut self, shell: ShellConfig);
    /// Starts the restarted attempt from the kept input.
    fn start(&mut self, now: Time, out: &mut Outbox);
    /// The kept input as `f64` (the estimate before the first attempt starts).
    fn input_estimate(&self, dst: &mut Vec<f64>);
}

/// The segmented ring allreduce through frames, with the input it restarts from.
pub struct CopyingRing {
    ring: Segmented<RingAllreduce>,
    input: Values,
}

impl CopyingRing {
    /// A ring for attempts under `shell` (restarted for each).
    pub fn new(shell: ShellConfig) -> CopyingRing {
        CopyingRing {
            ring: Segmented::new(shell, Box::new(crate::ring::allreduce_segment)),
            input: Values::F64(Vec::new()),
        }
    }
}

impl AttemptRing for CopyingRing {
    fn keep_input(&mut self, data: ValuesRef<'_>) {
        self.input.copy_from(data);
    }

    fn shape(&self) -> (Dtype, u64) {
        (self.input.dtype(), self.input.len() as u64)
    }

    fn restart(&mut self, shell: ShellConfig) {
        self.ring.restart(shell);
    }

    fn start(&mut self, now: Time, out: &mut Outbox) {
        // The ring takes its own copy into its segments' buffers: the input stays for a retry.
        let data = self.input.as_ref();
        self.ring.handle(now, Input::Start { data }, out);
    }

    fn input_estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        self.input.push_as_f64(dst);
    }
}

impl Protocol for CopyingRing {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        self.ring.handle(now, input, out);
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.ring.poll_timeout()
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        self.ring.estimate(dst);
    }

    fn phase(&self) -> Phase {
        self.ring.phase()
    }

    fn result(&self) -> Option<ValuesRef<'_>> {
        self.ring.result()
    }

    fn has_result(&self) -> bool {
        self.ring.has_result()
    }

    fn reads_clock(&self) -> bool {
        self.ring.reads_clock()
    }

    fn status(&self) -> RankStatus {
        self.ring.status()
    }
}

impl Assembled for CopyingRing {
    fn results(&self) -> Option<impl Iterator<Item = (usize, ValuesRef<'_>)> + '_> {
        self.ring.results()
    }

    fn output_len_total(&self) -> usize {
        self.input.len()
    }

    fn abort_reason(&self) -> Option<AbortReason> {
        self.ring.abort_reason()
    }
}
