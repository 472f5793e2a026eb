//! Remote reads: memory a rank exposes for its peers to read, and the reader that reads a
//! peer's exposed memory without the peer's processor taking part (an RMA get).
//!
//! This is the network side of the single copy: over a network with RMA, the ring allreduce
//! reads each block straight out of the left neighbour's vector, as it does by cross-memory
//! attach on one machine, so the sender makes no copy of its vector into send buffers.
//!
//! **Keys.** [`Transport::expose`](super::Transport::expose) registers memory with the backend
//! and returns an [`Exposure`]: the registration, and the key (bytes) a peer needs to read the
//! memory, which the caller sends to that peer in a frame of its own. The key is opaque
//! outside the backend that made it (a packed UCX remote key).
//!
//! **Registration cache.** Registering pins pages on an RDMA device and costs far more than a
//! small read, so a buffer reused across calls should be registered once. A cached
//! registration must never outlive its memory, though: a freed and reallocated buffer at the
//! same address would be read through the old pages. The transport therefore caches only
//! what the caller names with an *identity* it vouches for (the runtime uses the serial of a
//! shared-heap allocation, unique for the process's lifetime, and the addresses of its own
//! long-lived words), in a bounded [`ExposureCache`]; everything else is registered for one
//! operation and deregistered when the operation drops its [`Exposure`].
//!
//! **Reads land in the reader's buffer.** A read whose peer dies or that outlives its time
//! limit may still be written by the library after the call gives up; so
//! [`RemoteReader::read`] reads into a buffer the reader owns (leaked, never freed, if the
//! library will not let go of it) and hands back a borrow of it, never into memory the caller
//! may reuse.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use ftcoll_algos::Rank;

use super::{Registration, TransportError};

/// Memory to expose, by address: registering memory reads none of it, and the rank's own
/// words a peer reads (an atomic) cannot be borrowed as bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExposedMemory {
    /// The first byte's address in this process.
    pub addr: u64,
    /// Length in bytes.
    pub bytes: u64,
}

impl ExposedMemory {
    /// The memory of `values`.
    pub fn of<T>(values: &[T]) -> ExposedMemory {
        ExposedMemory {
            addr: values.as_ptr() as u64,
            bytes: std::mem::size_of_val(values) as u64,
        }
    }

    /// The memory of one atomic word.
    pub fn word(word: &std::sync::atomic::AtomicU64) -> ExposedMemory {
        ExposedMemory {
            addr: word.as_ptr() as u64,
            bytes: 8,
        }
    }
}

/// How a transport serves [`RemoteReader`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteReads {
    /// Not at all.
    Unsupported,
    /// Through the library's software emulation: the owner's processor serves each read
    /// from its progress loop (UCX over TCP, libfabric's `tcp;ofi_rxm`). Correct, and slower than the transport's own
    /// messages, so the runtime takes it only when asked to.
    Emulated,
    /// In hardware: an RDMA device reads the owner's registered memory.
    Native,
}

/// Memory of this rank registered for peers' reads, and the key that names it to them.
/// Dropping the last reference deregisters it (unless a cache keeps it).
pub struct Exposure {
    key: Box<[u8]>,
    addr: u64,
    bytes: u64,
    _registration: Arc<dyn Registration>,
}

impl Exposure {
    /// The exposure of `memory`, registered by `registration`, named by `key`.
    pub fn new(
        key: Box<[u8]>,
        memory: ExposedMemory,
        registration: Arc<dyn Registration>,
    ) -> Exposure {
        Exposure {
            key,
            addr: memory.addr,
            bytes: memory.bytes,
            _registration: registration,
        }
    }

    /// What a peer needs to read the memory.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The memory's first byte, in this process.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The memory's length in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether it covers exactly `memory`.
    pub fn is(&self, memory: ExposedMemory) -> bool {
        (self.addr, self.bytes) == (memory.addr, memory.bytes)
    }
}

impl fmt::Debug for Exposure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exposure")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("bytes", &self.bytes)
            .field("key_bytes", &self.key.len())
            .finish()
    }
}

/// Why a remote read delivered nothing.
#[derive(Debug, thiserror::Error)]
pub enum RemoteReadError {
    /// The key did not unpack: corrupted in flight, or made by another backend.
    #[error("rank {peer}'s memory key is not one this transport can use: {why}")]
    BadKey {
        /// The owner.
        peer: u32,
        /// The library's words.
        why: String,
    },
    /// The read failed at the owner's end or on the way: the owner deregistered the memory
    /// (it took its vector back), or died.
    #[error("reading rank {peer}'s memory failed: {why}")]
    Failed {
        /// The owner.
        peer: u32,
        /// The library's words.
        why: String,
    },
    /// The read had not finished by the deadline.
    #[error("reading rank {peer}'s memory did not finish within the operation's time limit")]
    TimedOut {
        /// The owner.
        peer: u32,
    },
    /// More than one read carries ([`RemoteReader::max_read_bytes`]).
    #[error("a remote read of {len} bytes exceeds the reader's {limit}")]
    TooLong {
        /// Bytes asked for.
        len: usize,
        /// The limit.
        limit: usize,
    },
}

