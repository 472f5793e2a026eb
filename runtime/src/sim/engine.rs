//! The simulator's main loop.

mod faults;
mod report;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use ftcoll_algos::protocol::{Event, Input, Outbox, Protocol};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::wire::Frame;
use ftcoll_algos::{Rank, ReduceOp, Time, ValuesRef};

use super::oracle_watch::AllLiveOracle;
use super::plan::{CompiledPlan, MessageFlip, TimedFault};
use super::queue::{EventClass, EventQueue};
use super::trace::TraceHash;
use super::{exact_aggregate, CrashCause, OracleWatch, SimConfig, SimError, SimReport};

/// Timeouts in a row that change nothing, leave the deadline in the past and send nothing,
/// after which a run ends as truncated (a protocol's bug; the real executor ends such an
/// operation by its time limit).
const MAX_IDLE_TIMEOUTS: u32 = 100_000;

/// A simulator event.
#[derive(Clone, Copy, Debug)]
enum SimEvent {
    Start(u32),
    Deliver {
        to: u32,
        from: u32,
        slot: u32,
    },
    /// A rank's `poll_timeout` showed this time when the wakeup was queued; stale if it no
    /// longer shows a deadline at or before it.
    Timer {
        rank: u32,
    },
    Notice {
        to: u32,
        failed: u32,
    },
    /// A failed link is reported to one of its ends.
    LinkNotice {
        to: u32,
        peer: u32,
    },
    Fault(TimedFault),
    /// The timeout detector's verdict on a silent rank.
    Suspect(u32),
}

/// Per-rank bookkeeping of the simulator, kept small: 16 bytes a rank.
#[derive(Clone, Copy, Debug, Default)]
struct RankSlot {
    /// The rank's CPU is busy (sending, receiving) until this step.
    busy_until: u64,
    /// CPU cost multiplier (1 = normal).
    slow: u32,
    alive: bool,
    stopped: bool,
    /// The rank has handled [`Input::Start`]; before that, FTCO frames get 004 App. B treatment.
    started: bool,
}

/// In-flight frames: reusable word buffers, so steady-state sends do not allocate.
#[derive(Debug, Default)]
struct MessageStore {
    buffers: Vec<(Vec<u64>, usize)>,
    free: Vec<u32>,
}

impl MessageStore {
    fn insert(&mut self, words: &[u64], len: usize) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                let entry = &mut self.buffers[slot as usize];
                entry.0.clear();
                entry.0.extend_from_slice(words);
                entry.1 = len;
                slot
            }
            None => {
                self.buffers.push((words.to_vec(), len));
                (self.buffers.len() - 1) as u32
            }
        }
    }

    fn bytes_mut(&mut self, slot: u32) -> &mut [u8] {
        let (words, len) = &mut self.buffers[slot as usize];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(words);
        &mut bytes[..*len]
    }

    fn take(&mut self, slot: u32) -> (Vec<u64>, usize) {
        std::mem::take(&mut self.buffers[slot as usize])
    }

    fn give_back(&mut self, slot: u32, buffer: (Vec<u64>, usize)) {
        self.buffers[slot as usize] = buffer;
        self.free.push(slot);
    }

    /// Puts a frame back into its slot, which stays in use (a frame held for a later delivery).
    fn give_back_held(&mut self, slot: u32, buffer: (Vec<u64>, usize)) {
        self.buffers[slot as usize] = buffer;
    }
}

/// Most frames held for one rank that has not started (004 App. B); more are rejected.
const MAX_HELD_PER_RANK: usize = 1 << 16;

/// Stream id of the simulator's own draws (loss, detector jitter).
const NETWORK_STREAM: u64 = 0x4E37_0000_0000_0002;

