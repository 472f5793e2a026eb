//! The launcher's main loop for a real job.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ftcoll_runtime::control::{FailureCause, OpReport};
use ftcoll_runtime::faults::{FaultSpec, KillTime};
use ftcoll_runtime::rank_faults::wall_time;
use ftcoll_runtime::transport::shm::segment::{Geometry, Segment};
use ftcoll_runtime::transport::shm::{DEFAULT_LANES, DEFAULT_LANE_BYTES};
use ftcoll_runtime::transport::TransportKind;
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use super::report::{FailureRecord, LiveOutcome};
use super::server::{failure_notice, Conn, JobShape, Refusal, Request};
use super::spawn::{raise_fd_limit, random_bytes, spawn_rank, JobEnv};
use super::spec::LiveSpec;
use super::watch::{Flow, JobHandle, Watcher};

mod remote;

use crate::cluster::agent::WORKDIR_VAR;

/// Cores this machine gives the job.
fn available_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |c| c.get()) as u32
}

/// Benchmark timings kept per rank (80 MB at most).
const MAX_TIMINGS_PER_RANK: usize = 10_000_000;
/// Reads of an exited rank's control socket before judging its exit (half a control message
/// each: 512 MB, more than its timings can fill).
const MAX_EXIT_DRAIN_PASSES: usize = 1024;
const LISTENER: Token = Token(0);
const PIDFD_BASE: usize = 1;
const CONN_BASE: usize = 1 << 32;
/// Up to this many ranks wait in the listen backlog (the kernel caps it at somaxconn, 4096 on
/// current Linux) while the launcher spawns without serving.
const BACKLOG_SAFE_RANKS: u64 = 4096;
/// Ranks started between two turns of the event loop.
const SPAWN_BATCH: usize = 32;
/// A rank must register within this long of being started.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest turn of the event loop while a console watches.
const CONSOLE_TICK: Duration = Duration::from_millis(20);
/// While a console watches, a quiet turn of the loop is followed by this pause.
const CONSOLE_COALESCE: Duration = Duration::from_millis(2);
/// Longest interval between two looks at every rank's last heartbeat.
const LIVENESS_EVERY: Duration = Duration::from_millis(100);
/// A rank some peer's transport calls unreachable, or a remote rank whose control connection
/// broke, is killed (fail-stop) if it still runs this long after: a rank that died is reaped
/// (or reported by its agent) well within it and reported as the exit it was.
const FENCE_GRACE: Duration = Duration::from_millis(250);
/// Readiness events taken per turn of the event loop.
const EVENT_CAPACITY: usize = 1024;

/// What the launcher knows of one rank.
#[derive(Default)]
struct RankSlot {
    child: Option<Child>,
    pidfd: Option<OwnedFd>,
    pid: u32,
    conn: Option<usize>,
    address: Option<String>,
    last_heartbeat: Option<Instant>,
    /// A suspicion that waits out a grace period before the rank is fenced: a dying rank is
    /// reaped (or its agent reports it) within it, and is then reported as the exit it was.
    pending_fence: Option<(Instant, FailureCause)>,
    /// A remote rank's exit as its agent reported it, held until its control connection has
    /// delivered everything the rank sent (its final messages travel on another connection).
    remote_exit: Option<(bool, String)>,
    finished: bool,
    exited: bool,
    /// Set when the launcher killed it on suspicion: reported with this cause once dead.
    fenced: Option<FailureCause>,
    /// The node agent that started it (on another host), if not the launcher itself.
    node_agent: Option<u32>,
    stopped: bool,
    pss_kb: u64,
    reports: Vec<OpReport>,
    timings: Vec<u64>,
}

/// A launcher-side scripted fault.
#[derive(Clone, Copy, Debug)]
enum LauncherFault {
    Kill(u32),
    Stop(u32),
}

/// Runs a real job and returns what happened.
pub fn run(spec: &LiveSpec) -> anyhow::Result<LiveOutcome> {
    run_with_console(spec, None)
}