impl RemoteReadError {
    /// `Err(TooLong)` if a read of `len` bytes exceeds a reader's `limit`.
    pub fn check_len(len: usize, limit: usize) -> Result<(), RemoteReadError> {
        if len > limit {
            return Err(RemoteReadError::TooLong { len, limit });
        }
        Ok(())
    }
}

/// Reads one peer's exposed memory; see the [module documentation](self).
pub trait RemoteReader: Send {
    /// The peer it reads.
    fn peer(&self) -> Rank;

    /// The most bytes one [`RemoteReader::read`] returns.
    fn max_read_bytes(&self) -> usize;

    /// Reads `len` bytes at address `addr` of the peer's memory that `key` names, waiting
    /// (and progressing the library, so this rank keeps serving its own peers' reads) until
    /// they have arrived, the read failed, or `deadline` passed. The bytes are the reader's
    /// until the next call.
    fn read(
        &mut self,
        key: &[u8],
        addr: u64,
        len: usize,
        deadline: Instant,
    ) -> Result<&[u8], RemoteReadError>;
}

/// Exposures kept from call to call under identities their callers vouch for (see the
/// [module documentation](self)), the least recently used dropped first beyond the bound.
#[derive(Debug)]
pub struct ExposureCache {
    entries: VecDeque<(u64, Arc<Exposure>)>,
    capacity: usize,
    hits: u64,
    misses: u64,
}

impl ExposureCache {
    /// A cache of at most `capacity` exposures.
    pub fn new(capacity: usize) -> ExposureCache {
        ExposureCache {
            entries: VecDeque::with_capacity(capacity),
            capacity: capacity.max(1),
            hits: 0,
            misses: 0,
        }
    }

    /// The exposure of `memory` kept under `identity`, or a new one from `register`, kept
    /// from now on. An identity that now names other memory replaces its old exposure.
    pub fn get_or_register(
        &mut self,
        identity: u64,
        memory: ExposedMemory,
        register: impl FnOnce() -> Result<Exposure, TransportError>,
    ) -> Result<Arc<Exposure>, TransportError> {
        if let Some(at) = self.entries.iter().position(|(id, _)| *id == identity) {
            if let Some((id, exposure)) = self.entries.remove(at) {
                if exposure.is(memory) {
                    self.hits += 1;
                    self.entries.push_front((id, Arc::clone(&exposure)));
                    return Ok(exposure);
                }
            }
        }
        self.misses += 1;
        let exposure = Arc::new(register()?);
        if self.entries.len() >= self.capacity {
            self.entries.pop_back();
        }
        self.entries.push_front((identity, Arc::clone(&exposure)));
        Ok(exposure)
    }

    /// [`Transport::expose`](super::Transport::expose) for a transport with remote reads:
    /// with an identity, the kept exposure or a new one kept from now on; without, a new one
    /// for the caller alone.
    pub fn expose(
        &mut self,
        identity: Option<u64>,
        memory: ExposedMemory,
        register: impl FnOnce() -> Result<Exposure, TransportError>,
    ) -> Result<Arc<Exposure>, TransportError> {
        match identity {
            Some(identity) => self.get_or_register(identity, memory, register),
            None => Ok(Arc::new(register()?)),
        }
    }

    /// Drops the exposures whose identities `live` no longer vouches for.
    pub fn retain(&mut self, mut live: impl FnMut(u64) -> bool) {
        self.entries.retain(|(id, _)| live(*id));
    }

    /// (hits, misses) so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// Exposures kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What the backends' remote-read tests share.
#[cfg(all(test, any(feature = "ucx", feature = "ofi")))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod testing {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::thread;
    use std::time::{Duration, Instant};

    use ftcoll_algos::Rank;

    use super::{ExposedMemory, Exposure, RemoteReadError, RemoteReader};
    use crate::Transport;

    /// Bytes whose value says where they lie (and, with another `salt`, whose they are).
    pub(crate) fn pattern(len: usize, salt: u32) -> Vec<u8> {
        (0..len)
            .map(|k| {
                ((k as u32) ^ salt)
                    .wrapping_mul(2_654_435_761)
                    .rotate_right(13) as u8
            })
            .collect()
    }

