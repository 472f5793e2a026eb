//! The library API for user programs: `Communicator::from_env()` and collectives.
//!
//! ```no_run
//! use ftcoll_runtime::comm::Communicator;
//! use ftcoll_algos::ReduceOp;
//!
//! let mut comm = Communicator::from_env()?;
//! let mut data = [comm.rank() as f64];
//! let outcome = comm.allreduce(&mut data, ReduceOp::Sum)?;
//! println!("rank {} of {}: sum {} (excluded: {:?})", comm.rank(), comm.size(), data[0], outcome.excluded);
//! comm.finish()?;
//! # Ok::<(), ftcoll_runtime::comm::CommError>(())
//! ```

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use ftcoll_algos::corrected::{
    AllreduceConfig, BcastConfig, CorrectedAllreduce, CorrectedBcast, CorrectedReduce, Correction,
    FailureInfo, ReduceConfig,
};
use ftcoll_algos::direct::{prefer_direct, DirectAllreduce, DirectConfig};
use ftcoll_algos::era::{AgreeError, AgreedValue, Era, EraConfig, EraTopology};
use ftcoll_algos::rank::RankSet;
use ftcoll_algos::rdb::{RdbConfig, RecursiveDoubling};
use ftcoll_algos::{OpId, Protocol, Rank, ReduceOp, ValuesRef};

use crate::control::client::ControlClient;
use crate::control::{ControlError, OpReport};
use crate::env::{EnvError, RankEnv};
use crate::exec::{Endpoint, ExecError, OpEnd, ERA_EPOCH_SHIFT};
use crate::faults::FaultError;
use crate::progress::ProgressThread;
use crate::rank_faults::RankFaults;
use crate::transport::backend::Backend;
use crate::transport::shm::segment::Segment;
use crate::transport::shm::ShmTransport;
use crate::transport::{Transport, TransportError, TransportKind};

/// Time limit of one collective, unless `FTCOLL_OP_TIMEOUT_MS` says otherwise.
const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest a leaving rank keeps serving finished operations that owe peers answers.
const LINGER_AT_EXIT: Duration = Duration::from_secs(5);
/// How long a leaving rank answers late requests of its flushing agreement.
const FLUSH_LINGER: Duration = Duration::from_millis(50);
/// How often a rank waiting for the console's go serves its peers and samples its status.
const GO_POLL: Duration = Duration::from_millis(10);
/// How long a peer address lookup may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a collective or the set-up failed.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    /// The environment does not describe a rank.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The data plane failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The control plane failed.
    #[error("control plane: {0}")]
    Control(#[from] ControlError),
    /// A scripted fault cannot be applied on this rank.
    #[error("scripted fault: {0}")]
    Faults(#[from] FaultError),
    /// Ranks failed and the algorithm cannot complete without them.
    #[error("ranks {failed:?} failed; the collective cannot complete")]
    PeerFailed {
        /// Ranks known failed.
        failed: Vec<u32>,
    },
    /// A fault tolerance the job is too small for.
    #[error("tolerating {tolerate} failures needs at least {} ranks, the job has {size}; lower the tolerance", tolerate + 2)]
    Tolerance {
        /// f.
        tolerate: u32,
        /// Ranks in the job.
        size: u32,
    },
    /// The result does not fit the caller's buffer.
    #[error("the collective produced {got} values for a buffer of {expected}; pass the same length on every rank")]
    Shape {
        /// The caller's length.
        expected: usize,
        /// The result's length.
        got: usize,
    },
    /// The collective exceeded its time limit.
    #[error("the collective did not complete within {0:?}")]
    TimedOut(Duration),
    /// The launcher stopped the job.
    #[error("the launcher stopped the job")]
    Shutdown,
    /// The communicator was revoked (by this rank or a peer); only agreements and shrink work
    /// on it now.
    #[error("the communicator was revoked; agree or shrink to recover")]
    Revoked,
    /// An agreement decided, but ranks failed that not every participant had acknowledged
    /// (ULFM's MPIX_ERR_PROC_FAILED): the value is still the same at every survivor.
    #[error("ranks {unacknowledged:?} failed without every rank acknowledging it (agreed value {agreed:#x}); call ack_failed and agree again")]
    UnacknowledgedFailure {
        /// The agreed value (first word).
        agreed: u64,
        /// Failed ranks some participant had not acknowledged.
        unacknowledged: Vec<u32>,
    },
    /// A malformed setting.
    #[error("{0}")]
    Config(String),
    /// An agreement that cannot start.
    #[error(transparent)]
    Agree(#[from] AgreeError),
}

impl From<ExecError> for CommError {
    fn from(error: ExecError) -> Self {
        match error {
            ExecError::Transport(e) => CommError::Transport(e),
        }
    }
}

/// Options of the corrected-tree collectives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorrectedOptions {
    /// Failures tolerated, f (the job needs at least f + 2 ranks).
    pub tolerate: u32,
    /// How the reduce reports failures up its tree.
    pub info: FailureInfo,
    /// The broadcast's correction phase.
    pub correction: Correction,
}

impl Default for CorrectedOptions {
    fn default() -> Self {
        CorrectedOptions {
            tolerate: 1,
            info: FailureInfo::default(),
            correction: Correction::Checked,
        }
    }
}

/// What a successful collective reports besides its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Ranks known failed when the collective returned. Recursive doubling fails instead of
    /// returning with any; the corrected collectives exclude those that failed before the call
    /// and count those that failed during it either at every rank or at none.
    pub excluded: Vec<Rank>,
    /// Frames this rank sent.
    pub messages: u64,
}