/// Runs a real job watched by `console` (which paces its operations and injects faults).
pub fn run_with_console(
    spec: &LiveSpec,
    mut console: Option<&mut dyn Watcher>,
) -> anyhow::Result<LiveOutcome> {
    let args = &spec.launch;
    let n = args.n;
    raise_fd_limit(2 * u64::from(n) + 64)?;
    let job_id = u64::from_le_bytes(random_bytes(8)?.try_into().unwrap_or_default());
    let secret = random_bytes(32)?;
    let cluster = spec.cluster.as_ref();
    if cluster.is_some() && spec.transport == TransportKind::Shm {
        bail!("--transport shm needs every rank on this machine under the launcher; use tcp (or auto) for a run on other hosts");
    }
    let bind_ip = match cluster {
        Some(cluster) => crate::cluster::control_bind(&args.bind, cluster)?,
        None => args.bind.clone(),
    };
    let bind: std::net::SocketAddr = format!("{bind_ip}:0")
        .parse()
        .with_context(|| format!("--bind {bind_ip} is not an IP address"))?;
    let mut listener =
        TcpListener::bind(bind).with_context(|| format!("cannot listen on {bind}"))?;
    let control_addr = listener.local_addr()?.to_string();
    let segment = match spec.transport {
        TransportKind::Shm => {
            let lane_bytes = std::env::var("FTCOLL_SHM_LANE_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(if n > 512 {
                    DEFAULT_LANE_BYTES / 4
                } else {
                    DEFAULT_LANE_BYTES
                });
            let geometry = Geometry {
                ranks: n,
                lanes: DEFAULT_LANES,
                lane_bytes,
            };
            let segment =
                Segment::create(geometry, job_id).context("creating the shared-memory segment")?;
            // Ranks that poll (no more than cores) publish with plain stores and pay a barrier
            // only when they fall asleep; ranks that outnumber cores sleep often and keep the
            // locked publish.
            segment.set_plain_publish(n <= available_cores());
            Some(segment)
        }
        _ => None,
    };
    let (heartbeat_ms, suspect_ms) = (args.heartbeat_ms, args.suspect_ms);
    if suspect_ms <= heartbeat_ms {
        bail!("--suspect-ms ({suspect_ms}) must exceed --heartbeat-ms ({heartbeat_ms})");
    }
    let cores = available_cores();
    // A real job on one machine puts every rank on one node unless told otherwise.
    let ranks_per_node = match cluster {
        Some(cluster) => cluster.placement.ranks_per_node,
        None => args.ranks_per_node.unwrap_or(n),
    }
    .clamp(1, n);
    let env = JobEnv {
        size: n,
        job_id,
        control_addr: control_addr.clone(),
        secret: secret.clone(),
        transport: spec.transport.name(),
        shm_fd: segment.as_ref().map(Segment::raw_fd),
        bind_ip: args.bind.clone(),
        ranks_per_node,
        era_tree: args.era_tree.clone(),
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
        // (112 us per 2-rank allreduce instead of 0.3, in 6 of 20 runs; see the README). The
        // user's FTCOLL_BIND wins.
        bind_cores: std::env::var_os("FTCOLL_BIND").is_none(),
        faults: ftcoll_runtime::env::encode_faults(&spec.faults),
        ofi_provider: args.ofi_provider.clone(),
        telemetry_ms: if console.as_ref().is_some_and(|c| c.telemetry()) {
            telemetry_period(n).as_millis() as u64
        } else {
            0
        },
    };
    let launcher_faults = launcher_faults(&spec.faults, n, ranks_per_node)?;

    let mut poll = Poll::new()?;
    // Thousands of ranks connect at once: a deep backlog keeps their SYNs from being dropped
    // (a dropped SYN is retried only after a second or more).
    rustix::net::listen(&listener, 8192).context("setting the control listener's backlog")?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    tracing::info!(%control_addr, "control plane listening");
    let started = Instant::now();
    let ranks: Vec<RankSlot> = (0..n).map(|_| RankSlot::default()).collect();
    let mut state = Loop {
        ranks,
        sweep_provider_shm: spec.transport == TransportKind::Ofi,
        agents: Vec::new(),
        conns: Vec::new(),
        free_conns: Vec::new(),
        pending_resolves: BTreeMap::new(),
        failures: Vec::new(),
        registered_count: 0,
        wired_at: None,
        started,
        secret,
        suspect: Duration::from_millis(suspect_ms),
        launcher_faults,
        registered_pids: BTreeMap::new(),
        console_events: console.is_some().then(Vec::new),
        paused: false,
        last_liveness_check: None,
        dirty: Vec::new(),
        last_hello_scan: Instant::now(),
    };
    let mut events = Events::with_capacity(EVENT_CAPACITY);
    // Every descriptor the launcher holds is copied into each child and closed again at its
    // exec: spawning while holding a pidfd and a socket per earlier rank costs O(N^2). So ranks
    // are started with only the listener open, their connections waiting in the backlog, and
    // served afterwards — unless N exceeds what the backlog holds, in which case the launcher
    // accepts between batches.
    // Kept until the job ends: dropping it reaps (or kills) the ssh/srun processes.
    let mut agents = None;
    if let Some(cluster) = cluster {
        state.plan_agents(&cluster.placement);
        let call = crate::cluster::starter::AgentCall {
            control_addr: &control_addr,
            job_id,
            secret: &state.secret.clone(),
            heartbeat_ms,
        };
        let mut starters =
            crate::cluster::starter::Agents::start(&cluster.route, &cluster.placement, &call)?;
        if let Err(error) =
            state.await_agents(&mut poll, &mut listener, &mut events, &mut starters, n)
        {
            // Agents that connected end when their connection does: nothing starts.
            state.close_all(&mut poll);
            drop(starters);
            return Err(error);
        }
        let mut common = env.common_vars();
        // Ranks start in the launcher's directory (relative program paths, output files), as
        // under mpirun; the agent changes there if the host has it.
        if let Ok(dir) = std::env::current_dir() {
            common.push((WORKDIR_VAR.into(), dir.to_string_lossy().into_owned()));
        }
        state.spawn_remote(|first, count| ftcoll_runtime::control::ControlMsg::Spawn {
            first,
            count,
            program: spec.program.clone(),
            args: spec.program_args.clone(),
            env: common.clone(),
            quiet: spec.builtin,
        });
        state.flush_all(&mut poll)?;
        agents = Some(starters);
    } else {
        let serve_while_spawning = u64::from(n) > BACKLOG_SAFE_RANKS;
        let mut children = Vec::with_capacity(n as usize);
        for first in (0..n).step_by(SPAWN_BATCH) {
            for r in first..(first + SPAWN_BATCH as u32).min(n) {
                children.push(spawn_rank(
                    &env,
                    r,
                    &spec.program,
                    &spec.program_args,
                    spec.builtin,
                )?);
            }
            if serve_while_spawning {
                state.serve(&mut poll, &mut listener, &mut events, Duration::ZERO, n)?;
            }
        }
        for (r, child) in children.into_iter().enumerate() {
            // The child cannot be reaped by anyone else before we wait for it, so its pid is still
            // its own: opening the pidfd late is safe.
            let pid =
                rustix::process::Pid::from_raw(child.id() as i32).context("child has no pid")?;
            let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
                .with_context(|| format!("pidfd_open for rank {r}"))?;
            poll.registry().register(
                &mut SourceFd(&pidfd.as_raw_fd()),
                Token(PIDFD_BASE + r),
                Interest::READABLE,
            )?;
            let slot = &mut state.ranks[r];
            slot.pid = child.id();
            slot.child = Some(child);
            slot.pidfd = Some(pidfd);
        }
    }
    // The segment's descriptor has been inherited; the launcher's mapping can go.
    drop(segment);
    let spawned_s = started.elapsed().as_secs_f64();
    tracing::info!(n, spawned_s, "ranks started");

    let job_timeout = Duration::from_secs(args.timeout_s);
    let mut tick = Duration::from_millis((heartbeat_ms / 2).clamp(5, 250));
    if console.is_some() {
        // Keys must feel immediate; the console draws at its own bounded rate.
        tick = tick.min(CONSOLE_TICK);
    }
    let mut timed_out = false;
    while state.ranks.iter().any(|r| !r.exited) {
        if let Some(console) = console.as_deref_mut() {
            state.feed_console(console);
            if console.tick(&mut state)? == Flow::Quit {
                state.kill_all();
                state.reap_all_blocking();
                break;
            }
        } else if started.elapsed() > job_timeout {
            timed_out = true;
            tracing::error!("job exceeded --timeout-s {}; killing it", args.timeout_s);
            state.kill_all();
            state.reap_all_blocking();
            break;
        }
        // A scripted fault is due at its time, not at the next tick (up to 250 ms later).
        let wait = state.until_next_fault().map_or(tick, |due| due.min(tick));
        let handled = state.serve(&mut poll, &mut listener, &mut events, wait, n)?;
        if console.is_some() && handled < EVENT_CAPACITY / 8 {
            // Thousands of ranks' samples and beats arrive spread out: taking them a few
            // milliseconds' worth at a time wakes the launcher hundreds of times a second
            // instead of thousands. Control answers wait at most this long more.
            std::thread::sleep(CONSOLE_COALESCE);
        }
        // Only judge silence once every readable connection was read: heartbeats may wait
        // unread in sockets the last poll did not reach.
        if handled < EVENT_CAPACITY {
            state.check_liveness(n);
        }
        state.apply_launcher_faults();
    }
    if agents.is_some() {
        // Kills of remote ranks travel through their agents.
        state.flush_all(&mut poll)?;
        state.close_all(&mut poll);
    }
    drop(agents);
    let wall_s = started.elapsed().as_secs_f64();
    Ok(LiveOutcome {
        n,
        transport: spec.transport,
        launch: cluster.map_or("local", |c| c.route.name()),
        hosts: cluster.map_or(1, |c| c.placement.nodes.len() as u32),
        wall_s,
        spawn_s: spawned_s,
        wireup_s: state.wired_at.map(|t| t.as_secs_f64()),
        failures: state.failures,
        reports: state.ranks.iter().map(|r| r.reports.clone()).collect(),
        timings: state
            .ranks
            .iter_mut()
            .map(|r| std::mem::take(&mut r.timings))
            .collect(),
        pss_kb: state.ranks.iter().map(|r| r.pss_kb).collect(),
        launcher_pss_kb: ftcoll_runtime::comm::own_pss_kb(),
        timed_out,
        unfinished: state.ranks.iter().filter(|r| !r.finished).count() as u32,
    })
}

