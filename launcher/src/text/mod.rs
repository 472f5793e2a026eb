//! Text at the edge: what users type (flags, fault specs, hostfiles) becomes typed values here,
//! once. Nothing below the launcher parses command-line syntax.

pub mod fault;

pub use fault::{parse_fault, parse_time, FaultSpecError};
