//! Push-Sum (000 Alg. 2), and HPS with a permutation schedule: halve the value-weight pair, send
//! one half, add whatever arrives. Mass is conserved only while every message arrives intact,
//! so loss, a crash or a flip changes the aggregate the ranks converge to.

use crate::protocol::Outbox;
use crate::rank::Rank;

use super::engine::Gossip;
use super::mass::add_into;
use super::real::Real;

/// Least weight, relative to the receiver's, of a push that counts as a receipt for the
/// stopping rule. Round-synchronous Push-Sum keeps the weights within a small factor of one
/// another; a factor of 64 is six pushes into the void.
const FAIR_WEIGHT_SHARE: f64 = 1.0 / 64.0;

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

    /// Whether a received push is evidence for the stopping rule that this rank has mixed with
    /// the sender: its weight must be a fair share of this rank's own. A sender that pushed
    /// many times without hearing from anyone (descheduled on a busy node, or started early)
    /// has halved its weight each time, and its late frames carry almost none: they leave this
    /// rank's estimate where it was, which looked like the quiet of a mixed network, and four
    /// ranks on two cores stopped with 16-64 % errors at eps = 1e-2.
    pub(super) fn ps_receipt_counts(&self, values: &[T]) -> bool {
        let at = self.layout.weight();
        match (values.get(at), self.own.get(at)) {
            (Some(theirs), Some(mine)) => theirs.to_f64() >= mine.to_f64() * FAIR_WEIGHT_SHARE,
            _ => false,
        }
    }

    /// Adds received mass.
    pub(super) fn ps_receive(&mut self, values: &[T]) {
        add_into(&mut self.own, values);
    }
}