/// Status-sample period of each rank for a job of `n` ranks: 100 ms up to 400 ranks, then
/// longer so that the launcher takes in at most about 4,000 samples a second.
pub fn telemetry_period(n: u32) -> Duration {
    Duration::from_millis((u64::from(n) / 4).clamp(100, 1000))
}

/// Faults the launcher applies (from outside the ranks), with their times after wire-up.
fn launcher_faults(
    specs: &[FaultSpec],
    n: u32,
    per_node: u32,
) -> anyhow::Result<Vec<(Duration, LauncherFault)>> {
    let mut planned = Vec::new();
    let check = |rank: u32| -> anyhow::Result<u32> {
        if rank >= n {
            bail!("fault names rank {rank}, but the job has only {n} ranks (0..{n})");
        }
        Ok(rank)
    };
    for spec in specs {
        match *spec {
            FaultSpec::Kill {
                rank,
                at: KillTime::At(at),
            } => planned.push((wall_time(at)?, LauncherFault::Kill(check(rank.0)?))),
            FaultSpec::Kill {
                rank,
                at: KillTime::Operation(_),
            } => {
                check(rank.0)?;
            }
            FaultSpec::KillNode { node, at } => {
                let first = node.checked_mul(per_node).filter(|&f| f < n).with_context(|| {
                    format!("fault names node {node}, but {n} ranks at {per_node} per node make {} nodes", n.div_ceil(per_node))
                })?;
                for rank in first..(first + per_node).min(n) {
                    planned.push((wall_time(at)?, LauncherFault::Kill(rank)));
                }
            }
            FaultSpec::Stop { rank, at } => {
                planned.push((wall_time(at)?, LauncherFault::Stop(check(rank.0)?)))
            }
            FaultSpec::FlipMessage { rank, .. }
            | FaultSpec::FlipState { rank, .. }
            | FaultSpec::Slow { rank, .. } => {
                check(rank.0)?;
            }
            FaultSpec::Cut { a, b, .. } => {
                check(a.0)?;
                check(b.0)?;
            }
            FaultSpec::Drop {
                rank: Some(rank), ..
            }
            | FaultSpec::FlipRate {
                rank: Some(rank), ..
            } => {
                check(rank.0)?;
            }
            FaultSpec::Drop { rank: None, .. }
            | FaultSpec::FlipRate { rank: None, .. }
            | FaultSpec::Spread(_) => {}
        }
    }
    planned.sort_by_key(|(at, _)| *at);
    Ok(planned)
}

