//! Pipelined chain broadcast and reduce.
//!
//! The ranks form a chain starting at the root (position p = (rank − root) mod N). A broadcast
//! passes the root's vector down the chain, a reduce passes partial reductions up to the root.
//! Alone a chain takes N − 1 hops; under the operation shell ([`crate::protocol::Segmented`])
//! each segment runs its own chain, so segment k + 1 leaves the root while segment k is one hop
//! down: a long vector crosses each link once, at the bandwidth of the slowest link, and every
//! rank sends and receives it once, the least a broadcast or reduce can move.
//!
//! Not fault tolerant: a failed peer aborts the operation (the fault-tolerant ones are 001's
//! corrected trees and 004's FTCO).

use crate::protocol::{
    Counters, Detail, Event, Input, Outbox, Phase, Protocol, RankStatus, SegmentProtocol,
};
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::Time;
use crate::values::{ReduceOp, Values, ValuesRef};
use crate::wire::{Frame, FrameError, FrameHeader, OpId};

/// Which collective the chain runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainMode {
    /// The root's vector to every rank.
    Bcast,
    /// Every rank's vector reduced at the root.
    Reduce,
}

impl ChainMode {
    fn algo(self) -> Algorithm {
        match self {
            ChainMode::Bcast => Algorithm::ChainBcast,
            ChainMode::Reduce => Algorithm::ChainReduce,
        }
    }
}

/// Message kind of the chain's one message.
const KIND_DATA: u8 = 1;

/// One rank's part in a chain collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainConfig {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the chain.
    pub size: u32,
    /// The root.
    pub root: Rank,
    /// The operator of a reduce.
    pub op: ReduceOp,
    /// The operation id frames carry.
    pub op_id: OpId,
    /// The collective.
    pub mode: ChainMode,
}

/// The chain state machine (see the module docs).
#[derive(Debug)]
pub struct Chain {
    config: ChainConfig,
    phase: Phase,
    value: Values,
    /// A frame that came before the start.
    early: Option<Values>,
    counters: Counters,
}

impl Chain {
    /// A rank of a chain collective.
    pub fn new(config: ChainConfig) -> Chain {
        Chain {
            config,
            phase: Phase::Idle,
            value: Values::F64(Vec::new()),
            early: None,
            counters: Counters::default(),
        }
    }

    /// Makes the instance a fresh one for `config`, keeping its allocations.
    pub fn restart(&mut self, config: ChainConfig) {
        self.config = config;
        self.phase = Phase::Idle;
        self.value.clear();
        self.early = None;
        self.counters = Counters::default();
    }

    /// This rank's position in the chain: 0 at the root.
    fn position(&self) -> u32 {
        let n = self.config.size.max(1);
        (self.config.rank.0 + n - self.config.root.0 % n) % n
    }

    fn rank_at(&self, position: u32) -> Rank {
        Rank((self.config.root.0 + position) % self.config.size.max(1))
    }

    /// The neighbour this rank receives from, if any.
    fn upstream(&self) -> Option<Rank> {
        let (p, n) = (self.position(), self.config.size);
        match self.config.mode {
            ChainMode::Bcast => p.checked_sub(1).map(|q| self.rank_at(q)),
            ChainMode::Reduce => (p + 1 < n).then(|| self.rank_at(p + 1)),
        }
    }

    /// The neighbour this rank sends to, if any.
    fn downstream(&self) -> Option<Rank> {
        let (p, n) = (self.position(), self.config.size);
        match self.config.mode {
            ChainMode::Bcast => (p + 1 < n).then(|| self.rank_at(p + 1)),
            ChainMode::Reduce => p.checked_sub(1).map(|q| self.rank_at(q)),
        }
    }

    fn begin(&mut self, out: &mut Outbox) {
        self.phase = Phase::Running;
        match self.early.take() {
            Some(values) => self.take(values.as_ref(), out),
            None if self.upstream().is_none() => self.pass_on(out),
            None => {}
        }
    }

