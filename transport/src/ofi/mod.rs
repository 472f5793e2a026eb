//! libfabric transport: reliable-datagram (RDM) endpoints with tagged messages, on whatever
//! provider libfabric offers (verbs, efa, psm3, cxi, ... on RDMA hardware; `tcp;ofi_rxm` or
//! `shm` elsewhere).
//!
//! # Layers
//! `ftcoll-ofi-sys` has the raw bindings. Here `fabric`, `info`, `cq`, `av`, `endpoint` and
//! `mr` wrap them in RAII handles (each keeps its parent alive; the endpoint owns its queue and
//! address vector so it closes before them), `ops` owns the endpoint together with everything
//! posted to it (an operation owns its buffer and context until its completion is read), and
//! the rest is the transport.
//!
//! # Frames
//! One endpoint, one completion queue (sends and receives) and one address vector per rank.
//! [`Transport::local_address`] is `ofi:<provider>:<hex of fi_getname>`; a peer's address is
//! inserted into the vector on the first send to it. Every frame is one tagged message whose
//! tag carries the source rank, a size class and a per-link sequence number (see `tag`): the
//! receiver learns the source from the completion and restores per-source order, which
//! providers do not promise for completions. Receive buffers (a few of the maximum frame size,
//! more of 64 KiB) are posted up front, 8-byte aligned, and re-posted once the handler has seen
//! their frame. Frames to self never touch the fabric.
//!
//! # Sends
//! [`Transport::send`] copies the frame once into a registered buffer from a pool and posts it;
//! when the provider says `-FI_EAGAIN`, or frames to that peer already wait, it is queued per
//! peer and retried by [`Transport::progress`]. [`Transport::send_registered`] posts straight
//! from the caller's registered buffer, the operation pinning it until its completion. Bytes
//! queued plus in flight are bounded ([`DEFAULT_MAX_QUEUED_BYTES`]).
//!
//! # Memory registration
//! Every buffer posted is registered and its descriptor passed, whatever the provider's
//! `mr_mode` says, so providers requiring FI_MR_LOCAL work unchanged (see `info` for the modes
//! offered).
//!
//! # Waiting
//! [`Transport::wait`] first busy-polls for [`OfiConfig::spin`], then blocks: on the completion
//! queue's file descriptor (`FI_WAIT_FD`, after `fi_trywait`) plus the eventfd the [`Waker`]
//! rings, when the provider offers one (`tcp;ofi_rxm` does); otherwise (e.g. `shm`) it sleeps on
//! the eventfd in short steps growing from 50 µs to 1 ms while the rank stays idle.
//!
//! # Providers seen with libfabric 1.17
//! - `tcp` (`tcp;ofi_rxm`): wait descriptor, no local registration required; complete.
//! - `shm`: no wait object (the sleep steps above). It silently drops tagged messages that
//!   arrive before a matching receive is posted once about as many are pending at a receiver
//!   as receives are posted (with 32 posted, a burst of 100 small frames to a rank that is not
//!   polling delivers 64, and every send completes), and a third large frame beyond the two
//!   large receives stalls. So the receive side posts 1,000 small receives on `shm` (bursts of
//!   about 1,800 frames at one rank arrive whole), and a link whose missing frame has more
//!   than 1,024 later ones held behind it for a second ends in
//!   [`TransportError::FramesLost`] rather than a silent wait. On one machine the runtime's
//!   own shared-memory transport is the better choice, and [`OfiTransport::new`] warns. It is
//!   also not safe when ranks die: a rank SIGKILLed while it holds the spinlock of a shared
//!   region leaves it held, and every rank that then touches that region spins inside
//!   libfabric for good (a 16-rank corrected allreduce with rank 5 killed around 270 ms hung
//!   in about 1 run of 25; the stuck ranks spent 97.7% of their time in `pthread_spin_lock`).
//!   Nothing returns to ftcoll, so only the job's time limit ends such a job. An
//!   endpoint closed in the same process as a peer that still
//!   sends to it crashes libfabric, and a killed process leaves its region file
//!   `/dev/shm/<pid>:...` behind for whoever notices the death to remove.
//!
//! # Remote reads
//! Where the provider offers them on the frames' fabric and domain, memory is exposed with
//! `fi_mr_reg(FI_REMOTE_READ)` and peers read it with `fi_read` on a second endpoint, opened on
//! first use, that the transport progresses on every pump and blocks on beside the frames'
//! queue; see `rma`.
//!
//! # Lost peers
//! An error completion of a send marks its peer unreachable: [`Transport::take_unreachable`]
//! reports it once and later frames to it are discarded, as after [`Transport::peer_failed`],
//! which also drops frames queued for the peer, asks the provider to cancel those in flight and
//! removes its address once none is left. Sends still in flight to a lost peer (a provider may
//! never complete them) no longer count against the bound or in [`Transport::progress`].
//! A peer whose endpoint closed while nothing was in flight to it fails no operation:
//! `tcp;ofi_rxm` answers every later send with `-FI_EAGAIN`, exactly as for a live peer still
//! connecting. Such a peer is found by checking its listener, and only a refused connection
//! makes it unreachable (see `liveness`). A failed receive names no link (its tag is not the
//! frame's), so it uses up no sequence number.

