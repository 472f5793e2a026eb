//! Reduce with up-correction (001 Sec. 4, Algs. 1-4).
//!
//! Every rank but the root first exchanges its input with the other members of its
//! up-correction group (one per subtree of the root), then waits for its tree children and sends
//! its up-corrected value, the children's results and failure information to its parent. The
//! root collects one result per subtree and picks the first whose subtree reports no failure,
//! adding its own up-corrected value exactly when that subtree holds no member of the root's
//! group.
//!
//! Deviations from the printed pseudocode, each from the slip list of the papers index: the root
//! loops over its f + 1 children and treats a child confirmed dead as a failed subtree; a rank
//! accumulates (not overwrites) what its children send; and a rank needs no order between its
//! up-correction and tree receives, since both only add to its value. The root may finish before
//! its own up-correction does when the subtree it picks already holds its group's values (its
//! group members still receive its input, which was sent first).

use crate::protocol::{
    AbortReason, Counters, Detail, Event, Input, Outbox, Phase, Protocol, RankStatus,
};
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::Time;
use crate::values::{finish_estimate, ReduceOp, Values, ValuesRef};
use crate::wire::{Frame, FrameError, FrameHeader, OpId};

use super::layout::CorrectedLayout;
use super::{check_header, unexpected, CorrectedKind, FailureInfo, RankSet, FLAG_SUBTREE_FAILED};

/// Configuration of one reduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReduceConfig {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the operation.
    pub size: u32,
    /// The operator (sum, average, min, max; bitwise on integer payloads).
    pub op: ReduceOp,
    /// Operation id.
    pub op_id: OpId,
    /// Failures tolerated, f: the root has f + 1 subtrees and groups have f + 1 members.
    pub tolerate: u32,
    /// How failures are reported up the tree.
    pub info: FailureInfo,
    /// The root.
    pub root: Rank,
    /// Arity of the heaps inside each subtree.
    pub arity: u32,
    /// The protocol id frames carry (allreduce embeds a reduce under its own id).
    pub algo: Algorithm,
    /// The header's step: the allreduce attempt (0 stand-alone).
    pub attempt: u32,
}

impl ReduceConfig {
    /// A stand-alone reduce to `root` tolerating `tolerate` failures.
    pub fn new(
        rank: Rank,
        size: u32,
        op: ReduceOp,
        op_id: OpId,
        tolerate: u32,
        root: Rank,
    ) -> Self {
        ReduceConfig {
            rank,
            size,
            op,
            op_id,
            tolerate,
            info: FailureInfo::default(),
            root,
            arity: 2,
            algo: Algorithm::CorrectedReduce,
            attempt: 0,
        }
    }

    /// The layout these parameters define. With fewer than f + 2 ranks the root gets one
    /// subtree per other rank.
    pub fn layout(&self) -> CorrectedLayout {
        let fanout = (self.tolerate + 1).min(self.size.saturating_sub(1)).max(1);
        CorrectedLayout::new(self.size, self.root.0, fanout, self.arity)
    }
}

/// A root child's result.
#[derive(Clone, Debug, PartialEq)]
struct SubtreeResult {
    subtree: u32,
    values: Values,
    failures: Vec<u32>,
}

/// A frame that arrived before this rank started, held until [`Input::Start`]. At most one per
/// group peer and child.
#[derive(Clone, Debug, PartialEq)]
struct Held {
    from: u32,
    kind: CorrectedKind,
    flags: u16,
    aux: u64,
    values: Values,
    trailer: Vec<u32>,
}

/// One rank of a corrected-tree reduce.
#[derive(Clone, Debug)]
pub struct CorrectedReduce {
    config: ReduceConfig,
    layout: CorrectedLayout,
    phase: Phase,
    /// The local input, then the up-corrected value, then (non-root) with the children's results.
    acc: Values,
    awaiting_group: Vec<u32>,
    awaiting_children: Vec<u32>,
    /// A child failed or reported a failure in the tree phase.
    subtree_failed: bool,
    /// Ranks this subtree could not receive from (every scheme keeps it; only `List` sends it).
    failures: Vec<u32>,
    /// Failures reported by children under `CountAndBit` (plus the local ones).
    failure_count: u64,
    known_failed: RankSet,
    held: Vec<Held>,
    // Root only.
    subtree_dead: Vec<bool>,
    results: Vec<SubtreeResult>,
    result: Option<Values>,
    chosen: Option<u32>,
    counters: Counters,
}

