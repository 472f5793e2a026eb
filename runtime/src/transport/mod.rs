//! Transports: how frames move between real ranks.
//!
//! Every backend implements [`Transport`], a small non-blocking interface shaped for RDMA
//! libraries as much as for sockets: sends are queued and complete in [`Transport::progress`],
//! arrivals are handed to a callback *in place* (a borrowed slice of the receive buffer, for
//! shared memory the receiver's inbox itself), memory can be registered for sends, and the local
//! address is exported for bootstrap. [`backend::Backend`] is the static set of compiled-in backends; a
//! backend that is not compiled in is a run-time error, never a silent fallback.

pub mod backend;
pub mod shm;
pub mod tcp;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ftcoll_algos::Rank;

/// Which transport carries the data plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// Shared memory on one machine (the default; no system libraries).
    Shm,
    /// TCP sockets (the fallback, and the one that crosses machines).
    Tcp,
    /// UCX (needs the `ucx` feature and libucx).
    Ucx,
    /// libfabric (needs the `libfabric` feature and libfabric).
    Libfabric,
}

impl TransportKind {
    /// The `--transport` name.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Shm => "shm",
            TransportKind::Tcp => "tcp",
            TransportKind::Ucx => "ucx",
            TransportKind::Libfabric => "libfabric",
        }
    }

    /// Parses a `--transport` name.
    pub fn parse(name: &str) -> Result<TransportKind, TransportError> {
        match name {
            "shm" => Ok(TransportKind::Shm),
            "tcp" => Ok(TransportKind::Tcp),
            "ucx" => Ok(TransportKind::Ucx),
            "libfabric" | "ofi" => Ok(TransportKind::Libfabric),
            other => Err(TransportError::UnknownTransport(other.to_string())),
        }
    }

    /// Whether this build contains the backend.
    pub fn compiled_in(self) -> bool {
        matches!(self, TransportKind::Shm | TransportKind::Tcp)
    }
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
    #[error("unknown transport '{0}'; use shm or tcp (ucx and libfabric need their features)")]
    UnknownTransport(String),
    /// A backend this build does not contain.
    #[error("transport {0} is not compiled into this build; rebuild with --features {0} (see the README's RDMA section) or use shm or tcp")]
    NotCompiledIn(TransportKind),
    /// A frame larger than the backend carries in one piece.
    #[error("frame of {len} bytes exceeds the transport's limit of {limit} bytes; raise FTCOLL_SHM_LANE_BYTES or send smaller vectors")]
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

/// Memory registered with a transport for sends. Shared memory and TCP need no registration,
/// so theirs is plain aligned memory; RDMA backends pin and register it, and the handle keeps
/// the registration alive exactly as long as the buffer.
#[derive(Debug)]
pub struct RegisteredBuffer {
    words: Box<[u64]>,
}

impl RegisteredBuffer {
    /// A zeroed, 8-byte aligned buffer of at least `bytes` bytes.
    pub fn zeroed(bytes: usize) -> RegisteredBuffer {
        RegisteredBuffer {
            words: vec![0u64; bytes.div_ceil(8)].into_boxed_slice(),
        }
    }

    /// The buffer's bytes.
    pub fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.words)
    }

    /// The buffer's bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.words)
    }

    /// The buffer's words (payloads are written here as Pod slices).
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
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
        let frame = buffer
            .bytes()
            .get(..len)
            .ok_or(TransportError::FrameTooLarge {
                len,
                limit: buffer.bytes().len(),
            })?;
        self.send(to, frame)
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

    /// A handle that wakes [`Transport::wait`] from another thread.
    fn waker(&self) -> Waker;

    /// `peer` has failed: release whatever the transport holds for it (queued sends, lanes,
    /// connections).
    fn peer_failed(&mut self, peer: Rank);
}
