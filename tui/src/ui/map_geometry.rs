//! Where each rank goes on the rank map, as a pure function of the rank count and the area.
//! The map and selection movement share it, so that "up" is the rank drawn above.

/// How ranks are packed into character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapPacking {
    /// One rank per glyph, `cell_width` columns apart (2 leaves a gap that keeps glyphs apart).
    Glyphs {
        /// Columns per rank.
        cell_width: u16,
    },
    /// Two slots per character cell, drawn as `▀` with the upper slot as foreground and the
    /// lower as background; each slot aggregates `ranks_per_slot` consecutive ranks.
    HalfBlocks {
        /// Consecutive ranks summarised by one slot.
        ranks_per_slot: u32,
    },
}

/// The map's layout for `n` ranks in an area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapGeometry {
    /// How ranks are packed.
    pub packing: MapPacking,
    /// Ranks in one drawn row (for half blocks: one row of half-cell slots).
    pub row_ranks: u32,
}

/// Where a rank is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapPosition {
    /// Column of its character cell, relative to the map's inner area.
    pub x: u16,
    /// Row of its character cell, relative to the map's inner area.
    pub y: u16,
    /// For half blocks: whether it is in the upper half.
    pub upper: bool,
}

impl MapGeometry {
    /// The layout of `n` ranks in `width` × `height` cells, or `None` when nothing can be drawn
    /// (no ranks or an empty area). Prefers one glyph per rank, rows aligned to nodes when they
    /// fit; falls back to half blocks, aggregating consecutive ranks when even those run out.
    pub fn fit(n: u32, ranks_per_node: u32, width: u16, height: u16) -> Option<MapGeometry> {
        if n == 0 || width == 0 || height == 0 {
            return None;
        }
        let n = u64::from(n);
        for cell_width in [2u16, 1] {
            let columns = u64::from(width / cell_width);
            if let Some(row_ranks) = glyph_row(n, u64::from(ranks_per_node), columns, height) {
                return Some(MapGeometry {
                    packing: MapPacking::Glyphs { cell_width },
                    row_ranks: row_ranks as u32,
                });
            }
        }
        let slots = u64::from(width) * u64::from(height) * 2;
        let ranks_per_slot = n.div_ceil(slots);
        Some(MapGeometry {
            packing: MapPacking::HalfBlocks {
                ranks_per_slot: ranks_per_slot as u32,
            },
            row_ranks: (u64::from(width) * ranks_per_slot).min(u64::from(u32::MAX)) as u32,
        })
    }

    /// Consecutive ranks shown by one slot (1 for glyphs).
    pub fn ranks_per_slot(&self) -> u32 {
        match self.packing {
            MapPacking::Glyphs { .. } => 1,
            MapPacking::HalfBlocks { ranks_per_slot } => ranks_per_slot.max(1),
        }
    }

    /// Slots in one drawn row.
    pub fn row_slots(&self) -> u32 {
        (self.row_ranks / self.ranks_per_slot()).max(1)
    }

    /// Where rank `rank` is drawn (it may lie outside the area if `rank >= n`).
    pub fn position(&self, rank: u32) -> MapPosition {
        let slot = rank / self.ranks_per_slot();
        let row = slot / self.row_slots();
        let column = slot % self.row_slots();
        match self.packing {
            MapPacking::Glyphs { cell_width } => MapPosition {
                x: clamp_u16(u64::from(column) * u64::from(cell_width)),
                y: clamp_u16(u64::from(row)),
                upper: true,
            },
            MapPacking::HalfBlocks { .. } => MapPosition {
                x: clamp_u16(u64::from(column)),
                y: clamp_u16(u64::from(row / 2)),
                upper: row.is_multiple_of(2),
            },
        }
    }
}

/// Ranks per row for one-glyph-per-rank packing in `columns` × `height`, or `None` if the ranks
/// do not fit. A row holds whole nodes when it can, so that each node reads as a run.
fn glyph_row(n: u64, ranks_per_node: u64, columns: u64, height: u16) -> Option<u64> {
    if columns == 0 {
        return None;
    }
    let fits = |row: u64| n.div_ceil(row) <= u64::from(height);
    if ranks_per_node >= 2 {
        let mut row = ranks_per_node;
        while row <= columns {
            if fits(row) {
                return Some(row);
            }
            row += ranks_per_node;
        }
    }
    fits(columns).then_some(columns)
}

fn clamp_u16(value: u64) -> u16 {
    value.min(u64::from(u16::MAX)) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_jobs_get_node_rows() {
        let geometry = MapGeometry::fit(16, 4, 46, 9);
        assert_eq!(
            geometry,
            Some(MapGeometry {
                packing: MapPacking::Glyphs { cell_width: 2 },
                row_ranks: 4
            })
        );
        let position = MapGeometry::fit(16, 4, 46, 9).map(|g| g.position(6));
        assert_eq!(
            position,
            Some(MapPosition {
                x: 4,
                y: 1,
                upper: true
            })
        );
    }

    #[test]
    fn large_jobs_aggregate_into_half_blocks() {
        let geometry = MapGeometry::fit(4096, 64, 46, 9);
        let Some(geometry) = geometry else {
            panic!("no geometry")
        };
        // 46 × 9 cells hold 828 slots: 5 ranks per slot.
        assert_eq!(geometry.ranks_per_slot(), 5);
        assert_eq!(geometry.row_ranks, 230);
        let last = geometry.position(4095);
        assert!(last.x < 46 && last.y < 9);
    }

    #[test]
    fn nothing_to_draw() {
        assert_eq!(MapGeometry::fit(0, 4, 10, 10), None);
        assert_eq!(MapGeometry::fit(10, 4, 0, 10), None);
        assert_eq!(MapGeometry::fit(10, 4, 10, 0), None);
        assert!(MapGeometry::fit(u32::MAX, 0, 1, 1).is_some());
    }
}
