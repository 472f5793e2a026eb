//! Jobs: which algorithm of the registry ([`Algorithm`]) to run over which ranks, with which
//! typed options, and the per-family constructors of its state machines.

use ftcoll_algos::chain::{Chain, ChainConfig, ChainMode};
use ftcoll_algos::corrected::{
    AllreduceConfig, BcastConfig, CorrectedAllreduce, CorrectedBcast, CorrectedReduce, Correction,
    FailureInfo, ReduceConfig,
};
use ftcoll_algos::direct::{DirectAllreduce, DirectConfig};
use ftcoll_algos::era::{AgreedValue, EraConfig, EraRun, EraRunConfig, EraTopology};
use ftcoll_algos::ftco::{Collective, Ftco, FtcoOptions};
use ftcoll_algos::ftring::{CommitRule, CorrectedAttempt, FtRing, FtRingConfig};
use ftcoll_algos::gossip::SumForm;
use ftcoll_algos::rank::RankSet;
use ftcoll_algos::rdb::{RdbConfig, RdbShape, RecursiveDoubling};
use ftcoll_algos::rhd::{HalvingDoubling, RhdConfig};
use ftcoll_algos::ring::{RingAllreduce, RingConfig, RingMode};
use ftcoll_algos::topology::{Topology, TopologyError};
use ftcoll_algos::{OpId, Protocol, Rank, ReduceOp};

pub use ftcoll_algos::registry::{Algorithm, Kind};

mod gossip;

pub use gossip::{default_gossip_eps, GossipOptions, DEFAULT_GOSSIP_STEPS};

use crate::sim::{
    generate_inputs, DetectorModel, InputKind, OracleStop, OracleWatch, SimConfig, SimError,
    SimReport, Simulation,
};

/// A job that cannot run. Messages name the [`JobSpec`] fields; the launcher words them as flags.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    /// N = 0.
    #[error("a job needs at least one rank (n >= 1)")]
    NoRanks,
    /// A bad topology.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A topology the algorithm cannot use.
    #[error("{algo} exchanges along hypercube edges and cannot run on a {topology}; use the hypercube or the fully connected topology")]
    TopologyUnsupported {
        /// The algorithm.
        algo: Algorithm,
        /// The topology name.
        topology: &'static str,
    },
    /// An operator the algorithm cannot compute.
    #[error("{algo} cannot compute '{op}'")]
    OpUnsupported {
        /// The algorithm.
        algo: Algorithm,
        /// The operator name.
        op: &'static str,
    },
    /// Too few ranks for the tolerance.
    #[error("{algo} tolerating {tolerate} failures needs at least {} ranks (the root and f + 1 subtrees); tolerate fewer or add ranks", tolerate + 2)]
    TooFewRanks {
        /// The algorithm.
        algo: Algorithm,
        /// f.
        tolerate: u32,
    },
    /// A tree algorithm on a sparse topology.
    #[error("{algo} sends along its own overlay (tree, ring) over a fully connected network; it needs the fully connected topology")]
    NeedsFullTopology {
        /// The algorithm.
        algo: Algorithm,
    },
    /// An FTCO job whose tree or options do not fit.
    #[error("{algo}: {why}")]
    Ftco {
        /// The algorithm.
        algo: Algorithm,
        /// What is wrong.
        why: String,
    },
    /// An agreement job with no agreements.
    #[error("agreements must be at least 1")]
    NoAgreements,
    /// Round-based gossip on a graph.
    #[error("{algo} draws partners from permutations of all ranks; it needs the fully connected topology")]
    RoundBasedOnGraph {
        /// The algorithm.
        algo: Algorithm,
    },
    /// Gossip options asked of an algorithm that does not gossip.
    #[error("{algo} is not a gossip algorithm")]
    NotGossip {
        /// The algorithm.
        algo: Algorithm,
    },
    /// A checksum threshold that is not a positive number.
    #[error("tau must be a positive number, got {0}")]
    BadTau(f64),
    /// A push budget of zero.
    #[error("steps must be at least 1")]
    NoSteps,
    /// Push-Sum's own sum form asked of an average.
    #[error("the rank-zero-weight sum form applies to a sum only")]
    SumFormWithoutSum,
    /// An accuracy target outside (0, 1).
    #[error("eps must lie in (0, 1), got {0}")]
    BadEps(f64),
    /// The simulator refused the set-up.
    #[error(transparent)]
    Sim(#[from] SimError),
}

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// The algorithm.
    pub algo: Algorithm,
    /// Number of ranks.
    pub n: u32,
    /// The reduction operator.
    pub op: ReduceOp,
    /// How inputs are drawn.
    pub input: InputKind,
    /// Elements per rank.
    pub input_len: usize,
    /// Accuracy target of approximate algorithms (the simulator's oracle stop).
    pub eps: Option<f64>,
    /// Step budget of approximate algorithms.
    pub steps: Option<u32>,
    /// The network topology, if the user chose one.
    pub topology: Option<Topology>,
    /// Failures the corrected-tree algorithms tolerate (f).
    pub tolerate: u32,
    /// How the corrected reduce reports failures.
    pub failure_info: FailureInfo,
    /// The corrected broadcast's correction phase.
    pub correction: Correction,
    /// The agreement tree of `era-agree`.
    pub era_topology: EraTopology,
    /// Tree, timeout and service distance of the ftco-* algorithms.
    pub ftco: FtcoOptions,
    /// Blocking agreements in a row (`era-agree`).
    pub agreements: u32,
    /// Schedule, precision and checksum threshold of the gossip algorithms.
    pub gossip: GossipOptions,
    /// Elements a frame of `ft-ring` carries (a segment is this many per member of the ring);
    /// `None`: the whole vector in one segment.
    pub frame_elems: Option<usize>,
}

