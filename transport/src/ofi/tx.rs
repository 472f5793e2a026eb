//! The send side: per-peer link state, a pool of registered send buffers, per-peer queues of
//! frames the provider has not taken yet, and the bound on bytes queued or in flight.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use ftcoll_algos::Rank;
use ftcoll_ofi_sys as sys;

use super::address::parse_address;
use super::liveness::{tcp_listener, Liveness};
use super::ops::{pinned_region, Refused, SendPayload, Status};
use super::peer::PeerState;
use super::pool::SendPool;
use super::tag::{Tag, SMALL_FRAME_BYTES};
use super::OfiTransport;
use crate::{RegisteredBuffer, TransportError};

/// Queued frames posted per call, so a long backlog cannot hold a rank in the transport.
const MAX_POSTS_PER_CALL: usize = 512;

/// A frame waiting for the provider.
struct Queued {
    payload: SendPayload,
    bytes: usize,
    tag: u64,
}

/// What became of a frame offered to the provider.
enum PostOutcome {
    /// Posted: in flight.
    Posted,
    /// Not taken for now (the provider is out of resources): it waits, handed back.
    Held(Queued),
    /// Refused for good: the frame is dropped and its peer lost.
    Lost,
}

/// The send side (see the module docs).
#[derive(Default)]
pub(super) struct SendSide {
    pool: SendPool,
    queues: BTreeMap<Rank, VecDeque<Queued>>,
    /// Peers with queued frames, in the order they are served.
    backlog: VecDeque<Rank>,
    queued_frames: usize,
    /// Bytes queued or in flight.
    bytes: usize,
    /// Lost peers whose address is still in the address vector.
    releasing: Vec<Rank>,
    /// Peers whose frames the provider holds back with nothing in flight to them.
    liveness: Liveness,
}

impl SendSide {
    /// Bytes queued or in flight.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Frames queued (not yet taken by the provider).
    pub(super) fn frames(&self) -> usize {
        self.queued_frames
    }

    /// Whether frames wait for the provider.
    pub(super) fn has_backlog(&self) -> bool {
        !self.backlog.is_empty()
    }
}

impl OfiTransport {
    /// Checks shared by both send paths; `Ok(false)`: discard the frame (its peer is lost).
    #[inline(always)]
    fn admit(&mut self, to: Rank, len: usize) -> Result<bool, TransportError> {
        crate::check_network_frame(to, self.size, len)?;
        if self
            .peers
            .get(&to)
            .is_some_and(|peer| peer.state != PeerState::Live)
        {
            tracing::trace!(
                rank = self.rank.0,
                peer = to.0,
                "discarded frame to a lost peer"
            );
            return Ok(false);
        }
        let queued = |t: &OfiTransport| t.tx.bytes + t.loopback_bytes;
        if queued(self) > 0 && queued(self) + len > self.max_queued_bytes {
            self.pump()?;
            if queued(self) > 0 && queued(self) + len > self.max_queued_bytes {
                return Err(TransportError::Backpressure {
                    queued_bytes: queued(self),
                });
            }
        }
        Ok(true)
    }

