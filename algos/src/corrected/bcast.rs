//! Corrected-tree broadcast (Küttler et al., PPoPP 2019, as 001 uses it).
//!
//! The root sends the value down the tree of [`CorrectedLayout`]; every rank forwards it to its
//! tree children on first receipt, however it arrived. Then every rank that has the value corrects
//! along the ring of virtual ranks, whose neighbours sit in different subtrees, so a failed inner
//! node's subtree is reached from its ring neighbours:
//! - **opportunistic** correction sends to the `d` nearest ranks on each side, once;
//! - **checked** correction sends to the nearest rank on each side and, while that rank is known
//!   dead and nobody alive on that side has been heard from within the current distance, to the
//!   next one. A rank also answers a correction from a rank it has not corrected itself, so a rank
//!   whose neighbours died late still hears from the next live one.
//! - **timed** checked correction needs no failure detector, as in the PPoPP paper: a rank moves
//!   on to the next rank of a side when nobody on that side within the current distance was heard
//!   from `gap` after it sent, dead or merely slow (a notice, if one comes, moves it on at once).
//!   A slow neighbour costs extra corrections, never a missed rank: delivery is at most once
//!   whatever arrives, and every live rank with the value keeps going until it hears from a live
//!   rank on each side (or has tried them all).
//!
//! A rank delivers as soon as it has the value and has sent its first corrections; the rest of
//! checked correction (reaching past ranks that die later) is owed to neighbours and carried out
//! while the instance is unsettled ([`Protocol::settled`]), also after the operation returned.
//!
//! Semantics (what 001 Theorem 6 uses, checked by the simulator's checker):
//! 1. every rank delivers at most once;
//! 3. if the root is alive, every live rank delivers (checked correction: whatever fails; the
//!    opportunistic variant only bridges gaps of fewer than `d` consecutive uninformed ranks);
//! 5. a root that failed before the operation is detected consistently: no rank delivers, and
//!    every live rank learns it from the failure detector and ends with
//!    [`AbortReason::PeerFailed`] of the root.
//!
//! Failure-free messages: `n - 1` tree messages, plus `n * min(2d, n - 1)` opportunistic or
//! `2n` checked corrections (none for n = 1); timed ones too, when `gap` exceeds the round trip.

use crate::protocol::{
    AbortReason, Counters, Detail, Event, Input, Outbox, Phase, Protocol, RankStatus,
};
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::{Duration, Time};
use crate::values::{Values, ValuesRef};
use crate::wire::{Frame, FrameError, FrameHeader, OpId};

use super::layout::CorrectedLayout;
use super::{
    check_header, unexpected, CorrectedKind, RankSet, FLAG_LEFTWARD, FLAG_PARTIAL,
    FLAG_ROOT_GAVE_UP,
};

/// The correction phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Correction {
    /// Send to the `distance` nearest ring neighbours on each side, once.
    Opportunistic {
        /// Neighbours per side.
        distance: u32,
    },
    /// Keep correcting on each side until a live rank there is heard from, moving past ranks
    /// the failure detector reports dead.
    Checked,
    /// Checked correction without a failure detector: move past a rank when nobody on its side
    /// within its distance was heard from `gap` after the correction to it went out.
    Timed {
        /// How long to wait for a side to answer before correcting one rank further.
        gap: Duration,
    },
}

impl Correction {
    /// Correction messages of a failure-free broadcast over `n` ranks.
    pub fn failure_free_messages(self, n: u32) -> u64 {
        let n = u64::from(n);
        if n < 2 {
            return 0;
        }
        match self {
            Correction::Opportunistic { distance } => n * (2 * u64::from(distance)).min(n - 1),
            Correction::Checked | Correction::Timed { .. } => 2 * n,
        }
    }

    /// Whether the correction keeps going on each side until it hears from a live rank.
    pub fn checked(self) -> bool {
        matches!(self, Correction::Checked | Correction::Timed { .. })
    }
}

