//! The fault-tolerant ring allreduce: the bandwidth-optimal ring, run in attempts over the
//! survivors, each attempt closed by an agreement (ERA, 002) on whether it completed everywhere.
//!
//! # The algorithm
//! Attempt 0 runs the segmented ring allreduce ([`crate::ring`] under the operation shell) over
//! all members. When a rank's ring completes, or a member of the attempt fails, the rank
//! contributes to agreement `attempt + 1`: COMPLETED, RETRY (a member failed before this rank
//! had the whole result) or MISMATCH (a rank passed another shape). The agreement's operator is
//! the minimum, and ERA also agrees on the union of the failures its contributors knew.
//! - Decided COMPLETED: every rank whose contribution the decision holds has the ring's result;
//!   ERA's Participation puts every live rank's own contribution in its decision, so every
//!   survivor has it. The rank returns it.
//! - Decided RETRY: the rank drops the attempt's result, removes the agreed failed ranks from
//!   the members, and starts the next attempt over the survivors from its own input again.
//! - Decided MISMATCH: every rank ends with the same typed error.
//!
//! # Semantics (the argument)
//! The ring of one attempt computes each block's reduction once, at one rank, over the inputs
//! of exactly that attempt's members, and copies it around: every rank that completes holds the
//! same bits, the reduction over the attempt's members, each counted once. A result is returned
//! only after an agreement decided COMPLETED for that attempt; that decision is the same at every
//! survivor (ERA's Agreement), so every survivor returns the result of the same attempt, hence
//! the same vector with the same contributor set: the attempt's members. A member that died
//! after the ring completed everywhere is counted (once, identically everywhere); a member that
//! died earlier is counted nowhere, since the next attempt starts from the inputs again. This is
//! 001's semantics 5.1 and 004's for the whole vector, not segment by segment: no segment can
//! count a rank another segment left out.
//!
//! Failures reach the protocol as [`Input::PeerFailed`] from a fail-stop detector (the rank was
//! fenced before anyone is told), which is what ERA and the argument assume. Every attempt but
//! the last removes at least one failed member, so an operation makes at most `failures + 1`
//! attempts. A decided RETRY that names no member of the attempt cannot happen (a RETRY is
//! contributed only by a rank that knows a member failed, and its knowledge is in the union); it
//! is an abort, never a loop.
//!
//! # Cost
//! Without failures: the plain ring plus one agreement (a tree's depth of small messages) and
//! one copy of the input, kept for a retry. With a failure after a fraction x of the ring: x of
//! a ring, the detection, two agreements and a ring over the survivors.
//!
//! # Frames
//! The ring's frames carry the attempt in the header's `attempt` field, so a late frame of an
//! abandoned attempt is dropped, and frames of the next attempt that arrive while this rank still
//! agrees are held. ERA's frames travel under this algorithm's wire id with the operation's id,
//! the agreement id in the `segment` field (the communicator's own agreement service never
//! claims them).

use crate::era::EraConfig;
use crate::protocol::{
    AbortReason, Counters, Detail, Event, Input, Layout, Outbox, Phase, Protocol, RankStatus,
    SegmentPlan, ShellConfig,
};
use crate::rank::{Rank, RankSet};
use crate::registry::Algorithm;
use crate::time::{Duration, Time};
use crate::values::{Dtype, ReduceOp, ValuesRef};
use crate::wire::{Frame, FrameError, OpId, MAX_ATTEMPT};

mod agreement;
mod attempt;
mod corrected;

pub use agreement::FtRingServer;
use agreement::OpAgreement;
pub use attempt::{AttemptRing, CopyingRing};
pub use corrected::CorrectedAttempt;

/// What a rank contributes to an attempt's agreement (the decision is the minimum).
const MISMATCH: u64 = 0;
/// A member failed before this rank had the attempt's result.
const RETRY: u64 = 1;
/// This rank's ring completed.
const COMPLETED: u64 = 2;

/// When a rank may return: the agreed rule, or the planted bug of the checker's control.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommitRule {
    /// After the attempt's agreement decided that it completed everywhere.
    #[default]
    Agreed,
    /// As soon as the local ring completes (wrong: another survivor may retry without a rank
    /// this one counted). Only the semantics checker's planted-bug control uses it.
    LocalCompletion,
    /// After the agreement, but taking a completed attempt as complete even where some of its
    /// segments left out a member that others counted (wrong: the vector mixes contributor
    /// sets). Only the checker's control for attempts in corrected trees uses it.
    MixedSegments,
}

