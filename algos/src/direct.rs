//! Direct-exchange allreduce: every rank sends its input to every other rank, then reduces
//! the N inputs itself.
//!
//! It sends N(N − 1) messages against recursive doubling's N log2 N, but a rank waits on no
//! chain: each input travels one hop, and no rank forwards anything. That is what matters when
//! ranks outnumber cores. A rank then runs only when the scheduler gives it its turn, and
//! recursive doubling needs about one turn of every rank on a core per exchange step (the
//! partner of step k must have run step k − 1 first), where the direct exchange needs one: a
//! rank that runs once has sent everything it owes. For small N and small vectors the extra
//! messages cost less than the turns they save; [`DIRECT_MAX_RANKS`] and
//! [`DIRECT_MAX_BYTES`] bound where the library picks it.
//!
//! Every rank folds the inputs in rank order, `((x0 ⊕ x1) ⊕ x2) ⊕ …`, so every rank holds the
//! same bits even for floating-point sums. Inputs that arrive in order are folded straight from
//! the frame; an input that arrives ahead of a lower rank's is held until its turn.
//!
//! Faults, as for recursive doubling: any failure notice aborts the operation (it is not fault
//! tolerant; every survivor gets an error in bounded time); a lost message leaves the rank
//! waiting; a flipped bit in a message reaches only its receiver, a flip in the local input
//! reaches every rank.

use crate::protocol::{
    AbortReason, Counters, Detail, Event, Input, LocalFault, Outbox, Phase, Protocol, RankStatus,
    StateVar,
};
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::Time;
use crate::values::{ReduceOp, Values, ValuesRef};
use crate::wire::{Frame, FrameError, FrameHeader, OpId};

/// Largest group the library's allreduce runs as a direct exchange when the user asks for it.
pub const DIRECT_MAX_RANKS: u32 = 16;
/// Largest vector (bytes) the library's allreduce runs as a direct exchange when asked.
pub const DIRECT_MAX_BYTES: usize = 256;

/// The one message kind: a rank's input.
const KIND_INPUT: u8 = 1;

/// Where a job's ranks run, as far as the choice of algorithm cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Every rank of the node has a core of its own.
    OwnCores,
    /// More ranks than cores on the node: ranks take turns on a core.
    Oversubscribed,
}

impl Placement {
    /// The placement of `ranks` ranks on a node of `cores` cores.
    pub fn of(ranks: u32, cores: u32) -> Placement {
        if ranks > cores {
            Placement::Oversubscribed
        } else {
            Placement::OwnCores
        }
    }
}

/// Whether the library's allreduce, asked for the direct exchange (`FTCOLL_SMALL_ALLREDUCE=
/// direct`), runs `size` ranks reducing `bytes` bytes as one: from 3 to [`DIRECT_MAX_RANKS`]
/// ranks and up to [`DIRECT_MAX_BYTES`] bytes (at two ranks both are the same single exchange).
///
/// The library no longer picks it by itself: recursive doubling over the caller's vector
/// measured at or below it at every N from 3 to 16, even with more ranks than cores, where the
/// direct exchange's one turn on a core per operation had beaten recursive doubling under the
/// operation shell. The 2-core VM, 8 bytes, two runs (µs, rdb against direct): n = 3 3.0 and
/// 3.4 against 5.4 and 5.5, n = 4 6.3 and 6.6 against 7.6 and 6.5, n = 8 25.7 and 20.7
/// against 20.6 and 20.5, n = 16 96 and 102 against 98 and 147; at 256 bytes 3.5 against
/// 6.1 (n = 3), 22.1 against 24.1 (n = 8). With a core per rank recursive doubling's log2(N)
/// exchanges had beaten its N − 1 incoming frames already (16 ranks on 16 cores: 3.4 against
/// 9.7 us).
pub fn direct_applies(size: u32, bytes: usize) -> bool {
    (3..=DIRECT_MAX_RANKS).contains(&size) && bytes <= DIRECT_MAX_BYTES
}

/// Configuration of one direct-exchange instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectConfig {
    /// This rank (local index in the group).
    pub rank: Rank,
    /// Group size N >= 1.
    pub size: u32,
    /// The reduction operator.
    pub op: ReduceOp,
    /// The operation id frames carry.
    pub op_id: OpId,
}

/// One rank of the direct-exchange allreduce.
#[derive(Clone, Debug)]
pub struct DirectAllreduce {
    config: DirectConfig,
    phase: Phase,
    /// This rank's input, kept until its turn in the fold.
    own: Option<Values>,
    /// The fold of the inputs of ranks `0..folded`.
    acc: Option<Values>,
    /// How many ranks' inputs `acc` contains (all ranks below it).
    folded: u32,
    /// Inputs that arrived before their turn, by rank; at most one per rank, so at most N.
    held: Vec<(u32, Values)>,
    /// Which ranks' inputs arrived.
    arrived: ArrivalSet,
    counters: Counters,
}

