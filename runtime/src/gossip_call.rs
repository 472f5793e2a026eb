//! Gossip reductions (000, 003) on real ranks: [`Communicator::gossip`].
//!
//! Ranks push on a wall-clock period and stop by the local stopping rule
//! ([`ftcoll_algos::gossip::stop`]), the only way a real rank can tell it is accurate enough. A
//! rank that stops keeps answering the pushes of ranks still running for a while (its linger
//! time), so that they can finish too. Ranks the launcher reported dead are handed to the
//! algorithm as failure notices right after the start, so flows to them are dropped at once.

use std::time::Duration;

use ftcoll_algos::gossip::Gossip;
use ftcoll_algos::protocol::{Input, Outbox, Protocol, Wrapper};
use ftcoll_algos::topology::TopologyKind;
use ftcoll_algos::{Rank, ReduceOp, Time};

use crate::comm::{CommError, Communicator, Outcome};
use crate::job::{Algorithm, GossipOptions, JobSpec};

/// How to run one gossip reduction.
#[derive(Clone, Debug, PartialEq)]
pub struct GossipCall {
    /// Which gossip algorithm (`ps` .. `hpflc`).
    pub algo: Algorithm,
    /// The kind of topology, built on the communicator's size at each call; `None`: the job
    /// default (a hypercube for a power of two, else full).
    pub topology: Option<TopologyKind>,
    /// Accuracy target of the stopping rule.
    pub eps: Option<f64>,
    /// Bound on pushes.
    pub steps: Option<u32>,
    /// Time between pushes.
    pub period: Duration,
    /// Schedule, precision and checksum options.
    pub options: GossipOptions,
    /// Seed of partner draws and permutations (the same at every rank).
    pub seed: u64,
}

/// The engine in the chosen precision, plus the failures known before the start.
enum Engine {
    Single(Gossip<f32>),
    Double(Gossip<f64>),
}

struct GossipRun {
    engine: Engine,
    known_dead: Vec<Rank>,
}

/// Runs whole-vector (one segment): the shell's defaults.
impl ftcoll_algos::protocol::SegmentProtocol for GossipRun {}

impl Wrapper for GossipRun {
    type Inner = dyn Protocol + 'static;

    fn inner(&self) -> &Self::Inner {
        match &self.engine {
            Engine::Single(g) => g,
            Engine::Double(g) => g,
        }
    }

    fn inner_mut(&mut self) -> &mut Self::Inner {
        match &mut self.engine {
            Engine::Single(g) => g,
            Engine::Double(g) => g,
        }
    }

    fn wrap_handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        let starting = matches!(input, Input::Start { .. });
        self.inner_mut().handle(now, input, out);
        if starting {
            for peer in std::mem::take(&mut self.known_dead) {
                self.inner_mut()
                    .handle(now, Input::PeerFailed { peer }, out);
            }
        }
    }
}

/// Least linger of a finished rank after the last push it answered, in periods.
const LINGER_PERIODS: u64 = 200;

impl Communicator {
    /// Reduces `data` with a gossip algorithm: on return `data` holds this rank's estimate of
    /// the survivors' sum or average, accurate to the call's eps when the stopping rule held
    /// (or the best it reached within the push bound).
    pub fn gossip(
        &mut self,
        data: &mut [f64],
        op: ReduceOp,
        call: &GossipCall,
    ) -> Result<Outcome, CommError> {
        let size = self.size();
        let mut spec = JobSpec::new(call.algo, size);
        spec.op = op;
        spec.eps = call.eps;
        spec.steps = call.steps;
        spec.input_len = data.len();
        spec.gossip = call.options;
        spec.gossip.stop_rule = true;
        spec.topology = match call.topology {
            Some(kind) => Some(
                kind.build(size)
                    .map_err(|e| CommError::Config(e.to_string()))?,
            ),
            None => None,
        };
        spec.validate()
            .map_err(|e| CommError::Config(e.to_string()))?;
        let period = u64::try_from(call.period.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut config = spec
            .gossip_config(Rank(self.rank()), self.next_op_id(), call.seed, period)
            .map_err(|e| CommError::Config(e.to_string()))?;
        // A rank still running pushes to a given neighbour about once per `degree` periods; a
        // finished rank stays several such gaps after the last push it answered.
        let degree = u64::from(config.topology.degree(Rank(self.rank())));
        let linger = LINGER_PERIODS.max(4 * degree);
        config.linger = ftcoll_algos::Duration(period.saturating_mul(linger));
        let members = self.members();
        let failed = self.failed_ranks();
        let known_dead: Vec<Rank> = (0..size)
            .filter(|&i| failed.binary_search(&members[i as usize]).is_ok())
            .map(Rank)
            .collect();
        let single = spec.gossip_single();
        let make = move |_: &_, _, _| {
            let engine = if single {
                Engine::Single(Gossip::new(config))
            } else {
                Engine::Double(Gossip::new(config))
            };
            GossipRun {
                engine,
                known_dead: known_dead.clone(),
            }
        };
        let me = self.world_rank();
        let shell = self.whole_vector_shell(call.algo, op, data.len())?;
        self.run_collective_then(shell, make, data, |run, _| {
            let status = run.status();
            let mut estimate = Vec::new();
            run.estimate(&mut estimate);
            tracing::debug!(rank = me, pushes = status.iteration, ?estimate, detail = ?status.detail, "gossip finished");
        })
    }
}
