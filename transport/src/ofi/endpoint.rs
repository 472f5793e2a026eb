//! The reliable-datagram endpoint, owning the completion queue and address vector bound to it
//! so that it closes before them.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use ftcoll_ofi_sys as sys;

use super::av::AddressVector;
use super::cq::CompletionQueue;
use super::fabric::{check, close_fid, library_error, no_object, Domain};
use super::info::Info;
use crate::TransportError;

/// What posting an operation did.
#[derive(Debug)]
pub(super) enum Posted {
    /// The provider took it; its completion will be reported.
    Yes,
    /// The provider is out of resources: read completions, then retry. That is `-FI_EAGAIN`,
    /// and also `-FI_ENOMEM`, which shm returns for a receive while its pool of entries is
    /// full of unexpected messages (that drain as matching receives are posted).
    Again,
    /// The provider refused it.
    Failed(TransportError),
}

impl Posted {
    fn from_code(call: &'static str, code: isize) -> Posted {
        match code {
            0.. => Posted::Yes,
            code if code == -(sys::FI_EAGAIN as isize) || code == -(sys::FI_ENOMEM as isize) => {
                Posted::Again
            }
            code => Posted::Failed(library_error(call, code)),
        }
    }
}

/// An enabled endpoint; on drop it closes first, then its queue and vector, then (if it held the
/// last reference) the domain. Fields drop in declaration order after `Drop::drop`.
pub(super) struct Endpoint {
    fid: NonNull<sys::fid_ep>,
    cq: CompletionQueue,
    av: AddressVector,
    domain: Arc<Domain>,
}

// SAFETY: used only by the thread that owns the transport (the domain is FI_THREAD_DOMAIN).
unsafe impl Send for Endpoint {}

impl Endpoint {
    /// Opens an endpoint of `info`, binds the queue (sends and receives) and the vector, and
    /// enables it.
    pub(super) fn open(
        domain: &Arc<Domain>,
        info: &Info<'_>,
        cq: CompletionQueue,
        av: AddressVector,
    ) -> Result<Endpoint, TransportError> {
        let mut fid = ptr::null_mut();
        // SAFETY: the domain is open and `info` valid; libfabric copies what it keeps.
        let code = unsafe {
            sys::ftcoll_fi_endpoint(domain.as_ptr(), info.raw_mut(), &mut fid, ptr::null_mut())
        };
        check("fi_endpoint", code)?;
        let fid = NonNull::new(fid).ok_or_else(|| no_object("fi_endpoint"))?;
        // From here a failure drops `ep`, which closes the endpoint before the queue and vector.
        let ep = Endpoint {
            fid,
            cq,
            av,
            domain: Arc::clone(domain),
        };
        // SAFETY: the endpoint, vector and queue are open objects of the same domain.
        unsafe {
            check(
                "fi_ep_bind(av)",
                sys::ftcoll_fi_ep_bind(ep.fid.as_ptr(), ep.av.as_fid(), 0),
            )?;
            check(
                "fi_ep_bind(cq)",
                sys::ftcoll_fi_ep_bind(
                    ep.fid.as_ptr(),
                    ep.cq.as_fid(),
                    sys::FI_TRANSMIT | sys::FI_RECV,
                ),
            )?;
            check("fi_enable", sys::ftcoll_fi_enable(ep.fid.as_ptr()))?;
        }
        Ok(ep)
    }

    fn as_fid(&self) -> *mut sys::fid {
        // SAFETY: `fid` is the first member of the open endpoint `self.fid` points to.
        unsafe { &raw mut (*self.fid.as_ptr()).fid }
    }

    /// The endpoint's domain.
    pub(super) fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    /// The completion queue bound to the endpoint.
    pub(super) fn cq(&self) -> &CompletionQueue {
        &self.cq
    }

    /// The address vector bound to the endpoint.
    pub(super) fn av(&self) -> &AddressVector {
        &self.av
    }

