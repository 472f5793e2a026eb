//! A heap whose long vectors other ranks on the node can map: the owner side of the mapped
//! single copy ([`super::peer_map`] is the reader's side).
//!
//! A cross-memory read (`process_vm_readv`) pins each page it copies, and copies in the
//! kernel: on the development VM it moved a vector another core had just written at 10 GB/s,
//! against 16 GB/s for a plain copy out of shared memory. A vector that lives in shared memory
//! can be read the second way, but an application's vectors live where its allocator put them,
//! in private memory no other process can map. [`SharedHeap`] is an allocator that puts every
//! allocation of at least [`MIN_SHARED_BYTES`] in a memory file of its own (`memfd_create`,
//! sealed so that it never shrinks), and keeps a table of them, so that the single-copy ring
//! can tell a peer "this vector is bytes `offset..` of file `fd` in process `pid`"; the peer
//! takes a duplicate of that descriptor (`pidfd_getfd`, allowed where a cross-memory read is)
//! and maps it once.
//!
//! Installed as a program's global allocator it serves `Vec`s like any allocator, and makes a
//! memory file only for what is allocated inside [`shared`] (a vector the program will reduce)
//! once [`enable`]d (by a rank joining on one node). Everything else is the system
//! allocator's: a memory file costs system calls and fresh zeroed pages at every allocation,
//! where the system allocator reuses its memory, and a collective's own temporaries allocated
//! per call took up to 2.5x longer so (a 16 MiB chain broadcast at n = 2: 7.2 ms against 18.5).
//! Smaller allocations, allocations beyond the table's [`SLOTS`], and any the kernel refuses a
//! memory file for go to the system allocator too: they are then read by cross-memory attach,
//! as any application's vector is.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Allocations from this size on get a memory file: a vector shorter than the single-copy
/// threshold never takes the single copy, and each file costs three system calls and a
/// descriptor.
pub const MIN_SHARED_BYTES: usize = 1 << 20;
/// Shared allocations live at once; more go to the system allocator. Also bounds the
/// descriptors the heap holds.
pub const SLOTS: usize = 64;
const PAGE: usize = 4096;

/// Where a shared allocation's bytes lie, for a peer to map: what a single-copy notice carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedSpan {
    /// Unique to the allocation in this process's lifetime (a per-process nonce in the high
    /// half), so that a peer's cache of mappings never confuses two of them.
    pub serial: u64,
    /// The memory file's descriptor in the owner.
    pub fd: i32,
    /// The allocation's size (the file's), in bytes.
    pub file_bytes: u64,
    /// The span's first byte, from the file's start.
    pub offset: u64,
}

#[derive(Clone, Copy)]
struct Entry {
    /// 0 when the slot is free.
    addr: usize,
    bytes: usize,
    fd: i32,
    serial: u64,
}

const FREE: Entry = Entry {
    addr: 0,
    bytes: 0,
    fd: -1,
    serial: 0,
};

/// The table of shared allocations, under a spin lock: its critical sections scan 64 entries
/// and never allocate (this runs inside the allocator).
struct Table {
    locked: AtomicBool,
    entries: UnsafeCell<[Entry; SLOTS]>,
}

// SAFETY: `entries` is touched only between `lock` and `unlock`, which exclude each other.
unsafe impl Sync for Table {}

impl Table {
    fn with<R>(&self, f: impl FnOnce(&mut [Entry; SLOTS]) -> R) -> R {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held, so no other reference to the entries exists.
        let result = f(unsafe { &mut *self.entries.get() });
        self.locked.store(false, Ordering::Release);
        result
    }
}

static TABLE: Table = Table {
    locked: AtomicBool::new(false),
    entries: UnsafeCell::new([FREE; SLOTS]),
};
static ENABLED: AtomicBool = AtomicBool::new(false);
static NONCE: AtomicU32 = AtomicU32::new(0);
static COUNTER: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread is inside [`shared`]: const-initialised and without a destructor,
    /// so reading it never allocates (this runs inside the allocator).
    static IN_SHARED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with long allocations of this thread going to memory files (once [`enable`]d):
