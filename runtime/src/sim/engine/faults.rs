//! Faults in the simulator: scripted strikes (crashes, stops, state flips, cuts, slowdowns),
//! the failure detector's notices, and corruption of messages and state at a rate.

use ftcoll_algos::protocol::Protocol;
use ftcoll_algos::protocol::{Event, Input, LocalFault, StateVar};
use ftcoll_algos::{Rank, Time};

use super::super::plan::{MessageFlip, TimedFault};
use super::super::queue::EventClass;
use super::super::{CrashCause, CrashRecord, DetectorModel};
use super::{SimEvent, Simulation};
use crate::faults::{FlipTarget, MessageSelector};

impl<P: Protocol> Simulation<P> {
    pub(super) fn strike(&mut self, at: Time, fault: TimedFault) {
        self.trace.mix(0xFA17 ^ at.0);
        match fault {
            TimedFault::Crash(rank) => {
                if self.slots[rank.index()].alive {
                    self.crash(rank.0, at, CrashCause::Scripted);
                    self.schedule_detection(rank.0, at);
                }
            }
            TimedFault::FlipState(rank, fault) => {
                let slot = self.slots[rank.index()];
                if slot.alive && !slot.stopped {
                    self.handle_input(rank.0, at, Input::Fault(fault));
                }
            }
            TimedFault::Cut(a, b) => {
                self.cut.insert((a.0.min(b.0), a.0.max(b.0)));
                self.report_link_failure(a.0, b.0, at);
            }
            TimedFault::Slow(rank, factor) => {
                self.slots[rank.index()].slow = factor.max(1);
                if let DetectorModel::Timeout {
                    period_steps,
                    timeout_steps,
                } = self.config.detector
                {
                    // A rank too slow to beat within the timeout looks hung to the detector.
                    if period_steps.saturating_mul(u64::from(factor)) > timeout_steps {
                        self.queue.push(
                            at.after(ftcoll_algos::Duration(timeout_steps)),
                            EventClass::Fault,
                            SimEvent::Suspect(rank.0),
                        );
                    }
                }
            }
            TimedFault::Stop(rank) => {
                let slot = &mut self.slots[rank.index()];
                if slot.alive && !slot.stopped {
                    slot.stopped = true;
                    self.schedule_detection(rank.0, at);
                }
            }
        }
    }

    /// Tells both ends of a failed link, after the detector's delay (a transport sees a broken
    /// connection as a node's heartbeats stopping); no one is told under the silent detector.
    pub(super) fn report_link_failure(&mut self, a: u32, b: u32, at: Time) {
        let delay = match self.config.detector {
            DetectorModel::Perfect { delay_steps } => delay_steps,
            DetectorModel::Timeout { timeout_steps, .. } => timeout_steps,
            DetectorModel::Silent => return,
        };
        let when = at.after(ftcoll_algos::Duration(delay));
        for (to, peer) in [(a, b), (b, a)] {
            self.queue
                .push(when, EventClass::Notice, SimEvent::LinkNotice { to, peer });
        }
    }

    pub(super) fn crash(&mut self, rank: u32, at: Time, cause: CrashCause) {
        self.slots[rank as usize].alive = false;
        self.crash_for_oracle(rank);
        self.trace.mix(0xDEAD ^ u64::from(rank) ^ at.0 << 32);
        self.report.crashes.push(CrashRecord {
            rank: Rank(rank),
            at,
            cause,
            noticed_at: None,
        });
    }

    /// A protocol took `rank` for dead by its own timeout: the papers assume fail-stop, so a
    /// live suspect is killed at once, before the suspecting rank acts on it, as the launcher
    /// fences real ranks. No detector notice follows: ranks that find failures by their own
    /// timeouts (FTCO) find this one the same way.
    pub(super) fn fence(&mut self, rank: u32, at: Time) {
        if self.slots.get(rank as usize).is_some_and(|s| s.alive) {
            self.crash(rank, at, CrashCause::Fenced);
        }
    }

    /// Arranges for the detector to notice that `rank` went silent at `at`.
    pub(super) fn schedule_detection(&mut self, rank: u32, at: Time) {
        match self.config.detector {
            DetectorModel::Perfect { delay_steps } => {
                // A stopped process is alive: a perfect detector of crashes never reports it.
                if !self.slots[rank as usize].alive {
                    let when = at.after(ftcoll_algos::Duration(delay_steps));
                    self.queue
                        .push(when, EventClass::Fault, SimEvent::Suspect(rank));
                }
            }
            DetectorModel::Timeout {
                period_steps,
                timeout_steps,
            } => {
                // The last heartbeat went out up to one period before the silence began.
                let jitter = if period_steps > 0 {
                    self.rng.below(period_steps)
                } else {
                    0
                };
                let when = Time((at.0 + timeout_steps).saturating_sub(jitter).max(at.0));
                self.queue
                    .push(when, EventClass::Fault, SimEvent::Suspect(rank));
            }
            DetectorModel::Silent => {}
        }
    }

    pub(super) fn notify_survivors(&mut self, failed: u32, at: Time) {
        if let Some(record) = self
            .report
            .crashes
            .iter_mut()
            .rev()
            .find(|c| c.rank.0 == failed)
        {
            if record.noticed_at.is_some() {
                return;
            }
            record.noticed_at = Some(at);
        }
        for to in 0..self.report.n {
            if to != failed && self.slots[to as usize].alive {
                self.queue
                    .push(at, EventClass::Notice, SimEvent::Notice { to, failed });
            }
        }
    }

    /// `flip-rate`: after each of the `sent` messages, with the rank's rate, one random bit of
    /// one of its flows flips (the protocol picks the flow from the drawn numbers).
    pub(super) fn corrupt_at_rate(&mut self, rank: u32, now: Time, sent: usize) {
        let rate = self.plan.flip_rate(rank);
        if rate <= 0.0 {
            return;
        }
        for _ in 0..sent {
            if !self.rng.chance(rate) {
                continue;
            }
            let var = StateVar::AnyFlow {
                pick: self.rng.next_u64() as u32,
                elem: self.rng.next_u64() as u32,
            };
            let fault = LocalFault::FlipBit {
                var,
                bit: self.rng.below(64) as u32,
            };
            self.ranks[rank as usize].handle(now, Input::Fault(fault), &mut self.outbox);
            // The protocol reacts to a flip only at its next step; what it reports now is the
            // flip itself.
            for event in self.outbox.events() {
                if matches!(event, Event::FaultApplied(_)) {
                    self.report.state_flips += 1;
                }
            }
            self.outbox.clear();
        }
    }

    pub(super) fn take_message_flip(&mut self, rank: u32, departure: Time) -> Option<MessageFlip> {
        let sent = self.sent_by_flipped.get_mut(&rank)?;
        let index = *sent;
        *sent += 1;
        let flips = self.plan.message_flips.get_mut(&rank)?;
        let pos = flips.iter().position(|f| match f.which {
            MessageSelector::Nth(nth) => nth == index,
            MessageSelector::AtOrAfter(at) => at.steps().is_ok_and(|t| departure.0 >= t),
        })?;
        Some(flips.remove(pos))
    }

    pub(super) fn apply_message_flip(&mut self, slot: u32, target: FlipTarget) {
        let applied = target.apply(self.messages.bytes_mut(slot));
        if applied {
            self.report.message_flips += 1;
        }
    }
}