mod address;
mod av;
mod config;
mod context;
mod cq;
mod endpoint;
mod fabric;
mod info;
mod liveness;
mod mr;
mod ops;
mod peer;
mod pool;
mod rma;
mod rx;
mod tag;
mod tx;
mod wait;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ftcoll_algos::Rank;

use super::remote::{ExposedMemory, Exposure, ExposureCache, RemoteReader, RemoteReads};
use super::{RegisteredBuffer, Transport, TransportError, TransportKind, Waker};
use address::hex_encode;
use av::AddressVector;
pub use config::OfiConfig;
use cq::CompletionQueue;
use endpoint::Endpoint;
use fabric::{Domain, Fabric};
pub use info::probe_rdma_provider;
use info::{is_rdma_provider, InfoList, READ_CAPS};
use mr::{GraveyardGuard, UserRegistration};
use ops::{Completion, Ops};
use peer::Peer;
use rx::RecvSide;
use tag::TagLayout;
use tx::SendSide;
use wait::Doorbell;

/// Default bound on bytes queued or in flight for all peers together (frames to self not yet
/// received included); a send beyond it is [`TransportError::Backpressure`].
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 256 << 20;

/// Sends posted to the provider at once; further frames wait in the per-peer queues.
const MAX_SENDS_IN_FLIGHT: usize = 256;
/// Completions read per call, so a flood cannot hold a rank in the transport.
const MAX_COMPLETIONS_PER_CALL: usize = 1024;
/// Exposures kept from call to call (see [`ExposureCache`]).
const KEPT_EXPOSURES: usize = 16;

/// The libfabric endpoint of one rank. See the [module documentation](self).
pub struct OfiTransport {
    // Field order is drop order. `ops` closes the endpoint (then its queue and vector) after
    // its outstanding operations completed or were cancelled, and frees their buffers; then
    // the idle buffers and their regions go; then the graveyard closes, after which user
    // registrations close on whatever thread drops them (nothing else uses the domain any
    // more); then the domain, the fabric and the info list.
    ops: Ops,
    /// The read endpoint of remote reads, opened on first use (see `rma`).
    reads: Option<rma::SharedReadSide>,
    exposures: ExposureCache,
    rx: RecvSide,
    tx: SendSide,
    graveyard: GraveyardGuard,
    domain: Arc<Domain>,
    _fabric: Arc<Fabric>,
    _info: InfoList,
    /// Where the provider offers remote reads: the list holding the entry of the read
    /// endpoint (the same provider, fabric and domain as the frames' entry).
    readable: Option<InfoList>,
    remote_reads: RemoteReads,
    rank: Rank,
    size: u32,
    provider: String,
    address: String,
    layout: TagLayout,
    resolver: Box<dyn FnMut(Rank) -> Result<String, TransportError> + Send>,
    /// Peers sent to or failed, with their address handle and link state.
    peers: BTreeMap<Rank, Peer>,
    /// Frames sent to self, each in its own aligned buffer, with its length in bytes.
    loopback: VecDeque<(Vec<u64>, usize)>,
    loopback_bytes: usize,
    /// Peers found unreachable and not yet reported by `take_unreachable`.
    unreachable: Vec<Rank>,
    completions: Vec<Completion>,
    doorbell: Arc<Doorbell>,
    spin: Duration,
    /// Current sleep step of an idle `wait` without a wait descriptor.
    idle_step: Duration,
    /// Completions were read since the last `poll_recv` (by `progress` or `wait`): a
    /// `poll_recv` that finds frames ready hands them over without reading the queue again.
    read_since_recv: bool,
    max_queued_bytes: usize,
}

