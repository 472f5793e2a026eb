//! What a rank does when (Alg. 1's scheduling): the service distance of each iteration
//! (Appendix A) and the pacing of 004's step model, one iteration per step.

use crate::protocol::Outbox;
use crate::time::Time;

use super::super::ServiceDistance;
use super::{Ftco, MAX_SERVICE_DISTANCE, TIMER_ACK, TIMER_NOTICE, TIMER_PROBE, TIMER_STEP};

impl Ftco {
    /// After an input that may give this rank work: Alg. 1's loop at once, or in the step
    /// model the next step (this one, unless the rank already acted in it).
    pub(super) fn advance(&mut self, now: Time, out: &mut Outbox) {
        if !self.config.step_model {
            self.progress(now, out);
            return;
        }
        if self.timers.deadline(TIMER_STEP).is_none() {
            let next = self
                .last_step
                .map_or(now, |t| now.max(t.after(self.config.costs.overhead)));
            self.timers.arm(TIMER_STEP, next);
        }
    }

    /// The step model's timers: after a step that acted, the next step (which judges every
    /// deadline); after a quiet one, the ACK and probe deadlines, or an arriving message.
    pub(super) fn arm_step_timers(&mut self, now: Time, quiet: bool) {
        self.last_step = Some(now);
        self.timers.disarm(TIMER_STEP);
        self.arm_timers(now, true);
        if !quiet {
            let next = now.after(self.config.costs.overhead);
            self.timers.arm(TIMER_STEP, next);
            for timer in [TIMER_ACK, TIMER_PROBE, TIMER_NOTICE] {
                if self.timers.deadline(timer).is_some_and(|at| at < next) {
                    self.timers.arm(timer, next);
                }
            }
        }
    }

    /// f_RSD or f_DISD (Appendix A).
    pub(super) fn service_distance(&mut self) -> u32 {
        match self.config.service {
            ServiceDistance::Rsd { ratio } => {
                let r = ratio.clamp(f64::MIN_POSITIVE, 0.5);
                let y = self.rng.next_open01();
                let d = (y.ln() / r.ln()).ceil();
                // NaN or huge casts saturate; the clamp keeps the result in 1..=64.
                (d as u32).clamp(1, MAX_SERVICE_DISTANCE)
            }
            ServiceDistance::Disd => {
                let near = self
                    .up
                    .iter()
                    .chain(&self.down)
                    .filter(|&&x| self.distance(x) == 1)
                    .count() as u64;
                let interval = 4 * near.max(1);
                let pos = self.disd_step % interval;
                self.disd_step = self.disd_step.wrapping_add(1);
                let (mut lo, mut half, mut d) = (0, interval / 2, 1);
                while half > 0 && pos >= lo + half {
                    lo += half;
                    half /= 2;
                    d += 1;
                }
                d
            }
        }
    }
}