/// allocate the vectors a collective reduces inside it, e.g.
/// `let v = shared(|| vec![0.0f64; n]);`. A vector that grows later moves to private memory.
pub fn shared<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_SHARED.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(IN_SHARED.with(|c| c.replace(true)));
    f()
}

fn in_shared() -> bool {
    IN_SHARED.try_with(Cell::get).unwrap_or(false)
}

/// Turns shared allocations on (or off) for what is allocated from now on; what exists stays
/// where it is and is freed by whoever made it.
pub fn enable(on: bool) {
    ENABLED.store(on, Ordering::Release);
}

/// Whether new long allocations go to memory files.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// A serial no other allocation of this process, nor of a process that reuses its id, has.
fn next_serial() -> u64 {
    let mut nonce = NONCE.load(Ordering::Relaxed);
    if nonce == 0 {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid timespec to write.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let mixed = (now.tv_nsec as u64 ^ (now.tv_sec as u64).rotate_left(30))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ u64::from(std::process::id());
        let fresh = ((mixed >> 32) as u32) | 1;
        nonce = match NONCE.compare_exchange(0, fresh, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => fresh,
            Err(other) => other,
        };
    }
    (u64::from(nonce) << 32) | (COUNTER.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff)
}

/// A sealed memory file of `bytes` (a multiple of the page) mapped here, or `None` where the
/// kernel refuses any step (no `memfd_create`, out of descriptors, out of memory).
fn map_file(bytes: usize) -> Option<(i32, *mut u8)> {
    // SAFETY: plain system calls on a descriptor this function owns until it returns it; the
    // mapping is fresh and of the file's size, so it never reaches beyond the file.
    unsafe {
        let fd = libc::memfd_create(
            c"ftcoll-vector".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        );
        if fd < 0 {
            return None;
        }
        // Sealed at its size: a peer's mapping can then never reach beyond the file's end
        // (which would be SIGBUS there), and the seals tell a peer it maps one of these.
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        let sized = libc::ftruncate(fd, bytes as libc::off_t) == 0
            && libc::fcntl(fd, libc::F_ADD_SEALS, seals) == 0;
        let addr = if sized {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        } else {
            libc::MAP_FAILED
        };
        if addr == libc::MAP_FAILED {
            libc::close(fd);
            return None;
        }
        // Huge pages where the kernel gives them to shared memory (`shmem_enabled`).
        libc::madvise(addr, bytes, libc::MADV_HUGEPAGE);
        Some((fd, addr.cast()))
    }
}

/// Takes a shared allocation of `layout`, or `None` where it must come from the system.
fn alloc_shared(layout: Layout) -> Option<*mut u8> {
    if layout.size() < MIN_SHARED_BYTES || layout.align() > PAGE || !enabled() || !in_shared() {
        return None;
    }
    let bytes = layout.size().next_multiple_of(PAGE);
    let (fd, addr) = map_file(bytes)?;
    let entry = Entry {
        addr: addr as usize,
        bytes,
        fd,
        serial: next_serial(),
    };
    let kept = TABLE.with(|entries| match entries.iter_mut().find(|e| e.addr == 0) {
        Some(slot) => {
            *slot = entry;
            true
        }
        None => false,
    });
    if !kept {
        // SAFETY: the mapping and descriptor were made above and are not shared yet.
        unsafe {
            libc::munmap(addr.cast(), bytes);
            libc::close(fd);
        }
        return None;
    }
    Some(addr)
}

