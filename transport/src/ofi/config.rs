//! What a rank's libfabric transport is set up with.

use std::fmt;
use std::time::Duration;

use ftcoll_algos::Rank;

use crate::TransportError;

/// How to set up the libfabric transport of one rank.
pub struct OfiConfig {
    /// This rank.
    pub rank: Rank,
    /// Number of ranks in the job.
    pub size: u32,
    /// Looks up a peer's address: exactly the string the peer's
    /// [`Transport::local_address`](crate::Transport::local_address) returned. Called once per peer, lazily on the first send to
    /// it; may block briefly.
    pub resolver: Box<dyn FnMut(Rank) -> Result<String, TransportError> + Send>,
    /// Provider name (e.g. `tcp`, `shm`, `tcp;ofi_rxm`); `None`: the `FI_PROVIDER` environment
    /// variable, else libfabric's first RDM provider.
    pub provider: Option<String>,
    /// How long [`Transport::wait`](crate::Transport::wait) busy-polls before blocking (zero: block at once).
    pub spin: Duration,
}

impl fmt::Debug for OfiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OfiConfig")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("provider", &self.provider)
            .field("spin", &self.spin)
            .finish_non_exhaustive()
    }
}
