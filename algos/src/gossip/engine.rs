//! The gossip engine: one rank's state, the schedule, failure handling and faults; the rules
//! live in `push_sum`, `push_flow` and `pcf`.

use crate::protocol::{
    AbortReason, Counters, Detail, Event, Input, LocalFault, Outbox, Phase, Protocol, RankStatus,
    StateVar, TimerId, TimerTable,
};
use crate::rank::Rank;
use crate::rng::SimRng;
use crate::time::Time;
use crate::values::ReduceOp;
use crate::wire::{Frame, FrameError, FrameHeader};

use super::flows::FlowTable;
use super::mass::Layout;
use super::permutation::{cycle_partners, permutation_partners};
use super::real::Real;
use super::stop::StopState;
use super::{GossipConfig, GossipKind, Rule, Schedule, SumForm};

/// The push timer.
pub(super) const TICK: TimerId = TimerId { kind: 1, index: 0 };

/// Stream id of a rank's partner draws (xor the rank).
const PARTNER_STREAM: u64 = 0x6055_1900_0000_0000;

/// Most draws before falling back to a scan when many neighbours are excluded.
const PARTNER_DRAWS: u32 = 8;

/// What a scheduled push leaves of the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pushed {
    /// Pushes go on.
    More,
    /// The stopping rule holds: the rank is done, settled.
    Quiet,
    /// The push budget is spent: the rank is done, not settled.
    Budget,
}

/// PCF's per-neighbour control variables (003 Fig. 5: c_ij and r_ij); unused by the other rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct PcfTag {
    /// Index (0 or 1) of the active flow.
    pub active: u8,
    /// How often the roles changed.
    pub round: u32,
}

/// One rank of a gossip reduction.
#[derive(Clone, Debug)]
pub struct Gossip<T: Real> {
    pub(super) config: GossipConfig,
    pub(super) layout: Layout,
    pub(super) tau: f64,
    rng: SimRng,
    pub(super) phase: Phase,
    pub(super) iteration: u32,
    pub(super) counters: Counters,
    /// Peers never to talk to again (crashed, or behind a failed link), sorted.
    pub(super) excluded: Vec<u32>,
    /// Crashed ranks this rank was told of.
    crashed: u32,
    pub(super) timers: TimerTable,
    /// Push-Sum: the current value-weight pair. Flow rules: the initial mass v_i.
    pub(super) own: Vec<T>,
    /// Flows per neighbour: `width` elements (PF family) or active, passive and cancelled
    /// (`3·width`, PCF).
    pub(super) flows: FlowTable<T, PcfTag>,
    /// PCF's sum of flows phi_i.
    pub(super) phi: Vec<T>,
    /// PCF: mass cancelled with neighbours behind failed links, which stays in phi.
    pub(super) retired: Vec<T>,
    /// PCF: `retired` per neighbour, taken out again if that neighbour crashes later.
    pub(super) retired_by: FlowTable<T>,
    /// Peers excluded for a failed link only, sorted: their crash is still news.
    cut: Vec<u32>,
    /// PCF: the mass each live link cancelled last (see `settle`).
    pub(super) last_cancelled: FlowTable<T>,
    /// PCF: failed links whose half-done cancellation may need undoing, one per link.
    pub(super) settlements: Vec<super::settle::Settlement<T>>,
    /// Scratch for estimates and outgoing flows.
    pub(super) scratch: Vec<T>,
    /// Checksum detections (checked rules).
    pub(super) detections: u32,
    /// The stopping rule's state.
    pub(super) stop: StopState,
    /// When the rank completed, or last answered a push since: it stays reachable for
    /// `linger` after that.
    pub(super) done_at: Option<Time>,
    /// The estimate at completion: the result, which what arrives later (the flows a neighbour
    /// still pushes) no longer changes.
    result: Vec<f64>,
    /// The ratio `x / w` (unscaled) of the last mass whose weight was trusted (see `trust.rs`).
    pub(super) trusted_ratio: Vec<f64>,
    /// A finished rank told of a failure pushes on its schedule again (see `help.rs`).
    pub(super) helping: bool,
    /// Finished on the stopping rule or with no neighbour left (see [`Detail::Gossip`]).
    settled: bool,
    /// Set only while a helping rank makes its own push: that push is a `Push`, which the
    /// partner answers, where a finished rank's answers are `Finished`, which nobody answers.
    pub(super) starting_exchange: bool,
}

