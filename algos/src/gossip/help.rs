//! Finished ranks that help after a failure.
//!
//! A finished rank only answers pushes. When a rank dies after some ranks finished and while
//! others still run, the survivors' mass must mix again, and the finished ranks' mass is part
//! of it: a group of finished ranks whose only running neighbour died would never mix again,
//! and the ranks still running could stop at a local average (16 ranks on a hypercube in the
//! simulator: 7504.2 where the survivors' sum was 7551). So a finished rank told of a failure
//! pushes on its schedule again, as if running, until the stopping rule finds its mass quiet
//! once more or the push bound is reached. The result it returned does not change; its
//! operation stays unsettled ([`crate::Protocol::settled`]) meanwhile, so that drivers keep
//! serving it and its timer.

use crate::protocol::{Outbox, Phase};
use crate::time::Time;

use super::engine::{Gossip, TICK};
use super::real::Real;

impl<T: Real> Gossip<T> {
    /// A failure notice reached this rank: if it finished, it starts helping.
    pub(super) fn help(&mut self, now: Time) {
        if self.phase != Phase::Done || self.config.stop.is_none() {
            return;
        }
        if !self.helping && self.iteration < self.config.max_iterations {
            self.helping = true;
            let at = self.next_tick(now);
            self.timers.arm(TICK, at);
        }
    }

    /// One push of a helping rank.
    pub(super) fn help_tick(&mut self, now: Time, out: &mut Outbox) {
        let partner = self.partner(now);
        if partner.is_none() && !self.config.schedule.is_permutation() {
            self.stop_helping(now);
            return;
        }
        self.starting_exchange = true;
        let pushed = self.scheduled_push(partner, out);
        self.starting_exchange = false;
        if pushed != super::engine::Pushed::More {
            self.stop_helping(now);
        } else {
            let at = self.next_tick(now);
            self.timers.arm(TICK, at);
        }
    }

    fn stop_helping(&mut self, now: Time) {
        self.helping = false;
        // Reachable for the linger time from now, for ranks still running.
        self.done_at = Some(now);
        self.timers.disarm(TICK);
    }
}
