//! The loop of one operation: start it with what is known (failures, frames held for it), then
//! feed it arrivals, notices, faults and timers until it ends. Operations that need none of the
//! loop's other work take a lean loop: the latency path of small collectives.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use ftcoll_algos::protocol::{Input, Phase, Protocol};
use ftcoll_algos::{Rank, Time, ValuesRef};

use super::{local, Endpoint, ExecError, OpEnd, OpStats, RECV_BATCH};
use crate::transport::Transport;

/// Turns of the executor loop between deadline checks.
const DEADLINE_CHECK_TURNS: u32 = 16;

/// An operation's time limit, checked every few turns of its loop.
pub(super) struct OpDeadline {
    pub(super) limit: Duration,
    /// Set at the first clock read the loop needs (or at the start of a protocol that reads
    /// the clock): a polling rank's short operation then reads the clock once.
    pub(super) at: Option<Instant>,
    turns: u32,
}

impl OpDeadline {
    /// Counts a turn; true if the deadline has passed, which it checks every
    /// [`DEADLINE_CHECK_TURNS`] turns.
    #[inline]
    fn passed_on_this_turn(&mut self) -> bool {
        self.turns = self.turns.wrapping_add(1);
        if !self.turns.is_multiple_of(DEADLINE_CHECK_TURNS) {
            return false;
        }
        let now = Instant::now();
        now >= *self.at.get_or_insert(now + self.limit)
    }
}

/// How a finished protocol ended, or `None` while it runs.
#[inline]
fn ended<P: Protocol>(protocol: &P) -> Option<OpEnd> {
    match protocol.phase() {
        Phase::Done => Some(OpEnd::Completed),
        Phase::Aborted => Some(OpEnd::Aborted),
        _ => None,
    }
}

impl<T: Transport> Endpoint<T> {
    /// Runs one operation of `protocol` (already configured with `op_id`) on `input` until it
    /// completes, aborts, times out or the job shuts down.
    pub fn run<P: Protocol>(
        &mut self,
        protocol: &mut P,
        op_index: u64,
        op_id: u64,
        input: ValuesRef<'_>,
        limit: Duration,
    ) -> Result<(OpEnd, OpStats), ExecError> {
        self.die_if_scripted(op_index);
        self.op_index = op_index;
        // Notices for an earlier operation that did not linger; this one gets every known
        // failure below.
        self.drained_notices.clear();
        self.next_op_id = self.next_op_id.max(op_id + 1);
        let mut stats = OpStats::default();
        if self.services.watched_revoked() {
            return Ok((OpEnd::Revoked, stats));
        }
        // A protocol that ignores time gets the last time read instead of a clock read.
        let timed = protocol.reads_clock();
        let mut deadline = OpDeadline {
            limit,
            at: None,
            turns: 0,
        };
        self.start(protocol, op_id, input, timed, &mut deadline, &mut stats)?;
        if !timed && self.may_run_lean(protocol) {
            if let Some(end) = self.run_lean(protocol, op_id, &mut deadline, &mut stats)? {
                return Ok((end, stats));
            }
        }
        let end = self.run_full(protocol, op_id, timed, &mut deadline, &mut stats)?;
        Ok((end, stats))
    }

    /// Starts the operation and hands it what is known already: failures, and the frames held
    /// for it.
    fn start<P: Protocol>(
        &mut self,
        protocol: &mut P,
        op_id: u64,
        input: ValuesRef<'_>,
        timed: bool,
        deadline: &mut OpDeadline,
        stats: &mut OpStats,
    ) -> Result<(), ExecError> {
        for rank in self.absorb_failures() {
            self.notify_lingering(rank, stats)?;
        }
        // Without a protocol that reads the time, the operation's deadline is set at the first
        // clock read the loop needs (the first deadline check or sleep).
        let start = if timed {
            let begun = Instant::now();
            deadline.at = Some(begun + deadline.limit);
            Time(begun.saturating_duration_since(self.epoch).as_nanos() as u64)
        } else {
            self.last_now.get()
        };
        protocol.handle(start, Input::Start { data: input }, &mut self.outbox);
        self.after_handle(stats)?;
        self.hand_known_failures(protocol, stats)?;
        self.hand_held_frames(protocol, op_id, stats)
    }

