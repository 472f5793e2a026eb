//! The gossip part of a job: its options, and each rank's configuration and instance.

use ftcoll_algos::gossip::{Gossip, GossipConfig, Real, Rule, Schedule, StopRule, SumForm};
use ftcoll_algos::topology::Topology;
use ftcoll_algos::{OpId, Rank};

use super::{Algorithm, JobError, JobSpec};

/// How gossip algorithms push, in what precision, with what checksum threshold.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GossipOptions {
    /// `rounds` for the round-synchronous mode; `None`: asynchronous (000 Sec. 4.4), or the
    /// permutation schedules of `hps` and `hpflc`.
    pub synchronous: bool,
    /// Keep state in single precision (`Some(true)`) or double; `None`: single for `hps` and
    /// `hpflc` as in 000 Sec. 6, double otherwise.
    pub single: Option<bool>,
    /// Checksum threshold; `None`: the precision's default.
    pub tau: Option<f64>,
    /// Time between pushes in simulator steps; `None`: one exchange of the cost model (L + 2o).
    pub period: Option<u64>,
    /// PCF as 003 Fig. 5 prints it (not bit-flip tolerant) instead of the tolerant form.
    pub pcf_as_printed: bool,
    /// Ranks stop by the local stopping rule ([`ftcoll_algos::gossip::stop`]) instead of the
    /// simulator's oracle. Real runs always use the rule.
    pub stop_rule: bool,
    /// How a sum is formed ([`SumForm`]); the launcher allows Push-Sum's own form only in the
    /// simulator and without crashes.
    pub sum_form: SumForm,
}

/// The gossip algorithms' accuracy target when --eps is not given: in double precision 1e-12
/// (000's 1e-14 is below what PF reaches beyond a few dozen ranks, 003 Fig. 3), in single
/// precision 1e-3 (000 Figs. 12-13).
pub fn default_gossip_eps(single: bool) -> f64 {
    if single {
        1e-3
    } else {
        1e-12
    }
}

/// The gossip algorithms' push budget when --steps is not given.
pub const DEFAULT_GOSSIP_STEPS: u32 = 2000;

impl JobSpec {
    /// Whether the gossip state is kept in single precision.
    pub fn gossip_single(&self) -> bool {
        self.gossip
            .single
            .unwrap_or(self.algo.is_round_based_gossip())
    }

    /// The gossip graph: `--topology`, else a hypercube when N is a power of two (000's
    /// experiments), else fully connected.
    pub fn gossip_topology(&self) -> Result<Topology, JobError> {
        if let Some(topology) = self.topology {
            return Ok(topology);
        }
        let topology = if self.n.is_power_of_two() && !self.algo.is_round_based_gossip() {
            Topology::hypercube(self.n)?
        } else {
            Topology::fully_connected(self.n)?
        };
        Ok(topology)
    }

    /// The accuracy target: --eps, or [`default_gossip_eps`].
    pub fn gossip_eps(&self) -> f64 {
        self.eps.unwrap_or(default_gossip_eps(self.gossip_single()))
    }

    /// The push budget: --steps, or [`DEFAULT_GOSSIP_STEPS`].
    pub fn gossip_steps(&self) -> u32 {
        self.steps.unwrap_or(DEFAULT_GOSSIP_STEPS)
    }

    /// Rank `rank`'s gossip configuration; `period` is the time between pushes when
    /// [`GossipOptions::period`] is not set.
    pub fn gossip_config(
        &self,
        rank: Rank,
        op_id: OpId,
        seed: u64,
        period: u64,
    ) -> Result<GossipConfig, JobError> {
        let rule = match self.algo.gossip_rule() {
            Some(Rule::PushCancelFlowTolerant) if self.gossip.pcf_as_printed => {
                Rule::PushCancelFlow
            }
            Some(rule) => rule,
            None => return Err(JobError::NotGossip { algo: self.algo }),
        };
        let period = ftcoll_algos::Duration(self.gossip.period.unwrap_or(period).max(1));
        let schedule = match self.algo {
            Algorithm::Hps => Schedule::Permutation { period },
            Algorithm::Hpflc => Schedule::Cycle { period },
            _ if self.gossip.synchronous => Schedule::Rounds { period },
            _ => Schedule::Async { period },
        };
        let mut config = GossipConfig::new(rank, self.gossip_topology()?, rule, schedule);
        config.op = self.op;
        config.sum_form = self.gossip.sum_form;
        config.op_id = op_id;
        config.seed = seed;
        config.tau = self.gossip.tau;
        config.max_iterations = self.gossip_steps();
        if self.gossip.stop_rule {
            config.stop = Some(StopRule::for_target(
                self.gossip_eps(),
                &config.topology,
                config.schedule,
                config.rule,
            ));
        }
        Ok(config)
    }

    /// Every rank's gossip instance in precision `T`.
    pub fn gossip_ranks<T: Real>(
        &self,
        op_id: OpId,
        seed: u64,
        period: u64,
    ) -> Result<Vec<Gossip<T>>, JobError> {
        (0..self.n)
            .map(|r| {
                Ok(Gossip::new(self.gossip_config(
                    Rank(r),
                    op_id,
                    seed,
                    period,
                )?))
            })
            .collect()
    }
}