/// Configuration of one broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BcastConfig {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the operation.
    pub size: u32,
    /// Operation id.
    pub op_id: OpId,
    /// The root.
    pub root: Rank,
    /// Subtrees of the root (at least 2, so ring neighbours sit in different subtrees).
    pub fanout: u32,
    /// Arity of the heaps inside each subtree.
    pub arity: u32,
    /// The correction phase.
    pub correction: Correction,
    /// The protocol id frames carry.
    pub algo: Algorithm,
    /// The header's step: the allreduce attempt (0 stand-alone).
    pub attempt: u32,
}

impl BcastConfig {
    /// A stand-alone checked broadcast from `root` whose tree has `tolerate + 1` subtrees.
    pub fn new(rank: Rank, size: u32, op_id: OpId, root: Rank, tolerate: u32) -> BcastConfig {
        BcastConfig {
            rank,
            size,
            op_id,
            root,
            fanout: tolerate + 1,
            arity: 2,
            correction: Correction::Checked,
            algo: Algorithm::CorrectedBcast,
            attempt: 0,
        }
    }

    /// The layout these parameters define.
    pub fn layout(&self) -> CorrectedLayout {
        let fanout = self.fanout.max(2).min(self.size.saturating_sub(1)).max(1);
        CorrectedLayout::new(self.size, self.root.0, fanout, self.arity)
    }
}

/// One side of the ring, for checked correction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Side {
    /// Current correction distance (0: not started).
    distance: u32,
    /// Whether the rank at `distance` has been sent to.
    sent: bool,
    /// Timed correction: when the rank at `distance` was sent to, or found dead.
    since: Option<Time>,
    /// Nearest distance on this side from which a live rank with the value was heard.
    heard: Option<u32>,
    done: bool,
}

/// What the broadcast carries.
#[derive(Clone, Debug, PartialEq)]
enum Payload {
    /// The value, and whether it leaves out a failed rank's input ([`FLAG_PARTIAL`]).
    Value(Values, bool),
    /// The root could not compute the result (an allreduce whose reduce saw too many failures).
    RootGaveUp,
}

/// One rank of a corrected-tree broadcast.
#[derive(Clone, Debug)]
pub struct CorrectedBcast {
    config: BcastConfig,
    layout: CorrectedLayout,
    started: bool,
    payload: Option<Payload>,
    /// The root's value leaves out a failed rank's input (set before the start).
    partial_at_root: bool,
    spread: bool,
    right: Side,
    left: Side,
    /// Ranks this rank has sent a rightward correction to.
    corrected_right: RankSet,
    /// Ranks this rank has sent a leftward correction to.
    corrected_left: RankSet,
    known_failed: RankSet,
    root_failed: bool,
    finished: Option<Phase>,
    counters: Counters,
    /// The time of the latest input (timed correction measures its gaps from it).
    now: Time,
}

impl CorrectedBcast {
    /// A new instance, idle until [`Input::Start`] (whose data only the root uses).
    pub fn new(config: BcastConfig) -> CorrectedBcast {
        CorrectedBcast {
            layout: config.layout(),
            config,
            started: false,
            payload: None,
            partial_at_root: false,
            spread: false,
            right: Side::default(),
            left: Side::default(),
            corrected_right: RankSet::default(),
            corrected_left: RankSet::default(),
            known_failed: RankSet::default(),
            root_failed: false,
            finished: None,
            counters: Counters::default(),
            now: Time::ZERO,
        }
    }

    /// The layout.
    pub fn layout(&self) -> CorrectedLayout {
        self.layout
    }

    /// The delivered value.
    pub fn value(&self) -> Option<&Values> {
        match &self.payload {
            Some(Payload::Value(v, _)) => Some(v),
            _ => None,
        }
    }

    /// Whether the delivered value leaves out the input of a rank that failed (the root's
    /// reduce said so; see [`FLAG_PARTIAL`]).
    pub fn partial(&self) -> bool {
        matches!(self.payload, Some(Payload::Value(_, true)))
    }

    /// The root: marks the value it is about to broadcast as leaving out a failed rank's input.
    /// Only before the start.
    pub fn mark_partial(&mut self) {
        if !self.started {
            self.partial_at_root = true;
        }
    }

