//! The executor: drives a protocol state machine over a real transport with a real clock.
//!
//! The loop is the simulator's, with real time: feed failure notices and arrived frames to the
//! protocol, and [`Input::Timeout`] once the time reaches its `poll_timeout`; carry out its sends
//! (through this rank's scripted faults); sleep in the transport when nothing is ready, at most
//! until the next deadline. Frames are handed to the protocol in
//! place, straight from the transport's receive buffer. Frames of a later operation (a peer that
//! finished this one first) are copied aside, in a bounded buffer, until that operation starts.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ftcoll_algos::era::Era;
use ftcoll_algos::protocol::{Event, Input, Outbox, Phase, Protocol};
use ftcoll_algos::wire::{Frame, FrameError};
use ftcoll_algos::{Algorithm, Rank, Time, ValuesRef};

mod spares;
mod telemetry;

use self::spares::Spares;

pub use telemetry::is_final;

use crate::control::client::ControlClient;
use crate::control::RankSample;
use crate::rank_faults::RankFaults;
use crate::transport::{Transport, TransportError};

/// Bound on frames of future operations held aside.
const MAX_EARLY_FRAMES: usize = 1 << 16;
/// Turns of the executor loop between deadline checks.
const DEADLINE_CHECK_TURNS: u32 = 16;
/// Frames handled per receive poll, so timers and notices are not starved.
const RECV_BATCH: usize = 256;
/// Bound on timeout suspicions kept between two telemetry samples.
const MAX_SUSPICIONS: usize = 64;
/// Bound on finished operations still served because they owe peers answers.
const MAX_LINGERING: usize = 8;
/// Agreement ids carry their communicator's epoch above this bit, so that a shrunk
/// communicator's agreements never meet its parent's.
pub const ERA_EPOCH_SHIFT: u32 = 40;
/// Communicators whose agreement service still answers peers (the newest and its ancestors).
const MAX_ERA_SERVICES: usize = 4;

/// A finished operation's protocol that is not settled yet (see `Protocol::settled`): it keeps
/// receiving its frames and the failure notices while later operations run, and until the rank
/// leaves the job.
struct Lingering {
    op_id: u64,
    /// Keeps its own timers (a finished gossip rank told of a failure pushes again).
    protocol: Box<dyn Protocol + Send>,
}

impl Lingering {
    /// Unsettled, or settled but still to be reachable (`Protocol::serve_until`).
    fn still_needed(&self, now: Time) -> bool {
        !self.protocol.settled() || self.protocol.serve_until().is_some_and(|t| t > now)
    }

    /// Hands `input` to the protocol.
    fn handle(&mut self, now: Time, input: Input<'_>, outbox: &mut Outbox) {
        self.protocol.handle(now, input, outbox);
    }

    /// Whether a timer of the protocol is due at `now`.
    fn timer_due(&self, now: Time) -> bool {
        self.protocol.poll_timeout().is_some_and(|at| at <= now)
    }
}

/// How an operation ended at this rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpEnd {
    /// The protocol completed.
    Completed,
    /// The protocol aborted (a failure it cannot tolerate, or a stop).
    Aborted,
    /// The operation exceeded its time limit.
    TimedOut,
    /// The launcher asked the job to stop.
    Shutdown,
    /// The communicator was revoked.
    Revoked,
}

/// Counters of one operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Frames sent.
    pub sent: u64,
    /// Frames received for this operation.
    pub received: u64,
    /// Frames rejected (malformed or refused by the protocol).
    pub rejected: u64,
}