impl JobSpec {
    /// A job with defaults: sum of one uniform input per rank.
    pub fn new(algo: Algorithm, n: u32) -> JobSpec {
        JobSpec {
            algo,
            n,
            op: ReduceOp::Sum,
            input: InputKind::Uniform,
            input_len: 1,
            eps: None,
            steps: None,
            topology: None,
            tolerate: 1,
            failure_info: FailureInfo::default(),
            correction: Correction::Checked,
            era_topology: EraTopology::default(),
            ftco: FtcoOptions::default(),
            agreements: 1,
            gossip: GossipOptions::default(),
            frame_elems: None,
        }
    }

    /// Checks everything that does not need a run.
    pub fn validate(&self) -> Result<(), JobError> {
        if self.n == 0 {
            return Err(JobError::NoRanks);
        }
        if let Some(eps) = self.eps {
            if !(eps > 0.0 && eps < 1.0) {
                return Err(JobError::BadEps(eps));
            }
        }
        let algo = self.algo;
        if !algo.descriptor().operators.admits(self.op) {
            return Err(JobError::OpUnsupported {
                algo,
                op: self.op.name(),
            });
        }
        let fully_connected = matches!(self.topology, None | Some(Topology::FullyConnected { .. }));
        match algo.kind() {
            Kind::RecursiveDoubling { .. }
            | Kind::Direct
            | Kind::Ring
            | Kind::HalvingDoubling
            | Kind::FtRing
            | Kind::Chain(_) => match self.topology {
                None | Some(Topology::FullyConnected { .. }) | Some(Topology::Hypercube { .. }) => {
                }
                Some(other) => {
                    return Err(JobError::TopologyUnsupported {
                        algo,
                        topology: other.name(),
                    })
                }
            },
            Kind::FtCorrected => {
                if !fully_connected {
                    return Err(JobError::NeedsFullTopology { algo });
                }
            }
            Kind::Corrected(collective) => {
                if collective != Collective::Bcast && self.n < self.tolerate.saturating_add(2) {
                    return Err(JobError::TooFewRanks {
                        algo,
                        tolerate: self.tolerate,
                    });
                }
                if !fully_connected {
                    return Err(JobError::NeedsFullTopology { algo });
                }
            }
            Kind::Ftco(_) => {
                if !fully_connected {
                    return Err(JobError::NeedsFullTopology { algo });
                }
            }
            Kind::Gossip { round_based, .. } => {
                if round_based && !fully_connected {
                    return Err(JobError::RoundBasedOnGraph { algo });
                }
                if let Some(tau) = self.gossip.tau {
                    if !(tau > 0.0 && tau.is_finite()) {
                        return Err(JobError::BadTau(tau));
                    }
                }
                if self.steps == Some(0) {
                    return Err(JobError::NoSteps);
                }
                if self.gossip.sum_form == SumForm::RankZeroWeight && self.op != ReduceOp::Sum {
                    return Err(JobError::SumFormWithoutSum);
                }
            }
            Kind::Agreement => {
                if self.agreements == 0 {
                    return Err(JobError::NoAgreements);
                }
            }
        }
        Ok(())
    }