    /// Failures known before the operation are inputs like any other.
    fn hand_known_failures<P: Protocol>(
        &mut self,
        protocol: &mut P,
        stats: &mut OpStats,
    ) -> Result<(), ExecError> {
        // Nothing to copy, build or drop in a failure-free job (the latency path).
        if self.failed.is_empty() {
            return Ok(());
        }
        // A copy, since handling may learn more.
        let known_failed = self.failed.clone();
        for &world in &known_failed {
            let Some(rank) = local(&self.group, world) else {
                continue;
            };
            protocol.handle(
                self.now(),
                Input::PeerFailed { peer: Rank(rank) },
                &mut self.outbox,
            );
            self.after_handle(stats)?;
        }
        Ok(())
    }

    /// Hands the operation the frames that arrived before it started.
    fn hand_held_frames<P: Protocol>(
        &mut self,
        protocol: &mut P,
        op_id: u64,
        stats: &mut OpStats,
    ) -> Result<(), ExecError> {
        let mut frames = self.held.take(op_id);
        for (world, words, len) in frames.drain(..) {
            // Held with the sender's world rank: the group may have changed since (a shrink
            // between the frame's arrival and its operation's start).
            let Some(from) = local(&self.group, world.0) else {
                tracing::debug!(
                    from = world.0,
                    "dropped a held frame from outside the communicator"
                );
                continue;
            };
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            self.deliver(protocol, Rank(from), &bytes[..len], op_id, stats);
            self.held.recycle_words(words);
            self.after_handle(stats)?;
        }
        self.held.recycle_list(frames);
        Ok(())
    }

    /// Whether an operation that ignores the clock needs none of the loop's other work
    /// (timers, lingering operations, scripted faults, telemetry): it then only receives and
    /// waits until news arrives. This is the latency path of small collectives, where every
    /// check costs a few percent.
    fn may_run_lean<P: Protocol>(&self, protocol: &P) -> bool {
        protocol.poll_timeout().is_none()
            && self.lingering.is_empty()
            && !self.telemetry_on
            && !self.faults.has_state_flips()
            && !self.faults.has_slowdown()
            && !self.faults.time_sensitive()
    }

    /// The lean loop (see [`Endpoint::may_run_lean`]): `Some` if the operation ended in it by
    /// time or revocation; `None` once it is done or needs the full loop (news, a timer). A
    /// revocation reaches it only in a frame, so it looks for one only after handling frames.
    fn run_lean<P: Protocol>(
        &mut self,
        protocol: &mut P,
        op_id: u64,
        deadline: &mut OpDeadline,
        stats: &mut OpStats,
    ) -> Result<Option<OpEnd>, ExecError> {
        while ended(protocol).is_none() {
            if self.control.has_news() || protocol.poll_timeout().is_some() {
                return Ok(None);
            }
            if deadline.passed_on_this_turn() {
                return Ok(Some(OpEnd::TimedOut));
            }
            // One frame per poll: a poll for a batch looks at the next record after the
            // frame that completes the operation, pulling in a line its producer may be
            // writing, on the latency path (n = 2: 0.234 -> 0.227 us per operation).
            if self.receive::<P, 1>(protocol, op_id, true, false, stats)? > 0 {
                if self.services.watched_revoked() {
                    return Ok(Some(OpEnd::Revoked));
                }
                continue;
            }
            self.transport.progress()?;
            self.transport
                .wait_within(deadline.limit, &mut deadline.at)?;
        }
        Ok(None)
    }

    /// The full loop: every turn looks at the control channel's news, scripted state faults,
    /// arrivals, the protocol's and lingering operations' timers, and sleeps when nothing
    /// happened.
    fn run_full<P: Protocol>(
        &mut self,
        protocol: &mut P,
        op_id: u64,
        timed: bool,
        deadline: &mut OpDeadline,
        stats: &mut OpStats,
    ) -> Result<OpEnd, ExecError> {
        loop {
            if let Some(end) = ended(protocol) {
                self.remember_final(protocol);
                // Let queued sends finish: peers need them even though we are done.
                self.drain_sends(protocol, op_id, timed, deadline, stats)?;
                return Ok(end);
            }
            // The loop is the latency path of every collective: the clock is read every few
            // turns, and always before sleeping.
            if deadline.passed_on_this_turn() {
                return Ok(OpEnd::TimedOut);
            }
            let mut progressed = false;
            if self.telemetry_on {
                self.sample_if_due(protocol);
            }
            if self.control.has_news() {
                match self.take_news(protocol, op_id, timed, stats)? {
                    ControlFlow::Break(end) => return Ok(end),
                    ControlFlow::Continue(news) => progressed |= news,
                }
            }
            if self.faults.has_state_flips() {
                self.apply_state_flips(protocol, stats)?;
            }
            progressed |= self.receive_each(protocol, op_id, timed, stats)? > 0;
            if self.services.watched_revoked() {
                return Ok(OpEnd::Revoked);
            }
            progressed |= self.fire_due_timer(protocol, stats)?;
            if !self.lingering.is_empty() {
                progressed |= self.fire_lingering_timers(stats)?;
            }
            self.transport.progress()?;
            if !progressed && ended(protocol).is_none() {
                self.wait_for_work(protocol, deadline)?;
            }
        }
    }

