//! The FTCO state machine: Algs. 1-4 of 004 with the fixes listed in the module docs.

mod inbound;
mod inspect;
mod notices;
mod outbound;
mod schedule;
mod timeouts;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::protocol::{
    AbortReason, Counters, Detail, Event, Input, Outbox, Phase, Protocol, RankStatus, TimerId,
    TimerTable,
};
use crate::rank::{Rank, RankSet};
use crate::rng::SimRng;
use crate::time::{Duration, Time};
use crate::values::{finish_estimate, Dtype, ReduceOp, Values, ValuesRef};
use crate::wire::FrameHeader;

use super::knowledge::PeerKnowledge;
use super::pieces::{Piece, PieceSet};
use super::ranges::Contributors;
use super::view::View;
use super::{Collective, FtcoConfig, FtcoKind};

/// Timer: the earliest deadline for an ACK (Alg. 4, first part).
const TIMER_ACK: TimerId = TimerId { kind: 1, index: 0 };
/// Timer: the earliest time a KEEPALIVE probe is due (f_ETA passed, Alg. 4, third part).
const TIMER_PROBE: TimerId = TimerId { kind: 2, index: 0 };
/// The end of the earliest notice hold (see [`Ftco::notice_hold`]).
const TIMER_NOTICE: TimerId = TimerId { kind: 3, index: 0 };
/// Timer: the next step of 004's step model ([`super::FtcoConfig::step_model`]).
const TIMER_STEP: TimerId = TimerId { kind: 4, index: 0 };
/// Largest service distance RSD returns (deeper than any tree of 2^32 ranks with k >= 2).
const MAX_SERVICE_DISTANCE: u32 = 64;

/// What this rank knows about one rank it talks to.
#[derive(Clone, Debug)]
struct Peer {
    /// Tree distance from this rank (for the service distance).
    distance: u32,
    /// f_timeout(me, peer).
    timeout: Duration,
    /// Sequence number of the last DATA or KEEPALIVE sent (0: none yet).
    seq_sent: u32,
    /// Highest sequence number the peer acknowledged.
    seq_acked: u32,
    /// LastSent of Alg. 3 and 4.
    last_sent: Option<Time>,
    /// Sequence number of the last DATA sent (0: none).
    last_data_seq: u32,
    /// The peer answered with a provisional ACK (it has not started the operation): it is
    /// alive, but what we sent it is not taken yet. At the timeout it is probed, not buried.
    provisional: bool,
    /// DATA from this peer arrived (Arrived of Alg. 2).
    arrived: bool,
    /// Contributors exchanged with this peer and owed to it (to send only what it lacks).
    known: PeerKnowledge,
    /// The final result went to this peer.
    result_sent: bool,
    /// ToACK: the sequence number to acknowledge.
    to_ack: Option<u32>,
}

impl Peer {
    fn outstanding(&self) -> bool {
        self.seq_acked < self.seq_sent
    }
}

/// A validated frame waiting in the inbound queue.
#[derive(Clone, Debug)]
struct Inbound {
    from: u32,
    seq: u32,
    body: Body,
}

#[derive(Clone, Debug)]
enum Body {
    Data {
        result: bool,
        /// More parts of this DATA follow ([`FLAG_MORE`]).
        more: bool,
        pieces: Vec<Piece>,
        /// The ranks the sender knew dead ([`FLAG_DEAD_SET`]), on DATA between peer roots.
        seen_dead: Option<Contributors>,
    },
    KeepAlive,
    Ack {
        seq: u32,
        provisional: bool,
    },
}

impl Body {
    fn kind(&self) -> FtcoKind {
        match self {
            Body::Data { .. } => FtcoKind::Data,
            Body::KeepAlive => FtcoKind::KeepAlive,
            Body::Ack { .. } => FtcoKind::Ack,
        }
    }
}

