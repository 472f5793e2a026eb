//! `fi_getinfo`: what the transport asks libfabric for, and the list it gets back (freed with
//! `fi_freeinfo`).

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use ftcoll_ofi_sys as sys;

use super::fabric::{check, library_error};
use crate::TransportError;

/// The libfabric API version the transport is written against.
pub(super) const API_VERSION: u32 = sys::fi_version_of(1, 17);

/// Operation modes the transport honours: every operation's context is an `fi_context2` the
/// transport owns until the operation's completion is read (which also satisfies FI_CONTEXT).
const MODES: u64 = sys::FI_CONTEXT | sys::FI_CONTEXT2;

/// Memory-registration modes the transport honours. Every buffer it posts is registered
/// (allocated memory, by virtual address) and its descriptor passed, so FI_MR_LOCAL costs
/// nothing extra; keys are never sent to peers, so FI_MR_PROV_KEY and FI_MR_VIRT_ADDR do not
/// matter. Not honoured: FI_MR_ENDPOINT (regions bound to an endpoint) and FI_MR_HMEM (device
/// memory), so providers that insist on them are not offered.
const MR_MODES: u64 =
    sys::FI_MR_LOCAL | sys::FI_MR_ALLOCATED | sys::FI_MR_VIRT_ADDR | sys::FI_MR_PROV_KEY;

/// Capabilities of the transport's frames.
const TAGGED_CAPS: u64 = sys::FI_TAGGED | sys::FI_SEND | sys::FI_RECV;
/// Capabilities of remote reads: reading peers' memory, and having this rank's read.
pub(super) const READ_CAPS: u64 = sys::FI_RMA | sys::FI_READ | sys::FI_REMOTE_READ;

/// What `fi_getinfo` returned: a linked list, freed on drop.
pub(super) struct InfoList {
    head: NonNull<sys::fi_info>,
}

// SAFETY: the list is plain data owned by this value; libfabric keeps no reference to it.
unsafe impl Send for InfoList {}

/// One entry of an [`InfoList`].
#[derive(Clone, Copy)]
pub(super) struct Info<'list> {
    raw: NonNull<sys::fi_info>,
    list: PhantomData<&'list InfoList>,
}

/// An `fi_info` allocated for hints, freed (with the strings placed in it) on drop.
struct Hints(NonNull<sys::fi_info>);

impl Drop for Hints {
    fn drop(&mut self) {
        // SAFETY: allocated by fi_allocinfo; its strings were allocated with C malloc.
        unsafe { sys::fi_freeinfo(self.0.as_ptr()) };
    }
}

impl InfoList {
    /// Reliable-datagram endpoints with tagged messages, on `provider` (`None`: libfabric's
    /// choice, which honours `FI_PROVIDER`). `Ok(None)` if no provider offers one.
    pub(super) fn rdm_tagged(provider: Option<&str>) -> Result<Option<InfoList>, TransportError> {
        InfoList::rdm(provider, TAGGED_CAPS)
    }

    /// Reliable-datagram endpoints with tagged messages and remote reads both ways, on
    /// `provider`: where the read endpoint of remote reads comes from.
    pub(super) fn rdm_readable(provider: &str) -> Result<Option<InfoList>, TransportError> {
        InfoList::rdm(Some(provider), TAGGED_CAPS | READ_CAPS)
    }

    /// The entry of this list on the same provider, fabric and domain as `like`.
    pub(super) fn same_place_as(&self, like: &Info<'_>) -> Option<Info<'_>> {
        let place = |info: &Info<'_>| (info.provider_name(), info.names());
        let wanted = place(like);
        self.iter().find(|info| place(info) == wanted)
    }

    fn rdm(provider: Option<&str>, caps: u64) -> Result<Option<InfoList>, TransportError> {
        // SAFETY: fi_allocinfo has no preconditions; it returns a zeroed info whose attribute
        // structs are allocated, or NULL.
        let hints = NonNull::new(unsafe { sys::ftcoll_fi_allocinfo() })
            .map(Hints)
            .ok_or_else(|| library_error("fi_allocinfo", -(sys::FI_ENOMEM as isize)))?;
        let prov_name = match provider {
            Some(name) => Some(CString::new(name).map_err(|_| TransportError::Library {
                library: "libfabric",
                call: "fi_getinfo",
                why: format!("provider name {name:?} contains a NUL byte"),
            })?),
            None => None,
        };
        // SAFETY: the attribute pointers of an info from fi_allocinfo are valid and exclusively
        // ours. prov_name is strdup'ed because fi_freeinfo frees it with free().
        unsafe {
            let h = hints.0.as_ptr();
            (*h).caps = caps;
            (*h).mode = MODES;
            (*(*h).ep_attr).type_ = sys::FI_EP_RDM;
            (*(*h).domain_attr).mr_mode = MR_MODES as i32;
            (*(*h).domain_attr).threading = sys::FI_THREAD_DOMAIN;
            if let Some(name) = &prov_name {
                let copy = sys::ftcoll_fi_strdup(name.as_ptr());
                if copy.is_null() {
                    return Err(library_error("strdup", -(sys::FI_ENOMEM as isize)));
                }
                (*(*h).fabric_attr).prov_name = copy;
            }
        }
        let mut head = ptr::null_mut();
        // SAFETY: the hints are valid; on success `head` receives a list we own.
        let code = unsafe {
            sys::fi_getinfo(
                API_VERSION,
                ptr::null(),
                ptr::null(),
                0,
                hints.0.as_ptr(),
                &mut head,
            )
        };
        if code == -sys::FI_ENODATA {
            return Ok(None);
        }
        check("fi_getinfo", code)?;
        Ok(NonNull::new(head).map(|head| InfoList { head }))
    }

    /// The entries, in libfabric's order of preference.
    pub(super) fn iter(&self) -> impl Iterator<Item = Info<'_>> + '_ {
        std::iter::successors(Some(self.first()), |info| {
            // SAFETY: `next` is NULL or the next entry of the list this value owns.
            NonNull::new(unsafe { info.raw.as_ref() }.next).map(|raw| Info {
                raw,
                list: PhantomData,
            })
        })
    }

    /// The preferred entry.
    pub(super) fn first(&self) -> Info<'_> {
        Info {
            raw: self.head,
            list: PhantomData,
        }
    }
}

