//! For transport tests: an in-process address directory that stands in for the launcher's
//! address lookups, so several transports in one test process can find each other.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ftcoll_algos::Rank;

use super::open::AddressResolver;
use super::TransportError;

/// Local addresses by rank, filled in by the test as transports come up.
pub type Directory = Arc<Mutex<BTreeMap<Rank, String>>>;

/// A resolver that looks peers up in `directory`.
pub fn resolver(directory: &Directory) -> AddressResolver {
    let lookup = Arc::clone(directory);
    Box::new(move |peer: Rank| {
        lookup
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&peer)
            .cloned()
            .ok_or(TransportError::Resolve {
                rank: peer.0,
                why: "not registered".into(),
            })
    })
}
