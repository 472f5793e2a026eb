//! The launcher's main loop for a real job: the state it keeps of every rank, and the steps
//! of a run (start, watch, report). Each concern of the loop has its own file: [`start`]
//! (listener, segment, environment, spawning), [`control`] (the control plane), [`exits`]
//! (reaping, failures, fencing, liveness), [`faults`] (scripted launcher faults), [`watched`]
//! (the watcher's view and handle) and [`remote`] (node agents on other hosts).

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::process::Child;
use std::time::{Duration, Instant};

use ftcoll_runtime::control::{FailureCause, OpReport};
use ftcoll_runtime::transport::TransportKind;
use mio::Token;

use super::report::{FailureRecord, LiveOutcome};
use super::server::Conn;
use super::spawn::{raise_fd_limit, random_bytes};
use super::spec::{LaunchOptions, LiveSpec};
use super::watch::{Flow, Watcher};

mod control;
mod exits;
mod faults;
mod remote;
mod start;
mod watched;

use faults::{launcher_faults, LauncherFault};
use watched::{telemetry_period, ConsoleEvent};

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
    remote_exit: Option<exits::RankExit>,
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

/// Runs a real job and returns what happened.
pub fn run(spec: &LiveSpec) -> anyhow::Result<LiveOutcome> {
    run_with_console(spec, None)
}

/// Runs a real job watched by `console` (which paces its operations and injects faults).
pub fn run_with_console(
    spec: &LiveSpec,
    console: Option<&mut dyn Watcher>,
) -> anyhow::Result<LiveOutcome> {
    let n = spec.launch.n;
    raise_fd_limit(2 * u64::from(n) + 64)?;
    let job_id = u64::from_le_bytes(random_bytes(8)?.try_into().unwrap_or_default());
    let secret = random_bytes(32)?;
    let (listener, control_addr) = start::open_control_listener(spec)?;
    let segment = start::shm_segment(spec, job_id)?;
    let telemetry = console.as_ref().is_some_and(|c| c.telemetry());
    let env = start::job_env(
        spec,
        job_id,
        &control_addr,
        &secret,
        segment.as_ref(),
        telemetry,
    )?;
    let launcher_faults = launcher_faults(&spec.faults, n, env.ranks_per_node)?;
    let mut plane = start::ControlPlane::listen(listener, &control_addr)?;
    let started = Instant::now();
    let watched = console.as_ref().map(|c| c.keeps_reports());
    let mut state = Loop::new(spec, secret, launcher_faults, watched, started);
    // Kept until the job ends: dropping it reaps (or kills) the ssh/srun processes.
    let agents = match spec.cluster.as_ref() {
        Some(cluster) => Some(state.start_remote(&mut plane, cluster, spec, &env)?),
        None => {
            state.spawn_local(&mut plane, spec, &env)?;
            None
        }
    };
    // The segment's descriptor has been inherited; the launcher's mapping can go.
    drop(segment);
    let spawned_s = started.elapsed().as_secs_f64();
    tracing::info!(n, spawned_s, "ranks started");
    let timed_out = state.watch(&mut plane, console, &spec.launch, env.heartbeat_ms)?;
    if agents.is_some() {
        // Kills of remote ranks travel through their agents.
        state.flush_all(&mut plane.poll)?;
        state.close_all(&mut plane.poll);
    }
    drop(agents);
    Ok(state.outcome(spec, started, spawned_s, timed_out))
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
    /// When every rank had registered or failed (the start fence); scripted faults count
    /// from then.
    wired_at: Option<Duration>,
    started: Instant,
    secret: Vec<u8>,
    suspect: Duration,
    launcher_faults: Vec<(Duration, LauncherFault)>,
    registered_pids: BTreeMap<u32, u32>,
    /// What the console must hear of, drained every turn (`None`: no console).
    console_events: Option<Vec<ConsoleEvent>>,
    /// Whether every operation's reports are kept (a console job runs until quit: not there).
    keep_reports: bool,
    /// The console paused the job (every rank stopped): no suspicion meanwhile.
    paused: bool,
    /// When liveness was last judged (to tell a stalled launcher from silent ranks).
    last_liveness_check: Option<Instant>,
    /// Connections with output queued since the last flush (duplicates allowed).
    dirty: Vec<usize>,
    /// When connections were last checked for a missing hello.
    last_hello_scan: Instant,
}

