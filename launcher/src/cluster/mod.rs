//! Jobs across machines: which hosts run which ranks, and how their node agents start.
//!
//! With `--hostfile` the launcher starts one agent per host over ssh; inside a Slurm
//! allocation, one srun step with an agent per allocated node. Each agent starts, signals and
//! reaps the ranks of its host (see [`agent`]); the ranks bootstrap through the launcher's
//! control plane as they do on one machine.

pub mod agent;
pub mod slurm;
pub mod starter;

// The hostfile parser is text at the edge, in the library where the fuzz targets reach it.
pub use ftcoll_launcher::text::hostfile;

use anyhow::bail;

use hostfile::Placement;
use starter::Route;

/// What decides where a job's ranks run: the run's flags on hosts and placement.
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    /// Ranks.
    pub n: u32,
    /// The hosts to run on (`--hostfile`), if any.
    pub hostfile: Option<std::path::PathBuf>,
    /// Ranks per host (`--ranks-per-node`; default: as many as the host has slots).
    pub ranks_per_node: Option<u32>,
    /// Inside a Slurm allocation, still run every rank on this machine (`--no-slurm`).
    pub no_slurm: bool,
}

/// Where a job's ranks run when not all on this machine under the launcher.
pub struct Cluster {
    /// How agents reach their hosts.
    pub route: Route,
    /// Which ranks each host runs.
    pub placement: Placement,
}

impl Cluster {
    /// The cluster the flags and environment describe: `--hostfile`, else a Slurm allocation
    /// (unless `--no-slurm`), else `None` (every rank on this machine).
    pub fn detect(options: &ClusterOptions) -> anyhow::Result<Option<Cluster>> {
        if let Some(path) = &options.hostfile {
            let hosts = hostfile::read(path)?;
            let placement = hostfile::place(options.n, &hosts, options.ranks_per_node)?;
            let ssh = std::env::var("FTCOLL_SSH").unwrap_or_else(|_| "ssh".into());
            let words: Vec<String> = ssh.split_whitespace().map(str::to_string).collect();
            if words.is_empty() {
                bail!("FTCOLL_SSH is set but empty; unset it or name the ssh command");
            }
            return Ok(Some(Cluster {
                route: Route::Ssh(words),
                placement,
            }));
        }
        if options.no_slurm {
            return Ok(None);
        }
        let Some(allocation) = slurm::Allocation::from_env()? else {
            return Ok(None);
        };
        let placement = hostfile::place(options.n, &allocation.hosts(), options.ranks_per_node)
            .map_err(|e| {
                anyhow::anyhow!(
                    "inside Slurm job {}: {e}; ask salloc/sbatch for more CPUs (-n) or nodes",
                    allocation.job_id
                )
            })?;
        Ok(Some(Cluster {
            route: Route::Srun(allocation),
            placement,
        }))
    }
}

/// The address the control plane listens on in a cluster run: `--bind`, which must not be a
/// loopback address when the hosts are other machines. Inside Slurm the default (loopback) is
/// replaced by this host's own address, as the nodes must reach it.
pub fn control_bind(bind: &str, cluster: &Cluster) -> anyhow::Result<String> {
    let ip: std::net::IpAddr = bind
        .parse()
        .map_err(|_| anyhow::anyhow!("--bind {bind} is not an IP address"))?;
    if !ip.is_loopback() {
        return Ok(bind.to_string());
    }
    match &cluster.route {
        Route::Srun(_) => Ok(host_address().unwrap_or_else(|| bind.to_string())),
        Route::Ssh(_) => {
            let all_local = cluster.placement.nodes.iter().all(|n| {
                n.host == "localhost"
                    || n.host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|a| a.is_loopback())
            });
            if all_local {
                Ok(bind.to_string())
            } else {
                bail!("a hostfile run needs --bind ADDR, an address of this machine that the hosts reach (the default {bind} is loopback)")
            }
        }
    }
}

/// This host's first non-loopback address by its name, if it has one.
fn host_address() -> Option<String> {
    use std::net::ToSocketAddrs;
    let name = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    (name.as_str(), 0)
        .to_socket_addrs()
        .ok()?
        .map(|a| a.ip())
        .find(|ip| !ip.is_loopback())
        .map(|ip| ip.to_string())
}
