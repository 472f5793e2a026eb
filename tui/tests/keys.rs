//! The key map, without a terminal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyEventState, KeyModifiers};
use ftcoll_tui::{action_for_key, Action};

fn press(code: KeyCode) -> Option<Action> {
    action_for_key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn chord(code: KeyCode, modifiers: KeyModifiers) -> Option<Action> {
    action_for_key(KeyEvent::new(code, modifiers))
}

#[test]
fn every_key_of_the_table() {
    let table = [
        (KeyCode::Up, Action::Up),
        (KeyCode::Down, Action::Down),
        (KeyCode::Left, Action::Left),
        (KeyCode::Right, Action::Right),
        (KeyCode::Char('k'), Action::Up),
        (KeyCode::Char('j'), Action::Down),
        (KeyCode::Char('h'), Action::Left),
        (KeyCode::Char('l'), Action::Right),
        (KeyCode::Char('x'), Action::KillSelected),
        (KeyCode::Char('r'), Action::KillRandom),
        (KeyCode::Char('f'), Action::FlipFlow),
        (KeyCode::Char('m'), Action::FlipMessage),
        (KeyCode::Char(']'), Action::BitUp),
        (KeyCode::Char('+'), Action::BitUp),
        (KeyCode::Char('['), Action::BitDown),
        (KeyCode::Char('-'), Action::BitDown),
        (KeyCode::Tab, Action::NextNeighbour),
        (KeyCode::Char('d'), Action::CycleDrop),
        (KeyCode::Char('c'), Action::CutLink),
        (KeyCode::Char('s'), Action::SlowDown),
        (KeyCode::Char(' '), Action::TogglePause),
        (KeyCode::Char('p'), Action::TogglePause),
        (KeyCode::Char('n'), Action::NewOperation),
        (KeyCode::Char('?'), Action::ToggleHelp),
        (KeyCode::Char('q'), Action::Quit),
        (KeyCode::Esc, Action::Quit),
    ];
    for (code, action) in table {
        assert_eq!(press(code), Some(action), "{code:?}");
    }
}

#[test]
fn shifted_keys() {
    // Terminals report shifted letters as the upper-case character, with or without SHIFT.
    assert_eq!(press(KeyCode::Char('N')), Some(Action::KillNode));
    assert_eq!(
        chord(KeyCode::Char('N'), KeyModifiers::SHIFT),
        Some(Action::KillNode)
    );
    assert_eq!(
        chord(KeyCode::Char('?'), KeyModifiers::SHIFT),
        Some(Action::ToggleHelp)
    );
    assert_eq!(
        chord(KeyCode::Char('+'), KeyModifiers::SHIFT),
        Some(Action::BitUp)
    );
}

#[test]
fn control_c_quits_but_plain_c_cuts() {
    assert_eq!(
        chord(KeyCode::Char('c'), KeyModifiers::CONTROL),
        Some(Action::Quit)
    );
    assert_eq!(press(KeyCode::Char('c')), Some(Action::CutLink));
}

#[test]
fn unmapped_keys() {
    for code in [
        KeyCode::Char('a'),
        KeyCode::Char('z'),
        KeyCode::Char('X'),
        KeyCode::Char('Q'),
        KeyCode::Char('1'),
        KeyCode::Enter,
        KeyCode::Backspace,
        KeyCode::BackTab,
        KeyCode::F(1),
        KeyCode::Home,
    ] {
        assert_eq!(press(code), None, "{code:?}");
    }
    // Other modifiers make other keys.
    assert_eq!(chord(KeyCode::Char('x'), KeyModifiers::CONTROL), None);
    assert_eq!(chord(KeyCode::Char('x'), KeyModifiers::ALT), None);
    assert_eq!(chord(KeyCode::Char('q'), KeyModifiers::ALT), None);
}

#[test]
fn only_presses_count() {
    for kind in [KeyEventKind::Release, KeyEventKind::Repeat] {
        let key = KeyEvent {
            code: KeyCode::Char('x'),
            modifiers: KeyModifiers::NONE,
            kind,
            state: KeyEventState::NONE,
        };
        assert_eq!(action_for_key(key), None, "{kind:?}");
    }
}

#[test]
fn help_lists_every_key() {
    let keys: Vec<&str> = ftcoll_tui::KEY_HELP.iter().map(|(key, _)| *key).collect();
    for expected in ["x", "r", "N", "f", "m", "Tab", "d", "c", "s", "n", "?"] {
        assert!(keys.contains(&expected), "{expected}");
    }
}