/// What an agreement decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreed {
    /// The agreed words.
    pub words: Vec<u64>,
    /// The failed ranks (world ranks) the participants agreed on.
    pub failed: Vec<u32>,
    /// Failed ranks not acknowledged by every participant (empty for a clean agreement).
    pub unacknowledged: Vec<u32>,
}

impl Agreed {
    fn from_value(value: &AgreedValue) -> Agreed {
        Agreed {
            words: value.words.clone(),
            failed: value.failed.as_slice().to_vec(),
            unacknowledged: value.unacknowledged(),
        }
    }
}

/// A non-blocking agreement in flight ([`Communicator::iagree`]).
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an agreement must be waited for"]
pub struct AgreeRequest {
    id: u64,
    epoch: u64,
}

/// A rank's handle on the job.
pub struct Communicator {
    /// Shared with the agreement progress thread, which serves it while the application is
    /// outside every call (see [`crate::progress`]).
    endpoint: Arc<Mutex<Endpoint<Backend>>>,
    progress: Option<ProgressThread>,
    control: Arc<ControlClient>,
    env: RankEnv,
    ops: u64,
    op_timeout: Duration,
    /// The communicator generation: 0 for the world, one more per shrink.
    epoch: u64,
    /// Agreements started in this epoch.
    agreements: u64,
    /// Failures this rank acknowledged (world ranks).
    acked: RankSet,
    /// Members (world ranks, increasing) after a shrink.
    members: Option<Vec<u32>>,
    era_topology: EraTopology,
    /// Where a finished collective writes its result before it is copied into the caller's
    /// vector: reused, so that a loop of small collectives does not allocate for it.
    result_scratch: Vec<f64>,
    /// The recursive-doubling instance, restarted in place by every call (see
    /// [`Communicator::allreduce_rdb`]); `None` while one lingers or before the first call.
    rdb: Option<Box<RecursiveDoubling>>,
}