/// Frees `ptr` if it is a shared allocation; `false` if the system allocator owns it.
fn free_shared(ptr: *mut u8) -> bool {
    let addr = ptr as usize;
    let found = TABLE.with(|entries| {
        let slot = entries.iter_mut().find(|e| e.addr == addr && addr != 0)?;
        Some(std::mem::replace(slot, FREE))
    });
    let Some(entry) = found else {
        return false;
    };
    // SAFETY: the entry was this allocation's mapping and descriptor, now out of the table
    // and freed by its owner's dealloc, so nothing here uses them again. Peers that mapped the
    // file keep their own mapping; the memory goes when the last of them unmaps it.
    unsafe {
        libc::munmap(entry.addr as *mut libc::c_void, entry.bytes);
        libc::close(entry.fd);
    }
    true
}

/// Where `bytes` bytes from `ptr` lie if they are inside one shared allocation.
pub fn lookup(ptr: *const u8, bytes: usize) -> Option<SharedSpan> {
    let start = ptr as usize;
    let end = start.checked_add(bytes)?;
    TABLE.with(|entries| {
        entries
            .iter()
            .find(|e| e.addr != 0 && e.addr <= start && end <= e.addr + e.bytes)
            .map(|e| SharedSpan {
                serial: e.serial,
                fd: e.fd,
                file_bytes: e.bytes as u64,
                offset: (start - e.addr) as u64,
            })
    })
}

/// A shared allocation of `bytes` on a page boundary, for callers that manage memory by hand
/// (the C library's `ftcoll_alloc`: asking is the caller's [`shared`]), or `None` where it
/// must come from elsewhere: shorter than [`MIN_SHARED_BYTES`], not [`enable`]d, or refused.
/// Free it with [`free_bytes`].
pub fn alloc_bytes(bytes: usize) -> Option<std::ptr::NonNull<u8>> {
    let layout = Layout::from_size_align(bytes, PAGE).ok()?;
    shared(|| alloc_shared(layout)).and_then(std::ptr::NonNull::new)
}

/// Frees an allocation of [`alloc_bytes`] (or any shared one); `false`, doing nothing, when
/// `ptr` is not the start of a shared allocation.
pub fn free_bytes(ptr: *mut u8) -> bool {
    free_shared(ptr)
}

/// Whether the allocation with `serial` is alive (serials are never reused, so a freed one
/// stays dead).
pub fn is_live(serial: u64) -> bool {
    serial != 0 && TABLE.with(|entries| entries.iter().any(|e| e.addr != 0 && e.serial == serial))
}

/// Shared allocations alive now.
pub fn live() -> usize {
    TABLE.with(|entries| entries.iter().filter(|e| e.addr != 0).count())
}

/// The switch is process-wide: tests that flip it take turns.
#[cfg(test)]
pub(super) static TEST_SWITCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The allocator: the system's, except long allocations once [`enable`]d (see the module
/// docs). Install it with `#[global_allocator] static HEAP: SharedHeap = SharedHeap;`.
pub struct SharedHeap;