impl CorrectedReduce {
    /// A new instance, idle until [`Input::Start`].
    pub fn new(config: ReduceConfig) -> CorrectedReduce {
        let layout = config.layout();
        CorrectedReduce {
            config,
            layout,
            phase: Phase::Idle,
            acc: Values::F64(Vec::new()),
            awaiting_group: Vec::new(),
            awaiting_children: Vec::new(),
            subtree_failed: false,
            failures: Vec::new(),
            failure_count: 0,
            known_failed: RankSet::default(),
            held: Vec::new(),
            subtree_dead: vec![false; layout.fanout() as usize + 1],
            results: Vec::new(),
            result: None,
            chosen: None,
            counters: Counters::default(),
        }
    }

    /// The layout.
    pub fn layout(&self) -> CorrectedLayout {
        self.layout
    }

    fn is_root(&self) -> bool {
        self.config.rank == self.config.root
    }

    /// At the root once done: the reduced value (for average, the sum with the contributor count
    /// as a last element).
    pub fn result(&self) -> Option<&Values> {
        self.result.as_ref()
    }

    /// At the root once done: the subtree whose value was chosen.
    pub fn chosen_subtree(&self) -> Option<u32> {
        self.chosen
    }

    /// Ranks the operation could not receive from, as far as this rank knows: its own, and at
    /// the root those of the chosen subtree (complete under [`FailureInfo::List`]).
    pub fn reported_failures(&self) -> &[u32] {
        &self.failures
    }

    /// Failures the chosen subtree and the root counted (every scheme but `Bit`).
    pub fn failure_count(&self) -> u64 {
        self.failure_count
    }

    fn header(&self, kind: CorrectedKind) -> FrameHeader {
        FrameHeader::new(
            self.config.algo,
            kind as u8,
            self.config.op_id,
            self.config.rank,
            self.config.attempt,
        )
    }

    fn start(&mut self, data: ValuesRef<'_>, out: &mut Outbox) {
        if self.phase != Phase::Idle {
            return;
        }
        self.acc = data.to_owned_values();
        if self.config.op == ReduceOp::Average {
            push_weight(&mut self.acc);
        }
        self.phase = Phase::Running;
        let me = self.config.rank.0;
        let peers: Vec<u32> = self.layout.group_peers(me).collect();
        let header = self.header(CorrectedKind::UpCorrection);
        for &peer in &peers {
            // A send to a known-dead rank is a no-op in the paper's model; skipping it keeps
            // message counts honest.
            if !self.known_failed.contains(peer) {
                out.send(Rank(peer), header, self.acc.as_ref());
                self.counters.messages_sent += 1;
            }
        }
        self.awaiting_group = peers;
        self.awaiting_children = self.layout.children(me).collect();
        let known: Vec<u32> = self.known_failed.as_slice().to_vec();
        for peer in known {
            self.resolve_failed(peer);
        }
        for held in std::mem::take(&mut self.held) {
            if self.known_failed.contains(held.from) {
                continue;
            }
            let values = held.values.as_ref();
            self.absorb(
                held.from,
                held.kind,
                held.flags,
                held.aux,
                values,
                &held.trailer,
            );
        }
        self.try_finish(out);
    }

