//! The stopping rule real runs use: "until eps-accurate" (000, 003) is a global oracle no rank
//! can evaluate.
//!
//! # The rule
//! 1. **Local quiet**: after each push a rank compares its estimate with the one at its
//!    previous push. A relative change above `threshold` makes the push *unsettled*.
//! 2. **Spread the news**: every message carries the sender's *unsettled stamp* `U`: the latest
//!    push count at which the sender, or anyone it has heard from, was unsettled (in the
//!    header's `step` field). A receiver keeps the maximum.
//! 3. **Stop** at push `t` once `t - U >= quiet_rounds`: nothing unsettled has been heard of for
//!    `quiet_rounds` pushes, which covers the time news takes to cross the network.
//!
//! Gossip spreads a stamp like a rumour: along the topology's diameter, and in about
//! log2 N + ln N rounds on well-connected graphs (push rumour spreading). `quiet_rounds` is
//! therefore `diameter + ceil(log2 N) + 2`. The threshold ties the per-push change to the error:
//! gossip errors shrink geometrically, so while the error is above eps the estimate keeps moving
//! by a fixed fraction of it; `threshold = eps / 32` keeps the rule on the accurate side on
//! hypercubes and fully connected graphs. On graphs that mix slowly (a long bus, a large torus)
//! the per-push change can fall below the threshold while the error is still above eps: there
//! the rule is a heuristic, and `--steps` bounds the run regardless.
//!
//! Push counts of different ranks are not synchronised in the asynchronous mode; they advance
//! at the same mean rate, and the margin of 2 in `quiet_rounds` absorbs the drift over the
//! runs measured (see the README's stopping-rule section for the figures).

use crate::topology::Topology;

use super::{Rule, Schedule};

/// The local stopping rule's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StopRule {
    /// Relative change of the estimate between two pushes above which a push is unsettled.
    pub threshold: f64,
    /// Pushes without news of anything unsettled before a rank stops.
    pub quiet_rounds: u32,
}

impl StopRule {
    /// The rule for accuracy `eps` when `rule` gossips on `topology` by `schedule`.
    pub fn for_target(eps: f64, topology: &Topology, schedule: Schedule, rule: Rule) -> StopRule {
        let n = topology.size().max(1);
        let log2n = 32 - (n - 1).leading_zeros();
        if schedule.is_permutation() {
            // Rounds are synchronised and every rank hears from a random rank each round, so
            // a round's change is of the size of the error itself and no drift needs a margin.
            return StopRule {
                threshold: eps / 4.0,
                quiet_rounds: log2n + 1,
            };
        }
        // PCF ignores pushes that arrive while a pair's roles differ, so it converges more
        // slowly per push and its changes understate its error more.
        let divisor = match rule {
            Rule::PushCancelFlow | Rule::PushCancelFlowTolerant => 128.0,
            _ => 32.0,
        };
        StopRule {
            threshold: eps / divisor,
            quiet_rounds: diameter(topology) + log2n + 2,
        }
    }
}

/// The topology's diameter (hops between the farthest two ranks).
pub fn diameter(topology: &Topology) -> u32 {
    match *topology {
        Topology::FullyConnected { n } => u32::from(n > 1),
        Topology::Hypercube { dim } => dim,
        Topology::Torus3d { dims } => dims.iter().map(|d| d / 2).sum(),
        Topology::Ring { n } => n / 2,
        Topology::Bus { n } => n.saturating_sub(1),
    }
}

/// A rank's state under the rule.
#[derive(Clone, Debug, Default)]
pub struct StopState {
    /// The estimate at the previous push.
    previous: Vec<f64>,
    /// The latest unsettled push count this rank knows of.
    pub unsettled: u32,
    /// Messages received since this rank's own last unsettled push.
    receipts: u32,
}

impl StopState {
    /// Records the estimate after push number `iteration` (counted from 1); true when the rank
    /// may stop.
    pub fn after_push(&mut self, rule: &StopRule, iteration: u32, estimate: &[f64]) -> bool {
        // Relative to the vector's largest magnitude, not element by element: an element whose
        // aggregate is near zero (a dot product that nearly cancels) would otherwise never look
        // settled.
        let scale = estimate
            .iter()
            .fold(0.0f64, |m, e| m.max(e.abs()))
            .max(f64::MIN_POSITIVE);
        let change = if self.previous.len() == estimate.len() {
            self.previous
                .iter()
                .zip(estimate)
                .map(|(p, e)| {
                    let rel = (e - p).abs() / scale;
                    if rel.is_nan() {
                        f64::INFINITY
                    } else {
                        rel
                    }
                })
                .fold(0.0, f64::max)
        } else {
            f64::INFINITY
        };
        self.previous.clear();
        self.previous.extend_from_slice(estimate);
        if change > rule.threshold {
            self.unsettled = iteration;
            self.receipts = 0;
        }
        // A push does not change the pusher's own estimate (it sends mass and weight in
        // proportion); only what arrives does. A rank that heard nothing for a while has not
        // seen the rest of the network settle, so it also needs as many receipts as quiet pushes.
        iteration.saturating_sub(self.unsettled) >= rule.quiet_rounds
            && self.receipts >= rule.quiet_rounds
    }

    /// A message carried the sender's stamp.
    pub fn heard(&mut self, stamp: u32) {
        self.unsettled = self.unsettled.max(stamp);
        self.receipts = self.receipts.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_rounds_follow_diameter_and_size() {
        let period = crate::time::Duration(12);
        let hypercube = Topology::hypercube(32).unwrap();
        let rule =
            StopRule::for_target(1e-8, &hypercube, Schedule::Async { period }, Rule::PushFlow);
        assert_eq!(rule.quiet_rounds, 5 + 5 + 2);
        assert_eq!(rule.threshold, 1e-8 / 32.0);
        let full = Topology::fully_connected(1 << 20).unwrap();
        let rounds = StopRule::for_target(1e-3, &full, Schedule::Rounds { period }, Rule::PushSum);
        assert_eq!(rounds.quiet_rounds, 1 + 20 + 2);
        let hps =
            StopRule::for_target(1e-3, &full, Schedule::Permutation { period }, Rule::PushSum);
        assert_eq!(hps.quiet_rounds, 20 + 1);
        assert_eq!(diameter(&Topology::torus3d_dims([4, 4, 8]).unwrap()), 8);
    }

    #[test]
    fn stops_only_after_quiet_pushes_and_news_resets_the_count() {
        let rule = StopRule {
            threshold: 1e-6,
            quiet_rounds: 3,
        };
        let mut state = StopState::default();
        assert!(!state.after_push(&rule, 1, &[1.0]));
        assert!(!state.after_push(&rule, 2, &[1.0]));
        assert!(!state.after_push(&rule, 3, &[1.0]));
        state.heard(3);
        assert!(!state.after_push(&rule, 4, &[1.0]));
        assert!(!state.after_push(&rule, 5, &[1.0]));
        assert!(
            !state.after_push(&rule, 6, &[1.0]),
            "one receipt since it settled"
        );
        for _ in 0..2 {
            state.heard(1);
        }
        assert!(state.after_push(&rule, 6, &[1.0]));
        let mut moving = StopState::default();
        for t in 1..50 {
            assert!(!moving.after_push(&rule, t, &[1.0 + 1e-3 * f64::from(t % 2)]));
        }
        let mut nan = StopState::default();
        nan.after_push(&rule, 1, &[1.0]);
        nan.after_push(&rule, 2, &[f64::NAN]);
        assert_eq!(nan.unsettled, 2, "a NaN estimate is never settled");
    }
}