    /// Rank `rank`'s contribution to an agreement: its bit in a bitmap of all ranks under OR, the
    /// complement under AND, its id under min and max, so that the result names who contributed.
    pub fn era_words(&self, rank: u32) -> Vec<u64> {
        let words = self.n.div_ceil(64) as usize;
        let bit = |w: usize| {
            if w == (rank / 64) as usize {
                1u64 << (rank % 64)
            } else {
                0
            }
        };
        match self.op {
            ReduceOp::BitOr => (0..words).map(bit).collect(),
            ReduceOp::BitAnd => (0..words).map(|w| !bit(w)).collect(),
            _ => vec![u64::from(rank)],
        }
    }

    /// The failure-free decision of [`JobSpec::era_words`].
    pub fn era_expected(&self) -> Vec<u64> {
        let none = RankSet::default();
        let mut acc = AgreedValue::contribution(self.era_words(0), &none, &none, 0);
        for r in 1..self.n {
            let other = AgreedValue::contribution(self.era_words(r), &none, &none, 0);
            // Contributions of one job have one length, so combining cannot fail.
            let _ = acc.combine(self.op, &other);
        }
        acc.words
    }

    /// Rank `rank`'s sequence of agreements.
    pub fn era_run(&self, rank: Rank) -> EraRun {
        EraRun::new(EraRunConfig {
            me: rank.0,
            n: self.n,
            era: EraConfig {
                topology: self.era_topology,
                ..EraConfig::default()
            },
            agreements: self.agreements,
            op: self.op,
            words: self.era_words(rank.0),
            rebalance: true,
        })
    }

    /// Rank `rank`'s direct-exchange allreduce.
    pub fn direct(&self, rank: Rank, op_id: OpId) -> DirectAllreduce {
        DirectAllreduce::new(DirectConfig {
            rank,
            size: self.n,
            op: self.op,
            op_id,
        })
    }

    /// Rank `rank`'s ring allreduce.
    pub fn ring(&self, rank: Rank, op_id: OpId) -> RingAllreduce {
        RingAllreduce::new(RingConfig {
            rank,
            size: self.n,
            op: self.op,
            op_id,
            mode: RingMode::Allreduce,
        })
    }

    /// Rank `rank`'s recursive halving and doubling allreduce.
    pub fn rhd(&self, rank: Rank, op_id: OpId) -> HalvingDoubling {
        HalvingDoubling::new(RhdConfig {
            rank,
            size: self.n,
            op: self.op,
            op_id,
        })
    }

    /// Rank `rank`'s fault-tolerant ring allreduce, as the simulator runs it: frames of
    /// `frame_elems`, a window of 4 segments, and a returned rank serving the agreement for
    /// the rest of the run.
    pub fn ft_ring(&self, rank: Rank, op_id: OpId) -> FtRing {
        FtRing::new(self.ft_ring_config(rank, op_id))
    }

    /// Rank `rank`'s fault-tolerant allreduce in corrected trees, each attempt's segments
    /// tolerating `tolerate` failures; otherwise as [`JobSpec::ft_ring`].
    pub fn ft_corrected(&self, rank: Rank, op_id: OpId) -> FtRing<CorrectedAttempt> {
        let config = self.ft_ring_config(rank, op_id);
        FtRing::corrected(config, self.tolerate, self.correction)
    }

