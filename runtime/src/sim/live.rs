//! Driving a simulation a slice at a time, with faults that arrive while it runs: the console's
//! simulated mode (`ftcoll-launch --sim`), where a user watches virtual time advance and
//! injects faults from the keyboard. The run stays deterministic given the same injections at
//! the same virtual times.

use ftcoll_algos::{Protocol, Rank, Time};

use super::engine::Simulation;
use super::plan::{CompiledPlan, MessageFlip};
use super::SimReport;
use crate::faults::{FaultSpec, FaultTime, MessageSelector};

/// What one slice of a stepped simulation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slice {
    /// Events remain after the slice's end.
    Running,
    /// No event remains (or a bound was hit): the run is over.
    Finished,
}

impl<P: Protocol> Simulation<P> {
    /// Handles every event up to and including virtual time `until`, then returns.
    pub fn run_until(&mut self, until: Time) -> Slice {
        // Each pass pops one event; the event and time bounds end the loop.
        while let Some(at) = self.peek_time() {
            if at > until {
                return Slice::Running;
            }
            if !self.step_one() {
                return Slice::Finished;
            }
        }
        Slice::Finished
    }

    /// Ends a stepped run and reports (as [`Simulation::run`] does at its end).
    pub fn finish_stepped(&mut self) -> SimReport {
        self.finish_report()
    }

    /// Virtual time of the last handled event.
    pub fn now(&self) -> Time {
        Time(self.report_so_far().sim_time_steps)
    }

    /// Counters so far (messages, flips, crashes).
    pub fn report_so_far(&self) -> &SimReport {
        self.report_ref()
    }

    /// Adds a fault while the run is under way: its times count from `now`, and a message
    /// selector `nth=K` from the sender's next message.
    pub fn inject(&mut self, spec: &FaultSpec, now: Time) -> Result<(), super::SimError> {
        let n = self.ranks().len() as u32;
        let compiled = CompiledPlan::compile(
            std::slice::from_ref(spec),
            n,
            self.ranks_per_node(),
            self.seed(),
        )?;
        if matches!(
            spec,
            FaultSpec::FlipMessage { .. }
                | FaultSpec::FlipState { .. }
                | FaultSpec::FlipRate { .. }
        ) {
            self.skip_invariant_checks();
        }
        for (at, fault) in compiled.timed {
            self.schedule_fault(Time(now.0 + at.0), fault);
        }
        for (rank, flips) in compiled.message_flips {
            let sent = self.messages_sent_by(rank);
            for flip in flips {
                let which = match flip.which {
                    MessageSelector::Nth(k) => MessageSelector::Nth(sent + k),
                    MessageSelector::AtOrAfter(at) => MessageSelector::AtOrAfter(FaultTime::Steps(
                        now.0 + at.steps().map_err(super::plan::PlanError::from)?,
                    )),
                };
                self.add_message_flip(
                    rank,
                    MessageFlip {
                        which,
                        target: flip.target,
                    },
                );
            }
        }
        match *spec {
            FaultSpec::Drop { rank, rate } => self.set_drop_rate(rank.map(|r| r.0), rate),
            FaultSpec::FlipRate { rank, rate } => self.set_flip_rate(rank.map(|r| r.0), rate),
            _ => {}
        }
        Ok(())
    }

    /// Whether `rank` is stopped (hung) or dead.
    pub fn is_silent(&self, rank: Rank) -> bool {
        !self.is_alive(rank) || self.is_stopped(rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::{FlipTarget, KillTime};
    use crate::job::{stepped_simulation, Algorithm, JobSpec};
    use crate::sim::{generate_inputs, SimConfig};
    use ftcoll_algos::protocol::StateVar;
    use ftcoll_algos::OpId;

    fn pfcc(n: u32) -> Simulation<Box<dyn Protocol + Send>> {
        let mut spec = JobSpec::new(Algorithm::Pfcc, n);
        spec.gossip.stop_rule = true;
        let config = SimConfig {
            seed: 5,
            ..SimConfig::default()
        };
        let inputs = generate_inputs(spec.input, n, 1, config.seed);
        stepped_simulation(&spec, config, inputs, OpId(1)).unwrap()
    }

    #[test]
    fn stepping_with_injected_faults_is_deterministic_and_converges() {
        let run = || {
            let mut sim = pfcc(16);
            let mut t = 0;
            let mut slices = 0;
            loop {
                t += 30;
                slices += 1;
                if slices == 3 {
                    let now = FaultTime::Steps(0);
                    sim.inject(
                        &FaultSpec::Kill {
                            rank: Rank(5),
                            at: KillTime::At(now),
                        },
                        Time(t),
                    )
                    .unwrap();
                    sim.inject(
                        &FaultSpec::FlipState {
                            rank: Rank(2),
                            var: StateVar::Flow {
                                peer: Rank(3),
                                elem: 0,
                            },
                            bit: 60,
                            at: now,
                        },
                        Time(t),
                    )
                    .unwrap();
                    sim.inject(
                        &FaultSpec::FlipMessage {
                            rank: Rank(7),
                            which: MessageSelector::Nth(0),
                            target: FlipTarget::Payload { elem: 0, bit: 62 },
                        },
                        Time(t),
                    )
                    .unwrap();
                }
                if sim.run_until(Time(t)) == Slice::Finished || slices > 100_000 {
                    break;
                }
            }
            sim.finish_stepped()
        };
        let first = run();
        let second = run();
        assert_eq!(first.trace_hash, second.trace_hash);
        assert_eq!(first.crashes.len(), 1);
        assert_eq!(first.crashes[0].rank, Rank(5));
        assert!(first.crashes[0].at.0 >= 90, "struck when injected");
        assert_eq!(first.message_flips, 1);
        assert!(!first.truncated);
        assert_eq!(first.completed, 15);
        let error = first.admissible_error.unwrap();
        assert!(error < 1e-10, "survivors error {error:e}: {first:?}");
    }

    #[test]
    fn a_bad_injected_fault_is_an_error_not_a_panic() {
        let mut sim = pfcc(4);
        assert!(sim
            .inject(
                &FaultSpec::Kill {
                    rank: Rank(9),
                    at: KillTime::At(FaultTime::Steps(0)),
                },
                Time(0),
            )
            .is_err());
        assert!(sim
            .inject(
                &FaultSpec::Kill {
                    rank: Rank(1),
                    at: KillTime::At(FaultTime::Nanos(5_000_000)),
                },
                Time(0),
            )
            .is_err());
    }
}
