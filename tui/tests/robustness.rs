//! Large jobs and odd sizes: the console renders and never panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use ftcoll_tui::ui::{console_areas, map_geometry, map_inner, MapPacking};
use ftcoll_tui::{capture, Action, App, JobInfo, RankState, Update};
use ratatui::layout::Rect;

const BIG_N: u32 = 4096;
const BIG_DEAD: u32 = 1000;

fn big_app() -> App {
    let mut app = App::new(JobInfo {
        ranks_per_node: 64,
        ..common::job(BIG_N)
    });
    let states = (0..BIG_N)
        .map(|rank| match rank {
            BIG_DEAD => RankState::Dead,
            2000 => RankState::Suspected,
            _ => RankState::Running,
        })
        .collect();
    let errors = (0..BIG_N)
        .map(|rank| 10f32.powi(-((rank % 16) as i32)))
        .collect();
    app.update(Update {
        elapsed_s: 3.0,
        op: 0,
        round: 12,
        states,
        errors,
        messages_total: 90_000,
        ..Update::default()
    });
    app
}

#[test]
fn four_thousand_ranks_in_80x24() {
    let app = big_app();
    let text = capture(&app, 80, 24);
    let areas = console_areas(&app, Rect::new(0, 0, 80, 24));
    let geometry = map_geometry(&app, areas.map).unwrap();
    let MapPacking::HalfBlocks { ranks_per_slot } = geometry.packing else {
        panic!("4096 ranks cannot get a glyph each: {geometry:?}");
    };
    assert!(ranks_per_slot > 1);
    let title = format!("ranks 0..4095, {ranks_per_slot} per half-cell");
    assert!(text.contains(&title), "{title}\n{text}");

    // The block holding the dead rank is marked.
    let inner = map_inner(areas.map);
    let position = geometry.position(BIG_DEAD);
    let row: Vec<char> = text
        .lines()
        .nth(usize::from(inner.y + position.y))
        .unwrap()
        .chars()
        .collect();
    assert_eq!(row[usize::from(inner.x + position.x)], 'x', "{text}");
    insta::assert_snapshot!("console_4096_80x24", text);
}

#[test]
fn half_block_cells_carry_two_slots() {
    use ratatui::style::{Color, Modifier};
    let app = big_app();
    let buffer = common::render_buffer(80, 24, |frame, _| ftcoll_tui::render(frame, &app));
    let areas = console_areas(&app, Rect::new(0, 0, 80, 24));
    let inner = map_inner(areas.map);
    let geometry = map_geometry(&app, areas.map).unwrap();
    // Rank 0 (selected) is reversed; the cell to its right is a plain half block.
    let selected = &buffer[(inner.x, inner.y)];
    assert!(selected.modifier.contains(Modifier::REVERSED));
    let neighbour = &buffer[(inner.x + 1, inner.y)];
    assert_eq!(neighbour.symbol(), "▀");
    // Every slot aggregates ranks whose errors reach 1e-0 (rank % 16 == 0) or at least 1e-4.
    assert_ne!(neighbour.fg, Color::Reset);
    assert_ne!(neighbour.bg, Color::Reset);
    assert!(geometry.ranks_per_slot() >= 4);
}

#[test]
fn selecting_inside_a_block_moves_the_highlight() {
    let mut app = big_app();
    app.set_viewport(80, 24);
    let areas = console_areas(&app, Rect::new(0, 0, 80, 24));
    let geometry = map_geometry(&app, areas.map).unwrap();
    app.apply(Action::Down);
    assert_eq!(app.selected(), geometry.row_ranks);
    let buffer = common::render_buffer(80, 24, |frame, _| ftcoll_tui::render(frame, &app));
    let inner = map_inner(areas.map);
    let position = geometry.position(app.selected());
    assert!(!position.upper);
    let cell = &buffer[(inner.x + position.x, inner.y + position.y)];
    assert!(cell.modifier.contains(ratatui::style::Modifier::REVERSED));
}

#[test]
fn no_size_and_no_job_panics() {
    let mut apps = vec![
        App::new(common::job(0)),
        App::new(common::job(1)),
        common::sample_app(),
        big_app(),
    ];
    let mut with_help = common::sample_app();
    with_help.apply(Action::ToggleHelp);
    apps.push(with_help);
    let mut one = App::new(common::job(1));
    one.update(common::frame(1, 3, Some(0)));
    apps.push(one);
    for app in &apps {
        for width in 0..=48 {
            for height in 0..=16 {
                let _ = capture(app, width, height);
            }
        }
        for (width, height) in [(40, 12), (80, 24), (1, 200), (300, 1), (500, 200)] {
            let text = capture(app, width, height);
            assert_eq!(
                text.split('\n').count(),
                usize::from(height),
                "{width}x{height}"
            );
        }
    }
}

#[test]
fn console_40x12_renders_every_panel_title() {
    let text = capture(&common::sample_app(), 40, 12);
    assert_eq!(text.lines().count(), 12);
    insta::assert_snapshot!("console_40x12", text);
}

#[test]
fn odd_updates_do_not_panic() {
    let mut app = App::new(common::job(16));
    // Wrong lengths, NaN and infinite errors, NaN and negative times, absurd counters.
    let odd = [
        Update {
            elapsed_s: f64::NAN,
            states: vec![],
            errors: vec![f32::NAN; 3],
            ..Update::default()
        },
        Update {
            elapsed_s: -5.0,
            states: vec![RankState::Dead; 40],
            errors: vec![f32::INFINITY; 40],
            messages_total: u64::MAX,
            ..Update::default()
        },
        Update {
            elapsed_s: 1e300,
            errors: vec![f32::MAX, -1.0, 0.0, f32::MIN_POSITIVE, f32::NEG_INFINITY],
            time_label: "sim t=99999999 steps".repeat(20),
            op: u64::MAX,
            round: u32::MAX,
            ..Update::default()
        },
        Update {
            elapsed_s: f64::INFINITY,
            ..Update::default()
        },
    ];
    for update in odd {
        app.update(update);
        for (width, height) in [(0, 0), (40, 12), (80, 24), (100, 30)] {
            let _ = capture(&app, width, height);
        }
    }
    app.apply(Action::KillRandom);
    app.apply(Action::Down);
}

#[test]
fn a_million_ranks() {
    let n = 1 << 20;
    let mut app = App::new(JobInfo {
        ranks_per_node: 128,
        ..common::job(n)
    });
    app.update(Update {
        elapsed_s: 1.0,
        states: vec![RankState::Running; n as usize],
        errors: (0..n).map(|rank| (rank % 1000) as f32 * 1e-6).collect(),
        messages_total: 1 << 30,
        ..Update::default()
    });
    let text = capture(&app, 100, 30);
    assert!(text.contains("ranks 0..1048575"), "{text}");
    app.apply(Action::KillRandom);
    app.apply(Action::Down);
    assert!(app.selected() > 0);
}
