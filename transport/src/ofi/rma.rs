//! Remote reads over libfabric (see [`crate::remote`]): an exposure is a region registered for
//! FI_REMOTE_READ, named by a key that also carries the address of this rank's *read
//! endpoint*; a reader posts `fi_read` on its own read endpoint into a registered buffer.
//!
//! **Why an endpoint of their own.** Reads never touch the frames' endpoint: its completion
//! queue belongs to the transport's send and receive bookkeeping, and a reader blocked on a
//! read cannot hand that queue's completions to it. The read endpoint has its own queue and
//! address vector in the same domain, shared ([`SharedReadSide`]) by the transport and its
//! readers on the transport's thread.
//!
//! **Who serves a read.** On an RDMA device the owner's card does. Over software providers
//! (`tcp;ofi_rxm`: data progress is manual) the owner's process answers a read request only
//! when its read endpoint is progressed. So the transport progresses the read side on every
//! pump and blocks on its queue's descriptor as well as the frames' one, and a reader
//! progresses it while it waits: a ring of ranks all blocked in reads of each other still
//! serves every read.
//!
//! **Keys.** Little-endian: the region's key, its first byte's address and length, a flags
//! byte (bit 0: the owner's domain addresses regions by virtual address, FI_MR_VIRT_ADDR,
//! else by offset), the read endpoint's name length (u16) and the name. A reader checks a read
//! against the region the key describes before posting it, and the provider checks it again at
//! the owner against the live registration: a read after the owner deregistered fails there.

#![allow(unsafe_code)]

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use ftcoll_algos::Rank;
use ftcoll_ofi_sys as sys;

use super::super::remote::{ExposedMemory, Exposure, RemoteReadError, RemoteReader};
use super::av::AddressVector;
use super::context::Contexts;
use super::cq::{self, CompletionQueue, Read};
use super::endpoint::{Endpoint, Posted};
use super::fabric::Domain;
use super::info::Info;
use super::liveness::{tcp_listener, Liveness};
use super::mr::{Buffer, Graveyard, UserRegistration};
use super::ops::Status;
use crate::TransportError;

/// The most one read moves: the reader's buffer (as over UCX, large beside a read's latency,
/// small enough to stay in the cache of the core that combines it).
pub(super) const MAX_READ_BYTES: usize = 1 << 20;
/// Reads outstanding on a read endpoint: one per reader, and those abandoned at their
/// deadline whose completions have not come yet.
const MAX_READS: usize = 16;
/// The longest endpoint name a key may carry.
const MAX_NAME_BYTES: usize = 1024;
/// Key bytes before the name.
const KEY_HEAD_BYTES: usize = 27;
/// Checks of a read between clock reads.
const CHECKS_PER_CLOCK_READ: u32 = 64;

/// The read side, shared by the transport and its readers (on the transport's thread).
pub(super) type SharedReadSide = Arc<Mutex<ReadSide>>;

/// Locks the read side; a panic elsewhere leaves it usable (it holds no invariant a panic
/// could break halfway: slots are taken and put back whole).
pub(super) fn lock(side: &SharedReadSide) -> MutexGuard<'_, ReadSide> {
    side.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a key says.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ReadKey {
    key: u64,
    base: u64,
    bytes: u64,
    virt_addr: bool,
    name: Vec<u8>,
}

impl ReadKey {
    fn to_bytes(&self) -> Box<[u8]> {
        let mut out = Vec::with_capacity(KEY_HEAD_BYTES + self.name.len());
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&self.base.to_le_bytes());
        out.extend_from_slice(&self.bytes.to_le_bytes());
        out.push(u8::from(self.virt_addr));
        out.extend_from_slice(&(self.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.name);
        out.into()
    }