    /// Adds a validated message to the state.
    fn absorb(
        &mut self,
        from: u32,
        kind: CorrectedKind,
        flags: u16,
        aux: u64,
        values: ValuesRef<'_>,
        trailer: &[u32],
    ) {
        match kind {
            CorrectedKind::UpCorrection => {
                self.awaiting_group.retain(|&p| p != from);
                let combined = self.acc.combine(self.config.op, values);
                debug_assert!(combined.is_ok(), "payload shape was validated on arrival");
            }
            CorrectedKind::ReduceTree => {
                self.awaiting_children.retain(|&c| c != from);
                if self.is_root() {
                    self.absorb_at_root(from, flags, values, trailer);
                    return;
                }
                let combined = self.acc.combine(self.config.op, values);
                debug_assert!(combined.is_ok(), "payload shape was validated on arrival");
                self.subtree_failed |= self.reports_failure(from, flags, trailer);
                self.failures.extend_from_slice(trailer);
                self.failure_count = self.failure_count.saturating_add(aux);
            }
            CorrectedKind::BcastTree | CorrectedKind::BcastCorrection => {}
        }
    }

    /// Whether a tree message from `from` says its subtree lost a rank in the tree phase. Under
    /// `List` this is read from the list itself: a listed rank in the sender's own subtree of the
    /// root can only have been listed by its tree parent, since group peers sit in other subtrees.
    fn reports_failure(&self, from: u32, flags: u16, trailer: &[u32]) -> bool {
        match self.config.info {
            FailureInfo::List => {
                let subtree = self.layout.subtree_of(from);
                trailer
                    .iter()
                    .any(|&r| self.layout.subtree_of(r) == subtree)
            }
            FailureInfo::CountAndBit | FailureInfo::Bit => flags & FLAG_SUBTREE_FAILED != 0,
        }
    }

    fn absorb_at_root(&mut self, from: u32, flags: u16, values: ValuesRef<'_>, trailer: &[u32]) {
        let Some(subtree) = self.layout.subtree_of(from) else {
            return;
        };
        if self.reports_failure(from, flags, trailer) {
            self.subtree_dead[subtree as usize] = true;
            return;
        }
        self.results.push(SubtreeResult {
            subtree,
            values: values.to_owned_values(),
            failures: trailer.to_vec(),
        });
    }

