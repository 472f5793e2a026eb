//! A bounded free list of emptied buffers, so that a steady stream of held frames reuses
//! memory instead of allocating per frame.

/// Emptied buffers kept at most.
const MAX_SPARES: usize = 256;

/// A free list of emptied `Vec`s.
pub(crate) struct Spares<T> {
    free: Vec<T>,
}

impl<T> Default for Spares<T> {
    fn default() -> Self {
        Spares { free: Vec::new() }
    }
}

impl<E> Spares<Vec<E>> {
    /// An empty buffer, reused when one is free.
    pub(crate) fn take(&mut self) -> Vec<E> {
        self.free.pop().unwrap_or_default()
    }

    /// Keeps `buffer` (emptied) for a later [`Spares::take`], unless enough are kept.
    pub(crate) fn recycle(&mut self, mut buffer: Vec<E>) {
        if self.free.len() < MAX_SPARES && buffer.capacity() > 0 {
            buffer.clear();
            self.free.push(buffer);
        }
    }
}

impl Spares<Vec<u64>> {
    /// `bytes` copied into 8-byte-aligned words (zero-padded), in a reused buffer.
    pub(crate) fn copy_of(&mut self, bytes: &[u8]) -> Vec<u64> {
        let mut words = self.take();
        words.resize(bytes.len().div_ceil(8), 0);
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_buffer_holds_only_the_new_bytes() {
        let mut spares = Spares::<Vec<u64>>::default();
        let long = spares.copy_of(&[0xFF; 20]);
        spares.recycle(long);
        let short = spares.copy_of(&[1, 2, 3]);
        assert_eq!(short, vec![u64::from_le_bytes([1, 2, 3, 0, 0, 0, 0, 0])]);
    }

    #[test]
    fn at_most_max_spares_are_kept() {
        let mut spares = Spares::<Vec<u64>>::default();
        for _ in 0..MAX_SPARES + 10 {
            spares.recycle(vec![0; 4]);
        }
        assert_eq!(spares.free.len(), MAX_SPARES);
    }
}
