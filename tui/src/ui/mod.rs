//! Drawing the console: one function per panel, composed by [`render`], all pure functions of
//! the [`App`].

mod chart;
mod detail;
mod footer;
mod header;
mod help;
mod log_panel;
mod map;
mod map_geometry;
mod rate;
mod style;

use ratatui::backend::TestBackend;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::{Frame, Terminal};

use crate::app::App;

pub use chart::{render_chart, CHART_WINDOW_S, ERROR_FLOOR};
pub use detail::render_detail;
pub use footer::render_footer;
pub use header::{header_height, render_header};
pub use help::render_help;
pub use log_panel::render_log;
pub use map::{map_geometry, map_inner, render_map};
pub use map_geometry::{MapGeometry, MapPacking, MapPosition};
pub use rate::render_rate;
pub use style::{error_colour, format_error, format_rate, format_seconds};

/// Where each panel goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsoleAreas {
    /// Job identity and progress, top.
    pub header: Rect,
    /// Convergence chart, upper left.
    pub chart: Rect,
    /// Rank map, lower left.
    pub map: Rect,
    /// Selected rank's detail, upper right.
    pub detail: Rect,
    /// Event log, middle right.
    pub log: Rect,
    /// Message-rate sparkline, lower right.
    pub rate: Rect,
    /// Key reminder, bottom.
    pub footer: Rect,
}

/// The console's layout in `area`: header on top, footer at the bottom; the left 60% holds the
/// chart above the rank map, the right 40% the detail, the log and the message rate.
pub fn console_areas(app: &App, area: Rect) -> ConsoleAreas {
    let [header, body, footer] = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(header_height(app, area.width)),
            Constraint::Min(0),
            Constraint::Length(1),
        ])
        .areas(area);
    let [left, right] = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(60), Constraint::Percentage(40)])
        .areas(body);
    let [chart, map] = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Fill(1), Constraint::Fill(1)])
        .areas(left);
    let [detail, log, rate] = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Fill(3),
            Constraint::Fill(2),
            Constraint::Length(4),
        ])
        .areas(right);
    ConsoleAreas {
        header,
        chart,
        map,
        detail,
        log,
        rate,
        footer,
    }
}

/// Draws the whole console; a pure function of the App.
pub fn render(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let areas = console_areas(app, area);
    render_header(frame, areas.header, app);
    render_chart(frame, areas.chart, app);
    render_map(frame, areas.map, app);
    render_detail(frame, areas.detail, app);
    render_log(frame, areas.log, app);
    render_rate(frame, areas.rate, app);
    render_footer(frame, areas.footer, app);
    if app.help_visible() {
        render_help(frame, area, app);
    }
}

/// The console as plain text of the given size, for README captures and headless dumps: lines
/// joined by `'\n'`, trailing spaces trimmed.
pub fn capture(app: &App, width: u16, height: u16) -> String {
    capture_with(width, height, |frame| render(frame, app))
}

/// Plain text of whatever `draw` puts on a `width` × `height` screen (used for single panels).
pub fn capture_with(width: u16, height: u16, draw: impl FnOnce(&mut Frame)) -> String {
    let Ok(mut terminal) = Terminal::new(TestBackend::new(width, height)) else {
        return String::new();
    };
    if terminal.draw(draw).is_err() {
        return String::new();
    }
    buffer_text(terminal.backend().buffer())
}

/// A buffer's text: one line per row, trailing spaces trimmed.
pub fn buffer_text(buffer: &ratatui::buffer::Buffer) -> String {
    let width = usize::from(buffer.area.width).max(1);
    buffer
        .content()
        .chunks(width)
        .map(|row| {
            let line: String = row
                .iter()
                .filter(|cell| !cell.skip)
                .map(|cell| cell.symbol())
                .collect();
            line.trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Ranks in one row of the rank map as drawn at the app's viewport: how far up and down move.
pub(crate) fn map_row_ranks(app: &App) -> u32 {
    let (width, height) = app.viewport();
    let areas = console_areas(app, Rect::new(0, 0, width, height));
    map_geometry(app, areas.map).map_or(1, |geometry| geometry.row_ranks)
}
