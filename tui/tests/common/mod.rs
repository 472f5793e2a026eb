//! A deterministic console for the tests: 16 ranks on 4 nodes, one dead, one suspected, errors
//! spanning 1e0..1e-15, a gossip-like detail, and log lines of every kind.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use ftcoll_algos::inspect::{InspectTable, Inspection};
use ftcoll_tui::{capture, App, JobInfo, LogEntry, LogKind, RankDetail, RankState, Update};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::{Frame, Terminal};

pub const DEAD_RANK: u32 = 5;
pub const SUSPECTED_RANK: u32 = 9;
pub const SELECTED_RANK: u32 = 6;

pub fn job(n: u32) -> JobInfo {
    JobInfo {
        algo: "gossip-sum".to_string(),
        n,
        transport: "shm".to_string(),
        simulated: false,
        value_bits: 64,
        ranks_per_node: 4,
        seed: 42,
    }
}

/// States at step `step` of 12: rank 5 dies at step 6, rank 9 is suspected from step 9, the
/// last rank is done at the end, everyone else runs.
pub fn states(n: u32, step: u32) -> Vec<RankState> {
    (0..n)
        .map(|rank| match rank {
            DEAD_RANK if step >= 6 => RankState::Dead,
            SUSPECTED_RANK if step >= 9 => RankState::Suspected,
            r if r + 1 == n && step >= 12 => RankState::Done,
            _ if step == 0 => RankState::Starting,
            _ => RankState::Running,
        })
        .collect()
}

/// Rank `r` ends at error 10^-r (dead rank 5 keeps its stale 1e0); unknown at step 0.
pub fn errors(n: u32, step: u32) -> Vec<f32> {
    (0..n)
        .map(|rank| {
            if step == 0 {
                f32::NAN
            } else if rank == DEAD_RANK && step >= 6 {
                1.0
            } else {
                10f32.powf(-(rank as f32) * step as f32 / 12.0)
            }
        })
        .collect()
}

pub fn detail(rank: u32) -> RankDetail {
    let mut inspection = Inspection::default();
    inspection.field("weight", "0.031250");
    inspection.field("checksum", "ok");
    inspection.field("pushes", 1234);
    let mut table = InspectTable::new(&["peer", "flow", "state"]);
    for (peer, flow, state) in [
        (2, "+1.250000", "ok"),
        (7, "-0.500000", "ok"),
        (10, "+0.031250", "suspect"),
        (14, "-0.781250", "ok"),
    ] {
        table.row(vec![peer.to_string(), flow.to_string(), state.to_string()]);
    }
    table.omitted = 3;
    inspection.table = Some(table);
    inspection.neighbours = vec![2, 7, 10, 14];
    RankDetail {
        rank,
        state: RankState::Running,
        phase: "push-sum".to_string(),
        iteration: 57,
        estimate: 8.5,
        error: 3.2e-7,
        inspection,
    }
}

pub fn frame(n: u32, step: u32, detail_rank: Option<u32>) -> Update {
    Update {
        elapsed_s: f64::from(step),
        time_label: String::new(),
        op: 2,
        round: step * 5,
        states: states(n, step),
        errors: errors(n, step),
        messages_total: u64::from(step) * u64::from(step) * 1000,
        detail: detail_rank.map(detail),
    }
}

/// The standard console: 13 frames, rank 6 selected with its detail, neighbour 7 current,
/// a drop rate and a slow-down set, and log lines of every kind.
pub fn sample_app() -> App {
    let n = 16;
    let mut app = App::new(job(n));
    app.set_viewport(100, 30);
    app.log(LogEntry {
        at_s: 0.0,
        kind: LogKind::Info,
        text: "job started: 16 ranks on 4 nodes".to_string(),
    });
    for step in 0..=5 {
        app.update(frame(n, step, Some(0)));
    }
    for _ in 0..SELECTED_RANK {
        app.apply(ftcoll_tui::Action::Right);
    }
    for step in 6..=12 {
        if step == 6 {
            app.log(LogEntry {
                at_s: 6.0,
                kind: LogKind::Failure,
                text: format!("rank {DEAD_RANK} failed (heartbeat timeout)"),
            });
        }
        app.update(frame(n, step, Some(SELECTED_RANK)));
    }
    app.apply(ftcoll_tui::Action::NextNeighbour);
    app.apply(ftcoll_tui::Action::FlipFlow);
    app.apply(ftcoll_tui::Action::CycleDrop);
    app.apply(ftcoll_tui::Action::CycleDrop);
    app.apply(ftcoll_tui::Action::SlowDown);
    app
}

/// Renders with `draw` onto a fresh `width` × `height` test terminal and returns its buffer.
pub fn render_buffer(width: u16, height: u16, draw: impl FnOnce(&mut Frame, Rect)) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| {
            let area = frame.area();
            draw(frame, area);
        })
        .unwrap();
    terminal.backend().buffer().clone()
}

/// The full console as text.
pub fn console_text(app: &App, width: u16, height: u16) -> String {
    capture(app, width, height)
}
