//! The contributions a rank holds, kept exactly-once.
//!
//! A *piece* is a value with the set of ranks whose inputs it contains. A rank holds pairwise
//! disjoint pieces. Pieces are made only when a rank sends its subtree up (it merges what it
//! holds into one piece), so along the recovery paths of 004 two pieces are either disjoint or
//! one contains the other (they are made on the same tree path). An arriving piece is therefore
//! skipped when it brings nothing new, added when it is disjoint from what is held, and replaces
//! the held pieces it contains otherwise; a piece that overlaps held contributions partially
//! would count some ranks twice, so it is refused and counted.

use crate::values::{ReduceOp, Values, ValuesRef};

use super::ranges::Contributors;

/// A value and the ranks it contains.
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    /// Whose inputs `value` contains.
    pub contributors: Contributors,
    /// The reduced value.
    pub value: Values,
}

/// What happened to an arriving piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Absorbed {
    /// It brought no contribution not already held.
    Nothing,
    /// It was added (disjoint) or replaced the held pieces it contains.
    Added,
    /// It overlaps held contributions only in part; refused.
    Conflict,
}

/// A held piece and whether it came from a peer root (kept apart when sending to peers) or
/// from this rank's own subtree.
#[derive(Clone, Debug, PartialEq)]
struct Held {
    piece: Piece,
    from_peer: bool,
}

/// The pieces one rank holds: pairwise disjoint, at most one per contributing rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PieceSet {
    held: Vec<Held>,
    cover: Contributors,
    /// The union of the own-subtree pieces' contributors.
    own_cover: Contributors,
    /// Counts the changes, so that answers derived from the set can be cached.
    generation: u64,
}

impl PieceSet {
    /// The union of the held contributor sets.
    pub fn cover(&self) -> &Contributors {
        &self.cover
    }

    /// The union of the contributor sets of the own-subtree pieces (not from peer roots).
    pub fn own_cover(&self) -> &Contributors {
        &self.own_cover
    }

    /// Changes with every piece taken in.
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// Takes in `piece` (see the module docs).
    pub fn absorb(&mut self, piece: Piece, from_peer: bool) -> Absorbed {
        if piece.contributors.is_empty() || piece.contributors.is_subset_of(&self.cover) {
            return Absorbed::Nothing;
        }
        if !piece.contributors.is_disjoint(&self.cover) {
            let inside = |h: &Held| h.piece.contributors.is_subset_of(&piece.contributors);
            let rest_disjoint = self
                .held
                .iter()
                .filter(|h| !inside(h))
                .all(|h| h.piece.contributors.is_disjoint(&piece.contributors));
            if !rest_disjoint {
                return Absorbed::Conflict;
            }
            self.held.retain(|h| !inside(h));
        }
        self.cover.union_with(&piece.contributors);
        self.held.push(Held { piece, from_peer });
        // A peer piece may have replaced own pieces it contains: rebuilt, not extended.
        let mut own = Contributors::new();
        own.union_with_all(
            self.held
                .iter()
                .filter(|h| !h.from_peer)
                .map(|h| &h.piece.contributors),
        );
        self.own_cover = own;
        self.generation += 1;
        Absorbed::Added
    }

    /// Drops the held values, keeping who they count: once the rank holds the final result,
    /// it answers with that, and the contributor sets alone still say what peers lack. A
    /// finished operation is served for a while; its pieces would keep a few copies of a long
    /// vector alive for nothing.
    pub fn shed_values(&mut self) {
        for held in &mut self.held {
            held.piece.value = empty_like(&held.piece.value);
        }
    }

    /// All held pieces combined into one (`None` when nothing is held).
    pub fn combined(&self, op: ReduceOp) -> Option<Piece> {
        combine_all(self.held.iter().map(|h| &h.piece), op)
    }

    /// The pieces to send to a peer root: the own-subtree pieces combined into one, then every
    /// peer piece as it came.
    pub fn for_peers(&self, op: ReduceOp) -> Vec<Piece> {
        let own = self.held.iter().filter(|h| !h.from_peer).map(|h| &h.piece);
        let mut list: Vec<Piece> = combine_all(own, op).into_iter().collect();
        list.extend(
            self.held
                .iter()
                .filter(|h| h.from_peer)
                .map(|h| h.piece.clone()),
        );
        list
    }
}

/// Combines pieces (disjoint by construction) into one.
fn combine_all<'a>(pieces: impl Iterator<Item = &'a Piece>, op: ReduceOp) -> Option<Piece> {
    let mut acc: Option<Piece> = None;
    // The sets are merged once at the end: hundreds of pieces after many deaths.
    let mut sets = Vec::new();
    for piece in pieces {
        match &mut acc {
            None => acc = Some(piece.clone()),
            Some(sum) => {
                sets.push(&piece.contributors);
                // Shapes were checked when the pieces arrived.
                let combined = sum.value.combine(op, piece.value.as_ref());
                debug_assert!(combined.is_ok(), "piece shapes were validated on arrival");
            }
        }
    }
    if let Some(sum) = &mut acc {
        sum.contributors.union_with_all(sets);
    }
    acc
}

/// Appends `src` to `dst` (same element type; checked by the caller).
pub(crate) fn append_values(dst: &mut Values, src: &Values) {
    let appended = dst.extend_from(src.as_ref());
    debug_assert!(
        appended.is_ok(),
        "pieces of one operation share an element type"
    );
}

/// An empty vector of the element type of `like`.
pub(crate) fn empty_like(like: &Values) -> Values {
    like.empty_like()
}

/// Elements `start..start + len` of `values` (the caller checked the bounds).
pub(crate) fn slice_values(values: ValuesRef<'_>, start: usize, len: usize) -> Values {
    values.slice(start..start + len).map_or_else(
        || values.to_owned_values().empty_like(),
        |v| v.to_owned_values(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(ranks: &[u32]) -> Piece {
        let mut value = vec![0.0; 8];
        for &r in ranks {
            value[r as usize] = 1.0;
        }
        Piece {
            contributors: ranks.iter().copied().collect(),
            value: Values::F64(value),
        }
    }

    #[test]
    fn subsets_are_skipped_supersets_replace_and_partial_overlaps_are_refused() {
        let mut set = PieceSet::default();
        assert_eq!(set.absorb(piece(&[1]), false), Absorbed::Added);
        assert_eq!(set.absorb(piece(&[2, 3]), false), Absorbed::Added);
        assert_eq!(set.absorb(piece(&[3]), false), Absorbed::Nothing);
        assert_eq!(set.absorb(piece(&[2, 3, 4]), true), Absorbed::Added);
        assert_eq!(set.absorb(piece(&[1, 5]), true), Absorbed::Added);
        assert_eq!(set.absorb(piece(&[4, 6]), false), Absorbed::Conflict);
        let all = set.combined(ReduceOp::Sum);
        assert_eq!(all, Some(piece(&[1, 2, 3, 4, 5])));
        assert_eq!(set.for_peers(ReduceOp::Sum).len(), 2);
    }
}
