//! A fault plan compiled for the simulator: timed faults become events, message faults become
//! lookup tables consulted on every send.

use std::collections::{BTreeMap, BTreeSet};

use ftcoll_algos::protocol::{LocalFault, StateVar};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::{Rank, Time};

use crate::faults::{FaultError, FaultSpec, FlipTarget, KillTime, MessageSelector, Spread};

/// A fault that strikes at a time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TimedFault {
    /// Crash the rank.
    Crash(Rank),
    /// Flip local state.
    FlipState(Rank, LocalFault),
    /// Cut a link.
    Cut(Rank, Rank),
    /// Slow a rank down.
    Slow(Rank, u32),
    /// Stop a rank.
    Stop(Rank),
}

/// A pending message flip of one sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageFlip {
    /// Which message.
    pub which: MessageSelector,
    /// Which bit.
    pub target: FlipTarget,
}

/// The simulator's view of a fault plan.
#[derive(Clone, Debug, Default)]
pub struct CompiledPlan {
    /// Faults at times, in spec order.
    pub timed: Vec<(Time, TimedFault)>,
    /// Message flips per sender, not yet applied.
    pub message_flips: BTreeMap<u32, Vec<MessageFlip>>,
    /// Loss rate of every sender.
    pub drop_all: f64,
    /// Loss rate of particular senders (overrides `drop_all`).
    pub drop_rank: BTreeMap<u32, f64>,
    /// Flow-corruption rate per sent message, of every rank.
    pub flip_rate_all: f64,
    /// Flow-corruption rate of particular ranks (overrides `flip_rate_all`).
    pub flip_rate_rank: BTreeMap<u32, f64>,
    /// Start time of every rank, if spread (else all start at 0).
    pub start_times: Option<Vec<u64>>,
    /// Links already cut at time 0 or later, normalized (low, high).
    pub initially_cut: BTreeSet<(u32, u32)>,
}

/// A fault plan the simulator cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// A rank outside `0..n`.
    #[error("fault names rank {rank}, but the run has only {n} ranks (0..{n})")]
    RankOutOfRange {
        /// The rank named.
        rank: u32,
        /// Ranks in the run.
        n: u32,
    },
    /// A node outside the run.
    #[error("fault names node {node}, but {n} ranks at {per_node} per node make {nodes} nodes")]
    NodeOutOfRange {
        /// The node named.
        node: u32,
        /// Ranks in the run.
        n: u32,
        /// Ranks per node.
        per_node: u32,
        /// Nodes in the run.
        nodes: u32,
    },
    /// A time the simulator cannot use.
    #[error(transparent)]
    Spec(#[from] FaultError),
    /// A kill tied to an operation number in a single-operation simulation.
    #[error("a kill at an operation number needs a run of several operations; in the simulator kill at a time")]
    KillAtOperation,
}

fn check_rank(rank: Rank, n: u32) -> Result<Rank, PlanError> {
    if rank.0 < n {
        Ok(rank)
    } else {
        Err(PlanError::RankOutOfRange { rank: rank.0, n })
    }
}

/// Stream id of start-time draws.
const SPREAD_STREAM: u64 = 0x5EED_0000_0000_0001;

impl CompiledPlan {
    /// Compiles `specs` for `n` ranks grouped `per_node` to a node.
    pub fn compile(
        specs: &[FaultSpec],
        n: u32,
        per_node: u32,
        seed: u64,
    ) -> Result<CompiledPlan, PlanError> {
        let per_node = per_node.max(1);
        let mut plan = CompiledPlan::default();
        for spec in specs {
            match *spec {
                FaultSpec::Kill { rank, at } => {
                    let at = match at {
                        KillTime::At(at) => at.steps()?,
                        KillTime::Operation(_) | KillTime::DuringOperation { .. } => {
                            return Err(PlanError::KillAtOperation)
                        }
                    };
                    plan.timed
                        .push((Time(at), TimedFault::Crash(check_rank(rank, n)?)));
                }
                FaultSpec::KillNode { node, at } => {
                    let nodes = n.div_ceil(per_node);
                    if node >= nodes {
                        return Err(PlanError::NodeOutOfRange {
                            node,
                            n,
                            per_node,
                            nodes,
                        });
                    }
                    let at = Time(at.steps()?);
                    let first = node * per_node;
                    for rank in first..(first + per_node).min(n) {
                        plan.timed.push((at, TimedFault::Crash(Rank(rank))));
                    }
                }
                FaultSpec::FlipMessage {
                    rank,
                    which,
                    target,
                } => {
                    let rank = check_rank(rank, n)?;
                    if let MessageSelector::AtOrAfter(at) = which {
                        at.steps()?;
                    }
                    plan.message_flips
                        .entry(rank.0)
                        .or_default()
                        .push(MessageFlip { which, target });
                }
                FaultSpec::FlipState { rank, var, bit, at } => {
                    let rank = check_rank(rank, n)?;
                    if let StateVar::Flow { peer, .. } = var {
                        check_rank(peer, n)?;
                    }
                    let fault = LocalFault::FlipBit { var, bit };
                    plan.timed
                        .push((Time(at.steps()?), TimedFault::FlipState(rank, fault)));
                }
                FaultSpec::FlipRate { rank: None, rate } => plan.flip_rate_all = rate,
                FaultSpec::FlipRate {
                    rank: Some(rank),
                    rate,
                } => {
                    plan.flip_rate_rank.insert(check_rank(rank, n)?.0, rate);
                }
                FaultSpec::Drop { rank: None, rate } => plan.drop_all = rate,
                FaultSpec::Drop {
                    rank: Some(rank),
                    rate,
                } => {
                    plan.drop_rank.insert(check_rank(rank, n)?.0, rate);
                }
                FaultSpec::Cut { a, b, at } => {
                    let (a, b) = (check_rank(a, n)?, check_rank(b, n)?);
                    plan.timed.push((Time(at.steps()?), TimedFault::Cut(a, b)));
                }
                FaultSpec::Slow { rank, factor, at } => {
                    let rank = check_rank(rank, n)?;
                    plan.timed
                        .push((Time(at.steps()?), TimedFault::Slow(rank, factor)));
                }
                FaultSpec::Stop { rank, at } => {
                    let rank = check_rank(rank, n)?;
                    plan.timed.push((Time(at.steps()?), TimedFault::Stop(rank)));
                }
                FaultSpec::Spread(spread) => {
                    let mut rng = SimRng::for_stream(seed, SPREAD_STREAM);
                    let times = match spread {
                        Spread::Uniform(width) => {
                            let width = width.steps()?;
                            (0..n).map(|_| rng.below(width + 1)).collect()
                        }
                        Spread::Normal(sigma) => {
                            let sigma = sigma.steps()? as f64;
                            (0..n)
                                .map(|_| (rng.normal() * sigma).abs().round() as u64)
                                .collect()
                        }
                    };
                    plan.start_times = Some(times);
                }
            }
        }
        Ok(plan)
    }

    /// Probability that sending a message corrupts one of `rank`'s flows.
    pub fn flip_rate(&self, rank: u32) -> f64 {
        self.flip_rate_rank
            .get(&rank)
            .copied()
            .unwrap_or(self.flip_rate_all)
    }

    /// Loss probability of a message sent by `rank`.
    pub fn drop_rate(&self, rank: u32) -> f64 {
        self.drop_rank.get(&rank).copied().unwrap_or(self.drop_all)
    }

    /// Whether any message loss is configured.
    pub fn has_loss(&self) -> bool {
        self.drop_all > 0.0 || !self.drop_rank.is_empty()
    }
}