/// A resolver of peers' data-plane addresses through the control plane (connected after the
/// transport exists, hence the cell).
fn control_resolver(
    cell: &Arc<OnceLock<Arc<ControlClient>>>,
) -> impl FnMut(Rank) -> Result<String, TransportError> + Send + 'static {
    let cell = Arc::clone(cell);
    move |peer: Rank| {
        let control = cell.get().ok_or(TransportError::Resolve {
            rank: peer.0,
            why: "control plane not connected yet".into(),
        })?;
        let text =
            control
                .resolve(peer.0, RESOLVE_TIMEOUT)
                .map_err(|e| TransportError::Resolve {
                    rank: peer.0,
                    why: e.to_string(),
                })?;
        if text.is_empty() {
            return Err(TransportError::Resolve {
                rank: peer.0,
                why: "the rank failed before registering".into(),
            });
        }
        Ok(text)
    }
}

/// Opens the data-plane transport `env` names.
fn open_transport(
    env: &RankEnv,
    control_cell: &Arc<OnceLock<Arc<ControlClient>>>,
) -> Result<Backend, CommError> {
    Ok(match env.transport {
        TransportKind::Shm => {
            let fd = env.shm_fd.ok_or(EnvError::Missing("FTCOLL_SHM_FD"))?;
            let segment = Arc::new(Segment::open_inherited(fd, env.job_id)?);
            Backend::Shm(ShmTransport::new(segment, Rank(env.rank), env.spin)?)
        }
        other => crate::transport::open::open_network(
            other,
            Rank(env.rank),
            env.size,
            Box::new(control_resolver(control_cell)),
            &crate::transport::open::NetworkOptions {
                bind_ip: env.bind_ip,
                job_token: crate::control::msg::data_token(&env.secret),
                spin: env.spin,
                ofi_provider: env.ofi_provider.clone(),
                ucx_tls: None,
            },
        )?,
    })
}

impl Communicator {
    /// Joins the job described by the `FTCOLL_*` environment the launcher sets.
    pub fn from_env() -> Result<Communicator, CommError> {
        let env = RankEnv::from_env()?;
        Communicator::join(env)
    }