/// One rank of an FTCO broadcast, reduce or allreduce.
#[derive(Clone, Debug)]
pub struct Ftco {
    config: FtcoConfig,
    view: View,
    me: u32,
    phase: Phase,
    rng: SimRng,
    start: Time,
    /// Until when this finished rank must stay reachable (see [`Protocol::serve_until`]).
    serve_until: Option<Time>,
    dead: RankSet,
    /// `dead` as ranges, as peer-root DATA carries it.
    dead_ranges: Contributors,
    /// Ranks reported dead by a failure notice ([`Input::PeerFailed`]): certainly dead, unlike
    /// ranks this rank only suspects by a timeout.
    noticed: RankSet,
    /// Peer roots reported dead by a notice before their DATA came, and until when this rank
    /// waits for that DATA before it fixes its result (see [`Ftco::notice_hold`]).
    notice_holds: Vec<(u32, Time)>,
    /// Up and Down of 004, ascending, recomputed from the tree and `dead`.
    up: Vec<u32>,
    down: Vec<u32>,
    /// Descendants that reached this rank past dead ranks it had not detected yet.
    extra_down: RankSet,
    /// Member of the allreduce root set, or rank 0 of broadcast and reduce.
    at_top: bool,
    /// Size of the allreduce root set in this rank's view (1 for broadcast and reduce).
    root_count: u32,
    /// The ACK timer fired and the expired deadlines are not all handled yet. Deadlines are
    /// judged only then, never while handling a message: the answer a deadline waits for
    /// may be the next frame of the same batch, or (in the simulator) queued behind this
    /// rank's own sends, and both executors hand a rank its messages before its timers.
    ack_timer_fired: bool,
    peers: BTreeMap<u32, Peer>,
    /// The peers whose `to_ack` is set, ascending (Alg. 4 answers the first it may serve).
    acks_due: BTreeSet<u32>,
    /// See [`Ftco::rebuild_result_targets`].
    result_targets: Vec<u32>,
    /// How many of `result_targets`, in order, hold the result (a target sent it stays so).
    results_sent_prefix: usize,
    pieces: PieceSet,
    /// Element type and length every value must have (unknown at a broadcast's receivers).
    shape: Option<(Dtype, usize)>,
    result: Option<Piece>,
    /// Up when the result was fixed: these peer roots compute it themselves.
    final_peers: Vec<u32>,
    queue: VecDeque<Inbound>,
    /// The longest the inbound queue has been until this rank finished (004 Table 2's
    /// "Max. Len.").
    queue_peak: usize,
    /// In the step model: the step this rank last acted in (one action per step).
    last_step: Option<Time>,
    timers: TimerTable,
    disd_step: u64,
    counters: Counters,
    conflicts: u64,
}

impl Ftco {
    /// A new instance, idle until [`Input::Start`].
    pub fn new(config: FtcoConfig) -> Ftco {
        let me = config.rank.0;
        let view = View {
            tree: config.tree,
            collective: config.collective,
        };
        let n = config.tree.size();
        let dead = RankSet::from_unsorted(
            config
                .known_dead
                .iter()
                .map(|r| r.0)
                .filter(|&r| r != me && r < n)
                .collect(),
        );
        Ftco {
            rng: SimRng::for_stream(config.seed, u64::from(me)),
            config,
            view,
            me,
            phase: Phase::Idle,
            start: Time::ZERO,
            serve_until: None,
            dead_ranges: dead.as_slice().iter().copied().collect(),
            dead,
            noticed: RankSet::default(),
            notice_holds: Vec::new(),
            up: Vec::new(),
            down: Vec::new(),
            extra_down: RankSet::default(),
            at_top: false,
            root_count: 1,
            ack_timer_fired: false,
            peers: BTreeMap::new(),
            acks_due: BTreeSet::new(),
            result_targets: Vec::new(),
            results_sent_prefix: 0,
            pieces: PieceSet::default(),
            shape: None,
            result: None,
            final_peers: Vec::new(),
            queue: VecDeque::new(),
            queue_peak: 0,
            last_step: None,
            timers: TimerTable::default(),
            disd_step: 0,
            counters: Counters::default(),
            conflicts: 0,
        }
    }

    /// The final result and its contributors, once known.
    pub fn result(&self) -> Option<&Piece> {
        self.result.as_ref()
    }

    /// The longest the inbound queue has been until this rank finished, counting every frame
    /// waiting at once (after it finished, 004's rank has returned and reads nothing).
    pub fn queue_peak(&self) -> usize {
        self.queue_peak
    }

    /// Ranks this rank knows dead, ascending.
    pub fn known_dead(&self) -> &[u32] {
        self.dead.as_slice()
    }