impl<T: Real> Gossip<T> {
    /// A rank that waits for [`Input::Start`].
    pub fn new(config: GossipConfig) -> Gossip<T> {
        let layout = Layout {
            len: 0,
            checked: config.rule.checked(),
        };
        Gossip {
            tau: config.tau.unwrap_or(T::DEFAULT_TAU),
            rng: SimRng::for_stream(config.seed, PARTNER_STREAM ^ u64::from(config.rank.0)),
            config,
            layout,
            phase: Phase::Idle,
            iteration: 0,
            counters: Counters::default(),
            excluded: Vec::new(),
            crashed: 0,
            timers: TimerTable::default(),
            own: Vec::new(),
            flows: FlowTable::new(0),
            phi: Vec::new(),
            retired: Vec::new(),
            retired_by: FlowTable::new(0),
            cut: Vec::new(),
            last_cancelled: FlowTable::new(0),
            settlements: Vec::new(),
            scratch: Vec::new(),
            detections: 0,
            result: Vec::new(),
            trusted_ratio: Vec::new(),
            stop: StopState::default(),
            done_at: None,
            helping: false,
            settled: false,
            starting_exchange: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &GossipConfig {
        &self.config
    }

    /// Pushes made so far.
    pub fn iterations(&self) -> u32 {
        self.iteration
    }

    /// Corrupted mass vectors this rank detected by checksum.
    pub fn detections(&self) -> u32 {
        self.detections
    }

    /// The mass layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// This rank's current mass (its estimate's numerator and denominator), widened: Push-Sum's
    /// pair, or v_i minus the flows. Summed over ranks and in-flight Push-Sum messages it is the
    /// conserved total, which is what checkers verify.
    pub fn mass(&self, dst: &mut Vec<f64>) {
        let mut e = Vec::new();
        self.current_mass(&mut e);
        dst.clear();
        dst.extend(e.iter().map(|x| x.to_f64()));
    }

    /// The flow towards `peer` (the active one first for PCF), widened.
    pub fn flow(&self, peer: Rank) -> Option<Vec<f64>> {
        let flow = self.flows.get(peer)?;
        Some(flow.iter().map(|x| x.to_f64()).collect())
    }

    /// Peers this rank holds flows for.
    pub fn flow_peers(&self) -> Vec<Rank> {
        self.flows.iter().map(|(p, _, _)| p).collect()
    }

    /// Holds the stopping rule back at the next push: the driver has not heard over some link
    /// for a while and has not declared it failed yet. Mass pushed over a cut link is lost until
    /// the failure notice returns it; a network that drained mass early settles on a biased
    /// ratio (0.5% off on 64 ranks with two links cut from the start), and a rank that stopped
    /// on it would never see the notice. The rank's quiet age, sent with each push, holds its
    /// neighbours back as well.
    pub fn hold_stop(&mut self) {
        self.stop.hold();
    }

    /// Whether `peer` is excluded (reported crashed, or its link failed).
    pub fn is_excluded(&self, peer: Rank) -> bool {
        self.excluded.binary_search(&peer.0).is_ok()
    }

    fn choosable(&self, peer: Rank) -> bool {
        !self.is_excluded(peer)
    }

    fn exclude(&mut self, peer: Rank) -> bool {
        match self.excluded.binary_search(&peer.0) {
            Ok(_) => false,
            Err(i) => {
                self.excluded.insert(i, peer.0);
                true
            }
        }
    }

    /// The live rank count this rank knows of: what a sum's average is multiplied by.
    pub fn live_count(&self) -> u32 {
        self.config.size().saturating_sub(self.crashed).max(1)
    }

    /// Peers excluded after a crash or a failed link.
    pub(super) fn excluded_count(&self) -> usize {
        self.excluded.len()
    }

    pub(super) fn scale(&self) -> f64 {
        match (self.config.op, self.config.sum_form) {
            (ReduceOp::Sum, SumForm::LiveCount) => f64::from(self.live_count()),
            _ => 1.0,
        }
    }

    /// This rank's initial weight (see [`SumForm`]).
    pub(super) fn initial_weight(&self) -> f64 {
        match (self.config.op, self.config.sum_form) {
            (ReduceOp::Sum, SumForm::RankZeroWeight) if self.config.rank.0 != 0 => 0.0,
            _ => 1.0,
        }
    }

    /// Element `j` of the current mass, computed in the same order as [`Self::current_mass`]
    /// (so the two agree bit for bit) without allocating: the simulator's oracle asks every
    /// rank for its estimate after every step.
    pub(super) fn mass_element(&self, j: usize) -> T {
        let width = self.layout.width();
        match self.config.rule {
            Rule::PushSum => self.own[j],
            Rule::PushFlow | Rule::LocalCorrection | Rule::CooperativeCorrection => self
                .flows
                .iter()
                .fold(self.own[j], |acc, (_, flow, _)| acc - flow[j]),
            Rule::PushCancelFlow => self.own[j] - self.phi[j],
            Rule::PushCancelFlowTolerant => self
                .flows
                .iter()
                .fold(self.own[j] - self.phi[j], |acc, (_, slot, _)| {
                    acc - slot[j] - slot[width + j]
                }),
        }
    }

    /// The estimate the current mass gives (a finished rank's result is the one it had at
    /// completion; this is what its mass says now).
    pub(super) fn current_estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        if self.own.len() <= self.layout.len {
            return;
        }
        let w = self.mass_element(self.layout.weight()).to_f64();
        let scale = self.scale();
        dst.extend((0..self.layout.len).map(|k| self.mass_element(k).to_f64() / w * scale));
    }

    /// The current mass `e_i` into `dst`, in working precision.
    pub(super) fn current_mass(&self, dst: &mut Vec<T>) {
        match self.config.rule {
            Rule::PushSum => {
                dst.clear();
                dst.extend_from_slice(&self.own);
            }
            Rule::PushFlow | Rule::LocalCorrection | Rule::CooperativeCorrection => {
                self.flow_estimate(dst)
            }
            Rule::PushCancelFlow | Rule::PushCancelFlowTolerant => self.pcf_estimate(dst),
        }
    }

    /// Checks what must hold at this rank after every step when no fault was injected: every
    /// flow and the estimate pass their checksums (checked rules), PCF's phi equals what its
    /// form says it sums (all flows and cancelled mass as printed, cancelled mass when
    /// tolerant) up to round-off, and all state is finite. Checkers call it after every step.
    pub fn local_invariants(&self) -> Result<(), String> {
        let mut e = Vec::new();
        self.current_mass(&mut e);
        if e.iter().any(|x| !x.to_f64().is_finite()) {
            return Err(format!("rank {}: non-finite mass", self.config.rank));
        }
        if self.layout.corrupted(&e, self.tau) {
            return Err(format!(
                "rank {}: estimate fails its checksum",
                self.config.rank
            ));
        }
        for (peer, flow, _) in self.flows.iter() {
            if self.config.rule.checked() && self.layout.corrupted(flow, self.tau) {
                return Err(format!(
                    "rank {}: flow to {peer} fails its checksum (defect {:e} > tau {:e}; {:?})",
                    self.config.rank,
                    self.layout.checksum_defect(flow),
                    self.tau,
                    flow.iter().map(|x| x.to_f64()).collect::<Vec<_>>()
                ));
            }
        }
        if matches!(
            self.config.rule,
            Rule::PushCancelFlow | Rule::PushCancelFlowTolerant
        ) {
            self.pcf_phi_invariant()?;
        }
        Ok(())
    }

    fn start(&mut self, now: Time, data: &[f64]) {
        if self.phase != Phase::Idle {
            return;
        }
        self.layout.len = data.len();
        let width = self.layout.width();
        self.layout
            .initial(data, self.initial_weight(), &mut self.own);
        let slot = match self.config.rule {
            Rule::PushCancelFlow | Rule::PushCancelFlowTolerant => 3 * width,
            _ => width,
        };
        self.flows = FlowTable::new(slot);
        self.phi = vec![T::ZERO; width];
        self.retired = vec![T::ZERO; width];
        self.retired_by = FlowTable::new(width);
        self.last_cancelled = FlowTable::new(width);
        self.phase = Phase::Running;
        self.keep_trusted_ratio();
        let first = match self.config.schedule {
            Schedule::Async { period } => now.0 + 1 + self.rng.below(period.0.max(1)),
            schedule => now.0.div_ceil(schedule.period().0) * schedule.period().0,
        };
        self.timers.arm(TICK, Time(first));
    }

    pub(super) fn next_tick(&mut self, now: Time) -> Time {
        let period = self.config.schedule.period().0;
        match self.config.schedule {
            Schedule::Async { .. } => {
                Time(now.0 + (period / 2).max(1) + self.rng.below(period + 1))
            }
            _ => Time((now.0 / period + 1) * period),
        }
    }

    /// The partner of this push, if any live one exists.
    pub(super) fn partner(&mut self, now: Time) -> Option<Rank> {
        let me = self.config.rank;
        let n = self.config.size();
        let round = now.0 / self.config.schedule.period().0;
        let chosen = match self.config.schedule {
            Schedule::Permutation { .. } => {
                Rank(permutation_partners(n, self.config.seed, round, me.0).send_to)
            }
            Schedule::Cycle { .. } => {
                Rank(cycle_partners(n, self.config.seed, round, me.0).send_to)
            }
            Schedule::Async { .. } | Schedule::Rounds { .. } => return self.random_neighbour(),
        };
        (chosen != me && self.choosable(chosen)).then_some(chosen)
    }

    /// A uniformly random neighbour that is not excluded: a few draws, then a scan from a
    /// random start (bounded by the degree) when most neighbours are excluded.
    fn random_neighbour(&mut self) -> Option<Rank> {
        let topology = self.config.topology;
        let me = self.config.rank;
        let degree = topology.degree(me);
        if degree == 0 {
            return None;
        }
        for _ in 0..PARTNER_DRAWS {
            let i = self.rng.below(u64::from(degree)) as u32;
            if let Some(peer) = topology.neighbour(me, i) {
                if self.choosable(peer) {
                    return Some(peer);
                }
            }
        }
        let start = self.rng.below(u64::from(degree)) as u32;
        (0..degree)
            .filter_map(|k| topology.neighbour(me, (start + k) % degree))
            .find(|peer| self.choosable(*peer))
    }

    /// The push timer fired.
    fn on_tick(&mut self, now: Time, out: &mut Outbox) {
        if self.phase == Phase::Done && self.helping {
            self.help_tick(now, out);
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        self.settle_tick(out);
        let partner = self.partner(now);
        // A permutation round may pair a rank with itself or a dead rank, a later one with a
        // live rank: there only a rank with no live rank besides it settles without a partner.
        if partner.is_none() && (!self.config.schedule.is_permutation() || self.alone()) {
            // Every neighbour finished, failed or sits behind a failed link: nothing can change
            // this rank's estimate any more.
            self.settled = true;
            self.complete(now, out);
            return;
        }
        let pushed = self.scheduled_push(partner, out);
        out.emit(Event::RoundDone {
            round: self.iteration - 1,
        });
        match pushed {
            Pushed::More => {
                let at = self.next_tick(now);
                self.timers.arm(TICK, at);
            }
            Pushed::Quiet | Pushed::Budget => {
                self.settled = pushed == Pushed::Quiet;
                self.complete(now, out);
            }
        }
    }

    /// One push on this rank's schedule, and whether it was the last.
    pub(super) fn scheduled_push(&mut self, partner: Option<Rank>, out: &mut Outbox) -> Pushed {
        self.iteration += 1;
        let quiet = self.quiet_at_push();
        self.push_to(partner, out);
        self.keep_trusted_ratio();
        if quiet {
            Pushed::Quiet
        } else if self.iteration >= self.config.max_iterations {
            Pushed::Budget
        } else {
            Pushed::More
        }
    }

    /// Whether the stopping rule holds at the push about to be made. It is evaluated before the
    /// push (which leaves the estimate as it is) so that the push carries the quiet age it
    /// results in: sent before, every age would arrive one push behind, and ranks taking the
    /// smaller age from each other would hold each other back for ever.
    fn quiet_at_push(&mut self) -> bool {
        let Some(mut rule) = self.config.stop else {
            return false;
        };
        // Ranks excluded after a crash or a failed link send nothing more: the distinct
        // senders a rank waits for are among the others.
        let reachable = (self.config.size() as usize).saturating_sub(1 + self.excluded_count());
        rule.senders = rule.senders.min(reachable as u32);
        let mut estimate = Vec::new();
        self.current_estimate(&mut estimate);
        self.stop.after_push(&rule, &estimate)
    }

    fn complete(&mut self, now: Time, out: &mut Outbox) {
        if self.phase == Phase::Running {
            self.done_at = Some(now);
            let mut result = Vec::new();
            self.reported_estimate(&mut result);
            self.result = result;
            self.phase = Phase::Done;
            self.timers.disarm(TICK);
            out.emit(Event::Completed);
        }
    }

    /// Frames a push header for this configuration.
    pub(super) fn header(&self) -> FrameHeader {
        // A finished rank's pushes are answers, which are not answered in turn; a helping
        // rank's own pushes start exchanges.
        let kind = if self.phase == Phase::Done && !self.starting_exchange {
            GossipKind::Finished
        } else {
            GossipKind::Push
        };
        FrameHeader::new(
            self.config.algo_id(),
            kind as u8,
            self.config.op_id,
            self.config.rank,
            // The stopping rule's quiet age (see `stop`); unused without the rule.
            self.stop.quiet_age,
        )
    }

    /// Queues `payload` for `to`, with `header`.
    pub(super) fn send(&mut self, to: Rank, header: FrameHeader, payload: &[T], out: &mut Outbox) {
        self.counters.messages_sent += 1;
        out.send(to, header, T::payload(payload));
    }

    fn on_message(&mut self, now: Time, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        if frame.header.kind == GossipKind::Settle as u8 && self.config.rule.cancels() {
            match self.accept_from(from, &frame) {
                Ok(()) => self.on_settle(now, from, &frame, out),
                Err(error) => {
                    self.counters.frames_rejected += 1;
                    out.emit(Event::Rejected { from, error });
                }
            }
            return;
        }
        let values = match self.accept(from, &frame) {
            Ok(values) => values,
            Err(error) => {
                self.counters.frames_rejected += 1;
                out.emit(Event::Rejected { from, error });
                return;
            }
        };
        self.counters.messages_received += 1;
        if self.config.stop.is_some() {
            self.stop.heard(frame.header.step, from);
        }
        match self.config.rule {
            Rule::PushSum => self.ps_receive(values),
            Rule::PushFlow | Rule::LocalCorrection | Rule::CooperativeCorrection => {
                self.pf_receive(from, values, out)
            }
            Rule::PushCancelFlow | Rule::PushCancelFlowTolerant => {
                self.pcf_receive(from, &frame.header, values)
            }
        }
        if self.phase == Phase::Done && frame.header.kind == GossipKind::Push as u8 {
            // Someone still runs: stay while pushes keep coming, or it would push into the void
            // (losing half its mass each time) once this rank left.
            self.done_at = Some(now);
            // A finished rank keeps mixing for ranks still running, but only when asked: it
            // answers a push with a push (see [`GossipKind::Finished`]), which ages what it
            // knows like any push.
            self.stop.aged();
            self.push_to(Some(from), out);
        }
    }

    /// One push of the rule towards `partner`.
    fn push_to(&mut self, partner: Option<Rank>, out: &mut Outbox) {
        match self.config.rule {
            Rule::PushSum => self.ps_push(partner, out),
            Rule::PushFlow | Rule::LocalCorrection | Rule::CooperativeCorrection => {
                self.pf_push(partner, out)
            }
            Rule::PushCancelFlow | Rule::PushCancelFlowTolerant => self.pcf_push(partner, out),
        }
    }

    /// Checks a frame: this algorithm and operation, a push, from a peer this rank may talk to,
    /// with a payload of the local shape.
    fn accept<'f>(&self, from: Rank, frame: &Frame<'f>) -> Result<&'f [T], FrameError> {
        if frame.header.kind != GossipKind::Push as u8
            && frame.header.kind != GossipKind::Finished as u8
        {
            return Err(FrameError::UnknownKind {
                algo: self.config.algo_id(),
                kind: frame.header.kind,
            });
        }
        self.accept_from(from, frame)?;
        let unexpected = |what| FrameError::Unexpected { from: from.0, what };
        let values = T::from_payload(frame.values()?)
            .ok_or(unexpected("payload precision differs from the local one"))?;
        let expected = match self.config.rule {
            Rule::PushCancelFlow | Rule::PushCancelFlowTolerant => 2 * self.layout.width(),
            _ => self.layout.width(),
        };
        if values.len() != expected {
            return Err(unexpected("payload length differs from the local mass"));
        }
        Ok(values)
    }