// SAFETY: every allocation is either the system allocator's, under the system allocator's
// contract, or a fresh private mapping of at least `layout.size()` bytes on a page boundary
// (so aligned for any `align` up to a page, which `alloc_shared` checks), freed exactly once
// by `free_shared`; a memory file starts zeroed, as `alloc_zeroed` promises.
unsafe impl GlobalAlloc for SharedHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match alloc_shared(layout) {
            Some(ptr) => ptr,
            // SAFETY: the caller's layout, passed on.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match alloc_shared(layout) {
            Some(ptr) => ptr,
            // SAFETY: the caller's layout, passed on.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() < MIN_SHARED_BYTES || !free_shared(ptr) {
            // SAFETY: not a shared allocation, so the system allocator's, with its layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let was_shared = layout.size() >= MIN_SHARED_BYTES && lookup(ptr, 1).is_some();
        if !was_shared && (new_size < MIN_SHARED_BYTES || !enabled() || !in_shared()) {
            // SAFETY: the system allocator's allocation, with the caller's arguments.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `new_size` with the old alignment is a valid layout (the caller's contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a fresh allocation of `new_layout`, filled from the old one (both live and
        // apart) before the old one is freed with its own layout.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The heap's functions, called directly: a unit test cannot install a global allocator.
    fn alloc(bytes: usize) -> *mut u8 {
        let layout = Layout::from_size_align(bytes, 8).expect("layout");
        // SAFETY: a non-zero layout.
        shared(|| unsafe { SharedHeap.alloc_zeroed(layout) })
    }

    fn free(ptr: *mut u8, bytes: usize) {
        let layout = Layout::from_size_align(bytes, 8).expect("layout");
        // SAFETY: allocated above with this layout.
        unsafe { SharedHeap.dealloc(ptr, layout) }
    }

    #[test]
    fn long_allocations_are_memory_files_once_enabled_and_short_ones_never() {
        let _turn = TEST_SWITCH.lock().unwrap_or_else(|e| e.into_inner());
        let before = live();
        let system = alloc(2 << 20);
        assert!(lookup(system, 8).is_none(), "shared before enable");
        enable(true);
        let layout = Layout::from_size_align(2 << 20, 8).expect("layout");
        // SAFETY: a non-zero layout, freed below with it.
        let outside = unsafe { SharedHeap.alloc(layout) };
        assert!(lookup(outside, 8).is_none(), "shared outside `shared`");
        // SAFETY: allocated just above with this layout.
        unsafe { SharedHeap.dealloc(outside, layout) };
        let short = alloc(4096);
        let long = alloc(3 << 20);
        let other = alloc(3 << 20);
        enable(false);
        assert!(lookup(short, 8).is_none());
        let span = lookup(long.wrapping_add(4096), 1 << 20).expect("a shared allocation");
        assert_eq!((span.offset, span.file_bytes), (4096, 3 << 20));
        assert!(
            lookup(long.wrapping_add(4096), 3 << 20).is_none(),
            "runs past its end"
        );
        let other_span = lookup(other, 8).expect("shared");
        assert_ne!(span.serial, other_span.serial);
        assert_ne!(span.fd, other_span.fd);
        // Zeroed, writable, and freed back into the table.
        // SAFETY: `long` is 3 MiB, live and exclusively ours.
        let bytes = unsafe { std::slice::from_raw_parts_mut(long, 3 << 20) };
        assert!(bytes.iter().all(|&b| b == 0));
        bytes[(3 << 20) - 1] = 7;
        assert_eq!(live(), before + 2);
        for (ptr, size) in [
            (system, 2 << 20),
            (short, 4096),
            (long, 3 << 20),
            (other, 3 << 20),
        ] {
            free(ptr, size);
        }
        assert_eq!(live(), before);
        assert!(
            lookup(long, 8).is_none(),
            "a freed allocation is still listed"
        );
    }

    #[test]
    fn realloc_moves_contents_between_the_two_heaps() {
        let _turn = TEST_SWITCH.lock().unwrap_or_else(|e| e.into_inner());
        let layout = Layout::from_size_align(64 << 10, 8).expect("layout");
        enable(true);
        // SAFETY: allocations and reallocations of live pointers with their own layouts.
        unsafe {
            let small = SharedHeap.alloc(layout);
            small.write_bytes(5, 64 << 10);
            let grown = shared(|| SharedHeap.realloc(small, layout, 2 << 20));
            assert!(
                lookup(grown, 8).is_some(),
                "grown past the threshold: shared"
            );
            assert_eq!(*grown.add((64 << 10) - 1), 5);
            let big = Layout::from_size_align(2 << 20, 8).expect("layout");
            let shrunk = SharedHeap.realloc(grown, big, 4096);
            assert!(lookup(shrunk, 8).is_none());
            assert_eq!(*shrunk.add(4095), 5);
            SharedHeap.dealloc(shrunk, Layout::from_size_align(4096, 8).expect("layout"));
        }
        enable(false);
    }
}
