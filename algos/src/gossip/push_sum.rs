//! Push-Sum (000 Alg. 2), and HPS with a permutation schedule: halve the value-weight pair, send
//! one half, add whatever arrives. Mass is conserved only while every message arrives intact,
//! so loss, a crash or a flip changes the aggregate the ranks converge to.

use crate::protocol::Outbox;
use crate::rank::Rank;

use super::engine::Gossip;
use super::mass::add_into;
use super::real::Real;

impl<T: Real> Gossip<T> {
    /// One push: without a live partner the rank keeps its mass for the round.
    pub(super) fn ps_push(&mut self, partner: Option<Rank>, out: &mut Outbox) {
        let Some(to) = partner else {
            return;
        };
        for x in self.own.iter_mut() {
            *x = x.half();
        }
        let header = self.header();
        let half = std::mem::take(&mut self.own);
        self.send(to, header, &half, out);
        self.own = half;
    }

    /// Adds received mass.
    pub(super) fn ps_receive(&mut self, values: &[T]) {
        add_into(&mut self.own, values);
    }
}