    /// Checks what every frame must satisfy: this algorithm and operation, from a running
    /// peer this rank may talk to.
    fn accept_from(&self, from: Rank, frame: &Frame<'_>) -> Result<(), FrameError> {
        frame.check(self.config.algo_id(), self.config.op_id)?;
        let unexpected = |what| FrameError::Unexpected { from: from.0, what };
        if frame.header.source != from.0 {
            return Err(unexpected("header source differs from the sending rank"));
        }
        if self.phase == Phase::Idle || self.phase == Phase::Aborted {
            return Err(unexpected("not running"));
        }
        let neighbour = if self.config.schedule.is_permutation() {
            from.0 < self.config.size() && from != self.config.rank
        } else {
            self.config.topology.are_neighbours(self.config.rank, from)
        };
        if !neighbour {
            return Err(unexpected("sender is not a neighbour"));
        }
        if self.is_excluded(from) {
            // Applying it would bring back mass exchanged with a failed rank or over a failed
            // link, which the flows dropped.
            return Err(unexpected("sender is excluded (failed rank or link)"));
        }
        Ok(())
    }

    /// The link to `peer` failed (a settle frame from it says so).
    pub(super) fn on_link_failed(&mut self, now: Time, peer: Rank) {
        self.on_peer_lost(now, peer, false);
    }

