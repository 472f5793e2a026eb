//! Memory registration: regions from `fi_mr_reg`, buffers that own their memory and its
//! region, and the registration behind [`Transport::register`](crate::Transport).

#![allow(unsafe_code)]

use std::any::Any;
use std::ffi::c_void;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ftcoll_ofi_sys as sys;

use super::fabric::{check, close_fid, no_object, Domain};
use crate::{Registration, TransportError};

/// A registered memory region, keeping its domain alive; deregistered on drop. It records
/// only the address it covers: whoever creates one guarantees the memory outlives every
/// operation posted with its descriptor (see [`MemoryRegion::register`]).
pub(super) struct MemoryRegion {
    fid: NonNull<sys::fid_mr>,
    desc: *mut c_void,
    domain: Arc<Domain>,
}

// SAFETY: after registration the region is immutable; it is closed once, by its owner, on the
// transport's thread or (for user buffers after the transport is gone) under the graveyard lock.
unsafe impl Send for MemoryRegion {}
// SAFETY: as for Send: shared references only read `desc`.
unsafe impl Sync for MemoryRegion {}

impl MemoryRegion {
    /// Registers `len` bytes at `ptr` for `access` (FI_SEND | FI_RECV for frames, FI_READ for
    /// the buffers remote reads land in, FI_REMOTE_READ for memory peers read).
    ///
    /// # Safety
    /// The memory stays allocated while any operation posted with this region's descriptor is
    /// outstanding (deregistering later than freeing is harmless: the region is never used then),
    /// and, for FI_REMOTE_READ, while peers may read it through the region's key.
    unsafe fn register(
        domain: &Arc<Domain>,
        ptr: *const u8,
        len: usize,
        access: u64,
    ) -> Result<MemoryRegion, TransportError> {
        let mut fid = ptr::null_mut();
        // SAFETY: the caller's contract; the domain is open.
        let code = unsafe {
            sys::ftcoll_fi_mr_reg(
                domain.as_ptr(),
                ptr.cast(),
                len,
                access,
                0,
                domain.next_mr_key(),
                0,
                &mut fid,
                ptr::null_mut(),
            )
        };
        check("fi_mr_reg", code)?;
        let fid = NonNull::new(fid).ok_or_else(|| no_object("fi_mr_reg"))?;
        // SAFETY: the region was just opened.
        let desc = unsafe { sys::ftcoll_fi_mr_desc(fid.as_ptr()) };
        Ok(MemoryRegion {
            fid,
            desc,
            domain: Arc::clone(domain),
        })
    }

    /// The descriptor passed with operations on the region's memory.
    pub(super) fn desc(&self) -> *mut c_void {
        self.desc
    }

    /// The key a peer names the region by in a remote read.
    pub(super) fn key(&self) -> u64 {
        // SAFETY: the region is open.
        unsafe { sys::ftcoll_fi_mr_key(self.fid.as_ptr()) }
    }

    /// Whether the region belongs to `domain`.
    pub(super) fn is_of(&self, domain: &Arc<Domain>) -> bool {
        Arc::ptr_eq(&self.domain, domain)
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: no operation uses the region any more (its owners' contract).
        unsafe { close_fid("memory region", &raw mut (*self.fid.as_ptr()).fid) };
    }
}

/// A zeroed anonymous mapping of `u64` words, reached through a raw pointer: the provider
/// writes it while a receive is posted, which a `Box`'s uniqueness would not allow. A mapping of
/// its own rather than a heap allocation: the heap zeroes (touches) every page of a reused
/// chunk, while a fresh mapping costs memory only for the pages frames touch, which matters with
/// a thousand receive buffers posted (the `shm` provider) and mostly small frames.
struct Words {
    ptr: NonNull<u64>,
    len: usize,
    /// Owns the memory `ptr` points into; unmapped on drop.
    _map: memmap2::MmapMut,
}

impl Words {
    fn zeroed(len: usize) -> Result<Words, TransportError> {
        let mut map = memmap2::MmapMut::map_anon(len * 8).map_err(|source| TransportError::Io {
            context: "mapping a receive buffer",
            source,
        })?;
        // Page-aligned, so 8-byte aligned; non-null since the length is at least one word.
        let ptr = NonNull::new(map.as_mut_ptr().cast::<u64>()).ok_or(TransportError::Io {
            context: "mapping a receive buffer",
            source: std::io::Error::other("null mapping"),
        })?;
        Ok(Words {
            ptr,
            len,
            _map: map,
        })
    }
}

/// An 8-byte aligned, zeroed buffer with its own registration, deregistered before the memory
/// is freed (field order), so the region cannot outlive it. Posting a buffer moves it into the
/// operation that uses it (see `ops`): while the provider may touch it, no Rust code can.
pub(super) struct Buffer {
    region: MemoryRegion,
    words: Words,
}

// SAFETY: the buffer owns its allocation exclusively; the region is Send.
unsafe impl Send for Buffer {}

impl Buffer {
    /// A buffer of at least `bytes` bytes (and at least one word) registered for frames.
    pub(super) fn new(domain: &Arc<Domain>, bytes: usize) -> Result<Buffer, TransportError> {
        Buffer::with_access(domain, bytes, sys::FI_SEND | sys::FI_RECV)
    }

    /// A buffer of at least `bytes` bytes (and at least one word) registered for `access`.
    pub(super) fn with_access(
        domain: &Arc<Domain>,
        bytes: usize,
        access: u64,
    ) -> Result<Buffer, TransportError> {
        let words = Words::zeroed(bytes.div_ceil(8).max(1))?;
        // SAFETY: the region is dropped before `words` (field order), and operations using it
        // own the buffer.
        let region = unsafe {
            MemoryRegion::register(domain, words.ptr.as_ptr().cast(), words.len * 8, access)?
        };
        Ok(Buffer { region, words })
    }