    fn ft_ring_config(&self, rank: Rank, op_id: OpId) -> FtRingConfig {
        FtRingConfig {
            rank,
            size: self.n,
            op: self.op,
            op_id,
            frame_elems: self.frame_elems.unwrap_or(usize::MAX),
            window: 4,
            era: EraConfig {
                topology: self.era_topology,
                ..EraConfig::default()
            },
            linger: ftcoll_algos::Duration(u64::MAX / 4),
            commit: CommitRule::Agreed,
        }
    }

    /// Rank `rank`'s chain broadcast from or reduce to rank 0.
    pub fn chain(&self, rank: Rank, op_id: OpId, mode: ChainMode) -> Chain {
        Chain::new(ChainConfig {
            rank,
            size: self.n,
            root: Rank(0),
            op: self.op,
            op_id,
            mode,
        })
    }

    /// Rank `rank`'s corrected reduce to rank 0.
    pub fn corrected_reduce(&self, rank: Rank, op_id: OpId) -> CorrectedReduce {
        let mut config = ReduceConfig::new(rank, self.n, self.op, op_id, self.tolerate, Rank(0));
        config.info = self.failure_info;
        CorrectedReduce::new(config)
    }

    /// Rank `rank`'s corrected broadcast from rank 0.
    pub fn corrected_bcast(&self, rank: Rank, op_id: OpId) -> CorrectedBcast {
        let mut config = BcastConfig::new(rank, self.n, op_id, Rank(0), self.tolerate);
        config.correction = self.correction;
        CorrectedBcast::new(config)
    }

    /// Rank `rank`'s instance of an `ftco-*` algorithm. No rank is known dead at the start:
    /// ranks killed at time 0 are 004's inactive nodes, which FTCO finds by its own timeouts
    /// like any other failure. `seed` drives the RSD draws (the run's seed).
    pub fn ftco(&self, rank: Rank, op_id: OpId, seed: u64) -> Result<Ftco, JobError> {
        let fail = |why: String| JobError::Ftco {
            algo: self.algo,
            why,
        };
        let collective = self
            .algo
            .ftco_collective()
            .ok_or_else(|| fail("not an ftco-* algorithm".into()))?;
        let config = self
            .ftco
            .config(rank, self.n, collective, self.op, op_id, Vec::new(), seed)
            .map_err(fail)?;
        Ok(Ftco::new(config))
    }

    /// Every rank's instance of an `ftco-*` algorithm, for a run with seed `seed`.
    pub fn ftco_ranks(&self, op_id: OpId, seed: u64) -> Result<Vec<Ftco>, JobError> {
        (0..self.n)
            .map(|r| self.ftco(Rank(r), op_id, seed))
            .collect()
    }

    /// The simulator set-up this job runs under: `config` plus what the algorithm needs.
    /// ARDB without `--steps` gets the oracle stop. The `ftco-*` algorithms run without the
    /// simulator's failure detector ([`DetectorModel::Silent`], whatever `--detector` says):
    /// in 004's model a crash is silence, which FTCO detects by its own ACK timeouts, so it is
    /// never sent [`ftcoll_algos::Input::PeerFailed`].
    pub fn sim_config(&self, mut config: SimConfig) -> SimConfig {
        if self.algo == Algorithm::Ardb && self.steps.is_none() {
            config.oracle_stop = Some(OracleStop {
                eps: self.eps.unwrap_or(DEFAULT_ARDB_EPS),
                watch: OracleWatch::Rank(RdbShape::new(self.n).root()),
                max_round: None,
            });
        }
        if self.algo.ftco_collective().is_some() {
            config.detector = DetectorModel::Silent;
            config.cost.protocol_steps = self.ftco.step_model;
        }
        if self.algo.gossip_rule().is_some()
            && config.oracle_stop.is_none()
            && !self.gossip.stop_rule
        {
            config.oracle_stop = Some(OracleStop {
                eps: self.gossip_eps(),
                watch: OracleWatch::AllLive,
                max_round: Some(self.gossip_steps()),
            });
        }
        config
    }

