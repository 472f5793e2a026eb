//! Starting rank processes.

use std::process::{Child, Command, Stdio};

use anyhow::Context;
use ftcoll_runtime::env::to_hex;

/// What every rank of a job gets in its environment.
pub struct JobEnv {
    /// Ranks.
    pub size: u32,
    /// Job id.
    pub job_id: u64,
    /// Control address.
    pub control_addr: String,
    /// Secret.
    pub secret: Vec<u8>,
    /// `shm` or `tcp`.
    pub transport: &'static str,
    /// Shared segment descriptor.
    pub shm_fd: Option<i32>,
    /// TCP data-plane bind IP.
    pub bind_ip: String,
    /// Ranks per node.
    pub ranks_per_node: u32,
    /// Heartbeat period in ms.
    pub heartbeat_ms: u64,
    /// Spin budget in µs.
    pub spin_us: u64,
    /// Pin each rank to a core (`FTCOLL_BIND=core`), set when ranks outnumber cores and the
    /// user left `FTCOLL_BIND` unset.
    pub bind_cores: bool,
    /// Fault specs, `;`-joined.
    pub faults: String,
    /// The agreement tree (`--era-tree`).
    pub era_tree: String,
    /// Status-sample period for the console in ms (0: no console).
    pub telemetry_ms: u64,
    /// libfabric provider (`--ofi-provider`).
    pub ofi_provider: Option<String>,
}

impl JobEnv {
    /// The variables every rank of the job gets alike (not its rank, the secret, its parent
    /// or its bind address, which depend on who starts it and where).
    pub fn common_vars(&self) -> Vec<(String, String)> {
        let mut vars = vec![
            ("FTCOLL_SIZE", self.size.to_string()),
            ("FTCOLL_JOB_ID", format!("{:016x}", self.job_id)),
            ("FTCOLL_CONTROL_ADDR", self.control_addr.clone()),
            ("FTCOLL_TRANSPORT", self.transport.to_string()),
            ("FTCOLL_RANKS_PER_NODE", self.ranks_per_node.to_string()),
            ("FTCOLL_HEARTBEAT_MS", self.heartbeat_ms.to_string()),
            ("FTCOLL_SPIN_US", self.spin_us.to_string()),
            ("FTCOLL_FAULTS", self.faults.clone()),
            ("FTCOLL_ERA_TREE", self.era_tree.clone()),
            ("FTCOLL_TELEMETRY_MS", self.telemetry_ms.to_string()),
        ];
        if let Some(provider) = &self.ofi_provider {
            vars.push(("FTCOLL_OFI_PROVIDER", provider.clone()));
        }
        if self.bind_cores {
            vars.push(("FTCOLL_BIND", "core".into()));
        }
        if self.transport == "ofi" {
            // libfabric loads PSM's library, which writes a backtrace file into the working
            // directory of every process that dies of a signal: killed ranks are routine here.
            vars.push(("IPATH_NO_BACKTRACE", "1".to_string()));
        }
        vars.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

/// Starts rank `rank` running `program args`.
pub fn spawn_rank(
    env: &JobEnv,
    rank: u32,
    program: &str,
    args: &[String],
    quiet: bool,
) -> anyhow::Result<Child> {
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env.common_vars())
        .env("FTCOLL_RANK", rank.to_string())
        .env("FTCOLL_SECRET", to_hex(&env.secret))
        .env("FTCOLL_LAUNCHER_PID", std::process::id().to_string())
        .env("FTCOLL_BIND_IP", &env.bind_ip)
        .stdin(Stdio::null());
    if env.telemetry_ms > 0 {
        // The console owns the terminal: rank logs would garble it.
        command.stderr(Stdio::null());
    }
    if let Some(fd) = env.shm_fd {
        command.env("FTCOLL_SHM_FD", fd.to_string());
    }
    if quiet {
        command.stdout(Stdio::null());
    }
    // No pre_exec hook: it would force fork() instead of the much cheaper vfork/posix_spawn
    // path, which matters at thousands of ranks. Ranks set their own parent-death signal.
    let child = command.spawn().with_context(|| {
        format!("cannot start rank {rank} ({program}); check the path and permissions")
    })?;
    Ok(child)
}

/// Random bytes from the OS.
pub fn random_bytes(len: usize) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = vec![0u8; len];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for the job secret")?;
    Ok(bytes)
}

/// Raises the open-file limit to its hard maximum: the launcher holds two descriptors per rank.
pub fn raise_fd_limit(needed: u64) -> anyhow::Result<()> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    if hard < needed {
        anyhow::bail!("this job needs about {needed} open files but the hard limit is {hard}; raise it (ulimit -Hn) or use fewer ranks");
    }
    let raised = rustix::process::Rlimit {
        current: Some(hard),
        maximum: limit.maximum,
    };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, raised)
        .context("raising the open-file limit")?;
    Ok(())
}