/// A rank's execution context: its transport, control connection, clock, and known failures.
pub struct Endpoint<T: Transport> {
    /// The data-plane transport.
    pub transport: T,
    control: std::sync::Arc<ControlClient>,
    me: Rank,
    epoch: Instant,
    /// The last time read from the clock, handed to protocols that ignore time.
    last_now: std::cell::Cell<Time>,
    failed: BTreeSet<u32>,
    faults: RankFaults,
    outbox: Outbox,
    /// Frames held for operations not started yet, by operation: (sender's world rank, frame).
    early: BTreeMap<u64, Vec<(Rank, Vec<u64>, usize)>>,
    early_count: usize,
    /// Buffers of held frames and lists of them, kept for reuse: with more ranks than cores
    /// most frames arrive before their operation starts, and allocating for each one showed.
    spare_words: Spares<Vec<u64>>,
    spare_lists: Spares<Vec<(Rank, Vec<u64>, usize)>>,
    /// The id the next operation gets at the earliest (one above the last one run): between
    /// operations, frames from it on are held for their operation.
    next_op_id: u64,
    lingering: Vec<Lingering>,
    /// Agreement services (in world ranks), newest last: frames of ERA go to the one of their
    /// epoch whatever operation runs, so a rank answers agreements it already returned from.
    era: Vec<(u64, Era)>,
    /// Agreement frames of a communicator this rank has not created yet (a faster peer
    /// finished the shrink first), held until it does; bounded like early frames.
    era_early: Vec<(Rank, Vec<u64>, usize)>,
    /// The epoch whose revocation fails operations in progress.
    revoke_watch: Option<u64>,
    /// World ranks of the communicator's members when it is a shrunk one (increasing):
    /// protocols speak member indices, the transport world ranks.
    group: Option<Vec<u32>>,
    scratch: Vec<u8>,
    /// Failures learned while a finished operation's last sends drained (bounded by the
    /// job's size): handed to that operation if it lingers. Over a transport whose sends
    /// take a while (libfabric's tcp connects lazily) a notice arriving then was lost to it: a
    /// finished gossip rank kept its flows with the dead rank and bent the survivors' sums.
    drained_notices: Vec<u32>,
    /// Frames sent since the rank started (console telemetry).
    sent_total: u64,
    /// Index of the operation running (or last run).
    op_index: u64,
    /// Whether the launcher wants status samples.
    telemetry_on: bool,
    /// The last finished operation's final state, for samples between operations.
    last_sample: Option<RankSample>,
    sample_scratch: Vec<f64>,
    /// Peers the protocol declared dead by its own timeouts since the last sample.
    suspicions: Vec<u32>,
    /// Peers the transport found unreachable, being forwarded to the launcher.
    unreachable: Vec<Rank>,
}

/// A failure of the executor itself (not of the collective).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
}

impl<T: Transport> Endpoint<T> {
    /// A context for rank `me`.
    pub fn new(
        transport: T,
        control: std::sync::Arc<ControlClient>,
        me: Rank,
        faults: RankFaults,
    ) -> Endpoint<T> {
        control.add_waker(transport.waker());
        let telemetry_on = control.telemetry_enabled();
        Endpoint {
            transport,
            control,
            me,
            epoch: Instant::now(),
            last_now: std::cell::Cell::new(Time::ZERO),
            failed: BTreeSet::new(),
            faults,
            outbox: Outbox::new(),
            early: BTreeMap::new(),
            early_count: 0,
            spare_words: Spares::default(),
            spare_lists: Spares::default(),
            next_op_id: 1,
            lingering: Vec::new(),
            era: Vec::new(),
            era_early: Vec::new(),
            revoke_watch: None,
            group: None,
            scratch: Vec::new(),
            drained_notices: Vec::new(),
            sent_total: 0,
            op_index: 0,
            telemetry_on,
            last_sample: None,
            sample_scratch: Vec::new(),
            suspicions: Vec::new(),
            unreachable: Vec::new(),
        }
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.me
    }

    /// The control connection.
    pub fn control(&self) -> &ControlClient {
        &self.control
    }

    /// Ranks known to have failed.
    pub fn failed(&self) -> &BTreeSet<u32> {
        &self.failed
    }

    /// This rank's scripted faults.
    pub fn faults(&self) -> &RankFaults {
        &self.faults
    }

    fn now(&self) -> Time {
        let now = Time(self.epoch.elapsed().as_nanos() as u64);
        self.last_now.set(now);
        now
    }

    /// Takes new failure notices; returns the newly failed ranks.
    fn absorb_failures(&mut self) -> Vec<u32> {
        self.forward_unreachable();
        let mut fresh = Vec::new();
        if !self.control.has_news() {
            return fresh;
        }
        for (rank, cause) in self.control.take_failures() {
            if self.learn_failed(rank) {
                tracing::debug!(rank, cause = cause.name(), "peer failed");
                fresh.push(rank);
            }
        }
        // After take_failures, which clears the news flag (see take_injected).
        for spec in self.control.take_injected() {
            match self.faults.inject(&spec, self.epoch.elapsed()) {
                Ok(()) => tracing::info!(rank = self.me.0, fault = %spec, "injected fault"),
                Err(error) => tracing::warn!(fault = %spec, %error, "injected fault refused"),
            }
        }
        fresh
    }