    fn on_peer_lost(&mut self, now: Time, peer: Rank, crashed: bool) {
        if crashed {
            // A rank whose link failed earlier may crash later: nothing is left to settle.
            self.drop_settlement(peer);
        }
        if peer == self.config.rank || peer.0 >= self.config.size() {
            return;
        }
        let was_cut = self.cut.binary_search(&peer.0);
        if !self.exclude(peer) {
            // Excluded before: news only if its link had failed and it has now crashed.
            if let (true, Ok(i)) = (crashed, was_cut) {
                self.cut.remove(i);
                self.crashed += 1;
                self.counters.failures_noticed += 1;
                self.pcf_forget_retired(peer);
                self.lost_mass_changed(now);
            }
            return;
        }
        if !crashed {
            if let Err(i) = was_cut {
                self.cut.insert(i, peer.0);
            }
        }
        if crashed {
            self.crashed += 1;
            self.counters.failures_noticed += 1;
        }
        match self.config.rule {
            Rule::PushSum => {}
            Rule::PushFlow | Rule::LocalCorrection | Rule::CooperativeCorrection => {
                self.flows.remove(peer);
            }
            Rule::PushCancelFlow | Rule::PushCancelFlowTolerant => {
                if !crashed && self.phase != Phase::Idle {
                    self.open_settlement(peer);
                }
                self.pcf_drop(peer, crashed)
            }
        }
        self.lost_mass_changed(now);
    }

