//! The message-rate sparkline.

use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::widgets::{Block, Borders, Sparkline};
use ratatui::Frame;

use super::style::format_rate;
use crate::app::App;

/// Draws the sparkline of messages per second, the latest rate in its title.
pub fn render_rate(frame: &mut Frame, area: Rect, app: &App) {
    let rates = app.message_rates();
    let title = match rates.back() {
        Some(rate) => format!(" messages {}/s ", format_rate(*rate)),
        None => " messages ".to_string(),
    };
    let block = Block::default().borders(Borders::ALL).title(title);
    // The sparkline draws from its first value: hand it the newest ones that fit.
    let width = usize::from(block.inner(area).width);
    let shown: Vec<u64> = rates
        .iter()
        .skip(rates.len().saturating_sub(width))
        .map(|rate| {
            if rate.is_finite() {
                rate.max(0.0) as u64
            } else {
                0
            }
        })
        .collect();
    let sparkline = Sparkline::default()
        .block(block)
        .style(Style::default().fg(Color::Cyan))
        .data(shown);
    frame.render_widget(sparkline, area);
}