struct Loop {
    ranks: Vec<RankSlot>,
    /// Remove libfabric's shm files of each rank that ends (`--transport ofi`).
    sweep_provider_shm: bool,
    /// Node agents (cluster runs only).
    agents: Vec<remote::AgentSlot>,
    conns: Vec<Option<Conn>>,
    free_conns: Vec<usize>,
    /// Address lookups waiting for the peer to register: peer → askers.
    pending_resolves: BTreeMap<u32, Vec<u32>>,
    failures: Vec<FailureRecord>,
    registered_count: u32,
    wired_at: Option<Duration>,
    started: Instant,
    secret: Vec<u8>,
    suspect: Duration,
    launcher_faults: Vec<(Duration, LauncherFault)>,
    registered_pids: BTreeMap<u32, u32>,
    /// What the console must hear of, drained every turn (`None`: no console).
    console_events: Option<Vec<ConsoleEvent>>,
    /// The console paused the job (every rank stopped): no suspicion meanwhile.
    paused: bool,
    /// When liveness was last judged (to tell a stalled launcher from silent ranks).
    last_liveness_check: Option<Instant>,
    /// Connections with output queued since the last flush (duplicates allowed).
    dirty: Vec<usize>,
    /// When connections were last checked for a missing hello.
    last_hello_scan: Instant,
}

/// Something the console hears of.
enum ConsoleEvent {
    Registered(u32),
    Sample(u32, ftcoll_runtime::control::RankSample),
    Reported(u32, u64),
    Failed(u32, String),
    Suspected(u32, &'static str),
}

impl Loop {
    /// What a control connection may claim to be.
    fn shape(&self) -> JobShape {
        JobShape {
            ranks: self.ranks.len() as u32,
            nodes: self.agents.len() as u32,
        }
    }

    /// One round of the event loop: wait up to `timeout` and handle what happened.
    fn serve(
        &mut self,
        poll: &mut Poll,
        listener: &mut TcpListener,
        events: &mut Events,
        timeout: Duration,
        n: u32,
    ) -> anyhow::Result<usize> {
        poll.poll(events, Some(timeout))?;
        let handled = events.iter().count();
        for event in events.iter() {
            match event.token() {
                LISTENER => self.accept(poll, listener)?,
                Token(t) if (PIDFD_BASE..PIDFD_BASE + n as usize).contains(&t) => {
                    self.reaped(poll, (t - PIDFD_BASE) as u32)?
                }
                Token(t) if t >= CONN_BASE => {
                    self.conn_event(poll, t - CONN_BASE, event.is_readable())?;
                }
                _ => {}
            }
        }
        self.flush_all(poll)?;
        Ok(handled)
    }

