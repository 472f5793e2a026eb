//! The reader's side of the mapped single copy: maps a peer's vector that lives in its
//! [`super::shared_heap`], once, and keeps the mapping for later operations (a registration
//! cache: an application reduces the same vectors call after call).
//!
//! A peer names its allocation by process id, descriptor and serial. This side takes a
//! duplicate of the descriptor (`pidfd_open`, `pidfd_getfd`: the kernel allows it where it
//! allows a cross-memory read, the same ptrace check), checks it is one of the heap's sealed
//! memory files of the size named, and maps it read-only. Reads then are plain loads from
//! memory the two processes share: no page pinned per read, no system call.
//!
//! The cache is bounded ([`MAX_MAPPINGS`], [`MAX_PER_PEER`]), least recently used out. A
//! mapping outlives the owner's free of the allocation, and its death: the memory stays until
//! the mapping goes, and serials are never reused, so a stale mapping is never taken for a
//! new allocation. Whether the owner still lends the vector is not this module's business:
//! the single-copy ring checks the owner's lent word after each read, as for a cross-memory
//! read.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use super::shared_heap::SharedSpan;

/// Mappings kept at most.
pub const MAX_MAPPINGS: usize = 16;
/// Mappings of one peer kept at most: an operation reads two vectors of its left neighbour
/// (input and output), and an application may alternate between a few.
pub const MAX_PER_PEER: usize = 4;

/// Why a peer's vector could not be mapped (the reader then reads it by cross-memory attach).
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// No process handle (the peer is gone, or the system call is missing).
    #[error("process {pid} cannot be opened ({source})")]
    Open {
        /// The peer.
        pid: u32,
        /// What the kernel said.
        source: io::Error,
    },
    /// The kernel refused the descriptor (ptrace rules, a filter, an old kernel).
    #[error("descriptor {fd} of process {pid} cannot be taken ({source})")]
    Take {
        /// The peer.
        pid: u32,
        /// Its descriptor.
        fd: i32,
        /// What the kernel said.
        source: io::Error,
    },
    /// The descriptor is not a sealed memory file of the size named (a corrupt notice, or a
    /// descriptor reused since).
    #[error("descriptor {fd} of process {pid} is not a vector of {bytes} bytes")]
    NotAVector {
        /// The peer.
        pid: u32,
        /// Its descriptor.
        fd: i32,
        /// The size the notice named.
        bytes: u64,
    },
    /// The mapping itself failed (address space, memory).
    #[error("mapping {bytes} bytes of process {pid} failed ({source})")]
    Map {
        /// The peer.
        pid: u32,
        /// The file's size.
        bytes: u64,
        /// What the kernel said.
        source: io::Error,
    },
}

/// A read-only mapping of a peer's memory file; unmapped on drop.
#[derive(Debug)]
struct PeerMapping {
    base: NonNull<u8>,
    bytes: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving it between threads moves
// nothing the kernel ties to a thread.
unsafe impl Send for PeerMapping {}

impl Drop for PeerMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with this address and size, and no borrow of
        // it outlives `self` (the cache lends slices tied to its own borrow).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.bytes) };
    }
}

