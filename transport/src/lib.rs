//! Transports: how frames move between real ranks.
//!
//! Every backend implements [`Transport`], a small non-blocking interface shaped for RDMA
//! libraries as much as for sockets: sends are queued and complete in [`Transport::progress`],
//! arrivals are handed to a callback *in place* (a borrowed slice of the receive buffer, for
//! shared memory the receiver's inbox itself), memory can be registered for sends, and the local
//! address is exported for bootstrap. [`backend::Backend`] is the static set of compiled-in backends; a
//! backend that is not compiled in is a run-time error, never a silent fallback.
//!
//! The crate knows nothing of the rest of ftcoll beyond `ftcoll-algos` (ranks and the wire
//! format's limits); `ftcoll-runtime` re-exports it as `ftcoll_runtime::transport`. The `ucx` and
//! `ofi` features compile the RDMA backends (and need their system libraries and libclang).

pub mod backend;
pub mod huge_pages;
#[cfg(feature = "ofi")]
pub mod ofi;
pub mod open;
pub mod remote;
pub mod shm;
pub mod stream_copy;
pub mod tcp;
#[cfg(all(test, any(feature = "ucx", feature = "ofi")))]
mod test_directory;
#[cfg(feature = "ucx")]
pub mod ucx;

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ftcoll_algos::Rank;

use remote::{ExposedMemory, Exposure, RemoteReader, RemoteReads};

/// Largest frame a network backend (TCP, UCX, libfabric) carries: a header and the largest
/// payload of the wire format.
pub fn network_max_frame_bytes() -> usize {
    ftcoll_algos::wire::HEADER_BYTES + ftcoll_algos::wire::MAX_PAYLOAD_BYTES
}

/// `rank` must lie in a job of `size` ranks.
pub fn check_rank(rank: Rank, size: u32) -> Result<(), TransportError> {
    if rank.0 >= size {
        return Err(TransportError::NoSuchRank { rank: rank.0, size });
    }
    Ok(())
}

/// A frame of `len` bytes to `to` in a job of `size` ranks, over a network backend: the
/// destination must exist and the frame fit [`network_max_frame_bytes`].
pub fn check_network_frame(to: Rank, size: u32, len: usize) -> Result<(), TransportError> {
    check_rank(to, size)?;
    let limit = network_max_frame_bytes();
    if len > limit {
        return Err(TransportError::FrameTooLarge { len, limit });
    }
    Ok(())
}

/// Which transport carries the data plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// Shared memory on one machine (the default; no system libraries).
    Shm,
    /// TCP sockets (the fallback, and the one that crosses machines).
    Tcp,
    /// UCX (needs the `ucx` feature and libucx).
    Ucx,
    /// libfabric (needs the `ofi` feature and libfabric).
    Ofi,
}

impl TransportKind {
    /// The `--transport` name.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Shm => "shm",
            TransportKind::Tcp => "tcp",
            TransportKind::Ucx => "ucx",
            TransportKind::Ofi => "ofi",
        }
    }

    /// Parses a `--transport` name.
    pub fn parse(name: &str) -> Result<TransportKind, TransportError> {
        match name {
            "shm" => Ok(TransportKind::Shm),
            "tcp" => Ok(TransportKind::Tcp),
            "ucx" => Ok(TransportKind::Ucx),
            "ofi" | "libfabric" => Ok(TransportKind::Ofi),
            other => Err(TransportError::UnknownTransport(other.to_string())),
        }
    }

    /// Whether this build contains the backend.
    pub fn compiled_in(self) -> bool {
        match self {
            TransportKind::Shm | TransportKind::Tcp => true,
            TransportKind::Ucx => cfg!(feature = "ucx"),
            TransportKind::Ofi => cfg!(feature = "ofi"),
        }
    }

    /// The cargo feature and Debian package an RDMA backend needs (`None` for built-in ones).
    pub fn requirement(self) -> Option<(&'static str, &'static str)> {
        match self {
            TransportKind::Shm | TransportKind::Tcp => None,
            TransportKind::Ucx => Some(("ucx", "libucx-dev")),
            TransportKind::Ofi => Some(("ofi", "libfabric-dev")),
        }
    }
}

/// The transport a `--transport` name asks for: `auto` takes an RDMA backend that is compiled in
/// and finds an RDMA device, else shared memory when every rank runs on this machine
/// (`one_machine`), else TCP. A named backend must be compiled in.
pub fn choose(name: &str, one_machine: bool) -> Result<TransportKind, TransportError> {
    if name != "auto" {
        let kind = TransportKind::parse(name)?;
        if !kind.compiled_in() {
            return Err(TransportError::NotCompiledIn(kind));
        }
        return Ok(kind);
    }
    if let Some(kind) = rdma_with_device() {
        return Ok(kind);
    }
    Ok(if one_machine {
        TransportKind::Shm
    } else {
        TransportKind::Tcp
    })
}

