//! Corrected-tree collectives (paper 001 and the corrected-tree broadcast it relies on):
//! [`CorrectedReduce`], [`CorrectedBcast`] and [`CorrectedAllreduce`].
//!
//! The model is the paper's: fail-stop ranks on a reliable network. A rank learns of a failure
//! only through [`crate::Input::PeerFailed`] (the runtime's detectors fence, so a notice is never
//! wrong), and waits for a peer's message until either the message or the notice arrives. A
//! message that arrives from a peer this rank has already given up on is refused, so a value is
//! either counted or not, never half.
//!
//! Message kinds share one numbering, so that allreduce can carry its reduce and broadcast
//! phases under one protocol id; the header's `step` is the allreduce attempt (0 for the
//! stand-alone operations).

mod allreduce;
mod bcast;
pub mod layout;
mod reduce;

pub use allreduce::{AllreduceConfig, CorrectedAllreduce};
pub use bcast::{BcastConfig, CorrectedBcast, Correction};
pub use layout::CorrectedLayout;
pub use reduce::{CorrectedReduce, ReduceConfig};

use crate::wire::FrameError;

/// Message kinds of the corrected-tree family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CorrectedKind {
    /// Reduce: a rank's input, sent to the other members of its up-correction group.
    UpCorrection = 1,
    /// Reduce: a subtree's partial result and failure information, sent to the parent.
    ReduceTree = 2,
    /// Broadcast: the value, sent down the tree.
    BcastTree = 3,
    /// Broadcast: the value, sent along the correction ring.
    BcastCorrection = 4,
}

impl CorrectedKind {
    /// Decodes the header's kind byte.
    pub fn from_u8(kind: u8) -> Option<CorrectedKind> {
        match kind {
            1 => Some(CorrectedKind::UpCorrection),
            2 => Some(CorrectedKind::ReduceTree),
            3 => Some(CorrectedKind::BcastTree),
            4 => Some(CorrectedKind::BcastCorrection),
            _ => None,
        }
    }
}

/// How a reduce reports failures up the tree (001 Sec. 4.4). The root's choice of subtree is the
/// same under all three; they differ in what the root learns and in message size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailureInfo {
    /// The list of ranks a subtree could not receive from, in the frame's rank trailer; the root
    /// learns every failure seen on the chosen path.
    List,
    /// The length of that list (the header's `aux`) and a subtree-failure bit.
    #[default]
    CountAndBit,
    /// Only the subtree-failure bit.
    Bit,
}

impl FailureInfo {
    /// The `--failure-info` name.
    pub fn name(self) -> &'static str {
        match self {
            FailureInfo::List => "list",
            FailureInfo::CountAndBit => "count",
            FailureInfo::Bit => "bit",
        }
    }

    /// Parses a `--failure-info` name.
    pub fn parse(name: &str) -> Option<FailureInfo> {
        [
            FailureInfo::List,
            FailureInfo::CountAndBit,
            FailureInfo::Bit,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// Header flag: a failure happened in the sender's subtree during the tree phase.
pub const FLAG_SUBTREE_FAILED: u16 = 1;
/// Header flag of a correction message: the sender is correcting towards lower ring positions.
pub const FLAG_LEFTWARD: u16 = 2;
/// Header flag of a broadcast: the root could not compute the result (more than f failures);
/// receivers abort instead of delivering.
pub const FLAG_ROOT_GAVE_UP: u16 = 4;
/// Header flag of a broadcast value: it leaves out the input of some rank that failed (the
/// reduce behind it could not receive from it). An allreduce run in segments must not mix such
/// a segment with one that counts that rank.
pub const FLAG_PARTIAL: u16 = 8;

fn unexpected(from: u32, what: &'static str) -> FrameError {
    FrameError::Unexpected { from, what }
}

/// The checks every corrected-family frame passes: protocol, operation, a known kind, the
/// transport's sender in the header, and the expected attempt.
fn check_header(
    frame: &crate::wire::Frame<'_>,
    from: crate::rank::Rank,
    algo: crate::registry::Algorithm,
    op_id: crate::wire::OpId,
    attempt: u32,
) -> Result<CorrectedKind, FrameError> {
    frame.check(algo, op_id)?;
    let header = frame.header;
    let kind = CorrectedKind::from_u8(header.kind).ok_or(FrameError::UnknownKind {
        algo,
        kind: header.kind,
    })?;
    if header.source != from.0 {
        return Err(unexpected(
            from.0,
            "header source differs from the sending rank",
        ));
    }
    if header.step != attempt {
        return Err(unexpected(from.0, "frame of another attempt"));
    }
    Ok(kind)
}

pub use crate::rank::RankSet;
