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

pub use job::{run, run_with_console, LiveSpec};
pub use report::{BuiltinJob, Expected};
pub use spawn::remove_provider_shm_files;
