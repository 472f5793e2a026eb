//! Every history stays bounded, and what it keeps is right.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use ftcoll_tui::{
    App, LogEntry, LogKind, RankState, Update, HISTORY_CAPACITY, LOG_CAPACITY, RATE_CAPACITY,
};

fn tiny_update(step: u64) -> Update {
    Update {
        elapsed_s: step as f64 * 0.1,
        op: 0,
        round: step as u32,
        states: vec![RankState::Running; 4],
        errors: vec![1.0 / (step as f32 + 1.0); 4],
        messages_total: step * 100,
        ..Update::default()
    }
}

#[test]
fn ten_thousand_updates_stay_bounded() {
    let mut app = App::new(common::job(4));
    for step in 0..10_000 {
        app.update(tiny_update(step));
    }
    assert!(app.history().len() <= HISTORY_CAPACITY);
    assert_eq!(app.history().len(), 2048);
    assert!(app.message_rates().len() <= RATE_CAPACITY);
    assert_eq!(app.message_rates().len(), 256);
    // The newest are kept: the last point is the last update.
    let last = app.history().back().unwrap();
    assert!((last.at_s - 999.9).abs() < 1e-9);
    // 100 messages every 0.1 s.
    for rate in app.message_rates() {
        assert!((rate - 1000.0).abs() < 1e-6, "{rate}");
    }
    assert!(!ftcoll_tui::capture(&app, 80, 24).is_empty());
}

#[test]
fn log_keeps_the_newest_500() {
    let mut app = App::new(common::job(4));
    for index in 0..1_000 {
        app.log(LogEntry {
            at_s: f64::from(index),
            kind: LogKind::Info,
            text: format!("line {index}"),
        });
    }
    assert_eq!(app.log_entries().len(), LOG_CAPACITY);
    assert_eq!(app.log_entries().front().unwrap().text, "line 500");
    assert_eq!(app.log_entries().back().unwrap().text, "line 999");
    // Lines the app writes itself respect the same bound.
    for _ in 0..600 {
        app.apply(ftcoll_tui::Action::KillSelected);
    }
    assert_eq!(app.log_entries().len(), LOG_CAPACITY);
}

#[test]
fn history_points_summarise_non_dead_finite_errors() {
    let mut app = App::new(common::job(4));
    app.update(Update {
        elapsed_s: 2.0,
        states: vec![
            RankState::Running,
            RankState::Dead,
            RankState::Running,
            RankState::Done,
        ],
        errors: vec![1e-2, 5.0, f32::NAN, 1e-6],
        messages_total: 500,
        ..Update::default()
    });
    let point = *app.history().back().unwrap();
    assert_eq!(point.at_s, 2.0);
    assert_eq!(point.max, 1e-2);
    assert_eq!(point.min, 1e-6);
    assert!((point.median - (1e-2 + 1e-6) / 2.0).abs() < 1e-9);
    // The first frame has no previous one to measure a rate from.
    assert!(app.message_rates().is_empty());
    app.update(Update {
        elapsed_s: 2.5,
        messages_total: 700,
        ..Update::default()
    });
    assert_eq!(app.message_rates().back().copied(), Some(400.0));
}

#[test]
fn rate_ignores_repeated_or_backward_time() {
    let mut app = App::new(common::job(1));
    let at = |elapsed_s: f64, messages_total: u64| Update {
        elapsed_s,
        messages_total,
        ..Update::default()
    };
    app.update(at(0.0, 0)); // the first frame only sets the base
    app.update(at(1.0, 100));
    app.update(at(1.0, 150)); // same instant: no rate yet
    app.update(at(2.0, 300)); // 200 messages over 1 s since the last measured frame
    assert_eq!(
        app.message_rates().iter().copied().collect::<Vec<_>>(),
        vec![100.0, 200.0]
    );
    app.update(at(0.5, 10)); // driver restarted its clock: re-base, no bogus sample
    app.update(at(1.5, 20)); // 10 messages over 1 s
    assert_eq!(app.message_rates().back().copied(), Some(10.0));
    app.update(at(2.5, 5)); // a counter that went backwards is clamped, never negative
    assert_eq!(app.message_rates().back().copied(), Some(0.0));
    app.update(at(f64::NAN, 30));
    app.update(at(2.5, 0));
    assert!(app
        .message_rates()
        .iter()
        .all(|rate| rate.is_finite() && *rate >= 0.0));
}
