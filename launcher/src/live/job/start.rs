//! Starting a job: the control listener, the shared-memory segment, the ranks' environment,
//! and the ranks themselves (here, or through node agents on other hosts).

use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{bail, Context};
use ftcoll_runtime::transport::shm::segment::{Geometry, Segment};
use ftcoll_runtime::transport::shm::{default_lane_bytes, DEFAULT_LANES};
use ftcoll_runtime::transport::TransportKind;
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use super::{
    available_cores, telemetry_period, Loop, BACKLOG_SAFE_RANKS, EVENT_CAPACITY, LISTENER,
    PIDFD_BASE, SPAWN_BATCH,
};
use crate::cluster::agent::WORKDIR_VAR;
use crate::cluster::starter::{AgentCall, Agents};
use crate::cluster::Cluster;
use crate::live::spawn::{spawn_rank, JobEnv};
use crate::live::spec::LiveSpec;

/// The launcher's end of the control plane: the listener ranks and agents connect to, and
/// the poll that serves it and every connection.
pub(super) struct ControlPlane {
    pub(super) poll: Poll,
    pub(super) listener: TcpListener,
    pub(super) events: Events,
}

impl ControlPlane {
    /// Starts serving `listener` (bound to `control_addr`).
    pub(super) fn listen(
        mut listener: TcpListener,
        control_addr: &str,
    ) -> anyhow::Result<ControlPlane> {
        let poll = Poll::new()?;
        // Thousands of ranks connect at once: a deep backlog keeps their SYNs from being
        // dropped (a dropped SYN is retried only after a second or more).
        rustix::net::listen(&listener, 8192).context("setting the control listener's backlog")?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        tracing::info!(%control_addr, "control plane listening");
        Ok(ControlPlane {
            poll,
            listener,
            events: Events::with_capacity(EVENT_CAPACITY),
        })
    }
}

/// The control listener of `spec`'s job, and its address.
pub(super) fn open_control_listener(spec: &LiveSpec) -> anyhow::Result<(TcpListener, String)> {
    let cluster = spec.cluster.as_ref();
    if cluster.is_some() && spec.transport == TransportKind::Shm {
        bail!("--transport shm needs every rank on this machine under the launcher; use tcp (or auto) for a run on other hosts");
    }
    let bind_ip = match cluster {
        Some(cluster) => crate::cluster::control_bind(&spec.launch.bind, cluster)?,
        None => spec.launch.bind.clone(),
    };
    let bind: std::net::SocketAddr = format!("{bind_ip}:0")
        .parse()
        .with_context(|| format!("--bind {bind_ip} is not an IP address"))?;
    let listener = TcpListener::bind(bind).with_context(|| format!("cannot listen on {bind}"))?;
    let control_addr = listener.local_addr()?.to_string();
    Ok((listener, control_addr))
}

