//! Real runs: start N rank processes, wire them up, watch them, report.
//!
//! The launcher owns the job's fate: it starts every rank (the built-in job, or a user program
//! like `mpirun` does), runs the control plane, reaps children through pidfds, and is the only
//! one who declares a rank failed — after the rank is dead. A hung rank (no heartbeat) is killed
//! first and reported second: the algorithms assume fail-stop, so no live rank is ever reported
//! failed. Every rank dies with the launcher (parent-death signal, and control EOF).

mod hooks;
mod job;
pub mod rank_main;
mod report;
mod server;
mod spawn;
mod spec;
mod watch;

pub use job::{run, run_with_console};
pub use report::{BuiltinJob, Expected, FailureRecord, LiveJson, LiveOutcome};
pub use spec::{LaunchOptions, LiveSpec};
pub use watch::{Flow, JobHandle, Watcher};

/// The seed of operation `op`'s inputs: operation 0 uses the job's seed (so a one-operation
/// job draws what the headless job draws), later ones fresh inputs.
pub fn op_seed(seed: u64, op: u64) -> u64 {
    if op == 0 {
        seed
    } else {
        seed ^ op.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_zero_keeps_the_job_seed() {
        assert_eq!(op_seed(7, 0), 7);
        assert_ne!(op_seed(7, 1), 7);
        assert_ne!(op_seed(7, 1), op_seed(7, 2));
    }
}