/// The first compiled-in RDMA backend that sees an RDMA device. A library that fails to
/// initialise only loses its turn: `auto` must still find a working transport.
fn rdma_with_device() -> Option<TransportKind> {
    #[cfg(feature = "ucx")]
    match ucx::probe_rdma_device() {
        Ok(Some(device)) => {
            tracing::info!(%device, "auto transport: UCX sees an RDMA device");
            return Some(TransportKind::Ucx);
        }
        Ok(None) => tracing::debug!("auto transport: UCX sees no RDMA device"),
        Err(error) => tracing::info!(%error, "auto transport: UCX unusable"),
    }
    #[cfg(feature = "ofi")]
    match ofi::probe_rdma_provider() {
        Ok(Some(provider)) => {
            tracing::info!(%provider, "auto transport: libfabric offers an RDMA provider");
            return Some(TransportKind::Ofi);
        }
        Ok(None) => tracing::debug!("auto transport: libfabric offers no RDMA provider"),
        Err(error) => tracing::info!(%error, "auto transport: libfabric unusable"),
    }
    None
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A transport failure.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// No such transport name.
    #[error("unknown transport '{0}'; use auto, shm, tcp, ucx or ofi")]
    UnknownTransport(String),
    /// A backend this build does not contain.
    #[error("transport {0} is not compiled into this build: it needs the cargo feature '{0}' (see docs/clusters.md); or use shm or tcp")]
    NotCompiledIn(TransportKind),
    /// An RDMA library call failed (or the library found no usable device).
    #[error("{library} {call} failed: {why}")]
    Library {
        /// `ucx` or `libfabric`.
        library: &'static str,
        /// The library function.
        call: &'static str,
        /// The library's own error text.
        why: String,
    },
    /// A frame larger than the backend carries in one piece.
    #[error("frame of {len} bytes exceeds the transport's limit of {limit} bytes; send smaller vectors (over shared memory, FTCOLL_SHM_LANE_BYTES raises the limit)")]
    FrameTooLarge {
        /// Frame length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A destination outside the job.
    #[error("rank {rank} is outside the job of {size} ranks")]
    NoSuchRank {
        /// The rank.
        rank: u32,
        /// Job size.
        size: u32,
    },
    /// Too much data is queued for receivers that do not drain it.
    #[error("send queue full: {queued_bytes} bytes wait for slow receivers")]
    Backpressure {
        /// Bytes queued.
        queued_bytes: usize,
    },
    /// The provider lost a frame on a link: far more later frames arrived than can overtake
    /// one still in flight.
    #[error("the libfabric {provider} provider lost frame {seq} from rank {from}: {ahead} later frames arrived without it; on one machine use ftcoll's own shared-memory transport")]
    FramesLost {
        /// The provider's name.
        provider: String,
        /// The sending rank.
        from: u32,
        /// The missing frame's sequence number on the link.
        seq: u64,
        /// Frames held after it.
        ahead: usize,
    },
    /// The shared-memory segment is not what this rank expects.
    #[error("shared-memory segment: {0}")]
    Segment(String),
    /// A peer's address could not be resolved through the control plane.
    #[error("cannot resolve the address of rank {rank}: {why}")]
    Resolve {
        /// The rank.
        rank: u32,
        /// Why.
        why: String,
    },
    /// An operating-system error.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl TransportError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: &'static str, source: std::io::Error) -> TransportError {
        TransportError::Io { context, source }
    }
}

/// Wakes a rank blocked in [`Transport::wait`] from another thread (the control-plane thread
/// uses it when a failure notice arrives).
#[derive(Clone)]
pub struct Waker(Arc<dyn Fn() + Send + Sync>);

impl Waker {
    /// A waker that runs `wake`.
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Waker {
        Waker(Arc::new(wake))
    }

    /// Wakes the waiting rank (harmless if it is not waiting).
    pub fn wake(&self) {
        (self.0)()
    }
}

impl fmt::Debug for Waker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Waker")
    }
}

/// A backend's registration of some memory with its library (a UCX memory handle, a libfabric
/// memory region). Dropping the last reference deregisters the memory.
pub trait Registration: Send + Sync + 'static {
    /// The backend's concrete type, for the backend that made it to downcast.
    fn as_any(&self) -> &dyn Any;
}