    /// Whether this rank has the payload (a value, or the root's give-up).
    pub fn delivered(&self) -> bool {
        self.payload.is_some()
    }

    /// True when the root is known failed and nothing was delivered: the broadcast will never
    /// deliver here (under the paper's assumption that roots fail only before the operation).
    pub fn root_failed(&self) -> bool {
        self.root_failed && self.payload.is_none()
    }

    /// A started non-root rank takes `value` as the broadcast's payload, as if it had arrived,
    /// and spreads it: the value an earlier attempt of an allreduce delivered elsewhere (see
    /// `corrected::allreduce`). Nothing changes once a payload is here.
    pub fn adopt(&mut self, value: ValuesRef<'_>, partial: bool, out: &mut Outbox) {
        if !self.started || self.payload.is_some() || self.is_root() {
            return;
        }
        self.payload = Some(Payload::Value(value.to_owned_values(), partial));
        self.spread(out);
        self.advance_checked(out);
    }

    /// The root: broadcast that the result could not be computed.
    pub fn start_given_up(&mut self, out: &mut Outbox) {
        if self.started || self.config.rank != self.config.root {
            return;
        }
        self.started = true;
        self.payload = Some(Payload::RootGaveUp);
        self.spread(out);
    }

    fn is_root(&self) -> bool {
        self.config.rank == self.config.root
    }

    fn start(&mut self, data: ValuesRef<'_>, out: &mut Outbox) {
        if self.started {
            return;
        }
        self.started = true;
        if self.is_root() {
            self.payload = Some(Payload::Value(data.to_owned_values(), self.partial_at_root));
        }
        if self.payload.is_some() {
            self.spread(out);
        } else if self.known_failed.contains(self.config.root.0) {
            self.root_failed = true;
            self.finish(Phase::Aborted, out);
        }
    }

    fn payload_ref(&self) -> (u16, ValuesRef<'_>) {
        match &self.payload {
            Some(Payload::Value(v, partial)) => {
                (if *partial { FLAG_PARTIAL } else { 0 }, v.as_ref())
            }
            Some(Payload::RootGaveUp) | None => (FLAG_ROOT_GAVE_UP, ValuesRef::Empty),
        }
    }

    fn send(&mut self, to: u32, kind: CorrectedKind, flags: u16, out: &mut Outbox) {
        let (payload_flags, payload) = self.payload_ref();
        let header = FrameHeader::new(
            self.config.algo,
            kind as u8,
            self.config.op_id,
            self.config.rank,
            self.config.attempt,
        )
        .with_flags(flags | payload_flags);
        out.send(Rank(to), header, payload);
        self.counters.messages_sent += 1;
    }

    /// First receipt (or the root's start): deliver, forward down the tree, begin correcting.
    fn spread(&mut self, out: &mut Outbox) {
        if self.spread || !self.started || self.payload.is_none() {
            return;
        }
        self.spread = true;
        out.emit(Event::RoundDone { round: 0 });
        let me = self.config.rank.0;
        let children: Vec<u32> = self.layout.children(me).collect();
        for child in children {
            if !self.known_failed.contains(child) {
                self.send(child, CorrectedKind::BcastTree, 0, out);
            }
        }
        let n = self.layout.size();
        match self.config.correction {
            Correction::Opportunistic { distance } => {
                let right = distance.min(n - 1);
                let left = distance.min(n - 1 - right);
                for d in 1..=right {
                    let to = self.layout.ring_right(me, d);
                    self.correct(to, false, out);
                }
                for d in 1..=left {
                    let to = self.layout.ring_left(me, d);
                    self.correct(to, true, out);
                }
            }
            Correction::Checked | Correction::Timed { .. } => {
                self.right.distance = 1;
                self.left.distance = 1;
                self.advance_checked(out);
            }
        }
        // Delivery does not wait for the correction to settle: what is left is owed to
        // neighbours, and drivers keep serving an unsettled instance (see `settled`).
        self.finish_delivered(out);
    }

