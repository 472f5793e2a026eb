//! Contributor sets: which ranks' inputs a value contains, as sorted disjoint half-open ranges.
//!
//! In k-nomial numbering a subtree is one contiguous range, so a fault-free subtree value is one
//! range and every dead rank splits at most one range in two: the set stays small.

use std::ops::Range;

/// A set of ranks as sorted, disjoint, non-adjacent half-open ranges `[start, end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Contributors {
    ranges: Vec<(u32, u32)>,
}

/// Why a received contributor set was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContributorsError {
    /// An empty range, ranges out of order or touching, or a rank at or past the group size.
    Malformed,
}

impl Contributors {
    /// The empty set.
    pub fn new() -> Self {
        Contributors::default()
    }

    /// The set holding the single rank `rank`.
    pub fn single(rank: u32) -> Self {
        Contributors {
            ranges: vec![(rank, rank + 1)],
        }
    }

    /// The ranges, ascending.
    pub fn ranges(&self) -> impl Iterator<Item = Range<u32>> + '_ {
        self.ranges.iter().map(|&(a, b)| a..b)
    }

    /// Number of ranges.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// Number of ranks.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|&(a, b)| u64::from(b - a)).sum()
    }

    /// True when no rank is in the set.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether `rank` is in the set.
    pub fn contains(&self, rank: u32) -> bool {
        let at = self.ranges.partition_point(|&(_, end)| end <= rank);
        self.ranges.get(at).is_some_and(|&(start, _)| start <= rank)
    }

    /// Whether the two sets share no rank.
    pub fn is_disjoint(&self, other: &Contributors) -> bool {
        let (mut i, mut j) = (0, 0);
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a, b) = (self.ranges[i], other.ranges[j]);
            if a.1 <= b.0 {
                i += 1;
            } else if b.1 <= a.0 {
                j += 1;
            } else {
                return false;
            }
        }
        true
    }

    /// Whether every rank of `self` is in `other`.
    pub fn is_subset_of(&self, other: &Contributors) -> bool {
        covered_by(&self.ranges, other.ranges.iter().copied())
    }

    /// Whether every rank of `self` is in `a ∪ b`, without building the union: the engine asks
    /// this of every peer root at every step, and a top rank has hundreds of them.
    pub fn is_subset_of_union(&self, a: &Contributors, b: &Contributors) -> bool {
        covered_by(&self.ranges, Coalesced::new(&a.ranges, &b.ranges))
    }

    /// Adds every rank of `other`.
    pub fn union_with(&mut self, other: &Contributors) {
        // The common case (a piece already counted) needs no new vector.
        if other.is_subset_of(self) {
            return;
        }
        let mut merged: Vec<(u32, u32)> =
            Vec::with_capacity(self.ranges.len() + other.ranges.len());
        let (mut i, mut j) = (0, 0);
        while i < self.ranges.len() || j < other.ranges.len() {
            let take_self = match (self.ranges.get(i), other.ranges.get(j)) {
                (Some(a), Some(b)) => a.0 <= b.0,
                (Some(_), None) => true,
                _ => false,
            };
            let next = if take_self {
                i += 1;
                self.ranges[i - 1]
            } else {
                j += 1;
                other.ranges[j - 1]
            };
            match merged.last_mut() {
                Some(last) if next.0 <= last.1 => last.1 = last.1.max(next.1),
                _ => merged.push(next),
            }
        }
        self.ranges = merged;
    }

    /// Adds every rank of every set in `others` at once: one sort instead of one merge per set
    /// (a DATA to a peer root carries hundreds of pieces once many ranks have died).
    pub fn union_with_all<'a>(&mut self, others: impl IntoIterator<Item = &'a Contributors>) {
        let mut all = std::mem::take(&mut self.ranges);
        for other in others {
            all.extend_from_slice(&other.ranges);
        }
        all.sort_unstable();
        self.ranges = Coalesced::new(&all, &[]).collect();
    }

    /// Appends the wire form: the range count, then `start, end` per range.
    pub fn encode_into(&self, dst: &mut Vec<u32>) {
        dst.push(self.ranges.len() as u32);
        for &(start, end) in &self.ranges {
            dst.push(start);
            dst.push(end);
        }
    }

    /// Reads one set in wire form from the front of `words`, checking that every range is
    /// non-empty, ascending, non-touching and below `size`; returns the rest of `words`.
    pub fn decode(words: &[u32], size: u32) -> Result<(Contributors, &[u32]), ContributorsError> {
        let (&count, rest) = words.split_first().ok_or(ContributorsError::Malformed)?;
        let count = count as usize;
        let body = rest
            .get(..count.checked_mul(2).ok_or(ContributorsError::Malformed)?)
            .ok_or(ContributorsError::Malformed)?;
        let mut ranges = Vec::with_capacity(count);
        let mut floor = 0u32;
        for (i, pair) in body.chunks_exact(2).enumerate() {
            let (start, end) = (pair[0], pair[1]);
            let touches = i > 0 && start <= floor;
            if start >= end || end > size || touches {
                return Err(ContributorsError::Malformed);
            }
            floor = end;
            ranges.push((start, end));
        }
        if ranges.is_empty() {
            return Err(ContributorsError::Malformed);
        }
        Ok((Contributors { ranges }, &rest[2 * count..]))
    }
}

