//! The convergence chart: max, median and min relative error over time, on a log scale.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Chart, Dataset, GraphType, LegendPosition, Paragraph,
};
use ratatui::Frame;

use super::style::{format_error, format_seconds};
use crate::app::{App, ErrorPoint};

/// Seconds of history the chart spans.
pub const CHART_WINDOW_S: f64 = 120.0;
/// Errors below this are drawn at it: exact agreement has no logarithm.
pub const ERROR_FLOOR: f32 = 1e-17;

/// Which statistic of a history point a series plots.
type Statistic = fn(&ErrorPoint) -> f32;

/// The three series: name, colour, and statistic.
const SERIES: [(&str, Color, Statistic); 3] = [
    ("max", Color::Red, |point| point.max),
    ("median", Color::Yellow, |point| point.median),
    ("min", Color::Green, |point| point.min),
];

/// Draws the convergence chart panel.
pub fn render_chart(frame: &mut Frame, area: Rect, app: &App) {
    // The title doubles as a legend that survives any size.
    // With the latest values, so the convergence reads as text too (captures, tests).
    let latest = app.history().back();
    let mut title = vec![Span::raw(" relative error: ")];
    for (index, (name, colour, statistic)) in SERIES.iter().enumerate() {
        if index > 0 {
            title.push(Span::raw(" / "));
        }
        title.push(Span::styled(*name, Style::default().fg(*colour)));
        if let Some(point) = latest {
            title.push(Span::raw(format!(" {}", format_error(statistic(point)))));
        }
    }
    title.push(Span::raw(" "));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Line::from(title));
    let inner = block.inner(area);
    // Axes with labels need room; in a sliver show the latest numbers instead.
    if inner.width < 16 || inner.height < 4 {
        let text = app.history().back().map_or_else(String::new, |point| {
            format!(
                "max {} med {} min {}",
                format_error(point.max),
                format_error(point.median),
                format_error(point.min)
            )
        });
        frame.render_widget(Paragraph::new(text).block(block), area);
        return;
    }

    let (x_low, x_high) = time_window(app);
    let series: Vec<Vec<(f64, f64)>> = SERIES
        .iter()
        .map(|(_, _, statistic)| {
            app.history()
                .iter()
                .filter(|point| point.at_s >= x_low)
                .filter_map(|point| log_point(point.at_s, statistic(point)))
                .collect()
        })
        .collect();
    // The x axis line and its labels take two rows.
    let (y_low, y_high, y_labels) = y_axis(&series, inner.height.saturating_sub(2));
    let datasets = SERIES
        .iter()
        .zip(&series)
        .map(|((name, colour, _), points)| {
            Dataset::default()
                .name(*name)
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(*colour))
                .data(points)
        })
        .collect();
    let x_labels = vec![
        Span::raw(format_seconds(x_low)),
        Span::raw(format_seconds((x_low + x_high) / 2.0)),
        Span::raw(format_seconds(x_high)),
    ];
    let chart = Chart::new(datasets)
        .block(block)
        // Errors start high, so the lower left stays empty for the legend.
        .legend_position(Some(LegendPosition::BottomLeft))
        .hidden_legend_constraints((Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)))
        .x_axis(
            Axis::default()
                .style(Style::default().fg(Color::Gray))
                .bounds([x_low, x_high])
                .labels(x_labels),
        )
        .y_axis(
            Axis::default()
                .style(Style::default().fg(Color::Gray))
                .bounds([y_low, y_high])
                .labels(y_labels),
        );
    frame.render_widget(chart, area);
}

/// The last [`CHART_WINDOW_S`] seconds of history (never an empty interval).
fn time_window(app: &App) -> (f64, f64) {
    let history = app.history();
    let latest = history.back().map_or(0.0, |point| point.at_s);
    let first = history.front().map_or(0.0, |point| point.at_s);
    let high = if latest.is_finite() { latest } else { 0.0 };
    let mut low = if first.is_finite() { first } else { high };
    low = low.max(high - CHART_WINDOW_S);
    if high - low < 1e-9 {
        low = high - 1.0;
    }
    (low, high)
}

/// `(t, log10 error)`, with the error floored at [`ERROR_FLOOR`]; `None` when unknown.
fn log_point(at_s: f64, error: f32) -> Option<(f64, f64)> {
    if error.is_nan() || !at_s.is_finite() {
        return None;
    }
    let error = f64::from(error.abs().max(ERROR_FLOOR)).min(f64::MAX);
    Some((at_s, error.log10()))
}

/// Widest span of decades labelled decade by decade; errors are `f32`, so finite data spans at
/// most 17 + 39 decades and the fallback is only a guard.
const MAX_LABELLED_SPAN: i64 = 64;

/// Bounds and labels of the log axis: from the floor (10^-17, or lower data) to the largest
/// decade seen (at least 10^0). Ratatui spreads labels evenly, so there is one label slot per
/// decade, and only decades that are multiples of a power-of-two step carry text (`1e0`,
/// `1e-8`, `1e-16`): every label sits exactly on its decade, as many as the height allows.
fn y_axis(series: &[Vec<(f64, f64)>], graph_height: u16) -> (f64, f64, Vec<Span<'static>>) {
    let logs = series.iter().flatten().map(|(_, log)| *log);
    let data_max = logs.clone().fold(f64::NEG_INFINITY, f64::max);
    let data_min = logs.fold(f64::INFINITY, f64::min);
    let floor = f64::from(ERROR_FLOOR).log10().round();
    let low = if data_min.is_finite() {
        data_min.floor().min(floor)
    } else {
        floor
    };
    let high = if data_max.is_finite() {
        data_max.ceil().max(0.0)
    } else {
        0.0
    };
    let (low_decade, high_decade) = (low as i64, high as i64);
    let span = high_decade - low_decade;
    if span > MAX_LABELLED_SPAN {
        let labels = vec![
            Span::raw(format!("1e{low_decade}")),
            Span::raw(format!("1e{high_decade}")),
        ];
        return (low, high, labels);
    }
    let most_labels = i64::from(graph_height / 2).max(2);
    let multiples =
        |step: i64| high_decade.div_euclid(step) - (low_decade + step - 1).div_euclid(step) + 1;
    let step = [1, 2, 4, 8, 16, 32, 64]
        .into_iter()
        .find(|step| multiples(*step) <= most_labels)
        .unwrap_or(MAX_LABELLED_SPAN);
    let labels = (low_decade..=high_decade)
        .map(|decade| {
            if decade % step == 0 {
                Span::raw(format!("1e{decade}"))
            } else {
                Span::raw("")
            }
        })
        .collect();
    (low, high, labels)
}