impl Loop {
    /// The loop of a job of `spec` before any rank starts (`watched`: a watcher hears of it,
    /// and says whether the job's reports are kept).
    fn new(
        spec: &LiveSpec,
        secret: Vec<u8>,
        launcher_faults: Vec<(Duration, LauncherFault)>,
        watched: Option<bool>,
        started: Instant,
    ) -> Loop {
        Loop {
            ranks: (0..spec.launch.n).map(|_| RankSlot::default()).collect(),
            sweep_provider_shm: spec.transport == TransportKind::Ofi,
            agents: Vec::new(),
            conns: Vec::new(),
            free_conns: Vec::new(),
            pending_resolves: BTreeMap::new(),
            failures: Vec::new(),
            wired_at: None,
            started,
            secret,
            suspect: Duration::from_millis(spec.launch.suspect_ms),
            launcher_faults,
            registered_pids: BTreeMap::new(),
            console_events: watched.map(|_| Vec::new()),
            keep_reports: watched.unwrap_or(true),
            paused: false,
            last_liveness_check: None,
            dirty: Vec::new(),
            last_hello_scan: Instant::now(),
        }
    }

    /// Serves the job until every rank has exited, the watcher quits, or (unwatched) the job
    /// runs past its timeout; returns whether it timed out.
    fn watch(
        &mut self,
        plane: &mut start::ControlPlane,
        mut console: Option<&mut dyn Watcher>,
        launch: &LaunchOptions,
        heartbeat_ms: u64,
    ) -> anyhow::Result<bool> {
        let n = launch.n;
        let job_timeout = Duration::from_secs(launch.timeout_s);
        let mut tick = Duration::from_millis((heartbeat_ms / 2).clamp(5, 250));
        if console.is_some() {
            // Keys must feel immediate; the console draws at its own bounded rate.
            tick = tick.min(CONSOLE_TICK);
        }
        while self.ranks.iter().any(|r| !r.exited) {
            if let Some(console) = console.as_deref_mut() {
                self.feed_console(console);
                if console.tick(self)? == Flow::Quit {
                    self.kill_all();
                    self.reap_all_blocking();
                    break;
                }
            } else if self.started.elapsed() > job_timeout {
                tracing::error!("job exceeded --timeout-s {}; killing it", launch.timeout_s);
                self.kill_all();
                self.reap_all_blocking();
                return Ok(true);
            }
            // A scripted fault is due at its time, not at the next tick (up to 250 ms later).
            let wait = self.until_next_fault().map_or(tick, |due| due.min(tick));
            let handled = self.serve(
                &mut plane.poll,
                &mut plane.listener,
                &mut plane.events,
                wait,
                n,
            )?;
            if console.is_some() && handled < EVENT_CAPACITY / 8 {
                // Thousands of ranks' samples and beats arrive spread out: taking them a few
                // milliseconds' worth at a time wakes the launcher hundreds of times a second
                // instead of thousands. Control answers wait at most this long more.
                std::thread::sleep(CONSOLE_COALESCE);
            }
            // Only judge silence once every readable connection was read: heartbeats may wait
            // unread in sockets the last poll did not reach.
            if handled < EVENT_CAPACITY {
                self.check_liveness(n);
            }
            self.apply_launcher_faults();
        }
        Ok(false)
    }

    /// What happened, once the job is over.
    fn outcome(
        mut self,
        spec: &LiveSpec,
        started: Instant,
        spawned_s: f64,
        timed_out: bool,
    ) -> LiveOutcome {
        let cluster = spec.cluster.as_ref();
        let wall_s = started.elapsed().as_secs_f64();
        LiveOutcome {
            n: spec.launch.n,
            transport: spec.transport,
            launch: cluster.map_or("local", |c| c.route.name()),
            hosts: cluster.map_or(1, |c| c.placement.nodes.len() as u32),
            wall_s,
            spawn_s: spawned_s,
            wireup_s: self.wired_at.map(|t| t.as_secs_f64()),
            reports: self.ranks.iter().map(|r| r.reports.clone()).collect(),
            timings: self
                .ranks
                .iter_mut()
                .map(|r| std::mem::take(&mut r.timings))
                .collect(),
            pss_kb: self.ranks.iter().map(|r| r.pss_kb).collect(),
            launcher_pss_kb: ftcoll_runtime::comm::own_pss_kb(),
            timed_out,
            unfinished: self.ranks.iter().filter(|r| !r.finished).count() as u32,
            failures: self.failures,
        }
    }
}
