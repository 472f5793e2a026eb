//! Joining the job: the transport, the control plane, the scripted faults and the settings a
//! rank reads from its environment.

use ftcoll_algos::direct::Placement;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ftcoll_algos::era::EraTopology;
use ftcoll_algos::rank::RankSet;
use ftcoll_algos::Rank;

use super::{CommError, Communicator};
use crate::control::client::ControlClient;
use crate::env::{EnvError, RankEnv, SingleCopy};
use crate::exec::Endpoint;
use crate::rank_faults::RankFaults;
use crate::transport::backend::Backend;
use crate::transport::remote::RemoteReads;
use crate::transport::shm::segment::Segment;
use crate::transport::shm::ShmTransport;
use crate::transport::{Transport, TransportError, TransportKind};

/// Time limit of one collective, unless `FTCOLL_OP_TIMEOUT_MS` says otherwise.
const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a peer address lookup may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long joining waits for the job's other ranks to register; the launcher fails a rank
/// that has not registered within 120 s, so the fence ends well before.
const START_TIMEOUT: Duration = Duration::from_secs(300);

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
        // Operations start once every rank is registered (or failed): a rank's first timeouts
        // would otherwise count a peer's start-up, and over a slow wire-up fence a live rank.
        control.wait_started(START_TIMEOUT)?;
        // Cores this process may use, read before pinning narrows the mask to one.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let placement = Placement::of(env.ranks_per_node.min(env.size), cores);
        let start_delay = faults.start_delay();
        let max_frame = transport.max_frame_bytes();
        // Single-copy reads need every rank's consent under Yama, given before any peer reads.
        let single_copy = env.single_copy != SingleCopy::Off
            && env.transport == TransportKind::Shm
            && crate::transport::shm::cross_memory::available();
        let remote_reads = match (env.single_copy, transport.remote_reads()) {
            (_, RemoteReads::Unsupported) | (SingleCopy::Off, _) => false,
            (SingleCopy::On, _) | (SingleCopy::Auto, RemoteReads::Native) => true,
            (SingleCopy::Auto, RemoteReads::Emulated) => false,
        };
        if single_copy {
            crate::transport::shm::cross_memory::offer_memory();
        }
        if single_copy || remote_reads {
            // Vectors allocated from now on are mappable and keep their registrations (where
            // the program's allocator is the shared heap): the job's and the application's,
            // allocated after joining.
            crate::transport::shm::shared_heap::enable(env.shared_heap);
        }
        let mut endpoint = Endpoint::new(transport, Arc::clone(&control), Rank(env.rank), faults);
        if std::env::var("FTCOLL_BIND").is_ok_and(|v| v == "core") {
            endpoint.pin_to_core(env.ranks_per_node.min(env.size));
        }
        if !start_delay.is_zero() {
            std::thread::sleep(start_delay);
        }
        let op_timeout = std::env::var("FTCOLL_OP_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(DEFAULT_OP_TIMEOUT, Duration::from_millis);
        let era_topology = match std::env::var("FTCOLL_ERA_TREE") {
            Ok(name) => {
                EraTopology::from_name(&name, env.ranks_per_node).map_err(CommError::Config)?
            }
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
            ft_rings: 0,
            ft_ring: None,
            acked: RankSet::default(),
            members: None,
            placement,
            era_topology,
            single_copy,
            remote_reads,
            read_scratch: Default::default(),
            lent: Arc::default(),
            ft_saved: Vec::new(),
            max_frame,
        };
        // The agreement service exists from the start: peers' agreements may reach this rank
        // before it calls its first one.
        comm.install_era(&[])?;
        Ok(comm)
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