    /// Passes the peers the transport found unreachable to the launcher. They are not failed
    /// yet: only the launcher declares failures, after making sure the rank is dead.
    fn forward_unreachable(&mut self) {
        self.transport.take_unreachable(&mut self.unreachable);
        for peer in self.unreachable.drain(..) {
            if self.failed.contains(&peer.0) {
                continue;
            }
            tracing::info!(peer = peer.0, "transport found the peer unreachable");
            if let Err(error) = self.control.unreachable(peer.0) {
                tracing::debug!(%error, "cannot report an unreachable peer");
            }
        }
    }

    /// Records that `rank` is dead; false if it was known. Besides the launcher's notices, an
    /// agreement's decided failed set is a source: only dead ranks ever enter one (fail-stop),
    /// and learning them from the decision means an `ack_failed` right after an agreement that
    /// reported them acknowledges them even if the launcher's notice is still on its way.
    fn learn_failed(&mut self, rank: u32) -> bool {
        if rank == self.me.0 || !self.failed.insert(rank) {
            return false;
        }
        self.transport.peer_failed(Rank(rank));
        for (_, era) in &mut self.era {
            era.peer_failed(rank, &mut self.outbox);
        }
        true
    }

    /// Learns the ranks of an agreement's decided failed set (see `learn_failed`) between
    /// operations, and sends what the agreement services say in return.
    pub fn learn_agreed_failures(&mut self, ranks: &[u32]) -> Result<(), ExecError> {
        let mut any = false;
        for &rank in ranks {
            any |= self.learn_failed(rank);
        }
        if any {
            self.after_handle(&mut OpStats::default())?;
        }
        Ok(())
    }

