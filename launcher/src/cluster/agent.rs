//! The node agent: `ftcoll-launch __agent`, started on each host by ssh or srun.
//!
//! The launcher cannot fork, reap or signal processes on other machines, so one agent per host
//! does it for the ranks of that host. It connects to the launcher's control plane, proves the
//! job secret, and waits for one `Spawn`; then it starts its ranks (their parent, so that a
//! rank whose agent dies gets SIGKILL from the kernel), reports each exit as `RankExited`,
//! relays the launcher's `Signal`s (kills, stops), and beats like a rank. When the control
//! connection ends — the launcher died or gave up on the job — it kills its ranks and exits:
//! nothing of the job outlives it on its host.
//!
//! Three threads, each blocking on one thing: the main thread reads control messages, a reaper
//! waits for children, a beater writes heartbeats. They share the stream's writer and the
//! table of live ranks behind one mutex each.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::net::{IpAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{bail, Context};
use ftcoll_runtime::control::msg::{agent_proof, CONTROL_MAGIC};
use ftcoll_runtime::control::ControlMsg;
use ftcoll_runtime::env::{from_hex, to_hex};
use rustix::process::{Pid, Signal, WaitOptions};

/// The variable of a spawn order that names the directory ranks start in.
pub const WORKDIR_VAR: &str = "FTCOLL_WORKDIR";
/// Time to connect and pass the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
/// Ranks one agent starts at most (a host with more cores than this is not a host).
const MAX_RANKS_PER_AGENT: u32 = 1 << 16;

/// Flags of the hidden `__agent` subcommand.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The launcher's control address, ip:port.
    #[arg(long)]
    pub control: String,
    /// The job id (hex).
    #[arg(long)]
    pub job: String,
    /// This agent's node index; without it, Slurm's SLURM_NODEID (one agent per node).
    #[arg(long)]
    pub node: Option<u32>,
    /// Heartbeat period in ms.
    #[arg(long, default_value_t = 1000)]
    pub heartbeat_ms: u64,
}

/// Runs the agent; returns when its ranks are gone.
pub fn main(args: &AgentArgs) -> anyhow::Result<()> {
    let secret = read_secret()?;
    let node = match args.node {
        Some(node) => node,
        None => std::env::var("SLURM_NODEID")
            .ok()
            .and_then(|v| v.parse().ok())
            .context("agent: no --node and no SLURM_NODEID; the agent is started by ftcoll-launch, not by hand")?,
    };
    let mut stream = TcpStream::connect(&args.control).with_context(|| {
        format!(
            "agent on node {node}: cannot reach the launcher at {}; check --bind and firewalls",
            args.control
        )
    })?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let nonce = match ControlMsg::read_from(&mut stream)? {
        ControlMsg::Challenge { nonce } => nonce,
        other => bail!("agent: expected a challenge, got {other:?}"),
    };
    ControlMsg::AgentHello {
        magic: CONTROL_MAGIC,
        node,
        pid: std::process::id(),
        proof: agent_proof(&secret, &nonce, node),
        host: rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned(),
    }
    .write_to(&mut stream)?;
    match ControlMsg::read_from(&mut stream)? {
        ControlMsg::Welcome => {}
        other => bail!("agent: the launcher refused node {node}: {other:?}"),
    }
    // The address peers reach this host at: the one the launcher sees this agent from.
    let bind_ip = stream.local_addr()?.ip();
    // Until the spawn order, the launcher may still give up on the job (another host failed
    // its check): a closed connection then ends the agent with nothing started.
    stream.set_read_timeout(None)?;
    let Ok(spawn) = ControlMsg::read_from(&mut stream) else {
        // The launcher gave up on the job before starting it (another host failed its check,
        // and the launcher said why): nothing to do here.
        tracing::debug!(node, "the launcher ended the job before it started");
        return Ok(());
    };
    let ranks = Arc::new(Mutex::new(spawn_ranks(&spawn, &secret, bind_ip)?));
    let writer = Arc::new(Mutex::new(stream.try_clone()?));
    let reaper = {
        let ranks = Arc::clone(&ranks);
        let writer = Arc::clone(&writer);
        std::thread::Builder::new()
            .name("ftcoll-reaper".into())
            .spawn(move || reap(&ranks, &writer))?
    };
    {
        let writer = Arc::clone(&writer);
        let ranks = Arc::clone(&ranks);
        let period = Duration::from_millis(args.heartbeat_ms.max(1));
        std::thread::Builder::new()
            .name("ftcoll-beat".into())
            .stack_size(64 * 1024)
            .spawn(move || beat(&writer, &ranks, period))?;
    }
    // Bounded by the connection: every message is handled at once; EOF or an error ends it.
    loop {
        match ControlMsg::read_from(&mut stream) {
            Ok(ControlMsg::Signal { rank, signal }) => send_signal(&ranks, rank, signal),
            Ok(ControlMsg::Shutdown) => break,
            Ok(other) => tracing::debug!(?other, "agent: ignored control message"),
            Err(_) => break,
        }
        if lock(&ranks).is_empty() {
            break;
        }
    }
    // Whatever still runs goes with the agent; the reaper reports it if the launcher listens.
    for &pid in lock(&ranks).keys() {
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
    }
    let _ = reaper.join();
    Ok(())
}

