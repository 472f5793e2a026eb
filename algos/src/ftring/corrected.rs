//! The corrected-tree allreduce (001) in segments, as the attempt of the fault-tolerant shell.
//!
//! Each segment is one corrected allreduce ([`CorrectedAllreduce`]): it tolerates up to f
//! failures and counts every rank's input exactly once or not at all, identically at every rank
//! it delivers to. Segment by segment that is 001's semantics 5.1; for the whole vector it is
//! not: a rank that dies while the segments stream leaves its input in the segments that
//! finished before and out of those that started after. So the reduce behind every segment
//! reports the ranks it could not receive from (001's failure list, [`FailureInfo::List`]), its
//! root marks a value that leaves some rank out ([`crate::corrected::FLAG_PARTIAL`]) and the
//! mark travels with the value to every rank. An attempt whose segments all count every member
//! completes: its vector is the reduction over the members, each counted once. An attempt with a
//! marked segment is done but not whole, and the shell ([`super::FtRing`]) agrees to run it
//! again over the survivors, exactly as after a ring that stopped.
//!
//! Two rules keep the attempts finite. A rank with a marked segment reports the attempt done
//! only once it knows a member failed, so that the agreement's union of failures names one
//! and the next attempt is smaller. More than f failures among the members end the attempt
//! at once (as aborted): the trees promise nothing then.

use crate::corrected::{AllreduceConfig, CorrectedAllreduce, Correction, FailureInfo};
use crate::protocol::{
    AbortReason, Assembled, Input, MakeSegment, Outbox, Phase, Protocol, RankStatus, Segmented,
    ShellConfig,
};
use crate::registry::Algorithm;
use crate::time::Time;
use crate::values::{Dtype, Values, ValuesRef};

use super::AttemptRing;

/// The segmented corrected-tree allreduce, with the input every attempt starts from.
pub struct CorrectedAttempt {
    segments: Segmented<CorrectedAllreduce>,
    input: Values,
    tolerate: u32,
    /// Members of the attempt this rank was told failed during it.
    failed_members: u32,
}

impl CorrectedAttempt {
    /// Attempts under `shell`, each segment tolerating `tolerate` failures and broadcasting
    /// with `correction`.
    pub fn new(shell: ShellConfig, tolerate: u32, correction: Correction) -> CorrectedAttempt {
        let make: MakeSegment<CorrectedAllreduce> = Box::new(move |shell, _segment, _spare| {
            let mut config =
                AllreduceConfig::new(shell.rank, shell.size, shell.reduce, shell.op, tolerate);
            // The only scheme that brings the chosen subtree's losses to the root.
            config.info = FailureInfo::List;
            config.correction = correction;
            CorrectedAllreduce::new(config)
        });
        CorrectedAttempt {
            segments: Segmented::new(shell, make),
            input: Values::F64(Vec::new()),
            tolerate,
            failed_members: 0,
        }
    }
}

impl AttemptRing for CorrectedAttempt {
    const FRAMES: Algorithm = Algorithm::CorrectedAllreduce;
    const TOLERATES_FAILURES: bool = true;

    /// A corrected-tree frame carries a whole segment.
    fn segment_elems(frame_elems: usize, _members: u32) -> usize {
        frame_elems.max(1)
    }

    fn counts_every_member(&self) -> bool {
        self.segments.partial_segments() == 0
    }

    fn keep_input(&mut self, data: ValuesRef<'_>) {
        self.input.copy_from(data);
    }

    fn shape(&self) -> (Dtype, u64) {
        (self.input.dtype(), self.input.len() as u64)
    }

    fn restart(&mut self, shell: ShellConfig) {
        self.segments.restart(shell);
        self.failed_members = 0;
    }

    fn start(&mut self, now: Time, out: &mut Outbox) {
        let data = self.input.as_ref();
        self.segments.handle(now, Input::Start { data }, out);
    }

    fn input_estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        self.input.push_as_f64(dst);
    }
}

impl Protocol for CorrectedAttempt {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        if let Input::PeerFailed { .. } = input {
            // The shell hands each member's failure over once.
            self.failed_members += 1;
        }
        self.segments.handle(now, input, out);
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.segments.poll_timeout()
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        self.segments.estimate(dst);
    }

    fn phase(&self) -> Phase {
        if self.failed_members > self.tolerate {
            return Phase::Aborted;
        }
        match self.segments.phase() {
            // Wait for the notice of the member a marked segment left out (see the module docs).
            Phase::Done if !self.counts_every_member() && self.failed_members == 0 => {
                Phase::Running
            }
            phase => phase,
        }
    }

    fn result(&self) -> Option<ValuesRef<'_>> {
        self.segments.result()
    }

    fn has_result(&self) -> bool {
        self.segments.has_result()
    }

    fn reads_clock(&self) -> bool {
        self.segments.reads_clock()
    }

    fn status(&self) -> RankStatus {
        self.segments.status()
    }
}

impl Assembled for CorrectedAttempt {
    fn results(&self) -> Option<impl Iterator<Item = (usize, ValuesRef<'_>)> + '_> {
        self.segments.results()
    }

    fn output_len_total(&self) -> usize {
        self.input.len()
    }

    fn abort_reason(&self) -> Option<AbortReason> {
        if self.failed_members > self.tolerate {
            return Some(AbortReason::TooManyFailures);
        }
        self.segments.abort_reason()
    }
}