    /// Every rank's recursive doubling, exact or approximate (ARDB, with its step budget).
    pub fn rdb_ranks(&self, op_id: OpId) -> Vec<RecursiveDoubling> {
        let approximate = matches!(
            self.algo.kind(),
            Kind::RecursiveDoubling { approximate: true }
        );
        (0..self.n)
            .map(|r| {
                let config = if approximate {
                    RdbConfig::approximate(Rank(r), self.n, self.op, op_id, self.steps)
                } else {
                    RdbConfig::exact(Rank(r), self.n, self.op, op_id)
                };
                RecursiveDoubling::new(config)
            })
            .collect()
    }

    /// What the simulator must compare results with when it is not the reduction of the
    /// inputs: rank 0's input for a broadcast, the failure-free decision for an agreement.
    pub fn expected_override(&self, inputs: &[f64]) -> Option<Vec<f64>> {
        match self.algo.kind() {
            Kind::Corrected(Collective::Bcast)
            | Kind::Ftco(Collective::Bcast)
            | Kind::Chain(ChainMode::Bcast) => {
                Some(inputs[..self.input_len.min(inputs.len())].to_vec())
            }
            Kind::Agreement => Some(self.era_expected().iter().map(|w| *w as f64).collect()),
            Kind::RecursiveDoubling { .. }
            | Kind::Direct
            | Kind::Ring
            | Kind::HalvingDoubling
            | Kind::FtRing
            | Kind::FtCorrected
            | Kind::Chain(ChainMode::Reduce)
            | Kind::Gossip { .. }
            | Kind::Corrected(_)
            | Kind::Ftco(_) => None,
        }
    }

    /// Rank `rank`'s corrected allreduce.
    pub fn corrected_allreduce(&self, rank: Rank, op_id: OpId) -> CorrectedAllreduce {
        let mut config = AllreduceConfig::new(rank, self.n, self.op, op_id, self.tolerate);
        config.info = self.failure_info;
        config.correction = self.correction;
        CorrectedAllreduce::new(config)
    }
}

/// Runs `spec` in the simulator with `config`, adapted by [`JobSpec::sim_config`].
pub fn simulate(spec: &JobSpec, config: SimConfig) -> Result<SimReport, JobError> {
    spec.validate()?;
    let config = spec.sim_config(config);
    let inputs = generate_inputs(spec.input, spec.n, spec.input_len, config.seed);
    let op_id = OpId(1);
    match spec.algo.kind() {
        Kind::RecursiveDoubling { .. } => run(config, spec.rdb_ranks(op_id), inputs, spec),
        Kind::Direct => {
            let ranks = (0..spec.n).map(|r| spec.direct(Rank(r), op_id)).collect();
            run(config, ranks, inputs, spec)
        }
        Kind::Ring => {
            let ranks = (0..spec.n).map(|r| spec.ring(Rank(r), op_id)).collect();
            run(config, ranks, inputs, spec)
        }
        Kind::HalvingDoubling => {
            let ranks = (0..spec.n).map(|r| spec.rhd(Rank(r), op_id)).collect();
            run(config, ranks, inputs, spec)
        }
        Kind::FtRing => {
            let ranks = (0..spec.n).map(|r| spec.ft_ring(Rank(r), op_id)).collect();
            run(config, ranks, inputs, spec)
        }
        Kind::FtCorrected => {
            let ranks = (0..spec.n)
                .map(|r| spec.ft_corrected(Rank(r), op_id))
                .collect();
            run(config, ranks, inputs, spec)
        }
        Kind::Chain(mode) => {
            let ranks = (0..spec.n)
                .map(|r| spec.chain(Rank(r), op_id, mode))
                .collect();
            run(config, ranks, inputs, spec)
        }
        Kind::Corrected(Collective::Reduce) => {
            let ranks = (0..spec.n)
                .map(|r| spec.corrected_reduce(Rank(r), op_id))
                .collect();
            run(config, ranks, inputs, spec)
        }
        Kind::Corrected(Collective::Bcast) => {
            let ranks = (0..spec.n)
                .map(|r| spec.corrected_bcast(Rank(r), op_id))
                .collect();
            run(config, ranks, inputs, spec)
        }
        Kind::Corrected(Collective::Allreduce) => {
            let ranks = (0..spec.n)
                .map(|r| spec.corrected_allreduce(Rank(r), op_id))
                .collect();
            run(config, ranks, inputs, spec)
        }
        Kind::Ftco(_) => {
            let ranks = spec.ftco_ranks(op_id, config.seed)?;
            run(config, ranks, inputs, spec)
        }
        Kind::Gossip { .. } => {
            let period = config.cost.exchange_round_steps().max(1);
            if spec.gossip_single() {
                let ranks = spec.gossip_ranks::<f32>(op_id, config.seed, period)?;
                run(config, ranks, inputs, spec)
            } else {
                let ranks = spec.gossip_ranks::<f64>(op_id, config.seed, period)?;
                run(config, ranks, inputs, spec)
            }
        }
        Kind::Agreement => {
            let ranks = (0..spec.n).map(|r| spec.era_run(Rank(r))).collect();
            run(config, ranks, inputs, spec)
        }
    }
}

