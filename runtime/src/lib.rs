//! ftcoll execution: the deterministic simulator, the control plane, the executor and the library
//! API, over the transports of `ftcoll-transport`.
//!
//! - [`sim`]: all ranks in one process, virtual time, LogP costs, seeded faults and an oracle.
//! - [`check`]: semantics checkers that run a protocol under random fault schedules.
//! - [`faults`]: the fault vocabulary shared by the simulator, `--fault` and the console;
//!   [`rank_faults`]: the faults a real rank applies to itself.
//! - [`job`]: the algorithm table and the entry point that runs a job in the simulator.
//! - [`transport`]: the `ftcoll-transport` crate, re-exported under its old path: shared memory,
//!   TCP, and UCX and libfabric behind cargo features (this crate's `ucx` and `ofi` forward to it).
//! - [`control`]: the control plane between ranks and the launcher.
//! - [`exec`]: the executor that drives a protocol over a transport with a real clock.
//! - [`comm`]: the library API, `Communicator`; [`ftco_call`] and [`gossip_call`] add FTCO and
//!   gossip collectives to it, and [`progress`] answers agreements while the application
//!   computes.
//! - [`env`](mod@env): what a rank reads from its environment.

// The transports, and with them every FFI module and the shared-memory segment, live in
// `ftcoll-transport`; nothing here needs `unsafe`.
#![forbid(unsafe_code)]

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
pub use ftcoll_transport as transport;
