//! The live console (`tui/`) wired to jobs: real ones (telemetry over the control plane, faults
//! injected through the launcher) and simulated ones (`--sim`, stepped in virtual time).
//!
//! The console opens when the launcher's output is a terminal and `--no-tui` is not given. It
//! runs repeated operations with fresh inputs (paced by the launcher: each one starts when every
//! live rank finished the previous one and a short hold has passed, or at once on `n`), so there
//! is always something converging to watch.

pub mod live;
mod reference;
pub mod sim;
pub mod window;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use reference::Reference;

/// The algorithm the console runs when none is given: Push-Flow with cooperative correction
/// converges visibly and survives crashes, failed links and bit flips (000 Sec. 4).
pub const DEFAULT_CONSOLE_ALGO: ftcoll_algos::Algorithm = ftcoll_algos::Algorithm::Pfcc;
/// Time between gossip pushes on real ranks under the console, unless `--gossip-period` says
/// otherwise: slow enough that convergence takes a second or two to watch.
pub const CONSOLE_GOSSIP_PERIOD: &str = "20ms";
/// How long a finished operation stays on screen before the next one starts.
pub const HOLD: Duration = Duration::from_secs(2);
/// Most frames drawn per second.
pub const FRAME_INTERVAL: Duration = Duration::from_millis(100);

/// Set while a console owns the terminal: log lines would garble it, so they are dropped.
static CONSOLE_OWNS_TERMINAL: AtomicBool = AtomicBool::new(false);

/// Whether log output must be suppressed (see `main`'s log writer).
pub fn owns_terminal() -> bool {
    CONSOLE_OWNS_TERMINAL.load(Ordering::Relaxed)
}

/// Marks the terminal as the console's (or not).
pub fn set_owns_terminal(owned: bool) {
    CONSOLE_OWNS_TERMINAL.store(owned, Ordering::Relaxed);
}
