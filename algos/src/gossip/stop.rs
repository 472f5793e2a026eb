//! The stopping rule real runs use: "until eps-accurate" (000, 003) is a global oracle no rank
//! can evaluate.
//!
//! # The rule
//! 1. **Local quiet**: after each push a rank compares its estimate with the one at its
//!    previous push. A relative change above `threshold` makes the push *unsettled*.
//! 2. **Spread the news**: every message carries the sender's *quiet age*: how many pushes ago
//!    the sender, or anyone it has heard from, was last unsettled (in the header's `step` field),
//!    counted along the way the news took. A receiver keeps the smaller of its own age and the
//!    sender's.
//! 3. **Stop** once the age reaches `quiet_rounds`: nothing unsettled has been heard of for
//!    `quiet_rounds` pushes, which covers the time news takes to cross the network.
//!
//! Gossip spreads the news like a rumour: along the topology's diameter, and in about
//! log2 N + ln N rounds on well-connected graphs (push rumour spreading). `quiet_rounds` is
//! therefore `diameter + ceil(log2 N) + 2`. The threshold ties the per-push change to the error:
//! gossip errors shrink geometrically, so while the error is above eps the estimate keeps moving
//! by a fixed fraction of it; `threshold = eps / 32` keeps the rule on the accurate side on
//! hypercubes and fully connected graphs. On graphs that mix slowly (a long bus, a large torus)
//! the per-push change can fall below the threshold while the error is still above eps: there
//! the rule is a heuristic, and `--steps` bounds the run regardless.
//!
//! Ages, not push counts, travel because push counts of different ranks drift apart on real
//! ranks: ranks start at different times, and a loaded machine delays some ranks' timers more
//! than others'. Over libfabric's tcp provider, 16 ranks on two cores reached push 270 between
//! 577 and 706 ms into the operation, about 50 pushes apart. A stamp of the push count at which
//! news began then meant nothing to a rank 10 pushes ahead of the sender: it ignored a crash's
//! news and stopped on a half-mixed estimate. An age only ever counts one rank's pushes at a time.
//! A finished rank's answers count as pushes for its age, so the age it relays keeps growing.
//!
//! # Permutation schedules
//! HPS and HPFLC push in rounds on random permutations, where a round's change is of the size
//! of the error and news crosses N ranks in about log2 N rounds: `quiet_rounds` is log2 N + 1.
//! That holds while all ranks push in step. On real ranks the rounds are a wall clock, and on a
//! node with more ranks than cores the ranks run in turns: four ranks on two cores with a 5 µs
//! period ran as two pairs, each pair averaging with itself for rounds on end while the other
//! slept, and both pairs stopped on their own averages (errors of 16-64 % at eps = 1e-2). A
//! rank of a permutation schedule therefore also waits until it has heard from
//! min(quiet_rounds, N - 1) distinct ranks since its last unsettled push: in step, a round
//! brings a new random sender, so this costs nothing; out of step, it keeps a group that has
//! only mixed within itself running until an outsider's news arrives.
//!
//! # Holds
//! A driver that fears lost mass (a link silent too long, not yet declared failed) *holds*
//! the rule at a rank. Nothing unsettled need show anywhere then: mass drained into a cut link
//! leaves ratios as they were, and the network settles on a biased one. News of a hold
//! therefore counts for more than news of a change: it sets the age `hold_rounds` below an
//! unsettled push's, so the age a far rank relays stays short of `quiet_rounds` while the hold
//! is renewed at every push. News of a change alone crosses a 64-rank hypercube in up to about
//! 18 pushes (random partners, one hop per about `degree` pushes), more than its 14 quiet rounds:
//! a rank three hops from the held ones stopped on the biased ratio.

use crate::rank::Rank;
use crate::topology::Topology;

use super::{Rule, Schedule};

/// The local stopping rule's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StopRule {
    /// Relative change of the estimate between two pushes above which a push is unsettled.
    pub threshold: f64,
    /// Pushes without news of anything unsettled before a rank stops.
    pub quiet_rounds: u32,
    /// Distinct ranks a rank must have heard from since its last unsettled push before it
    /// stops (0: no such condition). See the module's Permutation schedules.
    pub senders: u32,
}

