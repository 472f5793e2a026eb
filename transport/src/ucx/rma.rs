//! Remote reads over UCX (see [`crate::remote`]): an exposure is a `ucp_mem_map` registration
//! and its packed remote key; a reader gets (`ucp_get_nbx`) from one peer over the endpoint
//! the transport already has to it, into a buffer of its own.
//!
//! Over an RDMA device the get is a one-sided read by the network card. Over TCP, UCX 1.13
//! emulates it: the owner's worker answers the request when it progresses, which every
//! waiting ftcoll rank does. The 2-core development VM moved 4 MiB gets at 0.9 GB/s so, against
//! 5.9 GB/s for tagged messages (`ucx_perftest`, `UCX_TLS=tcp`).

#![allow(unsafe_code)]

use std::ptr;
use std::sync::Arc;
use std::time::Instant;

use ftcoll_algos::Rank;
use ftcoll_ucx_sys as sys;

use super::super::remote::{ExposedMemory, Exposure, RemoteReadError, RemoteReader};
use super::super::TransportError;
use super::context::{check, status_text, Context, MemMap, UcxRegistration};
use super::endpoint::{Endpoint, RemoteKey};
use super::request::Started;
use super::worker::Worker;

/// The most one read moves: the reader's buffer. Large enough that a read's latency is small
/// beside its transfer (1 MiB at 12 GB/s is 87 us), small enough to stay in the cache of the
/// core that combines it.
pub const MAX_READ_BYTES: usize = 1 << 20;
/// Remote keys a reader keeps unpacked: an operation reads at most three regions (input,
/// output, lent word).
const KEPT_RKEYS: usize = 4;
/// `ucp_worker_progress` calls between checks of a read.
const READ_PROGRESS_ROUNDS: usize = 16;
/// Checks of a read between clock reads.
const CHECKS_PER_CLOCK_READ: u32 = 64;

/// Registers `memory` and packs its remote key. The caller keeps the memory allocated while
/// peers may read it (the contract of [`crate::Transport::expose`]).
pub(super) fn expose(
    context: &Arc<Context>,
    memory: ExposedMemory,
) -> Result<Exposure, TransportError> {
    if memory.bytes == 0 {
        return Err(TransportError::io(
            "exposing memory over UCX",
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "nothing to expose"),
        ));
    }
    // SAFETY: the caller keeps the range allocated while it is exposed; a peer's read of a
    // range freed early fails on an RDMA device (the pages stay pinned until the registration
    // ends) and, under UCX's emulation, reads this process's memory at that address.
    let map = unsafe { MemMap::new(context, memory.addr as *const u8, memory.bytes as usize)? };
    let mut packed = ptr::null_mut();
    let mut size = 0usize;
    // SAFETY: context and memory handle are live; both outputs are written only on success.
    check("ucp_rkey_pack", unsafe {
        sys::ucp_rkey_pack(context.raw(), map.memh(), &mut packed, &mut size)
    })?;
    // SAFETY: on success UCX returned `size` readable bytes at `packed`, valid until released
    // just below.
    let key: Box<[u8]> = unsafe { std::slice::from_raw_parts(packed.cast::<u8>(), size) }.into();
    // SAFETY: `packed` came from ucp_rkey_pack and is released exactly once.
    unsafe { sys::ucp_rkey_buffer_release(packed) };
    Ok(Exposure::new(
        key,
        memory,
        Arc::new(UcxRegistration { map }),
    ))
}

/// Reads one peer's exposed memory over UCX.
pub(super) struct UcxReader {
    peer: Rank,
    // Declared before the endpoint: remote keys are destroyed before it closes.
    rkeys: Vec<(Box<[u8]>, RemoteKey)>,
    endpoint: Arc<Endpoint>,
    worker: Arc<Worker>,
    /// Where reads land; `None` only after a read UCX would not give back was leaked.
    buffer: Option<Box<[u64]>>,
}

impl UcxReader {
    pub(super) fn new(peer: Rank, endpoint: Arc<Endpoint>, worker: &Arc<Worker>) -> UcxReader {
        UcxReader {
            peer,
            rkeys: Vec::with_capacity(KEPT_RKEYS),
            endpoint,
            worker: Arc::clone(worker),
            buffer: None,
        }
    }

    fn failed(&self, why: String) -> RemoteReadError {
        RemoteReadError::Failed {
            peer: self.peer.0,
            why,
        }
    }

    /// The index of `packed`'s unpacked key, unpacking it (and dropping the oldest beyond
    /// [`KEPT_RKEYS`]) on first use.
    fn rkey(&mut self, packed: &[u8]) -> Result<usize, RemoteReadError> {
        if let Some(at) = self.rkeys.iter().position(|(k, _)| **k == *packed) {
            return Ok(at);
        }
        let rkey = self
            .endpoint
            .unpack_rkey(packed)
            .map_err(|status| RemoteReadError::BadKey {
                peer: self.peer.0,
                why: status_text(status),
            })?;
        if self.rkeys.len() >= KEPT_RKEYS {
            self.rkeys.remove(0);
        }
        self.rkeys.push((packed.into(), rkey));
        Ok(self.rkeys.len() - 1)
    }

    /// Progresses until the read ends, the endpoint fails or the deadline passes; the buffer
    /// comes back with the final status, or is left to a dropped request (which cancels it,
    /// and leaks it if UCX never lets go).
    fn finish(
        &self,
        started: Started<Box<[u64]>>,
        deadline: Instant,
    ) -> Result<(Box<[u64]>, sys::ucs_status_t), RemoteReadError> {
        let mut request = match started {
            Started::Done { hold, status } => return Ok((hold, status)),
            Started::Pending(request) => request,
        };
        let mut checks = 0u32;
        loop {
            self.worker.lock().progress(READ_PROGRESS_ROUNDS);
            request = match request.finish() {
                Ok(done) => return Ok(done),
                Err(request) => request,
            };
            if let Some(status) = self.endpoint.failure() {
                return Err(self.failed(status_text(status)));
            }
            checks = checks.wrapping_add(1);
            if checks.is_multiple_of(CHECKS_PER_CLOCK_READ) && Instant::now() >= deadline {
                return Err(RemoteReadError::TimedOut { peer: self.peer.0 });
            }
            std::hint::spin_loop();
        }
    }
}

impl RemoteReader for UcxReader {
    fn peer(&self) -> Rank {
        self.peer
    }

    fn max_read_bytes(&self) -> usize {
        MAX_READ_BYTES
    }

    fn read(
        &mut self,
        key: &[u8],
        addr: u64,
        len: usize,
        deadline: Instant,
    ) -> Result<&[u8], RemoteReadError> {
        RemoteReadError::check_len(len, MAX_READ_BYTES)?;
        if let Some(status) = self.endpoint.failure() {
            return Err(self.failed(status_text(status)));
        }
        let at = self.rkey(key)?;
        let buffer = self
            .buffer
            .take()
            .unwrap_or_else(|| vec![0u64; MAX_READ_BYTES / 8].into_boxed_slice());
        let started = self.endpoint.get(buffer, len, (addr, &self.rkeys[at].1));
        let (buffer, status) = self.finish(started, deadline)?;
        let failed = (status != sys::UCS_OK).then(|| self.failed(status_text(status)));
        let buffer = self.buffer.insert(buffer);
        match failed {
            Some(error) => Err(error),
            None => Ok(&bytemuck::cast_slice(&buffer[..])[..len]),
        }
    }
}