/// The secret: from `FTCOLL_SECRET` (srun passes the environment), else the first line of
/// standard input (ssh: never on a command line, where `ps` would show it).
fn read_secret() -> anyhow::Result<Vec<u8>> {
    let text = match std::env::var("FTCOLL_SECRET") {
        Ok(text) => text,
        Err(_) => {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .context("agent: reading the job secret from stdin")?;
            line.trim().to_string()
        }
    };
    from_hex(&text)
        .filter(|s| s.len() >= 16)
        .context("agent: no job secret (expected hex in FTCOLL_SECRET or on stdin); the agent is started by ftcoll-launch")
}

/// Starts the ranks of a `Spawn`; returns pid → rank.
fn spawn_ranks(
    spawn: &ControlMsg,
    secret: &[u8],
    bind_ip: IpAddr,
) -> anyhow::Result<BTreeMap<i32, u32>> {
    let ControlMsg::Spawn {
        first,
        count,
        program,
        args,
        env,
        quiet,
    } = spawn
    else {
        bail!("agent: expected a spawn order, got {spawn:?}");
    };
    if *count > MAX_RANKS_PER_AGENT {
        bail!("agent: asked for {count} ranks, more than {MAX_RANKS_PER_AGENT}");
    }
    let mut ranks = BTreeMap::new();
    for rank in *first..first.saturating_add(*count) {
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("FTCOLL_RANK", rank.to_string())
            .env("FTCOLL_SECRET", to_hex(secret))
            .env("FTCOLL_LAUNCHER_PID", std::process::id().to_string())
            .env("FTCOLL_BIND_IP", bind_ip.to_string())
            .stdin(Stdio::null());
        if *quiet {
            command.stdout(Stdio::null());
        }
        if let Some((_, dir)) = env.iter().find(|(k, _)| k == WORKDIR_VAR) {
            if std::path::Path::new(dir).is_dir() {
                command.current_dir(dir);
            }
        }
        let child = command
            .spawn()
            .with_context(|| format!("agent: cannot start rank {rank} ({program}) on this host; is the path the same on every host?"))?;
        // The reaper waits for any child: the handle is not needed (dropping it does not kill).
        ranks.insert(child.id() as i32, rank);
        drop(child);
    }
    Ok(ranks)
}

/// Waits for children until none is left, reporting each exit.
fn reap(ranks: &Mutex<BTreeMap<i32, u32>>, writer: &Mutex<TcpStream>) {
    // Bounded: each wait reaps one of a finite set of children, and ECHILD ends it.
    loop {
        let (pid, status) = match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some(reaped)) => reaped,
            Ok(None) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return,
        };
        let raw_pid = pid.as_raw_nonzero().get();
        let Some(rank) = lock(ranks).remove(&raw_pid) else {
            continue;
        };
        crate::leftovers::remove_provider_shm_files(raw_pid as u32);
        let (code, signal) = match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => (code, 0),
            (None, Some(signal)) => (-1, signal),
            _ => (-1, 0),
        };
        let report = ControlMsg::RankExited { rank, code, signal };
        let _ = report.write_to(&mut *lock(writer));
        if lock(ranks).is_empty() {
            // Let the launcher see every report, then end the connection: the main thread's
            // read returns and the agent exits.
            let _ = lock(writer).shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

fn beat(writer: &Mutex<TcpStream>, ranks: &Mutex<BTreeMap<i32, u32>>, period: Duration) {
    while !lock(ranks).is_empty() {
        std::thread::sleep(period);
        if ControlMsg::Heartbeat.write_to(&mut *lock(writer)).is_err() {
            return;
        }
        let _ = lock(writer).flush();
    }
}

fn send_signal(ranks: &Mutex<BTreeMap<i32, u32>>, rank: u32, signal: i32) {
    let ranks = lock(ranks);
    // Only a child not reaped yet: its pid cannot have been reused.
    let Some(pid) = ranks
        .iter()
        .find(|(_, &r)| r == rank)
        .and_then(|(&pid, _)| Pid::from_raw(pid))
    else {
        return;
    };
    let Some(signal) = Signal::from_named_raw(signal) else {
        tracing::warn!(signal, "agent: unknown signal number");
        return;
    };
    let _ = rustix::process::kill_process(pid, signal);
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
