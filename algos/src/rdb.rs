//! Recursive doubling allreduce (paper 000, Alg. 1) and approximate recursive doubling (ARDB,
//! 000 Sec. 6.2-6.3), for any N.
//!
//! For N a power of two, step k pairs rank i with i XOR 2^k. For other N the usual fold is used:
//! with p the largest power of two <= N and r = N - p, each even rank below 2r first sends its
//! value to the odd rank above it and leaves (the *fold* step); the p remaining ranks run the
//! exchanges on virtual ranks; finally each odd rank below 2r sends the result back (the *result*
//! step). A rank thus takes log2 p exchange steps, plus 2 when r > 0.
//!
//! Every message carries, in the header's `aux` field, how many ranks' inputs its value contains.
//! That count turns a partial value into ARDB's estimator after k < log2 N exchanges: the sample
//! average of 2^k inputs, times N for a sum. ARDB stops after a given number of exchanges (real
//! runs) or when the driver sends [`Input::Stop`] (the simulator's oracle, as in 000 Fig. 12).
//!
//! Faults: a lost partner message leaves the rank waiting, as the paper notes (the behaviour of
//! recursive doubling under unreported loss is undefined); a failure notice for any rank aborts
//! the operation while it runs; a bit flip in a message or in the local value propagates
//! to every rank that message or value reaches, which is what 000 Fig. 2 measures.

use crate::protocol::{
    AbortReason, Counters, Detail, Event, Input, LocalFault, Outbox, Phase, Protocol, RankStatus,
    StateVar,
};
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::Time;
use crate::values::{ReduceOp, Values, ValuesRef};
use crate::wire::{Frame, FrameError, FrameHeader, OpId};

/// Message kinds of recursive doubling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RdbKind {
    /// An even rank below 2r hands its value to its odd neighbour.
    Fold = 1,
    /// A pairwise exchange.
    Exchange = 2,
    /// The final result, sent back to a folded rank.
    Result = 3,
}

impl RdbKind {
    fn from_u8(kind: u8) -> Option<RdbKind> {
        match kind {
            1 => Some(RdbKind::Fold),
            2 => Some(RdbKind::Exchange),
            3 => Some(RdbKind::Result),
            _ => None,
        }
    }
}

/// Configuration of one recursive-doubling instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdbConfig {
    /// This rank (local index in the group).
    pub rank: Rank,
    /// Group size N >= 1.
    pub size: u32,
    /// The reduction operator.
    pub op: ReduceOp,
    /// The operation id frames carry.
    pub op_id: OpId,
    /// ARDB: stop after this many exchange steps (fewer than log2 p). `None`: exact RDB.
    pub max_exchanges: Option<u32>,
    /// Report as ARDB (estimates scale partial sums by N / contributions) rather than RDB.
    pub approximate: bool,
}

impl RdbConfig {
    /// Exact recursive doubling.
    pub fn exact(rank: Rank, size: u32, op: ReduceOp, op_id: OpId) -> RdbConfig {
        RdbConfig {
            rank,
            size,
            op,
            op_id,
            max_exchanges: None,
            approximate: false,
        }
    }

    /// Approximate recursive doubling, stopping after `max_exchanges` (or at [`Input::Stop`]).
    pub fn approximate(
        rank: Rank,
        size: u32,
        op: ReduceOp,
        op_id: OpId,
        max_exchanges: Option<u32>,
    ) -> RdbConfig {
        RdbConfig {
            rank,
            size,
            op,
            op_id,
            max_exchanges,
            approximate: true,
        }
    }
}

/// The shape of the exchange for a group of `size` ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdbShape {
    /// Largest power of two <= N.
    pub pow2: u32,
    /// log2 of `pow2`: the number of exchange steps.
    pub exchanges: u32,
    /// N - pow2: how many ranks fold.
    pub remainder: u32,
}

impl RdbShape {
    /// The shape for N ranks (N >= 1).
    pub fn new(size: u32) -> RdbShape {
        let size = size.max(1);
        let exchanges = 31 - size.leading_zeros();
        let pow2 = 1u32 << exchanges;
        RdbShape {
            pow2,
            exchanges,
            remainder: size - pow2,
        }
    }

    /// Communication rounds of the whole operation: the exchanges, plus fold and result steps.
    pub fn rounds(&self) -> u32 {
        self.exchanges + if self.remainder > 0 { 2 } else { 0 }
    }

    /// Messages of a failure-free exact run: p log2 p exchanges plus r fold and r result messages.
    pub fn messages(&self) -> u64 {
        u64::from(self.pow2) * u64::from(self.exchanges) + 2 * u64::from(self.remainder)
    }