impl DirectAllreduce {
    /// A new instance, idle until [`Input::Start`].
    pub fn new(config: DirectConfig) -> DirectAllreduce {
        DirectAllreduce {
            config,
            phase: Phase::Idle,
            own: None,
            acc: None,
            folded: 0,
            held: Vec::new(),
            arrived: ArrivalSet::new(config.size),
            counters: Counters::default(),
        }
    }

    /// Messages of a failure-free run: every rank to every other.
    pub fn messages(size: u32) -> u64 {
        u64::from(size) * u64::from(size.saturating_sub(1))
    }

    /// The local value: the result once done, the fold so far before.
    pub fn value(&self) -> Option<&Values> {
        self.acc.as_ref()
    }

    fn start(&mut self, data: ValuesRef<'_>, out: &mut Outbox) {
        if self.phase != Phase::Idle {
            return;
        }
        self.phase = Phase::Running;
        let me = self.config.rank.0;
        let header = FrameHeader::new(
            Algorithm::Direct,
            KIND_INPUT,
            self.config.op_id,
            Rank(me),
            0,
        );
        // Starting after ourselves spreads the first messages of all ranks over all receivers.
        for offset in 1..self.config.size {
            let to = (me + offset) % self.config.size;
            out.send(Rank(to), header, data);
            self.counters.messages_sent += 1;
        }
        // Inputs that arrived before we started are held; fold our own in its turn.
        self.own = Some(data.to_owned_values());
        // Held inputs (arrived before Start) were checked against nothing: check them now. A
        // rejected one never comes again, so the operation cannot complete here; the driver's
        // time limit ends it, as for a lost message.
        let (len, dtype) = (data.len(), data.dtype());
        let counters = &mut self.counters;
        self.held.retain(|(from, v)| {
            let fits = v.len() == len && v.dtype() == dtype;
            if !fits {
                counters.frames_rejected += 1;
                out.emit(Event::Rejected {
                    from: Rank(*from),
                    error: FrameError::Unexpected {
                        from: *from,
                        what: "payload does not match the local vector",
                    },
                });
            }
            fits
        });
        self.fold_ready(None, out);
    }

    /// Folds every input whose turn has come; `arriving` is one that just came in, in place.
    fn fold_ready(&mut self, mut arriving: Option<(u32, ValuesRef<'_>)>, out: &mut Outbox) {
        // Each pass folds one rank's input or stops, so N bounds it.
        while self.folded < self.config.size {
            let next = self.folded;
            if next == self.config.rank.0 {
                let Some(own) = self.own.take() else {
                    break;
                };
                if self.acc.is_none() {
                    // Rank 0 folds its own input first: it becomes the fold, uncopied.
                    self.acc = Some(own);
                    self.folded += 1;
                } else {
                    self.fold_one(own.as_ref());
                }
            } else if let Some((_, values)) = arriving.filter(|(from, _)| *from == next) {
                self.fold_one(values);
                arriving = None;
            } else if let Some(pos) = self.held.iter().position(|(from, _)| *from == next) {
                let (_, values) = self.held.swap_remove(pos);
                self.fold_one(values.as_ref());
            } else {
                break;
            }
        }
        if let Some((from, values)) = arriving {
            self.held.push((from, values.to_owned_values()));
        }
        if self.folded == self.config.size && self.phase == Phase::Running {
            self.phase = Phase::Done;
            out.emit(Event::Completed);
        }
    }

    fn fold_one(&mut self, values: ValuesRef<'_>) {
        match &mut self.acc {
            None => self.acc = Some(values.to_owned_values()),
            Some(acc) => {
                let combined = acc.combine(self.config.op, values);
                debug_assert!(combined.is_ok(), "payload shape was validated on arrival");
            }
        }
        self.folded += 1;
    }

    fn on_message(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let values = match self.accept(from, &frame) {
            Ok(values) => values,
            Err(error) => {
                self.counters.frames_rejected += 1;
                out.emit(Event::Rejected { from, error });
                return;
            }
        };
        self.counters.messages_received += 1;
        self.arrived.insert(from.0);
        if self.phase == Phase::Idle {
            self.held.push((from.0, values.to_owned_values()));
            return;
        }
        self.fold_ready(Some((from.0, values)), out);
        out.emit(Event::RoundDone {
            round: self.counters.messages_received as u32 - 1,
        });
    }

    /// Validates a frame: right protocol and operation, from a member other than us, its
    /// first input, and a payload of the local shape.
    fn accept<'f>(&self, from: Rank, frame: &Frame<'f>) -> Result<ValuesRef<'f>, FrameError> {
        frame.check(Algorithm::Direct, self.config.op_id)?;
        let unexpected = |what| FrameError::Unexpected { from: from.0, what };
        if frame.header.kind != KIND_INPUT {
            return Err(FrameError::UnknownKind {
                algo: Algorithm::Direct,
                kind: frame.header.kind,
            });
        }
        if frame.header.source != from.0 {
            return Err(unexpected("header source differs from the sending rank"));
        }
        if from.0 >= self.config.size || from == self.config.rank {
            return Err(unexpected("not another member of the group"));
        }
        if self.arrived.contains(from.0) {
            return Err(unexpected("duplicate input"));
        }
        let values = frame.values()?;
        let shape = self.own.as_ref().or(self.acc.as_ref());
        if let Some(local) = shape {
            if values.dtype() != local.dtype() || values.len() != local.len() {
                return Err(unexpected("payload does not match the local vector"));
            }
        }
        Ok(values)
    }

    fn on_fault(&mut self, fault: LocalFault, out: &mut Outbox) {
        let LocalFault::FlipBit { var, bit } = fault;
        // The input not yet folded is the one a flip can still reach; once folded, the fold.
        let target = match var {
            StateVar::Value { elem } => self
                .own
                .as_mut()
                .or(self.acc.as_mut())
                .map(|values| (values, elem)),
            StateVar::Weight | StateVar::Flow { .. } | StateVar::AnyFlow { .. } => None,
        };
        let applied = target
            .is_some_and(|(values, elem)| crate::rdb::flip_value_bit(values, elem as usize, bit));
        if applied {
            self.counters.faults_applied += 1;
            out.emit(Event::FaultApplied(fault));
        } else {
            out.emit(Event::FaultIgnored(fault));
        }
    }
}

