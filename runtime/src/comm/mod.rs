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

mod agreement;
mod collectives;
mod era_service;
mod error;
mod ft;
mod in_place;
mod job_channel;
mod join;
mod leave;
mod run;
mod saved_input;
mod single_copy;
mod typed;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ftcoll_algos::era::EraTopology;
use ftcoll_algos::rank::RankSet;

use crate::control::client::ControlClient;
use crate::env::RankEnv;
use crate::exec::Endpoint;
use crate::progress::ProgressThread;
use crate::transport::backend::Backend;
use crate::transport::TransportKind;

pub use agreement::{AgreeRequest, Agreed};
pub use collectives::{CorrectedOptions, Outcome};
pub use era_service::ERA_EPOCH_SHIFT;
pub use error::CommError;
pub use job_channel::JobChannel;
pub use leave::own_pss_kb;
pub use run::whole_vector_trailer_bytes;
pub(crate) use run::Slack;
pub use single_copy::SingleCopyFailure;

/// A rank's handle on the job.
pub struct Communicator {
    /// Shared with the agreement progress thread, which serves it while the application is
    /// outside every call (see [`crate::progress`]).
    endpoint: Arc<Mutex<Endpoint<Backend>>>,
    progress: Option<ProgressThread>,
    control: Arc<ControlClient>,
    env: RankEnv,
    /// Operations (collectives and agreements) started: the next one's index.
    ops: u64,
    op_timeout: Duration,
    /// The communicator generation: 0 for the world, one more per shrink.
    epoch: u64,
    /// Agreements started in this epoch.
    agreements: u64,
    /// The last fault-tolerant ring, kept for its buffers.
    ft_ring: Option<Box<ftcoll_algos::ftring::FtRing>>,
    /// Fault-tolerant ring allreduces run: their agreements are answered until the flush at
    /// the exit.
    ft_rings: u64,
    /// Failures this rank acknowledged (world ranks).
    acked: RankSet,
    /// Members (world ranks, increasing) after a shrink.
    members: Option<Vec<u32>>,
    /// Whether this node's ranks each have a core, which decides the small allreduce.
    placement: ftcoll_algos::direct::Placement,
    era_topology: EraTopology,
    /// Whether the ring allreduce reads peers' vectors directly (shared memory, cross-memory
    /// attach available, not switched off).
    single_copy: bool,
    /// Whether it reads them by remote reads instead (a network transport with RMA in
    /// hardware, or asked for with `FTCOLL_SINGLE_COPY=on`).
    remote_reads: bool,
    /// The single-copy ring's staging and mappings of peers' vectors, kept from call to call.
    read_scratch: single_copy::ReadScratch,
    /// The single-copy ring's lent word: the operation and attempt while this rank's vector is
    /// lent to its reader, else 0; on the heap so that its address, which peers read, never
    /// moves.
    lent: Arc<std::sync::atomic::AtomicU64>,
    /// The fault-tolerant single-copy ring's copy of the input, kept from call to call.
    ft_saved: Vec<u64>,
    /// The largest frame the transport sends in one piece.
    max_frame: usize,
}

impl Communicator {
    /// The endpoint, locked for one statement or call (never hold two guards: the lock is not
    /// reentrant).
    fn endpoint(&self) -> MutexGuard<'_, Endpoint<Backend>> {
        // A panic while it was held leaves an endpoint still fit to report errors.
        self.endpoint.lock().unwrap_or_else(|p| p.into_inner())
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

    /// The largest frame this rank's transport carries, in bytes.
    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame
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

    /// The transport in use.
    pub fn transport(&self) -> TransportKind {
        self.env.transport
    }

    /// Ranks known to have failed.
    pub fn failed_ranks(&self) -> Vec<u32> {
        self.endpoint().failed().iter().copied().collect()
    }
}