    /// Arriving pieces refused because they overlapped held contributions in part.
    pub fn conflicts(&self) -> u64 {
        self.conflicts
    }

    /// The current Up and Down sets.
    pub fn neighbours(&self) -> (&[u32], &[u32]) {
        (&self.up, &self.down)
    }

    fn has_up_phase(&self) -> bool {
        self.config.collective != Collective::Bcast
    }

    fn has_down_phase(&self) -> bool {
        self.config.collective != Collective::Reduce
    }

    fn start(&mut self, now: Time, data: ValuesRef<'_>, out: &mut Outbox) {
        if self.phase != Phase::Idle {
            return;
        }
        self.phase = Phase::Running;
        self.start = now;
        let mut value = data.to_owned_values();
        if matches!(value, Values::RankIds(_)) {
            self.abort(AbortReason::Stopped, out);
            return;
        }
        if self.config.op == crate::values::ReduceOp::Average {
            value.push_weight();
        }
        let own = Piece {
            contributors: Contributors::single(self.me),
            value,
        };
        match self.config.collective {
            Collective::Bcast if self.me == 0 => {
                self.shape = Some((own.value.dtype(), own.value.len()));
                self.result = Some(own);
            }
            Collective::Bcast => {}
            Collective::Reduce | Collective::Allreduce => {
                self.shape = Some((own.value.dtype(), own.value.len()));
                self.pieces.absorb(own, false);
            }
        }
        self.recompute_view(out);
        self.advance(now, out);
    }

    fn abort(&mut self, reason: AbortReason, out: &mut Outbox) {
        if self.phase == Phase::Running || self.phase == Phase::Idle {
            self.phase = Phase::Aborted;
            out.emit(Event::Aborted(reason));
            self.timers.disarm(TIMER_ACK);
            self.timers.disarm(TIMER_PROBE);
            self.timers.disarm(TIMER_NOTICE);
            self.timers.disarm(TIMER_STEP);
        }
    }

    /// f_tree applied to every known death: Up, Down and whether this rank is at the top.
    fn recompute_view(&mut self, out: &mut Outbox) {
        self.up = self.view.up(self.me, &self.dead);
        let mut down = self.view.down(self.me, &self.dead);
        down.extend(
            self.extra_down
                .as_slice()
                .iter()
                .filter(|&&r| !self.dead.contains(r)),
        );
        down.sort_unstable();
        down.dedup();
        self.down = down;
        self.at_top = self.view.at_top(self.me, &self.dead);
        self.rebuild_result_targets();
        self.refresh_timeouts();
        let orphaned =
            self.config.collective != Collective::Allreduce && !self.at_top && self.up.is_empty();
        let needs_root = match self.config.collective {
            Collective::Bcast => self.result.is_none(),
            _ => self.phase == Phase::Running,
        };
        if orphaned && needs_root {
            self.abort(AbortReason::PeerFailed(Rank(0)), out);
        }
    }

    fn peer(&mut self, x: u32) -> &mut Peer {
        let (view, me) = (self.view, self.me);
        let timeout = if self.peers.contains_key(&x) {
            Duration(0)
        } else {
            self.timeout_for(x)
        };
        self.peers.entry(x).or_insert_with(|| Peer {
            distance: view.distance(me, x),
            timeout,
            seq_sent: 0,
            seq_acked: 0,
            last_sent: None,
            last_data_seq: 0,
            provisional: false,
            arrived: false,
            known: PeerKnowledge::default(),
            result_sent: false,
            to_ack: None,
        })
    }

    /// Records that `x`'s DATA or KEEPALIVE `seq` is to be acknowledged.
    fn owe_ack(&mut self, x: u32, seq: u32) {
        let peer = self.peer(x);
        peer.to_ack = Some(seq.max(peer.to_ack.unwrap_or(0)));
        self.acks_due.insert(x);
    }

    fn distance(&self, x: u32) -> u32 {
        match self.peers.get(&x) {
            Some(p) => p.distance,
            None => self.view.distance(self.me, x),
        }
    }

    fn should_handle(&self, x: u32, service_distance: u32) -> bool {
        service_distance == 0 || self.distance(x) == service_distance
    }

    fn arrived(&self, x: u32) -> bool {
        self.peers.get(&x).is_some_and(|p| p.arrived)
    }

