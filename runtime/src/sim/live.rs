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