    /// Sends a correction to `to` in one direction, once.
    fn correct(&mut self, to: u32, leftward: bool, out: &mut Outbox) {
        let done = if leftward {
            &mut self.corrected_left
        } else {
            &mut self.corrected_right
        };
        if self.known_failed.contains(to) || !done.insert(to) {
            return;
        }
        let flags = if leftward { FLAG_LEFTWARD } else { 0 };
        self.send(to, CorrectedKind::BcastCorrection, flags, out);
    }

    /// Moves both sides of checked correction as far as the known failures (and, when timed,
    /// the silence of the ranks corrected) allow.
    fn advance_checked(&mut self, out: &mut Outbox) {
        if !self.spread || !self.config.correction.checked() {
            return;
        }
        let n = self.layout.size();
        let gap = match self.config.correction {
            Correction::Timed { gap } => Some(gap),
            _ => None,
        };
        for leftward in [false, true] {
            // Each turn either returns or raises the distance, which stops at n - 1.
            loop {
                let side = if leftward { self.left } else { self.right };
                if side.done || n < 2 {
                    break;
                }
                let me = self.config.rank.0;
                let target = if leftward {
                    self.layout.ring_left(me, side.distance)
                } else {
                    self.layout.ring_right(me, side.distance)
                };
                let known_dead = self.known_failed.contains(target);
                if !known_dead && !side.sent {
                    self.correct(target, leftward, out);
                }
                let now = self.now;
                let side = if leftward {
                    &mut self.left
                } else {
                    &mut self.right
                };
                if !side.sent {
                    side.since = Some(now);
                }
                side.sent |= !known_dead;
                // Timed: silence for a gap after the correction counts as dead for moving on.
                let silent = gap.is_some_and(|gap| side.since.is_some_and(|t| now >= t.after(gap)));
                let passed = known_dead || silent;
                if side.heard.is_some_and(|h| h <= side.distance)
                    || (passed && side.distance >= n - 1)
                {
                    side.done = true;
                } else if passed {
                    side.distance += 1;
                    side.sent = false;
                    side.since = None;
                    continue;
                }
                break;
            }
        }
    }

    fn finish_delivered(&mut self, out: &mut Outbox) {
        match self.payload {
            Some(Payload::Value(..)) => self.finish(Phase::Done, out),
            Some(Payload::RootGaveUp) => self.finish(Phase::Aborted, out),
            None => {}
        }
    }

    fn finish(&mut self, phase: Phase, out: &mut Outbox) {
        if self.finished.is_some() {
            return;
        }
        self.finished = Some(phase);
        match phase {
            Phase::Done => out.emit(Event::Completed),
            _ if self.root_failed() => {
                out.emit(Event::Aborted(AbortReason::PeerFailed(self.config.root)))
            }
            _ => out.emit(Event::Aborted(AbortReason::TooManyFailures)),
        }
    }

    fn on_message(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let (kind, values) = match self.accept(from, &frame) {
            Ok(accepted) => accepted,
            Err(error) => {
                self.counters.frames_rejected += 1;
                out.emit(Event::Rejected { from, error });
                return;
            }
        };
        self.counters.messages_received += 1;
        if self.payload.is_none() {
            self.payload = Some(if frame.header.flags & FLAG_ROOT_GAVE_UP != 0 {
                Payload::RootGaveUp
            } else {
                Payload::Value(
                    values.to_owned_values(),
                    frame.header.flags & FLAG_PARTIAL != 0,
                )
            });
        }
        if kind == CorrectedKind::BcastCorrection {
            let me = self.layout.virt(self.config.rank.0);
            let them = self.layout.virt(from.0);
            let n = self.layout.size();
            // A leftward correction comes from a rank on our right.
            let leftward = frame.header.flags & FLAG_LEFTWARD != 0;
            let (side, distance) = if leftward {
                (&mut self.right, (them + n - me) % n)
            } else {
                (&mut self.left, (me + n - them) % n)
            };
            side.heard = Some(side.heard.map_or(distance, |h| h.min(distance)));
            if self.spread && self.config.correction.checked() {
                // The sender reached us across dead ranks; it waits to hear from us.
                self.correct(from.0, !leftward, out);
            }
        }
        self.spread(out);
        self.advance_checked(out);
    }