/// A simulated run of one protocol over `n` ranks.
pub struct Simulation<P: Protocol> {
    config: SimConfig,
    ranks: Vec<P>,
    slots: Vec<RankSlot>,
    inputs: Vec<f64>,
    input_len: usize,
    op: ReduceOp,
    exact: Vec<f64>,
    plan: CompiledPlan,
    /// Messages sent so far by ranks with pending message flips.
    sent_by_flipped: std::collections::BTreeMap<u32, u64>,
    /// Answers ranks sent before they started (004 App. B), by rank; only ranks that sent one.
    answered_early: std::collections::BTreeMap<u32, u64>,
    cut: BTreeSet<(u32, u32)>,
    queue: EventQueue<SimEvent>,
    messages: MessageStore,
    rng: SimRng,
    outbox: Outbox,
    scratch: Vec<f64>,
    trace: TraceHash,
    report: SimReport,
    stop_requested: bool,
    /// False once [`Simulation::set_expected`] replaced the aggregate.
    expected_is_aggregate: bool,
    /// Frames (sender, message slot) that arrived at a rank before its start and wait for it
    /// (004 App. B); only ranks with held frames have an entry.
    held: std::collections::BTreeMap<u32, Vec<(u32, u32)>>,
    /// The all-live-ranks oracle, when the run has one.
    all_live: Option<AllLiveOracle>,
    /// Most rounds any rank completed so far.
    max_round_seen: u32,
    /// Timeouts in a row after which the rank's deadline was still due and unchanged: a
    /// protocol whose timer stays in the past would otherwise fire at one instant for ever.
    idle_timeouts: u32,
    /// Next virtual time at which the error history is sampled.
    next_sample: u64,
    /// Debug builds check each protocol's invariants after every step of a run without bit
    /// flips (which break them by design).
    check_invariants: bool,
}

impl<P: Protocol> Simulation<P> {
    /// Sets up a run: `ranks[r]` is rank r's protocol instance, `inputs` holds `input_len`
    /// values per rank (rank-major), and `op` defines the exact aggregate the oracle uses.
    pub fn new(
        config: SimConfig,
        ranks: Vec<P>,
        inputs: Vec<f64>,
        input_len: usize,
        op: ReduceOp,
    ) -> Result<Simulation<P>, SimError> {
        let n = u32::try_from(ranks.len()).map_err(|_| SimError::Setup("more than 2^32 ranks"))?;
        if n == 0 {
            return Err(SimError::Setup("a run needs at least one rank"));
        }
        if inputs.len() != ranks.len() * input_len {
            return Err(SimError::Setup(
                "inputs must hold input_len values per rank",
            ));
        }
        let mut plan =
            CompiledPlan::compile(&config.faults, n, config.ranks_per_node, config.seed)?;
        if let Some(starts) = &config.start_times {
            if starts.len() != ranks.len() {
                return Err(SimError::Setup("start_times must hold one time per rank"));
            }
            plan.start_times = Some(starts.clone());
        }
        let check_invariants = cfg!(debug_assertions)
            && !config.faults.iter().any(|f| {
                matches!(
                    f,
                    crate::faults::FaultSpec::FlipMessage { .. }
                        | crate::faults::FaultSpec::FlipState { .. }
                        | crate::faults::FaultSpec::FlipRate { .. }
                )
            });
        let all_live = config
            .oracle_stop
            .filter(|stop| stop.watch == OracleWatch::AllLive)
            .map(|stop| AllLiveOracle::new(n, stop.eps));
        let exact = exact_aggregate(op, &inputs, input_len, |_| true);
        let mut queue = EventQueue::default();
        for (at, fault) in &plan.timed {
            queue.push(*at, EventClass::Fault, SimEvent::Fault(*fault));
        }
        for rank in 0..n {
            let at = plan.start_times.as_ref().map_or(0, |t| t[rank as usize]);
            queue.push(Time(at), EventClass::Start, SimEvent::Start(rank));
        }
        let slot = RankSlot {
            slow: 1,
            alive: true,
            ..RankSlot::default()
        };
        let report = SimReport {
            n,
            seed: config.seed,
            max_rel_error: f64::INFINITY,
            ..SimReport::default()
        };
        Ok(Simulation {
            rng: SimRng::for_stream(config.seed, NETWORK_STREAM),
            cut: plan.initially_cut.clone(),
            sent_by_flipped: plan.message_flips.keys().map(|&r| (r, 0)).collect(),
            answered_early: std::collections::BTreeMap::new(),
            config,
            slots: vec![slot; n as usize],
            ranks,
            inputs,
            input_len,
            op,
            exact,
            plan,
            queue,
            messages: MessageStore::default(),
            outbox: Outbox::new(),
            scratch: Vec::new(),
            trace: TraceHash::default(),
            report,
            stop_requested: false,
            expected_is_aggregate: true,
            held: std::collections::BTreeMap::new(),
            all_live,
            max_round_seen: 0,
            idle_timeouts: 0,
            next_sample: 0,
            check_invariants,
        })
    }

