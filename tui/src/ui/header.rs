//! The header: what runs, where it is, and how many ranks are alive.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::style::format_seconds;
use crate::app::App;
use crate::model::RankState;

/// Rows the header needs at this width: one when everything fits, else two.
pub fn header_height(app: &App, width: u16) -> u16 {
    let (identity, progress) = header_lines(app);
    if identity.width() + progress.width() <= usize::from(width) {
        1
    } else {
        2
    }
}

/// Draws the header, on one line or two depending on the area's height.
pub fn render_header(frame: &mut Frame, area: Rect, app: &App) {
    let (identity, progress) = header_lines(app);
    let lines = if area.height >= 2 {
        vec![identity, progress]
    } else {
        let mut spans = identity.spans;
        spans.extend(progress.spans);
        vec![Line::from(spans)]
    };
    frame.render_widget(Paragraph::new(lines), area);
}

/// The job's identity, then its progress.
fn header_lines(app: &App) -> (Line<'static>, Line<'static>) {
    let info = app.info();
    let dim = Style::default().fg(Color::DarkGray);
    let mut identity = vec![
        Span::styled(
            " ftcoll ",
            Style::default()
                .fg(Color::Black)
                .bg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!(" {}", info.algo),
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!("  N={}", info.n)),
        Span::raw(format!("  {}", info.transport)),
    ];
    if info.simulated {
        identity.push(Span::styled(" (simulated)", dim));
    }
    identity.push(Span::raw(" "));

    let mut progress = vec![Span::raw(format!(" t={}", format_seconds(app.now_s())))];
    if let Some(update) = app.latest() {
        progress.push(Span::raw(format!(
            "  op {}  round {}",
            update.op, update.round
        )));
        if !update.time_label.is_empty() {
            progress.push(Span::styled(format!("  {}", update.time_label), dim));
        }
    }
    let (live, suspected, dead) = state_counts(app);
    progress.push(Span::styled(
        format!("  {live} live"),
        Style::default().fg(Color::Green),
    ));
    if suspected > 0 {
        progress.push(Span::styled(
            format!("  {suspected} suspect"),
            Style::default().fg(Color::LightMagenta),
        ));
    }
    progress.push(Span::styled(
        format!("  {dead} dead"),
        Style::default().fg(if dead > 0 {
            Color::Red
        } else {
            Color::DarkGray
        }),
    ));
    if app.paused() {
        progress.push(Span::raw("  "));
        progress.push(Span::styled(
            " PAUSED ",
            Style::default()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ));
    }
    (Line::from(identity), Line::from(progress))
}

/// `(live, suspected, dead)` among the job's ranks; ranks the driver has not reported count as
/// live.
fn state_counts(app: &App) -> (u64, u64, u64) {
    let n = u64::from(app.info().n);
    let (mut suspected, mut dead) = (0, 0);
    if let Some(update) = app.latest() {
        for state in update.states.iter().take(app.info().n as usize) {
            match state {
                RankState::Suspected => suspected += 1,
                RankState::Dead => dead += 1,
                _ => {}
            }
        }
    }
    (n - suspected - dead, suspected, dead)
}