    fn accept(&mut self, poll: &mut Poll, listener: &mut TcpListener) -> anyhow::Result<()> {
        // Accept everything pending; the backlog bounds this loop.
        loop {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let nonce: [u8; 16] = random_bytes(16)?.try_into().unwrap_or_default();
                    let index = self.free_conns.pop().unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    poll.registry().register(
                        &mut stream,
                        Token(CONN_BASE + index),
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                    self.conns[index] = Some(Conn::new(stream, nonce));
                    self.dirty.push(index);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a control connection failed");
                    return Ok(());
                }
            }
        }
    }

    fn close_conn(&mut self, poll: &mut Poll, index: usize, why: Option<String>) {
        // What a rank sent before its connection broke still counts: when a write to a rank
        // that just exited fails first, its last message (often Finished) is still unread.
        let shape = self.shape();
        let registered = &self.registered_pids;
        let pending = match self.conns.get_mut(index).and_then(Option::as_mut) {
            Some(conn) if conn.rank.is_some() => conn.read(&self.secret, shape, registered).0,
            _ => Vec::new(),
        };
        for request in pending {
            self.handle(index, request);
        }
        if let Some(mut conn) = self.conns.get_mut(index).and_then(Option::take) {
            let _ = poll.registry().deregister(&mut conn.stream);
            if let Some(why) = why {
                tracing::warn!(rank = ?conn.rank, "refused a control connection: {why}");
            }
            if let Some(rank) = conn.rank {
                self.ranks[rank as usize].conn = None;
                self.control_closed(poll, rank);
            }
            if let Some(node) = conn.agent {
                self.agent_closed(node);
            }
            self.free_conns.push(index);
        }
    }

