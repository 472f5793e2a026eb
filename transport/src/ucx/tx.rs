//! The send side: endpoints to peers, the sends in flight on them, and the peers found lost.
//!
//! Each peer's sends are kept in send order and released from the front as UCX completes
//! them; a send UCX finishes early waits behind an earlier unfinished one, which only delays
//! recycling its slot. A peer whose endpoint reports an error is lost: it is reported once
//! through [`Outbox::take_unreachable`], its endpoint is force-closed (which completes its sends
//! as cancelled), and later frames to it are discarded.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ftcoll_algos::Rank;
use ftcoll_ucx_sys as sys;

use super::super::{RegisteredBuffer, TransportError};
use super::address::decode_address;
use super::context::{status_text, Context};
use super::endpoint::Endpoint;
use super::hold::{PinnedSend, SendHold};
use super::pool::SendPool;
use super::request::{Request, Started};
use super::rx::tag_of;
use super::worker::Worker;

/// `ucp_worker_progress` calls per progress step while draining on drop.
const DRAIN_PROGRESS_ROUNDS: usize = 64;
/// How long dropping the outbox lets in-flight sends finish before cancelling them.
const DRAIN_ON_DROP: Duration = Duration::from_secs(1);

/// The connection to one peer and the sends in flight on it.
struct Peer {
    // Declared first: closing the endpoint completes (or cancels) the sends before they drop.
    // Shared with a remote reader of this peer for the length of one operation.
    endpoint: Arc<Endpoint>,
    /// In send order, with each frame's length.
    sends: VecDeque<(Request<SendHold>, usize)>,
}

/// See the [module documentation](self).
pub(super) struct Outbox {
    rank: Rank,
    // Declared before the pool: in-flight sends hold pool slots.
    peers: BTreeMap<Rank, Peer>,
    pool: SendPool,
    /// Bytes and frames handed to UCX and not yet completed.
    inflight_bytes: usize,
    inflight_frames: usize,
    /// Peers failed or lost: frames to them are discarded.
    failed: BTreeSet<Rank>,
    /// Peers found lost and not yet reported.
    unreachable: Vec<Rank>,
    /// Raised by endpoint error callbacks.
    any_failed: Arc<AtomicBool>,
    worker: Arc<Worker>,
    context: Arc<Context>,
}

impl Outbox {
    /// The send side of `rank` on `worker` (of `context`).
    pub(super) fn new(rank: Rank, worker: &Arc<Worker>, context: &Arc<Context>) -> Outbox {
        Outbox {
            rank,
            peers: BTreeMap::new(),
            pool: SendPool::new(context),
            inflight_bytes: 0,
            inflight_frames: 0,
            failed: BTreeSet::new(),
            unreachable: Vec::new(),
            any_failed: Arc::new(AtomicBool::new(false)),
            worker: Arc::clone(worker),
            context: Arc::clone(context),
        }
    }

    /// Bytes handed to UCX and not yet completed.
    pub(super) fn inflight_bytes(&self) -> usize {
        self.inflight_bytes
    }

    /// Frames handed to UCX and not yet completed.
    pub(super) fn inflight_frames(&self) -> usize {
        self.inflight_frames
    }

    /// Bytes of memory the send pool has registered.
    pub(super) fn pool_mapped_bytes(&self) -> usize {
        self.pool.mapped_bytes()
    }

    /// Whether frames to `peer` are discarded.
    pub(super) fn is_failed(&self, peer: Rank) -> bool {
        self.failed.contains(&peer)
    }

    /// Whether lost peers wait to be reported.
    pub(super) fn has_unreachable(&self) -> bool {
        !self.unreachable.is_empty()
    }

    /// Moves the lost peers not yet reported into `out`.
    pub(super) fn take_unreachable(&mut self, out: &mut Vec<Rank>) {
        out.append(&mut self.unreachable);
    }

    /// Opens the endpoint to `peer` unless it exists, resolving its address with `resolve`.
    pub(super) fn connect(
        &mut self,
        peer: Rank,
        resolve: &mut dyn FnMut(Rank) -> Result<String, TransportError>,
    ) -> Result<(), TransportError> {
        if self.peers.contains_key(&peer) {
            return Ok(());
        }
        let text = resolve(peer)?;
        let address = decode_address(&text).ok_or_else(|| TransportError::Resolve {
            rank: peer.0,
            why: format!("'{text:.40}' is not a UCX worker address"),
        })?;
        let endpoint = Arc::new(Endpoint::connect(&self.worker, &address, &self.any_failed)?);
        tracing::debug!(rank = self.rank.0, peer = peer.0, "UCX endpoint created");
        let sends = VecDeque::new();
        self.peers.insert(peer, Peer { endpoint, sends });
        Ok(())
    }

    /// The endpoint to `peer` (connected), for a remote reader to share.
    pub(super) fn endpoint(&self, peer: Rank) -> Option<Arc<Endpoint>> {
        self.peers.get(&peer).map(|p| Arc::clone(&p.endpoint))
    }