    /// Joins the job described by `env`.
    pub fn join(env: RankEnv) -> Result<Communicator, CommError> {
        die_with_launcher(&env);
        let faults = RankFaults::for_rank(&env.faults, Rank(env.rank), env.job_id)?;
        let control_cell: Arc<OnceLock<Arc<ControlClient>>> = Arc::new(OnceLock::new());
        let transport = open_transport(&env, &control_cell)?;
        let control = Arc::new(ControlClient::connect(&env, &transport.local_address())?);
        let _ = control_cell.set(Arc::clone(&control));
        if std::env::var("FTCOLL_BIND").is_ok_and(|v| v == "core") {
            bind_to_core(env.rank);
        }
        let start_delay = faults.start_delay();
        let endpoint = Endpoint::new(transport, Arc::clone(&control), Rank(env.rank), faults);
        if !start_delay.is_zero() {
            std::thread::sleep(start_delay);
        }
        let op_timeout = std::env::var("FTCOLL_OP_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(DEFAULT_OP_TIMEOUT, Duration::from_millis);
        let era_topology = match std::env::var("FTCOLL_ERA_TREE") {
            Ok(name) => EraTopology::parse(&name, env.ranks_per_node).map_err(CommError::Config)?,
            Err(_) => EraTopology::default(),
        };
        let mut comm = Communicator {
            endpoint: Arc::new(Mutex::new(endpoint)),
            progress: None,
            control,
            env,
            ops: 0,
            op_timeout,
            epoch: 0,
            agreements: 0,
            acked: RankSet::default(),
            members: None,
            era_topology,
            result_scratch: Vec::new(),
            rdb: None,
        };
        // The agreement service exists from the start: peers' agreements may reach this rank
        // before it calls its first one.
        comm.install_era(&[])?;
        Ok(comm)
    }

    /// The endpoint, locked for one statement or call (never hold two guards: the lock is not
    /// reentrant).
    fn endpoint(&self) -> MutexGuard<'_, Endpoint<Backend>> {
        // A panic while it was held leaves an endpoint still fit to report errors.
        self.endpoint.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the agreement progress thread once agreements are in use.
    fn ensure_progress_thread(&mut self) -> Result<(), CommError> {
        if self.progress.is_none() {
            let (thread, waker) =
                ProgressThread::start(Arc::clone(&self.endpoint)).map_err(|e| {
                    CommError::Config(format!("cannot start the agreement progress thread: {e}"))
                })?;
            self.control.add_waker(waker);
            self.progress = Some(thread);
        }
        Ok(())
    }

    fn install_era(&mut self, excluded: &[u32]) -> Result<(), CommError> {
        let config = EraConfig {
            topology: self.era_topology,
            ..EraConfig::default()
        };
        let era = Era::with_members(self.env.rank, self.env.size, excluded, config)
            .with_id_base(self.epoch << ERA_EPOCH_SHIFT);
        self.endpoint().add_era(self.epoch, era)?;
        self.endpoint().watch_revoke(self.epoch);
        Ok(())
    }

    /// Whether a scripted fault (`--fault kill:rank=R,op=K`) kills this rank when its next
    /// operation (collective or agreement) starts.
    pub fn dies_at_next_op(&self) -> bool {
        self.endpoint().faults().dies_at_op(self.ops)
    }

    /// This rank (its index among the members after a shrink).
    pub fn rank(&self) -> u32 {
        match &self.members {
            Some(members) => members
                .binary_search(&self.env.rank)
                .map_or(0, |i| i as u32),
            None => self.env.rank,
        }
    }

    /// Ranks in the communicator.
    pub fn size(&self) -> u32 {
        self.members
            .as_ref()
            .map_or(self.env.size, |m| m.len() as u32)
    }

    /// This rank's id in the job (what failure lists and agreements name).
    pub fn world_rank(&self) -> u32 {
        self.env.rank
    }

    /// The members' world ranks.
    pub fn members(&self) -> Vec<u32> {
        self.members
            .clone()
            .unwrap_or_else(|| (0..self.env.size).collect())
    }

    /// ULFM's `agree`: the bitwise AND of every participant's `flag`, the same at every
    /// survivor (002's ERA). Fails with [`CommError::UnacknowledgedFailure`], still carrying the
    /// agreed value, at every survivor when a rank failed that not all had acknowledged
    /// ([`Communicator::ack_failed`]).
    pub fn agree(&mut self, flag: u64) -> Result<u64, CommError> {
        let agreed = self.agree_with(&[flag], ReduceOp::BitAnd)?;
        let value = agreed.words.first().copied().unwrap_or(0);
        if !agreed.unacknowledged.is_empty() {
            return Err(CommError::UnacknowledgedFailure {
                agreed: value,
                unacknowledged: agreed.unacknowledged,
            });
        }
        Ok(value)
    }

    /// An agreement on `words` under any idempotent operator (`BitAnd`, `BitOr`, `Min`,
    /// `Max`), returning the agreed failed set too. A blocking agreement also rebalances the
    /// agreement tree of later agreements around the failed ranks it agrees on (002 Sec. 3).
    pub fn agree_with(&mut self, words: &[u64], op: ReduceOp) -> Result<Agreed, CommError> {
        let request = self.start_agreement(words, op, true)?;
        self.wait_agree(request)
    }

    /// ULFM's `iagree`: starts an agreement and returns at once; [`Communicator::wait_agree`]
    /// completes it. Agreements complete in any order.
    pub fn iagree(&mut self, words: &[u64], op: ReduceOp) -> Result<AgreeRequest, CommError> {
        self.start_agreement(words, op, false)
    }

    /// Waits for an agreement started by [`Communicator::iagree`].
    pub fn wait_agree(&mut self, request: AgreeRequest) -> Result<Agreed, CommError> {
        let id = request.id;
        let end = self
            .endpoint()
            .wait_era(request.epoch, self.op_timeout, |era| {
                era.decision(id).is_some()
            })?;
        match end {
            OpEnd::Completed => {}
            OpEnd::TimedOut => return Err(CommError::TimedOut(self.op_timeout)),
            _ => return Err(CommError::Shutdown),
        }
        let agreed = self
            .endpoint()
            .with_era(request.epoch, |era, _| {
                let agreed = era.decision(id).map(Agreed::from_value);
                era.returned(id);
                agreed
            })?
            .flatten()
            .ok_or(CommError::Shutdown)?;
        self.endpoint().learn_agreed_failures(&agreed.failed)?;
        Ok(agreed)
    }

    fn start_agreement(
        &mut self,
        words: &[u64],
        op: ReduceOp,
        rebalance: bool,
    ) -> Result<AgreeRequest, CommError> {
        // Agreements are operations of the communicator: scripted kills count them too.
        self.endpoint().die_if_scripted(self.ops);
        self.ensure_progress_thread()?;
        self.ops += 1;
        self.agreements += 1;
        let id = (self.epoch << ERA_EPOCH_SHIFT) + self.agreements;
        let acked = self.acked.clone();
        let words = words.to_vec();
        self.endpoint()
            .with_era(self.epoch, |era, out| {
                era.start(id, op, words, &acked, rebalance, out)
            })?
            .ok_or(CommError::Shutdown)??;
        Ok(AgreeRequest {
            id,
            epoch: self.epoch,
        })
    }

    /// ULFM's `ack_failed`: acknowledges every failure known now; returns how many are
    /// acknowledged. Agreements stop reporting acknowledged failures as errors.
    pub fn ack_failed(&mut self) -> usize {
        let failed: Vec<u32> = self.endpoint().failed().iter().copied().collect();
        for rank in failed {
            self.acked.insert(rank);
        }
        self.acked.len()
    }

    /// Agreement frames this rank has sent so far in its live communicators (a frame count for
    /// reports; an agreement's own is the difference around it, within one communicator).
    pub fn agreement_messages(&self) -> u64 {
        self.endpoint().era_messages_sent()
    }

    /// The failures this rank acknowledged (world ranks).
    pub fn acked_failed(&self) -> Vec<u32> {
        self.acked.as_slice().to_vec()
    }

    /// ULFM's `shrink`: agrees on the failed ranks and continues as a communicator of the
    /// survivors, identical at all of them and without any rank a survivor had acknowledged
    /// as failed. Ranks are renumbered 0..size in world order; returns the members' world ranks.
    pub fn shrink(&mut self) -> Result<Vec<u32>, CommError> {
        let agreed = self.agree_with(&[], ReduceOp::BitOr)?;
        let failed = RankSet::from_unsorted(agreed.failed);
        let members: Vec<u32> = self
            .members()
            .into_iter()
            .filter(|r| !failed.contains(*r))
            .collect();
        let excluded: Vec<u32> = (0..self.env.size)
            .filter(|r| members.binary_search(r).is_err())
            .collect();
        self.epoch += 1;
        self.agreements = 0;
        self.install_era(&excluded)?;
        self.endpoint().set_group(members.clone());
        self.members = Some(members.clone());
        Ok(members)
    }

    /// ULFM's `revoke`: every pending and later operation on this communicator fails at every
    /// survivor with [`CommError::Revoked`]; agreements and shrink still work.
    pub fn revoke(&mut self) -> Result<(), CommError> {
        self.endpoint()
            .with_era(self.epoch, |era, out| era.revoke(out))?;
        Ok(())
    }

    /// Whether this communicator was revoked.
    pub fn is_revoked(&self) -> bool {
        self.endpoint().revoked(self.epoch)
    }

    /// The transport in use.
    pub fn transport(&self) -> TransportKind {
        self.env.transport
    }

    /// Ranks known to have failed.
    pub fn failed_ranks(&self) -> Vec<u32> {
        self.endpoint().failed().iter().copied().collect()
    }

    /// Allreduce of `data` in place: a direct exchange for small groups and vectors (see
    /// [`ftcoll_algos::direct`]), recursive doubling otherwise. Fails with
    /// [`CommError::PeerFailed`] when a rank fails during it: neither is fault tolerant; the
    /// fault-tolerant algorithms return the ranks they excluded instead.
    pub fn allreduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<Outcome, CommError> {
        if prefer_direct(self.size(), std::mem::size_of_val(data)) {
            self.allreduce_direct(data, op)
        } else {
            self.allreduce_rdb(data, op)
        }
    }

    /// Allreduce of `data` in place by recursive doubling (000 Alg. 1), whatever the size.
    pub fn allreduce_rdb(&mut self, data: &mut [f64], op: ReduceOp) -> Result<Outcome, CommError> {
        let op_id = OpId(self.ops + 1);
        let config = RdbConfig::exact(self.me(), self.size(), op, op_id);
        // One instance goes from one call to the next, restarted in place: a loop of calls
        // allocates nothing and moves no protocol state (this is the small-allreduce latency
        // path, where a copy of the state costs a few percent).
        let mut protocol = match self.rdb.take() {
            Some(mut protocol) => {
                protocol.restart(config);
                protocol
            }
            None => Box::new(RecursiveDoubling::new(config)),
        };
        let (outcome, owes_peers) = self.run_collective_in(&mut *protocol, data, |_, _| {})?;
        if owes_peers {
            self.endpoint().linger(self.ops, protocol);
        } else {
            self.rdb = Some(protocol);
        }
        Ok(outcome)
    }

    /// Allreduce of `data` in place by direct exchange: every rank sends its input to every
    /// other, whatever the size (N(N − 1) messages).
    pub fn allreduce_direct(
        &mut self,
        data: &mut [f64],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let config = DirectConfig {
            rank: self.me(),
            size: self.size(),
            op,
            op_id: OpId(self.ops + 1),
        };
        self.run_collective(DirectAllreduce::new(config), data)
    }

    /// Fault-tolerant allreduce by correction (001 Sec. 5): survives up to `options.tolerate`
    /// failed ranks, of which root candidates (ranks `0..=f`) may fail only before the call.
    /// Every surviving rank gets the same result: the survivors' values, plus the values of
    /// ranks that failed during the call either at every rank or at none.
    pub fn corrected_allreduce(
        &mut self,
        data: &mut [f64],
        op: ReduceOp,
        options: CorrectedOptions,
    ) -> Result<Outcome, CommError> {
        let mut config = AllreduceConfig::new(
            self.me(),
            self.size(),
            op,
            OpId(self.ops + 1),
            options.tolerate,
        );
        config.info = options.info;
        config.correction = options.correction;
        self.check_tolerance(options.tolerate)?;
        self.run_collective(CorrectedAllreduce::new(config), data)
    }

    /// Fault-tolerant reduce to `root` by up-correction (001 Sec. 4). At the root `data` becomes
    /// the result; elsewhere it is left unchanged. If the root fails, the call is a no-op.
    pub fn corrected_reduce(
        &mut self,
        data: &mut [f64],
        op: ReduceOp,
        root: u32,
        options: CorrectedOptions,
    ) -> Result<Outcome, CommError> {
        let mut config = ReduceConfig::new(
            self.me(),
            self.size(),
            op,
            OpId(self.ops + 1),
            options.tolerate,
            Rank(root),
        );
        config.info = options.info;
        self.check_tolerance(options.tolerate)?;
        self.run_collective(CorrectedReduce::new(config), data)
    }

    /// Corrected-tree broadcast of the root's `data` to every rank.
    pub fn corrected_bcast(
        &mut self,
        data: &mut [f64],
        root: u32,
        options: CorrectedOptions,
    ) -> Result<Outcome, CommError> {
        let mut config = BcastConfig::new(
            self.me(),
            self.size(),
            OpId(self.ops + 1),
            Rank(root),
            options.tolerate,
        );
        config.correction = options.correction;
        self.run_collective(CorrectedBcast::new(config), data)
    }

    /// This rank as the collectives number it: its index among the members (after a shrink,
    /// the executor maps member indices to world ranks).
    fn me(&self) -> Rank {
        Rank(self.rank())
    }

    fn check_tolerance(&self, tolerate: u32) -> Result<(), CommError> {
        if self.size() < tolerate.saturating_add(2) {
            return Err(CommError::Tolerance {
                tolerate,
                size: self.size(),
            });
        }
        Ok(())
    }

    /// The operation id the next collective gets.
    pub(crate) fn next_op_id(&self) -> OpId {
        OpId(self.ops + 1)
    }

    /// Runs one collective to its end and writes its result into `data` where this rank has one.
    fn run_collective<P: Protocol + Send + 'static>(
        &mut self,
        protocol: P,
        data: &mut [f64],
    ) -> Result<Outcome, CommError> {
        self.run_collective_then(protocol, data, |_, _| {})
    }