/// Memory registered with a transport for sends. Shared memory and TCP need no registration,
/// so theirs is plain aligned memory; RDMA backends pin and register it. A send from it holds a
/// [`PinnedBuffer`] until the library has finished with the bytes, and while one exists the
/// buffer cannot be written ([`RegisteredBuffer::words_mut`] returns `None`), nor can the
/// registration end: an in-flight operation owns what it sends.
pub struct RegisteredBuffer {
    // Declared before `words`: whoever drops last deregisters before the memory is freed.
    registration: Option<Arc<dyn Registration>>,
    words: Arc<[u64]>,
}

impl RegisteredBuffer {
    /// A zeroed, 8-byte aligned buffer of at least `bytes` bytes, registered with nothing.
    pub fn zeroed(bytes: usize) -> RegisteredBuffer {
        RegisteredBuffer {
            registration: None,
            words: Arc::from(vec![0u64; bytes.div_ceil(8)]),
        }
    }

    /// `words` registered by a backend (which registered exactly this allocation).
    pub fn with_registration(
        words: Arc<[u64]>,
        registration: Arc<dyn Registration>,
    ) -> RegisteredBuffer {
        RegisteredBuffer {
            registration: Some(registration),
            words,
        }
    }

    /// The buffer's bytes.
    pub fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.words)
    }

    /// The buffer's bytes, writable; `None` while a send from the buffer is in flight.
    pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        Arc::get_mut(&mut self.words).map(bytemuck::cast_slice_mut)
    }

    /// The buffer's words (payloads are written here as Pod slices); `None` while a send from
    /// the buffer is in flight.
    pub fn words_mut(&mut self) -> Option<&mut [u64]> {
        Arc::get_mut(&mut self.words)
    }

    /// The backend registration, if any.
    pub fn registration(&self) -> Option<&Arc<dyn Registration>> {
        self.registration.as_ref()
    }

    /// The first `len` bytes, or [`TransportError::FrameTooLarge`] if the buffer is shorter.
    pub fn prefix(&self, len: usize) -> Result<&[u8], TransportError> {
        self.bytes()
            .get(..len)
            .ok_or(TransportError::FrameTooLarge {
                len,
                limit: self.bytes().len(),
            })
    }

    /// A reference that keeps the memory and its registration alive (and the buffer read-only)
    /// until dropped: what an in-flight send owns.
    pub fn pin(&self) -> PinnedBuffer {
        PinnedBuffer {
            registration: self.registration.clone(),
            words: Arc::clone(&self.words),
        }
    }
}

impl fmt::Debug for RegisteredBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredBuffer")
            .field("bytes", &self.bytes().len())
            .field("registered", &self.registration.is_some())
            .finish()
    }
}

/// What an in-flight send holds of a [`RegisteredBuffer`]: see [`RegisteredBuffer::pin`].
pub struct PinnedBuffer {
    // Declared before `words`, as in `RegisteredBuffer`.
    registration: Option<Arc<dyn Registration>>,
    words: Arc<[u64]>,
}

impl PinnedBuffer {
    /// The pinned bytes.
    pub fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.words)
    }

    /// The backend registration, if any.
    pub fn registration(&self) -> Option<&Arc<dyn Registration>> {
        self.registration.as_ref()
    }
}

impl fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("bytes", &self.bytes().len())
            .finish()
    }
}

/// A non-blocking transport endpoint of one rank.
pub trait Transport {
    /// Which backend this is.
    fn kind(&self) -> TransportKind;

    /// This rank's address, registered with the bootstrap service for peers to resolve.
    fn local_address(&self) -> String;

    /// Largest frame sent in one piece.
    fn max_frame_bytes(&self) -> usize;

    /// Sends `frame` to `to`, or queues a copy to complete in [`Transport::progress`] when the
    /// receiver has no room. Never blocks; never drops a frame (a bounded queue overflowing is an
    /// error).
    fn send(&mut self, to: Rank, frame: &[u8]) -> Result<(), TransportError>;

    /// Registers `bytes` of memory for sends.
    fn register(&mut self, bytes: usize) -> Result<RegisteredBuffer, TransportError> {
        Ok(RegisteredBuffer::zeroed(bytes))
    }

    /// Sends the first `len` bytes of a registered buffer.
    fn send_registered(
        &mut self,
        to: Rank,
        buffer: &RegisteredBuffer,
        len: usize,
    ) -> Result<(), TransportError> {
        let frame = buffer.prefix(len)?;
        self.send(to, frame)
    }

    /// How this transport serves remote reads (see [`remote`]).
    fn remote_reads(&self) -> RemoteReads {
        RemoteReads::Unsupported
    }