    /// SIGKILLs this process if a scripted fault kills it at the start of operation
    /// `op_index`: the same death the launcher's reaper and survivors see.
    pub fn die_if_scripted(&self, op_index: u64) {
        if self.faults.dies_at_op(op_index) {
            tracing::warn!(
                rank = self.me.0,
                op = op_index,
                "scripted kill at operation start"
            );
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
    }

    /// Installs the agreement service of a communicator epoch (ids above
    /// `epoch << ERA_EPOCH_SHIFT`); it learns every failure known so far.
    pub fn add_era(&mut self, epoch: u64, mut era: Era) -> Result<(), ExecError> {
        for &rank in &self.failed {
            era.peer_failed(rank, &mut self.outbox);
        }
        self.era.retain(|(e, _)| *e != epoch);
        // Frames that arrived before this communicator existed here.
        let (mine, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.era_early)
            .into_iter()
            .partition(|(_, words, len)| {
                let bytes: &[u8] = bytemuck::cast_slice(words);
                Frame::decode(&bytes[..*len])
                    .is_ok_and(|f| f.header.op_id >> ERA_EPOCH_SHIFT == epoch)
            });
        self.era_early = later;
        for (from, words, len) in mine {
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            if let Ok(frame) = Frame::decode(&bytes[..len]) {
                if let Err(error) = era.handle_frame(from, &frame, &mut self.outbox) {
                    log_rejected(from, error);
                }
            }
        }
        self.era.push((epoch, era));
        if self.era.len() > MAX_ERA_SERVICES {
            self.era.remove(0);
        }
        self.after_handle(&mut OpStats::default())
    }

    /// The agreement service of `epoch`.
    pub fn era(&self, epoch: u64) -> Option<&Era> {
        self.era.iter().find(|(e, _)| *e == epoch).map(|(_, s)| s)
    }

    /// Acts on the agreement service of `epoch` (start an agreement, revoke) and sends what it
    /// queued.
    pub fn with_era<R>(
        &mut self,
        epoch: u64,
        act: impl FnOnce(&mut Era, &mut Outbox) -> R,
    ) -> Result<Option<R>, ExecError> {
        let Some((_, era)) = self.era.iter_mut().find(|(e, _)| *e == epoch) else {
            return Ok(None);
        };
        let result = act(era, &mut self.outbox);
        self.after_handle(&mut OpStats::default())?;
        Ok(Some(result))
    }

    /// Serves the transport until `done` holds for the agreement service of `epoch`, the time
    /// limit passes, or the job shuts down. ERA needs no protocol of its own here: its frames
    /// reach the service in every receive.
    pub fn wait_era(
        &mut self,
        epoch: u64,
        limit: Duration,
        mut done: impl FnMut(&Era) -> bool,
    ) -> Result<OpEnd, ExecError> {
        let deadline = Instant::now() + limit;
        let mut stats = OpStats::default();
        // Each turn waits at most a millisecond when idle; the deadline bounds the loop.
        loop {
            if self.era(epoch).is_none_or(&mut done) {
                return Ok(OpEnd::Completed);
            }
            if Instant::now() >= deadline {
                return Ok(OpEnd::TimedOut);
            }
            if self.control.shutdown_requested() {
                return Ok(OpEnd::Shutdown);
            }
            let progressed = self.serve_once(&mut stats)?;
            if !progressed && !self.era(epoch).is_none_or(&mut done) {
                let left = deadline.saturating_duration_since(Instant::now());
                self.transport
                    .wait(Some(left.min(Duration::from_millis(5))))?;
            }
        }
    }

    /// One pass without waiting, between operations: failure notices, arrivals (agreement
    /// frames reach their services, others are held for their operation) and sends. True if
    /// anything happened. The agreement progress thread calls this while the application
    /// computes.
    pub fn serve_between_operations(&mut self) -> Result<bool, ExecError> {
        self.serve_once(&mut OpStats::default())
    }

    fn serve_once(&mut self, stats: &mut OpStats) -> Result<bool, ExecError> {
        let mut progressed = false;
        for rank in self.absorb_failures() {
            self.notify_lingering(rank, stats)?;
            progressed = true;
        }
        self.after_handle(stats)?;
        let next = self.next_op_id;
        progressed |=
            self.receive::<_, RECV_BATCH>(&mut BetweenOperations, next, false, true, stats)? > 0;
        progressed |= self.fire_lingering_timers(stats)?;
        self.transport.progress()?;
        Ok(progressed)
    }

    /// Frames the agreement services still held have sent (for per-operation counts).
    pub fn era_messages_sent(&self) -> u64 {
        self.era
            .iter()
            .map(|(_, s)| s.counters().messages_sent)
            .sum()
    }

    /// Makes operations fail with [`OpEnd::Revoked`] once the communicator of `epoch` is revoked.
    pub fn watch_revoke(&mut self, epoch: u64) {
        self.revoke_watch = Some(epoch);
    }

    /// Restricts later operations to `members` (world ranks, increasing): protocol rank i is
    /// world rank `members[i]`.
    pub fn set_group(&mut self, members: Vec<u32>) {
        self.group = Some(members);
    }

    /// The member index of a world rank (itself without a group).
    fn local(group: &Option<Vec<u32>>, world: u32) -> Option<u32> {
        match group {
            None => Some(world),
            Some(members) => members.binary_search(&world).ok().map(|i| i as u32),
        }
    }

    fn is_revoked(&self) -> bool {
        self.revoke_watch.is_some_and(|e| self.revoked(e))
    }

    /// Whether the communicator of `epoch` was revoked (its operations must fail).
    pub fn revoked(&self, epoch: u64) -> bool {
        self.era(epoch).is_some_and(Era::is_revoked)
    }

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
        if self.is_revoked() {
            return Ok((OpEnd::Revoked, stats));
        }
        // A protocol that ignores time gets the last time read, and the operation's deadline is
        // set at the first clock read the loop needs (the first deadline check or sleep): a
        // polling rank's short operation then reads the clock once.
        let timed = protocol.reads_clock();
        let mut deadline: Option<Instant> = None;
        let mut turns: u32 = 0;
        for rank in self.absorb_failures() {
            self.notify_lingering(rank, &mut stats)?;
        }
        let start = if timed {
            let begun = Instant::now();
            deadline = Some(begun + limit);
            Time(begun.saturating_duration_since(self.epoch).as_nanos() as u64)
        } else {
            self.last_now.get()
        };
        protocol.handle(start, Input::Start { data: input }, &mut self.outbox);
        self.after_handle(&mut stats)?;
        // Failures known before the operation are inputs like any other. (A copy, since the
        // loop may learn more; none to make in a failure-free job.)
        let known_failed = if self.failed.is_empty() {
            BTreeSet::new()
        } else {
            self.failed.clone()
        };
        for &world in &known_failed {
            let Some(rank) = Endpoint::<T>::local(&self.group, world) else {
                continue;
            };
            protocol.handle(
                self.now(),
                Input::PeerFailed { peer: Rank(rank) },
                &mut self.outbox,
            );
            self.after_handle(&mut stats)?;
        }
        // Most operations find no held frames; the check keeps the map untouched then.
        let mut held = match self.early_count {
            0 => Vec::new(),
            _ => self.early.remove(&op_id).unwrap_or_default(),
        };
        for (world, words, len) in held.drain(..) {
            self.early_count -= 1;
            // Held with the sender's world rank: the group may have changed since (a shrink
            // between the frame's arrival and its operation's start).
            let Some(from) = Endpoint::<T>::local(&self.group, world.0) else {
                tracing::debug!(
                    from = world.0,
                    "dropped a held frame from outside the communicator"
                );
                continue;
            };
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            self.deliver(protocol, Rank(from), &bytes[..len], op_id, &mut stats);
            self.spare_words.recycle(words);
            self.after_handle(&mut stats)?;
        }
        if held.capacity() > 0 {
            self.spare_lists.recycle(held);
        }
        // An operation that needs none of the loop's other work (timers, the clock, lingering
        // operations, scripted faults, telemetry) only receives and waits until news arrives:
        // this is the latency path of small collectives, where every check costs a few
        // percent. A revocation reaches it only in a frame, so it looks for one only after
        // handling frames.
        let mut lean = !timed
            && protocol.poll_timeout().is_none()
            && self.lingering.is_empty()
            && !self.telemetry_on
            && !self.faults.has_state_flips()
            && !self.faults.has_slowdown()
            && !self.faults.time_sensitive();
        loop {
            if lean && !matches!(protocol.phase(), Phase::Done | Phase::Aborted) {
                if self.control.has_news() || protocol.poll_timeout().is_some() {
                    lean = false;
                    continue;
                }
                turns = turns.wrapping_add(1);
                if turns.is_multiple_of(DEADLINE_CHECK_TURNS) {
                    let now = Instant::now();
                    if now >= *deadline.get_or_insert(now + limit) {
                        return Ok((OpEnd::TimedOut, stats));
                    }
                }
                // One frame per poll: a poll for a batch looks at the next record after the
                // frame that completes the operation, pulling in a line its producer may be
                // writing, on the latency path (n = 2: 0.234 -> 0.227 us per operation).
                if self.receive::<P, 1>(protocol, op_id, true, false, &mut stats)? > 0 {
                    if self.revoke_watch.is_some() && self.is_revoked() {
                        return Ok((OpEnd::Revoked, stats));
                    }
                    continue;
                }
                self.transport.progress()?;
                self.transport.wait_within(limit, &mut deadline)?;
                continue;
            }
            if matches!(protocol.phase(), Phase::Done | Phase::Aborted) {
                let end = if protocol.phase() == Phase::Done {
                    OpEnd::Completed
                } else {
                    OpEnd::Aborted
                };
                self.remember_final(protocol);
                // Let queued sends finish: peers need them even though we are done.
                self.drain_sends(deadline, limit)?;
                return Ok((end, stats));
            }
            // The loop is the latency path of every collective: the clock is read every few
            // turns, and always before sleeping.
            turns = turns.wrapping_add(1);
            if turns.is_multiple_of(DEADLINE_CHECK_TURNS) {
                let now = Instant::now();
                if now >= *deadline.get_or_insert(now + limit) {
                    return Ok((OpEnd::TimedOut, stats));
                }
            }
            let mut progressed = false;
            if self.telemetry_on {
                self.sample_if_due(protocol);
            }
            if self.control.has_news() {
                if self.control.shutdown_requested() {
                    return Ok((OpEnd::Shutdown, stats));
                }
                // Data first: whatever a dead rank published before it died is already visible
                // (its publish happened before the launcher reaped it and told us), and a
                // collective that can complete with it should.
                progressed |=
                    self.receive::<P, RECV_BATCH>(protocol, op_id, true, timed, &mut stats)? > 0;
                for world in self.absorb_failures() {
                    if let Some(rank) = Endpoint::<T>::local(&self.group, world) {
                        protocol.handle(
                            self.now(),
                            Input::PeerFailed { peer: Rank(rank) },
                            &mut self.outbox,
                        );
                    }
                    self.after_handle(&mut stats)?;
                    self.notify_lingering(world, &mut stats)?;
                    progressed = true;
                }
                if self.is_revoked() {
                    return Ok((OpEnd::Revoked, stats));
                }
            }
            if self.faults.has_state_flips() {
                for fault in self.faults.due_state_flips(self.epoch.elapsed()) {
                    protocol.handle(self.now(), Input::Fault(fault), &mut self.outbox);
                    self.after_handle(&mut stats)?;
                }
            }
            progressed |=
                self.receive::<P, RECV_BATCH>(protocol, op_id, true, timed, &mut stats)? > 0;
            if self.revoke_watch.is_some() && self.is_revoked() {
                return Ok((OpEnd::Revoked, stats));
            }
            if let Some(deadline) = protocol.poll_timeout() {
                let now = self.now();
                // The protocol handles every timer due at `now`; one it re-arms for `now` again
                // waits for the next turn.
                if deadline <= now {
                    protocol.handle(now, Input::Timeout, &mut self.outbox);
                    self.after_handle(&mut stats)?;
                    progressed = true;
                }
            }
            if !self.lingering.is_empty() {
                progressed |= self.fire_lingering_timers(&mut stats)?;
            }
            self.transport.progress()?;
            if !progressed && !matches!(protocol.phase(), Phase::Done | Phase::Aborted) {
                let first_timer = protocol.poll_timeout();
                let first_timer = match self.next_lingering_timer() {
                    Some(at) => Some(first_timer.map_or(at, |t| t.min(at))),
                    None => first_timer,
                };
                if first_timer.is_none() {
                    // The transport reads the clock only if nothing arrives at once.
                    self.transport.wait_within(limit, &mut deadline)?;
                } else {
                    let op_deadline = *deadline.get_or_insert_with(|| Instant::now() + limit);
                    let next_timer =
                        first_timer.map(|t| Duration::from_nanos(t.0.saturating_sub(self.now().0)));
                    let until_deadline = op_deadline.saturating_duration_since(Instant::now());
                    let timeout = next_timer.map_or(until_deadline, |t| t.min(until_deadline));
                    self.transport.wait(Some(timeout))?;
                }
            }
        }
    }