    /// The virtual rank of `rank` in the exchange phase, or `None` for a rank that folds out.
    pub fn virtual_rank(&self, rank: u32) -> Option<u32> {
        if rank < 2 * self.remainder {
            (rank % 2 == 1).then_some(rank / 2)
        } else {
            Some(rank - self.remainder)
        }
    }

    /// The real rank of virtual rank `vrank`.
    pub fn real_rank(&self, vrank: u32) -> u32 {
        if vrank < self.remainder {
            2 * vrank + 1
        } else {
            vrank + self.remainder
        }
    }

    /// The rank whose estimate ARDB's oracle watches: virtual rank 0 (rank 0 when N is a power
    /// of two), the first to hold the samples of its exchanges.
    pub fn root(&self) -> Rank {
        Rank(self.real_rank(0))
    }
}

/// What a rank does at one position of its schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Step {
    kind: RdbKind,
    partner: Rank,
    /// The header's step number: 0 fold, 1..=d exchanges, d+1 result.
    number: u32,
    sends: bool,
    receives: bool,
}

/// A message that arrived before its step.
#[derive(Clone, Debug, PartialEq)]
struct Early {
    number: u32,
    contributions: u64,
    values: Values,
}

/// One rank of recursive doubling / ARDB.
#[derive(Clone, Debug)]
pub struct RecursiveDoubling {
    config: RdbConfig,
    shape: RdbShape,
    /// Exchange steps this rank takes (may be fewer than `shape.exchanges` for ARDB).
    exchanges: u32,
    phase: Phase,
    /// Index of the current step in this rank's schedule.
    cursor: u32,
    /// Whether the current step's send has gone out.
    sent_current: bool,
    value: Values,
    /// How many ranks' inputs `value` contains.
    contributions: u64,
    /// Messages for later steps; at most one per step, so bounded by the schedule length.
    early: Vec<Early>,
    counters: Counters,
}

