//! Sparse per-neighbour flow storage.
//!
//! A rank keeps a flow only for a neighbour it has exchanged with, so memory grows with the
//! partners a run actually uses, not with the degree: on a fully connected topology of 2^20
//! ranks a rank that ran 60 rounds holds about 120 flows, not a million. Peers are kept sorted
//! for O(log d) lookup; the values of all flows share one arena.

use crate::rank::Rank;

use super::real::Real;

/// Flows of `width` elements per peer, plus a small per-peer tag `S` (PCF's role and round
/// counters).
#[derive(Clone, Debug, Default)]
pub struct FlowTable<T, S = ()> {
    width: usize,
    peers: Vec<u32>,
    tags: Vec<S>,
    data: Vec<T>,
}

impl<T: Real, S: Copy + Default> FlowTable<T, S> {
    /// An empty table of flows of `width` elements.
    pub fn new(width: usize) -> Self {
        FlowTable {
            width,
            peers: Vec::new(),
            tags: Vec::new(),
            data: Vec::new(),
        }
    }

    /// Elements per flow.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Number of peers with a flow.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// True when no flow is stored.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    fn range(&self, index: usize) -> std::ops::Range<usize> {
        index * self.width..(index + 1) * self.width
    }

    /// The flow towards `peer`, if any.
    pub fn get(&self, peer: Rank) -> Option<&[T]> {
        let i = self.peers.binary_search(&peer.0).ok()?;
        Some(&self.data[self.range(i)])
    }

    /// The flow towards `peer` and its tag, if any.
    pub fn get_mut(&mut self, peer: Rank) -> Option<(&mut [T], &mut S)> {
        let i = self.peers.binary_search(&peer.0).ok()?;
        let range = self.range(i);
        Some((&mut self.data[range], &mut self.tags[i]))
    }

    /// The flow towards `peer`, created as zeros with a default tag if absent.
    pub fn entry(&mut self, peer: Rank) -> (&mut [T], &mut S) {
        let i = match self.peers.binary_search(&peer.0) {
            Ok(i) => i,
            Err(i) => {
                self.peers.insert(i, peer.0);
                self.tags.insert(i, S::default());
                let at = i * self.width;
                self.data
                    .splice(at..at, std::iter::repeat_n(T::ZERO, self.width));
                i
            }
        };
        let range = self.range(i);
        (&mut self.data[range], &mut self.tags[i])
    }

    /// Drops the flow towards `peer`, returning whether there was one.
    pub fn remove(&mut self, peer: Rank) -> bool {
        match self.peers.binary_search(&peer.0) {
            Ok(i) => {
                self.peers.remove(i);
                self.tags.remove(i);
                let range = self.range(i);
                self.data.drain(range);
                true
            }
            Err(_) => false,
        }
    }

    /// All flows in ascending peer order.
    pub fn iter(&self) -> impl Iterator<Item = (Rank, &[T], &S)> + '_ {
        self.peers
            .iter()
            .zip(&self.tags)
            .zip(self.data.chunks_exact(self.width.max(1)))
            .map(|((&p, tag), flow)| (Rank(p), flow, tag))
    }

    /// All flows, mutably, in ascending peer order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (Rank, &mut [T], &mut S)> + '_ {
        self.peers
            .iter()
            .zip(self.tags.iter_mut())
            .zip(self.data.chunks_exact_mut(self.width.max(1)))
            .map(|((&p, tag), flow)| (Rank(p), flow, tag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_stay_sorted_and_removal_keeps_the_others() {
        let mut table: FlowTable<f64, u8> = FlowTable::new(2);
        table.entry(Rank(9)).0.copy_from_slice(&[9.0, 9.5]);
        table.entry(Rank(2)).0.copy_from_slice(&[2.0, 2.5]);
        *table.entry(Rank(5)).1 = 7;
        assert_eq!(table.len(), 3);
        let peers: Vec<u32> = table.iter().map(|(p, _, _)| p.0).collect();
        assert_eq!(peers, [2, 5, 9]);
        assert_eq!(table.get(Rank(5)), Some(&[0.0, 0.0][..]));
        assert!(table.remove(Rank(5)));
        assert!(!table.remove(Rank(5)));
        assert_eq!(table.get(Rank(9)), Some(&[9.0, 9.5][..]));
        assert_eq!(table.get(Rank(2)), Some(&[2.0, 2.5][..]));
        assert!(table.get_mut(Rank(5)).is_none());
    }
}