fn owned(fd: libc::c_long) -> Result<OwnedFd, io::Error> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just created for this process, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Maps the memory file of `span` in process `pid`.
fn map(pid: u32, span: &SharedSpan) -> Result<PeerMapping, MapError> {
    let not_a_vector = || MapError::NotAVector {
        pid,
        fd: span.fd,
        bytes: span.file_bytes,
    };
    let bytes = usize::try_from(span.file_bytes).map_err(|_| not_a_vector())?;
    if bytes == 0 || span.fd < 0 {
        return Err(not_a_vector());
    }
    // SAFETY: system calls with plain integer arguments.
    let handle = owned(unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) })
        .map_err(|source| MapError::Open { pid, source })?;
    // SAFETY: as above; `handle` is a live process descriptor.
    let file =
        owned(unsafe { libc::syscall(libc::SYS_pidfd_getfd, handle.as_raw_fd(), span.fd, 0) })
            .map_err(|source| MapError::Take {
                pid,
                fd: span.fd,
                source,
            })?;
    // SAFETY: `file` is a live descriptor; `stat` is written by the kernel.
    let (seals, size) = unsafe {
        let seals = libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS);
        let mut stat: libc::stat = std::mem::zeroed();
        let size = (libc::fstat(file.as_raw_fd(), &mut stat) == 0).then_some(stat.st_size);
        (seals, size)
    };
    // Sealed against shrinking: the file can never end inside the mapping, so no read of it
    // can fault.
    let sealed = seals >= 0 && seals & (libc::F_SEAL_SHRINK | libc::F_SEAL_GROW) != 0;
    if !sealed || size != Some(bytes as libc::off_t) {
        return Err(not_a_vector());
    }
    // SAFETY: a fresh read-only shared mapping of the whole file, which is sealed at this size.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(MapError::Map {
            pid,
            bytes: span.file_bytes,
            source: io::Error::last_os_error(),
        });
    }
    let base = NonNull::new(addr.cast()).ok_or_else(not_a_vector)?;
    // The descriptor goes here; the mapping keeps the file.
    Ok(PeerMapping { base, bytes })
}

#[derive(Debug)]
struct Cached {
    pid: u32,
    serial: u64,
    mapping: PeerMapping,
    last_use: u64,
}

/// The mappings of peers' vectors this rank keeps (see the module docs).
#[derive(Debug, Default)]
pub struct PeerMappings {
    entries: Vec<Cached>,
    uses: u64,
}

impl PeerMappings {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `span`'s file in process `pid` unless it is mapped already.
    pub fn ensure(&mut self, pid: u32, span: &SharedSpan) -> Result<(), MapError> {
        self.uses += 1;
        let now = self.uses;
        if let Some(hit) = self
            .entries
            .iter_mut()
            .find(|e| e.pid == pid && e.serial == span.serial)
        {
            if hit.mapping.bytes as u64 != span.file_bytes {
                return Err(MapError::NotAVector {
                    pid,
                    fd: span.fd,
                    bytes: span.file_bytes,
                });
            }
            hit.last_use = now;
            return Ok(());
        }
        let mapping = map(pid, span)?;
        let of_peer = self.entries.iter().filter(|e| e.pid == pid).count();
        if of_peer >= MAX_PER_PEER {
            self.evict(|e| e.pid == pid);
        } else if self.entries.len() >= MAX_MAPPINGS {
            self.evict(|_| true);
        }
        self.entries.push(Cached {
            pid,
            serial: span.serial,
            mapping,
            last_use: now,
        });
        Ok(())
    }

