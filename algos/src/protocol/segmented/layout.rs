//! How a collective's vector maps to segments: which elements a segment takes as input, and
//! where its result goes.

use std::ops::Range;

use crate::values::Values;

/// The shape of a collective's input and output, as the shell cuts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// Input and output are one vector of the same length (allreduce, broadcast): segment k is
    /// elements `k·c ..` of it.
    #[default]
    Contiguous,
    /// The input is N equal blocks and the output one block (reduce-scatter): segment k takes
    /// chunk k of every block, and its result is chunk k of the output.
    BlocksIn {
        /// N.
        blocks: u32,
    },
    /// The input is one block and the output N blocks (allgather): segment k takes chunk k of
    /// the input, and its result holds chunk k of every block.
    BlocksOut {
        /// N.
        blocks: u32,
    },
}

impl Layout {
    /// Elements of the chunk dimension: the whole vector, or one block of it.
    fn span(self, input_len: usize) -> usize {
        match self {
            Layout::BlocksIn { blocks } => input_len / blocks.max(1) as usize,
            Layout::Contiguous | Layout::BlocksOut { .. } => input_len,
        }
    }

    /// Segments of an input of `input_len` elements cut in chunks of `chunk` (at least one).
    pub fn segments(self, input_len: usize, chunk: usize) -> usize {
        self.span(input_len).div_ceil(chunk.max(1)).max(1)
    }

    /// The chunk of segment `k` within the chunk dimension.
    fn chunk(self, input_len: usize, chunk: usize, k: usize) -> Range<usize> {
        let span = self.span(input_len);
        let start = k.saturating_mul(chunk).min(span);
        start..start.saturating_add(chunk).min(span)
    }

    /// The input ranges segment `k` takes, in order. An iterator, not a vector: the shell
    /// asks once per segment and operation, on the small-allreduce latency path.
    pub fn input_ranges(
        self,
        input_len: usize,
        chunk: usize,
        k: usize,
    ) -> impl Iterator<Item = Range<usize>> {
        let part = self.chunk(input_len, chunk, k);
        // Block b's chunk lies b strides on.
        let (count, stride) = match self {
            Layout::BlocksIn { blocks } => (blocks as usize, self.span(input_len)),
            Layout::Contiguous | Layout::BlocksOut { .. } => (1, 0),
        };
        (0..count).map(move |b| b * stride + part.start..b * stride + part.end)
    }

    /// Elements of segment `k`'s result.
    pub fn output_len(self, input_len: usize, chunk: usize, k: usize) -> usize {
        let part = self.chunk(input_len, chunk, k).len();
        match self {
            Layout::BlocksOut { blocks } => part * blocks as usize,
            Layout::Contiguous | Layout::BlocksIn { .. } => part,
        }
    }

    /// Where segment `k`'s result goes: the piece length, and pairs of (offset in the
    /// result, offset in the output), each a piece long.
    pub fn output_places(
        self,
        input_len: usize,
        chunk: usize,
        k: usize,
    ) -> (usize, impl Iterator<Item = (usize, usize)>) {
        let part = self.chunk(input_len, chunk, k);
        let (piece, start) = (part.len(), part.start);
        // Block b of the output lies b strides on.
        let (count, stride) = match self {
            Layout::BlocksOut { blocks } => (blocks as usize, input_len),
            Layout::Contiguous | Layout::BlocksIn { .. } => (1, 0),
        };
        (
            piece,
            (0..count).map(move |b| (b * piece, b * stride + start)),
        )
    }

    /// Elements of the whole output for an input of `input_len`.
    pub fn output_total(self, input_len: usize) -> usize {
        match self {
            Layout::Contiguous => input_len,
            Layout::BlocksIn { .. } => self.span(input_len),
            Layout::BlocksOut { blocks } => input_len * blocks as usize,
        }
    }
}

/// Writes f64 values into a vector of any numeric type; false where it cannot.
pub(super) fn write_f64(data: &mut Values, at: usize, src: &[f64]) -> bool {
    fn put<T: crate::values::Element>(dst: &mut [T], at: usize, src: &[f64]) -> bool {
        match dst.get_mut(at..at + src.len()) {
            Some(slot) => {
                slot.iter_mut()
                    .zip(src)
                    .for_each(|(d, &s)| *d = T::from_f64(s));
                true
            }
            None => false,
        }
    }
    match data {
        Values::F64(v) => put(v, at, src),
        Values::F32(v) => put(v, at, src),
        Values::I32(v) => put(v, at, src),
        Values::I64(v) => put(v, at, src),
        Values::U32(v) => put(v, at, src),
        Values::U64(v) => put(v, at, src),
        Values::RankIds(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_element_is_taken_once_and_every_output_element_written_once() {
        for layout in [
            Layout::Contiguous,
            Layout::BlocksIn { blocks: 3 },
            Layout::BlocksOut { blocks: 4 },
        ] {
            for (len, chunk) in [(0usize, 5usize), (12, 5), (30, 1), (30, 7), (30, 100)] {
                let segments = layout.segments(len, chunk);
                let mut taken = vec![0u32; len];
                let mut written = vec![0u32; layout.output_total(len)];
                for k in 0..segments {
                    layout
                        .input_ranges(len, chunk, k)
                        .flatten()
                        .for_each(|i| taken[i] += 1);
                    let (piece, places) = layout.output_places(len, chunk, k);
                    let places: Vec<_> = places.collect();
                    let out_len = layout.output_len(len, chunk, k);
                    assert_eq!(
                        piece * places.len(),
                        out_len,
                        "{layout:?} {len} {chunk} {k}"
                    );
                    for (from, to) in places {
                        assert!(from + piece <= out_len);
                        (to..to + piece).for_each(|i| written[i] += 1);
                    }
                }
                assert!(taken.iter().all(|&t| t == 1), "{layout:?} {len} {chunk}");
                assert!(written.iter().all(|&w| w == 1), "{layout:?} {len} {chunk}");
            }
        }
    }
}
