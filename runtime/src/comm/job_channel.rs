//! The rank's side of the launcher's job-level protocol: what a job that reports to the
//! launcher itself (its built-in job, its benchmarks, a tool speaking the same protocol)
//! needs besides the collectives.
//!
//! A user program needs none of it: the launcher follows a rank's life, failures and
//! end through the control plane whatever the rank runs.

use std::time::Duration;

use super::{CommError, Communicator};
use crate::control::OpReport;
use crate::rank_faults::RankFaults;

/// How often a rank waiting for the console's go serves its peers and samples its status.
const GO_POLL: Duration = Duration::from_millis(10);

/// A handle on the job-level messages between a rank and its launcher: operation reports,
/// benchmark timings, the console's pacing and status, and the faults the launcher scripted
/// for this rank. Borrowed from a [`Communicator`] by [`Communicator::job_channel`].
pub struct JobChannel<'a> {
    comm: &'a Communicator,
}

impl Communicator {
    /// The job-level channel to the launcher, for jobs that report to it themselves (see
    /// [`JobChannel`]); collectives and agreements do not need it.
    pub fn job_channel(&self) -> JobChannel<'_> {
        JobChannel { comm: self }
    }
}

impl JobChannel<'_> {
    /// Sends the outcome of one operation to the launcher, which checks and prints it.
    pub fn report(&self, report: OpReport) -> Result<(), CommError> {
        Ok(self.comm.control.report(report)?)
    }

    /// Sends per-operation times in nanoseconds to the launcher (in as many messages as the
    /// control plane's frame limit needs); it appends them in order.
    pub fn send_timings(&self, nanos: Vec<u64>) -> Result<(), CommError> {
        Ok(self.comm.control.timings(nanos)?)
    }

    /// Waits until the launcher allows operation `op` to start (a console-paced job), serving
    /// finished operations and sending status samples meanwhile. False when the job shuts
    /// down instead.
    pub fn wait_for_go(&self, op: u64) -> Result<bool, CommError> {
        let control = &self.comm.control;
        // Each pass blocks at most GO_POLL; the job's shutdown or the launcher's death (which
        // exits the rank) ends the wait.
        loop {
            if control.wait_go(op, GO_POLL) {
                return Ok(true);
            }
            if control.shutdown_requested() {
                return Ok(false);
            }
            let mut endpoint = self.comm.endpoint();
            endpoint.serve_between_operations()?;
            endpoint.idle_telemetry();
        }
    }

    /// Records the result of operation `op` at this rank for the console (if one watches):
    /// what its status samples show until the next operation starts.
    pub fn note_outcome(&self, op: u64, value: f64) {
        self.comm.endpoint().note_outcome(op, value);
    }

    /// The index of the next operation this rank starts: operations (collectives and
    /// agreements) count from 0, as scripted faults (`op=K`) count them.
    pub fn next_op_index(&self) -> u64 {
        self.comm.ops
    }

    /// Reads the faults the launcher scripted for this rank (with those injected since).
    pub fn scripted_faults<R>(&self, read: impl FnOnce(&RankFaults) -> R) -> R {
        read(self.comm.endpoint().faults())
    }
}
