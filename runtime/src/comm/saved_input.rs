//! The input a fault-tolerant single-copy ring restarts from: copied block by block just
//! before the first attempt first writes each block, rather than whole before it starts.
//!
//! The ring reads a block of its own vector in the same pass that combines into it, so a copy
//! taken there costs one extra write stream while the block is in cache; a copy of the whole
//! vector up front reads and writes it all once more (16 MiB at n = 2 on the development VM:
//! 4.2 ms for the fault-tolerant call against 2.9 ms for the plain ring). A block the first
//! attempt never wrote is still the input in the vector, so a retry finds every element in
//! one of the two places.

use std::ops::Range;

use ftcoll_algos::values::Element;

/// The kept input of one operation (see the module docs).
pub(crate) struct SavedInput<'a> {
    /// The copy, in words so that the communicator keeps it from call to call whatever the
    /// element type.
    words: &'a mut Vec<u64>,
    /// Blocks of the first attempt copied so far: each was copied before its first write.
    blocks: Vec<Range<usize>>,
    /// Whether the copy holds the whole input (from the second attempt on).
    whole: bool,
}

impl<'a> SavedInput<'a> {
    pub(crate) fn new(words: &'a mut Vec<u64>) -> Self {
        SavedInput {
            words,
            blocks: Vec::new(),
            whole: false,
        }
    }

    /// Readies the copy for an operation over `data`: nothing is copied yet.
    pub(crate) fn reset<T: Element>(&mut self, data: &[T]) {
        // Sized once for a loop of calls of one size: every element is written before a
        // retry reads it.
        self.words
            .resize(std::mem::size_of_val(data).div_ceil(8), 0);
        self.blocks.clear();
        self.whole = false;
    }

    fn copy<T: Element>(&mut self) -> &mut [T] {
        bytemuck::cast_slice_mut(&mut self.words[..])
    }

    /// Whether the ring must save `block` before it writes it (its first write in the first
    /// attempt); if so, the block's parts are saved through [`SavedInput::save`] in order.
    pub(crate) fn begin(&mut self, block: &Range<usize>) -> bool {
        // At most one block per member: the first attempt's blocks partition the vector.
        if self.whole || self.blocks.iter().any(|b| b.start == block.start) {
            return false;
        }
        self.blocks.push(block.start..block.start);
        true
    }

    /// Saves `part`, the elements from `at` of the block begun last, just before it is
    /// written. Only what was saved is restored: a read that fails halfway leaves the rest of
    /// the block unwritten, still the input.
    pub(crate) fn save<T: Element>(&mut self, at: usize, part: &[T]) {
        let end = at + part.len();
        let Some(to) = self.copy::<T>().get_mut(at..end) else {
            return;
        };
        to.copy_from_slice(part);
        if let Some(last) = self.blocks.last_mut().filter(|b| b.end == at) {
            last.end = end;
        }
    }

    /// Makes `data` the input again, and the copy whole (later attempts cut other blocks).
    pub(crate) fn restore<T: Element>(&mut self, data: &mut [T]) {
        let len = data.len();
        if self.whole {
            if let Some(copy) = self.copy::<T>().get(..len) {
                data.copy_from_slice(copy);
            }
            return;
        }
        let blocks = std::mem::take(&mut self.blocks);
        let copy = self.copy::<T>();
        for block in blocks {
            if let (Some(to), Some(from)) = (data.get_mut(block.clone()), copy.get(block)) {
                to.copy_from_slice(from);
            }
        }
        if let Some(copy) = copy.get_mut(..len) {
            copy.copy_from_slice(data);
        }
        self.whole = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A first attempt that wrote some blocks (each saved first) and not others: the restore
    /// gives back the input exactly, and so does a second restore after more writes.
    #[test]
    fn a_restore_gives_back_the_input_after_any_writes() {
        let input: Vec<i64> = (0..1000).map(|i| i * 7 - 300).collect();
        for written in [vec![], vec![0], vec![2, 0], vec![1, 3, 2, 0]] {
            let mut words = Vec::new();
            let mut data = input.clone();
            let mut saved = SavedInput::new(&mut words);
            saved.reset(&data);
            let block = |b: usize| (b * 1000 / 4)..((b + 1) * 1000 / 4);
            for &b in &written {
                assert!(saved.begin(&block(b)));
                // Saved in two parts, then written; a second write is not saved again.
                let (start, end) = (block(b).start, block(b).end);
                saved.save(start, &data[start..start + 100]);
                saved.save(start + 100, &data[start + 100..end]);
                data[block(b)].iter_mut().for_each(|x| *x += 1);
                assert!(!saved.begin(&block(b)));
                data[block(b)].iter_mut().for_each(|x| *x *= 3);
            }
            // A block whose read failed after its first part: only that part was written.
            if let Some(b) = (0..4).find(|b| !written.contains(b)) {
                assert!(saved.begin(&block(b)));
                let start = block(b).start;
                saved.save(start, &data[start..start + 10]);
                data[start..start + 10].iter_mut().for_each(|x| *x = 0);
            }
            saved.restore(&mut data);
            assert_eq!(data, input, "blocks written {written:?}");
            data.iter_mut().for_each(|x| *x = -1);
            assert!(!saved.begin(&(0..1000)));
            saved.restore(&mut data);
            assert_eq!(data, input, "second restore after {written:?}");
        }
    }
}