/// The entry list of remote reads on the frames' provider, fabric and domain, if the provider
/// offers them there (a failure to ask only means no remote reads).
fn readable_info(provider: &str, chosen: &info::Info<'_>) -> Option<InfoList> {
    let list = match InfoList::rdm_readable(provider) {
        Ok(list) => list?,
        Err(error) => {
            tracing::debug!(%error, "asking libfabric for remote reads");
            return None;
        }
    };
    let offers = list
        .same_place_as(chosen)
        .is_some_and(|entry| entry.caps() & READ_CAPS == READ_CAPS);
    offers.then_some(list)
}

impl fmt::Debug for OfiTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OfiTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("provider", &self.provider)
            .field("queued_bytes", &self.tx.bytes())
            .finish_non_exhaustive()
    }
}

fn max_frame_bytes() -> usize {
    super::network_max_frame_bytes()
}

impl OfiTransport {
    /// Opens the rank's fabric, domain, endpoint, queue and address vector, and posts its
    /// receive buffers.
    pub fn new(config: OfiConfig) -> Result<OfiTransport, TransportError> {
        super::check_rank(config.rank, config.size)?;
        let info = InfoList::rdm_tagged(config.provider.as_deref())?.ok_or_else(|| TransportError::Library {
            library: "libfabric",
            call: "fi_getinfo",
            why: format!(
                "no provider ({}) offers reliable-datagram endpoints with tagged messages; check `fi_info -t FI_EP_RDM -c FI_TAGGED`",
                config.provider.as_deref().unwrap_or("any")
            ),
        })?;
        let chosen = info.first();
        let provider = chosen.provider_name();
        let layout = TagLayout::new(chosen.tag_bits()).ok_or_else(|| TransportError::Library {
            library: "libfabric",
            call: "fi_getinfo",
            why: format!(
                "provider {provider} matches only {} tag bits; ftcoll needs {}",
                chosen.tag_bits(),
                tag::MIN_TAG_BITS
            ),
        })?;
        let readable = readable_info(&provider, &chosen);
        let remote_reads = match &readable {
            None => RemoteReads::Unsupported,
            Some(_) if is_rdma_provider(&provider) => RemoteReads::Native,
            Some(_) => RemoteReads::Emulated,
        };
        let fabric = Fabric::open(&chosen)?;
        // The domain of remote reads' entry where there is one: the read endpoint opens in it.
        let domain = match readable
            .as_ref()
            .and_then(|list| list.same_place_as(&chosen))
        {
            Some(entry) => Domain::open(&fabric, &entry)?,
            None => Domain::open(&fabric, &chosen)?,
        };
        // Room for one completion of every outstanding operation, with as much again of
        // receives for those that complete while earlier ones are read.
        let (small_recvs, large_recvs) = rx::recv_counts(&provider);
        let recv_buffers = small_recvs + large_recvs;
        let cq_entries = MAX_SENDS_IN_FLIGHT + 2 * recv_buffers;
        let cq = CompletionQueue::open(&domain, cq_entries)?;
        let av = AddressVector::open(&domain, chosen.av_type(), config.size as usize)?;
        let ep = Endpoint::open(&domain, &chosen, cq, av)?;
        let name = ep.name()?;
        let address = format!("ofi:{provider}:{}", hex_encode(&name));
        tracing::debug!(rank = config.rank.0, %provider, mr_mode = chosen.mr_mode(), tag_bits = chosen.tag_bits(), "libfabric endpoint open");
        if provider == "shm" {
            tracing::warn!(
                rank = config.rank.0,
                "libfabric's shm provider drops frames once about 1,800 are pending at a rank, and a rank killed while holding a region's lock hangs its peers until the job's time limit; prefer ftcoll's own shm transport on one machine"
            );
        }
        let rx = RecvSide::new(
            &domain,
            layout,
            (small_recvs, large_recvs),
            rx::loses_frames(&provider),
        )?;
        let mut transport = OfiTransport {
            ops: Ops::new(ep, MAX_SENDS_IN_FLIGHT, recv_buffers),
            reads: None,
            exposures: ExposureCache::new(KEPT_EXPOSURES),
            graveyard: GraveyardGuard::new(),
            rx,
            tx: SendSide::default(),
            domain,
            _fabric: fabric,
            _info: info,
            readable,
            remote_reads,
            rank: config.rank,
            size: config.size,
            provider,
            address,
            layout,
            resolver: config.resolver,
            peers: BTreeMap::new(),
            loopback: VecDeque::new(),
            loopback_bytes: 0,
            unreachable: Vec::new(),
            completions: Vec::new(),
            doorbell: Doorbell::new()?,
            spin: config.spin,
            idle_step: wait::MIN_IDLE_STEP,
            read_since_recv: false,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
        };
        transport.repost_receives()?;
        Ok(transport)
    }

