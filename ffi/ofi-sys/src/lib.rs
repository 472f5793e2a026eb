//! Raw libfabric bindings for ftcoll's `ofi` transport.
//!
//! Everything lives behind the `link` feature. Without it this crate is an empty library, so a
//! default workspace build needs neither libfabric nor libclang. With it, `build.rs` finds
//! libfabric through pkg-config, generates these bindings from the system headers with bindgen
//! (calls, `fi_*` types and `FI_*` constants), and compiles a C shim: libfabric implements most
//! of its API (`fi_domain`, `fi_endpoint`, `fi_tsend`, `fi_cq_read`, ...) as static inline
//! functions that cannot be linked, so the shim exports each as `ftcoll_fi_*` with the same
//! signature. Flag and capability macros are `u64`; errno-style codes (`FI_EAGAIN`, ...) are
//! positive `i32`, returned negated by the calls.

#[cfg(feature = "link")]
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    missing_docs,
    unsafe_code,
    unsafe_op_in_unsafe_fn,
    improper_ctypes,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used
)]
mod bindings {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

#[cfg(feature = "link")]
pub use bindings::*;

/// `FI_VERSION(major, minor)` from `fabric.h` (a function-like macro bindgen cannot translate).
#[cfg(feature = "link")]
pub const fn fi_version_of(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}