/// Whether every range of `ranges` lies inside one range of `cover`; both ascending, `cover`
/// coalesced (no two of its ranges overlap or touch).
fn covered_by(ranges: &[(u32, u32)], mut cover: impl Iterator<Item = (u32, u32)>) -> bool {
    let mut current = cover.next();
    for &(start, end) in ranges {
        while current.is_some_and(|(_, c_end)| c_end <= start) {
            current = cover.next();
        }
        match current {
            Some((c_start, c_end)) if c_start <= start && end <= c_end => {}
            _ => return false,
        }
    }
    true
}

/// The union of two range lists, ascending and coalesced, produced lazily.
struct Coalesced<'a> {
    a: &'a [(u32, u32)],
    b: &'a [(u32, u32)],
}

impl<'a> Coalesced<'a> {
    fn new(a: &'a [(u32, u32)], b: &'a [(u32, u32)]) -> Self {
        Coalesced { a, b }
    }

    /// The range of either list with the lowest start, taken off its list.
    fn pop_lowest(&mut self) -> Option<(u32, u32)> {
        let take_a = match (self.a.first(), self.b.first()) {
            (Some(x), Some(y)) => x.0 <= y.0,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let list = if take_a { &mut self.a } else { &mut self.b };
        let (&first, rest) = list.split_first()?;
        *list = rest;
        Some(first)
    }
}

impl Iterator for Coalesced<'_> {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        let (start, mut end) = self.pop_lowest()?;
        // Each step consumes one range of `a` or `b`: bounded by their total length.
        loop {
            let touching = |r: Option<&(u32, u32)>| r.is_some_and(|&(s, _)| s <= end);
            if !touching(self.a.first()) && !touching(self.b.first()) {
                return Some((start, end));
            }
            let (_, next_end) = self.pop_lowest()?;
            end = end.max(next_end);
        }
    }
}

impl FromIterator<u32> for Contributors {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut set = Contributors::new();
        for rank in iter {
            set.union_with(&Contributors::single(rank));
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn set_operations_match_a_bitmap(a in proptest::collection::vec(0u32..64, 0..20),
                                         b in proptest::collection::vec(0u32..64, 0..20),
                                         pick in proptest::collection::vec(any::<bool>(), 40),
                                         extra in proptest::option::of(0u32..64)) {
            let (sa, sb): (Contributors, Contributors) =
                (a.iter().copied().collect(), b.iter().copied().collect());
            let bits = |v: &[u32]| v.iter().fold(0u64, |m, &r| m | 1 << r);
            let (ba, bb) = (bits(&a), bits(&b));
            prop_assert_eq!(sa.is_disjoint(&sb), ba & bb == 0);
            prop_assert_eq!(sa.is_subset_of(&sb), ba & !bb == 0);
            // Mostly drawn from a and b, so that both answers occur.
            let c: Vec<u32> = a.iter().chain(&b).zip(&pick).filter(|(_, &p)| p).map(|(&r, _)| r)
                .chain(extra).collect();
            let sc: Contributors = c.iter().copied().collect();
            let bc = bits(&c);
            prop_assert_eq!(sc.is_subset_of_union(&sa, &sb), bc & !(ba | bb) == 0);
            prop_assert_eq!(sa.len(), u64::from(ba.count_ones()));
            for r in 0..64 {
                prop_assert_eq!(sa.contains(r), ba >> r & 1 == 1);
            }
            let mut u = sa.clone();
            u.union_with(&sb);
            let mut all = Contributors::new();
            all.union_with_all([&sa, &sb]);
            prop_assert_eq!(&all, &u);
            let bu = ba | bb;
            prop_assert_eq!(u.len(), u64::from(bu.count_ones()));
            let mut wire = Vec::new();
            u.encode_into(&mut wire);
            if !u.is_empty() {
                let decoded = Contributors::decode(&wire, 64);
                prop_assert_eq!(decoded.map(|(c, rest)| (c, rest.len())), Ok((u, 0)));
            }
        }
    }

    #[test]
    fn malformed_sets_are_refused() {
        let bad: [&[u32]; 6] = [
            &[],
            &[0],
            &[1, 3, 3],
            &[2, 0, 2, 2, 4],
            &[1, 0, 65],
            &[3, 0, 1],
        ];
        for words in bad {
            assert_eq!(
                Contributors::decode(words, 64),
                Err(ContributorsError::Malformed),
                "{words:?}"
            );
        }
    }
}