    /// Hands arrived frames to the protocol; returns how many were handled. `running`: the
    /// protocol is operation `op_id`'s; otherwise no operation runs and `op_id` is the next one,
    /// whose frames are held with the later ones'. At most `BATCH` frames per call.
    fn receive<P: Protocol, const BATCH: usize>(
        &mut self,
        protocol: &mut P,
        op_id: u64,
        running: bool,
        clock: bool,
        stats: &mut OpStats,
    ) -> Result<usize, ExecError> {
        // Without a protocol that reads the time, a lingering one or a planned slowdown, frames
        // are handled at the last time read.
        let clock = clock || !self.lingering.is_empty() || self.faults.has_slowdown();
        // Split borrows: the transport lends the bytes while the protocol and outbox take them.
        let Endpoint {
            transport,
            outbox,
            me,
            early,
            early_count,
            spare_words,
            spare_lists,
            epoch,
            last_now,
            faults,
            lingering,
            era,
            era_early,
            group,
            ..
        } = self;
        let mut handled = 0;
        // One timestamp per batch, taken when its first frame is handled: frames that arrived
        // together are handled "now", and an empty poll costs no clock read.
        let mut batch_time: Option<(Time, Option<Duration>)> = None;
        transport.poll_recv(BATCH, &mut |from, bytes| {
            handled += 1;
            let (now, slow) = *batch_time.get_or_insert_with(|| {
                if !clock {
                    return (last_now.get(), None);
                }
                let elapsed = epoch.elapsed();
                let now = Time(elapsed.as_nanos() as u64);
                last_now.set(now);
                (now, faults.slowdown(elapsed))
            });
            match Frame::decode(bytes) {
                Ok(frame) if frame.header.algo == Algorithm::EraAgree as u8 && !era.is_empty() => {
                    let epoch = frame.header.op_id >> ERA_EPOCH_SHIFT;
                    let ahead = era.iter().all(|(e, _)| *e < epoch);
                    match era.iter_mut().find(|(e, _)| *e == epoch) {
                        Some((_, service)) => {
                            if let Err(error) = service.handle_frame(from, &frame, outbox) {
                                stats.rejected += 1;
                                log_rejected(from, error);
                            }
                        }
                        None if ahead && era_early.len() < MAX_EARLY_FRAMES => {
                            let words = spare_words.copy_of(bytes);
                            era_early.push((from, words, bytes.len()));
                        }
                        None => tracing::debug!(
                            from = from.0,
                            epoch,
                            "agreement of a freed communicator"
                        ),
                    }
                }
                Ok(_) if Endpoint::<T>::local(group, from.0).is_none() => {
                    tracing::debug!(
                        from = from.0,
                        "dropped a frame from outside the communicator"
                    );
                }
                Ok(frame) if running && frame.header.op_id == op_id => {
                    stats.received += 1;
                    let from = Rank(Endpoint::<T>::local(group, from.0).unwrap_or(from.0));
                    protocol.handle(now, Input::Message { from, frame }, outbox);
                    if let Some(delay) = slow {
                        std::thread::sleep(delay);
                    }
                }
                Ok(frame)
                    if (frame.header.op_id > op_id || !running && frame.header.op_id == op_id)
                        && *early_count < MAX_EARLY_FRAMES =>
                {
                    let words = spare_words.copy_of(bytes);
                    let local_from = Rank(Endpoint::<T>::local(group, from.0).unwrap_or(from.0));
                    // Peers already in that operation may need an answer now (the family says).
                    let answer = Algorithm::from_wire(frame.header.algo)
                        .and_then(Algorithm::answer_before_start);
                    if let (Some(answer), Some(local_me)) =
                        (answer, Endpoint::<T>::local(group, me.0))
                    {
                        answer(Rank(local_me), local_from, &frame.header, outbox);
                    }
                    early
                        .entry(frame.header.op_id)
                        .or_insert_with(|| spare_lists.take())
                        .push((from, words, bytes.len()));
                    *early_count += 1;
                }
                Ok(frame) if frame.header.op_id < op_id => {
                    match lingering.iter_mut().find(|l| l.op_id == frame.header.op_id) {
                        Some(l) => {
                            let from = Rank(Endpoint::<T>::local(group, from.0).unwrap_or(from.0));
                            tracing::trace!(
                                from = from.0,
                                op = l.op_id,
                                "served a finished operation"
                            );
                            l.handle(now, Input::Message { from, frame }, outbox)
                        }
                        None => {
                            tracing::debug!(
                                from = from.0,
                                "dropped a frame of a finished operation"
                            )
                        }
                    }
                }
                Ok(_) => tracing::debug!(from = from.0, "no room for a frame of a later operation"),
                Err(error) => {
                    stats.rejected += 1;
                    log_rejected(from, error);
                }
            }
        })?;
        self.after_handle(stats)?;
        if !self.lingering.is_empty() {
            let now = self.now();
            self.lingering.retain(|l| l.still_needed(now));
        }
        Ok(handled)
    }