    /// Applies the upstream vector, passes the result on and finishes.
    fn take(&mut self, values: ValuesRef<'_>, out: &mut Outbox) {
        let applied = match self.config.mode {
            ChainMode::Bcast => {
                self.value.copy_from(values);
                Ok(())
            }
            ChainMode::Reduce => self.value.combine(self.config.op, values),
        };
        if let Err(_error) = applied {
            self.counters.frames_rejected += 1;
            let from = self.upstream().unwrap_or(self.config.rank);
            out.emit(Event::Rejected {
                from,
                error: FrameError::Unexpected {
                    from: from.0,
                    what: "vector does not match the local one",
                },
            });
            return;
        }
        self.pass_on(out);
    }

    fn pass_on(&mut self, out: &mut Outbox) {
        if let Some(next) = self.downstream() {
            let mode = self.config.mode;
            let header = FrameHeader::new(
                mode.algo(),
                KIND_DATA,
                self.config.op_id,
                self.config.rank,
                self.position(),
            );
            out.send(next, header, self.value.as_ref());
            self.counters.messages_sent += 1;
        }
        self.phase = Phase::Done;
        out.emit(Event::Completed);
    }

    fn on_message(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let checked = frame
            .check(self.config.mode.algo(), self.config.op_id)
            .and_then(|()| {
                let unexpected = |what| FrameError::Unexpected { from: from.0, what };
                if frame.header.kind != KIND_DATA {
                    return Err(FrameError::UnknownKind {
                        algo: self.config.mode.algo(),
                        kind: frame.header.kind,
                    });
                }
                if Some(from) != self.upstream() || frame.header.source != from.0 {
                    return Err(unexpected("not this rank's upstream neighbour"));
                }
                if self.early.is_some() || self.phase == Phase::Done {
                    return Err(unexpected("duplicate"));
                }
                let values = frame.values()?;
                if self.phase == Phase::Running
                    && (values.len() != self.value.len() || values.dtype() != self.value.dtype())
                {
                    return Err(unexpected("vector does not match the local one"));
                }
                Ok(values)
            });
        let values = match checked {
            Ok(values) => values,
            Err(error) => {
                self.counters.frames_rejected += 1;
                out.emit(Event::Rejected { from, error });
                return;
            }
        };
        self.counters.messages_received += 1;
        match self.phase {
            Phase::Idle => self.early = Some(values.to_owned_values()),
            _ => self.take(values, out),
        }
    }
}

impl SegmentProtocol for Chain {
    fn reads_clock_unstarted() -> bool {
        // Never arms a timer nor reads `now` (see its `reads_clock`).
        false
    }

    fn start_owned(&mut self, _now: Time, data: Values, out: &mut Outbox) {
        if self.phase == Phase::Idle {
            self.value = data;
            self.begin(out);
        }
    }

    fn take_result(&mut self) -> Option<Values> {
        self.has_result()
            .then(|| std::mem::replace(&mut self.value, Values::F64(Vec::new())))
    }
}

impl Protocol for Chain {
    fn handle(&mut self, _now: Time, input: Input<'_>, out: &mut Outbox) {
        let state = (&mut self.phase, &mut self.value, &mut self.counters);
        match crate::protocol::fail_stop_input(input, state, out) {
            Some(Input::Start { data }) if self.phase == Phase::Idle => {
                self.value.copy_from(data);
                self.begin(out);
            }
            Some(Input::Message { from, frame }) => self.on_message(from, frame, out),
            _ => {}
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn result(&self) -> Option<ValuesRef<'_>> {
        self.has_result().then(|| self.value.as_ref())
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        self.value.push_as_f64(dst);
        if self.config.op == ReduceOp::Average && self.has_result() {
            let n = f64::from(self.config.size.max(1));
            dst.iter_mut().for_each(|x| *x /= n);
        }
    }

    fn phase(&self) -> Phase {
        self.phase
    }

    fn has_result(&self) -> bool {
        self.phase == Phase::Done
            && (self.config.mode == ChainMode::Bcast || self.config.rank == self.config.root)
    }

    fn reads_clock(&self) -> bool {
        false
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: self.phase,
            iteration: u32::from(self.phase == Phase::Done),
            counters: self.counters,
            detail: Detail::None,
        }
    }
}

#[cfg(test)]
mod tests;