    fn parse(bytes: &[u8]) -> Option<ReadKey> {
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
        };
        let flags = *bytes.get(24)?;
        let name_len = u16::from_le_bytes(bytes.get(25..27)?.try_into().ok()?) as usize;
        let name = bytes.get(KEY_HEAD_BYTES..)?;
        if flags > 1 || name_len == 0 || name_len > MAX_NAME_BYTES || name.len() != name_len {
            return None;
        }
        Some(ReadKey {
            key: word(0)?,
            base: word(8)?,
            bytes: word(16)?,
            virt_addr: flags == 1,
            name: name.to_vec(),
        })
    }

    /// The address to pass to `fi_read` for `len` bytes at `addr`, if they lie in the region.
    fn remote_addr(&self, addr: u64, len: usize) -> Option<u64> {
        let offset = addr.checked_sub(self.base)?;
        let end = offset.checked_add(len as u64)?;
        (end <= self.bytes).then_some(if self.virt_addr { addr } else { offset })
    }
}

/// Registers `memory` for peers' reads through the read endpoint named `name`. The caller
/// keeps the memory allocated while peers may read it (the contract of
/// [`Transport::expose`](crate::Transport::expose)).
pub(super) fn expose(
    domain: &Arc<Domain>,
    graveyard: &Arc<Graveyard>,
    memory: ExposedMemory,
    (name, virt_addr): (&[u8], bool),
) -> Result<Exposure, TransportError> {
    if memory.bytes == 0 {
        return Err(TransportError::io(
            "exposing memory over libfabric",
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "nothing to expose"),
        ));
    }
    // SAFETY: the caller keeps the range allocated while it is exposed; a read after the
    // registration ends fails at the owner's provider, which checks every read against it.
    let registration = unsafe {
        UserRegistration::exposing(
            domain,
            graveyard,
            memory.addr as *const u8,
            memory.bytes as usize,
        )?
    };
    let key = ReadKey {
        key: registration.key(),
        base: memory.addr,
        bytes: memory.bytes,
        virt_addr,
        name: name.to_vec(),
    };
    Ok(Exposure::new(
        key.to_bytes(),
        memory,
        Arc::new(registration),
    ))
}

/// A posted read and the buffer it lands in.
struct ReadOp {
    buffer: Buffer,
    /// `None` while outstanding.
    status: Option<Status>,
    /// Its reader gave up: the slot is freed when the completion comes.
    abandoned: bool,
}

/// The read endpoint and its outstanding reads (see the module docs).
pub(super) struct ReadSide {
    // Field order is drop order: the endpoint closes before the buffers and contexts go.
    ep: Endpoint,
    slots: Vec<Option<ReadOp>>,
    free: Vec<usize>,
    contexts: Contexts,
    entries: Vec<cq::Entry>,
    name: Vec<u8>,
    virt_addr: bool,
    /// Owners' read endpoints inserted so far, by name (at most one per rank of the job).
    owners: Vec<(Vec<u8>, sys::fi_addr_t)>,
    max_owners: usize,
}

// SAFETY: the read side owns everything its raw pointers point to and is used on the
// transport's thread (the domain is FI_THREAD_DOMAIN); the mutex around it serialises any use.
unsafe impl Send for ReadSide {}

impl ReadSide {
    /// Opens a read endpoint of `info` in `domain`, for a job of `size` ranks.
    pub(super) fn open(
        domain: &Arc<Domain>,
        info: &Info<'_>,
        size: u32,
    ) -> Result<ReadSide, TransportError> {
        let cq = CompletionQueue::open(domain, 2 * MAX_READS)?;
        let av = AddressVector::open(domain, info.av_type(), size as usize)?;
        let ep = Endpoint::open(domain, info, cq, av)?;
        let name = ep.name()?;
        Ok(ReadSide {
            ep,
            slots: (0..MAX_READS).map(|_| None).collect(),
            free: (0..MAX_READS).rev().collect(),
            contexts: Contexts::new(MAX_READS),
            entries: vec![cq::Entry::default(); MAX_READS],
            name,
            virt_addr: info.mr_mode() & sys::FI_MR_VIRT_ADDR != 0,
            owners: Vec::new(),
            max_owners: size as usize,
        })
    }

    /// The read endpoint's name and whether regions are addressed virtually, for keys.
    pub(super) fn key_place(&self) -> (&[u8], bool) {
        (&self.name, self.virt_addr)
    }

