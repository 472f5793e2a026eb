//! What the transport knows of each peer it sent to or heard of failing.

use std::net::SocketAddr;

use ftcoll_ofi_sys as sys;

/// What the transport knows of one peer.
#[derive(Debug, Default)]
pub(super) struct Peer {
    /// Its handle in the address vector, once inserted.
    pub(super) addr: Option<sys::fi_addr_t>,
    /// Where its endpoint accepts connections, if the provider connects over TCP (see
    /// `liveness`).
    pub(super) listener: Option<SocketAddr>,
    /// Sequence number of the next frame to it.
    pub(super) next_seq: u64,
    /// Sends to it posted and not completed.
    pub(super) in_flight: usize,
    /// Their bytes (counted against the queue bound while the peer is live).
    pub(super) in_flight_bytes: usize,
    pub(super) state: PeerState,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum PeerState {
    #[default]
    Live,
    /// A send to it failed; frames to it are discarded.
    Unreachable,
    /// Reported failed; frames to and from it are discarded.
    Failed,
}

impl Peer {
    /// Whether [`Transport::peer_failed`](crate::Transport) was called for it.
    pub(super) fn is_failed(&self) -> bool {
        self.state == PeerState::Failed
    }
}
