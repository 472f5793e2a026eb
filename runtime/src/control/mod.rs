//! The control plane: how ranks and the launcher talk (bootstrap, address resolution, failure
//! notices, heartbeats, reports, console telemetry and injected faults).

pub mod client;
mod codec;
pub mod msg;
pub mod telemetry;

pub use msg::{ControlError, ControlMsg, FailureCause, OpReport, REPORT_SAMPLE_ELEMS};
pub use telemetry::RankSample;