    /// The survivors' mass is not what it was: every estimate must settle again, so a notice
    /// is news like an unsettled push, also at ranks far from the lost peer whose estimates the
    /// change has not reached yet.
    fn lost_mass_changed(&mut self, now: Time) {
        if let Some(rule) = self.config.stop {
            self.stop.unsettle(&rule);
        }
        self.keep_trusted_ratio();
        self.help(now);
    }

    fn on_fault(&mut self, fault: LocalFault, out: &mut Outbox) {
        let LocalFault::FlipBit { var, bit } = fault;
        let weight = self.layout.weight();
        let target: Option<&mut T> = if self.phase == Phase::Idle || bit >= T::BITS {
            None
        } else {
            match var {
                StateVar::Value { elem } => {
                    ((elem as usize) < self.layout.len).then(|| &mut self.own[elem as usize])
                }
                StateVar::Weight => self.own.get_mut(weight),
                StateVar::Flow { peer, elem } => self
                    .flows
                    .get_mut(peer)
                    .and_then(|(flow, _)| flow.get_mut(elem as usize)),
                StateVar::AnyFlow { .. } => None,
            }
        };
        let (target, bit) = match (target, var) {
            (None, StateVar::AnyFlow { pick, elem }) if self.phase != Phase::Idle => {
                // PCF's slots also keep the mass cancelled with the neighbour; a flow variable
                // is one of its two live flows.
                let span = match self.config.rule {
                    Rule::PushCancelFlow | Rule::PushCancelFlowTolerant => 2 * self.layout.width(),
                    _ => self.layout.width(),
                };
                let count = self.flows.len();
                let chosen = (count > 0)
                    .then(|| self.flows.iter_mut().nth(pick as usize % count))
                    .flatten();
                let x = chosen.and_then(|(_, flow, _)| flow.get_mut(elem as usize % span.max(1)));
                (x, bit % T::BITS)
            }
            (target, _) => (target, bit),
        };
        match target {
            Some(x) => {
                *x = x.flip(bit);
                self.counters.faults_applied += 1;
                out.emit(Event::FaultApplied(fault));
            }
            None => out.emit(Event::FaultIgnored(fault)),
        }
    }
}

