//! The failure log: detected failures, injected faults and notices, newest at the bottom.

use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use crate::app::App;
use crate::model::{LogEntry, LogKind};

/// Draws the log panel: as many of the newest entries as fit, each wrapped to the panel's
/// width (continuation lines indented under the text).
pub fn render_log(frame: &mut Frame, area: Rect, app: &App) {
    let block = Block::default().borders(Borders::ALL).title(" events ");
    let inner = block.inner(area);
    let room = usize::from(inner.height);
    let width = usize::from(inner.width);
    let mut lines: Vec<Line> = Vec::new();
    // Newest first until the panel is full; the log is bounded, so is this loop.
    for entry in app.log_entries().iter().rev() {
        if lines.len() >= room {
            break;
        }
        let mut wrapped = log_lines(entry, width);
        wrapped.append(&mut lines);
        lines = wrapped;
    }
    let excess = lines.len().saturating_sub(room);
    lines.drain(..excess);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// Width of the `[ 12.3s] ` prefix.
const PREFIX: usize = 9;

fn log_lines(entry: &LogEntry, width: usize) -> Vec<Line<'static>> {
    let style = match entry.kind {
        LogKind::Failure => Style::default().fg(Color::Red),
        LogKind::Injected => Style::default().fg(Color::Yellow),
        LogKind::Info => Style::default(),
    };
    let at = if entry.at_s.is_finite() {
        format!("{:5.1}", entry.at_s)
    } else {
        "    ?".to_string()
    };
    let room = width.saturating_sub(PREFIX).max(8);
    wrap(&entry.text, room)
        .into_iter()
        .enumerate()
        .map(|(i, piece)| {
            let lead = if i == 0 {
                format!("[{at}s] ")
            } else {
                " ".repeat(PREFIX)
            };
            Line::styled(format!("{lead}{piece}"), style)
        })
        .collect()
}

/// Splits `text` into pieces of at most `width` characters, at spaces where it can.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    for word in text.split(' ') {
        let mut word: String = word.to_string();
        // A word longer than the width is cut; each pass shortens it.
        while word.chars().count() > width {
            if !current.is_empty() {
                pieces.push(std::mem::take(&mut current));
            }
            let head: String = word.chars().take(width).collect();
            word = word.chars().skip(width).collect();
            pieces.push(head);
        }
        let needed =
            current.chars().count() + usize::from(!current.is_empty()) + word.chars().count();
        if needed > width && !current.is_empty() {
            pieces.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(&word);
    }
    if !current.is_empty() || pieces.is_empty() {
        pieces.push(current);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wraps_at_spaces_and_cuts_long_words() {
        assert_eq!(
            wrap("rank 5 failed (killed by signal 9)", 14),
            ["rank 5 failed", "(killed by", "signal 9)"]
        );
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 4), [""]);
    }
}
