//! ftcoll execution: the deterministic simulator now; real transports, the executor and the
//! library API arrive with the runtime work item.
//!
//! - [`sim`]: all ranks in one process, virtual time, LogP costs, seeded faults and an oracle.
//! - [`faults`]: the fault vocabulary shared by the simulator, `--fault` and the console.

pub mod faults;
pub mod sim;
