//! Finished operations whose protocol is not settled yet (see `Protocol::settled`), or that must
//! stay reachable (`Protocol::serve_until`): they keep receiving their frames and the failure
//! notices while later operations run, and until the rank leaves the job.

use ftcoll_algos::protocol::{Input, Outbox, Protocol};
use ftcoll_algos::{Rank, Time};

use super::{local, Endpoint, ExecError, OpStats};
use crate::transport::Transport;

/// Bound on finished operations still served because they owe peers answers.
const MAX_LINGERING: usize = 8;

/// A finished operation still served.
pub(super) struct Lingering {
    pub(super) op_id: u64,
    /// Keeps its own timers (a finished gossip rank told of a failure pushes again).
    protocol: Box<dyn Protocol + Send>,
}

impl Lingering {
    /// Unsettled, or settled but to stay reachable: until its `serve_until`, or, when it must
    /// stay reachable until every live rank finished (`Protocol::serves_until_all_finish`,
    /// FTCO), until the flushing agreement at the exit shows that every survivor returned from
    /// it ([`Endpoint::forget_settled_lingering`]) or newer ones push it out.
    pub(super) fn still_needed(&self, now: Time) -> bool {
        !self.protocol.settled()
            || self
                .protocol
                .serve_until()
                .is_some_and(|t| t > now || self.protocol.serves_until_all_finish())
    }

    /// Hands `input` to the protocol.
    pub(super) fn handle(&mut self, now: Time, input: Input<'_>, outbox: &mut Outbox) {
        self.protocol.handle(now, input, outbox);
    }

    /// Whether a timer of the protocol is due at `now`.
    fn timer_due(&self, now: Time) -> bool {
        self.protocol.poll_timeout().is_some_and(|at| at <= now)
    }
}

impl<T: Transport> Endpoint<T> {
    /// Whether an operation that must stay reachable until every live rank finished
    /// (`Protocol::serves_until_all_finish`) lingered: the rank then flushes with an agreement
    /// before leaving.
    pub fn keeps_finished_reachable(&self) -> bool {
        self.keeps_finished_reachable
    }

    /// Stops serving the finished operations that only wait to answer late requests (settled,
    /// with a `serve_until`): once every live rank returned from them, nobody will ask.
    pub fn forget_settled_lingering(&mut self) {
        self.lingering.retain(|l| !l.protocol.settled());
    }

    /// Keeps serving `protocol`, whose operation `op_id` returned, while it owes peers answers.
    pub fn linger(&mut self, op_id: u64, protocol: Box<dyn Protocol + Send>) {
        let notices = std::mem::take(&mut self.drained_notices);
        if protocol.settled() && protocol.serve_until().is_none() {
            return;
        }
        if protocol.serves_until_all_finish() {
            self.keeps_finished_reachable = true;
        }
        if self.lingering.len() >= MAX_LINGERING {
            // The oldest settled one goes first: it only answers probes, while an unsettled
            // one still owes a peer its corrections.
            let at = self
                .lingering
                .iter()
                .position(|l| l.protocol.settled())
                .unwrap_or(0);
            let gone = self.lingering.remove(at);
            tracing::debug!(op = gone.op_id, "stopped serving a finished operation");
        }
        let mut lingering = Lingering { op_id, protocol };
        // What it sends in answer leaves with the next pass's sends.
        for world in notices {
            if let Some(rank) = local(&self.group, world) {
                let now = self.now();
                lingering.handle(
                    now,
                    Input::PeerFailed { peer: Rank(rank) },
                    &mut self.outbox,
                );
            }
        }
        self.lingering.push(lingering);
    }

    /// Hands a failure notice to the finished operations still served.
    pub(super) fn notify_lingering(
        &mut self,
        world: u32,
        stats: &mut OpStats,
    ) -> Result<(), ExecError> {
        let Some(rank) = local(&self.group, world) else {
            return Ok(());
        };
        for i in 0..self.lingering.len() {
            let now = self.now();
            self.lingering[i].handle(
                now,
                Input::PeerFailed { peer: Rank(rank) },
                &mut self.outbox,
            );
            self.after_handle(stats)?;
        }
        let now = self.now();
        self.lingering.retain(|l| l.still_needed(now));
        Ok(())
    }

    /// Hands the finished operations still served their due timers; true if any was due.
    pub(super) fn fire_lingering_timers(&mut self, stats: &mut OpStats) -> Result<bool, ExecError> {
        if self
            .lingering
            .iter()
            .all(|l| l.protocol.poll_timeout().is_none())
        {
            return Ok(false);
        }
        let now = self.now();
        let mut fired = false;
        for i in 0..self.lingering.len() {
            if self.lingering[i].timer_due(now) {
                self.lingering[i].handle(now, Input::Timeout, &mut self.outbox);
                self.after_handle(stats)?;
                fired = true;
            }
        }
        let now = self.now();
        self.lingering.retain(|l| l.still_needed(now));
        Ok(fired)
    }

    /// The earliest timer of a finished operation still served.
    pub(super) fn next_lingering_timer(&self) -> Option<Time> {
        self.lingering
            .iter()
            .filter_map(|l| l.protocol.poll_timeout())
            .min()
    }
}