    /// The provider in use, e.g. `tcp;ofi_rxm`.
    pub fn provider_name(&self) -> &str {
        &self.provider
    }

    /// Changes the bound on bytes queued or in flight (default [`DEFAULT_MAX_QUEUED_BYTES`]).
    /// One frame is always accepted when nothing is queued, whatever the bound.
    pub fn set_max_queued_bytes(&mut self, bytes: usize) {
        self.max_queued_bytes = bytes;
    }

    /// Reads completions, re-posts receive buffers, retries queued sends and closes released
    /// registrations; returns how many completions were read.
    fn pump(&mut self) -> Result<usize, TransportError> {
        // This runs on every poll of a spinning rank: each step below returns at once when it
        // has nothing to do. Buffers handed back since the last pump go to the provider
        // before the queue is read.
        self.repost_receives()?;
        let result = self
            .ops
            .poll(MAX_COMPLETIONS_PER_CALL, &mut self.completions);
        if !self.completions.is_empty() {
            self.handle_completions();
            if let Some(lost) = self.rx.take_lost() {
                return Err(TransportError::FramesLost {
                    provider: self.provider.clone(),
                    from: lost.source.0,
                    seq: lost.seq,
                    ahead: lost.ahead,
                });
            }
        }
        let read = result?;
        if let Some(reads) = &self.reads {
            // Serves peers' reads of this rank on providers that progress in software.
            rma::lock(reads).progress()?;
        }
        self.repost_receives()?;
        self.flush_queues();
        self.check_held_back_peers();
        self.release_failed_addresses();
        self.graveyard.graveyard().close_buried();
        if read > 0 {
            self.idle_step = wait::MIN_IDLE_STEP;
        }
        self.read_since_recv = true;
        Ok(read)
    }

    /// The read side, opened on first use.
    fn read_side(&mut self) -> Result<rma::SharedReadSide, TransportError> {
        if let Some(reads) = &self.reads {
            return Ok(Arc::clone(reads));
        }
        let chosen = self._info.first();
        let entry = self
            .readable
            .as_ref()
            .and_then(|list| list.same_place_as(&chosen))
            .ok_or_else(|| TransportError::Library {
                library: "libfabric",
                call: "fi_getinfo",
                why: format!("provider {} offers no remote reads", self.provider),
            })?;
        let side = rma::ReadSide::open(&self.domain, &entry, self.size)?;
        tracing::debug!(rank = self.rank.0, "remote-read endpoint open");
        Ok(Arc::clone(
            self.reads.insert(Arc::new(std::sync::Mutex::new(side))),
        ))
    }

    /// Hands the completions read to the send and receive sides.
    fn handle_completions(&mut self) {
        let mut completions = std::mem::take(&mut self.completions);
        for completion in completions.drain(..) {
            match completion {
                Completion::Send {
                    peer,
                    payload,
                    bytes,
                    status,
                } => self.on_send_done(peer, payload, bytes, status),
                Completion::Recv {
                    buffer,
                    tag,
                    len,
                    status,
                } => self.on_recv_done(buffer, tag, len, status),
            }
        }
        self.completions = completions;
    }
}

impl Drop for OfiTransport {
    fn drop(&mut self) {
        // Frames still queued (never posted) are discarded with the transport, as a crashed
        // process would discard them; `ops` then settles what was posted.
        if self.tx.frames() > 0 {
            tracing::debug!(
                rank = self.rank.0,
                frames = self.tx.frames(),
                "closing with frames queued"
            );
        }
    }
}

