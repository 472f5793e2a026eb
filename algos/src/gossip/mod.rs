//! Gossip reductions (papers 000 and 003): Push-Sum, Push-Flow, PF with local and with
//! cooperative correction, push-cancel-flow, and the round-based HPS and HPFLC.
//!
//! They trade exactness for resilience: each rank's estimate converges to the aggregate through
//! message loss, bit flips and failed links, with no agreement on who failed. One engine,
//! [`Gossip`], runs every algorithm; a [`Rule`] says what a push and a receive do, a
//! [`Schedule`] when a rank pushes and to whom.
//!
//! # Mass and results
//! A rank's mass is its input values plus a weight of 1 (and checksums, see [`mass`]). The
//! estimate is x / w per value: the average. The flow rules' weights can fall to round-off, where
//! x / w means nothing: a rank then reports the last ratio whose weight it trusted (`trust.rs`).
//! A **sum** is the average times the number of live ranks this rank knows of ([`SumForm`] also
//! offers Push-Sum's own, fault-free sum). After a crash,
//! the result is defined as the **survivors' aggregate**: flow-based rules drop every flow to a
//! rank they are told failed, which removes exactly what was exchanged with it, so the
//! survivors' mass is their own inputs; PCF also drops the mass it had cancelled with that rank
//! (see `pcf.rs`). Push-Sum cannot: mass held by or travelling to the failed rank is gone, and
//! its estimate converges to a biased value, which is the baseline that shows why the flow
//! algorithms exist.
//!
//! # Faults
//! Loss and cut links are missing messages; a corrupted message is a frame whose payload bits
//! changed; [`crate::protocol::LocalFault`] flips a bit of a value, the weight, or a flow; a crash
//! reaches a rank as [`crate::Input::PeerFailed`], a permanently failed link as
//! [`crate::Input::LinkFailed`].

pub mod flows;
pub mod mass;
pub mod permutation;
pub mod real;
pub mod stop;

mod engine;
mod help;
mod inspect;
mod pcf;
mod push_flow;
mod push_sum;
mod settle;
#[cfg(test)]
mod tests;
mod trust;

pub use engine::Gossip;
pub use real::Real;
pub use stop::StopRule;

use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::Duration;
use crate::topology::Topology;
use crate::values::ReduceOp;
use crate::wire::OpId;

/// What a push and a receive do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Push-Sum (000 Alg. 2): send half of the value-weight pair, add what arrives.
    PushSum,
    /// Push-Flow (000 Alg. 3, 003 Fig. 1): send half of the estimate as a flow; a received flow
    /// overwrites the local one, negated.
    PushFlow,
    /// PF with local correction (000 Alg. 4): checksums; a corrupted local flow is reset to
    /// zero, a corrupted received flow is dropped.
    LocalCorrection,
    /// PF with cooperative correction (000 Alg. 5): a corrupted local flow is sent to its
    /// neighbour, which answers with its own; only when both are corrupted are they reset.
    CooperativeCorrection,
    /// Push-cancel-flow (003 Fig. 5, with the fixes of lines 11 and 18-19): active and passive
    /// flows, conserved passive flows cancelled into a running sum.
    PushCancelFlow,
    /// PCF in the bit-flip-tolerant form 003 describes in prose: the running sum changes only at
    /// cancellation, and the estimate subtracts the active and passive flows each time.
    PushCancelFlowTolerant,
}

impl Rule {
    /// Whether mass vectors carry checksums.
    pub fn checked(self) -> bool {
        matches!(self, Rule::LocalCorrection | Rule::CooperativeCorrection)
    }

    /// Whether the rule keeps flows (everything but Push-Sum).
    pub fn uses_flows(self) -> bool {
        self != Rule::PushSum
    }

    /// Whether the rule cancels flows (PCF, both forms): its link failures are settled.
    pub fn cancels(self) -> bool {
        matches!(self, Rule::PushCancelFlow | Rule::PushCancelFlowTolerant)
    }
}

/// When a rank pushes, and to whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// Each rank on its own clock (000 Sec. 4.4's asynchronous setting): the gaps between its
    /// pushes are uniform on `[period/2, 3·period/2]`, partners uniform among live neighbours.
    Async {
        /// Mean time between two pushes of one rank.
        period: Duration,
    },
    /// Round-synchronous: every rank pushes at `k·period` to a uniformly random live neighbour.
    Rounds {
        /// Round length.
        period: Duration,
    },
    /// HPS (000 Sec. 6): in round k rank i sends to `π_k(i)` of a random permutation every rank
    /// derives from the shared seed, so each rank receives exactly one message a round.
    Permutation {
        /// Round length.
        period: Duration,
    },
    /// HPFLC (000 Sec. 6.1): like `Permutation`, on one random N-cycle per round, so two ranks
    /// never send to each other in the same round.
    Cycle {
        /// Round length.
        period: Duration,
    },
}