/// The shared-memory segment of a `--transport shm` job (`None` for other transports).
pub(super) fn shm_segment(spec: &LiveSpec, job_id: u64) -> anyhow::Result<Option<Segment>> {
    if spec.transport != TransportKind::Shm {
        return Ok(None);
    }
    let n = spec.launch.n;
    let lane_bytes = std::env::var("FTCOLL_SHM_LANE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| default_lane_bytes(n));
    let geometry = Geometry {
        ranks: n,
        lanes: DEFAULT_LANES,
        lane_bytes,
    };
    let segment =
        Segment::create(geometry, job_id).context("creating the shared-memory segment")?;
    // Ranks that poll (no more than cores) publish with plain stores and pay a barrier only
    // when they fall asleep; ranks that outnumber cores sleep often and keep the locked
    // publish.
    segment.set_plain_publish(n <= available_cores());
    Ok(Some(segment))
}

/// What every rank of `spec`'s job finds in its environment (`telemetry`: a watcher wants
/// status samples).
pub(super) fn job_env(
    spec: &LiveSpec,
    job_id: u64,
    control_addr: &str,
    secret: &[u8],
    segment: Option<&Segment>,
    telemetry: bool,
) -> anyhow::Result<JobEnv> {
    let launch = &spec.launch;
    let n = launch.n;
    let (heartbeat_ms, suspect_ms) = (launch.heartbeat_ms, launch.suspect_ms);
    if suspect_ms <= heartbeat_ms {
        bail!("--suspect-ms ({suspect_ms}) must exceed --heartbeat-ms ({heartbeat_ms})");
    }
    let cores = available_cores();
    // A real job on one machine puts every rank on one node unless told otherwise.
    let ranks_per_node = match spec.cluster.as_ref() {
        Some(cluster) => cluster.placement.ranks_per_node,
        None => launch.ranks_per_node.unwrap_or(n),
    }
    .clamp(1, n);
    Ok(JobEnv {
        size: n,
        job_id,
        control_addr: control_addr.to_string(),
        secret: secret.to_vec(),
        transport: spec.transport.name(),
        shm_fd: segment.map(Segment::raw_fd),
        bind_ip: launch.bind.clone(),
        ranks_per_node,
        era_tree: launch.era_tree.clone(),
        heartbeat_ms,
        // Spinning only pays when every rank has a core to spin on: this launcher starts all
        // ranks on this machine.
        spin_us: std::env::var("FTCOLL_SPIN_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(if n <= cores { 50 } else { 0 }),
        // Pinned ranks, as mpirun binds them. Ranks that outnumber cores take turns by
        // yielding; pinned, each core keeps the same ranks and none migrates in the middle of
        // an operation (the 8-byte allreduce at 4-16 ranks on 2 cores: faster and steadier).
        // Ranks that fit spin; left free, two of them sometimes start on one core and stay
        // there for tens of milliseconds, each spinning out its budget while the other waits
        // (112 us per 2-rank allreduce instead of 0.3, in 6 of 20 runs; see docs/performance.md). The
        // user's FTCOLL_BIND wins.
        bind_cores: std::env::var_os("FTCOLL_BIND").is_none(),
        faults: ftcoll_runtime::env::encode_faults(&spec.faults),
        ofi_provider: launch.ofi_provider.clone(),
        telemetry_ms: if telemetry {
            telemetry_period(n).as_millis() as u64
        } else {
            0
        },
    })
}

// Every descriptor the launcher holds is copied into each child and closed again at its exec:
// spawning while holding a pidfd and a socket per earlier rank costs O(N^2). So ranks are
// started with only the listener open, their connections waiting in the backlog, and served
// afterwards — unless N exceeds what the backlog holds, in which case the launcher accepts
// between batches.
impl Loop {
    /// Starts every rank on this machine as a child of the launcher, watched through pidfds.
    pub(super) fn spawn_local(
        &mut self,
        plane: &mut ControlPlane,
        spec: &LiveSpec,
        env: &JobEnv,
    ) -> anyhow::Result<()> {
        let n = spec.launch.n;
        let serve_while_spawning = u64::from(n) > BACKLOG_SAFE_RANKS;
        let mut children = Vec::with_capacity(n as usize);
        for first in (0..n).step_by(SPAWN_BATCH) {
            for r in first..(first + SPAWN_BATCH as u32).min(n) {
                children.push(spawn_rank(
                    env,
                    r,
                    &spec.program,
                    &spec.program_args,
                    spec.builtin,
                )?);
            }
            if serve_while_spawning {
                self.serve(
                    &mut plane.poll,
                    &mut plane.listener,
                    &mut plane.events,
                    Duration::ZERO,
                    n,
                )?;
            }
        }
        for (r, child) in children.into_iter().enumerate() {
            // The child cannot be reaped by anyone else before we wait for it, so its pid is
            // still its own: opening the pidfd late is safe.
            let pid =
                rustix::process::Pid::from_raw(child.id() as i32).context("child has no pid")?;
            let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
                .with_context(|| format!("pidfd_open for rank {r}"))?;
            plane.poll.registry().register(
                &mut SourceFd(&pidfd.as_raw_fd()),
                Token(PIDFD_BASE + r),
                Interest::READABLE,
            )?;
            let slot = &mut self.ranks[r];
            slot.pid = child.id();
            slot.child = Some(child);
            slot.pidfd = Some(pidfd);
        }
        Ok(())
    }

    /// Starts a node agent on every host of `cluster`, waits for all to connect, and has each
    /// start its ranks. The agents are returned: they must live until the job ends.
    pub(super) fn start_remote(
        &mut self,
        plane: &mut ControlPlane,
        cluster: &Cluster,
        spec: &LiveSpec,
        env: &JobEnv,
    ) -> anyhow::Result<Agents> {
        self.plan_agents(&cluster.placement);
        let call = AgentCall {
            control_addr: &env.control_addr,
            job_id: env.job_id,
            secret: &self.secret.clone(),
            heartbeat_ms: env.heartbeat_ms,
        };
        let mut starters = Agents::start(&cluster.route, &cluster.placement, &call)?;
        if let Err(error) = self.await_agents(
            &mut plane.poll,
            &mut plane.listener,
            &mut plane.events,
            &mut starters,
            spec.launch.n,
        ) {
            // Agents that connected end when their connection does: nothing starts.
            self.close_all(&mut plane.poll);
            drop(starters);
            return Err(error);
        }
        let mut common = env.common_vars();
        // Ranks start in the launcher's directory (relative program paths, output files), as
        // under mpirun; the agent changes there if the host has it.
        if let Ok(dir) = std::env::current_dir() {
            common.push((WORKDIR_VAR.into(), dir.to_string_lossy().into_owned()));
        }
        self.spawn_remote(|first, count| ftcoll_runtime::control::ControlMsg::Spawn {
            first,
            count,
            program: spec.program.clone(),
            args: spec.program_args.clone(),
            env: common.clone(),
            quiet: spec.builtin,
        });
        self.flush_all(&mut plane.poll)?;
        Ok(starters)
    }
}
