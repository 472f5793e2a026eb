//! Jobs: which algorithm to run over which ranks, and the table of algorithm names the launcher,
//! the console and the reports share.

use std::fmt;

use ftcoll_algos::corrected::{
    AllreduceConfig, BcastConfig, CorrectedAllreduce, CorrectedBcast, CorrectedReduce, Correction,
    FailureInfo, ReduceConfig,
};
use ftcoll_algos::direct::{DirectAllreduce, DirectConfig};
use ftcoll_algos::era::{AgreedValue, EraConfig, EraRun, EraRunConfig, EraTopology};
use ftcoll_algos::ftco::{Collective, Ftco, FtcoOptions};
use ftcoll_algos::gossip::{Gossip, GossipConfig, Real, Rule, Schedule, StopRule};
use ftcoll_algos::rank::RankSet;
use ftcoll_algos::rdb::{RdbConfig, RdbShape, RecursiveDoubling};
use ftcoll_algos::topology::{Topology, TopologyError};
use ftcoll_algos::{OpId, Protocol, Rank, ReduceOp};

use crate::sim::{
    generate_inputs, DetectorModel, InputKind, OracleStop, OracleWatch, SimConfig, SimError,
    SimReport, Simulation,
};

/// Every algorithm name ftcoll knows, implemented or not yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Recursive doubling allreduce.
    Rdb,
    /// Approximate recursive doubling.
    Ardb,
    /// Direct-exchange allreduce.
    Direct,
    /// Push-Sum.
    Ps,
    /// Push-Flow.
    Pf,
    /// Push-Flow with local correction.
    Pflc,
    /// Push-Flow with cooperative correction.
    Pfcc,
    /// Push-cancel-flow.
    Pcf,
    /// Round-based Push-Sum with permutations.
    Hps,
    /// Round-based PFLC with permutation cycles.
    Hpflc,
    /// Corrected-tree reduce.
    CorrectedReduce,
    /// Corrected-tree broadcast.
    CorrectedBcast,
    /// Corrected-tree allreduce.
    CorrectedAllreduce,
    /// FTCO broadcast.
    FtcoBcast,
    /// FTCO reduce.
    FtcoReduce,
    /// FTCO allreduce.
    FtcoAllreduce,
    /// Early Returning Agreement.
    EraAgree,
}

impl Algorithm {
    /// All algorithms, in the order of the table.
    pub const ALL: [Algorithm; 17] = [
        Algorithm::Rdb,
        Algorithm::Ardb,
        Algorithm::Direct,
        Algorithm::Ps,
        Algorithm::Pf,
        Algorithm::Pflc,
        Algorithm::Pfcc,
        Algorithm::Pcf,
        Algorithm::Hps,
        Algorithm::Hpflc,
        Algorithm::CorrectedReduce,
        Algorithm::CorrectedBcast,
        Algorithm::CorrectedAllreduce,
        Algorithm::FtcoBcast,
        Algorithm::FtcoReduce,
        Algorithm::FtcoAllreduce,
        Algorithm::EraAgree,
    ];

