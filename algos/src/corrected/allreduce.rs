//! Allreduce = corrected reduce to a root + corrected broadcast from it (001 Sec. 5, Alg. 5).
//!
//! Attempt `i` uses root candidate `i` (ranks `0, 1, ..., f` in order, the deterministic
//! sequence 5.2 asks for). A rank moves to attempt `i + 1` when the broadcast of attempt `i` can
//! no longer deliver: its root is known failed and nothing arrived. Attempts whose candidate is
//! already known failed are skipped without sending. 5.1 requires the candidates to fail only
//! before the operation; under that assumption every live rank sees the same sequence of failed
//! roots and delivers the one result of the first live candidate.
//!
//! Frames carry their attempt in the header's `step`; frames of a later attempt (from a rank that
//! learned of a failed root first) are held, bounded, until this rank gets there.
//!
//! Outside 5.1's model a candidate dies while broadcasting: some ranks deliver its result,
//! the rest move to the next attempt, whose root may be among those that delivered and would
//! never run it (they all waited forever). So a rank that delivered answers a frame of a later
//! attempt with the value it delivered, and a rank of a later attempt that receives an earlier
//! attempt's broadcast value adopts it and spreads it through its own attempt's broadcast:
//! every survivor ends with the one result some rank already returned. Were a later candidate
//! to compute and broadcast a result of its own meanwhile, ranks could differ; the launcher's
//! consistency check reports that, with a non-zero exit.

use crate::protocol::{
    AbortReason, Counters, Detail, Event, Input, Outbox, Phase, Protocol, RankStatus,
};
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::Time;
use crate::values::{finish_estimate, ReduceOp, Values, ValuesRef};
use crate::wire::{encode_with_trailer, Frame, FrameHeader, OpId};

use super::bcast::{BcastConfig, CorrectedBcast, Correction};
use super::reduce::{CorrectedReduce, ReduceConfig};
use super::{unexpected, CorrectedKind, FailureInfo, RankSet, FLAG_PARTIAL, FLAG_ROOT_GAVE_UP};

/// Drives a part (the reduce or the broadcast) of the allreduce: its sends go out, its
/// completion reports stay inside, as the allreduce reports its own.
fn drive<P: Protocol>(part: &mut P, now: Time, input: Input<'_>, out: &mut Outbox) {
    let mark = out.events().len();
    part.handle(now, input, out);
    hide_part_events(out, mark);
}

/// Drops a part's completion reports queued since `mark`.
fn hide_part_events(out: &mut Outbox, mark: usize) {
    out.retain_events_from(mark, |event| {
        !matches!(
            event,
            Event::Completed | Event::Aborted(_) | Event::RoundDone { .. }
        )
    });
}

/// Bound on frames of later attempts held at one rank.
const MAX_HELD_FRAMES: usize = 4096;

/// Configuration of one allreduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllreduceConfig {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the operation.
    pub size: u32,
    /// The operator.
    pub op: ReduceOp,
    /// Operation id.
    pub op_id: OpId,
    /// Failures tolerated, f.
    pub tolerate: u32,
    /// How the reduce reports failures.
    pub info: FailureInfo,
    /// The broadcast's correction phase.
    pub correction: Correction,
    /// Arity of the heaps inside each subtree.
    pub arity: u32,
}

impl AllreduceConfig {
    /// An allreduce tolerating `tolerate` failures, with checked correction.
    pub fn new(rank: Rank, size: u32, op: ReduceOp, op_id: OpId, tolerate: u32) -> Self {
        AllreduceConfig {
            rank,
            size,
            op,
            op_id,
            tolerate,
            info: FailureInfo::default(),
            correction: Correction::Checked,
            arity: 2,
        }
    }

    /// Root candidates: ranks `0..=f` (fewer when the group is smaller).
    pub fn candidates(&self) -> u32 {
        (self.tolerate + 1).min(self.size)
    }

    fn reduce(&self, attempt: u32) -> ReduceConfig {
        ReduceConfig {
            rank: self.rank,
            size: self.size,
            op: self.op,
            op_id: self.op_id,
            tolerate: self.tolerate,
            info: self.info,
            root: Rank(attempt),
            arity: self.arity,
            algo: Algorithm::CorrectedAllreduce,
            attempt,
        }
    }

    fn bcast(&self, attempt: u32) -> BcastConfig {
        BcastConfig {
            rank: self.rank,
            size: self.size,
            op_id: self.op_id,
            root: Rank(attempt),
            fanout: self.tolerate + 1,
            arity: self.arity,
            correction: self.correction,
            algo: Algorithm::CorrectedAllreduce,
            attempt,
        }
    }
}