impl Schedule {
    /// The time between pushes.
    pub fn period(self) -> Duration {
        match self {
            Schedule::Async { period }
            | Schedule::Rounds { period }
            | Schedule::Permutation { period }
            | Schedule::Cycle { period } => Duration(period.0.max(1)),
        }
    }

    /// Whether partners come from the shared permutations (any rank may be a partner).
    pub fn is_permutation(self) -> bool {
        matches!(self, Schedule::Permutation { .. } | Schedule::Cycle { .. })
    }
}

/// Message kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum GossipKind {
    /// Push-Sum mass, or a flow (PF family, PCF).
    Push = 1,
    /// A push by a rank that has completed, sent only in answer to a push: it keeps mixing with
    /// ranks still running (a finished rank that only absorbed pushes would drain their mass,
    /// one that ignored them would strand it) but never starts an exchange, so once every rank
    /// has finished the traffic stops. An answer is never answered.
    Finished = 2,
    /// PCF after a link failure: an end's role-change count, relayed to the other end around
    /// the failed link (see `settle`).
    Settle = 3,
}

/// How a gossip sum is formed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SumForm {
    /// Every rank starts with weight 1, so x / w converges to the average, and the sum is the
    /// average times the live rank count: a crash leaves the survivors' sum.
    #[default]
    LiveCount,
    /// Push-Sum's own sum (Kempe et al., as 003 computes sums): rank 0 starts with weight 1 and
    /// every other rank with 0, so x / w converges to the sum itself. A rank's ratio means
    /// nothing until weight has reached it, and the crash of rank 0 takes with it the weight
    /// every estimate divides by: callers allow it only without crashes.
    RankZeroWeight,
}

/// Configuration of one rank's gossip instance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GossipConfig {
    /// This rank.
    pub rank: Rank,
    /// The graph partners are drawn from (ignored by permutation schedules, which use all
    /// ranks).
    pub topology: Topology,
    /// What a push and a receive do.
    pub rule: Rule,
    /// When and to whom.
    pub schedule: Schedule,
    /// [`ReduceOp::Sum`] or [`ReduceOp::Average`].
    pub op: ReduceOp,
    /// How a sum is formed (ignored for the average).
    pub sum_form: SumForm,
    /// The operation id frames carry.
    pub op_id: OpId,
    /// The run's seed: permutations derive from it, and each rank's partner draws from it and
    /// the rank.
    pub seed: u64,
    /// Checksum threshold tau (checked rules): a mass vector is corrupted when some
    /// `|x_k + w - c_k| / max(1, |c_k|)` exceeds it. `None`: the precision's default (1e-11 for
    /// doubles as in 000 Sec. 4.4.1, 1e-4 for singles).
    pub tau: Option<f64>,
    /// Bound on pushes: the rank completes after this many, whatever its accuracy.
    pub max_iterations: u32,
    /// The local stopping rule ([`stop`]); `None`: run until the driver stops the rank (the
    /// simulator's oracle) or `max_iterations`.
    pub stop: Option<StopRule>,
    /// How long a finished rank stays reachable after its last answered push, for ranks still
    /// running ([`crate::Protocol::serve_until`]); zero: not at all (the simulator keeps every
    /// rank).
    pub linger: Duration,
}

impl GossipConfig {
    /// A configuration with the given rule and schedule, averaging, seed 1, default tau and a
    /// bound of 10,000 pushes.
    pub fn new(rank: Rank, topology: Topology, rule: Rule, schedule: Schedule) -> GossipConfig {
        GossipConfig {
            rank,
            topology,
            rule,
            schedule,
            op: ReduceOp::Average,
            sum_form: SumForm::LiveCount,
            op_id: OpId(1),
            seed: 1,
            tau: None,
            max_iterations: 10_000,
            stop: None,
            linger: Duration(0),
        }
    }

    /// The frame id of the algorithm this configuration runs.
    pub fn algo_id(&self) -> Algorithm {
        match (self.rule, self.schedule.is_permutation()) {
            (Rule::PushSum, false) => Algorithm::Ps,
            (Rule::PushSum, true) => Algorithm::Hps,
            (Rule::PushFlow, _) => Algorithm::Pf,
            (Rule::LocalCorrection, false) => Algorithm::Pflc,
            (Rule::LocalCorrection, true) => Algorithm::Hpflc,
            (Rule::CooperativeCorrection, _) => Algorithm::Pfcc,
            (Rule::PushCancelFlow | Rule::PushCancelFlowTolerant, _) => Algorithm::Pcf,
        }
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.topology.size()
    }
}
