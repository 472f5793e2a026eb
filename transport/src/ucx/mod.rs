//! UCX transport: the data plane over whatever UCX finds (InfiniBand/RoCE verbs, TCP),
//! through its tag-matching API.
//!
//! Every endpoint asks for peer failure handling, which UCX 1.13's shared-memory transports
//! (posix, sysv, cma, self) lack: UCX leaves them out, so ranks on one machine talk over TCP or
//! verbs here, and the `shm` transport is the one for a single machine.
//!
//! # Layers
//! The private modules `context`, `worker`, `endpoint`, `request` and `pool` wrap UCX in RAII
//! handles: a `Context` (`Arc`) outlives the `Worker` and every memory registration; the
//! `Worker` (`Arc`) outlives every endpoint and request; a request owns the memory it uses
//! until UCX completes it. On them, `tx` keeps the endpoints and the sends in flight, `rx` the
//! frames received, and [`UcxTransport`] ties the two together; none of these three holds a raw
//! handle.
//!
//! # Wire
//! One worker per rank, in one context with the tag and wakeup features. A rank's address is
//! its worker address, hex-encoded after `ucx:`. Endpoints open lazily on the first send to a
//! peer. Each frame is one tagged message whose tag carries the sender's rank (and a magic
//! upper half), so the receiver takes any message and reads the sender from the tag; per
//! sender, UCX's tag matching keeps frames in send order. Frames to self never enter UCX.
//!
//! # Sends
//! [`Transport::send`] copies the frame once into a slot of registered memory (the `pool`
//! module) and passes the slot's memory handle in the request parameters
//! (`UCP_OP_ATTR_FIELD_MEMH`, which UCX 1.13 has), so UCX need not register it;
//! [`Transport::send_registered`] sends in place from a buffer [`Transport::register`] made,
//! holding a pin on it until completion. UCX queues what it cannot send at once; the transport
//! bounds the bytes in flight ([`DEFAULT_MAX_QUEUED_BYTES`]) and answers
//! [`TransportError::Backpressure`] beyond it.
//!
//! # Remote reads
//! The context also asks for RMA. [`Transport::expose`] maps memory (`ucp_mem_map`) and packs
//! its remote key, kept in a bounded cache under an identity the caller vouches for, or for
//! the caller's use only; [`Transport::remote_reader`] shares the endpoint to a peer with a
//! reader that gets (`ucp_get_nbx`) from the peer's exposed memory into its own buffer (see
//! `rma`). Over an RDMA device the network card serves the reads; over TCP UCX emulates them
//! from the owner's progress loop ([`RemoteReads::Emulated`]).
//!
//! # Waiting
//! [`Transport::wait`] progresses the worker in a busy loop for [`UcxConfig::spin`], then arms
//! the worker's event descriptor and sleeps in `poll(2)` on it and on the eventfd the [`Waker`]
//! writes, so idle ranks use no CPU.
//!
//! # Lost peers
//! Endpoints use UCX's peer error handling: a peer that dies makes UCX report an error on the
//! endpoint instead of aborting the process. The transport then closes the endpoint, drops
//! what was in flight to the peer, discards later frames to it, and reports it once through
//! [`Transport::take_unreachable`].

mod address;
mod context;
mod endpoint;
mod hold;
mod pool;
mod probe;
mod request;
mod rma;
mod rx;
mod tx;
mod worker;

#[cfg(test)]
mod tests;

use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ftcoll_algos::Rank;
use rustix::event::{eventfd, EventfdFlags};

use super::remote::{ExposedMemory, Exposure, ExposureCache, RemoteReader, RemoteReads};
use super::{RegisteredBuffer, Transport, TransportError, TransportKind, Waker};
pub use address::ADDRESS_PREFIX;
use context::Context;
pub use probe::probe_rdma_device;
pub use rma::MAX_READ_BYTES;
use rx::Inbox;
use tx::Outbox;
use worker::{Armed, Worker};

/// Default bound on bytes in flight to all peers together (including frames to self not yet
/// received); a send beyond it is [`TransportError::Backpressure`].
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 256 << 20;

/// Registrations the transport keeps under identities ([`Transport::expose`]).
const EXPOSURES_KEPT: usize = 16;

/// `ucp_worker_progress` calls per progress step (each call may handle several events).
const PROGRESS_ROUNDS: usize = 64;

/// How to set up the UCX transport of one rank.
pub struct UcxConfig {
    /// This rank.
    pub rank: Rank,
    /// Number of ranks in the job.
    pub size: u32,
    /// Looks up a peer's address: exactly the string the peer's `local_address()` returned.
    /// Called once per peer, lazily on first send; may block briefly.
    pub resolver: Box<dyn FnMut(Rank) -> Result<String, TransportError> + Send>,
    /// UCX transports to use (`UCX_TLS` syntax, e.g. "tcp" or "sm,self"), applied with
    /// `ucp_config_modify`; `None` = UCX's own choice / the `UCX_TLS` environment variable.
    pub tls: Option<String>,
    /// How long `wait` busy-polls before arming the worker and blocking (0 = block at once).
    pub spin: Duration,
}

