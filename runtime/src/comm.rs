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

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ftcoll_algos::corrected::{
    AllreduceConfig, BcastConfig, CorrectedAllreduce, CorrectedBcast, CorrectedReduce, Correction,
    FailureInfo, ReduceConfig,
};
use ftcoll_algos::rdb::{RdbConfig, RecursiveDoubling};
use ftcoll_algos::{OpId, Protocol, Rank, ReduceOp, ValuesRef};

use crate::control::client::ControlClient;
use crate::control::{ControlError, OpReport};
use crate::env::{EnvError, RankEnv};
use crate::exec::{Endpoint, ExecError, OpEnd};
use crate::faults::{FaultSpec, FaultSpecError};
use crate::rank_faults::RankFaults;
use crate::transport::backend::Backend;
use crate::transport::shm::segment::Segment;
use crate::transport::shm::ShmTransport;
use crate::transport::tcp::{TcpConfig, TcpTransport};
use crate::transport::{Transport, TransportError, TransportKind};

/// Time limit of one collective, unless `FTCOLL_OP_TIMEOUT_MS` says otherwise.
const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest a leaving rank keeps serving finished operations that owe peers answers.
const LINGER_AT_EXIT: Duration = Duration::from_secs(5);
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
    /// A scripted fault is malformed.
    #[error("FTCOLL_FAULTS: {0}")]
    Faults(#[from] FaultSpecError),
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

/// A rank's handle on the job.
pub struct Communicator {
    endpoint: Endpoint<Backend>,
    control: Arc<ControlClient>,
    env: RankEnv,
    ops: u64,
    op_timeout: Duration,
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
        let specs = env
            .faults
            .iter()
            .map(|s| FaultSpec::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        let faults = RankFaults::for_rank(&specs, Rank(env.rank), env.job_id)?;
        let control_cell: Arc<OnceLock<Arc<ControlClient>>> = Arc::new(OnceLock::new());
        let transport = match env.transport {
            TransportKind::Shm => {
                let fd = env.shm_fd.ok_or(EnvError::Missing("FTCOLL_SHM_FD"))?;
                let segment = Arc::new(Segment::open_inherited(fd, env.job_id)?);
                Backend::Shm(ShmTransport::new(segment, Rank(env.rank), env.spin)?)
            }
            TransportKind::Tcp => {
                let cell = Arc::clone(&control_cell);
                let resolver = move |peer: Rank| {
                    let control = cell.get().ok_or(TransportError::Resolve {
                        rank: peer.0,
                        why: "control plane not connected yet".into(),
                    })?;
                    let text = control.resolve(peer.0, RESOLVE_TIMEOUT).map_err(|e| {
                        TransportError::Resolve {
                            rank: peer.0,
                            why: e.to_string(),
                        }
                    })?;
                    text.parse().map_err(|_| TransportError::Resolve {
                        rank: peer.0,
                        why: format!(
                            "'{text}' is not an address (the rank failed before registering?)"
                        ),
                    })
                };
                Backend::Tcp(Box::new(TcpTransport::bind(TcpConfig {
                    rank: Rank(env.rank),
                    size: env.size,
                    bind_ip: env.bind_ip,
                    job_token: crate::control::msg::data_token(&env.secret),
                    resolver: Box::new(resolver),
                })?))
            }
            other => return Err(TransportError::NotCompiledIn(other).into()),
        };
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
        Ok(Communicator {
            endpoint,
            control,
            env,
            ops: 0,
            op_timeout,
        })
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.env.rank
    }

    /// Ranks in the job.
    pub fn size(&self) -> u32 {
        self.env.size
    }

    /// The transport in use.
    pub fn transport(&self) -> TransportKind {
        self.env.transport
    }

    /// Ranks known to have failed.
    pub fn failed_ranks(&self) -> Vec<u32> {
        self.endpoint.failed().iter().copied().collect()
    }

    /// Allreduce of `data` in place (recursive doubling). Fails with
    /// [`CommError::PeerFailed`] when a rank fails during it: recursive doubling is not fault
    /// tolerant; the fault-tolerant algorithms return the ranks they excluded instead.
    pub fn allreduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<Outcome, CommError> {
        let op_id = OpId(self.ops + 1);
        let protocol =
            RecursiveDoubling::new(RdbConfig::exact(self.me(), self.env.size, op, op_id));
        self.run_collective(protocol, data)
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
            self.env.size,
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
            self.env.size,
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
            self.env.size,
            OpId(self.ops + 1),
            Rank(root),
            options.tolerate,
        );
        config.correction = options.correction;
        self.run_collective(CorrectedBcast::new(config), data)
    }

    fn me(&self) -> Rank {
        Rank(self.env.rank)
    }

    fn check_tolerance(&self, tolerate: u32) -> Result<(), CommError> {
        if self.env.size < tolerate.saturating_add(2) {
            return Err(CommError::Tolerance {
                tolerate,
                size: self.env.size,
            });
        }
        Ok(())
    }

    /// Runs one collective to its end and writes its result into `data` where this rank has one.
    fn run_collective<P: Protocol + Send + 'static>(
        &mut self,
        mut protocol: P,
        data: &mut [f64],
    ) -> Result<Outcome, CommError> {
        let op_index = self.ops;
        self.ops += 1;
        let (end, stats) = self.endpoint.run(
            &mut protocol,
            op_index,
            op_index + 1,
            ValuesRef::F64(data),
            self.op_timeout,
        )?;
        match end {
            OpEnd::Completed => {
                if protocol.has_result() {
                    let mut result = Vec::with_capacity(data.len());
                    protocol.estimate(&mut result);
                    if result.len() != data.len() {
                        return Err(CommError::Shape {
                            expected: data.len(),
                            got: result.len(),
                        });
                    }
                    data.copy_from_slice(&result);
                }
                // What it still owes peers (late corrections) is served during later calls.
                self.endpoint.linger(op_index + 1, Box::new(protocol));
                Ok(Outcome {
                    excluded: self.failed_ranks().into_iter().map(Rank).collect(),
                    messages: stats.sent,
                })
            }
            OpEnd::Aborted => Err(CommError::PeerFailed {
                failed: self.failed_ranks(),
            }),
            OpEnd::TimedOut => Err(CommError::TimedOut(self.op_timeout)),
            OpEnd::Shutdown => Err(CommError::Shutdown),
        }
    }

    /// Sends an operation report to the launcher (the built-in job's results).
    pub fn report(&self, report: OpReport) -> Result<(), CommError> {
        Ok(self.control.report(report)?)
    }

    /// Sends benchmark timings to the launcher (`ftcoll-launch bench`).
    pub fn report_timings(&self, nanos: Vec<u64>) -> Result<(), CommError> {
        Ok(self.control.timings(nanos)?)
    }

    /// Leaves the job: reports this rank's memory footprint and flushes sends.
    pub fn finish(mut self) -> Result<(), CommError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        // Neighbours may still be correcting towards this rank; answer them before leaving.
        let serve_until = Instant::now() + self.op_timeout.min(LINGER_AT_EXIT);
        self.endpoint.serve_lingering(self.ops + 1, serve_until)?;
        while self.endpoint.transport.progress()? > 0 && Instant::now() < deadline {
            self.endpoint
                .transport
                .wait(Some(Duration::from_millis(1)))?;
        }
        self.control.finished(own_pss_kb())?;
        Ok(())
    }
}

/// Pins this process to core `rank mod cores`, so ranks that share a core take turns on it
/// instead of migrating.
fn bind_to_core(rank: u32) {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut set = rustix::thread::CpuSet::new();
    set.set(rank as usize % cores);
    if let Err(error) = rustix::thread::sched_setaffinity(None, &set) {
        tracing::warn!(%error, "cannot bind to a core; running unbound");
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