    /// The protocol instances (for inspection after a run).
    pub fn ranks(&self) -> &[P] {
        &self.ranks
    }

    /// The exact aggregate over all inputs.
    pub fn exact(&self) -> &[f64] {
        &self.exact
    }

    /// The reduction operator of the run.
    pub fn op(&self) -> ReduceOp {
        self.op
    }

    /// Replaces the result every rank should reach (a broadcast's is the root's input, not an
    /// aggregate).
    pub fn set_expected(&mut self, expected: Vec<f64>) {
        self.exact = expected;
        self.expected_is_aggregate = false;
    }

    /// Whether rank `r` is alive.
    pub fn is_alive(&self, rank: Rank) -> bool {
        self.slots.get(rank.index()).is_some_and(|s| s.alive)
    }

    /// Runs until no event is pending, or a bound is hit, and reports.
    pub fn run(&mut self) -> SimReport {
        let wall = std::time::Instant::now();
        // Each pass handles one event; the event and time bounds end the loop.
        while self.step_one() {}
        self.finish();
        self.report.wall_s = wall.elapsed().as_secs_f64();
        self.report.clone()
    }

    /// Handles the next event; false when none is left or a bound was hit.
    pub(super) fn step_one(&mut self) -> bool {
        let Some((at, class, event)) = self.queue.pop() else {
            return false;
        };
        if self.report.events >= self.config.max_events
            || at > self.config.max_time
            || self.idle_timeouts >= MAX_IDLE_TIMEOUTS
        {
            self.report.truncated = true;
            return false;
        }
        self.report.events += 1;
        self.sample_history(at);
        self.dispatch(at, class, event);
        if self.stop_requested {
            self.stop_requested = false;
            self.stop_all(at);
        }
        true
    }

    /// Time of the next pending event.
    pub(super) fn peek_time(&self) -> Option<Time> {
        self.queue.peek_time()
    }

    /// The final report of a run driven by [`Simulation::run_until`].
    pub(super) fn finish_report(&mut self) -> SimReport {
        self.finish();
        self.report.clone()
    }

    /// The report's counters so far.
    pub(super) fn report_ref(&self) -> &SimReport {
        &self.report
    }

    pub(super) fn ranks_per_node(&self) -> u32 {
        self.config.ranks_per_node
    }

    pub(super) fn seed(&self) -> u64 {
        self.config.seed
    }

    /// How many frames `rank` answered before it started (004 App. B's provisional ACKs, which
    /// the simulator sends for it): messages the rank sent that its own instance never saw.
    pub fn answered_before_start(&self, rank: Rank) -> u64 {
        self.answered_early.get(&rank.0).copied().unwrap_or(0)
    }

    /// Whether `rank` is stopped (hung by a `stop` fault, and not fenced since).
    pub fn is_stopped(&self, rank: Rank) -> bool {
        self.slots.get(rank.index()).is_some_and(|s| s.stopped)
    }

    /// Stops checking protocol invariants (a bit flip was injected: it breaks them by design).
    pub(super) fn skip_invariant_checks(&mut self) {
        self.check_invariants = false;
    }

    /// Queues a fault at `at`.
    pub(super) fn schedule_fault(&mut self, at: Time, fault: TimedFault) {
        self.queue
            .push(at, EventClass::Fault, SimEvent::Fault(fault));
    }

