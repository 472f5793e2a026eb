//! What a protocol shows of itself in the console's detail panel.
//!
//! Each algorithm contributes its own view: a few named fields and at most one table (gossip:
//! one row per neighbour's flow). Values are text so the view travels over the control plane
//! and renders without knowing the algorithm. Views are built only for the one rank a console
//! watches, at a bounded rate, so their allocations stay off the hot path.

/// Most rows a table carries (a rank of a 4096-node full graph has 4095 neighbours; the panel
/// shows a screenful).
pub const MAX_TABLE_ROWS: usize = 64;
/// Most fields a view carries.
pub const MAX_FIELDS: usize = 24;

/// A protocol's detail view of one rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inspection {
    /// `(name, value)` pairs, in display order.
    pub fields: Vec<(String, String)>,
    /// A table, if the algorithm has per-peer state.
    pub table: Option<InspectTable>,
    /// Peers the console may target (flip a flow, cut a link), in table order.
    pub neighbours: Vec<u32>,
}

/// Rows of per-peer state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InspectTable {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`; at most [`MAX_TABLE_ROWS`].
    pub rows: Vec<Vec<String>>,
    /// Rows left out to respect the bound.
    pub omitted: u32,
}

impl Inspection {
    /// Adds a field, unless the view is full.
    pub fn field(&mut self, name: &str, value: impl std::fmt::Display) {
        if self.fields.len() < MAX_FIELDS {
            self.fields.push((name.to_string(), value.to_string()));
        }
    }
}

impl InspectTable {
    /// An empty table with these columns.
    pub fn new(columns: &[&str]) -> InspectTable {
        InspectTable {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
            omitted: 0,
        }
    }

    /// Adds a row, or counts it as omitted past the bound.
    pub fn row(&mut self, cells: Vec<String>) {
        if self.rows.len() < MAX_TABLE_ROWS {
            self.rows.push(cells);
        } else {
            self.omitted = self.omitted.saturating_add(1);
        }
    }
}

/// Formats a value compactly for a panel: scientific for very small or large magnitudes.
pub fn short_number(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs();
    if (1e-3..1e6).contains(&magnitude) {
        format!("{value:.6}")
    } else {
        format!("{value:.4e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_hold() {
        let mut view = Inspection::default();
        for i in 0..100 {
            view.field("f", i);
        }
        assert_eq!(view.fields.len(), MAX_FIELDS);
        let mut table = InspectTable::new(&["a"]);
        for i in 0..100 {
            table.row(vec![i.to_string()]);
        }
        assert_eq!(table.rows.len(), MAX_TABLE_ROWS);
        assert_eq!(table.omitted, 100 - MAX_TABLE_ROWS as u32);
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(short_number(0.5), "0.500000");
        assert_eq!(short_number(1.5e-12), "1.5000e-12");
        assert_eq!(short_number(0.0), "0");
    }
}
