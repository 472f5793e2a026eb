//! The real terminal: raw mode and the alternate screen for as long as the console runs, and
//! keys read from it.

use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;
use std::time::Duration;

use crossterm::cursor::{Hide, Show};
use crossterm::event::{self, Event, KeyEventKind};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::app::App;
use crate::keys::{action_for_key, Action};

/// Most events read in one [`TerminalSession::poll_actions`] call, so that a flood of input (a
/// paste) cannot starve drawing.
pub const MAX_EVENTS_PER_POLL: usize = 256;

/// Whether a session holds the terminal; the panic hook restores it only then.
static SESSION_ACTIVE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// The terminal, in raw mode on the alternate screen with the cursor hidden, for as long as the
/// value lives. Dropping it restores the terminal; so does a panic, through a hook installed on
/// first use, so a crash never leaves the user's shell raw.
pub struct TerminalSession {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TerminalSession {
    /// Takes over the terminal.
    pub fn open() -> io::Result<TerminalSession> {
        install_panic_hook();
        enable_raw_mode()?;
        SESSION_ACTIVE.store(true, Ordering::SeqCst);
        let setup = execute!(io::stdout(), EnterAlternateScreen, Hide)
            .and_then(|()| Terminal::new(CrosstermBackend::new(io::stdout())));
        match setup {
            Ok(terminal) => Ok(TerminalSession { terminal }),
            Err(error) => {
                restore_terminal();
                Err(error)
            }
        }
    }

    /// Draws the console.
    pub fn draw(&mut self, app: &App) -> io::Result<()> {
        self.terminal.draw(|frame| crate::ui::render(frame, app))?;
        Ok(())
    }

    /// The terminal's size `(width, height)`; hand it to [`App::set_viewport`] so that up and
    /// down move by one row of the map as drawn.
    pub fn size(&self) -> io::Result<(u16, u16)> {
        let size = self.terminal.size()?;
        Ok((size.width, size.height))
    }

    /// Waits up to `timeout` for input and returns the actions of every key press that arrived
    /// (the first wait may block, the rest is drained without waiting). Resizes just return: the
    /// next draw adapts. Key releases and repeats are ignored.
    pub fn poll_actions(&mut self, timeout: Duration) -> io::Result<Vec<Action>> {
        let mut actions = Vec::new();
        let mut wait = timeout;
        for _ in 0..MAX_EVENTS_PER_POLL {
            if !event::poll(wait)? {
                break;
            }
            wait = Duration::ZERO;
            match event::read()? {
                Event::Key(key) if key.kind == KeyEventKind::Press => {
                    actions.extend(action_for_key(key));
                }
                Event::Resize(..) => break,
                _ => {}
            }
        }
        Ok(actions)
    }
}

impl Drop for TerminalSession {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Leaves raw mode and the alternate screen and shows the cursor, once per session; errors are
/// ignored because there is nothing better to do with them on the way out.
fn restore_terminal() {
    if SESSION_ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let _ = execute!(io::stdout(), LeaveAlternateScreen, Show);
    }
}

fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Restore first, so that the panic message lands on the normal screen.
            restore_terminal();
            previous(info);
        }));
    });
}