    /// Messages `rank` sent so far, counted only for ranks with message flips planned; a rank
    /// gets its count from now on.
    pub(super) fn messages_sent_by(&mut self, rank: u32) -> u64 {
        *self.sent_by_flipped.entry(rank).or_insert(0)
    }

    pub(super) fn add_message_flip(&mut self, rank: u32, flip: MessageFlip) {
        self.plan.message_flips.entry(rank).or_default().push(flip);
    }

    /// Loss rate of one sender (`Some`) or of every sender.
    pub(super) fn set_drop_rate(&mut self, rank: Option<u32>, rate: f64) {
        match rank {
            Some(rank) => {
                self.plan.drop_rank.insert(rank, rate);
            }
            None => self.plan.drop_all = rate,
        }
    }

    /// Flow-corruption rate of one rank (`Some`) or of every rank.
    pub(super) fn set_flip_rate(&mut self, rank: Option<u32>, rate: f64) {
        match rank {
            Some(rank) => {
                self.plan.flip_rate_rank.insert(rank, rate);
            }
            None => self.plan.flip_rate_all = rate,
        }
    }

    fn dispatch(&mut self, at: Time, class: EventClass, event: SimEvent) {
        match event {
            SimEvent::Start(rank) => {
                if let Some(now) = self.acquire_cpu(rank, at, class, event, 0) {
                    self.slots[rank as usize].started = true;
                    self.trace.mix(0x5747 ^ u64::from(rank) ^ now.0 << 32);
                    let len = self.input_len;
                    let r = rank as usize;
                    let data = &self.inputs[r * len..(r + 1) * len];
                    let armed = self.ranks[r].poll_timeout();
                    self.ranks[r].handle(
                        now,
                        Input::Start {
                            data: ValuesRef::F64(data),
                        },
                        &mut self.outbox,
                    );
                    self.after_handle(rank, now, armed);
                    // What arrived before the start is read from the queue now, one frame per
                    // receive overhead, as if it arrived at this instant.
                    for (from, slot) in self.held.remove(&rank).unwrap_or_default() {
                        let event = SimEvent::Deliver {
                            to: rank,
                            from,
                            slot,
                        };
                        self.queue.push(now, EventClass::Deliver, event);
                    }
                }
            }
            SimEvent::Deliver { to, from, slot } => self.deliver(at, class, to, from, slot),
            SimEvent::Timer { rank } => {
                // Re-armed later or disarmed since: the current deadline has its own wakeup.
                let due = self.ranks[rank as usize]
                    .poll_timeout()
                    .is_some_and(|deadline| deadline <= at);
                if !due {
                    return;
                }
                if let Some(now) = self.acquire_cpu(rank, at, class, event, 0) {
                    self.trace.mix(0x7133 ^ u64::from(rank));
                    self.handle_input(rank, now, Input::Timeout);
                }
            }
            SimEvent::Notice { to, failed } => {
                if let Some(now) = self.acquire_cpu(to, at, class, event, 0) {
                    self.report.notices += 1;
                    self.trace
                        .mix(0x0071 ^ u64::from(to) ^ u64::from(failed) << 32);
                    self.handle_input(to, now, Input::PeerFailed { peer: Rank(failed) });
                }
            }
            SimEvent::LinkNotice { to, peer } => {
                if let Some(now) = self.acquire_cpu(to, at, class, event, 0) {
                    self.report.notices += 1;
                    self.trace
                        .mix(0x11AC ^ u64::from(to) ^ u64::from(peer) << 32);
                    self.handle_input(to, now, Input::LinkFailed { peer: Rank(peer) });
                }
            }
            SimEvent::Fault(fault) => self.strike(at, fault),
            SimEvent::Suspect(rank) => {
                if self.slots[rank as usize].alive {
                    self.crash(rank, at, CrashCause::Fenced);
                }
                self.notify_survivors(rank, at);
            }
        }
    }