/// One rank's fault-tolerant ring allreduce.
#[derive(Clone, Debug, PartialEq)]
pub struct FtRingConfig {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the group.
    pub size: u32,
    /// The operator.
    pub op: ReduceOp,
    /// The operation id every frame carries.
    pub op_id: OpId,
    /// Elements an attempt's frame carries at most: a ring's segment is this many per member
    /// of the attempt (see [`AttemptRing::segment_elems`]).
    pub frame_elems: usize,
    /// Segments a rank starts ahead.
    pub window: u32,
    /// The agreement tree.
    pub era: EraConfig,
    /// How long a rank that returned keeps answering agreement messages (a peer whose parent
    /// in the tree died asks others for the decision).
    pub linger: Duration,
    /// When to return.
    pub commit: CommitRule,
}

/// Where the operation is at this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Idle,
    Ringing,
    Agreeing,
    Done,
    Aborted,
}

/// The fault-tolerant ring allreduce at one rank (see the module docs), over the copying ring
/// or another [`AttemptRing`].
pub struct FtRing<R: AttemptRing = CopyingRing> {
    config: FtRingConfig,
    stage: Stage,
    attempt: u32,
    /// The attempt's members (world ranks, ascending); the ring numbers them 0, 1, ….
    members: Vec<u32>,
    /// The outbox's rank map while the ring runs (swapped in and out).
    map: Vec<u32>,
    /// The attempt's ring, which also keeps the input every attempt starts from.
    ring: R,
    agreement: OpAgreement,
    /// Ring frames of the next attempt (or of attempt 0 before the start): bounded.
    held: Vec<(Rank, Vec<u8>)>,
    known_failed: RankSet,
    /// The shape mismatch this rank saw, mapped to world ranks.
    mismatch: Option<AbortReason>,
    abort: Option<AbortReason>,
    serve_until: Option<Time>,
    counters: Counters,
    /// Frames of abandoned attempts dropped.
    stale: u64,
}

impl<R: AttemptRing> std::fmt::Debug for FtRing<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FtRing")
            .field("rank", &self.config.rank)
            .field("stage", &self.stage)
            .field("attempt", &self.attempt)
            .field("members", &self.members.len())
            .finish()
    }
}

impl FtRing {
    /// A rank's instance over the copying ring.
    pub fn new(config: FtRingConfig) -> FtRing {
        let members: Vec<u32> = (0..config.size).collect();
        let ring = CopyingRing::new(Self::shell(&config, &members, 0));
        FtRing::with_ring(config, ring)
    }
}

impl FtRing<CorrectedAttempt> {
    /// A rank's instance whose attempts run the corrected-tree allreduce (001) in segments,
    /// each tolerating `tolerate` failures (see [`CorrectedAttempt`]).
    pub fn corrected(
        config: FtRingConfig,
        tolerate: u32,
        correction: crate::corrected::Correction,
    ) -> FtRing<CorrectedAttempt> {
        let members: Vec<u32> = (0..config.size).collect();
        let shell = Self::shell(&config, &members, 0);
        FtRing::with_ring(config, CorrectedAttempt::new(shell, tolerate, correction))
    }
}

impl<R: AttemptRing> FtRing<R> {
    /// A rank's instance whose attempts run `ring`.
    pub fn with_ring(config: FtRingConfig, ring: R) -> FtRing<R> {
        let members: Vec<u32> = (0..config.size).collect();
        FtRing {
            agreement: OpAgreement::new(config.rank, config.size, config.op_id, config.era),
            config,
            stage: Stage::Idle,
            attempt: 0,
            members,
            map: Vec::new(),
            ring,
            held: Vec::new(),
            known_failed: RankSet::default(),
            mismatch: None,
            abort: None,
            serve_until: None,
            counters: Counters::default(),
            stale: 0,
        }
    }

    fn shell(config: &FtRingConfig, members: &[u32], attempt: u32) -> ShellConfig {
        let size = members.len() as u32;
        let position = members.binary_search(&config.rank.0).unwrap_or(0) as u32;
        ShellConfig {
            rank: Rank(position),
            size,
            algo: R::FRAMES,
            op: config.op_id,
            reduce: config.op,
            plan: SegmentPlan {
                segment_elems: R::segment_elems(config.frame_elems, size),
                window: config.window.max(1),
            },
            layout: Layout::Contiguous,
            attempt,
        }
    }

