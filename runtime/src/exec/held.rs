//! Frames of operations this rank has not started yet (a faster peer is already in them),
//! copied aside until their operation starts.

use std::collections::BTreeMap;

use ftcoll_algos::Rank;

use super::spares::Spares;

/// Bound on frames of later operations held aside (and, separately, on frames held for
/// services not installed yet).
pub(super) const MAX_EARLY_FRAMES: usize = 1 << 16;

/// One held frame: the sender's world rank (the group may change before the frame's operation
/// starts), the frame in 8-byte-aligned words, and its length in bytes.
pub(super) type HeldFrame = (Rank, Vec<u64>, usize);

/// Frames held by operation, bounded by [`MAX_EARLY_FRAMES`] in all.
#[derive(Default)]
pub(super) struct HeldFrames {
    by_op: BTreeMap<u64, Vec<HeldFrame>>,
    count: usize,
    /// Buffers of held frames and lists of them, kept for reuse: with more ranks than cores
    /// most frames arrive before their operation starts, and allocating for each one showed.
    spare_words: Spares<Vec<u64>>,
    spare_lists: Spares<Vec<HeldFrame>>,
}

impl HeldFrames {
    /// Whether another frame fits.
    #[inline]
    pub(super) fn has_room(&self) -> bool {
        self.count < MAX_EARLY_FRAMES
    }

    /// Copies `bytes`, from world rank `from`, aside for operation `op_id`. The caller checked
    /// [`HeldFrames::has_room`].
    pub(super) fn hold(&mut self, op_id: u64, from: Rank, bytes: &[u8]) {
        let words = self.spare_words.copy_of(bytes);
        let spare_lists = &mut self.spare_lists;
        self.by_op
            .entry(op_id)
            .or_insert_with(|| spare_lists.take())
            .push((from, words, bytes.len()));
        self.count += 1;
    }

    /// Takes the frames held for `op_id`, in arrival order. Most operations find none: the map
    /// is then left untouched.
    #[inline]
    pub(super) fn take(&mut self, op_id: u64) -> Vec<HeldFrame> {
        if self.count == 0 {
            return Vec::new();
        }
        let frames = self.by_op.remove(&op_id).unwrap_or_default();
        self.count -= frames.len();
        frames
    }

    /// Takes back a frame's buffer once its frame was handled.
    pub(super) fn recycle_words(&mut self, words: Vec<u64>) {
        self.spare_words.recycle(words);
    }

    /// Takes back an emptied list from [`HeldFrames::take`].
    pub(super) fn recycle_list(&mut self, list: Vec<HeldFrame>) {
        if list.capacity() > 0 {
            self.spare_lists.recycle(list);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_back_by_operation_in_arrival_order() {
        let mut held = HeldFrames::default();
        held.hold(5, Rank(1), &[1, 2, 3]);
        held.hold(6, Rank(2), &[4]);
        held.hold(5, Rank(3), &[5, 6]);
        let five = held.take(5);
        let senders: Vec<u32> = five.iter().map(|(r, _, _)| r.0).collect();
        assert_eq!(senders, [1, 3]);
        assert_eq!(five[1].2, 2);
        assert_eq!(held.count, 1);
        assert!(held.take(5).is_empty());
        assert_eq!(held.take(6).len(), 1);
        assert_eq!(held.count, 0);
    }
}
