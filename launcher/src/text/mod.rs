//! Text at the edge: what users type (flags, fault specs, hostfiles) becomes typed values here,
//! once. Nothing below the launcher parses command-line syntax.

pub mod fault;
pub mod ftco;
pub mod hostfile;
pub mod options;
pub mod replay;

pub use fault::{parse_fault, parse_time, FaultSpecError};
pub use ftco::{parse_service, parse_shape};