    /// [`Communicator::run_collective`], letting `inspect` read the finished protocol and amend
    /// the outcome before the protocol lingers.
    pub(crate) fn run_collective_then<P: Protocol + Send + 'static>(
        &mut self,
        mut protocol: P,
        data: &mut [f64],
        inspect: impl FnOnce(&P, &mut Outcome),
    ) -> Result<Outcome, CommError> {
        let (outcome, owes_peers) = self.run_collective_in(&mut protocol, data, inspect)?;
        if owes_peers {
            self.endpoint().linger(self.ops, Box::new(protocol));
        }
        Ok(outcome)
    }

    /// Runs one collective on a protocol the caller keeps; also says whether it still owes
    /// peers answers (late corrections), in which case the caller must hand it over to linger
    /// (served during later calls).
    fn run_collective_in<P: Protocol>(
        &mut self,
        protocol: &mut P,
        data: &mut [f64],
        inspect: impl FnOnce(&P, &mut Outcome),
    ) -> Result<(Outcome, bool), CommError> {
        let op_index = self.ops;
        self.ops += 1;
        // One lock for the operation and the failures it ends with.
        let mut endpoint = self.endpoint();
        let (end, stats) = endpoint.run(
            protocol,
            op_index,
            op_index + 1,
            ValuesRef::F64(data),
            self.op_timeout,
        )?;
        let failed = endpoint.failed();
        // No iterator to build in a failure-free job (this is the small-collective latency path).
        let excluded: Vec<Rank> = if failed.is_empty() {
            Vec::new()
        } else {
            failed.iter().copied().map(Rank).collect()
        };
        drop(endpoint);
        match end {
            OpEnd::Completed => {
                if protocol.has_result() {
                    let result = &mut self.result_scratch;
                    protocol.estimate(result);
                    if result.len() != data.len() {
                        return Err(CommError::Shape {
                            expected: data.len(),
                            got: result.len(),
                        });
                    }
                    data.copy_from_slice(result);
                }
                let mut outcome = Outcome {
                    excluded,
                    messages: stats.sent,
                };
                inspect(protocol, &mut outcome);
                let owes_peers = !(protocol.settled() && protocol.serve_until().is_none());
                Ok((outcome, owes_peers))
            }
            OpEnd::Aborted => Err(CommError::PeerFailed {
                failed: self.failed_ranks(),
            }),
            OpEnd::TimedOut => Err(CommError::TimedOut(self.op_timeout)),
            OpEnd::Shutdown => Err(CommError::Shutdown),
            OpEnd::Revoked => Err(CommError::Revoked),
        }
    }

    /// Sends an operation report to the launcher (the built-in job's results).
    pub fn report(&self, report: OpReport) -> Result<(), CommError> {
        Ok(self.control.report(report)?)
    }

    /// Console-paced jobs: waits until the launcher allows operation `op` to start, serving
    /// finished operations and sending status samples meanwhile. False when the job shuts
    /// down instead.
    pub fn wait_for_go(&mut self, op: u64) -> Result<bool, CommError> {
        // Each pass blocks at most GO_POLL; the job's shutdown or the launcher's death (which
        // exits the rank) ends the wait.
        loop {
            if self.control.wait_go(op, GO_POLL) {
                return Ok(true);
            }
            if self.control.shutdown_requested() {
                return Ok(false);
            }
            let mut endpoint = self.endpoint();
            endpoint.serve_between_operations()?;
            endpoint.idle_telemetry();
        }
    }

    /// Tells the console (if one watches) the result of operation `op` at this rank: what
    /// the rank shows until the next operation starts.
    pub fn note_outcome(&mut self, op: u64, value: f64) {
        self.endpoint().note_outcome(op, value);
    }

    /// Sends benchmark timings to the launcher (`ftcoll-launch bench`).
    pub fn report_timings(&self, nanos: Vec<u64>) -> Result<(), CommError> {
        Ok(self.control.timings(nanos)?)
    }

    /// Leaves the job: reports this rank's memory footprint and flushes sends.
    pub fn finish(mut self) -> Result<(), CommError> {
        if self.agreements > 0 {
            // 002 Sec. 3: a flushing agreement before leaving, so that every survivor has
            // returned from every earlier agreement and nobody will ask this rank for one.
            match self.agree_with(&[], ReduceOp::BitOr) {
                Ok(_) | Err(CommError::UnacknowledgedFailure { .. }) => {}
                Err(error) => tracing::warn!(%error, "flushing agreement failed"),
            }
            // Answer stragglers of the flush itself for a moment (a peer whose parent died
            // during it re-sends its contribution here).
            let epoch = self.epoch;
            let linger = Instant::now() + FLUSH_LINGER;
            self.endpoint()
                .wait_era(epoch, FLUSH_LINGER, |_| Instant::now() >= linger)?;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        // Neighbours may still be correcting towards this rank; answer them before leaving.
        let serve_until = Instant::now() + self.op_timeout.min(LINGER_AT_EXIT);
        self.endpoint().serve_lingering(self.ops + 1, serve_until)?;
        while self.endpoint().transport.progress()? > 0 && Instant::now() < deadline {
            self.endpoint()
                .transport
                .wait(Some(Duration::from_millis(1)))?;
        }
        self.control.finished(own_pss_kb())?;
        Ok(())
    }
}