/// The console's simulated mode: `spec` set up in the simulator on `inputs`, not yet run, with
/// protocol instances behind one trait object type so that any algorithm can be stepped and
/// inspected the same way.
pub fn stepped_simulation(
    spec: &JobSpec,
    config: SimConfig,
    inputs: Vec<f64>,
    op_id: OpId,
) -> Result<Simulation<Box<dyn Protocol + Send>>, JobError> {
    spec.validate()?;
    let config = spec.sim_config(config);
    fn boxed<P: Protocol + Send + 'static>(ranks: Vec<P>) -> Vec<Box<dyn Protocol + Send>> {
        ranks
            .into_iter()
            .map(|p| Box::new(p) as Box<dyn Protocol + Send>)
            .collect()
    }
    let ranks = match spec.algo.kind() {
        Kind::RecursiveDoubling { .. } => boxed(spec.rdb_ranks(op_id)),
        Kind::Direct => boxed((0..spec.n).map(|r| spec.direct(Rank(r), op_id)).collect()),
        Kind::Ring => boxed((0..spec.n).map(|r| spec.ring(Rank(r), op_id)).collect()),
        Kind::HalvingDoubling => boxed((0..spec.n).map(|r| spec.rhd(Rank(r), op_id)).collect()),
        Kind::FtRing => boxed((0..spec.n).map(|r| spec.ft_ring(Rank(r), op_id)).collect()),
        Kind::FtCorrected => boxed(
            (0..spec.n)
                .map(|r| spec.ft_corrected(Rank(r), op_id))
                .collect(),
        ),
        Kind::Chain(mode) => boxed(
            (0..spec.n)
                .map(|r| spec.chain(Rank(r), op_id, mode))
                .collect(),
        ),
        Kind::Corrected(Collective::Reduce) => boxed(
            (0..spec.n)
                .map(|r| spec.corrected_reduce(Rank(r), op_id))
                .collect(),
        ),
        Kind::Corrected(Collective::Bcast) => boxed(
            (0..spec.n)
                .map(|r| spec.corrected_bcast(Rank(r), op_id))
                .collect(),
        ),
        Kind::Corrected(Collective::Allreduce) => boxed(
            (0..spec.n)
                .map(|r| spec.corrected_allreduce(Rank(r), op_id))
                .collect(),
        ),
        Kind::Ftco(_) => boxed(spec.ftco_ranks(op_id, config.seed)?),
        Kind::Gossip { .. } => {
            let period = config.cost.exchange_round_steps().max(1);
            if spec.gossip_single() {
                boxed(spec.gossip_ranks::<f32>(op_id, config.seed, period)?)
            } else {
                boxed(spec.gossip_ranks::<f64>(op_id, config.seed, period)?)
            }
        }
        Kind::Agreement => boxed((0..spec.n).map(|r| spec.era_run(Rank(r))).collect()),
    };
    let expected = spec.expected_override(&inputs);
    let mut sim = Simulation::new(config, ranks, inputs, spec.input_len, spec.op)?;
    if let Some(expected) = expected {
        sim.set_expected(expected);
    }
    Ok(sim)
}