impl fmt::Debug for UcxConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UcxConfig")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("tls", &self.tls)
            .field("spin", &self.spin)
            .finish_non_exhaustive()
    }
}

/// The UCX endpoint of one rank. See the [module documentation](self).
pub struct UcxTransport {
    rank: Rank,
    size: u32,
    resolver: Box<dyn FnMut(Rank) -> Result<String, TransportError> + Send>,
    spin: Duration,
    address: String,
    max_queued_bytes: usize,
    // Field order is drop order: sends and endpoints, receives, then the worker and the
    // context (each also kept alive by whatever still holds it).
    outbox: Outbox,
    inbox: Inbox,
    /// The Waker's eventfd, and a flag it raises so the spin phase need not read the fd.
    wake_fd: Arc<OwnedFd>,
    woken: Arc<AtomicBool>,
    /// Registrations kept under identities the caller vouches for (see [`crate::remote`]).
    exposures: ExposureCache,
    /// How this context serves remote reads: in hardware where UCX sees an RDMA device.
    remote_reads: RemoteReads,
    worker: Arc<Worker>,
    context: Arc<Context>,
}

impl fmt::Debug for UcxTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UcxTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("inflight_bytes", &self.outbox.inflight_bytes())
            .field("pool_mapped_bytes", &self.outbox.pool_mapped_bytes())
            .finish_non_exhaustive()
    }
}

fn max_frame_bytes() -> usize {
    super::network_max_frame_bytes()
}

impl UcxTransport {
    /// Initialises UCX for this rank: context, worker and wakeup descriptors.
    pub fn new(config: UcxConfig) -> Result<UcxTransport, TransportError> {
        super::check_rank(config.rank, config.size)?;
        let context = Context::new(config.tls.as_deref(), config.size as usize)?;
        let worker = Worker::new(&context)?;
        let address = address::encode_address(&worker.address()?);
        let wake_fd = eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)
            .map_err(|e| TransportError::io("creating the UCX waker's eventfd", e.into()))?;
        let address_bytes = address.len();
        tracing::debug!(rank = config.rank.0, tls = ?config.tls, address_bytes, "UCX transport up");
        let remote_reads = match (probe_rdma_device(), config.tls.as_deref()) {
            // Restricted to TCP, the context has no device to read with.
            (_, Some("tcp")) | (Ok(None) | Err(_), _) => RemoteReads::Emulated,
            (Ok(Some(_)), _) => RemoteReads::Native,
        };
        Ok(UcxTransport {
            rank: config.rank,
            size: config.size,
            resolver: config.resolver,
            spin: config.spin,
            address,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            outbox: Outbox::new(config.rank, &worker, &context),
            inbox: Inbox::new(config.rank, config.size, max_frame_bytes()),
            wake_fd: Arc::new(wake_fd),
            woken: Arc::new(AtomicBool::new(false)),
            exposures: ExposureCache::new(EXPOSURES_KEPT),
            remote_reads,
            worker,
            context,
        })
    }

    /// Changes the bound on bytes in flight (default [`DEFAULT_MAX_QUEUED_BYTES`]). One frame
    /// is always accepted when nothing is in flight, whatever the bound.
    pub fn set_max_queued_bytes(&mut self, bytes: usize) {
        self.max_queued_bytes = bytes;
    }

    fn queued_bytes(&self) -> usize {
        self.outbox.inflight_bytes() + self.inbox.own_bytes()
    }

    /// Checks a frame of `len` bytes to `to` and connects to `to`; `Ok(false)` means discard
    /// the frame (failed peer) and `Ok(true)` send it.
    fn admit(&mut self, to: Rank, len: usize) -> Result<bool, TransportError> {
        super::check_network_frame(to, self.size, len)?;
        if len == 0 {
            return Err(TransportError::io(
                "sending over UCX",
                io::Error::new(io::ErrorKind::InvalidInput, "frames are never empty"),
            ));
        }
        if self.outbox.is_failed(to) {
            tracing::trace!(
                rank = self.rank.0,
                peer = to.0,
                "discarded frame to failed peer"
            );
            return Ok(false);
        }
        let over =
            |t: &UcxTransport| t.queued_bytes() > 0 && t.queued_bytes() + len > t.max_queued_bytes;
        if over(self) {
            self.drive();
            if over(self) {
                return Err(TransportError::Backpressure {
                    queued_bytes: self.queued_bytes(),
                });
            }
        }
        if to != self.rank {
            self.outbox.connect(to, &mut self.resolver)?;
        }
        Ok(true)
    }

    /// Progresses the worker, then lets the send side handle what happened; returns the
    /// number of events UCX processed.
    fn drive(&mut self) -> usize {
        let events = self.worker.lock().progress(PROGRESS_ROUNDS);
        self.outbox.after_progress();
        events
    }

    /// Whether a call would find something to do without waiting.
    fn work_ready(&mut self) -> bool {
        self.outbox.has_unreachable()
            || self.woken.swap(false, Ordering::AcqRel)
            || self.inbox.has_ready()
            || self.worker.lock().message_waiting()
    }

    /// Clears the Waker's eventfd (and flag).
    fn drain_wake(&self) {
        self.woken.store(false, Ordering::Release);
        let mut count = [0u8; 8];
        // Nothing to read (EAGAIN) just means no wake was pending.
        let _ = rustix::io::read(self.wake_fd.as_fd(), &mut count);
    }
}

