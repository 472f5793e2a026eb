//! Rendering snapshots of each panel and of the whole console, from a deterministic App.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{sample_app, DEAD_RANK, SELECTED_RANK, SUSPECTED_RANK};
use ftcoll_tui::ui::{
    buffer_text, capture_with, render_chart, render_detail, render_footer, render_header,
    render_help, render_log, render_map, render_rate,
};
use ftcoll_tui::{capture, Action, App};
use insta::assert_snapshot;
use ratatui::layout::Rect;
use ratatui::Frame;

fn panel(width: u16, height: u16, app: &App, draw: fn(&mut Frame, Rect, &App)) -> String {
    capture_with(width, height, |frame| draw(frame, frame.area(), app))
}

#[test]
fn header_panel() {
    let mut app = sample_app();
    assert_snapshot!("header_wide", panel(120, 1, &app, render_header));
    app.apply(Action::TogglePause);
    assert_snapshot!("header_two_lines_paused", panel(70, 2, &app, render_header));
}

#[test]
fn header_of_a_simulated_job_shows_its_clock() {
    let mut app = App::new(ftcoll_tui::JobInfo {
        transport: "sim".to_string(),
        simulated: true,
        ..common::job(16)
    });
    let mut update = common::frame(16, 12, None);
    update.time_label = "sim t=1234 steps".to_string();
    app.update(update);
    let text = panel(120, 1, &app, render_header);
    assert!(
        text.contains("sim (simulated)") && text.contains("sim t=1234 steps"),
        "{text}"
    );
    assert_snapshot!("header_simulated", text);
}

#[test]
fn chart_panel() {
    assert_snapshot!("chart", panel(60, 14, &sample_app(), render_chart));
}

#[test]
fn map_panel() {
    assert_snapshot!("map", panel(60, 14, &sample_app(), render_map));
}

#[test]
fn detail_panel() {
    assert_snapshot!("detail", panel(40, 13, &sample_app(), render_detail));
}

#[test]
fn detail_panel_without_detail() {
    let mut app = sample_app();
    app.apply(Action::Right);
    assert_snapshot!("detail_waiting", panel(40, 6, &app, render_detail));
}

#[test]
fn log_panel() {
    assert_snapshot!("log", panel(40, 9, &sample_app(), render_log));
}

#[test]
fn rate_panel() {
    assert_snapshot!("rate", panel(40, 4, &sample_app(), render_rate));
}

#[test]
fn footer_panel() {
    let app = sample_app();
    assert_snapshot!("footer_wide", panel(140, 1, &app, render_footer));
    assert_snapshot!("footer_narrow", panel(60, 1, &app, render_footer));
}

#[test]
fn help_overlay() {
    let mut app = sample_app();
    assert_snapshot!("help_alone", panel(80, 24, &app, render_help));
    app.apply(Action::ToggleHelp);
    assert!(app.help_visible());
    assert_snapshot!("console_with_help_100x30", capture(&app, 100, 30));
}

#[test]
fn console_100x30() {
    assert_snapshot!("console_100x30", capture(&sample_app(), 100, 30));
}

#[test]
fn console_80x24() {
    assert_snapshot!("console_80x24", capture(&sample_app(), 80, 24));
}

#[test]
fn capture_matches_buffer_text_and_trims() {
    let app = sample_app();
    let text = capture(&app, 100, 30);
    assert_eq!(text.lines().count(), 30);
    assert!(text.lines().all(|line| !line.ends_with(' ')));
    let buffer = common::render_buffer(100, 30, |frame, _| ftcoll_tui::render(frame, &app));
    assert_eq!(buffer_text(&buffer), text);
}

#[test]
fn map_cells_show_state_and_selection() {
    use ratatui::style::{Color, Modifier};
    let app = sample_app();
    let buffer = common::render_buffer(60, 14, |frame, area| render_map(frame, area, &app));
    let geometry = ftcoll_tui::ui::map_geometry(&app, Rect::new(0, 0, 60, 14)).unwrap();
    let inner = ftcoll_tui::ui::map_inner(Rect::new(0, 0, 60, 14));
    let cell_of = |rank: u32| {
        let position = geometry.position(rank);
        buffer[(inner.x + position.x, inner.y + position.y)].clone()
    };

    let dead = cell_of(DEAD_RANK);
    assert_eq!(dead.symbol(), "x");
    assert_eq!(dead.fg, Color::Red);

    let suspected = cell_of(SUSPECTED_RANK);
    assert_eq!(suspected.symbol(), "?");

    let selected = cell_of(SELECTED_RANK);
    assert!(selected.modifier.contains(Modifier::REVERSED));
    assert!(!cell_of(0).modifier.contains(Modifier::REVERSED));

    // Rank 0 sits at error 1e0 (red); rank 14 at 1e-14 (green); the last rank is done.
    assert_eq!(cell_of(0).symbol(), "■");
    assert_eq!(cell_of(0).fg, Color::Red);
    assert_eq!(cell_of(3).fg, Color::Yellow);
    assert_eq!(cell_of(7).fg, Color::Cyan);
    assert_eq!(cell_of(10).fg, Color::LightGreen);
    assert_eq!(cell_of(14).fg, Color::Green);
    assert_eq!(cell_of(15).symbol(), "●");

    // One node per row: rank 4 starts the second row.
    assert_eq!(geometry.position(4).x, 0);
    assert_eq!(geometry.position(4).y, 1);
}

#[test]
fn detail_highlights_the_current_neighbour() {
    use ratatui::style::Modifier;
    let app = sample_app();
    assert_eq!(app.neighbour(), Some(7));
    let buffer = common::render_buffer(40, 13, |frame, area| render_detail(frame, area, &app));
    let text = buffer_text(&buffer);
    let row = text
        .lines()
        .position(|line| line.starts_with("│7 "))
        .unwrap() as u16;
    assert!(buffer[(1, row)].modifier.contains(Modifier::REVERSED));
    let other = text
        .lines()
        .position(|line| line.starts_with("│2 "))
        .unwrap() as u16;
    assert!(!buffer[(1, other)].modifier.contains(Modifier::REVERSED));
}