    /// The members whose inputs the result holds, once returned (world ranks, ascending).
    pub fn contributors(&self) -> Option<&[u32]> {
        (self.stage == Stage::Done).then_some(self.members.as_slice())
    }

    /// The attempt running (or the one that returned).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The result piece by piece with offsets (see [`crate::protocol::Segmented::results`]).
    pub fn results(&self) -> Option<impl Iterator<Item = (usize, ValuesRef<'_>)> + '_> {
        if self.stage != Stage::Done {
            return None;
        }
        self.ring.results()
    }

    /// Elements of the result.
    pub fn output_len_total(&self) -> usize {
        self.ring.shape().1 as usize
    }

    /// The ring attempts run (for the caller's buffers, once the operation ended).
    pub fn ring(&self) -> &R {
        &self.ring
    }

    /// Why the operation aborted, once it has.
    pub fn abort_reason(&self) -> Option<AbortReason> {
        self.abort
    }

    /// Hands over what must keep answering peers once the caller has the result (the
    /// operation's agreements, until `serve_until`), leaving an instance that only
    /// [`FtRing::restart`] makes useful again. The ring's buffers stay here, so that a loop of
    /// operations faults in no memory after the first.
    pub fn detach_server(&mut self) -> FtRingServer {
        let fresh = OpAgreement::new(
            self.config.rank,
            self.config.size,
            self.config.op_id,
            self.config.era,
        );
        FtRingServer {
            agreement: std::mem::replace(&mut self.agreement, fresh),
            serve_until: self.serve_until.take(),
        }
    }

    /// Makes the instance a fresh one for `config`, keeping its buffers.
    pub fn restart(&mut self, config: FtRingConfig) {
        self.members.clear();
        self.members.extend(0..config.size);
        self.agreement = OpAgreement::new(config.rank, config.size, config.op_id, config.era);
        self.config = config;
        self.stage = Stage::Idle;
        self.attempt = 0;
        self.held.clear();
        self.known_failed = RankSet::default();
        self.mismatch = None;
        self.abort = None;
        self.serve_until = None;
        self.counters = Counters::default();
        self.stale = 0;
    }

    /// Hands the ring an input, with the attempt's rank map in the outbox, and keeps only the
    /// events that are not the ring's own completion reports.
    fn drive_ring(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        self.on_ring(out, |ring, out| ring.handle(now, input, out));
    }

    /// Starts the restarted attempt's ring from the kept input (see [`FtRing::drive_ring`]).
    fn start_ring(&mut self, now: Time, out: &mut Outbox) {
        self.on_ring(out, |ring, out| ring.start(now, out));
    }

    /// Lets `act` drive the ring with the attempt's rank map in the outbox, dropping the ring's
    /// own completion reports.
    fn on_ring(&mut self, out: &mut Outbox, act: impl FnOnce(&mut R, &mut Outbox)) {
        let first = out.events().len();
        self.map.clear();
        self.map.extend_from_slice(&self.members);
        out.swap_rank_map(&mut self.map);
        act(&mut self.ring, out);
        out.swap_rank_map(&mut self.map);
        out.retain_events_from(first, |event| {
            !matches!(
                event,
                Event::Completed | Event::Aborted(_) | Event::RoundDone { .. }
            )
        });
    }

    fn start_attempt(&mut self, now: Time, out: &mut Outbox) {
        self.stage = Stage::Ringing;
        let dead_member = self.members.iter().any(|r| self.known_failed.contains(*r));
        if dead_member && !R::TOLERATES_FAILURES {
            // A member is known dead (before the start, or after this rank contributed to the
            // last agreement): the attempt cannot complete, so skip its ring and go to its
            // agreement at once, which then removes the member.
            self.contribute(RETRY, out);
            self.check_decision(now, out);
            return;
        }
        let shell = Self::shell(&self.config, &self.members, self.attempt);
        self.ring.restart(shell);
        self.start_ring(now, out);
        if dead_member {
            for position in 0..self.members.len() {
                if self.known_failed.contains(self.members[position]) {
                    let peer = Rank(position as u32);
                    self.drive_ring(now, Input::PeerFailed { peer }, out);
                }
            }
        }
        let held = std::mem::take(&mut self.held);
        for (from, bytes) in held {
            match Frame::decode(&bytes) {
                Ok(frame) if frame.header.stamp().attempt == self.attempt => {
                    self.on_ring_frame(now, from, frame, out)
                }
                // Held for an attempt this rank skipped (it knew a member failed).
                Ok(_) => self.stale += 1,
                Err(error) => out.emit(Event::Rejected { from, error }),
            }
        }
        if dead_member {
            // The attempt cannot count every member: RETRY at once, the trees running on for
            // peers that do not know yet and wait for this rank's part (see `on_message`).
            self.contribute(RETRY, out);
            self.check_decision(now, out);
            return;
        }
        self.after_ring(now, out);
    }

    /// Moves to the agreement once the ring of the attempt has ended here.
    fn after_ring(&mut self, now: Time, out: &mut Outbox) {
        if self.stage != Stage::Ringing {
            return;
        }
        match self.ring.phase() {
            Phase::Done if self.config.commit == CommitRule::LocalCompletion => {
                // The planted bug: contribute, so that peers do not wait, but return at once.
                self.contribute(COMPLETED, out);
                self.finish(now, out);
            }
            Phase::Done
                if self.ring.counts_every_member()
                    || self.config.commit == CommitRule::MixedSegments =>
            {
                self.contribute(COMPLETED, out)
            }
            // Done without some member in some segments: the result must not be returned.
            Phase::Done => self.contribute(RETRY, out),
            Phase::Aborted => match self.ring.abort_reason() {
                Some(AbortReason::ShapeMismatch {
                    peer,
                    local,
                    remote,
                }) => {
                    let peer = self.world(peer);
                    self.mismatch = Some(AbortReason::ShapeMismatch {
                        peer,
                        local,
                        remote,
                    });
                    self.contribute(MISMATCH, out);
                }
                _ => self.contribute(RETRY, out),
            },
            Phase::Idle | Phase::Running => {}
        }
        // The decision may already be in: peers contributed before this rank did.
        self.check_decision(now, out);
    }

    fn world(&self, position: Rank) -> Rank {
        Rank(
            self.members
                .get(position.index())
                .copied()
                .unwrap_or(position.0),
        )
    }

    /// Contributes `status` to the attempt's agreement, with this rank's shape (so that a
    /// mismatch is reported identically everywhere).
    fn contribute(&mut self, status: u64, out: &mut Outbox) {
        self.stage = Stage::Agreeing;
        let (dtype, len) = self.ring.shape();
        let mine = shape_code(dtype, len);
        // A rank that saw another shape names a rank of the lower and one of the higher of the
        // two: itself and the peer.
        let (low, high) = match self.mismatch {
            Some(AbortReason::ShapeMismatch { peer, remote, .. }) => {
                let (me, peer) = (u64::from(self.config.rank.0), u64::from(peer.0));
                if shape_code(remote.0, remote.1) < mine {
                    (peer, me)
                } else {
                    (me, peer)
                }
            }
            _ => (u64::MAX, u64::MAX),
        };
        // Minimum everywhere: with the complemented largest shape, both extremes.
        let words = vec![status, low, high, mine, !mine];
        let agreement = u64::from(self.attempt) + 1;
        if self.agreement.start(agreement, words, out).is_err() {
            // Only a repeated id or a full service refuses: neither happens in one operation.
            self.fail(AbortReason::TooManyFailures, out);
        }
    }

    /// Acts on the attempt's decision, if taken.
    fn check_decision(&mut self, now: Time, out: &mut Outbox) {
        if self.stage != Stage::Agreeing {
            return;
        }
        let agreement = u64::from(self.attempt) + 1;
        let Some((words, failed)) = self.agreement.decision(agreement) else {
            return;
        };
        match words.first().copied().unwrap_or(MISMATCH) {
            COMPLETED => self.finish(now, out),
            RETRY => {
                let before = self.members.len();
                self.members.retain(|r| !failed.contains(*r));
                for &r in failed.as_slice() {
                    self.known_failed.insert(r);
                }
                let stuck = self.members.len() == before || self.members.is_empty();
                if stuck || self.attempt >= MAX_ATTEMPT {
                    self.fail(AbortReason::TooManyFailures, out);
                    return;
                }
                self.attempt += 1;
                self.start_attempt(now, out);
            }
            _ => {
                let reason = self.agreed_mismatch(&words);
                self.fail(reason, out);
            }
        }
    }

    /// The mismatch every rank reports: the smallest culprit any rank named, and the shape
    /// that differs from this rank's among the smallest and the largest.
    fn agreed_mismatch(&self, words: &[u64]) -> AbortReason {
        let word = |i: usize| words.get(i).copied().unwrap_or(u64::MAX);
        let local = self.ring.shape();
        let (low, high) = (word(3), !word(4));
        // With two shapes (the usual bug) every rank names a rank of the other one.
        let (culprit, remote) = if shape_code(local.0, local.1) == low {
            (word(2), high)
        } else {
            (word(1), low)
        };
        let peer = u32::try_from(culprit).map_or(self.config.rank, Rank);
        AbortReason::ShapeMismatch {
            peer,
            local,
            remote: (
                Dtype::from_u8((remote % 8) as u8).unwrap_or(Dtype::Empty),
                remote / 8,
            ),
        }
    }

    fn finish(&mut self, now: Time, out: &mut Outbox) {
        self.stage = Stage::Done;
        self.serve_until = Some(now + self.config.linger);
        out.emit(Event::Completed);
    }

    fn fail(&mut self, reason: AbortReason, out: &mut Outbox) {
        if matches!(self.stage, Stage::Done | Stage::Aborted) {
            return;
        }
        self.stage = Stage::Aborted;
        self.abort = Some(reason);
        out.emit(Event::Aborted(reason));
    }

    fn reject(&mut self, from: Rank, what: &'static str, out: &mut Outbox) {
        self.counters.frames_rejected += 1;
        out.emit(Event::Rejected {
            from,
            error: FrameError::Unexpected { from: from.0, what },
        });
    }

    fn on_message(&mut self, now: Time, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        if frame.header.op_id != self.config.op_id.0 {
            out.emit(Event::Rejected {
                from,
                error: FrameError::WrongOperation {
                    expected: self.config.op_id.0,
                    got: frame.header.op_id,
                },
            });
            return;
        }
        match Algorithm::from_wire(frame.header.algo) {
            Some(Algorithm::FtRing) => self.on_era_frame(now, from, frame, out),
            Some(algo) if algo == R::FRAMES => {
                let attempt = frame.header.stamp().attempt;
                let over = !matches!(self.stage, Stage::Ringing | Stage::Idle);
                let answers = R::TOLERATES_FAILURES && self.stage == Stage::Agreeing;
                if attempt == self.attempt && answers {
                    // Done here, the attempt may still owe a peer in it an answer; it cannot
                    // move to the agreement again.
                    self.on_ring_frame(now, from, frame, out);
                } else if attempt < self.attempt || (attempt == self.attempt && over) {
                    // The ring of that attempt is over here.
                    self.stale += 1;
                } else if attempt == self.attempt && self.stage == Stage::Ringing {
                    self.on_ring_frame(now, from, frame, out);
                    self.after_ring(now, out);
                } else if attempt <= self.attempt + 1 {
                    self.hold(from, frame, out);
                } else {
                    self.reject(from, "frame of an attempt two ahead", out);
                }
            }
            _ => self.reject(from, "frame of another algorithm", out),
        }
    }

    /// Keeps a frame of the next attempt (a peer already decided and started it): a peer ahead
    /// sends at most one frame per segment of its window before it needs this rank's.
    fn hold(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let bound = 4 * (self.config.window as usize + self.config.size as usize) + 64;
        if self.held.len() >= bound {
            return self.reject(from, "too many frames of the next attempt", out);
        }
        let mut bytes = Vec::new();
        let mut words = Vec::new();
        let Ok(values) = frame.values() else {
            return self.reject(from, "undecodable values", out);
        };
        let len = crate::wire::encode_into(&mut words, frame.header, values);
        bytes.extend_from_slice(&bytemuck::cast_slice::<u64, u8>(&words)[..len]);
        self.held.push((from, bytes));
    }

    fn on_ring_frame(&mut self, now: Time, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let (Ok(position), Ok(source)) = (
            self.members.binary_search(&from.0),
            self.members.binary_search(&frame.header.source),
        ) else {
            return self.reject(from, "ring frame from a rank outside the attempt", out);
        };
        let mut header = frame.header;
        header.source = source as u32;
        let frame = Frame { header, ..frame };
        self.drive_ring(
            now,
            Input::Message {
                from: Rank(position as u32),
                frame,
            },
            out,
        );
    }

    fn on_era_frame(&mut self, now: Time, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        self.agreement.on_frame(from, frame, out);
        self.check_decision(now, out);
    }

    fn on_failure(&mut self, now: Time, peer: Rank, out: &mut Outbox) {
        if peer == self.config.rank || !self.known_failed.insert(peer.0) {
            return;
        }
        self.counters.failures_noticed += 1;
        self.agreement.peer_failed(peer, out);
        let running = self.stage == Stage::Ringing
            || (R::TOLERATES_FAILURES && self.stage == Stage::Agreeing);
        if running {
            if let Ok(position) = self.members.binary_search(&peer.0) {
                let peer = Rank(position as u32);
                self.drive_ring(now, Input::PeerFailed { peer }, out);
                self.after_ring(now, out);
            }
        }
        self.check_decision(now, out);
    }

    fn on_start(&mut self, now: Time, data: ValuesRef<'_>, out: &mut Outbox) {
        self.ring.keep_input(data);
        self.start_attempt(now, out);
    }
}

/// A vector's shape as one number, ordered by length then type (types fit 3 bits).
fn shape_code(dtype: Dtype, len: u64) -> u64 {
    len.saturating_mul(8) | u64::from(dtype as u8 & 7)
}

impl<R: AttemptRing> crate::protocol::Assembled for FtRing<R> {
    fn results(&self) -> Option<impl Iterator<Item = (usize, ValuesRef<'_>)> + '_> {
        FtRing::results(self)
    }

    fn output_len_total(&self) -> usize {
        FtRing::output_len_total(self)
    }

    fn abort_reason(&self) -> Option<AbortReason> {
        FtRing::abort_reason(self)
    }
}

impl<R: AttemptRing> Protocol for FtRing<R> {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Start { data } if self.stage == Stage::Idle => self.on_start(now, data, out),
            Input::Start { .. } => {}
            Input::Message { from, frame } => self.on_message(now, from, frame, out),
            Input::PeerFailed { peer } => self.on_failure(now, peer, out),
            Input::Timeout | Input::LinkFailed { .. } => {}
            Input::Fault(_) if self.stage == Stage::Ringing => self.drive_ring(now, input, out),
            Input::Fault(fault) => out.emit(Event::FaultIgnored(fault)),
            Input::Stop => {
                if self.stage == Stage::Ringing {
                    self.drive_ring(now, input, out);
                }
                self.fail(AbortReason::Stopped, out);
            }
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        match self.stage {
            Stage::Idle => self.ring.input_estimate(dst),
            _ => self.ring.estimate(dst),
        }
    }

