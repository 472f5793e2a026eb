//! What each action asks of the driver, and what the console remembers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use ftcoll_tui::{Action, App, Command, JobInfo, LogKind, RankState, Update};

/// The commands, each fault in its notation (`kill:rank=3`).
fn texts(commands: Vec<Command>) -> Vec<String> {
    commands
        .into_iter()
        .map(|command| match command {
            Command::Fault(spec) => spec.to_string(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn fault(spec: &str) -> Vec<String> {
    vec![spec.to_string()]
}

fn last_log(app: &App) -> (LogKind, String) {
    let entry = app.log_entries().back().unwrap();
    (entry.kind, entry.text.clone())
}

fn select(app: &mut App, rank: u32) {
    while app.selected() < rank {
        app.apply(Action::Right);
    }
    assert_eq!(app.selected(), rank);
}

/// A 16-rank app whose latest frame carries the detail (neighbours 2, 7, 10, 14) of `rank`.
fn app_with_detail(rank: u32) -> App {
    let mut app = App::new(common::job(16));
    select(&mut app, rank);
    app.update(common::frame(16, 12, Some(rank)));
    app
}

#[test]
fn kill_selected_and_log() {
    let mut app = App::new(common::job(16));
    assert_eq!(texts(app.apply(Action::KillSelected)), fault("kill:rank=0"));
    assert_eq!(
        last_log(&app),
        (LogKind::Injected, "injected kill:rank=0".to_string())
    );
    select(&mut app, 9);
    assert_eq!(texts(app.apply(Action::KillSelected)), fault("kill:rank=9"));
}

#[test]
fn faults_are_logged_at_the_latest_update_time() {
    let mut app = App::new(common::job(16));
    app.update(common::frame(16, 7, None));
    app.apply(Action::FlipMessage);
    let entry = app.log_entries().back().unwrap();
    assert_eq!(entry.at_s, 7.0);
    assert_eq!(entry.kind, LogKind::Injected);
    assert_eq!(entry.text, "injected flip-msg:rank=0,bit=52");
}

fn random_victims(seed: u64, draws: usize, states: Vec<RankState>) -> Vec<String> {
    let mut app = App::new(JobInfo {
        seed,
        ..common::job(states.len() as u32)
    });
    app.update(Update {
        errors: vec![f32::NAN; states.len()],
        states,
        ..Update::default()
    });
    (0..draws)
        .flat_map(|_| texts(app.apply(Action::KillRandom)))
        .collect()
}

#[test]
fn random_kill_never_picks_the_dead_and_repeats_for_a_seed() {
    let mut states = vec![RankState::Dead; 16];
    states[3] = RankState::Running;
    states[11] = RankState::Suspected;
    let victims = random_victims(42, 64, states.clone());
    assert_eq!(victims.len(), 64);
    let three = fault("kill:rank=3").remove(0);
    let eleven = fault("kill:rank=11").remove(0);
    assert!(victims
        .iter()
        .all(|victim| *victim == three || *victim == eleven));
    assert!(victims.contains(&three) && victims.contains(&eleven));

    assert_eq!(random_victims(42, 64, states.clone()), victims);
    let all_alive = vec![RankState::Running; 16];
    assert_ne!(
        random_victims(1, 16, all_alive.clone()),
        random_victims(2, 16, all_alive)
    );
}

#[test]
fn random_kill_with_nobody_alive() {
    assert!(random_victims(42, 3, vec![RankState::Dead; 16]).is_empty());
    let mut app = App::new(common::job(4));
    app.update(Update {
        states: vec![RankState::Dead; 4],
        ..Update::default()
    });
    assert!(app.apply(Action::KillRandom).is_empty());
    assert_eq!(last_log(&app).0, LogKind::Info);
}

#[test]
fn random_kill_before_any_update_counts_everyone_alive() {
    let mut app = App::new(common::job(16));
    let commands = app.apply(Action::KillRandom);
    assert_eq!(commands.len(), 1);
}

#[test]
fn kill_node_divides_by_ranks_per_node() {
    let mut app = App::new(common::job(16)); // 4 ranks per node
    assert_eq!(
        texts(app.apply(Action::KillNode)),
        fault("kill-node:node=0")
    );
    select(&mut app, 6);
    assert_eq!(
        texts(app.apply(Action::KillNode)),
        fault("kill-node:node=1")
    );
    select(&mut app, 15);
    assert_eq!(
        texts(app.apply(Action::KillNode)),
        fault("kill-node:node=3")
    );
    let mut odd = App::new(JobInfo {
        ranks_per_node: 0,
        ..common::job(4)
    });
    assert_eq!(
        texts(odd.apply(Action::KillNode)),
        fault("kill-node:node=0")
    );
}

#[test]
fn flip_flow_without_and_with_neighbours() {
    let mut app = App::new(common::job(16));
    assert_eq!(
        texts(app.apply(Action::FlipFlow)),
        fault("flip-state:rank=0,var=value,bit=52")
    );

    let mut app = app_with_detail(6);
    assert_eq!(app.neighbour(), Some(2));
    assert_eq!(
        texts(app.apply(Action::FlipFlow)),
        fault("flip-state:rank=6,var=flow:2,bit=52")
    );
    assert!(app.apply(Action::NextNeighbour).is_empty());
    assert_eq!(
        texts(app.apply(Action::FlipFlow)),
        fault("flip-state:rank=6,var=flow:7,bit=52")
    );
    for _ in 0..3 {
        app.apply(Action::NextNeighbour);
    }
    assert_eq!(app.neighbour(), Some(2), "the neighbour cycles around");

    // Detail of another rank says nothing about the selected one's neighbours.
    let mut stale = app_with_detail(6);
    stale.apply(Action::Right);
    assert_eq!(stale.neighbour(), None);
    assert_eq!(
        texts(stale.apply(Action::FlipFlow)),
        fault("flip-state:rank=7,var=value,bit=52")
    );
}

#[test]
fn selection_change_resets_the_neighbour() {
    let mut app = app_with_detail(6);
    app.apply(Action::NextNeighbour);
    assert_eq!(app.neighbour_index(), 1);
    app.apply(Action::Right);
    app.apply(Action::Left);
    assert_eq!(app.neighbour_index(), 0);
}

#[test]
fn flip_message_uses_the_current_bit() {
    let mut app = App::new(common::job(16));
    app.apply(Action::BitDown);
    assert_eq!(
        texts(app.apply(Action::FlipMessage)),
        fault("flip-msg:rank=0,bit=51")
    );
}

#[test]
fn bit_wraps_at_both_ends_for_64_bits() {
    let mut app = App::new(common::job(16));
    assert_eq!(app.bit(), 52);
    for _ in 0..11 {
        assert!(app.apply(Action::BitUp).is_empty());
    }
    assert_eq!(app.bit(), 63);
    app.apply(Action::BitUp);
    assert_eq!(app.bit(), 0);
    app.apply(Action::BitDown);
    assert_eq!(app.bit(), 63);
}

#[test]
fn bit_wraps_at_both_ends_for_32_bits() {
    let mut app = App::new(JobInfo {
        value_bits: 32,
        ..common::job(16)
    });
    // The lowest exponent bit of an f32.
    assert_eq!(app.bit(), 23);
    for _ in 0..23 {
        app.apply(Action::BitDown);
    }
    assert_eq!(app.bit(), 0);
    app.apply(Action::BitDown);
    assert_eq!(app.bit(), 31);
    app.apply(Action::BitUp);
    assert_eq!(app.bit(), 0);
    assert_eq!(
        texts(app.apply(Action::FlipMessage)),
        fault("flip-msg:rank=0,bit=0")
    );
}

#[test]
fn drop_rate_cycles_per_rank() {
    let mut app = App::new(common::job(16));
    select(&mut app, 3);
    for (rate, spec) in [
        (0.01, "drop:rank=3,rate=0.01"),
        (0.1, "drop:rank=3,rate=0.1"),
        (0.5, "drop:rank=3,rate=0.5"),
        (0.0, "drop:rank=3,rate=0"),
        (0.01, "drop:rank=3,rate=0.01"),
    ] {
        assert_eq!(texts(app.apply(Action::CycleDrop)), fault(spec));
        assert_eq!(app.drop_rate(3), rate);
    }
    // Another rank starts its own cycle.
    app.apply(Action::Right);
    assert_eq!(
        texts(app.apply(Action::CycleDrop)),
        fault("drop:rank=4,rate=0.01")
    );
    assert_eq!(app.drop_rate(3), 0.01);
}

#[test]
fn slow_down_cycles_per_rank() {
    let mut app = App::new(common::job(16));
    for (factor, spec) in [
        (4, "slow:rank=0,factor=4"),
        (16, "slow:rank=0,factor=16"),
        (1, "slow:rank=0,factor=1"),
        (4, "slow:rank=0,factor=4"),
    ] {
        assert_eq!(texts(app.apply(Action::SlowDown)), fault(spec));
        assert_eq!(app.slow_factor(0), factor);
    }
    assert_eq!(app.slow_factor(1), 1);
}

#[test]
fn fault_settings_stay_bounded() {
    let n = 10_000;
    let mut app = App::new(common::job(n));
    for _ in 0..n - 1 {
        app.apply(Action::CycleDrop);
        app.apply(Action::Right);
    }
    // The newest settings are remembered; the map forgot the oldest past its bound.
    assert_eq!(app.drop_rate(n - 2), 0.01);
    assert_eq!(app.drop_rate(0), 0.0);
}

#[test]
fn cut_link_needs_a_neighbour() {
    let mut app = App::new(common::job(16));
    assert!(app.apply(Action::CutLink).is_empty());
    assert_eq!(
        last_log(&app),
        (
            LogKind::Info,
            "no neighbour known for rank 0 yet".to_string()
        )
    );

    let mut app = app_with_detail(6);
    app.apply(Action::NextNeighbour);
    assert_eq!(texts(app.apply(Action::CutLink)), fault("cut:link=6-7"));
    assert_eq!(
        last_log(&app),
        (LogKind::Injected, "injected cut:link=6-7".to_string())
    );
}

#[test]
fn pause_resume_new_operation_help_quit() {
    let mut app = App::new(common::job(16));
    assert!(!app.paused());
    assert_eq!(app.apply(Action::TogglePause), vec![Command::Pause]);
    assert!(app.paused());
    assert_eq!(last_log(&app).0, LogKind::Info);
    assert_eq!(app.apply(Action::TogglePause), vec![Command::Resume]);
    assert!(!app.paused());
    assert_eq!(last_log(&app).0, LogKind::Info);

    assert_eq!(app.apply(Action::NewOperation), vec![Command::NewOperation]);
    assert_eq!(last_log(&app).0, LogKind::Info);

    assert!(app.apply(Action::ToggleHelp).is_empty());
    assert!(app.help_visible());
    assert!(app.apply(Action::ToggleHelp).is_empty());
    assert!(!app.help_visible());

    assert!(!app.quit_requested());
    assert_eq!(app.apply(Action::Quit), vec![Command::Quit]);
    assert!(app.quit_requested());
}

#[test]
fn selection_moves_on_the_map_grid_and_clamps() {
    // 16 ranks on nodes of 4: the map draws one node per row.
    let mut app = App::new(common::job(16));
    assert_eq!(app.selected(), 0);
    assert!(app.apply(Action::Left).is_empty());
    assert!(app.apply(Action::Up).is_empty());
    assert_eq!(app.apply(Action::Right), vec![Command::Select(1)]);
    assert_eq!(app.apply(Action::Down), vec![Command::Select(5)]);
    assert_eq!(app.apply(Action::Down), vec![Command::Select(9)]);
    assert_eq!(app.apply(Action::Down), vec![Command::Select(13)]);
    assert_eq!(
        app.apply(Action::Down),
        vec![Command::Select(15)],
        "clamped to n-1"
    );
    assert!(app.apply(Action::Down).is_empty());
    assert!(app.apply(Action::Right).is_empty());
    assert_eq!(app.apply(Action::Up), vec![Command::Select(11)]);
    assert_eq!(app.apply(Action::Left), vec![Command::Select(10)]);
    for _ in 0..2 {
        app.apply(Action::Up);
    }
    assert_eq!(app.selected(), 2);
    assert_eq!(
        app.apply(Action::Up),
        vec![Command::Select(0)],
        "clamped to 0"
    );
}

#[test]
fn up_and_down_follow_the_map_as_drawn() {
    use ftcoll_tui::ui::{console_areas, map_geometry};
    use ratatui::layout::Rect;
    let mut app = App::new(JobInfo {
        ranks_per_node: 64,
        ..common::job(4096)
    });
    for (width, height) in [(80, 24), (100, 30), (200, 60)] {
        app.set_viewport(width, height);
        let areas = console_areas(&app, Rect::new(0, 0, width, height));
        let row = map_geometry(&app, areas.map).unwrap().row_ranks;
        let start = app.selected();
        assert_eq!(app.apply(Action::Down), vec![Command::Select(start + row)]);
        // The rank below is drawn in the same column, one row down.
        let geometry = map_geometry(&app, areas.map).unwrap();
        let (above, below) = (geometry.position(start), geometry.position(start + row));
        assert_eq!(above.x, below.x);
        assert_eq!(app.apply(Action::Up), vec![Command::Select(start)]);
    }
}

#[test]
fn every_fault_is_logged_as_injected() {
    let mut app = app_with_detail(6);
    let actions = [
        Action::KillSelected,
        Action::KillRandom,
        Action::KillNode,
        Action::FlipFlow,
        Action::FlipMessage,
        Action::CycleDrop,
        Action::CutLink,
        Action::SlowDown,
        Action::BitUp,
        Action::NextNeighbour,
        Action::TogglePause,
        Action::NewOperation,
    ];
    let before = app.log_entries().len();
    let mut faults = Vec::new();
    for action in actions {
        for command in app.apply(action) {
            if let Command::Fault(spec) = command {
                faults.push(format!("injected {spec}"));
            }
        }
    }
    assert_eq!(faults.len(), 8);
    let injected: Vec<String> = app
        .log_entries()
        .iter()
        .skip(before)
        .filter(|entry| entry.kind == LogKind::Injected)
        .map(|entry| entry.text.clone())
        .collect();
    assert_eq!(injected, faults);
}

#[test]
fn no_ranks_no_faults_no_panics() {
    let mut app = App::new(common::job(0));
    let all = [
        Action::Up,
        Action::Down,
        Action::Left,
        Action::Right,
        Action::KillSelected,
        Action::KillRandom,
        Action::KillNode,
        Action::FlipFlow,
        Action::FlipMessage,
        Action::BitUp,
        Action::BitDown,
        Action::NextNeighbour,
        Action::CycleDrop,
        Action::CutLink,
        Action::SlowDown,
        Action::TogglePause,
        Action::NewOperation,
        Action::ToggleHelp,
        Action::Quit,
    ];
    for action in all {
        let commands = app.apply(action);
        assert!(
            !commands.iter().any(|c| matches!(c, Command::Fault(_))),
            "{action:?}"
        );
    }
    let mut zero_bits = App::new(JobInfo {
        value_bits: 0,
        ..common::job(1)
    });
    zero_bits.apply(Action::BitUp);
    zero_bits.apply(Action::BitDown);
    assert_eq!(zero_bits.bit(), 0);
}