    /// Sends a copy of `frame` to `to` (connected) from the registered pool.
    pub(super) fn send_copy(&mut self, to: Rank, frame: &[u8]) -> Result<(), TransportError> {
        let slot = self.pool.copy_in(frame)?;
        self.start(to, SendHold::Slot(slot))
    }

    /// Sends the first `len` bytes of `buffer` to `to` (connected) in place.
    pub(super) fn send_pinned(
        &mut self,
        to: Rank,
        buffer: &RegisteredBuffer,
        len: usize,
    ) -> Result<(), TransportError> {
        let pinned = PinnedSend::new(buffer, len, &self.context);
        self.start(to, SendHold::Pinned(pinned))
    }

    fn start(&mut self, to: Rank, hold: SendHold) -> Result<(), TransportError> {
        let tag = tag_of(self.rank);
        let peer = self.peers.get_mut(&to).ok_or(TransportError::Resolve {
            rank: to.0,
            why: "no endpoint (send before connect)".into(),
        })?;
        let len = hold.len();
        match peer.endpoint.send_tagged(tag, hold) {
            Started::Pending(request) => {
                peer.sends.push_back((request, len));
                self.inflight_bytes += len;
                self.inflight_frames += 1;
            }
            Started::Done { hold, status } => {
                self.recycle(hold);
                if status != sys::UCS_OK {
                    // With peer error handling UCX fails a send only for a broken endpoint.
                    self.lose(to, status);
                }
            }
        }
        Ok(())
    }

    fn recycle(&mut self, hold: SendHold) {
        match hold {
            SendHold::Slot(slot) => self.pool.give_back(slot),
            // Dropping the pin makes the buffer writable again.
            SendHold::Pinned(_) => {}
        }
    }

    /// After the worker progressed: handles endpoint errors and releases completed sends.
    pub(super) fn after_progress(&mut self) {
        if self.any_failed.swap(false, Ordering::AcqRel) {
            let lost: Vec<_> = self
                .peers
                .iter()
                .filter_map(|(&rank, peer)| Some((rank, peer.endpoint.failure()?)))
                .collect();
            for (rank, status) in lost {
                self.lose(rank, status);
            }
        }
        self.reap();
    }

    /// Releases the memory of completed sends, in order per peer.
    fn reap(&mut self) {
        let mut done = Vec::new();
        for peer in self.peers.values_mut() {
            while let Some((request, len)) = peer.sends.pop_front() {
                match request.finish() {
                    Ok((hold, status)) => done.push((hold, status, len)),
                    Err(request) => {
                        peer.sends.push_front((request, len));
                        break;
                    }
                }
            }
        }
        for (hold, status, len) in done {
            if status != sys::UCS_OK {
                tracing::debug!(
                    rank = self.rank.0,
                    error = status_text(status),
                    "UCX send failed; its peer is lost"
                );
            }
            self.inflight_bytes -= len;
            self.inflight_frames -= 1;
            self.recycle(hold);
        }
    }

    /// `peer`'s endpoint reported `status`: report it once, then treat it as failed.
    fn lose(&mut self, peer: Rank, status: sys::ucs_status_t) {
        if !self.failed.contains(&peer) {
            let error = status_text(status);
            tracing::info!(
                rank = self.rank.0,
                peer = peer.0,
                error,
                "UCX peer unreachable"
            );
            self.unreachable.push(peer);
        }
        self.forget(peer);
    }

    /// Marks `peer` failed, force-closes its endpoint and releases its sends.
    pub(super) fn forget(&mut self, peer: Rank) {
        self.failed.insert(peer);
        let Some(Peer { endpoint, sends }) = self.peers.remove(&peer) else {
            return;
        };
        endpoint.force_close_on_drop();
        // A forced close completes every send on the endpoint (cancelled).
        drop(endpoint);
        for (request, len) in sends {
            self.inflight_bytes -= len;
            self.inflight_frames -= 1;
            match request.finish() {
                Ok((hold, _)) => self.recycle(hold),
                // Dropping waits for it, or leaks its memory to UCX if it never ends.
                Err(request) => drop(request),
            }
        }
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        // Let sends already handed to UCX finish (bounded), then close: peers with sends
        // still in flight are force-closed (cancelling them), the others flushed.
        let deadline = Instant::now() + DRAIN_ON_DROP;
        while self.inflight_frames > 0 && Instant::now() < deadline {
            self.worker.lock().progress(DRAIN_PROGRESS_ROUNDS);
            self.after_progress();
        }
        for peer in self.peers.values_mut() {
            if !peer.sends.is_empty() {
                peer.endpoint.force_close_on_drop();
            }
        }
        // Each peer drops endpoint first, then its sends; the pool drops after all of them.
        self.peers.clear();
    }
}
