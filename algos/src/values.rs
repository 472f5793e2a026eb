//! Vector payloads and reduction operators.
//!
//! A payload is a slice of one `bytemuck::Pod` element type, so it can be written once into a
//! frame (or a registered buffer) and read in place. Reductions combine a received slice into a
//! local vector element-wise.

use bytemuck::{Pod, Zeroable};

/// The element type of a payload, as it appears in a frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Dtype {
    /// No payload.
    Empty = 0,
    /// IEEE-754 double precision.
    F64 = 1,
    /// IEEE-754 single precision (the papers' round-based gossip stores data in `float`).
    F32 = 2,
    /// Unsigned 64-bit words: integer sums, bit masks (agreement flags).
    U64 = 3,
    /// A strictly increasing list of rank ids (`u32`): a set of ranks, e.g. contributors.
    RankIds = 4,
}

impl Dtype {
    /// Bytes per element (0 for `Empty`).
    pub fn elem_bytes(self) -> usize {
        match self {
            Dtype::Empty => 0,
            Dtype::F64 | Dtype::U64 => 8,
            Dtype::F32 | Dtype::RankIds => 4,
        }
    }

    /// Decodes the header byte.
    pub fn from_u8(code: u8) -> Option<Dtype> {
        Some(match code {
            0 => Dtype::Empty,
            1 => Dtype::F64,
            2 => Dtype::F32,
            3 => Dtype::U64,
            4 => Dtype::RankIds,
            _ => return None,
        })
    }
}

/// A reduction operator. Every operator here is associative and commutative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Element-wise sum (wrapping for `U64`).
    Sum,
    /// Average through weights: the vector carries its values followed by one weight element;
    /// both are summed, and the estimate is value / weight (see [`finish_estimate`]).
    Average,
    /// Element-wise minimum.
    Min,
    /// Element-wise maximum.
    Max,
    /// Bitwise AND of `U64` words (agreement on flags).
    BitAnd,
    /// Bitwise OR of `U64` words.
    BitOr,
    /// Set union of rank ids.
    RankUnion,
}

impl ReduceOp {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Average => "avg",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::BitAnd => "band",
            ReduceOp::BitOr => "bor",
            ReduceOp::RankUnion => "union",
        }
    }

    /// Parses [`ReduceOp::name`].
    pub fn parse(name: &str) -> Result<ReduceOp, ValuesError> {
        Ok(match name {
            "sum" => ReduceOp::Sum,
            "avg" | "average" => ReduceOp::Average,
            "min" => ReduceOp::Min,
            "max" => ReduceOp::Max,
            "band" => ReduceOp::BitAnd,
            "bor" => ReduceOp::BitOr,
            "union" => ReduceOp::RankUnion,
            _ => return Err(ValuesError::UnknownOp(name.to_string())),
        })
    }
}

/// A payload that cannot be combined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValuesError {
    /// The two sides have different element types.
    #[error("payload element types differ ({local:?} locally, {remote:?} received)")]
    DtypeMismatch {
        /// The local element type.
        local: Dtype,
        /// The received element type.
        remote: Dtype,
    },
    /// The two sides have different lengths.
    #[error("payload lengths differ ({local} locally, {remote} received)")]
    LengthMismatch {
        /// Local element count.
        local: usize,
        /// Received element count.
        remote: usize,
    },
    /// The operator does not apply to the element type.
    #[error("operator {op:?} does not apply to {dtype:?} payloads")]
    OpNotDefined {
        /// The operator.
        op: ReduceOp,
        /// The element type.
        dtype: Dtype,
    },
    /// A rank-id list that is not strictly increasing.
    #[error("a rank-id set must be strictly increasing")]
    UnsortedRankIds,
    /// An operator name that does not exist.
    #[error("unknown reduction operator '{0}'; use one of sum, avg, min, max, band, bor, union")]
    UnknownOp(String),
}