    /// The time at which `rank` handles an input arriving at `at` that costs `cost` steps of its
    /// CPU, or `None` if the rank is dead or stopped, or busy (then the event is re-queued for
    /// when it is free, keeping global time order).
    fn acquire_cpu(
        &mut self,
        rank: u32,
        at: Time,
        class: EventClass,
        event: SimEvent,
        cost: u64,
    ) -> Option<Time> {
        let slot = &mut self.slots[rank as usize];
        if !slot.alive || slot.stopped {
            return None;
        }
        if slot.busy_until > at.0 {
            self.queue.push(Time(slot.busy_until), class, event);
            return None;
        }
        let now = at.0 + cost * u64::from(slot.slow);
        slot.busy_until = now;
        self.report.sim_time_steps = self.report.sim_time_steps.max(now);
        Some(Time(now))
    }

    fn deliver(&mut self, at: Time, class: EventClass, to: u32, from: u32, slot_id: u32) {
        let link = (from.min(to), from.max(to));
        let target = self.slots[to as usize];
        if !target.alive || target.stopped || self.cut.contains(&link) {
            if self.cut.contains(&link) {
                self.report.dropped_cut += 1;
            } else {
                self.report.dropped_dead += 1;
            }
            let buffer = self.messages.take(slot_id);
            self.messages.give_back(slot_id, buffer);
            return;
        }
        let event = SimEvent::Deliver {
            to,
            from,
            slot: slot_id,
        };
        let Some(now) = self.acquire_cpu(to, at, class, event, self.config.cost.receive_steps())
        else {
            return;
        };
        let buffer = self.messages.take(slot_id);
        let bytes: &[u8] = bytemuck::cast_slice(&buffer.0);
        let bytes = &bytes[..buffer.1];
        self.trace
            .mix(now.0 ^ u64::from(to) << 20 ^ u64::from(from) << 42);
        self.trace.mix_bytes(bytes);
        if !target.started {
            if let Some(hold) = self.before_start(to, from, bytes) {
                if hold {
                    // Kept in its slot until the rank starts.
                    self.messages.give_back_held(slot_id, buffer);
                    self.held.entry(to).or_default().push((from, slot_id));
                } else {
                    self.messages.give_back(slot_id, buffer);
                }
                let armed = self.ranks[to as usize].poll_timeout();
                self.after_handle(to, now, armed);
                return;
            }
        }
        let armed = self.ranks[to as usize].poll_timeout();
        match Frame::decode(bytes) {
            Ok(frame) => {
                self.report.delivered += 1;
                let input = Input::Message {
                    from: Rank(from),
                    frame,
                };
                self.ranks[to as usize].handle(now, input, &mut self.outbox);
            }
            Err(_) => self.report.rejected += 1,
        }
        self.messages.give_back(slot_id, buffer);
        self.after_handle(to, now, armed);
    }

    /// 004 App. B in the simulator: a rank that has not started yet answers FTCO DATA and
    /// KEEPALIVE with an ACK ([`ftcoll_algos::ftco::ack_before_start`]), keeps the DATA for its
    /// start and drops the answered KEEPALIVE. `None` for any other frame, which is handed to
    /// the protocol as usual; `Some(true)` to hold the frame, `Some(false)` when it is consumed.
    fn before_start(&mut self, to: u32, from: u32, bytes: &[u8]) -> Option<bool> {
        let header = Frame::decode(bytes).ok()?.header;
        if !ftcoll_algos::ftco::ack_before_start(Rank(to), Rank(from), &header, &mut self.outbox) {
            return None;
        }
        if header.kind == ftcoll_algos::ftco::FtcoKind::KeepAlive as u8 {
            *self.answered_early.entry(to).or_insert(0) += 1;
            return Some(false);
        }
        if self.held.get(&to).map_or(0, Vec::len) >= MAX_HELD_PER_RANK {
            // No room: neither acknowledged nor kept, as if lost.
            self.outbox.clear();
            self.report.rejected += 1;
            return Some(false);
        }
        *self.answered_early.entry(to).or_insert(0) += 1;
        Some(true)
    }

