//! What a real job is: the program its ranks run, how they are started and watched.

use ftcoll_runtime::faults::FaultSpec;
use ftcoll_runtime::transport::TransportKind;

use crate::cluster::Cluster;

/// A real job, as the launcher starts it.
pub struct LiveSpec {
    /// How the ranks are started and watched.
    pub launch: LaunchOptions,
    /// The program each rank runs.
    pub program: String,
    /// Its arguments.
    pub program_args: Vec<String>,
    /// Built-in job (ranks report results) or a user program.
    pub builtin: bool,
    /// Transport.
    pub transport: TransportKind,
    /// Fault specs.
    pub faults: Vec<FaultSpec>,
    /// Hosts other than this machine (`--hostfile`, Slurm), if any.
    pub cluster: Option<Cluster>,
}

/// How the launcher starts and watches a job's ranks: the handful of run flags it needs,
/// resolved (e.g. `--aggressive-detector` already turned into its periods).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Ranks (`-n`).
    pub n: u32,
    /// IP the control plane (and on one machine the TCP data plane) listens on (`--bind`).
    pub bind: String,
    /// Heartbeat period of the ranks.
    pub heartbeat_ms: u64,
    /// A rank silent this long is killed, then reported failed; must exceed `heartbeat_ms`.
    pub suspect_ms: u64,
    /// Ranks per node on this machine (`None`: all on one node).
    pub ranks_per_node: Option<u32>,
    /// The agreement tree the ranks build (`--era-tree`, passed on as text).
    pub era_tree: String,
    /// libfabric provider (`--ofi-provider`).
    pub ofi_provider: Option<String>,
    /// The whole job is killed after this long (not under a watcher).
    pub timeout_s: u64,
}

impl LaunchOptions {
    /// `n` ranks on this machine with every other option at the run flags' defaults.
    pub fn local(n: u32) -> LaunchOptions {
        LaunchOptions {
            n,
            bind: "127.0.0.1".into(),
            heartbeat_ms: 500,
            suspect_ms: 3000,
            ranks_per_node: None,
            era_tree: "bin".into(),
            ofi_provider: None,
            timeout_s: 600,
        }
    }
}
