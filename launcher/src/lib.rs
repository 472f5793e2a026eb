//! The edge of ftcoll: the parsers that turn what users type into the typed values the
//! libraries take. The `ftcoll-launch` binary (src/main.rs) is built on them; the cross-crate
//! tests use them to write fault plans as users do.

#![forbid(unsafe_code)]

pub mod text;
