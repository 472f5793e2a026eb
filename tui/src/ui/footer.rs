//! The footer: the main keys, as many as fit.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::app::App;

/// Draws the footer. On narrow terminals the least important keys are left out (`?` lists them
/// all), never the help and quit keys.
pub fn render_footer(frame: &mut Frame, area: Rect, app: &App) {
    let pause = if app.paused() { "resume" } else { "pause" };
    let bit = format!("bit={}", app.bit());
    // (key, what it does, priority: lower stays longer)
    let items: [(&str, &str, u8); 14] = [
        ("←↑↓→/hjkl", "select", 3),
        ("x", "kill", 2),
        ("r", "random", 8),
        ("N", "node", 9),
        ("f", "flip flow", 5),
        ("m", "flip msg", 7),
        ("[/]", &bit, 6),
        ("d", "drop", 10),
        ("c", "cut", 11),
        ("s", "slow", 12),
        ("space", pause, 4),
        ("n", "new op", 13),
        ("?", "help", 0),
        ("q", "quit", 1),
    ];
    let width_of =
        |(key, label, _): &(&str, &str, u8)| key.chars().count() + label.chars().count() + 3;
    let mut by_priority: Vec<usize> = (0..items.len()).collect();
    by_priority.sort_by_key(|index| items[*index].2);
    let mut kept = vec![false; items.len()];
    let mut used = 0;
    for index in by_priority {
        let needed = width_of(&items[index]);
        if used + needed <= usize::from(area.width) {
            kept[index] = true;
            used += needed;
        }
    }
    let key_style = Style::default()
        .fg(Color::Yellow)
        .add_modifier(Modifier::BOLD);
    let mut spans = Vec::new();
    for ((key, label, _), _) in items.iter().zip(&kept).filter(|(_, kept)| **kept) {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(*key, key_style));
        spans.push(Span::raw(format!(" {label} ")));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
