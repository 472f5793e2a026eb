//! Memory for vectors: `ftcoll_alloc` puts a long vector where the ranks of its node can map
//! it, so that the allreduce reads it with plain loads rather than a cross-memory read per
//! call (see `docs/c.md`); what it cannot place so comes from `malloc`'s family, and
//! `ftcoll_free` tells the two apart.

use std::ffi::c_void;

use ftcoll_runtime::transport::shm::shared_heap;

/// Alignment of the memory `ftcoll_alloc` takes from the C allocator: a cache line, enough
/// for every element type.
const C_ALIGN: usize = 64;

/// `bytes` of memory for a vector, or NULL when out of memory or `bytes` is 0. From 1 MiB, once
/// `ftcoll_init` joined a job on shared memory with the single copy on, the memory is a memory
/// file the node's ranks map (page-aligned, zeroed); otherwise aligned to 64 bytes. Free it
/// with `ftcoll_free` only.
#[no_mangle]
#[allow(unsafe_code)]
pub extern "C" fn ftcoll_alloc(bytes: usize) -> *mut c_void {
    if bytes == 0 {
        return std::ptr::null_mut();
    }
    if let Some(shared) = shared_heap::alloc_bytes(bytes) {
        return shared.as_ptr().cast();
    }
    let mut ptr = std::ptr::null_mut();
    // SAFETY: `ptr` is a valid out-pointer; the alignment is a power of two and a multiple
    // of the pointer size, as posix_memalign requires.
    let rc = unsafe { libc::posix_memalign(&mut ptr, C_ALIGN, bytes) };
    if rc == 0 {
        ptr
    } else {
        std::ptr::null_mut()
    }
}

/// Frees memory of `ftcoll_alloc` (NULL is ignored).
///
/// # Safety
/// `ptr` is NULL or came from `ftcoll_alloc` and is not used again.
#[no_mangle]
#[allow(unsafe_code)]
pub unsafe extern "C" fn ftcoll_free(ptr: *mut c_void) {
    if ptr.is_null() || shared_heap::free_bytes(ptr.cast()) {
        return;
    }
    // SAFETY: not a shared allocation, so posix_memalign's (the caller's contract).
    unsafe { libc::free(ptr) }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;

    #[test]
    fn alloc_and_free_both_kinds() {
        assert!(ftcoll_alloc(0).is_null());
        // Outside a job the heap is off: both sizes come from the C allocator.
        for bytes in [24, 2 << 20] {
            let ptr = ftcoll_alloc(bytes);
            assert!(!ptr.is_null());
            assert_eq!(ptr as usize % C_ALIGN, 0);
            assert!(shared_heap::lookup(ptr.cast(), bytes).is_none());
            // SAFETY: from ftcoll_alloc, written within its size, freed once.
            unsafe {
                ptr.cast::<u8>().write_bytes(1, bytes);
                ftcoll_free(ptr);
            }
        }
        shared_heap::enable(true);
        let ptr = ftcoll_alloc(2 << 20);
        shared_heap::enable(false);
        let span = shared_heap::lookup(ptr.cast(), 2 << 20).expect("a shared allocation");
        assert_eq!(span.offset, 0);
        // SAFETY: from ftcoll_alloc, freed once.
        unsafe { ftcoll_free(ptr) };
        assert!(shared_heap::lookup(ptr.cast(), 8).is_none());
        // SAFETY: NULL is allowed.
        unsafe { ftcoll_free(std::ptr::null_mut()) };
    }
}