/// ARDB's accuracy target when neither --eps nor --steps is given.
pub const DEFAULT_ARDB_EPS: f64 = 1e-3;

fn run<P: Protocol>(
    config: SimConfig,
    ranks: Vec<P>,
    inputs: Vec<f64>,
    spec: &JobSpec,
) -> Result<SimReport, JobError> {
    let expected = spec.expected_override(&inputs);
    let mut sim = Simulation::new(config, ranks, inputs, spec.input_len, spec.op)?;
    if let Some(expected) = expected {
        sim.set_expected(expected);
    }
    Ok(sim.run())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_jobs_are_refused_before_running() {
        assert_eq!(
            JobSpec::new(Algorithm::Rdb, 0).validate(),
            Err(JobError::NoRanks)
        );
        assert!(matches!(JobSpec::new(Algorithm::Pf, 8).validate(), Ok(())));
        let mut torus = JobSpec::new(Algorithm::Rdb, 8);
        torus.topology = Some(Topology::torus3d(8).unwrap());
        assert!(matches!(
            torus.validate(),
            Err(JobError::TopologyUnsupported { .. })
        ));
        let mut eps = JobSpec::new(Algorithm::Ardb, 8);
        eps.eps = Some(2.0);
        assert_eq!(eps.validate(), Err(JobError::BadEps(2.0)));
    }

    #[test]
    fn rdb_job_reports_the_formulas() {
        let mut spec = JobSpec::new(Algorithm::Rdb, 1 << 10);
        spec.input = InputKind::Integers;
        let report = simulate(&spec, SimConfig::default()).unwrap();
        assert_eq!(report.rounds, 10);
        assert_eq!(report.messages, 10 << 10);
        assert_eq!(report.sim_time_steps, 10 * 12);
        assert_eq!(report.max_rel_error, 0.0);
        assert_eq!(report.completed, 1 << 10);
    }

    #[test]
    fn ftco_jobs_run_in_the_simulator_without_failure_notices() {
        for algo in [
            Algorithm::FtcoAllreduce,
            Algorithm::FtcoReduce,
            Algorithm::FtcoBcast,
        ] {
            let mut spec = JobSpec::new(algo, 33);
            spec.input = InputKind::OneHot;
            spec.input_len = 33;
            let config = spec.sim_config(SimConfig::default());
            assert_eq!(config.detector, DetectorModel::Silent);
            let report = simulate(&spec, SimConfig::default()).unwrap();
            assert_eq!(report.completed, 33, "{algo}");
            assert_eq!(report.max_rel_error, 0.0, "{algo}");
            assert_eq!(report.notices, 0);
            assert!(report.completion_steps > 0);
            let mut bad = spec.clone();
            bad.op = ReduceOp::BitOr;
            let refused = bad.validate();
            if algo == Algorithm::FtcoBcast {
                assert_eq!(refused, Ok(()), "a broadcast ignores the operator");
            } else {
                assert!(matches!(refused, Err(JobError::OpUnsupported { .. })));
            }
            bad = spec.clone();
            bad.topology = Some(Topology::torus3d(33).unwrap());
            assert_eq!(bad.validate(), Err(JobError::NeedsFullTopology { algo }));
        }
    }

    #[test]
    fn ardb_stops_at_the_oracle() {
        let mut spec = JobSpec::new(Algorithm::Ardb, 1 << 12);
        spec.eps = Some(1e-2);
        let report = simulate(&spec, SimConfig::default()).unwrap();
        let round = report.oracle_stop_round.unwrap();
        assert!(round < 12, "stopped at {round}");
        assert!(report.messages < 12 << 12);
    }
}