    /// The `--algo` name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Rdb => "rdb",
            Algorithm::Ardb => "ardb",
            Algorithm::Direct => "direct",
            Algorithm::Ps => "ps",
            Algorithm::Pf => "pf",
            Algorithm::Pflc => "pflc",
            Algorithm::Pfcc => "pfcc",
            Algorithm::Pcf => "pcf",
            Algorithm::Hps => "hps",
            Algorithm::Hpflc => "hpflc",
            Algorithm::CorrectedReduce => "corrected-reduce",
            Algorithm::CorrectedBcast => "corrected-bcast",
            Algorithm::CorrectedAllreduce => "corrected-allreduce",
            Algorithm::FtcoBcast => "ftco-bcast",
            Algorithm::FtcoReduce => "ftco-reduce",
            Algorithm::FtcoAllreduce => "ftco-allreduce",
            Algorithm::EraAgree => "era-agree",
        }
    }

    /// One line on what it is and where it comes from.
    pub fn summary(self) -> &'static str {
        match self {
            Algorithm::Rdb => "recursive doubling allreduce, any N (000 Alg. 1)",
            Algorithm::Ardb => {
                "approximate recursive doubling: stops at eps or after --steps (000 Sec. 6.3)"
            }
            Algorithm::Direct => {
                "direct-exchange allreduce: every rank sends its input to every other (the library's pick for small N)"
            }
            Algorithm::Ps => "Push-Sum gossip (000 Alg. 2)",
            Algorithm::Pf => "Push-Flow gossip (000 Alg. 3)",
            Algorithm::Pflc => "Push-Flow with local correction (000 Alg. 4)",
            Algorithm::Pfcc => "Push-Flow with cooperative correction (000 Alg. 5)",
            Algorithm::Pcf => "push-cancel-flow (003 Fig. 5)",
            Algorithm::Hps => "round-based Push-Sum on random permutations (000 Sec. 6)",
            Algorithm::Hpflc => "round-based PFLC on permutation cycles (000 Sec. 6)",
            Algorithm::CorrectedReduce => "reduce with up-correction (001 Sec. 4)",
            Algorithm::CorrectedBcast => "corrected-tree broadcast (001, PPoPP'19)",
            Algorithm::CorrectedAllreduce => "corrected reduce + corrected broadcast (001 Sec. 5)",
            Algorithm::FtcoBcast => "tree broadcast routing around failures (004)",
            Algorithm::FtcoReduce => "tree reduce routing around failures (004)",
            Algorithm::FtcoAllreduce => "tree allreduce routing around failures (004)",
            Algorithm::EraAgree => "Early Returning Agreement (002)",
        }
    }

    /// Whether this build runs it.
    pub fn implemented(self) -> bool {
        matches!(
            self,
            Algorithm::Rdb
                | Algorithm::Ardb
                | Algorithm::Direct
                | Algorithm::Ps
                | Algorithm::Pf
                | Algorithm::Pflc
                | Algorithm::Pfcc
                | Algorithm::Pcf
                | Algorithm::Hps
                | Algorithm::Hpflc
                | Algorithm::CorrectedReduce
                | Algorithm::CorrectedBcast
                | Algorithm::CorrectedAllreduce
                | Algorithm::FtcoBcast
                | Algorithm::FtcoReduce
                | Algorithm::FtcoAllreduce
                | Algorithm::EraAgree
        )
    }

    /// The collective of an `ftco-*` algorithm (004), which takes `--ftco-tree` and friends.
    pub fn ftco_collective(self) -> Option<Collective> {
        match self {
            Algorithm::FtcoBcast => Some(Collective::Bcast),
            Algorithm::FtcoReduce => Some(Collective::Reduce),
            Algorithm::FtcoAllreduce => Some(Collective::Allreduce),
            _ => None,
        }
    }

    /// The gossip rule of a gossip algorithm (000, 003).
    pub fn gossip_rule(self) -> Option<Rule> {
        Some(match self {
            Algorithm::Ps | Algorithm::Hps => Rule::PushSum,
            Algorithm::Pf => Rule::PushFlow,
            Algorithm::Pflc | Algorithm::Hpflc => Rule::LocalCorrection,
            Algorithm::Pfcc => Rule::CooperativeCorrection,
            Algorithm::Pcf => Rule::PushCancelFlowTolerant,
            _ => return None,
        })
    }

    /// The round-based gossip of 000 Sec. 6, on shared permutations.
    pub fn is_round_based_gossip(self) -> bool {
        matches!(self, Algorithm::Hps | Algorithm::Hpflc)
    }

    /// The corrected-tree family (001), which takes `--tolerate`.
    pub fn is_corrected(self) -> bool {
        matches!(
            self,
            Algorithm::CorrectedReduce | Algorithm::CorrectedBcast | Algorithm::CorrectedAllreduce
        )
    }

    /// Parses an `--algo` name.
    pub fn parse(name: &str) -> Result<Algorithm, JobError> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| JobError::UnknownAlgorithm(name.to_string()))
    }

    /// The algorithm table as text, for `--help` and the README.
    pub fn table() -> String {
        let mut text = String::new();
        for algo in Algorithm::ALL {
            let state = if algo.implemented() { "" } else { " [not yet]" };
            text.push_str(&format!(
                "  {:<20} {}{}\n",
                algo.name(),
                algo.summary(),
                state
            ));
        }
        text
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn implemented_names() -> String {
    Algorithm::ALL
        .into_iter()
        .filter(|a| a.implemented())
        .map(Algorithm::name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A job that cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    /// No such algorithm.
    #[error("unknown algorithm '{0}'; see the table in --help (e.g. --algo rdb)")]
    UnknownAlgorithm(String),
    /// Named in the table but not in this build.
    #[error("algorithm '{algo}' is not implemented yet; this build runs: {available}")]
    NotImplemented {
        /// The algorithm.
        algo: Algorithm,
        /// What is available.
        available: String,
    },
    /// N = 0.
    #[error("a job needs at least one rank; pass -n N with N >= 1")]
    NoRanks,
    /// A bad topology.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A topology the algorithm cannot use.
    #[error("{algo} exchanges along hypercube edges and cannot run on a {topology}; use --topology hypercube or full")]
    TopologyUnsupported {
        /// The algorithm.
        algo: Algorithm,
        /// The topology name.
        topology: &'static str,
    },
    /// An operator the algorithm cannot compute.
    #[error("{algo} cannot compute '{op}'; use sum or avg")]
    OpUnsupported {
        /// The algorithm.
        algo: Algorithm,
        /// The operator name.
        op: &'static str,
    },
    /// Too few ranks for the tolerance.
    #[error("{algo} with --tolerate {tolerate} needs at least {} ranks (the root and f + 1 subtrees); lower --tolerate or raise -n", tolerate + 2)]
    TooFewRanks {
        /// The algorithm.
        algo: Algorithm,
        /// f.
        tolerate: u32,
    },
    /// A tree algorithm on a sparse topology.
    #[error("{algo} sends along its own overlay (tree, ring) over a fully connected network; drop --topology or use --topology full")]
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
    #[error("--agreements must be at least 1")]
    NoAgreements,
    /// A gossip option that does not fit.
    #[error("{algo}: {why}")]
    Gossip {
        /// The algorithm.
        algo: Algorithm,
        /// What is wrong.
        why: String,
    },
    /// An accuracy target outside (0, 1).
    #[error("--eps must lie in (0, 1), got {0}")]
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
}

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
        }
    }

    /// Checks everything that does not need a run.
    pub fn validate(&self) -> Result<(), JobError> {
        if self.n == 0 {
            return Err(JobError::NoRanks);
        }
        if !self.algo.implemented() {
            return Err(JobError::NotImplemented {
                algo: self.algo,
                available: implemented_names(),
            });
        }
        if let Some(eps) = self.eps {
            if !(eps > 0.0 && eps < 1.0) {
                return Err(JobError::BadEps(eps));
            }
        }
        match self.algo {
            Algorithm::Rdb | Algorithm::Ardb | Algorithm::Direct => {
                match self.topology {
                    None
                    | Some(Topology::FullyConnected { .. })
                    | Some(Topology::Hypercube { .. }) => {}
                    Some(other) => {
                        return Err(JobError::TopologyUnsupported {
                            algo: self.algo,
                            topology: other.name(),
                        })
                    }
                }
                if self.algo == Algorithm::Ardb
                    && !matches!(self.op, ReduceOp::Sum | ReduceOp::Average)
                {
                    return Err(JobError::OpUnsupported {
                        algo: self.algo,
                        op: self.op.name(),
                    });
                }
                if !is_arithmetic(self.op) {
                    return Err(JobError::OpUnsupported {
                        algo: self.algo,
                        op: self.op.name(),
                    });
                }
            }
            algo if algo.is_corrected() => {
                if algo != Algorithm::CorrectedBcast && self.n < self.tolerate.saturating_add(2) {
                    return Err(JobError::TooFewRanks {
                        algo,
                        tolerate: self.tolerate,
                    });
                }
                if !matches!(self.topology, None | Some(Topology::FullyConnected { .. })) {
                    return Err(JobError::NeedsFullTopology { algo });
                }
                if algo != Algorithm::CorrectedBcast && !is_arithmetic(self.op) {
                    return Err(JobError::OpUnsupported {
                        algo,
                        op: self.op.name(),
                    });
                }
            }
            algo if algo.ftco_collective().is_some() => {
                if !matches!(self.topology, None | Some(Topology::FullyConnected { .. })) {
                    return Err(JobError::NeedsFullTopology { algo });
                }
                // A broadcast ignores the operator.
                if algo != Algorithm::FtcoBcast && !is_arithmetic(self.op) {
                    return Err(JobError::OpUnsupported {
                        algo,
                        op: self.op.name(),
                    });
                }
            }
            algo if algo.gossip_rule().is_some() => {
                if !matches!(self.op, ReduceOp::Sum | ReduceOp::Average) {
                    return Err(JobError::OpUnsupported {
                        algo,
                        op: self.op.name(),
                    });
                }
                if algo.is_round_based_gossip()
                    && !matches!(self.topology, None | Some(Topology::FullyConnected { .. }))
                {
                    return Err(JobError::Gossip {
                        algo,
                        why: "the round-based gossip draws partners from permutations of all ranks; drop --topology or use --topology full".into(),
                    });
                }
                if let Some(tau) = self.gossip.tau {
                    if !(tau > 0.0 && tau.is_finite()) {
                        return Err(JobError::Gossip {
                            algo,
                            why: format!("--tau must be a positive number, got {tau}"),
                        });
                    }
                }
                if self.steps == Some(0) {
                    return Err(JobError::Gossip {
                        algo,
                        why: "--steps must be at least 1".into(),
                    });
                }
            }
            Algorithm::EraAgree => {
                if ftcoll_algos::era::check_op(self.op).is_err() {
                    return Err(JobError::OpUnsupported {
                        algo: self.algo,
                        op: self.op.name(),
                    });
                }
                if self.agreements == 0 {
                    return Err(JobError::NoAgreements);
                }
            }
            _ => {}
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
            None => {
                return Err(JobError::Gossip {
                    algo: self.algo,
                    why: "not a gossip algorithm".into(),
                })
            }
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

    /// Rank `rank`'s direct-exchange allreduce.
    pub fn direct(&self, rank: Rank, op_id: OpId) -> DirectAllreduce {
        DirectAllreduce::new(DirectConfig {
            rank,
            size: self.n,
            op: self.op,
            op_id,
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
    match spec.algo {
        Algorithm::Rdb => {
            let ranks = (0..spec.n)
                .map(|r| RecursiveDoubling::new(RdbConfig::exact(Rank(r), spec.n, spec.op, op_id)))
                .collect();
            run(config, ranks, inputs, spec)
        }
        Algorithm::Direct => {
            let ranks = (0..spec.n).map(|r| spec.direct(Rank(r), op_id)).collect();
            run(config, ranks, inputs, spec)
        }
        Algorithm::Ardb => {
            let ranks = (0..spec.n)
                .map(|r| {
                    RecursiveDoubling::new(RdbConfig::approximate(
                        Rank(r),
                        spec.n,
                        spec.op,
                        op_id,
                        spec.steps,
                    ))
                })
                .collect();
            run(config, ranks, inputs, spec)
        }
        Algorithm::CorrectedReduce => {
            let ranks = (0..spec.n)
                .map(|r| spec.corrected_reduce(Rank(r), op_id))
                .collect();
            run(config, ranks, inputs, spec)
        }
        Algorithm::CorrectedBcast => {
            let ranks = (0..spec.n)
                .map(|r| spec.corrected_bcast(Rank(r), op_id))
                .collect();
            run_bcast(config, ranks, inputs, spec)
        }
        Algorithm::CorrectedAllreduce => {
            let ranks = (0..spec.n)
                .map(|r| spec.corrected_allreduce(Rank(r), op_id))
                .collect();
            run(config, ranks, inputs, spec)
        }
        Algorithm::FtcoBcast => {
            let ranks = spec.ftco_ranks(op_id, config.seed)?;
            run_bcast(config, ranks, inputs, spec)
        }
        Algorithm::FtcoReduce | Algorithm::FtcoAllreduce => {
            let ranks = spec.ftco_ranks(op_id, config.seed)?;
            run(config, ranks, inputs, spec)
        }
        algo if algo.gossip_rule().is_some() => {
            let period = config.cost.exchange_round_steps().max(1);
            if spec.gossip_single() {
                let ranks = spec.gossip_ranks::<f32>(op_id, config.seed, period)?;
                run(config, ranks, inputs, spec)
            } else {
                let ranks = spec.gossip_ranks::<f64>(op_id, config.seed, period)?;
                run(config, ranks, inputs, spec)
            }
        }
        Algorithm::EraAgree => {
            let ranks = (0..spec.n).map(|r| spec.era_run(Rank(r))).collect();
            let expected = spec.era_expected();
            let mut sim = Simulation::new(config, ranks, inputs, spec.input_len, spec.op)?;
            sim.set_expected(expected.iter().map(|w| *w as f64).collect());
            Ok(sim.run())
        }
        algo => Err(JobError::NotImplemented {
            algo,
            available: implemented_names(),
        }),
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
    let ranks = match spec.algo {
        Algorithm::Rdb => boxed(
            (0..spec.n)
                .map(|r| RecursiveDoubling::new(RdbConfig::exact(Rank(r), spec.n, spec.op, op_id)))
                .collect(),
        ),
        Algorithm::Direct => boxed(
            (0..spec.n)
                .map(|r| spec.direct(Rank(r), op_id))
                .collect(),
        ),
        Algorithm::CorrectedReduce => boxed(
            (0..spec.n)
                .map(|r| spec.corrected_reduce(Rank(r), op_id))
                .collect(),
        ),
        Algorithm::CorrectedBcast => boxed(
            (0..spec.n)
                .map(|r| spec.corrected_bcast(Rank(r), op_id))
                .collect(),
        ),
        Algorithm::CorrectedAllreduce => boxed(
            (0..spec.n)
                .map(|r| spec.corrected_allreduce(Rank(r), op_id))
                .collect(),
        ),
        algo if algo.ftco_collective().is_some() => boxed(spec.ftco_ranks(op_id, config.seed)?),
        algo if algo.gossip_rule().is_some() => {
            let period = config.cost.exchange_round_steps().max(1);
            if spec.gossip_single() {
                boxed(spec.gossip_ranks::<f32>(op_id, config.seed, period)?)
            } else {
                boxed(spec.gossip_ranks::<f64>(op_id, config.seed, period)?)
            }
        }
        algo => {
            return Err(JobError::NotImplemented {
                algo,
                available: "rdb, the corrected-tree, ftco-* and gossip algorithms (the console's simulated mode)".into(),
            })
        }
    };
    let root_input = inputs[..spec.input_len.min(inputs.len())].to_vec();
    let mut sim = Simulation::new(config, ranks, inputs, spec.input_len, spec.op)?;
    if matches!(spec.algo, Algorithm::CorrectedBcast | Algorithm::FtcoBcast) {
        sim.set_expected(root_input);
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
    let mut sim = Simulation::new(config, ranks, inputs, spec.input_len, spec.op)?;
    Ok(sim.run())
}

/// A broadcast from rank 0: every rank should end with rank 0's input.
fn run_bcast<P: Protocol>(
    config: SimConfig,
    ranks: Vec<P>,
    inputs: Vec<f64>,
    spec: &JobSpec,
) -> Result<SimReport, JobError> {
    let root_input = inputs[..spec.input_len].to_vec();
    let mut sim = Simulation::new(config, ranks, inputs, spec.input_len, spec.op)?;
    sim.set_expected(root_input);
    Ok(sim.run())
}

/// Operators on numbers (not bitmaps or rank sets), which the reductions over f64 inputs take.
fn is_arithmetic(op: ReduceOp) -> bool {
    matches!(
        op,
        ReduceOp::Sum | ReduceOp::Average | ReduceOp::Min | ReduceOp::Max
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_an_error() {
        for algo in Algorithm::ALL {
            assert_eq!(Algorithm::parse(algo.name()), Ok(algo));
        }
        assert!(matches!(
            Algorithm::parse("allreduce"),
            Err(JobError::UnknownAlgorithm(_))
        ));
    }

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
