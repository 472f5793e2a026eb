//! The simulator's main loop.

use std::collections::BTreeSet;

use ftcoll_algos::protocol::{Event, Input, LocalFault, Outbox, Phase, Protocol, StateVar};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::wire::Frame;
use ftcoll_algos::{Rank, ReduceOp, Time, ValuesRef};

use super::oracle::max_relative_error;
use super::oracle_watch::AllLiveOracle;
use super::plan::{CompiledPlan, MessageFlip, TimedFault};
use super::queue::{EventClass, EventQueue};
use super::trace::TraceHash;
use super::{
    exact_aggregate, CrashCause, CrashRecord, DetectorModel, OracleWatch, SimConfig, SimError,
    SimReport,
};
use crate::faults::{FlipTarget, MessageSelector};

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
        let plan = CompiledPlan::compile(&config.faults, n, config.ranks_per_node, config.seed)?;
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
        if self.report.events >= self.config.max_events || at > self.config.max_time {
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

    pub(super) fn is_stopped(&self, rank: Rank) -> bool {
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
        let Some(now) = self.acquire_cpu(to, at, class, event, self.config.cost.overhead_steps)
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
            return Some(false);
        }
        if self.held.get(&to).map_or(0, Vec::len) >= MAX_HELD_PER_RANK {
            // No room: neither acknowledged nor kept, as if lost.
            self.outbox.clear();
            self.report.rejected += 1;
            return Some(false);
        }
        Some(true)
    }

    /// Hands `input` to `rank` at `now` and carries out what it asks for.
    fn handle_input(&mut self, rank: u32, now: Time, input: Input<'_>) {
        let r = rank as usize;
        // A wakeup uses up the one queued for the deadline it serves.
        let armed = match input {
            Input::Timeout => None,
            _ => self.ranks[r].poll_timeout(),
        };
        self.ranks[r].handle(now, input, &mut self.outbox);
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
                    self.report.completion_steps = self.report.completion_steps.max(now.0);
                }
                Event::Rejected { .. } => self.report.rejected += 1,
                Event::FaultApplied(_) => self.report.state_flips += 1,
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
            departure += spacing;
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

    /// Re-evaluates `rank` for the all-live oracle, and stops the run once every live rank is
    /// accurate.
    fn update_all_live(&mut self, rank: u32) {
        let Some(oracle) = self.all_live.as_mut() else {
            return;
        };
        self.ranks[rank as usize].estimate(&mut self.scratch);
        oracle.update(
            rank as usize,
            max_relative_error(&self.scratch, &self.exact),
        );
        if oracle.satisfied() && self.report.oracle_stop_round.is_none() {
            self.report.oracle_stop_round = Some(self.max_round_seen);
            self.stop_requested = true;
        }
    }

    /// The all-live oracle after a crash: the rank no longer counts, and the target becomes the
    /// survivors' aggregate, against which every live rank is re-evaluated.
    fn crash_for_oracle(&mut self, rank: u32) {
        let Some(oracle) = self.all_live.as_mut() else {
            return;
        };
        oracle.remove(rank as usize);
        if self.expected_is_aggregate {
            let slots = &self.slots;
            self.exact = exact_aggregate(self.op, &self.inputs, self.input_len, |r| slots[r].alive);
        }
        for r in 0..self.report.n {
            if self.slots[r as usize].alive {
                self.update_all_live(r);
            }
        }
    }

    /// Samples the live ranks' max and median error every `history_every` steps.
    fn sample_history(&mut self, at: Time) {
        let (Some(every), Some(oracle)) = (self.config.history_every, self.all_live.as_ref())
        else {
            return;
        };
        while self.next_sample <= at.0 {
            self.report
                .history
                .push((self.next_sample, oracle.worst(), oracle.median()));
            self.next_sample += every.max(1);
        }
    }

    /// `flip-rate`: after each of the `sent` messages, with the rank's rate, one random bit of
    /// one of its flows flips (the protocol picks the flow from the drawn numbers).
    fn corrupt_at_rate(&mut self, rank: u32, now: Time, sent: usize) {
        let rate = self.plan.flip_rate(rank);
        if rate <= 0.0 {
            return;
        }
        for _ in 0..sent {
            if !self.rng.chance(rate) {
                continue;
            }
            let var = StateVar::AnyFlow {
                pick: self.rng.next_u64() as u32,
                elem: self.rng.next_u64() as u32,
            };
            let fault = LocalFault::FlipBit {
                var,
                bit: self.rng.below(64) as u32,
            };
            self.ranks[rank as usize].handle(now, Input::Fault(fault), &mut self.outbox);
            // The protocol reacts to a flip only at its next step; what it reports now is the
            // flip itself.
            for event in self.outbox.events() {
                if matches!(event, Event::FaultApplied(_)) {
                    self.report.state_flips += 1;
                }
            }
            self.outbox.clear();
        }
    }

    fn take_message_flip(&mut self, rank: u32, departure: Time) -> Option<MessageFlip> {
        let sent = self.sent_by_flipped.get_mut(&rank)?;
        let index = *sent;
        *sent += 1;
        let flips = self.plan.message_flips.get_mut(&rank)?;
        let pos = flips.iter().position(|f| match f.which {
            MessageSelector::Nth(nth) => nth == index,
            MessageSelector::AtOrAfter(at) => at.steps().is_ok_and(|t| departure.0 >= t),
        })?;
        Some(flips.remove(pos))
    }

    fn apply_message_flip(&mut self, slot: u32, target: FlipTarget) {
        let applied = target.apply(self.messages.bytes_mut(slot));
        if applied {
            self.report.message_flips += 1;
        }
    }

    fn strike(&mut self, at: Time, fault: TimedFault) {
        self.trace.mix(0xFA17 ^ at.0);
        match fault {
            TimedFault::Crash(rank) => {
                if self.slots[rank.index()].alive {
                    self.crash(rank.0, at, CrashCause::Scripted);
                    self.schedule_detection(rank.0, at);
                }
            }
            TimedFault::FlipState(rank, fault) => {
                let slot = self.slots[rank.index()];
                if slot.alive && !slot.stopped {
                    self.handle_input(rank.0, at, Input::Fault(fault));
                }
            }
            TimedFault::Cut(a, b) => {
                self.cut.insert((a.0.min(b.0), a.0.max(b.0)));
                self.report_link_failure(a.0, b.0, at);
            }
            TimedFault::Slow(rank, factor) => {
                self.slots[rank.index()].slow = factor.max(1);
                if let DetectorModel::Timeout {
                    period_steps,
                    timeout_steps,
                } = self.config.detector
                {
                    // A rank too slow to beat within the timeout looks hung to the detector.
                    if period_steps.saturating_mul(u64::from(factor)) > timeout_steps {
                        self.queue.push(
                            at.after(ftcoll_algos::Duration(timeout_steps)),
                            EventClass::Fault,
                            SimEvent::Suspect(rank.0),
                        );
                    }
                }
            }
            TimedFault::Stop(rank) => {
                let slot = &mut self.slots[rank.index()];
                if slot.alive && !slot.stopped {
                    slot.stopped = true;
                    self.schedule_detection(rank.0, at);
                }
            }
        }
    }

    /// Tells both ends of a failed link, after the detector's delay (a transport sees a broken
    /// connection as a node's heartbeats stopping); no one is told under the silent detector.
    fn report_link_failure(&mut self, a: u32, b: u32, at: Time) {
        let delay = match self.config.detector {
            DetectorModel::Perfect { delay_steps } => delay_steps,
            DetectorModel::Timeout { timeout_steps, .. } => timeout_steps,
            DetectorModel::Silent => return,
        };
        let when = at.after(ftcoll_algos::Duration(delay));
        for (to, peer) in [(a, b), (b, a)] {
            self.queue
                .push(when, EventClass::Notice, SimEvent::LinkNotice { to, peer });
        }
    }

    fn crash(&mut self, rank: u32, at: Time, cause: CrashCause) {
        self.slots[rank as usize].alive = false;
        self.crash_for_oracle(rank);
        self.trace.mix(0xDEAD ^ u64::from(rank) ^ at.0 << 32);
        self.report.crashes.push(CrashRecord {
            rank: Rank(rank),
            at,
            cause,
            noticed_at: None,
        });
    }

    /// Arranges for the detector to notice that `rank` went silent at `at`.
    fn schedule_detection(&mut self, rank: u32, at: Time) {
        match self.config.detector {
            DetectorModel::Perfect { delay_steps } => {
                // A stopped process is alive: a perfect detector of crashes never reports it.
                if !self.slots[rank as usize].alive {
                    let when = at.after(ftcoll_algos::Duration(delay_steps));
                    self.queue
                        .push(when, EventClass::Fault, SimEvent::Suspect(rank));
                }
            }
            DetectorModel::Timeout {
                period_steps,
                timeout_steps,
            } => {
                // The last heartbeat went out up to one period before the silence began.
                let jitter = if period_steps > 0 {
                    self.rng.below(period_steps)
                } else {
                    0
                };
                let when = Time((at.0 + timeout_steps).saturating_sub(jitter).max(at.0));
                self.queue
                    .push(when, EventClass::Fault, SimEvent::Suspect(rank));
            }
            DetectorModel::Silent => {}
        }
    }

    fn notify_survivors(&mut self, failed: u32, at: Time) {
        if let Some(record) = self
            .report
            .crashes
            .iter_mut()
            .rev()
            .find(|c| c.rank.0 == failed)
        {
            if record.noticed_at.is_some() {
                return;
            }
            record.noticed_at = Some(at);
        }
        for to in 0..self.report.n {
            if to != failed && self.slots[to as usize].alive {
                self.queue
                    .push(at, EventClass::Notice, SimEvent::Notice { to, failed });
            }
        }
    }

    fn check_oracle(&mut self, rank: u32, round: u32) {
        let Some(stop) = self.config.oracle_stop else {
            return;
        };
        if let Some(max_round) = stop.max_round {
            if round + 1 >= max_round && self.report.oracle_stop_round.is_none() {
                self.report.stopped_by_budget = true;
                self.report.oracle_stop_round = Some(round + 1);
                self.stop_requested = true;
                return;
            }
        }
        if stop.watch != OracleWatch::Rank(Rank(rank)) || self.report.oracle_stop_round.is_some() {
            return;
        }
        self.ranks[rank as usize].estimate(&mut self.scratch);
        if max_relative_error(&self.scratch, &self.exact) <= stop.eps {
            self.report.oracle_stop_round = Some(round + 1);
            self.stop_requested = true;
        }
    }

    fn stop_all(&mut self, at: Time) {
        self.report.completion_steps = self.report.completion_steps.max(at.0);
        for rank in 0..self.report.n {
            let slot = self.slots[rank as usize];
            if slot.alive && !slot.stopped {
                self.ranks[rank as usize].handle(at, Input::Stop, &mut self.outbox);
                // Whatever a stopped rank still wants to send is moot: the run is over.
                self.outbox.clear();
            }
        }
    }

    fn finish(&mut self) {
        let mut worst: f64 = 0.0;
        let mut any = false;
        for (r, rank) in self.ranks.iter().enumerate() {
            let status = rank.status();
            self.report.rounds = self.report.rounds.max(status.iteration);
            match rank.phase() {
                Phase::Aborted => self.report.aborted += 1,
                _ if !self.slots[r].alive => {}
                Phase::Done => {
                    self.report.completed += 1;
                    if rank.has_result() {
                        rank.estimate(&mut self.scratch);
                        worst = worst.max(max_relative_error(&self.scratch, &self.exact));
                        any = true;
                    }
                }
                Phase::Idle | Phase::Running => self.report.incomplete += 1,
            }
        }
        self.report.max_rel_error = if any { worst } else { f64::INFINITY };
        self.report.admissible_error = self.admissible_error();
        self.report.trace_hash = self.trace.value();
    }

    /// The error against the nearest admissible aggregate: survivors plus a subset of the crashed.
    fn admissible_error(&mut self) -> Option<f64> {
        let mut crashed: Vec<u32> = self.report.crashes.iter().map(|c| c.rank.0).collect();
        crashed.sort_unstable();
        crashed.dedup();
        if !self.expected_is_aggregate
            || crashed.is_empty()
            || crashed.len() > super::MAX_ADMISSIBLE_CRASHES
        {
            return None;
        }
        let mut results = Vec::new();
        for (r, rank) in self.ranks.iter().enumerate() {
            if self.slots[r].alive && rank.phase() == Phase::Done && rank.has_result() {
                let mut result = Vec::new();
                rank.estimate(&mut result);
                results.push(result);
            }
        }
        if results.is_empty() {
            return None;
        }
        let mut best = f64::INFINITY;
        for subset in 0u32..1 << crashed.len() {
            let included = |r: usize| match crashed.binary_search(&(r as u32)) {
                Ok(i) => subset & (1 << i) != 0,
                Err(_) => true,
            };
            let expected = exact_aggregate(self.op, &self.inputs, self.input_len, included);
            let worst = results
                .iter()
                .map(|result| max_relative_error(result, &expected))
                .fold(0.0, f64::max);
            best = best.min(worst);
        }
        Some(best)
    }
}