    /// Keeps serving `protocol`, whose operation `op_id` returned, while it owes peers answers.
    pub fn linger(&mut self, op_id: u64, protocol: Box<dyn Protocol + Send>) {
        let notices = std::mem::take(&mut self.drained_notices);
        if protocol.settled() && protocol.serve_until().is_none() {
            return;
        }
        if self.lingering.len() >= MAX_LINGERING {
            let oldest = self.lingering.remove(0);
            tracing::debug!(op = oldest.op_id, "stopped serving an unsettled operation");
        }
        let mut lingering = Lingering { op_id, protocol };
        // What it sends in answer leaves with the next pass's sends.
        for world in notices {
            if let Some(rank) = Endpoint::<T>::local(&self.group, world) {
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
    fn notify_lingering(&mut self, world: u32, stats: &mut OpStats) -> Result<(), ExecError> {
        let Some(rank) = Endpoint::<T>::local(&self.group, world) else {
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
    fn fire_lingering_timers(&mut self, stats: &mut OpStats) -> Result<bool, ExecError> {
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
        self.lingering.retain(|l| l.still_needed(now));
        Ok(fired)
    }

    /// The earliest timer of a finished operation still served.
    fn next_lingering_timer(&self) -> Option<Time> {
        self.lingering
            .iter()
            .filter_map(|l| l.protocol.poll_timeout())
            .min()
    }

    /// Serves unsettled finished operations until they settle or `deadline` passes; a rank
    /// calls it before leaving the job, so that neighbours still correcting towards it hear back.
    pub fn serve_lingering(&mut self, next_op_id: u64, deadline: Instant) -> Result<(), ExecError> {
        let mut stats = OpStats::default();
        // Each turn waits at most a millisecond; the deadline bounds the loop.
        while !self.lingering.is_empty() && Instant::now() < deadline {
            for rank in self.absorb_failures() {
                self.notify_lingering(rank, &mut stats)?;
            }
            let next = next_op_id.max(self.next_op_id);
            let handled = self.receive::<_, RECV_BATCH>(
                &mut BetweenOperations,
                next,
                false,
                true,
                &mut stats,
            )?;
            let fired = self.fire_lingering_timers(&mut stats)?;
            self.transport.progress()?;
            if handled == 0 && !fired {
                self.transport.wait(Some(Duration::from_millis(1)))?;
            }
        }
        Ok(())
    }

    fn deliver<P: Protocol>(
        &mut self,
        protocol: &mut P,
        from: Rank,
        bytes: &[u8],
        op_id: u64,
        stats: &mut OpStats,
    ) {
        match Frame::decode(bytes) {
            Ok(frame) if frame.header.op_id == op_id => {
                stats.received += 1;
                protocol.handle(self.now(), Input::Message { from, frame }, &mut self.outbox);
            }
            Ok(_) => {}
            Err(error) => {
                stats.rejected += 1;
                log_rejected(from, error);
            }
        }
    }

    /// Carries out the outbox: sends (through scripted faults) and events.
    fn after_handle(&mut self, stats: &mut OpStats) -> Result<(), ExecError> {
        if self.outbox.is_empty() {
            return Ok(());
        }
        let elapsed = if self.faults.time_sensitive() {
            self.epoch.elapsed()
        } else {
            Duration::ZERO
        };
        for &event in self.outbox.events() {
            match event {
                Event::Rejected { from, error } => {
                    stats.rejected += 1;
                    log_rejected(from, error);
                }
                Event::Suspected { peer } => {
                    tracing::debug!(peer = peer.0, "the protocol took a silent peer for dead");
                    if self.telemetry_on && self.suspicions.len() < MAX_SUSPICIONS {
                        let world = match &self.group {
                            Some(members) => members.get(peer.index()).copied().unwrap_or(peer.0),
                            None => peer.0,
                        };
                        self.suspicions.push(world);
                    }
                }
                _ => {}
            }
        }
        for i in 0..self.outbox.send_count() {
            let Some((to, frame)) = self.outbox.send_at(i) else {
                continue;
            };
            // Agreement services address world ranks; protocols of a shrunk communicator
            // address member indices.
            let to = match &self.group {
                Some(members) if frame.get(3) != Some(&(Algorithm::EraAgree as u8)) => {
                    match members.get(to.index()) {
                        Some(&world) => Rank(world),
                        None => continue,
                    }
                }
                _ => to,
            };
            stats.sent += 1;
            self.sent_total += 1;
            if self.failed.contains(&to.0) {
                continue;
            }
            if let Some(bytes) = self.faults.outgoing(to, frame, elapsed, &mut self.scratch) {
                self.transport.send(to, bytes)?;
            }
        }
        self.outbox.clear();
        Ok(())
    }

    /// Waits (bounded) until queued sends have left.
    fn drain_sends(&mut self, deadline: Option<Instant>, limit: Duration) -> Result<(), ExecError> {
        if self.transport.progress()? == 0 {
            return Ok(());
        }
        let deadline = deadline.unwrap_or_else(|| Instant::now() + limit);
        let mut stats = OpStats::default();
        while self.transport.progress()? > 0 && Instant::now() < deadline {
            for world in self.absorb_failures() {
                self.notify_lingering(world, &mut stats)?;
                self.drained_notices.push(world);
            }
            self.transport.wait(Some(Duration::from_millis(1)))?;
        }
        Ok(())
    }
}

/// Stands for "no operation running" while finished operations are served: `receive` never
/// hands it a frame (those of the next operation are held as early frames, as usual).
struct BetweenOperations;

impl Protocol for BetweenOperations {
    fn handle(&mut self, _now: Time, _input: Input<'_>, _out: &mut Outbox) {}

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
    }

    fn phase(&self) -> Phase {
        Phase::Idle
    }

    fn status(&self) -> ftcoll_algos::RankStatus {
        ftcoll_algos::RankStatus::default()
    }
}

fn log_rejected(from: Rank, error: FrameError) {
    tracing::warn!(from = from.0, %error, "rejected a frame");
}
