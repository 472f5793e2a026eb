//! What the operation shell asks of the protocol that runs one segment.

use crate::protocol::{Input, Outbox, Protocol};
use crate::time::Time;
use crate::values::Values;

/// What the shell needs of the protocol of a segment beyond [`Protocol`]: to start it on a
/// buffer the shell hands over and to take the result buffer back, so that a segment's values
/// are not copied into the protocol and out again. The defaults copy (through
/// [`Input::Start`] and [`Protocol::result`]); the allreduces of long vectors override them.
pub trait SegmentProtocol: Protocol {
    /// Starts on `data`, which the protocol may keep as its own state.
    fn start_owned(&mut self, now: Time, data: Values, out: &mut Outbox) {
        self.handle(
            now,
            Input::Start {
                data: data.as_ref(),
            },
            out,
        );
    }

    /// The result, moved out, once done; `None` where the protocol keeps no result buffer of
    /// the operation's type (then the shell reads [`Protocol::result`] or the estimate).
    fn take_result(&mut self) -> Option<Values> {
        None
    }

    /// Whether the finished segment's result counts every rank of the operation: false where a
    /// fault-tolerant protocol left out a failed rank's input. The shell counts the segments
    /// that did not ([`super::Segmented::partial_segments`]), so that a composite can refuse to mix
    /// them with segments that did.
    fn counts_every_rank(&self) -> bool {
        true
    }

    /// The set of ranks whose input the finished segment's result counts, where the protocol
    /// keeps one (FTCO routes around failed ranks and names who its result holds; a corrected
    /// reduce's root names whom it lacks): written to `dst` in a canonical encoding of the
    /// protocol's own, and true; false where the protocol keeps none. Segments
    /// of one operation whose sets differ are never assembled into one vector: a rank that
    /// died while they streamed would be counted in some elements and not in others.
    fn contributors(&self, dst: &mut Vec<u32>) -> bool {
        let _ = dst;
        false
    }

    /// Whether a finished segment must stay to answer peers still in it until the operation
    /// ends, settled or not: a corrected allreduce answers a rank that moved to a later root
    /// with the value it delivered (001's adoption). No, by default.
    fn answers_when_done(&self) -> bool {
        false
    }

    /// Whether instances would read the clock ([`Protocol::reads_clock`]), asked of a shell
    /// that holds none yet: a driver asks before the operation starts. True unless the
    /// protocol never looks at the time.
    fn reads_clock_unstarted() -> bool
    where
        Self: Sized,
    {
        true
    }
}
