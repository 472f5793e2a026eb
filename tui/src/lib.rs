//! ftcoll's terminal console: watch a collective converge, see failures, inject faults.
//!
//! The driver (launcher or simulator) feeds an [`App`] with [`Update`]s and [`LogEntry`]s,
//! turns key presses into [`Action`]s, and carries out the [`Command`]s that
//! [`App::apply`] returns. Drawing is a pure function of the App ([`render`]), so the same
//! console renders to a real terminal ([`TerminalSession`]) or to text ([`capture`]).
//!
//! A driver's loop:
//!
//! ```no_run
//! # fn next_update() -> Option<ftcoll_tui::Update> { None }
//! # fn execute(_command: ftcoll_tui::Command) {}
//! use ftcoll_tui::{App, JobInfo, TerminalSession};
//! use std::time::Duration;
//!
//! # fn main() -> std::io::Result<()> {
//! let info = JobInfo {
//!     algo: "gossip".into(), n: 4096, transport: "shm".into(), simulated: false,
//!     value_bits: 64, ranks_per_node: 64, seed: 1,
//! };
//! let mut app = App::new(info);
//! let mut session = TerminalSession::open()?;
//! while !app.quit_requested() {
//!     if let Some(update) = next_update() {
//!         app.update(update);
//!     }
//!     // Up and down move by a row of the map as drawn at this size.
//!     let (width, height) = session.size()?;
//!     app.set_viewport(width, height);
//!     session.draw(&app)?;
//!     for action in session.poll_actions(Duration::from_millis(100))? {
//!         for command in app.apply(action) {
//!             execute(command);
//!         }
//!     }
//! }
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod app;
mod keys;
mod model;
mod rng;
mod terminal;
pub mod ui;

pub use app::{
    App, Command, ErrorPoint, DEFAULT_VIEWPORT, FAULT_SETTINGS_CAPACITY, HISTORY_CAPACITY,
    LOG_CAPACITY, RATE_CAPACITY,
};
pub use keys::{action_for_key, Action, KEY_HELP};
pub use model::{JobInfo, LogEntry, LogKind, RankDetail, RankState, Update};
pub use terminal::{TerminalSession, MAX_EVENTS_PER_POLL};
pub use ui::{capture, render};