/// A frame of a later attempt, re-encoded so it can be decoded in place later.
#[derive(Clone, Debug)]
struct HeldFrame {
    from: Rank,
    attempt: u32,
    words: Vec<u64>,
    len: usize,
}

/// One rank of a corrected-tree allreduce.
#[derive(Clone, Debug)]
pub struct CorrectedAllreduce {
    config: AllreduceConfig,
    input: Option<Values>,
    attempt: u32,
    reduce: CorrectedReduce,
    bcast: CorrectedBcast,
    bcast_started: bool,
    known_failed: RankSet,
    held: Vec<HeldFrame>,
    /// Ranks of later attempts this rank, done, has sent its result to.
    answered_late: RankSet,
    /// Frames sent by reduces dropped once done (see `shed`).
    reduce_sent: u64,
    /// The reduce was dropped (see `shed`).
    reduce_shed: bool,
    finished: Option<Phase>,
    counters: Counters,
}

impl CorrectedAllreduce {
    /// A new instance, idle until [`Input::Start`].
    pub fn new(config: AllreduceConfig) -> CorrectedAllreduce {
        CorrectedAllreduce {
            reduce: CorrectedReduce::new(config.reduce(0)),
            bcast: CorrectedBcast::new(config.bcast(0)),
            config,
            input: None,
            attempt: 0,
            bcast_started: false,
            known_failed: RankSet::default(),
            held: Vec::new(),
            answered_late: RankSet::default(),
            reduce_sent: 0,
            reduce_shed: false,
            finished: None,
            counters: Counters::default(),
        }
    }

    /// The current attempt (the index of the root candidate in use).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The current attempt's root.
    pub fn root(&self) -> Rank {
        Rank(self.attempt)
    }

    /// The reduce of the current attempt.
    pub fn reduce(&self) -> &CorrectedReduce {
        &self.reduce
    }

    /// The broadcast of the current attempt.
    pub fn bcast(&self) -> &CorrectedBcast {
        &self.bcast
    }

    /// The delivered result (for average, the sum and the contributor count).
    pub fn raw_result(&self) -> Option<&Values> {
        self.bcast.value()
    }

    /// Whether the delivered result leaves out the input of a rank that failed during the
    /// operation, as the root that computed it reported. Complete under [`FailureInfo::List`]
    /// only: the other schemes do not carry the chosen subtree's losses to the root.
    pub fn partial(&self) -> bool {
        self.bcast.partial()
    }

    fn begin_attempt(&mut self, now: Time, out: &mut Outbox) {
        // Bounded by the number of candidates: each turn raises the attempt or returns.
        while self.attempt < self.config.candidates() && self.known_failed.contains(self.attempt) {
            self.attempt += 1;
        }
        if self.attempt >= self.config.candidates() {
            self.finish(Phase::Aborted, out);
            return;
        }
        self.reduce = CorrectedReduce::new(self.config.reduce(self.attempt));
        self.bcast = CorrectedBcast::new(self.config.bcast(self.attempt));
        self.bcast_started = false;
        let mut scratch = Outbox::new();
        for &peer in self.known_failed.as_slice() {
            let notice = Input::PeerFailed { peer: Rank(peer) };
            drive(&mut self.reduce, now, notice, &mut scratch);
            drive(&mut self.bcast, now, notice, &mut scratch);
        }
        let Some(input) = self.input.take() else {
            return;
        };
        drive(
            &mut self.reduce,
            now,
            Input::Start {
                data: input.as_ref(),
            },
            out,
        );
        self.input = Some(input);
        if self.config.rank != self.root() {
            drive(
                &mut self.bcast,
                now,
                Input::Start {
                    data: ValuesRef::Empty,
                },
                out,
            );
            self.bcast_started = true;
        }
        let attempt = self.attempt;
        let (now_held, later): (Vec<HeldFrame>, Vec<HeldFrame>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.attempt == attempt);
        self.held = later;
        for held in now_held {
            let bytes: &[u8] = bytemuck::cast_slice(&held.words);
            if let Ok(frame) = Frame::decode(&bytes[..held.len]) {
                self.route(now, held.from, frame, out);
            }
        }
        self.step(now, out);
    }

    /// Hands a frame of the current attempt to the reduce or the broadcast.
    fn route(&mut self, now: Time, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let input = Input::Message { from, frame };
        match CorrectedKind::from_u8(frame.header.kind) {
            Some(CorrectedKind::UpCorrection | CorrectedKind::ReduceTree) => {
                drive(&mut self.reduce, now, input, out)
            }
            _ => drive(&mut self.bcast, now, input, out),
        }
    }

