//! One communicator's ERA service at one rank: 002 Parts 1-4 over many agreements, with garbage
//! collection of decided results, tree rebalancing between agreements, and revoke.

use std::collections::BTreeMap;

use super::tree::{EraTopology, EraTree};
use super::value::{check_op, op_code, op_from_code, AgreeError, AgreedValue};
use super::EraKind;
use crate::protocol::{Counters, Outbox};
use crate::rank::{Rank, RankSet};
use crate::registry::Algorithm;
use crate::values::{ReduceOp, ValuesRef};
use crate::wire::{Frame, FrameError, FrameHeader, OpId};

/// Header flag: the value carries an acknowledged set (else that part is ⊥).
const FLAG_ACKED: u16 = 1 << 8;
/// Trees kept for agreements still in flight across a rebalance.
const MAX_TREES: usize = 4;

/// How an ERA service is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EraConfig {
    /// The tree.
    pub topology: EraTopology,
    /// Bound on agreements with state at once (in flight, or decided and not yet collected);
    /// frames of agreements further ahead than this are refused.
    pub max_in_flight: usize,
}

impl Default for EraConfig {
    fn default() -> Self {
        EraConfig {
            topology: EraTopology::default(),
            max_in_flight: 1024,
        }
    }
}

/// 002's Status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    NotContributed,
    Gathering,
    Broadcasting,
}

/// The variables of one undecided agreement (002 Part 1), sparse.
#[derive(Clone, Debug)]
struct Open {
    status: Status,
    op: ReduceOp,
    current: Option<AgreedValue>,
    contributed: RankSet,
    requested: RankSet,
    /// The tree generation the agreement runs on (fixed when the rank starts it).
    generation: u32,
    /// Rebuild the tree without the agreed failed ranks once this agreement decides.
    rebalance: bool,
}

/// Where an agreement stands at this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgreementState<'a> {
    /// No state: not started, or garbage-collected.
    Unknown,
    /// Started or heard of, not decided.
    Running,
    /// Decided on this value.
    Decided(&'a AgreedValue),
}

/// The agreement service of one communicator at one rank.
#[derive(Clone, Debug)]
pub struct Era {
    me: u32,
    n: u32,
    config: EraConfig,
    /// Trees by generation, newest last.
    trees: Vec<(u32, EraTree)>,
    /// 002's S_p: ranks known dead.
    dead: RankSet,
    open: BTreeMap<u64, Open>,
    decided: BTreeMap<u64, AgreedValue>,
    /// Agreements up to this id are forgotten: every live rank returned from them.
    gc_floor: u64,
    /// Every agreement 1..=returned_low returned here.
    returned_low: u64,
    returned_ahead: RankSetU64,
    revoked: bool,
    id_base: u64,
    counters: Counters,
    children: Vec<u32>,
    trailer: Vec<u32>,
}

/// Returned agreement ids above the contiguous floor (bounded by the agreements in flight).
type RankSetU64 = std::collections::BTreeSet<u64>;

impl Era {
    /// Numbers this communicator's agreements above `base` (`base + 1` is the first): a shrunk
    /// communicator's service starts above its parent's so their frames never mix. Revoke
    /// frames carry `base` as their id.
    pub fn with_id_base(mut self, base: u64) -> Era {
        self.gc_floor = base;
        self.returned_low = base;
        self.id_base = base;
        self
    }

    /// The service of rank `me` in a communicator of world ranks `0..n`.
    pub fn new(me: u32, n: u32, config: EraConfig) -> Era {
        Era::with_members(me, n, &[], config)
    }

    /// The service over world ranks `0..n` minus `excluded` (a shrunk communicator).
    pub fn with_members(me: u32, n: u32, excluded: &[u32], config: EraConfig) -> Era {
        Era {
            me,
            n,
            config,
            trees: vec![(0, EraTree::new(config.topology, n, excluded))],
            dead: RankSet::default(),
            open: BTreeMap::new(),
            decided: BTreeMap::new(),
            gc_floor: 0,
            returned_low: 0,
            returned_ahead: RankSetU64::new(),
            revoked: false,
            id_base: 0,
            counters: Counters::default(),
            children: Vec::new(),
            trailer: Vec::new(),
        }
    }

    /// The current tree (the one new agreements start on).
    pub fn tree(&self) -> &EraTree {
        &self.trees[self.trees.len() - 1].1
    }

    /// Ranks known dead (002's S_p).
    pub fn dead(&self) -> &RankSet {
        &self.dead
    }

    /// Message and failure counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Agreements with state here (open or decided and not collected).
    pub fn live_agreements(&self) -> usize {
        self.open.len() + self.decided.len()
    }