    /// Gives up on `peer`: it is dead, so whatever it has not sent will never come.
    fn resolve_failed(&mut self, peer: u32) {
        if self.phase == Phase::Done {
            // A finished root waits for nothing more from a dead peer (see `settled`).
            self.awaiting_group.retain(|&p| p != peer);
            self.awaiting_children.retain(|&c| c != peer);
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        if let Some(at) = self.awaiting_group.iter().position(|&p| p == peer) {
            self.awaiting_group.swap_remove(at);
            self.failures.push(peer);
            self.failure_count += 1;
        }
        if let Some(at) = self.awaiting_children.iter().position(|&c| c == peer) {
            self.awaiting_children.swap_remove(at);
            if self.is_root() {
                if let Some(subtree) = self.layout.subtree_of(peer) {
                    self.subtree_dead[subtree as usize] = true;
                }
            } else {
                self.subtree_failed = true;
                self.failures.push(peer);
                self.failure_count += 1;
            }
        }
    }

    fn try_finish(&mut self, out: &mut Outbox) {
        if self.phase != Phase::Running {
            return;
        }
        if self.is_root() {
            self.try_finish_root(out);
            return;
        }
        if !self.awaiting_group.is_empty() || !self.awaiting_children.is_empty() {
            return;
        }
        if let Some(parent) = self.layout.parent(self.config.rank.0) {
            if !self.known_failed.contains(parent) {
                let flags = if self.subtree_failed {
                    FLAG_SUBTREE_FAILED
                } else {
                    0
                };
                let (aux, trailer): (u64, &[u32]) = match self.config.info {
                    FailureInfo::List => (self.failures.len() as u64, &self.failures),
                    FailureInfo::CountAndBit => (self.failure_count, &[]),
                    FailureInfo::Bit => (0, &[]),
                };
                let header = self
                    .header(CorrectedKind::ReduceTree)
                    .with_flags(flags)
                    .with_aux(aux);
                out.send_with_ranks(Rank(parent), header, self.acc.as_ref(), trailer);
                self.counters.messages_sent += 1;
            }
        }
        self.phase = Phase::Done;
        out.emit(Event::Completed);
    }

    fn try_finish_root(&mut self, out: &mut Outbox) {
        let own_ready = self.awaiting_group.is_empty();
        let pick = self.results.iter().position(|r| {
            !self.subtree_dead[r.subtree as usize]
                && (own_ready || !self.layout.root_adds_own_value(r.subtree))
        });
        if let Some(at) = pick {
            let chosen = self.results.swap_remove(at);
            let mut value = chosen.values;
            if self.layout.root_adds_own_value(chosen.subtree) {
                let combined = value.combine(self.config.op, self.acc.as_ref());
                debug_assert!(combined.is_ok(), "payload shape was validated on arrival");
            } else {
                // The root's own group losses are not in the result's inputs: the chosen
                // subtree's member of the root's group brought that group's values, and lists
                // its own losses. Listing the root's too would name a rank the result counts.
                self.failures.clear();
            }
            // Exactly the ranks whose input the result lacks: a listed rank's input reaches
            // the chosen subtree only through its one group member there, which listed it.
            self.failures.extend_from_slice(&chosen.failures);
            self.failures.sort_unstable();
            self.failures.dedup();
            self.failure_count = self.failures.len() as u64;
            self.result = Some(value);
            self.chosen = Some(chosen.subtree);
            self.results.clear();
            self.phase = Phase::Done;
            out.emit(Event::Completed);
            return;
        }
        let subtrees = self.layout.children(self.config.rank.0).count();
        if subtrees == 0 {
            // A single rank: its input is the result.
            self.result = Some(self.acc.clone());
            self.phase = Phase::Done;
            out.emit(Event::Completed);
            return;
        }
        let all_failed = (1..=subtrees).all(|s| self.subtree_dead[s]);
        if all_failed {
            self.phase = Phase::Aborted;
            out.emit(Event::Aborted(AbortReason::TooManyFailures));
        }
    }

    fn on_message(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        if self.phase == Phase::Done {
            // A subtree or group peer the root did not need reports after all: it is read, so
            // that the sender's frames leave (see `settled`).
            let c = &self.config;
            match check_header(&frame, from, c.algo, c.op_id, c.attempt) {
                Ok(CorrectedKind::UpCorrection) => self.awaiting_group.retain(|&p| p != from.0),
                Ok(CorrectedKind::ReduceTree) => self.awaiting_children.retain(|&p| p != from.0),
                _ => {}
            }
        }
        match self.accept(from, &frame) {
            Ok(None) => self.counters.messages_received += 1,
            Ok(Some((kind, values, trailer))) => {
                self.counters.messages_received += 1;
                let (flags, aux) = (frame.header.flags, frame.header.aux);
                if self.phase == Phase::Idle {
                    self.held.push(Held {
                        from: from.0,
                        kind,
                        flags,
                        aux,
                        values: values.to_owned_values(),
                        trailer: trailer.to_vec(),
                    });
                } else {
                    self.absorb(from.0, kind, flags, aux, values, trailer);
                    self.try_finish(out);
                }
            }
            Err(error) => {
                self.counters.frames_rejected += 1;
                out.emit(Event::Rejected { from, error });
            }
        }
    }

    /// Validates a frame: this operation and attempt, a reduce kind, from a group peer or child
    /// this rank still waits for, with a payload of the local shape. `None`: a legitimate frame
    /// that arrived after this rank finished, to be ignored.
    fn accept<'f>(
        &self,
        from: Rank,
        frame: &Frame<'f>,
    ) -> Result<Option<Accepted<'f>>, FrameError> {
        let c = &self.config;
        let kind = check_header(frame, from, c.algo, c.op_id, c.attempt)?;
        let me = self.config.rank.0;
        let expected = match kind {
            CorrectedKind::UpCorrection => self.layout.group_peers(me).any(|p| p == from.0),
            CorrectedKind::ReduceTree => self.layout.children(me).any(|c| c == from.0),
            _ => false,
        };
        if !expected {
            return Err(unexpected(
                from.0,
                "sender is not a group peer or child for this kind",
            ));
        }
        let pending = match self.phase {
            Phase::Idle => !self.held.iter().any(|h| h.from == from.0 && h.kind == kind),
            Phase::Running => match kind {
                CorrectedKind::UpCorrection => self.awaiting_group.contains(&from.0),
                _ => self.awaiting_children.contains(&from.0),
            },
            // The root picks the first clean subtree; the others still report, harmlessly.
            Phase::Done | Phase::Aborted => return Ok(None),
        };
        if !pending || self.known_failed.contains(from.0) {
            return Err(unexpected(
                from.0,
                "duplicate, late, or from a rank already given up on",
            ));
        }
        let values = frame.values()?;
        let trailer = frame.trailer()?;
        if trailer.len() > self.config.size as usize {
            return Err(unexpected(from.0, "failure list longer than the group"));
        }
        if self.phase == Phase::Running
            && (values.dtype() != self.acc.dtype() || values.len() != self.acc.len())
        {
            return Err(unexpected(
                from.0,
                "payload does not match the local vector",
            ));
        }
        Ok(Some((kind, values, trailer)))
    }
}