    /// Moves between phases and attempts after any input.
    fn step(&mut self, now: Time, out: &mut Outbox) {
        if self.finished.is_some() || self.input.is_none() {
            return;
        }
        if self.config.rank == self.root() && !self.bcast_started {
            if let Some(value) = self.bcast.value().cloned() {
                // A peer adopted an earlier attempt's value and spread it through this
                // attempt's broadcast, up to this root: broadcast it as adopted.
                let partial = self.bcast.partial();
                self.adopt(now, value.as_ref(), partial, out);
                return;
            }
            match self.reduce.phase() {
                Phase::Done => {
                    let result = self
                        .reduce
                        .result()
                        .cloned()
                        .unwrap_or(Values::F64(Vec::new()));
                    if !self.reduce.reported_failures().is_empty() {
                        self.bcast.mark_partial();
                    }
                    drive(
                        &mut self.bcast,
                        now,
                        Input::Start {
                            data: result.as_ref(),
                        },
                        out,
                    );
                    self.bcast_started = true;
                }
                Phase::Aborted => {
                    let mark = out.events().len();
                    self.bcast.start_given_up(out);
                    out.retain_events_from(mark, |e| !matches!(e, Event::Aborted(_)));
                    self.bcast_started = true;
                }
                Phase::Idle | Phase::Running => {}
            }
        }
        if self.bcast.root_failed() {
            self.attempt += 1;
            self.begin_attempt(now, out);
            return;
        }
        match self.bcast.phase() {
            Phase::Done => self.finish(Phase::Done, out),
            Phase::Aborted if self.bcast.delivered() => self.finish(Phase::Aborted, out),
            _ => {}
        }
    }

    fn finish(&mut self, phase: Phase, out: &mut Outbox) {
        if self.finished.is_some() {
            return;
        }
        self.finished = Some(phase);
        if phase == Phase::Done {
            self.shed();
            out.emit(Event::Completed);
        } else {
            out.emit(Event::Aborted(AbortReason::TooManyFailures));
        }
    }

    /// Drops what a delivered rank no longer needs (the input; the reduce's partial values once
    /// it has sent its part, which a rank that delivered early may still owe its parent),
    /// keeping the result to answer late peers with: a long vector's finished segments then
    /// hold one copy of it, not three.
    fn shed(&mut self) {
        if let Some(input) = &mut self.input {
            *input = Values::F64(Vec::new());
        }
        if self.reduce_shed || self.reduce.phase() == Phase::Running {
            return;
        }
        self.reduce_shed = true;
        self.reduce_sent += self.reduce.status().counters.messages_sent;
        self.reduce = CorrectedReduce::new(self.config.reduce(self.attempt));
    }

    fn on_message(&mut self, now: Time, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        if let Err(error) = frame.check(Algorithm::CorrectedAllreduce, self.config.op_id) {
            self.reject(from, error, out);
            return;
        }
        let attempt = frame.header.step;
        if self.finished == Some(Phase::Done) && attempt > self.attempt {
            self.counters.messages_received += 1;
            self.answer_late(from, out);
            return;
        }
        if attempt > self.attempt || self.input.is_none() {
            if self.held.len() >= MAX_HELD_FRAMES || attempt >= self.config.candidates() {
                self.reject(
                    from,
                    unexpected(from.0, "frame of an attempt beyond the bound"),
                    out,
                );
                return;
            }
            let (Ok(values), Ok(trailer)) = (frame.values(), frame.trailer()) else {
                self.reject(from, unexpected(from.0, "unreadable payload"), out);
                return;
            };
            let mut words = Vec::new();
            let len = encode_with_trailer(&mut words, frame.header, values, trailer);
            self.held.push(HeldFrame {
                from,
                attempt,
                words,
                len,
            });
            return;
        }
        if attempt < self.attempt {
            // Sent before its sender (or this rank) learned the attempt's root had failed; a
            // broadcast value means that root did broadcast after all: adopt it.
            self.counters.messages_received += 1;
            let kind = CorrectedKind::from_u8(frame.header.kind);
            let value = matches!(
                kind,
                Some(CorrectedKind::BcastTree | CorrectedKind::BcastCorrection)
            ) && frame.header.flags & FLAG_ROOT_GAVE_UP == 0;
            if let (true, Ok(values)) = (value, frame.values()) {
                let partial = frame.header.flags & FLAG_PARTIAL != 0;
                self.adopt(now, values, partial, out);
            }
            return;
        }
        self.counters.messages_received += 1;
        let reduce_frame = matches!(
            CorrectedKind::from_u8(frame.header.kind),
            Some(CorrectedKind::UpCorrection | CorrectedKind::ReduceTree)
        );
        if self.reduce_shed && reduce_frame {
            // The reduce's work is over here (see `shed`).
            return;
        }
        self.route(now, from, frame, out);
        self.step(now, out);
        if self.finished == Some(Phase::Done) {
            self.shed();
        }
    }