    /// Drops the least recently used mapping among those `which` picks.
    fn evict(&mut self, which: impl Fn(&Cached) -> bool) {
        let oldest = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| which(e))
            .min_by_key(|(_, e)| e.last_use)
            .map(|(i, _)| i);
        if let Some(i) = oldest {
            self.entries.swap_remove(i);
        }
    }

    /// The bytes `offset..offset + len` of a mapped file of process `pid`, if mapped and
    /// inside it.
    ///
    /// The memory is shared with the owner, which writes it only while it does not lend it:
    /// the caller reads it only between the owner's notice that it is final and the check of
    /// the owner's lent word that says whether what was read counts.
    pub fn bytes(&self, pid: u32, serial: u64, offset: u64, len: usize) -> Option<&[u8]> {
        let entry = self
            .entries
            .iter()
            .find(|e| e.pid == pid && e.serial == serial)?;
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        if end > entry.mapping.bytes {
            return None;
        }
        // SAFETY: `start..end` lies inside the live mapping, borrowed no longer than `self`;
        // it is mapped for reading, and the file cannot shrink under it (sealed).
        Some(unsafe { std::slice::from_raw_parts(entry.mapping.base.as_ptr().add(start), len) })
    }

    /// Drops every mapping of process `pid` (it died: its memory is freed only when the last
    /// mapping goes).
    pub fn forget(&mut self, pid: u32) {
        self.entries.retain(|e| e.pid != pid);
    }

    /// Mappings held now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no mapping is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::shared_heap::{self, SharedHeap};
    use super::*;
    use std::alloc::{GlobalAlloc, Layout};

    /// A shared allocation of this process, filled with `byte`.
    fn shared(bytes: usize, byte: u8) -> (*mut u8, SharedSpan) {
        let _turn = shared_heap::TEST_SWITCH
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        shared_heap::enable(true);
        let layout = Layout::from_size_align(bytes, 8).expect("layout");
        // SAFETY: a non-zero layout; the allocation is written within its size.
        let ptr = shared_heap::shared(|| unsafe { SharedHeap.alloc(layout) });
        shared_heap::enable(false);
        // SAFETY: `bytes` bytes, just allocated.
        unsafe { ptr.write_bytes(byte, bytes) };
        let span = shared_heap::lookup(ptr, bytes).expect("a shared allocation");
        (ptr, span)
    }

    fn free(ptr: *mut u8, bytes: usize) {
        // SAFETY: allocated by `shared` with this size.
        unsafe { SharedHeap.dealloc(ptr, Layout::from_size_align(bytes, 8).expect("layout")) }
    }

    #[test]
    fn maps_a_shared_vector_once_and_sees_its_writes() {
        let me = std::process::id();
        let (ptr, span) = shared(2 << 20, 3);
        let mut maps = PeerMappings::new();
        maps.ensure(me, &span).expect("map own vector");
        maps.ensure(me, &span).expect("cached");
        assert_eq!(maps.len(), 1);
        assert_eq!(maps.bytes(me, span.serial, 100, 4), Some(&[3u8; 4][..]));
        // SAFETY: inside the live allocation.
        unsafe { ptr.add(100).write(9) };
        assert_eq!(maps.bytes(me, span.serial, 100, 1), Some(&[9u8][..]));
        assert!(maps.bytes(me, span.serial, (2 << 20) - 1, 2).is_none());
        assert!(maps.bytes(me, span.serial ^ 1, 0, 1).is_none());
        free(ptr, 2 << 20);
        // The mapping outlives the owner's free.
        assert_eq!(maps.bytes(me, span.serial, 100, 1), Some(&[9u8][..]));
    }

    #[test]
    fn refuses_a_descriptor_that_is_not_a_sealed_vector_of_that_size() {
        let me = std::process::id();
        let (ptr, span) = shared(1 << 20, 1);
        let mut maps = PeerMappings::new();
        let wrong_size = SharedSpan {
            file_bytes: 2 << 20,
            ..span
        };
        assert!(matches!(
            maps.ensure(me, &wrong_size),
            Err(MapError::NotAVector { .. })
        ));
        let file = std::fs::File::open("/proc/self/exe").expect("open");
        let not_memfd = SharedSpan {
            fd: file.as_raw_fd(),
            serial: 77,
            ..span
        };
        assert!(matches!(
            maps.ensure(me, &not_memfd),
            Err(MapError::NotAVector { .. })
        ));
        let closed = SharedSpan {
            fd: 100_000,
            serial: 78,
            ..span
        };
        assert!(matches!(
            maps.ensure(me, &closed),
            Err(MapError::Take { .. })
        ));
        assert!(maps.is_empty());
        free(ptr, 1 << 20);
    }

    #[test]
    fn keeps_at_most_its_bound_per_peer() {
        let me = std::process::id();
        let vectors: Vec<_> = (0..MAX_PER_PEER + 2)
            .map(|i| shared(1 << 20, i as u8))
            .collect();
        let mut maps = PeerMappings::new();
        for (_, span) in &vectors {
            maps.ensure(me, span).expect("map");
        }
        assert_eq!(maps.len(), MAX_PER_PEER);
        // The first ones went; the last is there.
        assert!(maps.bytes(me, vectors[0].1.serial, 0, 1).is_none());
        let last = vectors.last().expect("vectors");
        assert_eq!(
            maps.bytes(me, last.1.serial, 0, 1),
            Some(&[(MAX_PER_PEER + 1) as u8][..])
        );
        maps.forget(me);
        assert!(maps.is_empty());
        for (ptr, _) in vectors {
            free(ptr, 1 << 20);
        }
    }
}