    fn phase(&self) -> Phase {
        match self.stage {
            Stage::Idle => Phase::Idle,
            Stage::Ringing | Stage::Agreeing => Phase::Running,
            Stage::Done => Phase::Done,
            Stage::Aborted => Phase::Aborted,
        }
    }

    fn result(&self) -> Option<ValuesRef<'_>> {
        if self.stage == Stage::Done {
            self.ring.result()
        } else {
            None
        }
    }

    fn has_result(&self) -> bool {
        // A ring that reduces in the caller's vector has none of its own to write back.
        self.stage == Stage::Done && self.ring.has_result()
    }

    fn reads_clock(&self) -> bool {
        // Only to date how long a returned rank keeps serving the agreement.
        true
    }

    fn status(&self) -> RankStatus {
        let ring = self.ring.status();
        let mut counters = ring.counters;
        counters.messages_sent += self.counters.messages_sent;
        counters.messages_received += self.counters.messages_received;
        counters.frames_rejected += self.counters.frames_rejected;
        counters.failures_noticed = self.counters.failures_noticed;
        RankStatus {
            phase: self.phase(),
            iteration: self.attempt,
            counters,
            detail: Detail::FtRing {
                attempt: self.attempt,
                members: self.members.len() as u32,
                known_failed: self.known_failed.len() as u32,
            },
        }
    }

    fn settled(&self) -> bool {
        true
    }

    fn serve_until(&self) -> Option<Time> {
        self.serve_until
    }
}

#[cfg(test)]
mod tests;