    /// Down ⊆ Arrived, where a rank whose input we already hold (through a piece of a rank that
    /// died after sending it) counts as arrived.
    fn down_satisfied(&self) -> bool {
        self.down
            .iter()
            .all(|&y| self.arrived(y) || self.pieces.cover().contains(y))
    }

    /// Whether `x` may lack some of the contributions we hold (see [`PeerKnowledge::lacks`]).
    fn needs_subtree(&self, x: u32) -> bool {
        match self.peers.get(&x) {
            Some(p) => p.known.lacks(&self.pieces, self.at_top),
            None => !self.pieces.cover().is_empty(),
        }
    }

    /// Ranks the final result goes to: Down, and for a top rank the peer roots that do not
    /// compute the result themselves. Kept as a list (both steps of Alg. 1's loop read it, and
    /// a rank of a large root set has hundreds of peers), rebuilt where Up, Down, the top flag
    /// or the final peers change; the prefix of targets known served restarts with it.
    fn rebuild_result_targets(&mut self) {
        let mut targets = std::mem::take(&mut self.result_targets);
        targets.clear();
        targets.extend_from_slice(&self.down);
        // The largest subtree first: its result has the longest way to go. Ascending rank
        // order would serve a k-nomial node's leaves first and put (children - 1) sends on the
        // critical path of every level.
        let tree = self.view.tree;
        targets.sort_by_key(|&x| (std::cmp::Reverse(tree.subtree_size(Rank(x))), x));
        if self.at_top {
            // `final_peers` is a subset of the ascending Up.
            let fixed = &self.final_peers;
            targets.extend(self.up.iter().filter(|x| fixed.binary_search(x).is_err()));
        }
        self.result_targets = targets;
        self.results_sent_prefix = 0;
    }

    /// When the frame just queued leaves: after one send overhead for it and for each frame
    /// queued before it in this step. The ACK timeout runs from there. A rank that sends its
    /// result to 40 children at once sends the last one 40 overheads later; timing that one
    /// from the first would take a leaf that answered at once for dead.
    fn departure(&self, now: Time, out: &Outbox) -> Time {
        let queued = out.send_count() as u64;
        now.after(Duration(self.costs().overhead.0.saturating_mul(queued)))
    }

    fn send_control(&mut self, x: u32, kind: FtcoKind, aux: u64, out: &mut Outbox) -> u32 {
        let seq = match kind {
            FtcoKind::Ack => 0,
            _ => {
                let peer = self.peer(x);
                peer.seq_sent += 1;
                peer.seq_sent
            }
        };
        let header = FrameHeader::new(
            self.config.collective.algo(),
            kind as u8,
            self.config.op_id,
            Rank(self.me),
            seq,
        )
        .with_aux(aux);
        out.send(Rank(x), header, ValuesRef::Empty);
        self.counters.messages_sent += 1;
        seq
    }

    /// Alg. 3 generalised: one send of DATA, or none. Returns whether it sent.
    fn tree_progress(&mut self, now: Time, out: &mut Outbox) -> bool {
        if self.has_up_phase() && self.result.is_none() {
            if !self.down_satisfied() {
                return false;
            }
            // A step counts only if it sent: a peer with nothing to send it must not make the
            // loop spin (it would end in a timer re-armed at `now`, forever).
            // Peer roots in turn from the next rank up, so that each member of a root set
            // gets one DATA per step instead of all of them at the same step.
            let me = self.me;
            let mut wanting: Vec<u32> = self
                .up
                .iter()
                .copied()
                .filter(|&x| self.needs_subtree(x))
                .collect();
            wanting.sort_unstable_by_key(|&x| (x < me, x));
            // In the step model a top rank's DATA to its peer roots still leaves in one
            // action, one send overhead each (the simulator keeps the rank busy for them):
            // consistency needs a root that dies to have sent its piece to every peer root or
            // to none, as the runtime's sends for one input leave together.
            let together = self.config.step_model && self.at_top;
            let mut sent = false;
            for x in wanting {
                sent |= self.send_data(x, now, out);
                if sent && !together {
                    return true;
                }
            }
            if sent {
                return true;
            }
        }
        if self.result.is_none() {
            let all_peers = self.up.iter().all(|&x| self.arrived(x)) && !self.held_by_notice(now);
            if self.at_top && self.has_up_phase() && all_peers {
                self.result = self.pieces.combined(self.config.op);
                self.final_peers = self.up.clone();
                self.rebuild_result_targets();
            }
            if self.result.is_none() {
                return false;
            }
        }
        if !self.has_down_phase() {
            return false;
        }
        let from = self.results_sent_prefix.min(self.result_targets.len());
        let unserved = self.result_targets[from..]
            .iter()
            .position(|x| !self.peers.get(x).is_some_and(|p| p.result_sent));
        self.results_sent_prefix = from + unserved.unwrap_or(self.result_targets.len() - from);
        match unserved {
            Some(_) => self.send_data(self.result_targets[self.results_sent_prefix], now, out),
            None => false,
        }
    }

