//! The address vector: peers' endpoint names turned into `fi_addr_t` handles.

#![allow(unsafe_code)]

use std::ptr::{self, NonNull};
use std::sync::Arc;

use ftcoll_ofi_sys as sys;

use super::fabric::{check, close_fid, no_object, Domain};
use crate::TransportError;

/// An open address vector, keeping its domain alive; closed on drop (after the endpoint that
/// owns it: see `endpoint::Endpoint`).
pub(super) struct AddressVector {
    fid: NonNull<sys::fid_av>,
    _domain: Arc<Domain>,
}

// SAFETY: used only by the thread that owns the transport (the domain is FI_THREAD_DOMAIN).
unsafe impl Send for AddressVector {}

impl AddressVector {
    /// Opens a vector of type `av_type` sized for `peers` addresses.
    pub(super) fn open(
        domain: &Arc<Domain>,
        av_type: sys::fi_av_type,
        peers: usize,
    ) -> Result<AddressVector, TransportError> {
        let mut attr = sys::fi_av_attr {
            type_: av_type,
            count: peers,
            ..Default::default()
        };
        let mut fid = ptr::null_mut();
        // SAFETY: the domain is open; attr is read during the call only.
        let code = unsafe {
            sys::ftcoll_fi_av_open(domain.as_ptr(), &mut attr, &mut fid, ptr::null_mut())
        };
        check("fi_av_open", code)?;
        let fid = NonNull::new(fid).ok_or_else(|| no_object("fi_av_open"))?;
        Ok(AddressVector {
            fid,
            _domain: Arc::clone(domain),
        })
    }

    /// The vector as a generic libfabric object.
    pub(super) fn as_fid(&self) -> *mut sys::fid {
        // SAFETY: `fid` is the first member of the open vector `self.fid` points to.
        unsafe { &raw mut (*self.fid.as_ptr()).fid }
    }

    /// Inserts one endpoint name (as a peer's `fi_getname` returned it).
    pub(super) fn insert(&self, name: &[u8]) -> Result<sys::fi_addr_t, TransportError> {
        let mut addr: sys::fi_addr_t = sys::fi_addr_t::MAX;
        // SAFETY: a synchronous insert of one address: the provider reads the name (in its own
        // format; a short or garbled one fails the call) and writes one fi_addr_t.
        let code = unsafe {
            sys::ftcoll_fi_av_insert(
                self.fid.as_ptr(),
                name.as_ptr().cast(),
                1,
                &mut addr,
                0,
                ptr::null_mut(),
            )
        };
        check("fi_av_insert", code)?;
        if code != 1 || addr == sys::fi_addr_t::MAX {
            return Err(TransportError::Library {
                library: "libfabric",
                call: "fi_av_insert",
                why: format!(
                    "the provider rejected a peer address of {} bytes",
                    name.len()
                ),
            });
        }
        Ok(addr)
    }

    /// Removes an address once no operation uses it (releasing the provider's connection).
    pub(super) fn remove(&self, addr: sys::fi_addr_t) -> Result<(), TransportError> {
        let mut addrs = [addr];
        // SAFETY: one address from `insert`; the caller has no operation on it in flight.
        let code = unsafe { sys::ftcoll_fi_av_remove(self.fid.as_ptr(), addrs.as_mut_ptr(), 1, 0) };
        check("fi_av_remove", code)
    }
}

impl Drop for AddressVector {
    fn drop(&mut self) {
        // SAFETY: the endpoint bound to the vector closed first (it owns the vector).
        unsafe { close_fid("address vector", self.as_fid()) };
    }
}