impl Transport for OfiTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Ofi
    }

    fn local_address(&self) -> String {
        self.address.clone()
    }

    fn max_frame_bytes(&self) -> usize {
        max_frame_bytes()
    }

    fn send(&mut self, to: Rank, frame: &[u8]) -> Result<(), TransportError> {
        self.send_copy(to, frame)
    }

    fn register(&mut self, bytes: usize) -> Result<RegisteredBuffer, TransportError> {
        let words: Arc<[u64]> = Arc::from(vec![0u64; bytes.div_ceil(8)]);
        if words.is_empty() {
            return Ok(RegisteredBuffer::zeroed(0));
        }
        let registration = UserRegistration::new(&self.domain, self.graveyard.graveyard(), &words)?;
        Ok(RegisteredBuffer::with_registration(
            words,
            Arc::new(registration),
        ))
    }

    fn send_registered(
        &mut self,
        to: Rank,
        buffer: &RegisteredBuffer,
        len: usize,
    ) -> Result<(), TransportError> {
        self.send_pinned(to, buffer, len)
    }

    #[inline]
    fn remote_reads(&self) -> RemoteReads {
        self.remote_reads
    }

    fn expose(
        &mut self,
        memory: ExposedMemory,
        identity: Option<u64>,
    ) -> Result<Option<Arc<Exposure>>, TransportError> {
        if self.remote_reads == RemoteReads::Unsupported {
            return Ok(None);
        }
        let side = self.read_side()?;
        let side = rma::lock(&side);
        let (domain, graveyard) = (&self.domain, self.graveyard.graveyard());
        let register = || rma::expose(domain, graveyard, memory, side.key_place());
        self.exposures.expose(identity, memory, register).map(Some)
    }

    fn forget_exposures(&mut self, live: &mut dyn FnMut(u64) -> bool) {
        self.exposures.retain(live);
    }

    fn exposure_counts(&self) -> (u64, u64) {
        self.exposures.counts()
    }

    fn remote_reader(
        &mut self,
        peer: Rank,
    ) -> Result<Option<Box<dyn RemoteReader>>, TransportError> {
        super::check_rank(peer, self.size)?;
        let lost = self
            .peers
            .get(&peer)
            .is_some_and(|p| p.state != peer::PeerState::Live);
        if self.remote_reads == RemoteReads::Unsupported || peer == self.rank || lost {
            return Ok(None);
        }
        let side = self.read_side()?;
        Ok(Some(Box::new(rma::OfiReader::new(
            peer,
            side,
            &self.domain,
            &self.provider,
        ))))
    }

    fn progress(&mut self) -> Result<usize, TransportError> {
        // With nothing queued or in flight there is nothing to push: arrivals are read by
        // `poll_recv` and `wait`, and an idle call costs no read of the queue (over tcp, a
        // provider progress with a system call in it).
        if self.tx.frames() == 0 && self.ops.sends() == 0 {
            return Ok(0);
        }
        self.pump()?;
        let in_flight = self.ops.sends().saturating_sub(self.abandoned_sends());
        Ok(self.tx.frames() + in_flight)
    }

    fn poll_recv(
        &mut self,
        max_frames: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> Result<usize, TransportError> {
        // Frames that an earlier read left ready go to the handler at once: reading the queue
        // again first would put a provider progress in their way. Every call still sees the
        // queue read since the previous one, so a stream of ready frames cannot starve it.
        if !(self.read_since_recv && self.has_work()) {
            self.pump()?;
        }
        self.read_since_recv = false;
        let mut handled = 0;
        while handled < max_frames {
            let Some((words, len)) = self.loopback.pop_front() else {
                break;
            };
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            handler(self.rank, bytes.get(..len).unwrap_or_default());
            self.loopback_bytes = self.loopback_bytes.saturating_sub(len);
            handled += 1;
        }
        handled += self.rx.deliver(max_frames - handled, &self.peers, handler);
        // Re-posting is a provider call per buffer. While nearly all are still posted, the
        // few just handed back wait for the next pump, after the caller has answered their
        // frames, rather than delaying the answer.
        if self.rx.idle_buffers() > rx::MAX_DEFERRED_REPOSTS {
            self.repost_receives()?;
        }
        Ok(handled)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> Result<(), TransportError> {
        self.wait_for_work(timeout)
    }

    fn waker(&self) -> Waker {
        let doorbell = Arc::clone(&self.doorbell);
        Waker::new(move || doorbell.ring())
    }

    fn peer_failed(&mut self, peer: Rank) {
        self.forget_peer(peer);
    }

    fn take_unreachable(&mut self, out: &mut Vec<Rank>) {
        out.append(&mut self.unreachable);
    }
}
