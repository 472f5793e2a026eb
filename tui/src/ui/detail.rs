//! The detail panel: everything known about the selected rank, and the fault settings that
//! keys will apply to it.

use ftcoll_algos::inspect::{short_number, InspectTable};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use super::style::{error_colour, format_error};
use crate::app::App;

/// Draws the detail panel of the selected rank.
pub fn render_detail(frame: &mut Frame, area: Rect, app: &App) {
    let rank = app.selected();
    let per_node = app.info().ranks_per_node.max(1);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" rank {rank} (node {}) ", rank / per_node))
        .title_bottom(settings_line(app));
    let inner = block.inner(area);
    let lines = detail_lines(app, inner.width, inner.height);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// The fault settings keys apply to the selected rank: bit, neighbour, drop rate, slow-down.
fn settings_line(app: &App) -> Line<'static> {
    let rank = app.selected();
    let peer = app
        .neighbour()
        .map_or_else(|| "-".to_string(), |peer| peer.to_string());
    let drop = app.drop_rate(rank);
    let drop = if drop > 0.0 {
        format!("{}%", drop * 100.0)
    } else {
        "off".to_string()
    };
    let highlight = Style::default().fg(Color::Yellow);
    Line::from(vec![
        Span::raw(" bit "),
        Span::styled(app.bit().to_string(), highlight),
        Span::raw(" peer "),
        Span::styled(peer, highlight),
        Span::raw(" drop "),
        Span::styled(drop, highlight),
        Span::raw(" slow "),
        Span::styled(format!("×{}", app.slow_factor(rank)), highlight),
        Span::raw(" "),
    ])
}

fn detail_lines(app: &App, width: u16, height: u16) -> Vec<Line<'static>> {
    let label = Style::default().fg(Color::DarkGray);
    let rank = app.selected();
    let Some(detail) = app.detail() else {
        let error = app.rank_error(rank);
        return vec![
            Line::from(vec![
                Span::styled("state ", label),
                Span::raw(format!("{:?}", app.rank_state(rank))),
                Span::styled("  error ", label),
                Span::styled(
                    format_error(error),
                    Style::default().fg(error_colour(error)),
                ),
            ]),
            Line::styled("waiting for the rank's detail…", label),
        ];
    };
    let mut lines = vec![
        Line::from(vec![
            Span::styled("state ", label),
            Span::raw(format!("{:?}", detail.state)),
            Span::styled("  phase ", label),
            Span::raw(detail.phase.clone()),
            Span::styled("  iter ", label),
            Span::raw(detail.iteration.to_string()),
        ]),
        Line::from(vec![
            Span::styled("estimate ", label),
            Span::raw(short_number(detail.estimate)),
            Span::styled("  error ", label),
            Span::styled(
                format_error(detail.error),
                Style::default().fg(error_colour(detail.error)),
            ),
        ]),
    ];
    lines.extend(field_lines(&detail.inspection.fields, width));
    if let Some(table) = &detail.inspection.table {
        let room = usize::from(height).saturating_sub(lines.len());
        let current = (!detail.inspection.neighbours.is_empty())
            .then(|| app.neighbour_index() % detail.inspection.neighbours.len());
        lines.extend(table_lines(table, current, room));
    }
    lines
}

/// Fields as `name value` pairs, packed into as few lines as the width allows.
fn field_lines(fields: &[(String, String)], width: u16) -> Vec<Line<'static>> {
    let label = Style::default().fg(Color::DarkGray);
    let width = usize::from(width);
    let mut lines = Vec::new();
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for (name, value) in fields {
        let needed = name.chars().count() + 1 + value.chars().count();
        let gap = if spans.is_empty() { 0 } else { 2 };
        if !spans.is_empty() && used + gap + needed > width {
            lines.push(Line::from(std::mem::take(&mut spans)));
            used = 0;
        } else if gap > 0 {
            spans.push(Span::raw("  "));
            used += gap;
        }
        spans.push(Span::styled(format!("{name} "), label));
        spans.push(Span::raw(value.clone()));
        used += needed;
    }
    if !spans.is_empty() {
        lines.push(Line::from(spans));
    }
    lines
}

/// The table in at most `room` lines: header, the rows around the current neighbour (which is
/// highlighted), and a count of rows not shown.
fn table_lines(table: &InspectTable, current: Option<usize>, room: usize) -> Vec<Line<'static>> {
    if room == 0 {
        return Vec::new();
    }
    let widths: Vec<usize> = (0..table.columns.len())
        .map(|column| {
            let cells = table.rows.iter().filter_map(|row| row.get(column));
            std::iter::once(&table.columns[column])
                .chain(cells)
                .map(|text| text.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let format_row = |cells: &[String]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut lines = vec![Line::styled(
        format_row(&table.columns),
        Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
    )];
    // Rows shown: what is left after the header and the "more" line, scrolled so that the
    // current neighbour stays visible.
    let rows_room = room.saturating_sub(2).max(1);
    let first = match current {
        Some(current) if current >= rows_room => current + 1 - rows_room,
        _ => 0,
    };
    let shown = table.rows.iter().enumerate().skip(first).take(rows_room);
    for (index, row) in shown {
        let style = if Some(index) == current {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        };
        lines.push(Line::styled(format_row(row), style));
    }
    let hidden = table
        .rows
        .len()
        .saturating_sub(rows_room.min(table.rows.len()));
    let more = u64::from(table.omitted) + hidden as u64;
    if more > 0 {
        lines.push(Line::styled(
            format!("(+{more} more)"),
            Style::default().fg(Color::DarkGray),
        ));
    }
    lines
}
