//! The control plane: how ranks and the launcher talk (bootstrap, address resolution, failure
//! notices, heartbeats, reports).

pub mod client;
pub mod msg;

pub use msg::{ControlError, ControlMsg, FailureCause, OpReport};
