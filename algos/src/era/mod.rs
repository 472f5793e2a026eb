//! The Early Returning Agreement (ERA) of 002 and the values it agrees on.
//!
//! [`Era`] is one communicator's agreement service at one rank: it holds the failure view `S_p`
//! shared by all agreements, the per-agreement variables of 002 Part 1 (sparse: only agreements
//! in flight or decided and not yet garbage-collected have state, and each holds sets bounded by
//! the rank's degree and the requests it got), and it serves messages of agreements it already
//! returned from. [`EraRun`] drives it as a [`crate::Protocol`] for the simulator: a sequence of
//! blocking agreements.
//!
//! The slips of 002's printed pseudocode are fixed as the paper list says: Part 4 compares against
//! the old view `S'_p`; a rank that has become root accepts a DOWN from anyone (a new root learns a
//! past decision that way); an UP received while broadcasting without a result is remembered in
//! `RequestedResult`; RESULTREQUEST marks the ids below its sender dead through the Part 4 rule; and
//! the tree uses heap-ordered virtual ids ([`tree`]).

mod engine;
mod run;
pub mod tree;
mod value;

#[cfg(test)]
mod tests;

pub use engine::{AgreementState, Era, EraConfig};
pub use run::{EraRun, EraRunConfig};
pub use tree::{EraTopology, EraTree, Shape};
pub use value::{check_op, AgreeError, AgreedValue};

/// Message kinds of ERA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EraKind {
    /// A contribution going up the tree.
    Up = 1,
    /// A decision going down (or back to a requester).
    Down = 2,
    /// A new root asks whether a decision was already taken.
    ResultRequest = 3,
    /// The communicator is revoked (a reliable broadcast, not tied to an agreement).
    Revoke = 4,
}

impl EraKind {
    fn from_u8(code: u8) -> Option<EraKind> {
        [
            EraKind::Up,
            EraKind::Down,
            EraKind::ResultRequest,
            EraKind::Revoke,
        ]
        .into_iter()
        .find(|k| *k as u8 == code)
    }
}