impl<T: Real> Protocol for Gossip<T> {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Start { data } => {
                let values: Vec<f64> = match data {
                    crate::values::ValuesRef::F64(v) => v.to_vec(),
                    crate::values::ValuesRef::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
                    _ => Vec::new(),
                };
                self.start(now, &values);
            }
            Input::Message { from, frame } => self.on_message(now, from, frame, out),
            // TICK is the only timer, and it re-arms later than `now`: one take suffices.
            Input::Timeout => {
                if self.timers.take_due(now) == Some(TICK) {
                    self.on_tick(now, out);
                }
            }
            Input::PeerFailed { peer } => self.on_peer_lost(now, peer, true),
            Input::LinkFailed { peer } => self.on_peer_lost(now, peer, false),
            Input::Fault(fault) => self.on_fault(fault, out),
            Input::Stop => match self.phase {
                Phase::Running => self.complete(now, out),
                Phase::Idle => {
                    self.phase = Phase::Aborted;
                    out.emit(Event::Aborted(AbortReason::Stopped));
                }
                Phase::Done | Phase::Aborted => {}
            },
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.timers.next_deadline()
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        if self.phase == Phase::Done {
            dst.clear();
            dst.extend_from_slice(&self.result);
            return;
        }
        self.reported_estimate(dst);
    }

    fn settled(&self) -> bool {
        // A helping rank keeps pushing on its timer: drivers must keep serving it.
        !self.helping
    }

    fn phase(&self) -> Phase {
        self.phase
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.local_invariants()
    }

    fn serve_until(&self) -> Option<Time> {
        let linger = self.config.linger;
        (linger.0 > 0)
            .then_some(self.done_at)
            .flatten()
            .map(|at| at.after(linger))
    }

    fn inspect(&self) -> crate::inspect::Inspection {
        self.inspection()
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: self.phase,
            iteration: self.iteration,
            counters: self.counters,
            detail: Detail::Gossip {
                flows: self.flows.len() as u32,
                excluded: self.excluded.len() as u32,
                detections: self.detections,
                settled: self.settled,
            },
        }
    }
}