    /// The completion queue (for its wait descriptor).
    pub(super) fn cq(&self) -> &CompletionQueue {
        self.ep.cq()
    }

    /// Reads completions, which also serves peers' reads of this rank on providers that
    /// progress in software; returns how many were read.
    pub(super) fn progress(&mut self) -> Result<usize, TransportError> {
        let mut read = 0;
        while read < MAX_READS {
            match self.ep.cq().read(&mut self.entries)? {
                Read::Empty => break,
                Read::Entries(n) => {
                    for k in 0..n {
                        let context = self.entries[k].op_context as usize;
                        self.complete(context, Status::Done);
                    }
                    read += n;
                }
                Read::ErrorAvailable => {
                    let Some(error) = self.ep.cq().read_error()? else {
                        break;
                    };
                    let context = error.context;
                    self.complete(context, Status::of_error(error));
                    read += 1;
                }
            }
        }
        Ok(read)
    }

    fn complete(&mut self, context: usize, status: Status) {
        let Some(slot) = self.contexts.slot_of(context) else {
            tracing::warn!(
                context,
                "read completion for a read this endpoint did not post"
            );
            return;
        };
        match &mut self.slots[slot] {
            Some(op) if op.abandoned => {
                self.slots[slot] = None;
                self.free.push(slot);
            }
            Some(op) => op.status = Some(status),
            None => tracing::warn!(slot, "read completion for an empty slot"),
        }
    }

    /// The handle of the owner's read endpoint `name`, inserted on first use.
    fn owner(&mut self, name: &[u8]) -> Result<sys::fi_addr_t, String> {
        if let Some((_, addr)) = self.owners.iter().find(|(n, _)| n == name) {
            return Ok(*addr);
        }
        if self.owners.len() >= self.max_owners {
            return Err(format!(
                "more read endpoints named than the job's {} ranks",
                self.max_owners
            ));
        }
        let addr = self.ep.av().insert(name).map_err(|e| e.to_string())?;
        self.owners.push((name.to_vec(), addr));
        Ok(addr)
    }

    /// Posts a read of `len` bytes into `buffer`; hands the buffer back if it was not posted
    /// (`None`: the provider is out of resources for now).
    fn post(
        &mut self,
        mut buffer: Buffer,
        len: usize,
        from: (sys::fi_addr_t, u64, u64),
    ) -> Result<usize, (Buffer, Option<TransportError>)> {
        // Each reader has one read outstanding at a time, so with no slot free every slot
        // holds a read abandoned earlier whose completion has not come (rxm cancels no read):
        // one from an owner that died never comes, and waiting for it would only wait out the
        // deadline. Completions read now give back the slots of owners that progress again.
        if self.free.is_empty() {
            if let Err(error) = self.progress() {
                return Err((buffer, Some(error)));
            }
        }
        let Some(slot) = self.free.pop() else {
            let why = format!("{MAX_READS} earlier reads never completed; no read can start");
            return Err((
                buffer,
                Some(TransportError::Library {
                    library: "libfabric",
                    call: "fi_read",
                    why,
                }),
            ));
        };
        let (ptr, desc) = (buffer.as_mut_ptr(), buffer.desc());
        // SAFETY: the buffer (registered for FI_READ, at least MAX_READ_BYTES long, and `len`
        // is at most that) moves into `slots` below without its memory moving, and stays
        // there with the context until the completion is read or the endpoint closes.
        let posted = unsafe {
            self.ep
                .post_read(ptr, len, desc, from, self.contexts.get(slot))
        };
        match posted {
            Posted::Yes => {
                self.slots[slot] = Some(ReadOp {
                    buffer,
                    status: None,
                    abandoned: false,
                });
                Ok(slot)
            }
            Posted::Again => {
                self.free.push(slot);
                Err((buffer, None))
            }
            Posted::Failed(error) => {
                self.free.push(slot);
                Err((buffer, Some(error)))
            }
        }
    }