    /// Capacity in bytes.
    pub(super) fn capacity(&self) -> usize {
        self.words.len * 8
    }

    /// The whole buffer.
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: the allocation holds `capacity()` bytes; no operation uses it while a
        // reference to `self` exists (see the type's docs).
        unsafe { std::slice::from_raw_parts(self.words.ptr.as_ptr().cast(), self.capacity()) }
    }

    /// The whole buffer, writable.
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.words.ptr.as_ptr().cast(), self.capacity()) }
    }

    /// The memory, for posting.
    pub(super) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.words.ptr.as_ptr().cast()
    }

    /// The registration's descriptor.
    pub(super) fn desc(&self) -> *mut c_void {
        self.region.desc()
    }
}

/// The registration of a user buffer from [`Transport::register`]: shared by the
/// `RegisteredBuffer` and every in-flight send from it, which also hold the memory, so the
/// memory outlives every operation using the region. The region may outlive the memory (if the
/// last owner drops the memory first); that is harmless, since nothing posts with it then.
///
/// [`Transport::register`]: crate::Transport::register
pub(super) struct UserRegistration {
    region: Option<MemoryRegion>,
    graveyard: Arc<Graveyard>,
}

impl UserRegistration {
    /// Registers `words` (which the caller keeps in the `RegisteredBuffer` beside this).
    pub(super) fn new(
        domain: &Arc<Domain>,
        graveyard: &Arc<Graveyard>,
        words: &[u64],
    ) -> Result<UserRegistration, TransportError> {
        // SAFETY: every send posted with the region pins `words` (see the type's docs).
        let region = unsafe {
            MemoryRegion::register(
                domain,
                words.as_ptr().cast(),
                std::mem::size_of_val(words),
                sys::FI_SEND | sys::FI_RECV,
            )?
        };
        Ok(UserRegistration {
            region: Some(region),
            graveyard: Arc::clone(graveyard),
        })
    }

    /// Registers `len` bytes at `addr` for peers' remote reads.
    ///
    /// # Safety
    /// The memory stays allocated while peers may read it through the region's key (the
    /// contract of [`Transport::expose`](crate::Transport::expose)).
    pub(super) unsafe fn exposing(
        domain: &Arc<Domain>,
        graveyard: &Arc<Graveyard>,
        addr: *const u8,
        len: usize,
    ) -> Result<UserRegistration, TransportError> {
        // SAFETY: the caller's contract; no local operation is posted with the region.
        let region = unsafe { MemoryRegion::register(domain, addr, len, sys::FI_REMOTE_READ)? };
        Ok(UserRegistration {
            region: Some(region),
            graveyard: Arc::clone(graveyard),
        })
    }

    /// The key peers read the memory by.
    pub(super) fn key(&self) -> u64 {
        self.region.as_ref().map_or(0, MemoryRegion::key)
    }

    /// The region, if it belongs to `domain`.
    pub(super) fn region_of(&self, domain: &Arc<Domain>) -> Option<&MemoryRegion> {
        self.region.as_ref().filter(|region| region.is_of(domain))
    }
}

impl Registration for UserRegistration {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for UserRegistration {
    fn drop(&mut self) {
        if let Some(region) = self.region.take() {
            self.graveyard.bury(region);
        }
    }
}

/// Where user registrations dropped on any thread leave their regions for the transport's
/// thread to close, since the domain is single-threaded (FI_THREAD_DOMAIN). Once the transport
/// is gone, regions are closed at once, one at a time under the lock.
#[derive(Default)]
pub(super) struct Graveyard {
    state: Mutex<GraveyardState>,
    /// Set while regions wait in `state`: the transport checks it on every poll, so the
    /// common case (none) costs no lock.
    occupied: AtomicBool,
}

#[derive(Default)]
struct GraveyardState {
    /// The transport is gone: close on arrival.
    closed: bool,
    regions: Vec<MemoryRegion>,
}

impl Graveyard {
    fn bury(&self, region: MemoryRegion) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.closed {
            drop(region);
        } else {
            state.regions.push(region);
            self.occupied.store(true, Ordering::Release);
        }
    }

    /// Closes the regions left so far (on the transport's thread).
    pub(super) fn close_buried(&self) {
        // A plain load first: no read-modify-write on the common path. A region buried after
        // the swap leaves the flag set for the next call.
        if !self.occupied.load(Ordering::Relaxed) || !self.occupied.swap(false, Ordering::Acquire) {
            return;
        }
        let regions = std::mem::take(
            &mut self
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .regions,
        );
        drop(regions);
    }

    /// The transport is gone: close what is left and everything that arrives later.
    fn shut(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        state.regions.clear();
    }
}

/// The transport's hold on the graveyard: dropped after the endpoint (field order in the
/// transport), it closes the graveyard so later regions close on the thread that drops them.
pub(super) struct GraveyardGuard(Arc<Graveyard>);

impl GraveyardGuard {
    /// A guard of a new graveyard.
    pub(super) fn new() -> GraveyardGuard {
        GraveyardGuard(Arc::default())
    }

    /// The graveyard, for registrations.
    pub(super) fn graveyard(&self) -> &Arc<Graveyard> {
        &self.0
    }
}

impl Drop for GraveyardGuard {
    fn drop(&mut self) {
        self.0.shut();
    }
}