/// Most distinct senders a rank tracks for the rule (the most it can ask for is
/// `quiet_rounds` of a permutation schedule, log2 N + 1 <= 33).
const MAX_SENDERS: usize = 64;

/// How many times `quiet_rounds` news of a hold outweighs news of an unsettled push.
const HOLD_FACTOR: u32 = 4;

impl StopRule {
    /// The rule for accuracy `eps` when `rule` gossips on `topology` by `schedule`.
    pub fn for_target(eps: f64, topology: &Topology, schedule: Schedule, rule: Rule) -> StopRule {
        let n = topology.size().max(1);
        let log2n = 32 - (n - 1).leading_zeros();
        if schedule.is_permutation() {
            // In step, every rank hears from a random rank each round and a round's change is
            // of the size of the error itself. On real ranks out of step (see the module's
            // Permutation schedules) a rank hears from ranks that have not moved since, and
            // its changes understate its error: with eps / 4, HPFLC at eight ranks on two
            // cores stopped one operation in about 240 at up to 20 eps; with eps / 8, 300
            // operations stayed within eps / 7. The simulator's rounds to the stop grew from
            // 1.74 to 1.95 times the oracle's (HPS; eps / 32 took 2.05).
            return StopRule {
                threshold: eps / 8.0,
                quiet_rounds: log2n + 1,
                senders: (log2n + 1).min(n - 1),
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
            senders: 0,
        }
    }
}

impl StopRule {
    /// Pushes by which a hold's news outlasts an unsettled push's (see the module's Holds).
    pub fn hold_rounds(&self) -> u32 {
        self.quiet_rounds.saturating_mul(HOLD_FACTOR)
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
#[derive(Clone, Debug)]
pub struct StopState {
    /// The estimate at the previous push.
    previous: Vec<f64>,
    /// Pushes since the latest hold this rank knows of (its own or one it heard of); capped at
    /// `hold_rounds` plus the pushes since the latest unsettled push it knows of. Sent with
    /// every push; a rank keeps the smaller of its own and a sender's.
    pub quiet_age: u32,
    /// Messages received since this rank's own last unsettled push.
    receipts: u32,
    /// Distinct senders of those messages, at most [`MAX_SENDERS`].
    senders: Vec<Rank>,
}

impl Default for StopState {
    /// No news yet: the first push is unsettled (it has no previous estimate).
    fn default() -> StopState {
        StopState {
            previous: Vec::new(),
            quiet_age: u32::MAX,
            receipts: 0,
            senders: Vec::new(),
        }
    }
}

impl StopState {
    /// Records the estimate after a push; true when the rank may stop.
    pub fn after_push(&mut self, rule: &StopRule, estimate: &[f64]) -> bool {
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
            self.unsettle(rule);
        } else {
            self.aged();
        }
        // A push does not change the pusher's own estimate (it sends mass and weight in
        // proportion); only what arrives does. A rank that heard nothing for a while has not
        // seen the rest of the network settle, so it also needs as many receipts as quiet pushes.
        self.quiet_age >= rule.hold_rounds().saturating_add(rule.quiet_rounds)
            && self.receipts >= rule.quiet_rounds
            && self.senders.len() >= rule.senders as usize
    }

    /// Something changed the mass (an unsettled push, a failure notice): the age starts again
    /// (a hold's news, which is younger, stays), and so do the receipts.
    pub fn unsettle(&mut self, rule: &StopRule) {
        self.quiet_age = self.quiet_age.min(rule.hold_rounds());
        self.receipts = 0;
        self.senders.clear();
    }

    /// Mass may be lost where the rule cannot see it (see the module's Holds).
    pub fn hold(&mut self) {
        self.quiet_age = 0;
        self.receipts = 0;
        self.senders.clear();
    }

    /// One more push without news (a finished rank's answer counts too).
    pub fn aged(&mut self) {
        self.quiet_age = self.quiet_age.saturating_add(1);
    }

    /// A message from `from` carried the sender's quiet age.
    pub fn heard(&mut self, age: u32, from: Rank) {
        self.quiet_age = self.quiet_age.min(age);
        self.receipts = self.receipts.saturating_add(1);
        if self.senders.len() < MAX_SENDERS && !self.senders.contains(&from) {
            self.senders.push(from);
        }
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
            senders: 0,
        };
        let h = rule.hold_rounds();
        assert_eq!(h, 12);
        let mut state = StopState::default();
        assert!(
            !state.after_push(&rule, &[1.0]),
            "the first push is unsettled"
        );
        assert_eq!(state.quiet_age, h);
        assert!(!state.after_push(&rule, &[1.0]));
        assert!(!state.after_push(&rule, &[1.0]));
        assert_eq!(state.quiet_age, h + 2);
        // News of something unsettled one push ago at the sender.
        state.heard(h + 1, Rank(1));
        assert_eq!(state.quiet_age, h + 1);
        assert!(!state.after_push(&rule, &[1.0]));
        assert!(
            !state.after_push(&rule, &[1.0]),
            "age 3 but one receipt since it settled"
        );
        for _ in 0..2 {
            state.heard(h + 50, Rank(1));
        }
        assert_eq!(state.quiet_age, h + 3, "older news changes nothing");
        assert!(state.after_push(&rule, &[1.0]));
        let mut moving = StopState::default();
        for t in 1..50 {
            assert!(!moving.after_push(&rule, &[1.0 + 1e-3 * f64::from(t % 2)]));
        }
        let mut nan = StopState::default();
        nan.after_push(&rule, &[1.0]);
        nan.after_push(&rule, &[1.0]);
        nan.after_push(&rule, &[f64::NAN]);
        assert_eq!(nan.quiet_age, h, "a NaN estimate is never settled");
    }