    /// The buffer and status of a finished read.
    fn take(&mut self, slot: usize) -> Option<(Buffer, Status)> {
        // Still outstanding: `None`.
        self.slots[slot].as_ref()?.status.as_ref()?;
        let op = self.slots[slot].take()?;
        self.free.push(slot);
        Some((op.buffer, op.status?))
    }

    /// Gives up on an outstanding read: its buffer stays with the endpoint until the
    /// completion comes, or the endpoint closes.
    fn abandon(&mut self, slot: usize) {
        if let Some(op) = &mut self.slots[slot] {
            op.abandoned = true;
            // SAFETY: the slot holds an outstanding read posted with this context.
            unsafe { self.ep.cancel(self.contexts.get(slot)) };
        }
    }
}

/// Reads one peer's exposed memory over libfabric.
///
/// A read from an owner that died never completes on `tcp;ofi_rxm` (libfabric 1.17 reports
/// no error for it), so a read outstanding for a while checks the owner's read endpoint as
/// the send side checks a held-back peer (see `liveness`): a refused connection fails the
/// read at once instead of at the operation's deadline.
pub(super) struct OfiReader {
    peer: Rank,
    side: SharedReadSide,
    domain: Arc<Domain>,
    provider: String,
    /// Where reads land; `None` before the first read and after one was abandoned.
    buffer: Option<Buffer>,
    liveness: Liveness,
}

impl OfiReader {
    pub(super) fn new(
        peer: Rank,
        side: SharedReadSide,
        domain: &Arc<Domain>,
        provider: &str,
    ) -> OfiReader {
        OfiReader {
            peer,
            side,
            domain: Arc::clone(domain),
            provider: provider.to_owned(),
            buffer: None,
            liveness: Liveness::default(),
        }
    }

    /// Progresses until read `slot` ends, the owner's endpoint is found gone, or the deadline
    /// passes (the last two abandon the read).
    fn finish(
        &mut self,
        side: &mut ReadSide,
        slot: usize,
        deadline: Instant,
    ) -> Result<(Buffer, Status), RemoteReadError> {
        let mut checks = 0u32;
        let ended = loop {
            if let Err(e) = side.progress() {
                break Err(self.failed(e.to_string()));
            }
            if let Some(done) = side.take(slot) {
                break Ok(done);
            }
            checks = checks.wrapping_add(1);
            if checks.is_multiple_of(CHECKS_PER_CLOCK_READ) {
                if let Err(end) = self.still_waiting(deadline) {
                    break Err(end);
                }
            }
            std::hint::spin_loop();
        };
        if ended.is_err() {
            side.abandon(slot);
        }
        ended
    }

    /// `Err` once the deadline passed or the owner's read endpoint was found gone (the
    /// caller registered it with `liveness` before posting).
    fn still_waiting(&mut self, deadline: Instant) -> Result<(), RemoteReadError> {
        let now = Instant::now();
        if now >= deadline {
            return Err(RemoteReadError::TimedOut { peer: self.peer.0 });
        }
        let mut gone = Vec::new();
        self.liveness.check(now, &mut gone);
        match gone.pop() {
            Some((_, why)) => Err(self.failed(why)),
            None => Ok(()),
        }
    }

    fn failed(&self, why: impl Into<String>) -> RemoteReadError {
        RemoteReadError::Failed {
            peer: self.peer.0,
            why: why.into(),
        }
    }

    fn bad_key(&self, why: impl Into<String>) -> RemoteReadError {
        RemoteReadError::BadKey {
            peer: self.peer.0,
            why: why.into(),
        }
    }