    /// Serves connection `index`; returns how many bytes it read.
    fn conn_event(
        &mut self,
        poll: &mut Poll,
        index: usize,
        readable: bool,
    ) -> anyhow::Result<usize> {
        let shape = self.shape();
        let registered = &self.registered_pids;
        let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) else {
            return Ok(0);
        };
        if let Err(refusal) = conn.flush() {
            self.close_conn(poll, index, refusal_reason(refusal));
            return Ok(0);
        }
        if !readable {
            return Ok(0);
        }
        let (requests, closed, read) = conn.read(&self.secret, shape, registered);
        if conn.wants_write() {
            // A welcome to a rank that just proved itself.
            self.dirty.push(index);
        }
        for request in requests {
            self.handle(index, request);
        }
        if let Some(refusal) = closed {
            self.close_conn(poll, index, refusal_reason(refusal));
        }
        Ok(read)
    }

    fn handle(&mut self, conn: usize, request: Request) {
        match request {
            Request::Registered { rank, pid, address } => {
                let slot = &mut self.ranks[rank as usize];
                if slot.pid != pid {
                    tracing::debug!(
                        rank,
                        pid,
                        spawned = slot.pid,
                        "rank registered from another process than the one started"
                    );
                }
                slot.conn = Some(conn);
                slot.address = Some(address.clone());
                if let Some(events) = self.console_events.as_mut() {
                    events.push(ConsoleEvent::Registered(rank));
                }
                slot.last_heartbeat = Some(Instant::now());
                self.registered_pids.insert(rank, pid);
                self.registered_count += 1;
                if self.registered_count == self.ranks.len() as u32 {
                    self.wired_at = Some(self.started.elapsed());
                    tracing::info!(
                        wireup_s = self.started.elapsed().as_secs_f64(),
                        "all ranks wired up"
                    );
                }
                // Ranks that failed before this one registered: tell it now.
                let known: Vec<(u32, FailureCause)> =
                    self.failures.iter().map(|f| (f.rank, f.cause)).collect();
                for (failed, cause) in known {
                    self.send_to(rank, &failure_notice(failed, cause));
                }
                for asker in self.pending_resolves.remove(&rank).unwrap_or_default() {
                    self.send_to(
                        asker,
                        &ftcoll_runtime::control::ControlMsg::Address {
                            peer: rank,
                            address: address.clone(),
                        },
                    );
                }
            }
            Request::Heartbeat(rank) => {
                self.ranks[rank as usize].last_heartbeat = Some(Instant::now())
            }
            Request::AgentRegistered { node, pid, host } => {
                self.agent_registered(conn, node, pid, &host)
            }
            Request::AgentHeartbeat(node) => self.agent_heartbeat(node),
            Request::RankExited {
                node,
                rank,
                code,
                signal,
            } => self.remote_exited(node, rank, code, signal),
            Request::Unreachable { from, peer } => {
                let slot = &mut self.ranks[peer as usize];
                if !slot.exited && slot.pending_fence.is_none() {
                    tracing::info!(from, peer, "transport reports the peer unreachable");
                    slot.pending_fence = Some((Instant::now(), FailureCause::Unreachable));
                }
            }
            Request::Resolve { from, peer } => {
                let slot = &self.ranks[peer as usize];
                let answer = match (&slot.address, slot.exited) {
                    (Some(address), _) => Some(address.clone()),
                    (None, true) => Some(String::new()),
                    (None, false) => None,
                };
                match answer {
                    Some(address) => self.send_to(
                        from,
                        &ftcoll_runtime::control::ControlMsg::Address { peer, address },
                    ),
                    None => self.pending_resolves.entry(peer).or_default().push(from),
                }
            }
            Request::Report(rank, report) => {
                let slot = &mut self.ranks[rank as usize];
                slot.last_heartbeat = Some(Instant::now());
                if let Some(events) = self.console_events.as_mut() {
                    // A console job runs until quit: keep no per-operation history.
                    events.push(ConsoleEvent::Reported(rank, report.op));
                } else if slot.reports.len() < 1 << 20 {
                    slot.reports.push(report);
                }
            }
            Request::Telemetry(rank, sample) => {
                self.ranks[rank as usize].last_heartbeat = Some(Instant::now());
                if let Some(events) = self.console_events.as_mut() {
                    events.push(ConsoleEvent::Sample(rank, sample));
                }
            }
            Request::Timings(rank, nanos) => {
                // A long loop's timings come in several messages, in order.
                let timings = &mut self.ranks[rank as usize].timings;
                let room = MAX_TIMINGS_PER_RANK.saturating_sub(timings.len());
                timings.extend(nanos.into_iter().take(room));
            }
            Request::Finished { rank, pss_kb } => {
                let slot = &mut self.ranks[rank as usize];
                slot.finished = true;
                slot.pss_kb = pss_kb;
            }
        }
    }

    fn send_to(&mut self, rank: u32, msg: &ftcoll_runtime::control::ControlMsg) {
        let Some(index) = self.ranks[rank as usize].conn else {
            return;
        };
        if let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) {
            self.dirty.push(index);
            if !conn.queue(msg) {
                tracing::warn!(
                    rank,
                    "rank does not read its control messages; dropping one"
                );
            }
        }
    }

    /// Writes what was queued since the last turn (a socket that is full is written again
    /// on its writable event), and now and then closes connections that never said hello.
    fn flush_all(&mut self, poll: &mut Poll) -> anyhow::Result<()> {
        let mut broken = Vec::new();
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for index in dirty {
            if let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) {
                if let Err(refusal) = conn.flush() {
                    broken.push((index, refusal_reason(refusal)));
                }
            }
        }
        // Looking at every connection on every turn would cost O(N) per message at
        // thousands of ranks; the hello deadline is two minutes.
        if self.last_hello_scan.elapsed() >= LIVENESS_EVERY {
            self.last_hello_scan = Instant::now();
            for (index, conn) in self.conns.iter().enumerate() {
                if let Some(conn) = conn {
                    let anonymous = conn.rank.is_none() && conn.agent.is_none();
                    if anonymous && conn.opened.elapsed() > REGISTER_TIMEOUT {
                        broken.push((index, Some("no hello in time".into())));
                    }
                }
            }
        }
        for (index, why) in broken {
            self.close_conn(poll, index, why);
        }
        Ok(())
    }

    /// A child exited: record it, and if it had not finished, tell every survivor.
    fn reaped(&mut self, poll: &mut Poll, rank: u32) -> anyhow::Result<()> {
        // Its last messages may still sit in its control socket (the pidfd event can come
        // first): read them before judging whether it finished. A pass reads at most half a
        // control message; a dead rank's socket holds only what it wrote, so the passes end.
        for _ in 0..MAX_EXIT_DRAIN_PASSES {
            let Some(index) = self.ranks[rank as usize].conn else {
                break;
            };
            if self.conn_event(poll, index, true)? == 0 {
                break;
            }
        }
        let slot = &mut self.ranks[rank as usize];
        if slot.exited {
            return Ok(());
        }
        let Some(child) = slot.child.as_mut() else {
            return Ok(());
        };
        let status = match child.try_wait() {
            Ok(Some(status)) => status,
            Ok(None) => return Ok(()),
            Err(e) => return Err(e).context("waiting for a rank"),
        };
        slot.exited = true;
        if self.sweep_provider_shm {
            crate::leftovers::remove_provider_shm_files(slot.pid);
        }
        if let Some(pidfd) = slot.pidfd.take() {
            let _ = poll
                .registry()
                .deregister(&mut SourceFd(&pidfd.as_raw_fd()));
        }
        self.record_exit(rank, status.success(), describe_exit(status));
        Ok(())
    }

    /// Rank `rank` is dead (`clean`: it exited with status 0; `how`: its exit as seen). Unless
    /// it finished its work and exited cleanly, it failed: record it and tell every survivor.
    fn record_exit(&mut self, rank: u32, clean: bool, how: String) {
        let slot = &mut self.ranks[rank as usize];
        slot.exited = true;
        if slot.finished && clean {
            return;
        }
        let cause = slot.fenced.unwrap_or(FailureCause::Exited);
        let how = match cause {
            FailureCause::Exited | FailureCause::NodeLost => how,
            other => format!("{} (killed by the launcher)", other.name()),
        };
        let at_s = self.started.elapsed().as_secs_f64();
        tracing::warn!(rank, %how, at_s, "rank failed");
        if let Some(events) = self.console_events.as_mut() {
            events.push(ConsoleEvent::Failed(rank, how.clone()));
        }
        self.failures.push(FailureRecord {
            rank,
            cause,
            how,
            at_s,
        });
        let notice = failure_notice(rank, cause);
        for other in 0..self.ranks.len() as u32 {
            if other != rank && !self.ranks[other as usize].exited {
                self.send_to(other, &notice);
            }
        }
        for asker in self.pending_resolves.remove(&rank).unwrap_or_default() {
            self.send_to(
                asker,
                &ftcoll_runtime::control::ControlMsg::Address {
                    peer: rank,
                    address: String::new(),
                },
            );
        }
    }

    /// A registered rank's control connection closed. Usually the process died (its EOF tends to
    /// arrive before the pidfd event): reap it now so the cause is its exit. A rank that drops
    /// the connection while alive and unfinished cannot be told of failures any more: it is
    /// killed first, then reported.
    fn control_closed(&mut self, poll: &mut Poll, rank: u32) {
        let slot = &mut self.ranks[rank as usize];
        if let Some((clean, how)) = slot.remote_exit.take() {
            self.record_exit(rank, clean, how);
            return;
        }
        if slot.exited || slot.finished || slot.fenced.is_some() {
            return;
        }
        if slot.node_agent.is_some() {
            // Its agent reports its exit if it died; if not, it is fenced after the grace.
            slot.pending_fence
                .get_or_insert((Instant::now(), FailureCause::ControlLost));
            return;
        }
        // The process may be exiting right now; give it a moment before calling it a hang.
        let mut exited = false;
        for _ in 0..50 {
            exited = slot
                .child
                .as_mut()
                .is_some_and(|c| !matches!(c.try_wait(), Ok(None)));
            if exited {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        if exited {
            // try_wait reaped it; `reaped` reads the stored status.
            let _ = self.reaped(poll, rank);
        } else {
            self.fence(rank, FailureCause::ControlLost);
        }
    }

    /// Kills a suspected rank; it is reported once reaped (fail-stop by construction).
    fn fence(&mut self, rank: u32, cause: FailureCause) {
        let slot = &mut self.ranks[rank as usize];
        if slot.exited || slot.fenced.is_some() {
            return;
        }
        slot.fenced = Some(cause);
        if let Some(events) = self.console_events.as_mut() {
            events.push(ConsoleEvent::Suspected(rank, cause.name()));
        }
        tracing::warn!(
            rank,
            cause = cause.name(),
            "suspected; killing before anyone is told"
        );
        self.kill_rank(rank);
    }

    /// SIGKILL to `rank`, wherever it runs.
    fn kill_rank(&mut self, rank: u32) {
        let slot = &mut self.ranks[rank as usize];
        if slot.exited {
            return;
        }
        match slot.child.as_mut() {
            Some(child) => {
                let _ = child.kill();
            }
            None => self.signal_remote(rank, rustix::process::Signal::KILL.as_raw()),
        }
    }

    fn check_liveness(&mut self, n: u32) {
        if self.paused {
            return;
        }
        let now = Instant::now();
        // A launcher that did not run for a good part of the suspicion timeout (a machine
        // with far more runnable ranks than cores starves it too) could not read anyone's
        // heartbeats meanwhile: its own stall is nobody's silence, so suspicion restarts.
        let gap = now.duration_since(self.last_liveness_check.unwrap_or(now));
        // Suspicion has a resolution of a fraction of its timeout: looking at every rank on
        // every turn of a busy loop (thousands of samples and beats a second) would cost more
        // than everything else the launcher does.
        if self.last_liveness_check.is_some() && gap < (self.suspect / 16).min(LIVENESS_EVERY) {
            return;
        }
        self.last_liveness_check = Some(now);
        if gap > self.suspect / 4 {
            tracing::warn!(
                stalled_ms = gap.as_millis() as u64,
                "the launcher itself stalled; restarting heartbeat suspicion"
            );
            for slot in &mut self.ranks {
                if slot.last_heartbeat.is_some() {
                    slot.last_heartbeat = Some(now);
                }
            }
            return;
        }
        self.check_agents(now);
        for rank in 0..n {
            let slot = &self.ranks[rank as usize];
            if slot.exited || slot.finished || slot.fenced.is_some() {
                continue;
            }
            let silent = match slot.last_heartbeat {
                Some(beat) => now.duration_since(beat) > self.suspect,
                None => self.started.elapsed() > REGISTER_TIMEOUT,
            };
            let graced = slot
                .pending_fence
                .filter(|(since, _)| now.duration_since(*since) > FENCE_GRACE);
            if silent {
                self.fence(rank, FailureCause::HeartbeatTimeout);
            } else if let Some((_, cause)) = graced {
                self.fence(rank, cause);
            }
        }
    }

    /// How long until the next scripted launcher fault is due; `None` when none is left or
    /// the ranks are not wired up yet (fault times count from then).
    fn until_next_fault(&self) -> Option<Duration> {
        let wired = self.wired_at?;
        let &(at, _) = self.launcher_faults.first()?;
        let since = self.started.elapsed().saturating_sub(wired);
        Some(at.saturating_sub(since))
    }

    fn apply_launcher_faults(&mut self) {
        let Some(wired) = self.wired_at else {
            return;
        };
        let since = self.started.elapsed().saturating_sub(wired);
        while let Some(&(at, fault)) = self.launcher_faults.first() {
            if at > since {
                break;
            }
            self.launcher_faults.remove(0);
            match fault {
                LauncherFault::Kill(rank) => {
                    tracing::warn!(rank, "scripted kill");
                    self.kill_rank(rank);
                }
                LauncherFault::Stop(rank) => {
                    tracing::warn!(rank, "scripted stop (SIGSTOP)");
                    self.signal(rank, rustix::process::Signal::STOP);
                    self.ranks[rank as usize].stopped = true;
                }
            }
        }
    }

    /// Drops every control connection without judging anyone (the job is over): agents and
    /// ranks still running see the end of their connection and exit.
    fn close_all(&mut self, poll: &mut Poll) {
        for conn in self.conns.iter_mut().filter_map(Option::take) {
            let mut conn = conn;
            let _ = poll.registry().deregister(&mut conn.stream);
        }
    }

    fn kill_all(&mut self) {
        for rank in 0..self.ranks.len() as u32 {
            self.kill_rank(rank);
        }
    }

    fn reap_all_blocking(&mut self) {
        for slot in &mut self.ranks {
            if let Some(child) = slot.child.as_mut() {
                let _ = child.wait();
                if self.sweep_provider_shm {
                    crate::leftovers::remove_provider_shm_files(slot.pid);
                }
            }
            slot.exited = true;
        }
    }
}

fn refusal_reason(refusal: Refusal) -> Option<String> {
    match refusal {
        Refusal::Closed => None,
        Refusal::Bad(why) => Some(why),
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "ended".to_string(),
    }
}

impl Loop {
    /// Hands the console what happened since the last turn.
    fn feed_console(&mut self, console: &mut dyn Watcher) {
        let Some(events) = self.console_events.as_mut() else {
            return;
        };
        for event in std::mem::take(events) {
            match event {
                ConsoleEvent::Registered(rank) => console.registered(rank, self),
                ConsoleEvent::Sample(rank, sample) => console.sample(rank, sample),
                ConsoleEvent::Reported(rank, op) => console.reported(rank, op),
                ConsoleEvent::Failed(rank, how) => console.failed(rank, &how),
                ConsoleEvent::Suspected(rank, why) => console.suspected(rank, why),
            }
        }
    }

    fn signal(&mut self, rank: u32, signal: rustix::process::Signal) {
        let slot = &self.ranks[rank as usize];
        if slot.exited {
            return;
        }
        if slot.node_agent.is_some() {
            self.signal_remote(rank, signal.as_raw());
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(slot.pid as i32) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }
}

impl JobHandle for Loop {
    fn kill(&mut self, rank: u32) {
        self.kill_rank(rank);
    }

    fn stop(&mut self, rank: u32) {
        self.signal(rank, rustix::process::Signal::STOP);
        self.ranks[rank as usize].stopped = true;
    }

    fn pause(&mut self, paused: bool) {
        if paused == self.paused {
            return;
        }
        self.paused = paused;
        let signal = if paused {
            rustix::process::Signal::STOP
        } else {
            rustix::process::Signal::CONT
        };
        for rank in 0..self.ranks.len() as u32 {
            // A rank the user hung on purpose stays hung.
            if !self.ranks[rank as usize].stopped {
                self.signal(rank, signal);
            }
        }
        if !paused {
            // The pause was nobody's silence.
            let now = Instant::now();
            for slot in &mut self.ranks {
                if slot.last_heartbeat.is_some() {
                    slot.last_heartbeat = Some(now);
                }
            }
        }
    }

    fn send(&mut self, rank: u32, msg: &ftcoll_runtime::control::ControlMsg) {
        if (rank as usize) < self.ranks.len() {
            self.send_to(rank, msg);
        }
    }

    fn exited(&self, rank: u32) -> bool {
        self.ranks.get(rank as usize).is_none_or(|r| r.exited)
    }

    fn suspected(&self, rank: u32) -> bool {
        self.ranks
            .get(rank as usize)
            .is_some_and(|r| r.fenced.is_some() && !r.exited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telemetry_intake_is_bounded() {
        for n in [1, 16, 400, 4096, 1 << 20] {
            let per_second = f64::from(n) / telemetry_period(n).as_secs_f64();
            assert!(per_second <= 4096.0 + 1.0 || n > 4096, "{n}: {per_second}");
        }
        assert_eq!(telemetry_period(16), Duration::from_millis(100));
        assert_eq!(telemetry_period(4096), Duration::from_millis(1000));
    }
}
