//! The key map: which key press means which user action.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What the user can do; the result of a key press.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Move the selection one row up on the rank map.
    Up,
    /// Move the selection one row down on the rank map.
    Down,
    /// Select the previous rank.
    Left,
    /// Select the next rank.
    Right,
    /// Kill the selected rank.
    KillSelected,
    /// Kill a random rank that is not dead.
    KillRandom,
    /// Kill every rank of the selected rank's node.
    KillNode,
    /// Flip a bit of the selected rank's flow towards the current neighbour (or of its value).
    FlipFlow,
    /// Flip a bit in the next message the selected rank sends.
    FlipMessage,
    /// Target the next higher bit position.
    BitUp,
    /// Target the next lower bit position.
    BitDown,
    /// Target the next neighbour of the selected rank.
    NextNeighbour,
    /// Cycle the selected rank's message drop rate.
    CycleDrop,
    /// Cut the link between the selected rank and the current neighbour.
    CutLink,
    /// Cycle the selected rank's slow-down factor.
    SlowDown,
    /// Pause or resume the job.
    TogglePause,
    /// Start a new operation.
    NewOperation,
    /// Show or hide the key help.
    ToggleHelp,
    /// Leave the console (and end the job).
    Quit,
}

/// The action of a key press, or `None` for keys without one.
///
/// Only presses count: release and repeat events (reported by terminals speaking the kitty
/// keyboard protocol) map to `None`, so holding a kill key never fires it twice. Shift is
/// accepted (it is how `N`, `?` and `+` are typed); other modifiers make a different key,
/// except Ctrl-C, which quits.
pub fn action_for_key(key: KeyEvent) -> Option<Action> {
    if key.kind != KeyEventKind::Press {
        return None;
    }
    let control = key.modifiers.contains(KeyModifiers::CONTROL);
    if control && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('C')) {
        return Some(Action::Quit);
    }
    if control
        || key
            .modifiers
            .intersects(KeyModifiers::ALT | KeyModifiers::SUPER)
    {
        return None;
    }
    let action = match key.code {
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::Left | KeyCode::Char('h') => Action::Left,
        KeyCode::Right | KeyCode::Char('l') => Action::Right,
        KeyCode::Char('x') => Action::KillSelected,
        KeyCode::Char('r') => Action::KillRandom,
        KeyCode::Char('N') => Action::KillNode,
        KeyCode::Char('f') => Action::FlipFlow,
        KeyCode::Char('m') => Action::FlipMessage,
        KeyCode::Char(']') | KeyCode::Char('+') => Action::BitUp,
        KeyCode::Char('[') | KeyCode::Char('-') => Action::BitDown,
        KeyCode::Tab => Action::NextNeighbour,
        KeyCode::Char('d') => Action::CycleDrop,
        KeyCode::Char('c') => Action::CutLink,
        KeyCode::Char('s') => Action::SlowDown,
        KeyCode::Char(' ') | KeyCode::Char('p') => Action::TogglePause,
        KeyCode::Char('n') => Action::NewOperation,
        KeyCode::Char('?') => Action::ToggleHelp,
        KeyCode::Char('q') | KeyCode::Esc => Action::Quit,
        _ => return None,
    };
    Some(action)
}

/// Every key of the map with what it does, in the order the help overlay lists them.
pub const KEY_HELP: &[(&str, &str)] = &[
    ("← ↑ ↓ → / h j k l", "move the selection on the rank map"),
    ("x", "kill the selected rank"),
    ("r", "kill a random live rank"),
    ("N", "kill the selected rank's node"),
    ("f", "flip bit B of the flow to neighbour P (or the value)"),
    ("m", "flip bit B of the next message sent"),
    ("] or +", "bit position B up (wraps)"),
    ("[ or -", "bit position B down (wraps)"),
    ("Tab", "next neighbour P"),
    ("d", "drop rate 0 → 1% → 10% → 50% → 0"),
    ("c", "cut the link to neighbour P"),
    ("s", "slow down ×4 → ×16 → ×1"),
    ("space or p", "pause / resume"),
    ("n", "start a new operation"),
    ("?", "show / hide this help"),
    ("q, Esc, Ctrl-C", "quit"),
];
