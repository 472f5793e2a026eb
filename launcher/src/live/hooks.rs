//! What the built-in job does besides its collectives, over the runtime's job-level channel
//! to the launcher ([`ftcoll_runtime::comm::JobChannel`]): it reports every operation, sends
//! benchmark timings, waits for the console's go, tells the console its results, and looks at
//! its own scripted faults.

use ftcoll_runtime::comm::{CommError, Communicator};
use ftcoll_runtime::control::OpReport;

/// The built-in job's conversation with its launcher, on the rank's communicator.
pub trait BuiltinJobHooks {
    /// Sends the outcome of one operation to the launcher.
    fn report(&self, report: OpReport) -> Result<(), CommError>;

    /// Console-paced jobs: waits until the launcher allows operation `op` to start, serving
    /// finished operations and sending status samples meanwhile. False when the job shuts
    /// down instead.
    fn wait_for_go(&self, op: u64) -> Result<bool, CommError>;

    /// Tells the console (if one watches) the result of operation `op` at this rank: what
    /// the rank shows until the next operation starts.
    fn note_outcome(&self, op: u64, value: f64);

    /// Sends benchmark timings to the launcher (`ftcoll-launch bench`).
    fn report_timings(&self, nanos: Vec<u64>) -> Result<(), CommError>;

    /// Whether a scripted fault (`--fault kill:rank=R,op=K`) kills this rank when its next
    /// operation (collective or agreement) starts.
    fn dies_at_next_op(&self) -> bool;

    /// Whether a scripted fault kills this rank during the next operation (some time after
    /// its start).
    fn dies_during_next_op(&self) -> bool;
}

impl BuiltinJobHooks for Communicator {
    fn report(&self, report: OpReport) -> Result<(), CommError> {
        self.job_channel().report(report)
    }

    fn wait_for_go(&self, op: u64) -> Result<bool, CommError> {
        self.job_channel().wait_for_go(op)
    }

    fn note_outcome(&self, op: u64, value: f64) {
        self.job_channel().note_outcome(op, value);
    }

    fn report_timings(&self, nanos: Vec<u64>) -> Result<(), CommError> {
        self.job_channel().send_timings(nanos)
    }

    fn dies_at_next_op(&self) -> bool {
        let channel = self.job_channel();
        let next = channel.next_op_index();
        channel.scripted_faults(|faults| faults.dies_at_op(next))
    }

    fn dies_during_next_op(&self) -> bool {
        let channel = self.job_channel();
        let next = channel.next_op_index();
        channel.scripted_faults(|faults| faults.dies_during_op(next).is_some())
    }
}