/// A set of ranks below N: one word inline for the common small groups, a bitmap beyond.
#[derive(Clone, Debug)]
enum ArrivalSet {
    Small(u64),
    Large(Vec<u64>),
}

impl ArrivalSet {
    fn new(size: u32) -> ArrivalSet {
        if size <= 64 {
            ArrivalSet::Small(0)
        } else {
            ArrivalSet::Large(vec![0; (size as usize).div_ceil(64)])
        }
    }

    fn contains(&self, rank: u32) -> bool {
        let bit = 1u64 << (rank % 64);
        match self {
            ArrivalSet::Small(word) => rank < 64 && word & bit != 0,
            ArrivalSet::Large(words) => words
                .get((rank / 64) as usize)
                .is_some_and(|w| w & bit != 0),
        }
    }

    /// Adds `rank`, which the caller checked is below N.
    fn insert(&mut self, rank: u32) {
        let bit = 1u64 << (rank % 64);
        match self {
            ArrivalSet::Small(word) => *word |= bit,
            ArrivalSet::Large(words) => {
                if let Some(w) = words.get_mut((rank / 64) as usize) {
                    *w |= bit;
                }
            }
        }
    }
}

impl crate::protocol::SegmentProtocol for DirectAllreduce {
    fn reads_clock_unstarted() -> bool {
        // Never arms a timer nor reads `now` (see its `reads_clock`).
        false
    }

    fn take_result(&mut self) -> Option<Values> {
        match self.phase {
            Phase::Done => self.acc.take(),
            _ => None,
        }
    }
}

impl Protocol for DirectAllreduce {
    fn handle(&mut self, _now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Start { data } => self.start(data, out),
            Input::Message { from, frame } => self.on_message(from, frame, out),
            Input::Timeout | Input::LinkFailed { .. } => {}
            Input::PeerFailed { peer } => {
                self.counters.failures_noticed += 1;
                // Every rank needs every input: any failure fails the operation everywhere, so
                // every survivor gets an error in bounded time.
                if matches!(self.phase, Phase::Running | Phase::Idle) {
                    self.phase = Phase::Aborted;
                    out.emit(Event::Aborted(AbortReason::PeerFailed(peer)));
                }
            }
            Input::Fault(fault) => self.on_fault(fault, out),
            Input::Stop => {
                if matches!(self.phase, Phase::Running | Phase::Idle) {
                    self.phase = Phase::Aborted;
                    out.emit(Event::Aborted(AbortReason::Stopped));
                }
            }
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn result(&self) -> Option<ValuesRef<'_>> {
        match self.phase {
            Phase::Done => self.acc.as_ref().map(Values::as_ref),
            _ => None,
        }
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        let Some(values) = self.acc.as_ref().or(self.own.as_ref()) else {
            return;
        };
        values.push_as_f64(dst);
        if self.config.op == ReduceOp::Average && self.acc.is_some() {
            crate::values::divide_floats(dst, self.folded);
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
            iteration: self.counters.messages_received as u32,
            counters: self.counters,
            detail: Detail::DirectExchange {
                inputs_received: self.counters.messages_received as u32,
                inputs_folded: self.folded,
                size: self.config.size,
            },
        }
    }
}

#[cfg(test)]
mod tests;