    fn accept<'f>(
        &self,
        from: Rank,
        frame: &Frame<'f>,
    ) -> Result<(CorrectedKind, ValuesRef<'f>), FrameError> {
        let c = &self.config;
        let kind = check_header(frame, from, c.algo, c.op_id, c.attempt)?;
        let header = frame.header;
        match kind {
            CorrectedKind::BcastTree => {
                if self.layout.parent(self.config.rank.0) != Some(from.0) {
                    return Err(unexpected(
                        from.0,
                        "tree message from a rank that is not the parent",
                    ));
                }
            }
            CorrectedKind::BcastCorrection => {
                if from.0 == self.config.rank.0 || from.0 >= self.layout.size() {
                    return Err(unexpected(from.0, "correction from outside the ring"));
                }
            }
            _ => return Err(unexpected(from.0, "not a broadcast message")),
        }
        let values = frame.values()?;
        if let Some(Payload::Value(mine, _)) = &self.payload {
            if header.flags & FLAG_ROOT_GAVE_UP == 0
                && (values.dtype() != mine.dtype() || values.len() != mine.len())
            {
                return Err(unexpected(
                    from.0,
                    "payload differs in shape from the delivered value",
                ));
            }
        }
        Ok((kind, values))
    }
}

/// One broadcast per segment, all from the same root, copied in and out (the shell's defaults):
/// a rank has the whole vector only once every segment came, so no segment can disagree.
impl crate::protocol::SegmentProtocol for CorrectedBcast {}

impl Protocol for CorrectedBcast {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        self.now = self.now.max(now);
        match input {
            Input::Start { data } => self.start(data, out),
            Input::Message { from, frame } => self.on_message(from, frame, out),
            Input::Timeout => self.advance_checked(out),
            Input::PeerFailed { peer } => {
                self.counters.failures_noticed += 1;
                if self.known_failed.insert(peer.0) {
                    if peer == self.config.root && self.payload.is_none() {
                        self.root_failed = true;
                        if self.started {
                            self.finish(Phase::Aborted, out);
                        }
                    }
                    self.advance_checked(out);
                }
            }
            Input::LinkFailed { .. } => {}
            Input::Fault(fault) => out.emit(Event::FaultIgnored(fault)),
            Input::Stop => {
                if self.finished.is_none() {
                    self.finished = Some(Phase::Aborted);
                    out.emit(Event::Aborted(AbortReason::Stopped));
                }
            }
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        let Correction::Timed { gap } = self.config.correction else {
            return None;
        };
        if !self.spread {
            return None;
        }
        [self.left, self.right]
            .into_iter()
            .filter(|side| !side.done)
            .filter_map(|side| side.since.map(|t| t.after(gap)))
            .min()
    }

    fn reads_clock(&self) -> bool {
        matches!(self.config.correction, Correction::Timed { .. })
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        if let Some(value) = self.value() {
            value.push_as_f64(dst);
        }
    }

    /// The delivered value in its own type.
    fn result(&self) -> Option<ValuesRef<'_>> {
        match self.finished {
            Some(Phase::Done) => self.value().map(Values::as_ref),
            _ => None,
        }
    }

    fn phase(&self) -> Phase {
        match self.finished {
            Some(phase) => phase,
            None if self.started => Phase::Running,
            None => Phase::Idle,
        }
    }

    fn settled(&self) -> bool {
        match self.config.correction {
            Correction::Checked | Correction::Timed { .. } if self.spread => {
                (self.left.done && self.right.done) || self.layout.size() < 2
            }
            _ => true,
        }
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: self.phase(),
            iteration: u32::from(self.spread),
            counters: self.counters,
            detail: Detail::CorrectedTree {
                attempt: self.config.attempt,
                root: self.config.root.0,
                known_failed: self.known_failed.len() as u32,
                waiting_for: u32::from(!self.left.done) + u32::from(!self.right.done),
            },
        }
    }
}