    /// The garbage-collection floor.
    pub fn gc_floor(&self) -> u64 {
        self.gc_floor
    }

    /// Whether the communicator was revoked.
    pub fn is_revoked(&self) -> bool {
        self.revoked
    }

    /// Where agreement `a` stands.
    pub fn state(&self, a: u64) -> AgreementState<'_> {
        if let Some(value) = self.decided.get(&a) {
            AgreementState::Decided(value)
        } else if self.open.contains_key(&a) {
            AgreementState::Running
        } else {
            AgreementState::Unknown
        }
    }

    /// The decision of agreement `a`, if taken and not collected.
    pub fn decision(&self, a: u64) -> Option<&AgreedValue> {
        self.decided.get(&a)
    }

    fn known_tree(&self, generation: u32) -> Option<&EraTree> {
        self.trees
            .iter()
            .find(|(g, _)| *g == generation)
            .map(|(_, t)| t)
    }

    /// The tree of an agreement this rank started (its generation is then known; only an
    /// agreement kept in flight across more than `MAX_TREES` rebalances falls back).
    fn tree_of(&self, generation: u32) -> &EraTree {
        self.trees
            .iter()
            .find(|(g, _)| *g == generation)
            .map_or(&self.trees[0].1, |(_, t)| t)
    }

    /// 002's procedure Agreement: contributes `words` to agreement `a` (ids start at 1 and are
    /// the same at every rank), stating the ranks this rank acknowledged as failed. With
    /// `rebalance`, the tree of later agreements leaves out the failed ranks this one agrees on.
    pub fn start(
        &mut self,
        a: u64,
        op: ReduceOp,
        words: Vec<u64>,
        acked: &RankSet,
        rebalance: bool,
        out: &mut Outbox,
    ) -> Result<(), AgreeError> {
        check_op(op)?;
        if a <= self.gc_floor || self.decided.contains_key(&a) {
            return Err(AgreeError::AlreadyStarted(a));
        }
        if !self.open.contains_key(&a) && self.live_agreements() >= self.config.max_in_flight {
            return Err(AgreeError::TooManyInFlight(self.config.max_in_flight));
        }
        let generation = self.trees[self.trees.len() - 1].0;
        let failed = self.member_failures(generation);
        let mine = AgreedValue::contribution(words, &failed, acked, self.returned_low);
        let state = self
            .open
            .entry(a)
            .or_insert_with(|| Open::new(op, generation));
        if state.status != Status::NotContributed {
            return Err(AgreeError::AlreadyStarted(a));
        }
        state.status = Status::Gathering;
        state.op = op;
        state.generation = generation;
        state.rebalance = rebalance;
        state.contributed.insert(self.me);
        match &mut state.current {
            Some(current) => {
                if current.combine(op, &mine).is_err() {
                    // Peers sent values of another length: ours wins, theirs are resent.
                    state.current = Some(mine);
                }
            }
            None => state.current = Some(mine),
        }
        self.progress(a, out);
        Ok(())
    }

    /// Tells the service the application consumed agreement `a`'s result, for the
    /// garbage-collection floor it contributes to later agreements.
    pub fn returned(&mut self, a: u64) {
        if a <= self.returned_low {
            return;
        }
        self.returned_ahead.insert(a);
        while self.returned_ahead.remove(&(self.returned_low + 1)) {
            self.returned_low += 1;
        }
    }

    /// Failed ranks that are members of the tree of `generation`.
    fn member_failures(&self, generation: u32) -> RankSet {
        let tree = self.tree_of(generation);
        RankSet::from_unsorted(
            self.dead
                .as_slice()
                .iter()
                .copied()
                .filter(|r| tree.is_member(*r))
                .collect(),
        )
    }

    /// 002 Part 3, the spontaneous rule, for agreement `a`.
    fn progress(&mut self, a: u64, out: &mut Outbox) {
        let Some(state) = self.open.get(&a) else {
            return;
        };
        if state.status != Status::Gathering {
            return;
        }
        let tree = self.tree_of(state.generation).clone();
        let mut children = std::mem::take(&mut self.children);
        tree.children(&self.dead, self.me, &mut children);
        let ready = children.iter().all(|c| state.contributed.contains(*c));
        self.children = children;
        if !ready || !state.contributed.contains(self.me) {
            return;
        }
        let failed = self.member_failures(state.generation);
        let parent = tree.parent(&self.dead, self.me);
        let Some(state) = self.open.get_mut(&a) else {
            return;
        };
        let Some(current) = state.current.as_mut() else {
            return;
        };
        // The failures this rank knows of justify the contributions missing below it.
        current.failed.union_with(failed.as_slice());
        match parent {
            None => {
                let value = current.clone();
                self.decide(a, value, out);
            }
            Some(p) => {
                state.status = Status::Broadcasting;
                let (op, generation, value) = (state.op, state.generation, current.clone());
                self.send_value(p, EraKind::Up, a, op, generation, &value, out);
            }
        }
    }

    /// 002's procedure Decision.
    fn decide(&mut self, a: u64, value: AgreedValue, out: &mut Outbox) {
        let Some(state) = self.open.remove(&a) else {
            return;
        };
        let tree = self.tree_of(state.generation).clone();
        let mut targets = std::mem::take(&mut self.children);
        tree.children(&self.dead, self.me, &mut targets);
        targets.extend_from_slice(state.requested.as_slice());
        targets.sort_unstable();
        targets.dedup();
        for &to in &targets {
            self.send_value(
                to,
                EraKind::Down,
                a,
                state.op,
                state.generation,
                &value,
                out,
            );
        }
        self.children = targets;
        if state.rebalance {
            self.rebalance(&value);
        }
        let floor = value.returned_floor.min(self.returned_low);
        self.decided.insert(a, value);
        if floor > self.gc_floor {
            // Every live rank returned from these: nobody will ask for them again.
            self.gc_floor = floor;
            self.decided.retain(|id, _| *id > floor);
            self.open.retain(|id, _| *id > floor);
        }
    }

    /// Tree rebalancing (002 Sec. 3): agreements started from now on use a tree over the members
    /// the decision did not declare failed.
    fn rebalance(&mut self, value: &AgreedValue) {
        let current = self.tree();
        if value
            .failed
            .as_slice()
            .iter()
            .all(|r| !current.is_member(*r))
        {
            return;
        }
        let mut excluded = current.excluded().to_vec();
        excluded.extend_from_slice(value.failed.as_slice());
        let tree = EraTree::new(current.topology(), self.n, &excluded);
        if !tree.is_member(self.me) {
            return;
        }
        let generation = self.trees[self.trees.len() - 1].0 + 1;
        self.trees.push((generation, tree));
        if self.trees.len() > MAX_TREES {
            self.trees.remove(0);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send_value(
        &mut self,
        to: u32,
        kind: EraKind,
        a: u64,
        op: ReduceOp,
        generation: u32,
        value: &AgreedValue,
        out: &mut Outbox,
    ) {
        let mut flags = op_code(op);
        if value.acked.is_some() {
            flags |= FLAG_ACKED;
        }
        let header = FrameHeader::new(
            Algorithm::EraAgree,
            kind as u8,
            OpId(a),
            Rank(self.me),
            generation,
        )
        .with_aux(value.returned_floor)
        .with_flags(flags);
        value.trailer(&mut self.trailer);
        out.send_with_ranks(
            Rank(to),
            header,
            ValuesRef::U64(&value.words),
            &self.trailer,
        );
        self.counters.messages_sent += 1;
    }

    fn send_request(&mut self, to: u32, a: u64, op: ReduceOp, generation: u32, out: &mut Outbox) {
        let header = FrameHeader::new(
            Algorithm::EraAgree,
            EraKind::ResultRequest as u8,
            OpId(a),
            Rank(self.me),
            generation,
        )
        .with_flags(op_code(op));
        out.send(Rank(to), header, ValuesRef::Empty);
        self.counters.messages_sent += 1;
    }

    /// Handles one ERA frame from `from` (002 Part 2, and revoke).
    pub fn handle_frame(
        &mut self,
        from: Rank,
        frame: &Frame<'_>,
        out: &mut Outbox,
    ) -> Result<(), FrameError> {
        let header = frame.header;
        if header.algo != Algorithm::EraAgree as u8 {
            return Err(FrameError::WrongAlgorithm {
                expected: Algorithm::EraAgree,
                got: frame.algo().unwrap_or(Algorithm::EraAgree),
            });
        }
        let kind = EraKind::from_u8(header.kind).ok_or(FrameError::UnknownKind {
            algo: Algorithm::EraAgree,
            kind: header.kind,
        })?;
        let unexpected = |what| FrameError::Unexpected { from: from.0, what };
        if header.source != from.0 {
            return Err(unexpected("header source differs from the sending rank"));
        }
        if from.0 >= self.n || from.0 == self.me {
            return Err(unexpected("sender is not a peer of this communicator"));
        }
        self.counters.messages_received += 1;
        if kind == EraKind::Revoke {
            self.revoke(out);
            return Ok(());
        }
        let a = header.op_id;
        if a <= self.gc_floor {
            // Collected: every live rank returned from it; a straggler's copy needs no answer.
            return Ok(());
        }
        if a > self.gc_floor + self.config.max_in_flight as u64 {
            return Err(unexpected("agreement id too far ahead of this rank"));
        }
        let op =
            op_from_code(header.flags & 0xff).ok_or(unexpected("unknown agreement operator"))?;
        let value = match kind {
            EraKind::Up | EraKind::Down => {
                let ValuesRef::U64(words) = frame.values()? else {
                    return Err(unexpected("agreement value must be u64 words"));
                };
                Some(AgreedValue::decode(
                    words,
                    frame.trailer()?,
                    header.flags & FLAG_ACKED != 0,
                    header.aux,
                    from.0,
                )?)
            }
            _ => None,
        };
        if kind == EraKind::ResultRequest {
            let generation = self.open.get(&a).map_or(header.step, |s| s.generation);
            self.mark_dead_below(from, generation, out)?;
        }
        if let Some(result) = self.decided.get(&a) {
            if matches!(kind, EraKind::Up | EraKind::ResultRequest) {
                let result = result.clone();
                self.send_value(from.0, EraKind::Down, a, op, header.step, &result, out);
            }
            return Ok(());
        }
        if !self.open.contains_key(&a) && self.live_agreements() >= self.config.max_in_flight {
            return Err(unexpected("too many agreements in flight"));
        }
        let me = self.me;
        let state = self
            .open
            .entry(a)
            .or_insert_with(|| Open::new(op, header.step));
        match kind {
            EraKind::Up => {
                let value = value.ok_or(unexpected("UP without a value"))?;
                self.gather_up(a, from, value, out)?;
            }
            EraKind::Down => {
                let value = value.ok_or(unexpected("DOWN without a value"))?;
                if state.status == Status::NotContributed {
                    return Err(unexpected("decision for an agreement not started here"));
                }
                let generation = state.generation;
                let parent = self.tree_of(generation).parent(&self.dead, me);
                if parent.is_none() || parent == Some(from.0) {
                    self.decide(a, value, out);
                }
            }
            EraKind::ResultRequest => match state.status {
                Status::Broadcasting => {
                    let (op, generation) = (state.op, state.generation);
                    if let Some(current) = state.current.clone() {
                        self.send_value(from.0, EraKind::Up, a, op, generation, &current, out);
                    }
                }
                _ => {
                    state.requested.insert(from.0);
                }
            },
            EraKind::Revoke => {}
        }
        Ok(())
    }

    /// 002 Part 2, on a RESULTREQUEST from `from`: the sender is root, so every id below it in
    /// the agreement's tree is dead; each newly known death goes through Part 4 so that
    /// agreements in flight re-parent. A rank that has not yet built that tree (it has not
    /// decided the agreement that rebalanced it) leaves the marking to its detector.
    fn mark_dead_below(
        &mut self,
        from: Rank,
        generation: u32,
        out: &mut Outbox,
    ) -> Result<(), FrameError> {
        let unexpected = |what| FrameError::Unexpected { from: from.0, what };
        let Some(tree) = self.known_tree(generation).cloned() else {
            return Ok(());
        };
        if !tree.is_member(from.0) || !tree.is_member(self.me) {
            return Err(unexpected("result request from a non-member"));
        }
        if tree.vid(from.0) > tree.vid(self.me) {
            return Err(unexpected("result request from a rank that cannot be root"));
        }
        for vid in 0..tree.vid(from.0) {
            let r = tree.rank_at(vid);
            if !self.dead.contains(r) {
                self.peer_failed(r, out);
            }
        }
        Ok(())
    }

    /// An UP of agreement `a` from `from`, which must be open here: its value joins the
    /// gathered one, or, once the decision is pending, the sender waits for the DOWN.
    fn gather_up(
        &mut self,
        a: u64,
        from: Rank,
        value: AgreedValue,
        out: &mut Outbox,
    ) -> Result<(), FrameError> {
        let unexpected = |what| FrameError::Unexpected { from: from.0, what };
        let Some(state) = self.open.get_mut(&a) else {
            return Err(unexpected("UP for an agreement that is not open"));
        };
        match state.status {
            Status::NotContributed | Status::Gathering => {
                match &mut state.current {
                    Some(current) => current.combine(state.op, &value).map_err(unexpected)?,
                    None => state.current = Some(value),
                }
                state.contributed.insert(from.0);
                // The sender waits for a DOWN from us. A child gets one anyway; an orphan
                // re-parented onto us before we learnt of its parent's death would not
                // (Decision sends to the children of our view), and would wait forever.
                // Remembering every sender costs nothing without failures: the senders are
                // then exactly our children.
                state.requested.insert(from.0);
                self.progress(a, out);
            }
            // The decision is pending: answer the child when it comes.
            Status::Broadcasting => {
                state.requested.insert(from.0);
            }
        }
        Ok(())
    }

    /// 002 Part 4: rank `q` is discovered dead.
    pub fn peer_failed(&mut self, q: u32, out: &mut Outbox) {
        if q == self.me || q >= self.n || self.dead.contains(q) {
            return;
        }
        self.counters.failures_noticed += 1;
        let old_dead = self.dead.clone();
        self.dead.insert(q);
        if self.revoked {
            // Cover the dead rank's share of the revoke broadcast.
            for to in self.revoke_neighbours(q) {
                self.send_revoke(to, out);
            }
        }
        let ids: Vec<u64> = self.open.keys().copied().collect();
        let mut grandchildren = Vec::new();
        for a in ids {
            let Some(state) = self.open.get(&a) else {
                continue;
            };
            let tree = self.tree_of(state.generation).clone();
            if !tree.is_member(self.me) || !tree.is_member(q) {
                continue;
            }
            let (status, op, generation) = (state.status, state.op, state.generation);
            let old_parent = tree.parent(&old_dead, self.me);
            if status == Status::Broadcasting && old_parent == Some(q) {
                match tree.parent(&self.dead, self.me) {
                    None => {
                        // This rank is the new root: gather again, asking first whether anyone
                        // below already holds a decision of the dead root.
                        if let Some(state) = self.open.get_mut(&a) {
                            state.status = Status::Gathering;
                            state.contributed = RankSet::default();
                            state.contributed.insert(self.me);
                        }
                        let mut children = std::mem::take(&mut self.children);
                        tree.children(&self.dead, self.me, &mut children);
                        for &n in &children {
                            self.send_request(n, a, op, generation, out);
                        }
                        self.children = children;
                    }
                    Some(parent) => {
                        if let Some(current) = self.open.get(&a).and_then(|s| s.current.clone()) {
                            self.send_value(parent, EraKind::Up, a, op, generation, &current, out);
                        }
                    }
                }
            }
            if status == Status::Gathering && old_parent.is_none() {
                let mut children = std::mem::take(&mut self.children);
                tree.children(&old_dead, self.me, &mut children);
                if children.contains(&q) {
                    // The dead child's children may hold a decision of an earlier root.
                    tree.children(&old_dead, q, &mut grandchildren);
                    for &n in &grandchildren {
                        self.send_request(n, a, op, generation, out);
                    }
                }
                self.children = children;
            }
            self.progress(a, out);
        }
    }

    /// Revokes the communicator: every rank learns it through a flood over the binomial graph
    /// of the members (degree 2 log N), and a revoked rank that learns of a death also sends to
    /// the dead rank's neighbours, so the flood crosses any set of failures.
    pub fn revoke(&mut self, out: &mut Outbox) {
        if self.revoked {
            return;
        }
        self.revoked = true;
        for to in self.revoke_neighbours(self.me) {
            self.send_revoke(to, out);
        }
    }

    fn send_revoke(&mut self, to: u32, out: &mut Outbox) {
        if to == self.me || self.dead.contains(to) {
            return;
        }
        let header = FrameHeader::new(
            Algorithm::EraAgree,
            EraKind::Revoke as u8,
            OpId(self.id_base),
            Rank(self.me),
            0,
        );
        out.send(Rank(to), header, ValuesRef::Empty);
        self.counters.messages_sent += 1;
    }

    /// Members at distance ±2^i (in member order) from `rank`.
    fn revoke_neighbours(&self, rank: u32) -> Vec<u32> {
        let tree = self.tree();
        if !tree.is_member(rank) {
            return Vec::new();
        }
        let members = u64::from(tree.members());
        let me = u64::from(tree.vid(rank));
        let mut out = Vec::new();
        let mut step = 1u64;
        while step < members {
            for v in [(me + step) % members, (me + members - step) % members] {
                let r = tree.rank_at(v as u32);
                if !out.contains(&r) && r != rank {
                    out.push(r);
                }
            }
            step *= 2;
        }
        out
    }
}

impl Open {
    fn new(op: ReduceOp, generation: u32) -> Open {
        Open {
            status: Status::NotContributed,
            op,
            current: None,
            contributed: RankSet::default(),
            requested: RankSet::default(),
            generation,
            rebalance: false,
        }
    }
}
