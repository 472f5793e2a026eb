//! The `fi_context2` of every operation slot, in one allocation the provider may write while
//! operations are outstanding (FI_CONTEXT / FI_CONTEXT2 modes).

#![allow(unsafe_code)]

use std::ptr::NonNull;

use ftcoll_ofi_sys as sys;

/// Contiguous `fi_context2` slots, one per operation slot, owned through a raw pointer because
/// the provider writes them while operations are outstanding.
pub(super) struct Contexts {
    base: NonNull<sys::fi_context2>,
    len: usize,
}

impl Contexts {
    /// `len` zeroed contexts.
    pub(super) fn new(len: usize) -> Contexts {
        let slab = vec![sys::fi_context2::default(); len].into_boxed_slice();
        Contexts {
            base: NonNull::from(Box::leak(slab)).cast(),
            len,
        }
    }

    /// The context of `slot`.
    pub(super) fn get(&self, slot: usize) -> *mut sys::fi_context2 {
        assert!(slot < self.len, "context slot out of range");
        // SAFETY: in bounds of the slab (asserted).
        unsafe { self.base.as_ptr().add(slot) }
    }

    /// The slot of a context pointer a completion returned, if it is one of ours.
    pub(super) fn slot_of(&self, context: usize) -> Option<usize> {
        let size = std::mem::size_of::<sys::fi_context2>();
        let offset = context.checked_sub(self.base.as_ptr() as usize)?;
        (offset % size == 0 && offset / size < self.len).then_some(offset / size)
    }
}

impl Drop for Contexts {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` as a boxed slice of `len` contexts; the endpoint that
        // could write them is closed (`Ops` drops it first).
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.base.as_ptr(),
                self.len,
            ))
        });
    }
}
