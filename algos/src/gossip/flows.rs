//! Sparse per-neighbour flow storage.
//!
//! A rank keeps a flow only for a neighbour it has exchanged with, so memory grows with the
//! partners a run actually uses, not with the degree: on a fully connected topology of 2^20
//! ranks a rank that ran 60 rounds holds about 120 flows, not a million. A sorted index finds a
//! peer's slot in O(log d); slots are appended, so a new partner costs one small index insert and
//! no move of flow data (the data move dominated large runs when slots were kept sorted).
//! Iteration is in slot order, i.e. in the order partners first appeared, which is deterministic.

use crate::rank::Rank;

use super::real::Real;

/// Flows of `width` elements per peer, plus a small per-peer tag `S` (PCF's role and round
/// counters).
#[derive(Clone, Debug, Default)]
pub struct FlowTable<T, S = ()> {
    width: usize,
    /// (peer, slot), sorted by peer.
    index: Vec<(u32, u32)>,
    /// The peer of each slot.
    peers: Vec<u32>,
    tags: Vec<S>,
    data: Vec<T>,
}

impl<T: Real, S: Copy + Default> FlowTable<T, S> {
    /// An empty table of flows of `width` elements.
    pub fn new(width: usize) -> Self {
        FlowTable {
            width,
            index: Vec::new(),
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

    fn range(&self, slot: usize) -> std::ops::Range<usize> {
        slot * self.width..(slot + 1) * self.width
    }

    fn slot(&self, peer: Rank) -> Option<usize> {
        let i = self.index.binary_search_by_key(&peer.0, |e| e.0).ok()?;
        Some(self.index[i].1 as usize)
    }

    /// The flow towards `peer`, if any.
    pub fn get(&self, peer: Rank) -> Option<&[T]> {
        let slot = self.slot(peer)?;
        Some(&self.data[self.range(slot)])
    }

    /// The flow towards `peer` and its tag, if any.
    pub fn get_mut(&mut self, peer: Rank) -> Option<(&mut [T], &mut S)> {
        let slot = self.slot(peer)?;
        let range = self.range(slot);
        Some((&mut self.data[range], &mut self.tags[slot]))
    }

    /// The flow towards `peer`, created as zeros with a default tag if absent.
    pub fn entry(&mut self, peer: Rank) -> (&mut [T], &mut S) {
        let slot = match self.index.binary_search_by_key(&peer.0, |e| e.0) {
            Ok(i) => self.index[i].1 as usize,
            Err(i) => {
                let slot = self.peers.len();
                self.index.insert(i, (peer.0, slot as u32));
                self.peers.push(peer.0);
                self.tags.push(S::default());
                self.data.extend(std::iter::repeat_n(T::ZERO, self.width));
                slot
            }
        };
        let range = self.range(slot);
        (&mut self.data[range], &mut self.tags[slot])
    }

    /// Drops the flow towards `peer`, returning whether there was one. The last slot moves into
    /// the freed one.
    pub fn remove(&mut self, peer: Rank) -> bool {
        let Ok(i) = self.index.binary_search_by_key(&peer.0, |e| e.0) else {
            return false;
        };
        let slot = self.index.remove(i).1 as usize;
        let last = self.peers.len() - 1;
        if slot != last {
            let moved = self.peers[last];
            let (head, tail) = self.data.split_at_mut(last * self.width);
            head[slot * self.width..(slot + 1) * self.width].copy_from_slice(&tail[..self.width]);
            if let Ok(j) = self.index.binary_search_by_key(&moved, |e| e.0) {
                self.index[j].1 = slot as u32;
            }
        }
        self.peers.swap_remove(slot);
        self.tags.swap_remove(slot);
        self.data.truncate(last * self.width);
        true
    }

    /// All flows, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (Rank, &[T], &S)> + '_ {
        self.peers
            .iter()
            .zip(&self.tags)
            .zip(self.data.chunks_exact(self.width.max(1)))
            .map(|((&p, tag), flow)| (Rank(p), flow, tag))
    }

    /// All flows, mutably, in slot order.
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
    fn lookups_survive_insertion_in_any_order_and_removal() {
        let mut table: FlowTable<f64, u8> = FlowTable::new(2);
        table.entry(Rank(9)).0.copy_from_slice(&[9.0, 9.5]);
        table.entry(Rank(2)).0.copy_from_slice(&[2.0, 2.5]);
        *table.entry(Rank(5)).1 = 7;
        table.entry(Rank(7)).0.copy_from_slice(&[7.0, 7.5]);
        assert_eq!(table.len(), 4);
        let peers: Vec<u32> = table.iter().map(|(p, _, _)| p.0).collect();
        assert_eq!(peers, [9, 2, 5, 7], "slot order: first appearance");
        assert_eq!(table.get(Rank(5)), Some(&[0.0, 0.0][..]));
        assert!(table.remove(Rank(9)));
        assert!(!table.remove(Rank(9)));
        assert_eq!(table.get(Rank(7)), Some(&[7.0, 7.5][..]), "the moved slot");
        assert_eq!(table.get(Rank(2)), Some(&[2.0, 2.5][..]));
        assert_eq!(table.get_mut(Rank(5)).map(|(_, t)| *t), Some(7));
        assert!(table.get(Rank(9)).is_none());
        assert!(table.remove(Rank(7)), "removing the last slot");
        assert_eq!(table.len(), 2);
        assert_eq!(table.get(Rank(2)), Some(&[2.0, 2.5][..]));
    }
}