impl RecursiveDoubling {
    /// A new instance, idle until [`Input::Start`].
    pub fn new(config: RdbConfig) -> RecursiveDoubling {
        let shape = RdbShape::new(config.size);
        let exchanges = config
            .max_exchanges
            .map_or(shape.exchanges, |m| m.min(shape.exchanges));
        RecursiveDoubling {
            config,
            shape,
            exchanges,
            phase: Phase::Idle,
            cursor: 0,
            sent_current: false,
            value: Values::F64(Vec::new()),
            contributions: 0,
            early: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// Makes this instance what [`RecursiveDoubling::new`] would make of `config`, in place,
    /// keeping the value's and held messages' allocations: a loop of operations that reuses
    /// one instance allocates nothing and moves no protocol state around.
    pub fn restart(&mut self, config: RdbConfig) {
        let shape = if config.size == self.config.size {
            self.shape
        } else {
            RdbShape::new(config.size)
        };
        self.exchanges = config
            .max_exchanges
            .map_or(shape.exchanges, |m| m.min(shape.exchanges));
        // Field by field: the caller has just built `config` with narrow stores, and a wide
        // copy of it would wait for them to drain instead of forwarding from them.
        let RdbConfig {
            rank,
            size,
            op,
            op_id,
            max_exchanges,
            approximate,
        } = config;
        self.config.rank = rank;
        self.config.size = size;
        self.config.op = op;
        self.config.op_id = op_id;
        self.config.max_exchanges = max_exchanges;
        self.config.approximate = approximate;
        self.shape = shape;
        self.phase = Phase::Idle;
        self.cursor = 0;
        self.sent_current = false;
        self.value.clear();
        self.contributions = 0;
        self.early.clear();
        self.counters = Counters::default();
    }

    /// The exchange shape.
    pub fn shape(&self) -> RdbShape {
        self.shape
    }

    /// The local value (the result once done; a partial reduction before).
    pub fn value(&self) -> &Values {
        &self.value
    }

    /// How many ranks' inputs the local value contains.
    pub fn contributions(&self) -> u64 {
        self.contributions
    }

    fn algo(&self) -> Algorithm {
        if self.config.approximate {
            Algorithm::Ardb
        } else {
            Algorithm::Rdb
        }
    }

    /// Length of this rank's schedule.
    fn schedule_len(&self) -> u32 {
        let rank = self.config.rank.0;
        match self.shape.virtual_rank(rank) {
            None => 2,
            Some(_) if rank < 2 * self.shape.remainder => self.exchanges + 2,
            Some(_) => self.exchanges,
        }
    }

    /// The step at position `index` of this rank's schedule, computed, not stored: a stored plan
    /// would cost log N entries per rank at millions of simulated ranks.
    fn step_at(&self, index: u32) -> Option<Step> {
        let rank = self.config.rank.0;
        let last_number = self.shape.exchanges + 1;
        let step = |kind, partner, number, sends, receives| Step {
            kind,
            partner: Rank(partner),
            number,
            sends,
            receives,
        };
        match self.shape.virtual_rank(rank) {
            None => match index {
                0 => Some(step(RdbKind::Fold, rank + 1, 0, true, false)),
                1 => Some(step(RdbKind::Result, rank + 1, last_number, false, true)),
                _ => None,
            },
            Some(vrank) => {
                let folded = rank < 2 * self.shape.remainder;
                let exchange_index = if folded {
                    if index == 0 {
                        return Some(step(RdbKind::Fold, rank - 1, 0, false, true));
                    }
                    index - 1
                } else {
                    index
                };
                if exchange_index < self.exchanges {
                    let partner = self.shape.real_rank(vrank ^ (1 << exchange_index));
                    Some(step(
                        RdbKind::Exchange,
                        partner,
                        exchange_index + 1,
                        true,
                        true,
                    ))
                } else if folded && exchange_index == self.exchanges {
                    Some(step(RdbKind::Result, rank - 1, last_number, true, false))
                } else {
                    None
                }
            }
        }
    }

    fn start(&mut self, data: ValuesRef<'_>, out: &mut Outbox) {
        if self.phase != Phase::Idle {
            return;
        }
        self.value.copy_from(data);
        self.begin(out);
    }

    fn begin(&mut self, out: &mut Outbox) {
        self.contributions = 1;
        self.phase = Phase::Running;
        self.advance(out);
    }

    fn header(&self, step: &Step) -> FrameHeader {
        FrameHeader::new(
            self.algo(),
            step.kind as u8,
            self.config.op_id,
            self.config.rank,
            step.number,
        )
        .with_aux(self.contributions)
    }

    /// Runs the schedule until it blocks on a receive or ends.
    fn advance(&mut self, out: &mut Outbox) {
        // Each iteration completes a step or returns, so the schedule length bounds the loop.
        while self.phase == Phase::Running {
            let Some(step) = self.step_at(self.cursor) else {
                self.phase = Phase::Done;
                out.emit(Event::Completed);
                return;
            };
            if step.sends && !self.sent_current {
                out.send(step.partner, self.header(&step), self.value.as_ref());
                self.counters.messages_sent += 1;
                self.sent_current = true;
            }
            if step.receives {
                let Some(pos) = self.early.iter().position(|e| e.number == step.number) else {
                    return;
                };
                let early = self.early.swap_remove(pos);
                self.absorb(step.kind, early.values.as_ref(), early.contributions);
            }
            self.finish_step(out);
        }
    }

    /// Folds a validated payload into the local value. Shapes were checked on arrival, so a
    /// combine error here is a broken invariant.
    fn absorb(&mut self, kind: RdbKind, values: ValuesRef<'_>, contributions: u64) {
        match kind {
            RdbKind::Result => {
                self.value.copy_from(values);
                self.contributions = contributions;
            }
            RdbKind::Fold | RdbKind::Exchange => {
                let combined = self.value.combine(self.config.op, values);
                debug_assert!(combined.is_ok(), "payload shape was validated on arrival");
                self.contributions = self.contributions.saturating_add(contributions);
            }
        }
    }

    /// Marks the current step done and moves on.
    fn finish_step(&mut self, out: &mut Outbox) {
        out.emit(Event::RoundDone { round: self.cursor });
        self.cursor += 1;
        self.sent_current = false;
    }

    fn on_message(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let (kind, number, at_cursor, values) = match self.accept(from, &frame) {
            Ok(accepted) => accepted,
            Err(error) => {
                self.counters.frames_rejected += 1;
                out.emit(Event::Rejected { from, error });
                return;
            }
        };
        self.counters.messages_received += 1;
        let contributions = frame.header.aux;
        let for_current_step = self.phase == Phase::Running && at_cursor;
        if for_current_step {
            // The common case: combine in place, reading straight from the frame.
            self.absorb(kind, values, contributions);
            self.finish_step(out);
        } else {
            self.early.push(Early {
                number,
                contributions,
                values: values.to_owned_values(),
            });
        }
        if self.phase == Phase::Running {
            self.advance(out);
        }
    }

    /// Validates a frame against the schedule: right protocol and operation, a known kind, a step
    /// still ahead of us, from the partner of that step, not a duplicate, and a payload of the
    /// local shape. Also says whether the frame is for the current step, ready to absorb (its
    /// send, if any, has gone out).
    fn accept<'f>(
        &self,
        from: Rank,
        frame: &Frame<'f>,
    ) -> Result<(RdbKind, u32, bool, ValuesRef<'f>), FrameError> {
        frame.check(self.algo(), self.config.op_id)?;
        let unexpected = |what| FrameError::Unexpected { from: from.0, what };
        let kind = RdbKind::from_u8(frame.header.kind).ok_or(FrameError::UnknownKind {
            algo: self.algo(),
            kind: frame.header.kind,
        })?;
        if frame.header.source != from.0 {
            return Err(unexpected("header source differs from the sending rank"));
        }
        let number = frame.header.step;
        // Step numbers are unique in a schedule: one lookup finds the step and its position.
        let (index, step) = (self.cursor..self.schedule_len())
            .find_map(|i| {
                self.step_at(i)
                    .filter(|s| s.number == number && s.receives)
                    .map(|s| (i, s))
            })
            .ok_or(unexpected("no pending receive for this step"))?;
        if step.kind != kind || step.partner != from {
            return Err(unexpected("not the partner of this step"));
        }
        if self.early.iter().any(|e| e.number == number) {
            return Err(unexpected("duplicate message for a step"));
        }
        let values = frame.values()?;
        if self.phase != Phase::Idle
            && (values.dtype() != self.value.dtype() || values.len() != self.value.len())
        {
            return Err(unexpected("payload does not match the local vector"));
        }
        let at_cursor = index == self.cursor && (!step.sends || self.sent_current);
        Ok((kind, number, at_cursor, values))
    }

    fn on_fault(&mut self, fault: LocalFault, out: &mut Outbox) {
        let LocalFault::FlipBit { var, bit } = fault;
        let applied = match var {
            StateVar::Value { elem } => flip_value_bit(&mut self.value, elem as usize, bit),
            StateVar::Weight | StateVar::Flow { .. } | StateVar::AnyFlow { .. } => false,
        };
        if applied {
            self.counters.faults_applied += 1;
            out.emit(Event::FaultApplied(fault));
        } else {
            out.emit(Event::FaultIgnored(fault));
        }
    }
}

/// Flips bit `bit` of element `elem` of `values`; false if there is no such element or bit.
pub fn flip_value_bit(values: &mut Values, elem: usize, bit: u32) -> bool {
    values.flip_bit(elem, bit)
}

impl crate::protocol::SegmentProtocol for RecursiveDoubling {
    fn reads_clock_unstarted() -> bool {
        // Never arms a timer nor reads `now` (see its `reads_clock`).
        false
    }