    /// Posts the read, progressing while the provider is out of resources.
    fn post(
        &mut self,
        side: &mut ReadSide,
        mut buffer: Buffer,
        len: usize,
        from: (sys::fi_addr_t, u64, u64),
        deadline: Instant,
    ) -> Result<usize, RemoteReadError> {
        let mut checks = 0u32;
        loop {
            match side.post(buffer, len, from) {
                Ok(slot) => return Ok(slot),
                Err((back, Some(error))) => {
                    self.buffer = Some(back);
                    return Err(self.failed(error.to_string()));
                }
                Err((back, None)) => buffer = back,
            }
            // An owner whose endpoint closed before the connection was up (rxm answers
            // -FI_EAGAIN for good then) is found gone here, as one that dies mid-read is in
            // `finish`.
            let waiting = side
                .progress()
                .map_err(|e| self.failed(e.to_string()))
                .and_then(|_| {
                    checks = checks.wrapping_add(1);
                    if checks.is_multiple_of(CHECKS_PER_CLOCK_READ) {
                        self.still_waiting(deadline)
                    } else {
                        Ok(())
                    }
                });
            if let Err(end) = waiting {
                self.buffer = Some(buffer);
                return Err(end);
            }
            std::hint::spin_loop();
        }
    }
}

impl RemoteReader for OfiReader {
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
        let parsed = ReadKey::parse(key).ok_or_else(|| self.bad_key("malformed key"))?;
        let remote = parsed
            .remote_addr(addr, len)
            .ok_or_else(|| self.bad_key("the read lies outside the memory the key names"))?;
        let buffer = match self.buffer.take() {
            Some(buffer) => buffer,
            None => Buffer::with_access(&self.domain, MAX_READ_BYTES, sys::FI_READ)
                .map_err(|e| self.failed(e.to_string()))?,
        };
        let side = Arc::clone(&self.side);
        let mut side = lock(&side);
        let owner = match side.owner(&parsed.name) {
            Ok(owner) => owner,
            Err(why) => {
                self.buffer = Some(buffer);
                return Err(self.bad_key(why));
            }
        };
        // Checked only while the read waits long (see `liveness`).
        let listener = tcp_listener(&self.provider, &parsed.name);
        self.liveness.held_back(self.peer, listener, Instant::now());
        let from = (owner, remote, parsed.key);
        let ended = self
            .post(&mut side, buffer, len, from, deadline)
            .and_then(|slot| self.finish(&mut side, slot, deadline));
        self.liveness.released(self.peer);
        drop(side);
        let (buffer, status) = ended?;
        let failed = match status {
            Status::Done => None,
            Status::Cancelled => Some(self.failed("the read was cancelled")),
            Status::Failed(_, why) => Some(self.failed(why)),
        };
        let buffer = self.buffer.insert(buffer);
        match failed {
            Some(error) => Err(error),
            None => Ok(&buffer.bytes()[..len]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> ReadKey {
        ReadKey {
            key: 7,
            base: 4096,
            bytes: 64,
            virt_addr: false,
            name: vec![1, 2, 3],
        }
    }

    #[test]
    fn a_read_is_addressed_by_offset_or_address_and_kept_in_its_region() {
        let mut k = key();
        assert_eq!(k.remote_addr(4096 + 8, 56), Some(8));
        assert_eq!(k.remote_addr(4096 + 8, 57), None);
        assert_eq!(k.remote_addr(4095, 1), None);
        k.virt_addr = true;
        assert_eq!(k.remote_addr(4096 + 8, 8), Some(4096 + 8));
        assert_eq!(k.remote_addr(u64::MAX, 2), None);
    }

    proptest! {
        #[test]
        fn keys_round_trip_and_a_damaged_one_never_parses_longer(
            key_value in any::<u64>(), base in any::<u64>(), bytes in any::<u64>(),
            virt_addr in any::<bool>(), name in prop::collection::vec(any::<u8>(), 1..64),
            cut in 0usize..96, flip in 0usize..96,
        ) {
            let k = ReadKey { key: key_value, base, bytes, virt_addr, name };
            let packed = k.to_bytes();
            prop_assert_eq!(ReadKey::parse(&packed), Some(k.clone()));
            // A cut key never parses (the name's length no longer matches).
            if cut < packed.len() {
                prop_assert_eq!(ReadKey::parse(&packed[..cut]), None);
            }
            // A flipped byte parses to another key or to none, never panics.
            let mut damaged = packed.to_vec();
            if let Some(b) = damaged.get_mut(flip) {
                *b ^= 0x5a;
            }
            let _ = ReadKey::parse(&damaged);
        }
    }
}