    /// Runs `owner`'s waits until `stop`: over TCP the owner's library answers reads only
    /// while the owner progresses, as a waiting rank does.
    pub(crate) fn serve<T: Transport + Send + 'static>(
        mut owner: T,
        stop: Arc<AtomicBool>,
    ) -> thread::JoinHandle<T> {
        thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                owner.wait(Some(Duration::from_millis(2))).unwrap();
                owner.poll_recv(64, &mut |_, _| {}).unwrap();
            }
            owner
        })
    }

    /// Reads all of `len` bytes at `addr` through `key`, in reads of the reader's limit.
    pub(crate) fn read_all(
        reader: &mut dyn RemoteReader,
        (key, addr): (&[u8], u64),
        len: usize,
        deadline: Instant,
    ) -> Vec<u8> {
        let mut copy = Vec::with_capacity(len);
        for start in (0..len).step_by(reader.max_read_bytes()) {
            let part = reader.max_read_bytes().min(len - start);
            let got = reader
                .read(key, addr + start as u64, part, deadline)
                .unwrap();
            copy.extend_from_slice(got);
        }
        copy
    }

    /// `memory`, exposed as `exposure`, reads back exactly: whole, at an odd offset and
    /// length, and a read beyond the reader's limit is refused.
    pub(crate) fn reads_exactly(
        reader: &mut dyn RemoteReader,
        exposure: &Exposure,
        memory: &[u8],
        deadline: Instant,
    ) {
        let key = (exposure.key(), exposure.addr());
        let copy = read_all(reader, key, memory.len(), deadline);
        assert!(
            copy == memory,
            "the bytes read differ from the exposed ones"
        );
        let got = reader
            .read(exposure.key(), exposure.addr() + 7, 1001, deadline)
            .unwrap();
        assert_eq!(got, &memory[7..1008]);
        let limit = reader.max_read_bytes();
        let too_long = reader.read(exposure.key(), exposure.addr(), limit + 1, deadline);
        assert!(matches!(too_long, Err(RemoteReadError::TooLong { .. })));
    }

    /// An identity registers its memory once; without one every call registers anew.
    pub(crate) fn an_identity_registers_once<T: Transport>(t: &mut T) {
        let memory = pattern(1 << 16, 3);
        let first = t
            .expose(ExposedMemory::of(&memory), Some(42))
            .unwrap()
            .unwrap();
        let again = t
            .expose(ExposedMemory::of(&memory), Some(42))
            .unwrap()
            .unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(t.exposure_counts(), (1, 1));
        let fresh = t.expose(ExposedMemory::of(&memory), None).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&first, &fresh));
        assert_eq!(t.exposure_counts(), (1, 1));
        t.forget_exposures(&mut |id| id != 42);
        drop((first, again));
        t.expose(ExposedMemory::of(&memory), Some(42))
            .unwrap()
            .unwrap();
        assert_eq!(t.exposure_counts(), (1, 2));
    }

    /// A read from an owner that is gone failed or timed out, soon after `start`; the
    /// reader's transport gives no reader of itself and refuses a rank outside the job.
    pub(crate) fn lost<T: Transport>(
        read: Result<&[u8], RemoteReadError>,
        start: Instant,
        reader_side: &mut T,
    ) {
        assert!(
            matches!(
                read,
                Err(RemoteReadError::Failed { peer: 1, .. } | RemoteReadError::TimedOut { peer: 1 })
            ),
            "{:?}",
            read.map(<[u8]>::len)
        );
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(reader_side.remote_reader(Rank(0)).unwrap().is_none());
        assert!(reader_side.remote_reader(Rank(5)).is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nothing;
    impl Registration for Nothing {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    fn at(addr: u64, bytes: u64) -> ExposedMemory {
        ExposedMemory { addr, bytes }
    }

    fn exposure(addr: u64, bytes: u64) -> Result<Exposure, TransportError> {
        Ok(Exposure::new(
            vec![1, 2, 3].into(),
            at(addr, bytes),
            Arc::new(Nothing),
        ))
    }

    #[test]
    fn an_identity_registers_once_until_it_names_other_memory() {
        let mut cache = ExposureCache::new(2);
        let a = cache
            .get_or_register(7, at(4096, 64), || exposure(4096, 64))
            .unwrap();
        let again = cache
            .get_or_register(7, at(4096, 64), || panic!("registered twice"))
            .unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(cache.counts(), (1, 1));
        // The same identity over other memory is a new registration, never the old key.
        let moved = cache
            .get_or_register(7, at(8192, 64), || exposure(8192, 64))
            .unwrap();
        assert!(moved.is(at(8192, 64)));
        assert_eq!((cache.len(), cache.counts()), (1, (1, 2)));
    }

    #[test]
    fn the_least_recently_used_goes_beyond_the_bound() {
        let mut cache = ExposureCache::new(2);
        for id in [1, 2] {
            cache
                .get_or_register(id, at(id, 8), || exposure(id, 8))
                .unwrap();
        }
        // 1 is used again, so 2 is the one a third identity evicts.
        cache
            .get_or_register(1, at(1, 8), || panic!("cached"))
            .unwrap();
        cache
            .get_or_register(3, at(3, 8), || exposure(3, 8))
            .unwrap();
        assert_eq!(cache.len(), 2);
        cache
            .get_or_register(1, at(1, 8), || panic!("cached"))
            .unwrap();
        let mut registered = false;
        cache
            .get_or_register(2, at(2, 8), || {
                registered = true;
                exposure(2, 8)
            })
            .unwrap();
        assert!(registered);
        cache.retain(|id| id != 2);
        assert_eq!(cache.len(), 1);
    }
}