impl Drop for InfoList {
    fn drop(&mut self) {
        // SAFETY: the list came from fi_getinfo and nothing borrows it any more.
        unsafe { sys::fi_freeinfo(self.head.as_ptr()) };
    }
}

impl Info<'_> {
    /// The entry itself.
    pub(super) fn raw(&self) -> &sys::fi_info {
        // SAFETY: the entry lives as long as the list, which `'list` borrows.
        unsafe { self.raw.as_ref() }
    }

    /// The entry as the mutable pointer libfabric's open calls take; they only read it.
    pub(super) fn raw_mut(&self) -> *mut sys::fi_info {
        self.raw.as_ptr()
    }

    /// The provider, e.g. `tcp;ofi_rxm` (a utility provider layered over a core one).
    pub(super) fn provider_name(&self) -> String {
        // SAFETY: fabric_attr of a returned entry is valid; prov_name is NULL or a C string.
        let name =
            unsafe { self.raw().fabric_attr.as_ref() }.map_or(ptr::null_mut(), |a| a.prov_name);
        if name.is_null() {
            return String::from("unknown");
        }
        // SAFETY: non-null and NUL-terminated, owned by the list.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    }

    /// The fabric's and the domain's names (e.g. a subnet and an interface for tcp).
    fn names(&self) -> (String, String) {
        let text = |name: *mut std::ffi::c_char| {
            if name.is_null() {
                return String::new();
            }
            // SAFETY: non-null and NUL-terminated, owned by the list.
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: the attribute structs of a returned entry are valid or NULL.
        let (fabric, domain) = unsafe {
            (
                self.raw().fabric_attr.as_ref().map(|a| a.name),
                self.raw().domain_attr.as_ref().map(|a| a.name),
            )
        };
        (
            fabric.map(text).unwrap_or_default(),
            domain.map(text).unwrap_or_default(),
        )
    }

    /// The capabilities the entry offers.
    pub(super) fn caps(&self) -> u64 {
        self.raw().caps
    }

    /// How many low bits of a tag the provider matches (its `mem_tag_format`; 0 means all 64).
    pub(super) fn tag_bits(&self) -> u32 {
        // SAFETY: ep_attr of a returned entry is valid or NULL.
        let format = unsafe { self.raw().ep_attr.as_ref() }.map_or(0, |a| a.mem_tag_format);
        if format == 0 {
            64
        } else {
            64 - format.leading_zeros()
        }
    }

    /// The address-vector type the provider prefers.
    pub(super) fn av_type(&self) -> sys::fi_av_type {
        // SAFETY: domain_attr of a returned entry is valid or NULL.
        unsafe { self.raw().domain_attr.as_ref() }.map_or(sys::FI_AV_UNSPEC, |a| a.av_type)
    }

    /// The memory-registration modes the provider requires of us.
    pub(super) fn mr_mode(&self) -> u64 {
        // SAFETY: as in `av_type`.
        let mode = unsafe { self.raw().domain_attr.as_ref() }.map_or(0, |a| a.mr_mode);
        u64::from(mode.cast_unsigned())
    }
}

/// Whether `provider` (a `;`-separated stack) runs on RDMA hardware: some core provider in it is
/// neither a sockets or shared-memory one nor a utility provider (those are named `ofi_*`).
pub(super) fn is_rdma_provider(provider: &str) -> bool {
    const SOFTWARE: [&str; 7] = ["tcp", "udp", "sockets", "shm", "sm2", "net", "rxd"];
    provider
        .split(';')
        .any(|layer| !layer.starts_with("ofi_") && !SOFTWARE.contains(&layer))
}

/// Whether libfabric offers an RDM endpoint on a real RDMA provider, for `--transport auto`:
/// `Ok(Some(provider))` for the first provider that is not tcp, udp, sockets, shm or a utility
/// provider layered only over those; `Ok(None)` if there is none; `Err` if libfabric itself
/// cannot be used.
pub fn probe_rdma_provider() -> Result<Option<String>, TransportError> {
    let Some(list) = InfoList::rdm_tagged(None)? else {
        return Ok(None);
    };
    let found = list
        .iter()
        .map(|info| info.provider_name())
        .find(|name| is_rdma_provider(name));
    Ok(found)
}