    /// Whether the traversal is complete at this rank (Alg. 3 line 15), ignoring ACKs.
    fn traversal_complete(&self) -> bool {
        match self.config.collective {
            Collective::Reduce if !self.at_top => {
                self.down_satisfied()
                    && !self.up.is_empty()
                    && self.up.iter().all(|&x| !self.needs_subtree(x))
            }
            Collective::Reduce => self.result.is_some(),
            Collective::Bcast | Collective::Allreduce => {
                self.result.is_some()
                    && self
                        .result_targets
                        .iter()
                        .all(|x| self.peers.get(x).is_some_and(|p| p.result_sent))
            }
        }
    }

    /// Alg. 2: handles the first queued message of the highest-priority kind from a rank at
    /// the service distance. Returns whether it handled one.
    fn handle_queue(&mut self, service_distance: u32, now: Time, out: &mut Outbox) -> bool {
        for kind in [FtcoKind::Data, FtcoKind::KeepAlive, FtcoKind::Ack] {
            let found = self.queue.iter().position(|m| {
                m.body.kind() == kind && self.should_handle(m.from, service_distance)
            });
            if let Some(message) = found.and_then(|at| self.queue.remove(at)) {
                self.handle_inbound(message, now, out);
                return true;
            }
        }
        false
    }

    /// How long a finished rank stays reachable: long enough for a rank below it whose data
    /// path broke (a parent that took the data and died) to wait out its expected arrival and
    /// probe up through two dead ancestors to this one, each probe taking at most one timeout
    /// of the widest rank (the root's degree bounds every degree).
    fn linger(&self) -> Duration {
        let c = &self.config;
        let eta = self
            .view
            .eta_result(Time::ZERO, self.costs(), c.eta_slack, self.me)
            .0;
        let widest = u64::from(c.tree.child_count(Rank(0))) + 1;
        let probes = 3 * 2 * widest * c.detect_timeout.0;
        Duration(eta.saturating_add(probes))
    }

    /// Records that `x` is dead; true if that is news. What this rank awaits from `x` is settled
    /// at once: a dead rank acknowledges nothing, and waiting for its ACK timeout would delay
    /// the end of the operation by a detection timeout for a death already known.
    fn mark_dead(&mut self, x: u32) -> bool {
        if x == self.me || x >= self.view.tree.size() {
            return false;
        }
        if let Some(peer) = self.peers.get_mut(&x) {
            peer.seq_acked = peer.seq_sent;
        }
        let news = self.dead.insert(x);
        if news {
            self.dead_ranges.union_with(&Contributors::single(x));
        }
        news
    }

    /// Alg. 1: runs iterations until none makes progress (bounded), then re-arms the timers.
    /// In the step model, one iteration: the step of `now`.
    fn progress(&mut self, now: Time, out: &mut Outbox) {
        if !matches!(self.phase, Phase::Running | Phase::Done) {
            return;
        }
        let step_model = self.config.step_model;
        let n = self.view.tree.size() as usize;
        let budget = if step_model {
            1
        } else {
            16 * (self.queue.len() + self.peers.len() + n) + 64
        };
        let mut quiet = false;
        for _ in 0..budget {
            if !matches!(self.phase, Phase::Running | Phase::Done) {
                return;
            }
            if self.tree_progress(now, out) {
                continue;
            }
            let d = self.service_distance();
            let busy = self.handle_queue(d, now, out)
                || self.fault_tolerance(d, now, out)
                || self.handle_queue(0, now, out)
                || self.fault_tolerance(0, now, out);
            if !busy {
                quiet = true;
                self.ack_timer_fired = false;
                break;
            }
        }
        // Alg. 1 ends a rank's operation when its traversal is complete; the runtime also
        // waits until every DATA it sent is acknowledged, so a rank that returns has seen its
        // data taken.
        let finished = self.traversal_complete()
            && (step_model || self.peers.values().all(|p| !p.outstanding()));
        if self.phase == Phase::Running && finished {
            self.phase = Phase::Done;
            self.serve_until = Some(now.after(self.linger()));
            if self.result.is_some() {
                self.pieces.shed_values();
            }
            out.emit(Event::Completed);
        }
        if step_model {
            self.arm_step_timers(now, quiet);
        } else {
            self.arm_timers(now, quiet);
        }
    }
}