    /// A rank still in a later attempt wrote to this one, which delivered: send it the result,
    /// once, as a correction of the attempt delivered here.
    fn answer_late(&mut self, to: Rank, out: &mut Outbox) {
        let Some(value) = self.bcast.value() else {
            return;
        };
        if !self.answered_late.insert(to.0) {
            return;
        }
        let header = FrameHeader::new(
            Algorithm::CorrectedAllreduce,
            CorrectedKind::BcastCorrection as u8,
            self.config.op_id,
            self.config.rank,
            self.attempt,
        )
        .with_flags(if self.bcast.partial() {
            FLAG_PARTIAL
        } else {
            0
        });
        out.send(to, header, value.as_ref());
        self.counters.messages_sent += 1;
    }

    /// Takes `value`, the result an earlier attempt broadcast, as this attempt's: the root of
    /// this attempt broadcasts it (if it has not broadcast yet), any other rank spreads it.
    fn adopt(&mut self, now: Time, value: ValuesRef<'_>, partial: bool, out: &mut Outbox) {
        if self.finished.is_some() || self.input.is_none() {
            return;
        }
        if self.config.rank == self.root() {
            if !self.bcast_started {
                if partial {
                    self.bcast.mark_partial();
                }
                drive(&mut self.bcast, now, Input::Start { data: value }, out);
                self.bcast_started = true;
            }
        } else {
            let mark = out.events().len();
            self.bcast.adopt(value, partial, out);
            hide_part_events(out, mark);
        }
        self.step(now, out);
    }

    fn reject(&mut self, from: Rank, error: crate::wire::FrameError, out: &mut Outbox) {
        self.counters.frames_rejected += 1;
        out.emit(Event::Rejected { from, error });
    }
}

/// Copies in and out (the shell's defaults); a segment that leaves out a failed rank says so.
impl crate::protocol::SegmentProtocol for CorrectedAllreduce {
    fn counts_every_rank(&self) -> bool {
        !self.partial()
    }

    fn answers_when_done(&self) -> bool {
        true
    }
}

impl Protocol for CorrectedAllreduce {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Start { data } => {
                if self.input.is_none() && self.finished.is_none() {
                    self.input = Some(data.to_owned_values());
                    self.begin_attempt(now, out);
                }
            }
            Input::Message { from, frame } => self.on_message(now, from, frame, out),
            Input::Timeout => {
                drive(&mut self.reduce, now, input, out);
                drive(&mut self.bcast, now, input, out);
            }
            Input::PeerFailed { peer } => {
                self.counters.failures_noticed += 1;
                if self.known_failed.insert(peer.0) {
                    drive(&mut self.reduce, now, input, out);
                    drive(&mut self.bcast, now, input, out);
                    self.step(now, out);
                    if self.finished == Some(Phase::Done) {
                        self.shed();
                    }
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
        // The parts arm no timers today; asking them keeps this right if they ever do.
        [self.reduce.poll_timeout(), self.bcast.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        let mut raw = Vec::new();
        if let Some(value) = self.bcast.value() {
            value.push_as_f64(&mut raw);
        }
        finish_estimate(self.config.op, &raw, dst);
    }

    fn phase(&self) -> Phase {
        match self.finished {
            Some(phase) => phase,
            None if self.input.is_some() => Phase::Running,
            None => Phase::Idle,
        }
    }

    /// The delivered value in the operation's own type (an average's is a sum and a weight,
    /// which `estimate` divides).
    fn result(&self) -> Option<ValuesRef<'_>> {
        match (self.finished, self.config.op) {
            (_, ReduceOp::Average) => None,
            (Some(Phase::Done), _) => self.bcast.value().map(Values::as_ref),
            _ => None,
        }
    }

    fn settled(&self) -> bool {
        self.bcast.settled()
    }

    fn status(&self) -> RankStatus {
        let reduce = self.reduce.status().counters;
        let bcast = self.bcast.status().counters;
        let mut counters = self.counters;
        counters.messages_sent = self.reduce_sent + reduce.messages_sent + bcast.messages_sent;
        RankStatus {
            phase: self.phase(),
            iteration: self.attempt,
            counters,
            detail: Detail::CorrectedTree {
                attempt: self.attempt,
                root: self.attempt,
                known_failed: self.known_failed.len() as u32,
                waiting_for: match self.bcast.status().detail {
                    Detail::CorrectedTree { waiting_for, .. } => waiting_for,
                    _ => 0,
                },
            },
        }
    }
}