    /// Hands `input` to `rank` at `now` and carries out what it asks for.
    fn handle_input(&mut self, rank: u32, now: Time, input: Input<'_>) {
        let r = rank as usize;
        // A wakeup uses up the one queued for the deadline it serves.
        let before = self.ranks[r].poll_timeout();
        let timeout = matches!(input, Input::Timeout);
        let armed = if timeout { None } else { before };
        self.ranks[r].handle(now, input, &mut self.outbox);
        let stuck = timeout
            && self.outbox.is_empty()
            && self.ranks[r].poll_timeout() == before
            && before.is_some_and(|deadline| deadline <= now);
        self.idle_timeouts = if stuck { self.idle_timeouts + 1 } else { 0 };
        self.after_handle(rank, now, armed);
    }

    /// Carries out what a rank's outbox asks for, and clears it; queues a wakeup if the rank's
    /// `poll_timeout` differs from `armed`, its value before the input, which (by induction)
    /// already has a wakeup queued. One queue entry per new deadline keeps 2^20 ranks cheap;
    /// wakeups made stale by a later re-arm are skipped when they come up.
    fn after_handle(&mut self, rank: u32, now: Time, armed: Option<Time>) {
        // Taken out for the duration so that sends can borrow it while the simulator mutates
        // itself; put back (with its capacity) at the end.
        let mut outbox = std::mem::take(&mut self.outbox);
        for &event in outbox.events() {
            match event {
                Event::RoundDone { round } => {
                    self.report.total_rounds += 1;
                    self.max_round_seen = self.max_round_seen.max(round + 1);
                    self.check_oracle(rank, round);
                }
                Event::Completed => {
                    let finish = self.config.cost.finish_of(now.0);
                    self.report.completion_steps = self.report.completion_steps.max(finish);
                }
                Event::Rejected { .. } => self.report.rejected += 1,
                Event::FaultApplied(_) => self.report.state_flips += 1,
                Event::Suspected { peer } => self.fence(peer.0, now),
                _ => {}
            }
        }
        let deadline = self.ranks[rank as usize].poll_timeout();
        if let Some(at) = deadline.filter(|_| deadline != armed) {
            let at = at.max(now);
            self.queue
                .push(at, EventClass::Timer, SimEvent::Timer { rank });
        }
        let cost = self.config.cost;
        let slow = u64::from(self.slots[rank as usize].slow);
        let spacing = cost.send_spacing() * slow;
        let mut departure = now.0;
        for i in 0..outbox.send_count() {
            let Some((to, words, len)) = outbox.send_words_at(i) else {
                continue;
            };
            departure += spacing + cost.bytes_steps(len) * slow;
            self.report.messages += 1;
            assert!(
                to.0 < self.report.n,
                "protocol addressed rank {to} outside the run"
            );
            let flip = self.take_message_flip(rank, Time(departure));
            let rate = self.plan.drop_rate(rank);
            if rate > 0.0 && self.rng.chance(rate) {
                self.report.dropped_loss += 1;
                continue;
            }
            let slot = self.messages.insert(words, len);
            if let Some(flip) = flip {
                self.apply_message_flip(slot, flip.target);
            }
            // In round mode (o = 0) a slowed rank's messages take `slow` rounds.
            let latency = if cost.overhead_steps == 0 {
                cost.latency_steps * slow
            } else {
                cost.latency_steps
            };
            let arrival = Time(departure + latency);
            let event = SimEvent::Deliver {
                to: to.0,
                from: rank,
                slot,
            };
            self.queue.push(arrival, EventClass::Deliver, event);
        }
        let sent = outbox.send_count();
        let slot = &mut self.slots[rank as usize];
        slot.busy_until = slot.busy_until.max(departure);
        outbox.clear();
        self.outbox = outbox;
        self.corrupt_at_rate(rank, now, sent);
        self.update_all_live(rank);
        if self.check_invariants {
            if let Err(why) = self.ranks[rank as usize].check_invariants() {
                panic!(
                    "invariant broken after a step at {now:?} (seed {}): {why}",
                    self.config.seed
                );
            }
        }
    }
}
