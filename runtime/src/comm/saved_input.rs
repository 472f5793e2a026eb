//! The input a fault-tolerant single-copy ring restarts from: each element copied just before
//! the ring first writes it, rather than the whole vector before the ring starts.
//!
//! The ring reads a block of its own vector in the same pass that combines into it, so a copy
//! taken there costs one extra write stream while the block is in cache; a copy of the whole
//! vector up front reads and writes it all once more (16 MiB at n = 2 on the development VM:
//! 4.2 ms for the fault-tolerant call against 2.9 ms for the plain ring). An element no
//! attempt wrote is still the input in the vector, so a retry finds every element in one of
//! the two places, and writes back only what was written.

use std::ops::Range;

use ftcoll_algos::values::Element;

/// The kept input of one operation (see the module docs).
pub(crate) struct SavedInput<'a> {
    /// The copy, in words so that the communicator keeps it from call to call whatever the
    /// element type.
    words: &'a mut Vec<u64>,
    /// The elements copied so far: disjoint, ascending, never adjacent. The ring writes its
    /// blocks in ring order, so these stay a handful of ranges.
    saved: Vec<Range<usize>>,
}

impl<'a> SavedInput<'a> {
    pub(crate) fn new(words: &'a mut Vec<u64>) -> Self {
        SavedInput {
            words,
            saved: Vec::new(),
        }
    }

    /// Readies the copy for an operation over `data`: nothing is copied yet.
    pub(crate) fn reset<T: Element>(&mut self, data: &[T]) {
        // Sized once for a loop of calls of one size: every element is written before a
        // retry reads it. In huge pages: a killed rank is reaped only once its memory is freed.
        let words = std::mem::size_of_val(data).div_ceil(8);
        crate::transport::huge_pages::resize(self.words, words, 0);
        self.saved.clear();
    }

    /// Saves `part`, the elements of the vector from `at`, just before the ring writes them:
    /// the elements not saved yet, which still hold the input.
    pub(crate) fn save<T: Element>(&mut self, at: usize, part: &[T]) {
        let range = at..at + part.len();
        let copy: &mut [T] = bytemuck::cast_slice_mut(&mut self.words[..]);
        let mut copy_gap = |gap: Range<usize>| {
            if let (Some(to), Some(from)) = (
                copy.get_mut(gap.clone()),
                part.get(gap.start - at..gap.end - at),
            ) {
                // Read back only after a failure: streamed past the cache.
                crate::transport::stream_copy::copy(to, from);
            }
        };
        // The gaps between the saved ranges inside `range`, in order.
        let mut next = range.start;
        for saved in &self.saved {
            if saved.end <= range.start || saved.start >= range.end {
                continue;
            }
            if saved.start > next {
                copy_gap(next..saved.start);
            }
            next = next.max(saved.end);
        }
        if next < range.end {
            copy_gap(next..range.end);
        }
        self.insert(range);
    }

    /// Adds `range` to the saved ranges, merging it with those it touches.
    fn insert(&mut self, range: Range<usize>) {
        let first = self.saved.partition_point(|s| s.end < range.start);
        let last = self.saved.partition_point(|s| s.start <= range.end);
        let merged = match (self.saved.get(first), self.saved.get(last.wrapping_sub(1))) {
            (Some(a), Some(b)) if first < last => a.start.min(range.start)..b.end.max(range.end),
            _ => range,
        };
        self.saved.splice(first..last, [merged]);
    }

    /// Makes `data` the input again: writes back every element saved (the others were never
    /// written). The saved ranges stay: the next attempt saves only what they lack.
    pub(crate) fn restore<T: Element>(&mut self, data: &mut [T]) {
        let copy: &[T] = bytemuck::cast_slice(&self.words[..]);
        for range in &self.saved {
            if let (Some(to), Some(from)) = (data.get_mut(range.clone()), copy.get(range.clone())) {
                to.copy_from_slice(from);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Attempts that each write any ranges of the vector, in any order, each saved just
        /// before its write and some failing halfway: every restore gives back the input
        /// exactly.
        #[test]
        fn every_restore_gives_back_the_input(
            attempts in proptest::collection::vec(
                proptest::collection::vec((0usize..1000, 1usize..400, any::<bool>()), 0..8),
                1..4,
            ),
        ) {
            let input: Vec<i64> = (0..1000).map(|i| i * 7 - 300).collect();
            let mut words = Vec::new();
            let mut data = input.clone();
            let mut saved = SavedInput::new(&mut words);
            saved.reset(&data);
            for writes in &attempts {
                for &(start, len, halfway) in writes {
                    let end = (start + len).min(1000);
                    // A read that fails halfway saved and wrote its first part only.
                    let end = if halfway { start + (end - start) / 2 } else { end };
                    let (a, b) = (start, start + (end - start) / 2);
                    saved.save(a, &data[a..b]);
                    data[a..b].iter_mut().for_each(|x| *x = x.wrapping_mul(3) + 1);
                    saved.save(b, &data[b..end]);
                    data[b..end].iter_mut().for_each(|x| *x = -*x - 5);
                }
                saved.restore(&mut data);
                prop_assert_eq!(&data, &input);
            }
        }
    }

    #[test]
    fn saved_ranges_merge_when_they_touch() {
        let mut words = Vec::new();
        let data = vec![0u32; 100];
        let mut saved = SavedInput::new(&mut words);
        saved.reset(&data);
        saved.save(50, &data[50..60]);
        saved.save(30, &data[30..40]);
        saved.save(40, &data[40..50]);
        saved.save(70, &data[70..80]);
        assert_eq!(saved.saved, vec![30..60, 70..80]);
        saved.save(55, &data[55..75]);
        assert_eq!(saved.saved, vec![30..80]);
    }
}
