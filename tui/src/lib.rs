//! ftcoll's terminal console.
//!
//! The console (components and actions over a pure render of a telemetry model) is built by the
//! live-console work item; the crate is part of the workspace from the start so that the
//! launcher's dependency graph does not change shape when it lands.

#![forbid(unsafe_code)]
