//! The rank map: every rank as a cell coloured by its error decade.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

use super::map_geometry::{MapGeometry, MapPacking};
use super::style::{error_colour, ERROR_DECADES};
use crate::app::App;
use crate::model::RankState;

/// The area inside the map's border, where ranks are drawn.
pub fn map_inner(area: Rect) -> Rect {
    Block::default().borders(Borders::ALL).inner(area)
}

/// The map's layout for the app's job in the map panel `area` (border included).
pub fn map_geometry(app: &App, area: Rect) -> Option<MapGeometry> {
    let inner = map_inner(area);
    MapGeometry::fit(
        app.info().n,
        app.info().ranks_per_node,
        inner.width,
        inner.height,
    )
}

/// Draws the rank map panel.
pub fn render_map(frame: &mut Frame, area: Rect, app: &App) {
    let geometry = map_geometry(app, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(map_title(app, geometry))
        .title_bottom(legend());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(geometry) = geometry else {
        return;
    };
    let buffer = frame.buffer_mut();
    match geometry.packing {
        MapPacking::Glyphs { .. } => draw_glyphs(buffer, inner, app, geometry),
        MapPacking::HalfBlocks { .. } => draw_half_blocks(buffer, inner, app, geometry),
    }
}

fn map_title(app: &App, geometry: Option<MapGeometry>) -> String {
    let n = app.info().n;
    if n == 0 {
        return " no ranks ".to_string();
    }
    match geometry.map(|g| g.packing) {
        Some(MapPacking::HalfBlocks { ranks_per_slot }) if ranks_per_slot > 1 => {
            format!(" ranks 0..{}, {ranks_per_slot} per half-cell ", n - 1)
        }
        Some(MapPacking::HalfBlocks { .. }) => format!(" ranks 0..{}, 2 per cell ", n - 1),
        _ => format!(" ranks 0..{} ", n - 1),
    }
}

fn legend() -> Line<'static> {
    let mut spans = vec![Span::raw(" ")];
    for (bound, label) in ERROR_DECADES {
        spans.push(Span::styled("■", Style::default().fg(error_colour(bound))));
        spans.push(Span::raw(format!("{label} ")));
    }
    spans.push(Span::styled("x", dead_style()));
    spans.push(Span::raw(" dead "));
    spans.push(Span::styled("?", suspected_style()));
    spans.push(Span::raw(" susp "));
    Line::from(spans)
}

fn dead_style() -> Style {
    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
}

fn suspected_style() -> Style {
    Style::default()
        .fg(Color::LightMagenta)
        .add_modifier(Modifier::BOLD)
}

/// Glyph and style of one rank drawn on its own.
fn rank_glyph(state: RankState, error: f32) -> (&'static str, Style) {
    let coloured = Style::default().fg(error_colour(error));
    match state {
        RankState::Dead => ("x", dead_style()),
        RankState::Suspected => ("?", suspected_style()),
        RankState::Starting => ("·", coloured),
        RankState::Running => ("■", coloured),
        RankState::Done => ("●", coloured),
    }
}

fn put(buffer: &mut Buffer, inner: Rect, x: u16, y: u16, symbol: &str, style: Style) {
    if x >= inner.width || y >= inner.height {
        return;
    }
    if let Some(cell) = buffer.cell_mut((inner.x + x, inner.y + y)) {
        cell.set_symbol(symbol);
        cell.set_style(style);
    }
}

fn draw_glyphs(buffer: &mut Buffer, inner: Rect, app: &App, geometry: MapGeometry) {
    for rank in 0..app.info().n {
        let position = geometry.position(rank);
        let (symbol, mut style) = rank_glyph(app.rank_state(rank), app.rank_error(rank));
        if rank == app.selected() {
            style = style.add_modifier(Modifier::REVERSED);
        }
        put(buffer, inner, position.x, position.y, symbol, style);
    }
}

/// What one half-cell slot shows of its ranks.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    present: bool,
    dead: bool,
    suspected: bool,
    /// Worst finite (or infinite) error of its live ranks; NaN when none is known.
    worst: Option<f32>,
}

impl Slot {
    fn absorb(&mut self, state: RankState, error: f32) {
        self.present = true;
        match state {
            RankState::Dead => self.dead = true,
            RankState::Suspected => self.suspected = true,
            _ => {}
        }
        if state != RankState::Dead && !error.is_nan() {
            let error = error.abs();
            self.worst = Some(self.worst.map_or(error, |worst| worst.max(error)));
        }
    }

    fn colour(&self) -> Color {
        if self.present {
            error_colour(self.worst.unwrap_or(f32::NAN))
        } else {
            Color::Reset
        }
    }
}

fn draw_half_blocks(buffer: &mut Buffer, inner: Rect, app: &App, geometry: MapGeometry) {
    let columns = usize::from(inner.width);
    let slot_count = columns * usize::from(inner.height) * 2;
    let mut slots = vec![Slot::default(); slot_count];
    let per_slot = geometry.ranks_per_slot();
    for rank in 0..app.info().n {
        if let Some(slot) = slots.get_mut((rank / per_slot) as usize) {
            slot.absorb(app.rank_state(rank), app.rank_error(rank));
        }
    }
    for y in 0..inner.height {
        for x in 0..inner.width {
            let upper_index = usize::from(y) * 2 * columns + usize::from(x);
            let upper = slots.get(upper_index).copied().unwrap_or_default();
            let lower = slots
                .get(upper_index + columns)
                .copied()
                .unwrap_or_default();
            if !upper.present {
                continue;
            }
            // A dead or suspected rank must stand out even inside a block of healthy ones,
            // so the marker replaces the two colours of the cell.
            let (symbol, style) = if upper.dead || lower.dead {
                ("x", dead_style())
            } else if upper.suspected || lower.suspected {
                ("?", suspected_style())
            } else {
                ("▀", Style::default().fg(upper.colour()).bg(lower.colour()))
            };
            put(buffer, inner, x, y, symbol, style);
        }
    }
    // The selected rank's cell shows that rank's own glyph, reversed.
    let selected = app.selected();
    if selected < app.info().n {
        let position = geometry.position(selected);
        let (symbol, style) = rank_glyph(app.rank_state(selected), app.rank_error(selected));
        let symbol = if symbol == "·" { "■" } else { symbol };
        let style = style.add_modifier(Modifier::REVERSED);
        put(buffer, inner, position.x, position.y, symbol, style);
    }
}
