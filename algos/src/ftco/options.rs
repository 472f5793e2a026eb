//! A job's FTCO choices, the same at every rank: tree shape and roots, detection timeout,
//! service-distance function. [`FtcoOptions::config`] turns them into one rank's
//! [`FtcoConfig`].

use super::{Collective, FtcoConfig, LogP, ServiceDistance};
use crate::rank::Rank;
use crate::time::Duration;
use crate::topology::{Tree, TreeShape};
use crate::values::ReduceOp;
use crate::wire::OpId;

/// What every rank of an FTCO job uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FtcoOptions {
    /// Tree shape and radix.
    pub shape: TreeShape,
    /// Fully connected roots (1 = single-root tree).
    pub roots: u32,
    /// Base of f_timeout, in the run's time unit (LogP steps in the simulator, nanoseconds on
    /// real ranks).
    pub detect_timeout: Duration,
    /// Every per-message timeout is the detection timeout (see [`FtcoConfig::fixed_timeout`]).
    pub fixed_timeout: bool,
    /// The costs f_ETA assumes, in the same unit.
    pub costs: LogP,
    /// Multiplier on the fault-free f_ETA before a waiting rank probes.
    pub eta_slack: u32,
    /// Service-distance function.
    pub service: ServiceDistance,
    /// 004's step model (see [`FtcoConfig::step_model`]); the simulator only.
    pub step_model: bool,
}

impl Default for FtcoOptions {
    /// The paper's LogP model (L = 10, o = 1 steps): a binomial single-root tree, a base
    /// timeout of 4L, RSD with r = 1/2.
    fn default() -> FtcoOptions {
        FtcoOptions {
            shape: TreeShape::BINOMIAL,
            roots: 1,
            detect_timeout: Duration(40),
            fixed_timeout: false,
            costs: LogP {
                latency: Duration(10),
                overhead: Duration(1),
                per_mib: Duration(0),
            },
            eta_slack: 2,
            service: ServiceDistance::Rsd { ratio: 0.5 },
            step_model: false,
        }
    }
}

impl FtcoOptions {
    /// One rank's configuration over `n` ranks.
    #[allow(clippy::too_many_arguments)]
    pub fn config(
        &self,
        rank: Rank,
        n: u32,
        collective: Collective,
        op: ReduceOp,
        op_id: OpId,
        known_dead: Vec<Rank>,
        seed: u64,
    ) -> Result<FtcoConfig, String> {
        let tree = Tree::new(self.shape, n, self.roots.min(n).max(1))
            .map_err(|e| format!("FTCO tree: {e}"))?;
        let mut config = FtcoConfig::new(rank, tree, collective);
        config.op = op;
        config.op_id = op_id;
        config.costs = self.costs;
        config.eta_slack = self.eta_slack;
        config.detect_timeout = self.detect_timeout;
        config.fixed_timeout = self.fixed_timeout;
        config.service = self.service;
        config.known_dead = known_dead;
        config.seed = seed;
        config.step_model = self.step_model;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_clamps_roots_to_the_group() {
        let options = FtcoOptions {
            roots: 8,
            ..FtcoOptions::default()
        };
        let config = options
            .config(
                Rank(0),
                3,
                Collective::Allreduce,
                ReduceOp::Sum,
                OpId(1),
                Vec::new(),
                7,
            )
            .unwrap();
        assert_eq!(config.tree.roots(), 3);
        assert_eq!(config.seed, 7);
    }
}