    fn start_owned(&mut self, _now: Time, data: Values, out: &mut Outbox) {
        if self.phase != Phase::Idle {
            return;
        }
        self.value = data;
        self.begin(out);
    }

    fn take_result(&mut self) -> Option<Values> {
        (self.phase == Phase::Done && !self.config.approximate)
            .then(|| std::mem::replace(&mut self.value, Values::F64(Vec::new())))
    }
}

impl Protocol for RecursiveDoubling {
    fn handle(&mut self, _now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Start { data } => self.start(data, out),
            Input::Message { from, frame } => self.on_message(from, frame, out),
            Input::Timeout => {}
            Input::PeerFailed { peer } => {
                self.counters.failures_noticed += 1;
                // Any failure fails the operation, not only a partner's: the ranks that need a
                // dead partner cannot finish, so every rank waiting on them would hang. Aborting
                // everywhere gives every survivor an error in bounded time, as ULFM's
                // MPI_ERR_PROC_FAILED does; fault-tolerant algorithms are the way around it.
                if self.phase == Phase::Running {
                    self.phase = Phase::Aborted;
                    out.emit(Event::Aborted(AbortReason::PeerFailed(peer)));
                }
            }
            Input::LinkFailed { .. } => {}
            Input::Fault(fault) => self.on_fault(fault, out),
            Input::Stop => match self.phase {
                Phase::Running if self.config.approximate => {
                    self.phase = Phase::Done;
                    out.emit(Event::Completed);
                }
                Phase::Running | Phase::Idle => {
                    self.phase = Phase::Aborted;
                    out.emit(Event::Aborted(AbortReason::Stopped));
                }
                Phase::Done | Phase::Aborted => {}
            },
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn result(&self) -> Option<ValuesRef<'_>> {
        (self.phase == Phase::Done && !self.config.approximate).then(|| self.value.as_ref())
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        self.value.push_as_f64(dst);
        let count = self.contributions.max(1) as f64;
        let scale = match self.config.op {
            ReduceOp::Average => 1.0 / count,
            ReduceOp::Sum if self.config.approximate => f64::from(self.config.size) / count,
            _ => 1.0,
        };
        if scale != 1.0 {
            dst.iter_mut().for_each(|x| *x *= scale);
        }
    }

    fn phase(&self) -> Phase {
        self.phase
    }

    fn reads_clock(&self) -> bool {
        // No timers; a lost message is the driver's time limit to catch.
        false
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: self.phase,
            iteration: self.cursor,
            counters: self.counters,
            detail: Detail::RecursiveDoubling {
                steps_done: self.cursor,
                steps_total: self.schedule_len(),
                contributions: self.contributions,
            },
        }
    }
}

#[cfg(test)]
mod tests;