    /// [`Transport::send`](crate::Transport::send): one copy into a pooled buffer.
    #[inline]
    pub(super) fn send_copy(&mut self, to: Rank, frame: &[u8]) -> Result<(), TransportError> {
        if !self.admit(to, frame.len())? {
            return Ok(());
        }
        if to == self.rank {
            let mut words = vec![0u64; frame.len().div_ceil(8)];
            bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..frame.len()].copy_from_slice(frame);
            self.loopback.push_back((words, frame.len()));
            self.loopback_bytes += frame.len();
            return Ok(());
        }
        let addr = self.resolve(to)?;
        let mut buffer = self.tx.pool.take(&self.domain, frame.len())?;
        buffer.bytes_mut()[..frame.len()].copy_from_slice(frame);
        self.submit(to, addr, SendPayload::Pooled(buffer), frame.len());
        Ok(())
    }

    /// [`Transport::send_registered`](crate::Transport::send_registered): straight
    /// from the caller's buffer when this transport registered it, else by copy.
    pub(super) fn send_pinned(
        &mut self,
        to: Rank,
        buffer: &RegisteredBuffer,
        len: usize,
    ) -> Result<(), TransportError> {
        let frame = buffer.prefix(len)?;
        let pinned = buffer.pin();
        if to == self.rank || pinned_region(&pinned, &self.domain).is_none() {
            return self.send_copy(to, frame);
        }
        if !self.admit(to, len)? {
            return Ok(());
        }
        let addr = self.resolve(to)?;
        self.submit(to, addr, SendPayload::Pinned(pinned), len);
        Ok(())
    }

    /// The peer's handle in the address vector, inserted on the first send to it.
    #[inline(always)]
    fn resolve(&mut self, to: Rank) -> Result<sys::fi_addr_t, TransportError> {
        if let Some(addr) = self.peers.get(&to).and_then(|peer| peer.addr) {
            return Ok(addr);
        }
        self.insert_address(to)
    }

    /// Resolves the peer's address through the control plane and inserts it (first send).
    #[cold]
    fn insert_address(&mut self, to: Rank) -> Result<sys::fi_addr_t, TransportError> {
        let address = (self.resolver)(to)?;
        let name = parse_address(&address, &self.provider, to)?;
        let addr = self.ops.endpoint().av().insert(&name)?;
        tracing::debug!(rank = self.rank.0, peer = to.0, "inserted peer address");
        let peer = self.peers.entry(to).or_default();
        peer.addr = Some(addr);
        peer.listener = tcp_listener(&self.provider, &name);
        Ok(addr)
    }

    /// Numbers the frame on its link and posts it, or queues it behind earlier frames to the
    /// same peer or when the provider is out of resources.
    #[inline(always)]
    fn submit(&mut self, to: Rank, addr: sys::fi_addr_t, payload: SendPayload, bytes: usize) {
        let peer = self.peers.entry(to).or_default();
        let tag = self.layout.encode(Tag {
            source: self.rank,
            large: bytes > SMALL_FRAME_BYTES,
            seq: peer.next_seq,
        });
        peer.next_seq = self.layout.wrap(peer.next_seq + 1);
        self.tx.bytes += bytes;
        let frame = Queued {
            payload,
            bytes,
            tag,
        };
        // The common case, nothing waiting for the peer, posts at once: no queue is touched
        // (and none is looked up while no peer has a backlog).
        let waiting = !self.tx.backlog.is_empty()
            && self
                .tx
                .queues
                .get(&to)
                .is_some_and(|queue| !queue.is_empty());
        let frame = if waiting {
            frame
        } else {
            match self.post_frame(to, addr, frame) {
                PostOutcome::Held(frame) => frame,
                PostOutcome::Posted | PostOutcome::Lost => return,
            }
        };
        let queue = self.tx.queues.entry(to).or_default();
        if queue.is_empty() {
            self.tx.backlog.push_back(to);
        }
        queue.push_back(frame);
        self.tx.queued_frames += 1;
    }

    /// Posts one frame to `to` at `addr`; `to` is live and has nothing queued ahead of it.
    #[inline(always)]
    fn post_frame(&mut self, to: Rank, addr: sys::fi_addr_t, frame: Queued) -> PostOutcome {
        match self
            .ops
            .post_send(to, addr, frame.tag, frame.payload, frame.bytes)
        {
            Ok(()) => {
                if let Some(peer) = self.peers.get_mut(&to) {
                    peer.in_flight += 1;
                    peer.in_flight_bytes += frame.bytes;
                }
                if !self.tx.liveness.is_empty() {
                    self.tx.liveness.released(to);
                }
                PostOutcome::Posted
            }
            Err(Refused { item, error: None }) => {
                // The provider's refusal (not our bound on sends) with nothing in flight
                // to the peer: a connection that is not up, perhaps never again.
                let idle = self.peers.get(&to).filter(|peer| peer.in_flight == 0);
                if let Some(peer) = idle.filter(|_| self.ops.has_send_slot()) {
                    self.tx
                        .liveness
                        .held_back(to, peer.listener, Instant::now());
                }
                PostOutcome::Held(Queued {
                    payload: item,
                    ..frame
                })
            }
            Err(Refused {
                item,
                error: Some(error),
            }) => {
                self.tx.bytes -= frame.bytes;
                if let SendPayload::Pooled(buffer) = item {
                    self.tx.pool.give_back(buffer);
                }
                self.lose_peer(to, PeerState::Unreachable, &error.to_string());
                PostOutcome::Lost
            }
        }
    }

    /// Posts up to `budget` queued frames to `to`; returns how many were posted.
    fn flush_peer(&mut self, to: Rank, budget: usize) -> usize {
        let Some(addr) = self.peers.get(&to).and_then(|peer| peer.addr) else {
            return 0;
        };
        let mut posted = 0;
        while posted < budget {
            let Some(front) = self.tx.queues.get_mut(&to).and_then(VecDeque::pop_front) else {
                break;
            };
            self.tx.queued_frames -= 1;
            match self.post_frame(to, addr, front) {
                PostOutcome::Posted => posted += 1,
                PostOutcome::Held(front) => {
                    self.tx.queues.entry(to).or_default().push_front(front);
                    self.tx.queued_frames += 1;
                    break;
                }
                // `lose_peer` dropped the rest of the queue.
                PostOutcome::Lost => break,
            }
        }
        posted
    }

    /// Retries queued frames, peer by peer in turn, within a per-call budget.
    pub(super) fn flush_queues(&mut self) {
        let mut budget = MAX_POSTS_PER_CALL;
        for _ in 0..self.tx.backlog.len() {
            let Some(to) = self.tx.backlog.pop_front() else {
                break;
            };
            budget -= self.flush_peer(to, budget);
            if self
                .tx
                .queues
                .get(&to)
                .is_some_and(|queue| !queue.is_empty())
            {
                self.tx.backlog.push_back(to);
            } else {
                self.tx.queues.remove(&to);
            }
            if budget == 0 {
                break;
            }
        }
    }

    /// Checks the listeners of peers whose frames the provider holds back; a peer whose
    /// endpoint is gone becomes unreachable, its frames discarded (see `liveness`).
    pub(super) fn check_held_back_peers(&mut self) {
        if self.tx.liveness.is_empty() {
            return;
        }
        let mut gone = Vec::new();
        self.tx.liveness.check(Instant::now(), &mut gone);
        for (peer, why) in gone {
            self.lose_peer(peer, PeerState::Unreachable, &why);
        }
    }

    /// Handles a send completion; a failed one makes its peer unreachable.
    #[inline]
    pub(super) fn on_send_done(
        &mut self,
        to: Rank,
        payload: SendPayload,
        bytes: usize,
        status: Status,
    ) {
        if let SendPayload::Pooled(buffer) = payload {
            self.tx.pool.give_back(buffer);
        }
        if let Some(peer) = self.peers.get_mut(&to) {
            peer.in_flight -= 1;
            peer.in_flight_bytes -= bytes;
            // A lost peer's bytes left the bound when it was lost.
            if peer.state == PeerState::Live {
                self.tx.bytes -= bytes;
            }
        }
        if let Status::Failed(code, why) = status {
            tracing::debug!(rank = self.rank.0, peer = to.0, code, %why, "a send failed");
            self.lose_peer(to, PeerState::Unreachable, &why);
        }
    }

    /// [`Transport::peer_failed`](crate::Transport::peer_failed).
    pub(super) fn forget_peer(&mut self, peer: Rank) {
        if peer.0 >= self.size || peer == self.rank {
            return;
        }
        self.lose_peer(peer, PeerState::Failed, "reported failed");
        self.rx.forget(peer);
    }

    /// Moves `to` to `state` (a failure is final; unreachable is reported once), drops its
    /// queue and asks the provider to cancel its sends in flight.
    fn lose_peer(&mut self, to: Rank, state: PeerState, why: &str) {
        let peer = self.peers.entry(to).or_default();
        let before = peer.state;
        if before == PeerState::Failed || before == state {
            return;
        }
        peer.state = state;
        if before == PeerState::Live {
            // Sends to a lost peer may never complete; they must not hold the bound forever.
            self.tx.bytes -= peer.in_flight_bytes;
        }
        if state == PeerState::Unreachable {
            tracing::info!(rank = self.rank.0, peer = to.0, %why, "peer unreachable");
            self.unreachable.push(to);
        }
        if let Some(queue) = self.tx.queues.remove(&to) {
            for queued in queue {
                self.tx.bytes -= queued.bytes;
                self.tx.queued_frames -= 1;
                if let SendPayload::Pooled(buffer) = queued.payload {
                    self.tx.pool.give_back(buffer);
                }
            }
        }
        self.tx.backlog.retain(|&peer| peer != to);
        self.tx.liveness.released(to);
        if !self.tx.releasing.contains(&to) {
            self.tx.releasing.push(to);
        }
        self.ops.cancel_sends_to(to);
    }

    /// Sends still in flight to lost peers: the provider may never complete them (nothing
    /// waits for them, so they do not count as pending).
    pub(super) fn abandoned_sends(&self) -> usize {
        self.tx
            .releasing
            .iter()
            .filter_map(|rank| self.peers.get(rank))
            .map(|peer| peer.in_flight)
            .sum()
    }

    /// Removes the addresses of lost peers once nothing is in flight to them, which lets the
    /// provider release its connection.
    pub(super) fn release_failed_addresses(&mut self) {
        if self.tx.releasing.is_empty() {
            return;
        }
        let mut releasing = std::mem::take(&mut self.tx.releasing);
        releasing.retain(|rank| {
            let Some(peer) = self.peers.get_mut(rank) else {
                return false;
            };
            if peer.in_flight > 0 {
                return true;
            }
            if let Some(addr) = peer.addr.take() {
                if let Err(e) = self.ops.endpoint().av().remove(addr) {
                    tracing::debug!(peer = rank.0, error = %e, "removing a lost peer's address");
                }
            }
            false
        });
        self.tx.releasing = releasing;
    }
}
