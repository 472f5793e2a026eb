//! [`probe_rdma_device`]: whether UCX sees an RDMA-capable device, for `--transport auto`.
//!
//! The UCT resource lists are read directly (no UCP context or worker), each list and memory
//! domain held by a guard that releases it.

#![allow(unsafe_code)]

use std::ffi::{c_char, CStr};
use std::ptr;

use ftcoll_ucx_sys as sys;

use super::super::TransportError;
use super::context::check;

/// Transport name prefixes of InfiniBand/RoCE verbs transports (reliable connected,
/// unreliable datagram, dynamically connected), e.g. `rc_mlx5`, `ud_verbs`, `dc_mlx5`.
const RDMA_TRANSPORT_PREFIXES: [&str; 3] = ["rc", "ud", "dc"];

/// `Ok(Some("transport/device"))` for the first RDMA-capable transport UCX finds (for example
/// `rc_mlx5/mlx5_0:1`), `Ok(None)` if UCX sees only TCP, shared memory and loopback, and an
/// error if UCX cannot list its components.
pub fn probe_rdma_device() -> Result<Option<String>, TransportError> {
    let components = ComponentList::query()?;
    for &component in components.as_slice() {
        for md_name in md_names(component)? {
            // A domain that does not open (a device without a port up, a driver missing) is
            // no device to use: skip it.
            let Ok(md) = Md::open(component, &md_name) else {
                continue;
            };
            let Ok(resources) = TlList::query(&md) else {
                continue;
            };
            for resource in resources.as_slice() {
                let tl = c_text(&resource.tl_name);
                let rdma = RDMA_TRANSPORT_PREFIXES.iter().any(|prefix| {
                    tl.strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with('_'))
                });
                if rdma {
                    return Ok(Some(format!("{tl}/{}", c_text(&resource.dev_name))));
                }
            }
        }
    }
    Ok(None)
}

/// A fixed-size C string field as text (up to its NUL).
fn c_text(field: &[c_char]) -> String {
    let bytes: Vec<u8> = field
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The memory domain names of one component.
fn md_names(component: sys::uct_component_h) -> Result<Vec<[c_char; 16]>, TransportError> {
    let mut attr = sys::uct_component_attr_t {
        field_mask: u64::from(sys::UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT),
        ..Default::default()
    };
    // SAFETY: the component handle comes from the live component list; attr is writable.
    check("uct_component_query", unsafe {
        sys::uct_component_query(component, &mut attr)
    })?;
    let mut names = vec![sys::uct_md_resource_desc_t::default(); attr.md_resource_count as usize];
    if names.is_empty() {
        return Ok(Vec::new());
    }
    attr.field_mask = u64::from(sys::UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES);
    attr.md_resources = names.as_mut_ptr();
    // SAFETY: md_resources points to md_resource_count writable entries, as UCX requires.
    check("uct_component_query", unsafe {
        sys::uct_component_query(component, &mut attr)
    })?;
    Ok(names.into_iter().map(|desc| desc.md_name).collect())
}

/// The list of UCT components; released on drop.
struct ComponentList {
    raw: *mut sys::uct_component_h,
    len: usize,
}

impl ComponentList {
    fn query() -> Result<ComponentList, TransportError> {
        let mut raw = ptr::null_mut();
        let mut len = 0;
        // SAFETY: both outputs are plain writable locals, written on success.
        check("uct_query_components", unsafe {
            sys::uct_query_components(&mut raw, &mut len)
        })?;
        Ok(ComponentList {
            raw,
            len: len as usize,
        })
    }

    fn as_slice(&self) -> &[sys::uct_component_h] {
        if self.raw.is_null() {
            return &[];
        }
        // SAFETY: UCX returned `len` handles at `raw`, valid until the list is released.
        unsafe { std::slice::from_raw_parts(self.raw, self.len) }
    }
}

impl Drop for ComponentList {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the list came from uct_query_components and is released once.
            unsafe { sys::uct_release_component_list(self.raw) }
        }
    }
}

/// An open memory domain; closed on drop.
struct Md(sys::uct_md_h);

impl Md {
    fn open(component: sys::uct_component_h, name: &[c_char; 16]) -> Result<Md, TransportError> {
        let name =
            CStr::from_bytes_until_nul(bytemuck::cast_slice(name.as_slice())).map_err(|_| {
                TransportError::Library {
                    library: "ucx",
                    call: "uct_md_open",
                    why: "memory domain name is not NUL-terminated".into(),
                }
            })?;
        let mut config = ptr::null_mut();
        // SAFETY: a live component; NULL prefix and file read the UCX_ environment.
        check("uct_md_config_read", unsafe {
            sys::uct_md_config_read(component, ptr::null(), ptr::null(), &mut config)
        })?;
        let mut md = ptr::null_mut();
        // SAFETY: component, name and config are valid for the call; UCX copies the config.
        let status = unsafe { sys::uct_md_open(component, name.as_ptr(), config, &mut md) };
        // SAFETY: the config came from uct_md_config_read and is released once.
        unsafe { sys::uct_config_release(config.cast()) };
        check("uct_md_open", status)?;
        Ok(Md(md))
    }
}

impl Drop for Md {
    fn drop(&mut self) {
        // SAFETY: opened by uct_md_open and closed once, after its resource list was released
        // (TlList borrows the Md).
        unsafe { sys::uct_md_close(self.0) }
    }
}

/// The transport resources of one memory domain; released on drop.
struct TlList<'md> {
    raw: *mut sys::uct_tl_resource_desc_t,
    len: usize,
    _md: &'md Md,
}

impl<'md> TlList<'md> {
    fn query(md: &'md Md) -> Result<TlList<'md>, TransportError> {
        let mut raw = ptr::null_mut();
        let mut len = 0;
        // SAFETY: the domain is open; outputs are plain writable locals.
        check("uct_md_query_tl_resources", unsafe {
            sys::uct_md_query_tl_resources(md.0, &mut raw, &mut len)
        })?;
        Ok(TlList {
            raw,
            len: len as usize,
            _md: md,
        })
    }

    fn as_slice(&self) -> &[sys::uct_tl_resource_desc_t] {
        if self.raw.is_null() {
            return &[];
        }
        // SAFETY: UCX returned `len` descriptors at `raw`, valid until released.
        unsafe { std::slice::from_raw_parts(self.raw, self.len) }
    }
}

impl Drop for TlList<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the list came from uct_md_query_tl_resources and is released once.
            unsafe { sys::uct_release_tl_resource_list(self.raw) }
        }
    }
}