impl Transport for UcxTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Ucx
    }

    fn local_address(&self) -> String {
        self.address.clone()
    }

    fn max_frame_bytes(&self) -> usize {
        max_frame_bytes()
    }

    fn send(&mut self, to: Rank, frame: &[u8]) -> Result<(), TransportError> {
        if !self.admit(to, frame.len())? {
            return Ok(());
        }
        if to == self.rank {
            self.inbox.push_own(frame);
            return Ok(());
        }
        self.outbox.send_copy(to, frame)
    }

    fn register(&mut self, bytes: usize) -> Result<RegisteredBuffer, TransportError> {
        context::registered_buffer(&self.context, bytes)
    }

    fn send_registered(
        &mut self,
        to: Rank,
        buffer: &RegisteredBuffer,
        len: usize,
    ) -> Result<(), TransportError> {
        let frame = buffer.prefix(len)?;
        if !self.admit(to, len)? {
            return Ok(());
        }
        if to == self.rank {
            self.inbox.push_own(frame);
            return Ok(());
        }
        self.outbox.send_pinned(to, buffer, len)
    }

    fn remote_reads(&self) -> RemoteReads {
        self.remote_reads
    }

    fn expose(
        &mut self,
        memory: ExposedMemory,
        identity: Option<u64>,
    ) -> Result<Option<Arc<Exposure>>, TransportError> {
        let context = &self.context;
        let register = || rma::expose(context, memory);
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
        if peer == self.rank || self.outbox.is_failed(peer) {
            return Ok(None);
        }
        self.outbox.connect(peer, &mut self.resolver)?;
        Ok(self.outbox.endpoint(peer).map(|endpoint| {
            Box::new(rma::UcxReader::new(peer, endpoint, &self.worker)) as Box<dyn RemoteReader>
        }))
    }

    fn progress(&mut self) -> Result<usize, TransportError> {
        // With nothing in flight there is nothing to push along: arrivals and peer errors are
        // taken by `poll_recv` and `wait`, which progress the worker themselves. Skipping it
        // saves an epoll round trip per turn of a polling loop.
        if self.outbox.inflight_frames() > 0 {
            self.drive();
        }
        Ok(self.outbox.inflight_frames())
    }

    fn poll_recv(
        &mut self,
        max_frames: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> Result<usize, TransportError> {
        self.drive();
        self.inbox.take_arrivals(&self.worker);
        Ok(self.inbox.deliver(max_frames, handler))
    }

    fn wait(&mut self, timeout: Option<Duration>) -> Result<(), TransportError> {
        let start = Instant::now();
        let deadline = timeout.map(|t| start + t);
        if self.drive() > 0 || self.work_ready() {
            return Ok(());
        }
        let spin_until = start + timeout.map_or(self.spin, |t| t.min(self.spin));
        while Instant::now() < spin_until {
            if self.drive() > 0 || self.work_ready() {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        // Arm only once progress finds nothing: UCX reports BUSY for events still pending.
        {
            let mut worker = self.worker.lock();
            if worker.progress(PROGRESS_ROUNDS) > 0 || worker.message_waiting() {
                return Ok(());
            }
            if worker.arm()? == Armed::Busy {
                return Ok(());
            }
        }
        let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        self.worker.block(self.wake_fd.as_fd(), remaining)?;
        self.drain_wake();
        Ok(())
    }

    fn waker(&self) -> Waker {
        let (fd, woken) = (Arc::clone(&self.wake_fd), Arc::clone(&self.woken));
        Waker::new(move || {
            woken.store(true, Ordering::Release);
            // Failing to wake only delays the waiter until its timeout.
            let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
        })
    }

    fn peer_failed(&mut self, peer: Rank) {
        if peer.0 >= self.size || peer == self.rank {
            return;
        }
        self.outbox.forget(peer);
        self.inbox.ignore(peer);
    }

    fn take_unreachable(&mut self, out: &mut Vec<Rank>) {
        self.outbox.take_unreachable(out);
    }
}
