//! Communication topologies: the graphs gossip algorithms talk over ([`Topology`]) and the
//! rooted trees that broadcast and reduce along ([`Tree`]).
//!
//! Everything here is computed from a rank's number on demand: nothing allocates per-rank
//! tables, so a topology of 2^30 ranks costs a few bytes. Queries are O(1) or O(log N), except
//! listing the neighbours of a fully connected rank, whose degree is itself N - 1.

mod error;
mod graph;
mod kary;
mod knomial;
mod torus;
mod tree;

pub use error::TopologyError;
pub use graph::{Topology, TopologyKind};
pub use tree::{Tree, TreeShape};