    #[test]
    fn a_permutation_schedule_waits_for_news_from_distinct_ranks() {
        let period = crate::time::Duration(12);
        let four = Topology::fully_connected(4).unwrap();
        let rule =
            StopRule::for_target(1e-2, &four, Schedule::Permutation { period }, Rule::PushSum);
        assert_eq!((rule.quiet_rounds, rule.senders), (3, 3));
        // Two ranks that only hear each other (their pair's partner) never stop.
        let mut paired = StopState::default();
        paired.after_push(&rule, &[1.0]);
        for _ in 0..50 {
            paired.heard(u32::MAX, Rank(3));
            assert!(!paired.after_push(&rule, &[1.0]));
        }
        // News from the other two lets it stop, unless it changes the estimate.
        paired.heard(u32::MAX, Rank(0));
        assert!(!paired.after_push(&rule, &[1.0]));
        paired.heard(u32::MAX, Rank(2));
        assert!(paired.after_push(&rule, &[1.0]));
        let mut moved = StopState::default();
        moved.after_push(&rule, &[1.0]);
        for from in [3, 0, 2] {
            moved.heard(u32::MAX, Rank(from));
        }
        assert!(
            !moved.after_push(&rule, &[1.5]),
            "an unsettled push forgets its senders"
        );
        assert!(!moved.after_push(&rule, &[1.5]));
        // Asynchronous schedules keep their own rule.
        let hypercube = Topology::hypercube(4).unwrap();
        let rule =
            StopRule::for_target(1e-2, &hypercube, Schedule::Async { period }, Rule::PushSum);
        assert_eq!(rule.senders, 0);
    }

    #[test]
    fn a_hold_outlasts_a_change_by_its_rounds_and_a_change_does_not_cut_it_short() {
        let rule = StopRule {
            threshold: 1e-6,
            quiet_rounds: 3,
            senders: 0,
        };
        let quiet_pushes = |state: &mut StopState| {
            (1..=100)
                .find(|_| {
                    state.heard(u32::MAX, Rank(1));
                    state.after_push(&rule, &[1.0])
                })
                .unwrap()
        };
        let mut changed = StopState::default();
        changed.after_push(&rule, &[1.0]);
        changed.unsettle(&rule);
        assert_eq!(quiet_pushes(&mut changed), 3);
        let mut held = StopState::default();
        held.after_push(&rule, &[1.0]);
        held.hold();
        assert_eq!(quiet_pushes(&mut held), 15);
        // A change right after a hold leaves the hold's age, which is the younger news.
        let mut both = StopState::default();
        both.after_push(&rule, &[1.0]);
        both.hold();
        both.after_push(&rule, &[2.0]);
        assert_eq!(both.quiet_age, 0);
        // A neighbour's hold arrives as its age.
        let mut far = StopState::default();
        far.after_push(&rule, &[1.0]);
        far.heard(2, Rank(1));
        assert_eq!(quiet_pushes(&mut far), 13);
    }
}
