//! ftcoll execution: the deterministic simulator now; real transports, the executor and the
//! library API arrive with the runtime work item.
//!
//! - [`sim`]: all ranks in one process, virtual time, LogP costs, seeded faults and an oracle.
//! - [`faults`]: the fault vocabulary shared by the simulator, `--fault` and the console.
//! - [`job`]: the algorithm table and the entry point that runs a job in the simulator.

pub mod check;
pub mod comm;
pub mod control;
pub mod env;
pub mod exec;
pub mod faults;
pub mod ftco_call;
pub mod gossip_call;
pub mod job;
pub mod progress;
pub mod rank_faults;
pub mod sim;
pub mod transport;
