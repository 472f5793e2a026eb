//! Why a collective or the set-up failed.

use std::time::Duration;

use ftcoll_algos::era::AgreeError;

use crate::control::ControlError;
use crate::env::EnvError;
use crate::exec::ExecError;
use crate::faults::FaultError;
use crate::transport::TransportError;

/// Why a collective or the set-up failed.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    /// The environment does not describe a rank.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The data plane failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The control plane failed.
    #[error("control plane: {0}")]
    Control(#[from] ControlError),
    /// A scripted fault cannot be applied on this rank.
    #[error("scripted fault: {0}")]
    Faults(#[from] FaultError),
    /// Ranks failed and the algorithm cannot complete without them.
    #[error("ranks {failed:?} failed; the collective cannot complete")]
    PeerFailed {
        /// Ranks known failed.
        failed: Vec<u32>,
    },
    /// A fault tolerance the job is too small for.
    #[error("tolerating {tolerate} failures needs at least {} ranks, the job has {size}; lower the tolerance", tolerate + 2)]
    Tolerance {
        /// f.
        tolerate: u32,
        /// Ranks in the job.
        size: u32,
    },
    /// The result does not fit the caller's buffer.
    #[error("the collective produced {got} values for a buffer of {expected}; pass the same length on every rank")]
    Shape {
        /// The caller's length.
        expected: usize,
        /// The result's length.
        got: usize,
    },
    /// Ranks passed vectors of different types or lengths to the same collective. Every rank
    /// of the collective gets this error.
    #[error("rank {peer} passed {remote_len} {remote_dtype} elements where this rank passed {local_len} {local_dtype}; pass the same type and length on every rank")]
    ShapeMismatch {
        /// The rank whose vector differs (world rank), as this rank learned it.
        peer: u32,
        /// This rank's element type.
        local_dtype: &'static str,
        /// This rank's length.
        local_len: u64,
        /// The other rank's element type.
        remote_dtype: &'static str,
        /// The other rank's length.
        remote_len: u64,
    },
    /// A rank failed while the segments of a fault-tolerant reduction streamed, so that they
    /// count different ranks: no whole vector is the reduction over one set of ranks. Every
    /// rank that would hold the result gets this error; the buffer is left as it was.
    #[error("a rank failed while the vector streamed: {segments} segments count other ranks than the first, so no whole result exists; call again (the failed rank is left out from the start), or use ft_allreduce, which retries over the survivors")]
    MixedContributors {
        /// Segments whose contributor set differs from the first segment's.
        segments: u32,
    },
    /// A vector longer than an algorithm that must see it whole carries on this transport.
    #[error("{algorithm} carries at most {most} elements per call on this transport, got {len}; split the vector, or use `ft_allreduce` (fault-tolerant, any length) or an allreduce that segments it (rdb, direct, ring)")]
    TooLong {
        /// The algorithm's name.
        algorithm: &'static str,
        /// The caller's length.
        len: usize,
        /// The most it carries.
        most: usize,
    },
    /// The collective exceeded its time limit.
    #[error("the collective did not complete within {0:?}")]
    TimedOut(Duration),
    /// The launcher stopped the job.
    #[error("the launcher stopped the job")]
    Shutdown,
    /// The communicator was revoked (by this rank or a peer); only agreements and shrink work
    /// on it now.
    #[error("the communicator was revoked; agree or shrink to recover")]
    Revoked,
    /// An agreement decided, but ranks failed that not every participant had acknowledged
    /// (ULFM's MPIX_ERR_PROC_FAILED): the value is still the same at every survivor.
    #[error("ranks {unacknowledged:?} failed without every rank acknowledging it (agreed value {agreed:#x}); call ack_failed and agree again")]
    UnacknowledgedFailure {
        /// The agreed value (first word).
        agreed: u64,
        /// Failed ranks some participant had not acknowledged.
        unacknowledged: Vec<u32>,
    },
    /// A gossip reduction spent its push budget before its stopping rule held. The buffer
    /// holds the estimate it reached, which may be off by more than the accuracy asked for.
    #[error("the gossip's stopping rule did not hold within its budget of {pushes} pushes, so the estimate may be off by more than eps = {eps:e}; raise the budget (steps) or eps")]
    Unsettled {
        /// Pushes this rank made.
        pushes: u32,
        /// The accuracy asked for.
        eps: f64,
    },
    /// A malformed setting.
    #[error("{0}")]
    Config(String),

    /// The single-copy ring gave up (the kernel refused a read, a remote read failed, or a
    /// notice came corrupted).
    #[error("{reason}; set FTCOLL_SINGLE_COPY=off to move vectors in messages instead")]
    SingleCopy {
        /// What happened.
        reason: super::SingleCopyFailure,
    },
    /// An agreement that cannot start.
    #[error(transparent)]
    Agree(#[from] AgreeError),
}

impl From<ExecError> for CommError {
    fn from(error: ExecError) -> Self {
        match error {
            ExecError::Transport(e) => CommError::Transport(e),
        }
    }
}