    /// Registers `memory` for peers' reads and returns the key that names it, or `None` where
    /// the transport has no remote reads. With an `identity`, the registration is kept under
    /// it and returned again for the same memory (see [`remote::ExposureCache`]).
    ///
    /// The caller keeps the memory allocated while any peer may read it through the key,
    /// cached or not, and never lets one identity name memory that was freed while the
    /// registration was kept ([`Transport::forget_exposures`] drops them first).
    fn expose(
        &mut self,
        memory: ExposedMemory,
        identity: Option<u64>,
    ) -> Result<Option<Arc<Exposure>>, TransportError> {
        let _ = (memory, identity);
        Ok(None)
    }

    /// Drops the kept registrations whose identities `live` no longer vouches for.
    fn forget_exposures(&mut self, live: &mut dyn FnMut(u64) -> bool) {
        let _ = live;
    }

    /// (hits, misses) of the kept registrations so far.
    fn exposure_counts(&self) -> (u64, u64) {
        (0, 0)
    }

    /// A reader of `peer`'s exposed memory, or `None` where the transport has no remote reads
    /// (or the peer is this rank, or failed).
    fn remote_reader(
        &mut self,
        peer: Rank,
    ) -> Result<Option<Box<dyn RemoteReader>>, TransportError> {
        let _ = peer;
        Ok(None)
    }

    /// Pushes queued sends along; returns how many frames are still queued.
    fn progress(&mut self) -> Result<usize, TransportError>;

    /// Hands up to `max_frames` arrived frames to `handler` as `(source, bytes)`, the bytes
    /// borrowed in place; returns how many were handled.
    fn poll_recv(
        &mut self,
        max_frames: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> Result<usize, TransportError>;

    /// Blocks until a frame may have arrived, the [`Waker`] was rung, queued sends may proceed,
    /// or `timeout` passes. Spurious returns are allowed.
    fn wait(&mut self, timeout: Option<Duration>) -> Result<(), TransportError>;

    /// [`Transport::wait`] until `deadline`. A transport that can look for arrivals before it
    /// reads the clock overrides it: most waits of a polling rank end before any clock read.
    fn wait_until(&mut self, deadline: std::time::Instant) -> Result<(), TransportError> {
        self.wait(Some(
            deadline.saturating_duration_since(std::time::Instant::now()),
        ))
    }

    /// [`Transport::wait_until`] for an operation whose deadline, `limit` from now, is set at
    /// its first clock read. A transport that can look for arrivals without the clock reads it
    /// (and sets `deadline`) only when nothing has arrived.
    fn wait_within(
        &mut self,
        limit: Duration,
        deadline: &mut Option<std::time::Instant>,
    ) -> Result<(), TransportError> {
        let at = *deadline.get_or_insert_with(|| std::time::Instant::now() + limit);
        self.wait_until(at)
    }

    /// A handle that wakes [`Transport::wait`] from another thread.
    fn waker(&self) -> Waker;

    /// `peer` has failed: release whatever the transport holds for it (queued sends, lanes,
    /// connections).
    fn peer_failed(&mut self, peer: Rank);

    /// Moves into `out` the peers the transport itself found unreachable since the last call
    /// (an RDMA library's peer-error callback or error completion); the executor reports them
    /// to the launcher, which alone declares ranks failed. Backends that cannot tell return
    /// nothing.
    fn take_unreachable(&mut self, out: &mut Vec<Rank>) {
        let _ = out;
    }
}

#[cfg(test)]
mod choice_tests {
    use super::*;

    #[test]
    fn auto_without_rdma_is_shared_memory_on_one_machine_else_tcp() {
        match rdma_with_device() {
            // A machine with an RDMA device and its backend compiled in takes it either way.
            Some(kind) => {
                assert_eq!(choose("auto", true).unwrap(), kind);
                assert_eq!(choose("auto", false).unwrap(), kind);
            }
            None => {
                assert_eq!(choose("auto", true).unwrap(), TransportKind::Shm);
                assert_eq!(choose("auto", false).unwrap(), TransportKind::Tcp);
            }
        }
    }

    #[test]
    fn named_backends_must_be_compiled_in() {
        assert_eq!(choose("tcp", true).unwrap(), TransportKind::Tcp);
        assert_eq!(choose("libfabric", true).is_ok(), cfg!(feature = "ofi"));
        let ucx = choose("ucx", true);
        assert_eq!(ucx.is_ok(), TransportKind::Ucx.compiled_in());
        if let Err(error) = ucx {
            let text = error.to_string();
            assert!(text.contains("cargo feature 'ucx'"), "{text}");
            assert!(!text.contains('\n'));
        }
        let unknown = choose("verbs", true).unwrap_err().to_string();
        assert!(unknown.contains("auto, shm, tcp, ucx or ofi"), "{unknown}");
    }
}