/// Pins this process to core `rank mod cores`, so ranks that share a core take turns on it
/// instead of migrating.
/// Pins this process to one of the cores it may run on (its affinity mask, which `taskset` or
/// a batch system's cpuset may have narrowed), chosen by rank.
fn bind_to_core(rank: u32) {
    let allowed = match rustix::thread::sched_getaffinity(None) {
        Ok(set) => set,
        Err(error) => {
            tracing::warn!(%error, "cannot read the cores this rank may use; running unbound");
            return;
        }
    };
    let cores: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&cpu| allowed.is_set(cpu))
        .collect();
    let Some(&core) = cores.get(rank as usize % cores.len().max(1)) else {
        return;
    };
    let mut set = rustix::thread::CpuSet::new();
    set.set(core);
    if let Err(error) = rustix::thread::sched_setaffinity(None, &set) {
        tracing::warn!(%error, core, "cannot bind to a core; running unbound");
    }
}

/// Arranges for this process to die with its launcher, and exits now if it is already gone.
fn die_with_launcher(env: &RankEnv) {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let parent = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32);
    if env.launcher_pid != 0 && parent != env.launcher_pid {
        tracing::error!("launcher {} is gone; exiting", env.launcher_pid);
        std::process::exit(crate::control::client::EXIT_LAUNCHER_GONE);
    }
}

/// This process's proportional set size in KiB (shared pages divided among their users).
pub fn own_pss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}
