//! The help overlay: every key and what it does, over the console.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use super::style::{error_colour, ERROR_DECADES};
use crate::app::App;
use crate::keys::KEY_HELP;

/// Widest key name in [`KEY_HELP`], for alignment.
const KEY_COLUMN: usize = 18;

/// Draws the help popup centred in `area` (the whole console).
pub fn render_help(frame: &mut Frame, area: Rect, app: &App) {
    let key_style = Style::default()
        .fg(Color::Yellow)
        .add_modifier(Modifier::BOLD);
    let mut lines: Vec<Line> = KEY_HELP
        .iter()
        .map(|(key, what)| {
            Line::from(vec![
                Span::styled(format!(" {key:<KEY_COLUMN$}"), key_style),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    let mut legend = vec![Span::raw(" map: ")];
    for (bound, label) in ERROR_DECADES {
        legend.push(Span::styled("■", Style::default().fg(error_colour(bound))));
        legend.push(Span::raw(format!("{label} ")));
    }
    lines.push(Line::from(legend));
    lines.push(Line::raw(
        "      x dead  ? suspected  ● done  · starting  ▀ = two slots per cell",
    ));
    lines.push(Line::raw(format!(
        " B = bit {} of {}, P = neighbour from the detail table",
        app.bit(),
        app.info().value_bits
    )));

    let width = lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 3;
    let height = lines.len() as u16 + 2;
    let popup = centred(area, width, height);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" keys (? to close) ")
        .border_style(Style::default().fg(Color::Cyan));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}

/// A `width` × `height` rectangle centred in `area`, shrunk to fit it.
fn centred(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}