/// A frame that passed validation: its kind, values and rank trailer.
type Accepted<'f> = (CorrectedKind, ValuesRef<'f>, &'f [u32]);

/// Appends the contributor count of an average (one per rank) to a float vector.
pub(super) fn push_weight(values: &mut Values) {
    values.push_weight();
}

/// Runs whole-vector (one segment): the shell's defaults.
/// Under [`FailureInfo::List`] the root knows exactly whose input its result lacks, so that
/// the shell can refuse segments that lack different ranks.
impl crate::protocol::SegmentProtocol for CorrectedReduce {
    fn contributors(&self, dst: &mut Vec<u32>) -> bool {
        let knows = self.is_root()
            && self.phase == Phase::Done
            && self.result.is_some()
            && self.config.info == FailureInfo::List;
        if knows {
            // The complement names the same set (the size is the operation's), and is short.
            dst.extend_from_slice(&self.failures);
        }
        knows
    }
}

impl Protocol for CorrectedReduce {
    fn handle(&mut self, _now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Start { data } => self.start(data, out),
            Input::Message { from, frame } => self.on_message(from, frame, out),
            Input::Timeout => {}
            Input::PeerFailed { peer } => {
                self.counters.failures_noticed += 1;
                if self.known_failed.insert(peer.0) {
                    self.resolve_failed(peer.0);
                    self.try_finish(out);
                }
            }
            Input::LinkFailed { .. } => {}
            Input::Fault(fault) => out.emit(Event::FaultIgnored(fault)),
            Input::Stop => {
                if matches!(self.phase, Phase::Idle | Phase::Running) {
                    self.phase = Phase::Aborted;
                    out.emit(Event::Aborted(AbortReason::Stopped));
                }
            }
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        let mut raw = Vec::new();
        self.result
            .as_ref()
            .unwrap_or(&self.acc)
            .push_as_f64(&mut raw);
        finish_estimate(self.config.op, &raw, dst);
    }

    fn phase(&self) -> Phase {
        self.phase
    }

    fn has_result(&self) -> bool {
        self.result.is_some()
    }

    /// The root's result in the operation's own type (an average's is a sum and a weight,
    /// which `estimate` divides).
    fn result(&self) -> Option<ValuesRef<'_>> {
        match self.config.op {
            ReduceOp::Average => None,
            _ => self.result.as_ref().map(Values::as_ref),
        }
    }

    /// The root may finish on the first clean subtree while others still report: it stays
    /// until every peer it awaited has reported or failed, reading their frames. Left unread,
    /// those of a long vector's segments fill the lanes and their senders wait for them to
    /// leave until the operation's time limit (a fault-free 16 MiB reduce at n = 4 did).
    fn settled(&self) -> bool {
        self.phase != Phase::Running
            && (self.phase != Phase::Done
                || (self.awaiting_children.is_empty() && self.awaiting_group.is_empty()))
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: self.phase,
            iteration: u32::from(self.phase == Phase::Done),
            counters: self.counters,
            detail: Detail::CorrectedTree {
                attempt: self.config.attempt,
                root: self.config.root.0,
                known_failed: self.known_failed.len() as u32,
                waiting_for: (self.awaiting_group.len() + self.awaiting_children.len()) as u32,
            },
        }
    }
}
