//! ERA as a [`Protocol`]: a rank runs a sequence of blocking agreements (ids 1..=count), each
//! started as soon as the previous one returned, and keeps serving all of them afterwards.
//! This is what the simulator and its checker drive; the runtime's communicator uses [`Era`]
//! directly.

use super::engine::{AgreementState, Era, EraConfig};
use super::value::AgreedValue;
use crate::protocol::{Detail, Event, Input, Outbox, Phase, Protocol, RankStatus};
use crate::rank::RankSet;
use crate::time::Time;
use crate::values::ReduceOp;

/// What one rank agrees on.
#[derive(Clone, Debug, PartialEq)]
pub struct EraRunConfig {
    /// This rank.
    pub me: u32,
    /// Ranks.
    pub n: u32,
    /// The service's set-up.
    pub era: EraConfig,
    /// Agreements in the sequence (at least 1).
    pub agreements: u32,
    /// The operator.
    pub op: ReduceOp,
    /// This rank's contribution to every agreement.
    pub words: Vec<u64>,
    /// Rebuild the tree after each agreement that agreed on new failures.
    pub rebalance: bool,
}

/// A sequence of agreements at one rank.
#[derive(Clone, Debug)]
pub struct EraRun {
    config: EraRunConfig,
    era: Era,
    phase: Phase,
    /// The agreement in progress (1-based), 0 before the start.
    current: u64,
    decisions: Vec<AgreedValue>,
    /// Times a recorded decision was seen replaced by another value.
    changed_decisions: u32,
}

impl EraRun {
    /// A rank's instance.
    pub fn new(config: EraRunConfig) -> EraRun {
        EraRun {
            era: Era::new(config.me, config.n, config.era),
            config,
            phase: Phase::Idle,
            current: 0,
            decisions: Vec::new(),
            changed_decisions: 0,
        }
    }

    /// The decisions taken so far, in agreement order.
    pub fn decisions(&self) -> &[AgreedValue] {
        &self.decisions
    }

    /// How often a decision this rank had returned was later seen with another value
    /// (Irrevocability says never).
    pub fn changed_decisions(&self) -> u32 {
        self.changed_decisions
    }

    /// The service (for inspection).
    pub fn era(&self) -> &Era {
        &self.era
    }

    fn start_next(&mut self, out: &mut Outbox) {
        self.current += 1;
        // The simulated application acknowledges every failure it knows of before agreeing.
        let acked: RankSet = self.era.dead().clone();
        let started = self.era.start(
            self.current,
            self.config.op,
            self.config.words.clone(),
            &acked,
            self.config.rebalance,
            out,
        );
        if started.is_err() {
            self.phase = Phase::Aborted;
            out.emit(Event::Aborted(crate::protocol::AbortReason::Stopped));
        }
    }

    /// Returns from every agreement that has decided, starting the next ones.
    fn advance(&mut self, out: &mut Outbox) {
        // Each pass returns from one agreement; the sequence is finite.
        while self.phase == Phase::Running {
            let AgreementState::Decided(value) = self.era.state(self.current) else {
                break;
            };
            self.decisions.push(value.clone());
            self.era.returned(self.current);
            out.emit(Event::RoundDone {
                round: (self.current - 1) as u32,
            });
            if self.current >= u64::from(self.config.agreements) {
                self.phase = Phase::Done;
                out.emit(Event::Completed);
            } else {
                self.start_next(out);
            }
        }
        for (i, decided) in self.decisions.iter().enumerate() {
            if let AgreementState::Decided(now) = self.era.state(i as u64 + 1) {
                if now != decided {
                    self.changed_decisions += 1;
                }
            }
        }
    }
}

impl Protocol for EraRun {
    fn handle(&mut self, _now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Start { .. } if self.phase == Phase::Idle => {
                self.phase = Phase::Running;
                self.start_next(out);
            }
            Input::Start { .. } => {}
            Input::Message { from, frame } => {
                if let Err(error) = self.era.handle_frame(from, &frame, out) {
                    out.emit(Event::Rejected { from, error });
                }
            }
            Input::PeerFailed { peer } => self.era.peer_failed(peer.0, out),
            Input::Timeout => {}
            Input::LinkFailed { .. } => {}
            Input::Fault(fault) => out.emit(Event::FaultIgnored(fault)),
            Input::Stop => {
                if self.phase == Phase::Running {
                    self.phase = Phase::Aborted;
                    out.emit(Event::Aborted(crate::protocol::AbortReason::Stopped));
                }
            }
        }
        self.advance(out);
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        if let Some(last) = self.decisions.last() {
            dst.extend(last.words.iter().map(|w| *w as f64));
        }
    }

    fn phase(&self) -> Phase {
        self.phase
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: self.phase,
            iteration: self.decisions.len() as u32,
            counters: self.era.counters(),
            detail: Detail::Agreement {
                agreement: self.current,
                known_failed: self.era.dead().len() as u32,
                live_agreements: self.era.live_agreements() as u32,
            },
        }
    }
}