    /// The endpoint's name in the provider's address format (what peers insert).
    pub(super) fn name(&self) -> Result<Vec<u8>, TransportError> {
        let mut len = 0usize;
        // SAFETY: with a zero length the call only reports the size needed (FI_ETOOSMALL).
        unsafe { sys::ftcoll_fi_getname(self.as_fid(), ptr::null_mut(), &mut len) };
        let mut name = vec![0u8; len.max(1)];
        let mut len = name.len();
        // SAFETY: `name` is writable for `len` bytes; the call writes at most that and the size.
        let code =
            unsafe { sys::ftcoll_fi_getname(self.as_fid(), name.as_mut_ptr().cast(), &mut len) };
        check("fi_getname", code)?;
        name.truncate(len);
        Ok(name)
    }

    /// Posts a tagged send of `len` bytes at `buf` to `dest`.
    ///
    /// # Safety
    /// The `len` bytes at `buf` (registered, with descriptor `desc`) and the context at
    /// `context` stay valid and unmoved until the operation's completion is read or the
    /// endpoint is closed.
    #[inline(always)]
    pub(super) unsafe fn post_send(
        &self,
        buf: *const u8,
        len: usize,
        desc: *mut c_void,
        dest: sys::fi_addr_t,
        tag: u64,
        context: *mut sys::fi_context2,
    ) -> Posted {
        // SAFETY: the caller's contract.
        let code = unsafe {
            sys::ftcoll_fi_tsend(
                self.fid.as_ptr(),
                buf.cast(),
                len,
                desc,
                dest,
                tag,
                context.cast(),
            )
        };
        Posted::from_code("fi_tsend", code)
    }

    /// Posts a tagged receive of up to `len` bytes into `buf`, from any source, matching `tag`
    /// in the bits `ignore` leaves clear.
    ///
    /// # Safety
    /// As for [`Endpoint::post_send`], and nothing reads or writes the buffer meanwhile.
    #[inline]
    pub(super) unsafe fn post_recv(
        &self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        tag: u64,
        ignore: u64,
        context: *mut sys::fi_context2,
    ) -> Posted {
        // SAFETY: the caller's contract. FI_ADDR_UNSPEC (all ones) accepts any source.
        let code = unsafe {
            sys::ftcoll_fi_trecv(
                self.fid.as_ptr(),
                buf.cast(),
                len,
                desc,
                sys::fi_addr_t::MAX,
                tag,
                ignore,
                context.cast(),
            )
        };
        Posted::from_code("fi_trecv", code)
    }

    /// Posts a remote read of `len` bytes at `addr` of the region `key` names at `source`, into
    /// `buf`.
    ///
    /// # Safety
    /// As for [`Endpoint::post_recv`]: `buf` (registered for FI_READ,
    /// descriptor `desc`) and the context stay valid, untouched, until the completion is read
    /// or the endpoint is closed.
    pub(super) unsafe fn post_read(
        &self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        (source, addr, key): (sys::fi_addr_t, u64, u64),
        context: *mut sys::fi_context2,
    ) -> Posted {
        // SAFETY: the caller's contract.
        let code = unsafe {
            sys::ftcoll_fi_read(
                self.fid.as_ptr(),
                buf.cast(),
                len,
                desc,
                source,
                addr,
                key,
                context.cast(),
            )
        };
        Posted::from_code("fi_read", code)
    }

    /// Asks the provider to cancel an operation; if it can, the operation completes with
    /// FI_ECANCELED, otherwise normally. Either way its completion must still be read.
    ///
    /// # Safety
    /// `context` is the context of an operation posted on this endpoint whose completion has
    /// not been read (a provider may look inside it).
    pub(super) unsafe fn cancel(&self, context: *mut sys::fi_context2) {
        // SAFETY: the caller's contract. A refusal (-FI_ENOENT: already done, or the provider
        // cannot cancel sends) leaves the operation to complete normally.
        let _ = unsafe { sys::ftcoll_fi_cancel(self.as_fid(), context.cast()) };
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: nothing uses the endpoint any more; the provider stops touching the buffers
        // of operations still outstanding once the endpoint is closed.
        unsafe { close_fid("endpoint", self.as_fid()) };
    }
}