/// An owned payload vector.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Doubles.
    F64(Vec<f64>),
    /// Singles.
    F32(Vec<f32>),
    /// 64-bit words.
    U64(Vec<u64>),
    /// A set of rank ids, strictly increasing.
    RankIds(Vec<u32>),
}

/// A borrowed payload slice, e.g. read in place from a received frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValuesRef<'a> {
    /// No payload.
    Empty,
    /// Doubles.
    F64(&'a [f64]),
    /// Singles.
    F32(&'a [f32]),
    /// 64-bit words.
    U64(&'a [u64]),
    /// A set of rank ids, strictly increasing.
    RankIds(&'a [u32]),
}

impl<'a> ValuesRef<'a> {
    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            ValuesRef::Empty => Dtype::Empty,
            ValuesRef::F64(_) => Dtype::F64,
            ValuesRef::F32(_) => Dtype::F32,
            ValuesRef::U64(_) => Dtype::U64,
            ValuesRef::RankIds(_) => Dtype::RankIds,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            ValuesRef::Empty => 0,
            ValuesRef::F64(v) => v.len(),
            ValuesRef::F32(v) => v.len(),
            ValuesRef::U64(v) => v.len(),
            ValuesRef::RankIds(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw bytes, for writing into a frame.
    pub fn as_bytes(&self) -> &'a [u8] {
        match self {
            ValuesRef::Empty => &[],
            ValuesRef::F64(v) => bytemuck::cast_slice(v),
            ValuesRef::F32(v) => bytemuck::cast_slice(v),
            ValuesRef::U64(v) => bytemuck::cast_slice(v),
            ValuesRef::RankIds(v) => bytemuck::cast_slice(v),
        }
    }

    /// An owned copy.
    pub fn to_owned_values(&self) -> Values {
        match self {
            ValuesRef::Empty => Values::F64(Vec::new()),
            ValuesRef::F64(v) => Values::F64(v.to_vec()),
            ValuesRef::F32(v) => Values::F32(v.to_vec()),
            ValuesRef::U64(v) => Values::U64(v.to_vec()),
            ValuesRef::RankIds(v) => Values::RankIds(v.to_vec()),
        }
    }
}

impl Values {
    /// Empties the vector, keeping its element type and allocation.
    pub fn clear(&mut self) {
        match self {
            Values::F64(v) => v.clear(),
            Values::F32(v) => v.clear(),
            Values::U64(v) => v.clear(),
            Values::RankIds(v) => v.clear(),
        }
    }

    /// Makes `self` a copy of `src`, reusing its allocation when the element types match.
    pub fn copy_from(&mut self, src: ValuesRef<'_>) {
        fn refill<T: Copy>(dst: &mut Vec<T>, src: &[T]) {
            dst.clear();
            dst.extend_from_slice(src);
        }
        match (self, src) {
            (Values::F64(dst), ValuesRef::F64(src)) => refill(dst, src),
            (Values::U64(dst), ValuesRef::U64(src)) => refill(dst, src),
            (Values::F32(dst), ValuesRef::F32(src)) => refill(dst, src),
            (Values::RankIds(dst), ValuesRef::RankIds(src)) => refill(dst, src),
            (dst, src) => *dst = src.to_owned_values(),
        }
    }

    /// A borrowed view.
    pub fn as_ref(&self) -> ValuesRef<'_> {
        match self {
            Values::F64(v) => ValuesRef::F64(v),
            Values::F32(v) => ValuesRef::F32(v),
            Values::U64(v) => ValuesRef::U64(v),
            Values::RankIds(v) => ValuesRef::RankIds(v),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.as_ref().dtype()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the elements to `dst` as f64 (a rank-id set counts its members): the form
    /// [`crate::Protocol::estimate`] reports.
    pub fn push_as_f64(&self, dst: &mut Vec<f64>) {
        match self {
            Values::F64(v) => dst.extend_from_slice(v),
            Values::F32(v) => dst.extend(v.iter().map(|&x| f64::from(x))),
            Values::U64(v) => dst.extend(v.iter().map(|&x| x as f64)),
            Values::RankIds(v) => dst.push(v.len() as f64),
        }
    }

    /// Combines `other` into `self` element-wise with `op`.
    ///
    /// A mismatch is an error value: received data is never trusted to have the right shape.
    pub fn combine(&mut self, op: ReduceOp, other: ValuesRef<'_>) -> Result<(), ValuesError> {
        let (local, remote) = (self.dtype(), other.dtype());
        match (self, other) {
            (Values::F64(a), ValuesRef::F64(b)) => combine_floats(a, b, op, Dtype::F64),
            (Values::F32(a), ValuesRef::F32(b)) => combine_floats(a, b, op, Dtype::F32),
            (Values::U64(a), ValuesRef::U64(b)) => combine_words(a, b, op),
            (Values::RankIds(a), ValuesRef::RankIds(b)) => union_rank_ids(a, b, op),
            _ => Err(ValuesError::DtypeMismatch { local, remote }),
        }
    }
}

/// Float element types that reductions apply to.
pub trait Float: Pod + Zeroable + PartialOrd + std::ops::Add<Output = Self> {
    /// The smaller of two values, ignoring a NaN operand as `f64::min` does.
    fn min_of(self, other: Self) -> Self;
    /// The larger of two values.
    fn max_of(self, other: Self) -> Self;
}

impl Float for f64 {
    fn min_of(self, other: Self) -> Self {
        self.min(other)
    }
    fn max_of(self, other: Self) -> Self {
        self.max(other)
    }
}

impl Float for f32 {
    fn min_of(self, other: Self) -> Self {
        self.min(other)
    }
    fn max_of(self, other: Self) -> Self {
        self.max(other)
    }
}

fn same_len(local: usize, remote: usize) -> Result<(), ValuesError> {
    if local == remote {
        Ok(())
    } else {
        Err(ValuesError::LengthMismatch { local, remote })
    }
}

fn combine_floats<T: Float>(
    acc: &mut [T],
    other: &[T],
    op: ReduceOp,
    dtype: Dtype,
) -> Result<(), ValuesError> {
    same_len(acc.len(), other.len())?;
    let pairs = acc.iter_mut().zip(other.iter().copied());
    match op {
        ReduceOp::Sum | ReduceOp::Average => pairs.for_each(|(a, b)| *a = *a + b),
        ReduceOp::Min => pairs.for_each(|(a, b)| *a = a.min_of(b)),
        ReduceOp::Max => pairs.for_each(|(a, b)| *a = a.max_of(b)),
        ReduceOp::BitAnd | ReduceOp::BitOr | ReduceOp::RankUnion => {
            return Err(ValuesError::OpNotDefined { op, dtype })
        }
    }
    Ok(())
}

fn combine_words(acc: &mut [u64], other: &[u64], op: ReduceOp) -> Result<(), ValuesError> {
    same_len(acc.len(), other.len())?;
    let pairs = acc.iter_mut().zip(other.iter().copied());
    match op {
        ReduceOp::Sum | ReduceOp::Average => pairs.for_each(|(a, b)| *a = a.wrapping_add(b)),
        ReduceOp::Min => pairs.for_each(|(a, b)| *a = (*a).min(b)),
        ReduceOp::Max => pairs.for_each(|(a, b)| *a = (*a).max(b)),
        ReduceOp::BitAnd => pairs.for_each(|(a, b)| *a &= b),
        ReduceOp::BitOr => pairs.for_each(|(a, b)| *a |= b),
        ReduceOp::RankUnion => {
            return Err(ValuesError::OpNotDefined {
                op,
                dtype: Dtype::U64,
            })
        }
    }
    Ok(())
}

fn union_rank_ids(acc: &mut Vec<u32>, other: &[u32], op: ReduceOp) -> Result<(), ValuesError> {
    if op != ReduceOp::RankUnion {
        return Err(ValuesError::OpNotDefined {
            op,
            dtype: Dtype::RankIds,
        });
    }
    if other.windows(2).any(|pair| pair[0] >= pair[1]) {
        return Err(ValuesError::UnsortedRankIds);
    }
    let mut merged = Vec::with_capacity(acc.len() + other.len());
    let (mut i, mut j) = (0, 0);
    while i < acc.len() && j < other.len() {
        let (a, b) = (acc[i], other[j]);
        merged.push(a.min(b));
        i += usize::from(a <= b);
        j += usize::from(b <= a);
    }
    merged.extend_from_slice(&acc[i..]);
    merged.extend_from_slice(&other[j..]);
    *acc = merged;
    Ok(())
}

/// Turns a reduced vector into the estimate a rank reports: for [`ReduceOp::Average`] the values
/// divided by the trailing weight (the weight itself is dropped); otherwise the values as they are.
pub fn finish_estimate(op: ReduceOp, reduced: &[f64], dst: &mut Vec<f64>) {
    dst.clear();
    match op {
        ReduceOp::Average => {
            if let Some((weight, values)) = reduced.split_last() {
                dst.extend(values.iter().map(|v| v / weight));
            }
        }
        _ => dst.extend_from_slice(reduced),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_ops() {
        let mut v = Values::F64(vec![1.0, 5.0]);
        v.combine(ReduceOp::Sum, ValuesRef::F64(&[2.0, -1.0]))
            .unwrap();
        assert_eq!(v, Values::F64(vec![3.0, 4.0]));
        v.combine(ReduceOp::Min, ValuesRef::F64(&[0.5, 9.0]))
            .unwrap();
        assert_eq!(v, Values::F64(vec![0.5, 4.0]));
        v.combine(ReduceOp::Max, ValuesRef::F64(&[1.5, 9.0]))
            .unwrap();
        assert_eq!(v, Values::F64(vec![1.5, 9.0]));
        assert!(matches!(
            v.combine(ReduceOp::BitAnd, ValuesRef::F64(&[1.0, 1.0])),
            Err(ValuesError::OpNotDefined { .. })
        ));
    }

    #[test]
    fn word_ops_and_mismatches() {
        let mut w = Values::U64(vec![0b1100]);
        w.combine(ReduceOp::BitAnd, ValuesRef::U64(&[0b1010]))
            .unwrap();
        assert_eq!(w, Values::U64(vec![0b1000]));
        w.combine(ReduceOp::BitOr, ValuesRef::U64(&[0b0001]))
            .unwrap();
        assert_eq!(w, Values::U64(vec![0b1001]));
        assert!(matches!(
            w.combine(ReduceOp::Sum, ValuesRef::U64(&[1, 2])),
            Err(ValuesError::LengthMismatch { .. })
        ));
        assert!(matches!(
            w.combine(ReduceOp::Sum, ValuesRef::F64(&[1.0])),
            Err(ValuesError::DtypeMismatch { .. })
        ));
    }

    #[test]
    fn rank_union_merges_sorted_sets() {
        let mut s = Values::RankIds(vec![1, 4, 9]);
        s.combine(ReduceOp::RankUnion, ValuesRef::RankIds(&[0, 4, 5, 10]))
            .unwrap();
        assert_eq!(s, Values::RankIds(vec![0, 1, 4, 5, 9, 10]));
        assert_eq!(
            s.combine(ReduceOp::RankUnion, ValuesRef::RankIds(&[3, 2])),
            Err(ValuesError::UnsortedRankIds)
        );
    }

    #[test]
    fn average_divides_by_weight() {
        let mut v = Values::F64(vec![3.0, 6.0, 1.0]);
        v.combine(ReduceOp::Average, ValuesRef::F64(&[5.0, 2.0, 1.0]))
            .unwrap();
        let mut est = Vec::new();
        if let Values::F64(raw) = &v {
            finish_estimate(ReduceOp::Average, raw, &mut est);
        }
        assert_eq!(est, vec![4.0, 4.0]);
    }
}