    /// Acts on the control channel's news: a shutdown ends the operation; arrivals, then
    /// failure notices, reach the protocol; a revocation ends it. True if anything happened.
    fn take_news<P: Protocol>(
        &mut self,
        protocol: &mut P,
        op_id: u64,
        timed: bool,
        stats: &mut OpStats,
    ) -> Result<ControlFlow<OpEnd, bool>, ExecError> {
        if self.control.shutdown_requested() {
            return Ok(ControlFlow::Break(OpEnd::Shutdown));
        }
        // Data first: whatever a dead rank published before it died is already visible (its
        // publish happened before the launcher reaped it and told us), and a collective that
        // can complete with it should.
        let mut progressed =
            self.receive::<P, RECV_BATCH>(protocol, op_id, true, timed, stats)? > 0;
        for world in self.absorb_failures() {
            if let Some(rank) = local(&self.group, world) {
                protocol.handle(
                    self.now(),
                    Input::PeerFailed { peer: Rank(rank) },
                    &mut self.outbox,
                );
            }
            self.after_handle(stats)?;
            self.notify_lingering(world, stats)?;
            progressed = true;
        }
        if self.services.watched_revoked() {
            return Ok(ControlFlow::Break(OpEnd::Revoked));
        }
        Ok(ControlFlow::Continue(progressed))
    }

    /// Hands the protocol the scripted state faults now due.
    fn apply_state_flips<P: Protocol>(
        &mut self,
        protocol: &mut P,
        stats: &mut OpStats,
    ) -> Result<(), ExecError> {
        for fault in self.faults.due_state_flips(self.epoch.elapsed()) {
            protocol.handle(self.now(), Input::Fault(fault), &mut self.outbox);
            self.after_handle(stats)?;
        }
        Ok(())
    }

    /// Hands the protocol [`Input::Timeout`] if its earliest timer is due; true if it was.
    fn fire_due_timer<P: Protocol>(
        &mut self,
        protocol: &mut P,
        stats: &mut OpStats,
    ) -> Result<bool, ExecError> {
        let Some(at) = protocol.poll_timeout() else {
            return Ok(false);
        };
        let now = self.now();
        // The protocol handles every timer due at `now`; one it re-arms for `now` again waits
        // for the next turn.
        if at > now {
            return Ok(false);
        }
        protocol.handle(now, Input::Timeout, &mut self.outbox);
        self.after_handle(stats)?;
        Ok(true)
    }

    /// Sleeps in the transport until something arrives, at most until the earliest timer (the
    /// protocol's or a lingering operation's) or the operation's deadline.
    fn wait_for_work<P: Protocol>(
        &mut self,
        protocol: &P,
        deadline: &mut OpDeadline,
    ) -> Result<(), ExecError> {
        let first_timer = protocol.poll_timeout();
        let first_timer = match self.next_lingering_timer() {
            Some(at) => Some(first_timer.map_or(at, |t| t.min(at))),
            None => first_timer,
        };
        let Some(first_timer) = first_timer else {
            // The transport reads the clock only if nothing arrives at once.
            self.transport
                .wait_within(deadline.limit, &mut deadline.at)?;
            return Ok(());
        };
        let op_deadline = *deadline
            .at
            .get_or_insert_with(|| Instant::now() + deadline.limit);
        let next_timer = Duration::from_nanos(first_timer.0.saturating_sub(self.now().0));
        let until_deadline = op_deadline.saturating_duration_since(Instant::now());
        self.transport.wait(Some(next_timer.min(until_deadline)))?;
        Ok(())
    }
}