/// A segment's result names its contributors, so that the shell never joins segments that
/// count different ranks.
impl crate::protocol::SegmentProtocol for Ftco {
    fn contributors(&self, dst: &mut Vec<u32>) -> bool {
        match &self.result {
            Some(piece) if self.config.collective != Collective::Bcast => {
                piece.contributors.encode_into(dst);
                true
            }
            _ => false,
        }
    }
}

impl Protocol for Ftco {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Start { data } => self.start(now, data, out),
            Input::Message { from, frame } => self.on_message(now, from, frame, out),
            Input::Timeout => {
                // One Alg. 1 pass serves every due timer; only the ACK timer lets deadlines be
                // judged. The table holds three timers, and each is taken once.
                while let Some(timer) = self.timers.take_due(now) {
                    if timer == TIMER_ACK {
                        self.ack_timer_fired = true;
                    }
                }
                self.progress(now, out);
            }
            Input::PeerFailed { peer } => {
                self.counters.failures_noticed += 1;
                self.noticed.insert(peer.0);
                self.notice_hold(now, peer.0);
                if self.mark_dead(peer.0) {
                    if self.phase != Phase::Idle {
                        self.recompute_view(out);
                    }
                    self.advance(now, out);
                }
            }
            Input::LinkFailed { .. } => {}
            Input::Fault(fault) => out.emit(Event::FaultIgnored(fault)),
            Input::Stop => self.abort(AbortReason::Stopped, out),
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.timers.next_deadline()
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        let piece = match &self.result {
            Some(p) => Some(p.clone()),
            None => self.pieces.combined(self.config.op),
        };
        let Some(piece) = piece else {
            return;
        };
        let mut raw = Vec::new();
        piece.value.push_as_f64(&mut raw);
        finish_estimate(self.config.op, &raw, dst);
    }

    fn phase(&self) -> Phase {
        self.phase
    }

    fn has_result(&self) -> bool {
        self.phase == Phase::Done && self.result.is_some()
    }

    /// The result in the operation's own type (an average's carries its weight: the shell
    /// reads the estimate then).
    fn result(&self) -> Option<ValuesRef<'_>> {
        match &self.result {
            Some(piece) if self.phase == Phase::Done && self.config.op != ReduceOp::Average => {
                Some(piece.value.as_ref())
            }
            _ => None,
        }
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: self.phase,
            iteration: 0,
            counters: self.counters,
            detail: Detail::None,
        }
    }

    fn settled(&self) -> bool {
        self.phase != Phase::Running && self.peers.values().all(|p| !p.outstanding())
    }

    fn serve_until(&self) -> Option<Time> {
        self.serve_until
    }

    fn serves_until_all_finish(&self) -> bool {
        true
    }

    fn inspect(&self) -> crate::inspect::Inspection {
        self.inspection()
    }
}

#[cfg(test)]
impl Ftco {
    pub(super) fn set_service_for_tests(&mut self, service: super::ServiceDistance) {
        self.config.service = service;
    }

    pub(super) fn timeout_for_tests(&self, x: u32) -> Duration {
        self.timeout_for(x)
    }

    pub(super) fn costs_for_tests(&self) -> super::LogP {
        self.costs()
    }

    pub(super) fn set_max_data_bytes_for_tests(&mut self, bytes: u64) {
        self.config.max_data_bytes = bytes;
    }

    pub(super) fn draw_service_distance_for_tests(&mut self) -> u32 {
        self.service_distance()
    }
}
