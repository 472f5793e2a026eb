//! Vector payloads and reduction operators.
//!
//! A payload is a slice of one `bytemuck::Pod` element type, so it can be written once into a
//! frame (or a registered buffer) and read in place. Reductions combine a received slice into a
//! local vector element-wise. [`Element`] ties each Rust element type to its [`Dtype`], so the
//! library's typed calls and the protocols' type-erased [`Values`] meet without a copy.

mod element;
#[cfg(test)]
mod tests;

pub use element::{divide_floats, Element, Float};

/// Applies `$body` to the slice inside any numeric or rank-id variant of `$value` (a [`Values`]
/// or [`ValuesRef`] expression, matched through `$ty`), binding it to `$v`.
macro_rules! each_variant {
    ($ty:ident, $value:expr, $v:ident => $body:expr) => {
        match $value {
            $ty::F64($v) => $body,
            $ty::F32($v) => $body,
            $ty::I32($v) => $body,
            $ty::I64($v) => $body,
            $ty::U32($v) => $body,
            $ty::U64($v) => $body,
            $ty::RankIds($v) => $body,
        }
    };
}

/// The element type of a payload, as it appears in a frame header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Dtype {
    /// No payload.
    #[default]
    Empty = 0,
    /// IEEE-754 double precision.
    F64 = 1,
    /// IEEE-754 single precision (the papers' round-based gossip stores data in `float`).
    F32 = 2,
    /// Unsigned 64-bit words: integer sums, bit masks (agreement flags).
    U64 = 3,
    /// A strictly increasing list of rank ids (`u32`): a set of ranks, e.g. contributors.
    RankIds = 4,
    /// Signed 32-bit integers.
    I32 = 5,
    /// Signed 64-bit integers.
    I64 = 6,
    /// Unsigned 32-bit integers.
    U32 = 7,
}

impl Dtype {
    /// Every element type a user vector may have, in the order help texts list them.
    pub const NUMERIC: [Dtype; 6] = [
        Dtype::F64,
        Dtype::F32,
        Dtype::I32,
        Dtype::I64,
        Dtype::U32,
        Dtype::U64,
    ];

    /// Bytes per element (0 for `Empty`).
    pub fn elem_bytes(self) -> usize {
        match self {
            Dtype::Empty => 0,
            Dtype::F64 | Dtype::U64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::RankIds | Dtype::I32 | Dtype::U32 => 4,
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
            5 => Dtype::I32,
            6 => Dtype::I64,
            7 => Dtype::U32,
            _ => return None,
        })
    }

    /// The name used on the command line and in reports (the Rust type's name).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Empty => "empty",
            Dtype::F64 => "f64",
            Dtype::F32 => "f32",
            Dtype::U64 => "u64",
            Dtype::RankIds => "rank-ids",
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
            Dtype::U32 => "u32",
        }
    }

    /// True for the floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F64 | Dtype::F32)
    }

    /// A vector of `len` zeros of this type (`Empty` and rank ids give an empty f64 vector).
    pub fn zeros(self, len: usize) -> Values {
        match self {
            Dtype::Empty | Dtype::F64 => Values::F64(vec![0.0; len]),
            Dtype::F32 => Values::F32(vec![0.0; len]),
            Dtype::I32 => Values::I32(vec![0; len]),
            Dtype::I64 => Values::I64(vec![0; len]),
            Dtype::U32 => Values::U32(vec![0; len]),
            Dtype::U64 => Values::U64(vec![0; len]),
            Dtype::RankIds => Values::RankIds(Vec::new()),
        }
    }
}

/// A reduction operator. Every operator here is associative and commutative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Element-wise sum (wrapping for integers).
    Sum,
    /// Average through weights: the vector carries its values followed by one weight element;
    /// both are summed, and the estimate is value / weight (see [`finish_estimate`]).
    Average,
    /// Element-wise product (wrapping for integers).
    Prod,
    /// Element-wise minimum.
    Min,
    /// Element-wise maximum.
    Max,
    /// Bitwise AND of integers (agreement on flags).
    BitAnd,
    /// Bitwise OR of integers.
    BitOr,
    /// Bitwise exclusive OR of integers.
    BitXor,
    /// Set union of rank ids.
    RankUnion,
}

impl ReduceOp {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Average => "avg",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::BitAnd => "band",
            ReduceOp::BitOr => "bor",
            ReduceOp::BitXor => "bxor",
            ReduceOp::RankUnion => "union",
        }
    }

    /// Parses [`ReduceOp::name`].
    pub fn parse(name: &str) -> Result<ReduceOp, ValuesError> {
        Ok(match name {
            "sum" => ReduceOp::Sum,
            "avg" | "average" => ReduceOp::Average,
            "prod" => ReduceOp::Prod,
            "min" => ReduceOp::Min,
            "max" => ReduceOp::Max,
            "band" => ReduceOp::BitAnd,
            "bor" => ReduceOp::BitOr,
            "bxor" => ReduceOp::BitXor,
            "union" => ReduceOp::RankUnion,
            _ => return Err(ValuesError::UnknownOp(name.to_string())),
        })
    }

    /// Whether the operator applies to vectors of `dtype`.
    pub fn applies_to(self, dtype: Dtype) -> bool {
        match self {
            ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Min | ReduceOp::Max => {
                !matches!(dtype, Dtype::RankIds)
            }
            ReduceOp::Average => dtype.is_float() || dtype == Dtype::Empty,
            ReduceOp::BitAnd | ReduceOp::BitOr | ReduceOp::BitXor => {
                !dtype.is_float() && dtype != Dtype::RankIds
            }
            ReduceOp::RankUnion => dtype == Dtype::RankIds,
        }
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
    #[error(
        "unknown reduction operator '{0}'; use one of sum, avg, prod, min, max, band, bor, bxor, union"
    )]
    UnknownOp(String),
}

/// An owned payload vector.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Doubles.
    F64(Vec<f64>),
    /// Singles.
    F32(Vec<f32>),
    /// Signed 32-bit integers.
    I32(Vec<i32>),
    /// Signed 64-bit integers.
    I64(Vec<i64>),
    /// Unsigned 32-bit integers.
    U32(Vec<u32>),
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
    /// Signed 32-bit integers.
    I32(&'a [i32]),
    /// Signed 64-bit integers.
    I64(&'a [i64]),
    /// Unsigned 32-bit integers.
    U32(&'a [u32]),
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
            ValuesRef::I32(_) => Dtype::I32,
            ValuesRef::I64(_) => Dtype::I64,
            ValuesRef::U32(_) => Dtype::U32,
            ValuesRef::U64(_) => Dtype::U64,
            ValuesRef::RankIds(_) => Dtype::RankIds,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match *self {
            ValuesRef::Empty => 0,
            ValuesRef::F64(v) => v.len(),
            ValuesRef::F32(v) => v.len(),
            ValuesRef::I32(v) => v.len(),
            ValuesRef::I64(v) => v.len(),
            ValuesRef::U32(v) => v.len(),
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
        match *self {
            ValuesRef::Empty => &[],
            ValuesRef::F64(v) => bytemuck::cast_slice(v),
            ValuesRef::F32(v) => bytemuck::cast_slice(v),
            ValuesRef::I32(v) => bytemuck::cast_slice(v),
            ValuesRef::I64(v) => bytemuck::cast_slice(v),
            ValuesRef::U32(v) => bytemuck::cast_slice(v),
            ValuesRef::U64(v) => bytemuck::cast_slice(v),
            ValuesRef::RankIds(v) => bytemuck::cast_slice(v),
        }
    }

    /// Elements `range` of the payload; `None` when the range is out of bounds.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Option<ValuesRef<'a>> {
        Some(match *self {
            ValuesRef::Empty => return range.is_empty().then_some(ValuesRef::Empty),
            ValuesRef::F64(v) => ValuesRef::F64(v.get(range)?),
            ValuesRef::F32(v) => ValuesRef::F32(v.get(range)?),
            ValuesRef::I32(v) => ValuesRef::I32(v.get(range)?),
            ValuesRef::I64(v) => ValuesRef::I64(v.get(range)?),
            ValuesRef::U32(v) => ValuesRef::U32(v.get(range)?),
            ValuesRef::U64(v) => ValuesRef::U64(v.get(range)?),
            ValuesRef::RankIds(v) => ValuesRef::RankIds(v.get(range)?),
        })
    }

    /// An owned copy.
    pub fn to_owned_values(&self) -> Values {
        match *self {
            ValuesRef::Empty => Values::F64(Vec::new()),
            ValuesRef::F64(v) => Values::F64(v.to_vec()),
            ValuesRef::F32(v) => Values::F32(v.to_vec()),
            ValuesRef::I32(v) => Values::I32(v.to_vec()),
            ValuesRef::I64(v) => Values::I64(v.to_vec()),
            ValuesRef::U32(v) => Values::U32(v.to_vec()),
            ValuesRef::U64(v) => Values::U64(v.to_vec()),
            ValuesRef::RankIds(v) => Values::RankIds(v.to_vec()),
        }
    }

    /// Appends the elements to `dst` as f64 (a rank-id set counts its members): the form
    /// [`crate::Protocol::estimate`] reports.
    pub fn push_as_f64(&self, dst: &mut Vec<f64>) {
        match *self {
            ValuesRef::Empty => {}
            ValuesRef::F64(v) => dst.extend_from_slice(v),
            ValuesRef::F32(v) => dst.extend(v.iter().map(|&x| f64::from(x))),
            ValuesRef::I32(v) => dst.extend(v.iter().map(|&x| f64::from(x))),
            ValuesRef::I64(v) => dst.extend(v.iter().map(|&x| x as f64)),
            ValuesRef::U32(v) => dst.extend(v.iter().map(|&x| f64::from(x))),
            ValuesRef::U64(v) => dst.extend(v.iter().map(|&x| x as f64)),
            ValuesRef::RankIds(v) => dst.push(v.len() as f64),
        }
    }
}

impl Values {
    /// Empties the vector, keeping its element type and allocation.
    pub fn clear(&mut self) {
        each_variant!(Values, self, v => v.clear())
    }

    /// An empty vector of the same element type.
    pub fn empty_like(&self) -> Values {
        self.dtype().zeros(0)
    }

    /// Makes `self` a copy of `src`, reusing its allocation when the element types match.
    pub fn copy_from(&mut self, src: ValuesRef<'_>) {
        self.clear();
        if self.extend_from(src).is_err() {
            *self = src.to_owned_values();
        }
    }

    /// Appends `src`, which must have the same element type.
    pub fn extend_from(&mut self, src: ValuesRef<'_>) -> Result<(), ValuesError> {
        match (self, src) {
            (Values::F64(dst), ValuesRef::F64(src)) => dst.extend_from_slice(src),
            (Values::F32(dst), ValuesRef::F32(src)) => dst.extend_from_slice(src),
            (Values::I32(dst), ValuesRef::I32(src)) => dst.extend_from_slice(src),
            (Values::I64(dst), ValuesRef::I64(src)) => dst.extend_from_slice(src),
            (Values::U32(dst), ValuesRef::U32(src)) => dst.extend_from_slice(src),
            (Values::U64(dst), ValuesRef::U64(src)) => dst.extend_from_slice(src),
            (Values::RankIds(dst), ValuesRef::RankIds(src)) => dst.extend_from_slice(src),
            (_, ValuesRef::Empty) => {}
            (dst, src) => {
                return Err(ValuesError::DtypeMismatch {
                    local: dst.dtype(),
                    remote: src.dtype(),
                })
            }
        }
        Ok(())
    }

    /// Overwrites elements `at..at + src.len()` with `src` (same element type, in bounds).
    pub fn write_at(&mut self, at: usize, src: ValuesRef<'_>) -> Result<(), ValuesError> {
        fn put<T: Copy>(dst: &mut [T], at: usize, src: &[T]) -> Result<(), ValuesError> {
            let len = dst.len();
            let slot = dst
                .get_mut(at..at + src.len())
                .ok_or(ValuesError::LengthMismatch {
                    local: len,
                    remote: at + src.len(),
                })?;
            slot.copy_from_slice(src);
            Ok(())
        }
        match (self, src) {
            (Values::F64(dst), ValuesRef::F64(src)) => put(dst, at, src),
            (Values::F32(dst), ValuesRef::F32(src)) => put(dst, at, src),
            (Values::I32(dst), ValuesRef::I32(src)) => put(dst, at, src),
            (Values::I64(dst), ValuesRef::I64(src)) => put(dst, at, src),
            (Values::U32(dst), ValuesRef::U32(src)) => put(dst, at, src),
            (Values::U64(dst), ValuesRef::U64(src)) => put(dst, at, src),
            (Values::RankIds(dst), ValuesRef::RankIds(src)) => put(dst, at, src),
            (_, ValuesRef::Empty) => Ok(()),
            (dst, src) => Err(ValuesError::DtypeMismatch {
                local: dst.dtype(),
                remote: src.dtype(),
            }),
        }
    }

    /// Combines `other` into elements `at..at + other.len()` with `op`.
    pub fn combine_at(
        &mut self,
        at: usize,
        op: ReduceOp,
        other: ValuesRef<'_>,
    ) -> Result<(), ValuesError> {
        fn part<T>(dst: &mut [T], at: usize, len: usize) -> Result<&mut [T], ValuesError> {
            let local = dst.len();
            dst.get_mut(at..at.saturating_add(len))
                .ok_or(ValuesError::LengthMismatch {
                    local,
                    remote: at.saturating_add(len),
                })
        }
        let n = other.len();
        let (local, remote) = (self.dtype(), other.dtype());
        match (self, other) {
            (Values::F64(a), ValuesRef::F64(b)) => Element::combine(part(a, at, n)?, b, op),
            (Values::F32(a), ValuesRef::F32(b)) => Element::combine(part(a, at, n)?, b, op),
            (Values::I32(a), ValuesRef::I32(b)) => Element::combine(part(a, at, n)?, b, op),
            (Values::I64(a), ValuesRef::I64(b)) => Element::combine(part(a, at, n)?, b, op),
            (Values::U32(a), ValuesRef::U32(b)) => Element::combine(part(a, at, n)?, b, op),
            (Values::U64(a), ValuesRef::U64(b)) => Element::combine(part(a, at, n)?, b, op),
            _ => Err(ValuesError::DtypeMismatch { local, remote }),
        }
    }

    /// A borrowed view.
    pub fn as_ref(&self) -> ValuesRef<'_> {
        match self {
            Values::F64(v) => ValuesRef::F64(v),
            Values::F32(v) => ValuesRef::F32(v),
            Values::I32(v) => ValuesRef::I32(v),
            Values::I64(v) => ValuesRef::I64(v),
            Values::U32(v) => ValuesRef::U32(v),
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

    /// Appends the elements to `dst` as f64 (see [`ValuesRef::push_as_f64`]).
    pub fn push_as_f64(&self, dst: &mut Vec<f64>) {
        self.as_ref().push_as_f64(dst)
    }

    /// Appends the weight element an average carries (one per contributor) to a float vector;
    /// integer vectors have no average and are left alone.
    pub fn push_weight(&mut self) {
        match self {
            Values::F64(v) => v.push(1.0),
            Values::F32(v) => v.push(1.0),
            Values::I32(_) | Values::I64(_) | Values::U32(_) | Values::U64(_) => {}
            Values::RankIds(_) => {}
        }
    }

    /// Flips bit `bit` (numbered as in [`crate::bits`]) of element `elem`; false when the
    /// element or bit does not exist (rank-id sets have no bits to flip).
    pub fn flip_bit(&mut self, elem: usize, bit: u32) -> bool {
        match self {
            Values::F64(v) => element::flip_in(v, elem, bit, crate::bits::flip_f64),
            Values::F32(v) => element::flip_in(v, elem, bit, crate::bits::flip_f32),
            Values::I32(v) => element::flip_in(v, elem, bit, |x, b| x ^ (1 << b)),
            Values::I64(v) => element::flip_in(v, elem, bit, |x, b| x ^ (1 << b)),
            Values::U32(v) => element::flip_in(v, elem, bit, |x, b| x ^ (1 << b)),
            Values::U64(v) => element::flip_in(v, elem, bit, |x, b| x ^ (1 << b)),
            Values::RankIds(_) => false,
        }
    }

    /// Combines `other` into `self` element-wise with `op`.
    ///
    /// A mismatch is an error value: received data is never trusted to have the right shape.
    pub fn combine(&mut self, op: ReduceOp, other: ValuesRef<'_>) -> Result<(), ValuesError> {
        let (local, remote) = (self.dtype(), other.dtype());
        match (self, other) {
            (Values::F64(a), ValuesRef::F64(b)) => Element::combine(a, b, op),
            (Values::F32(a), ValuesRef::F32(b)) => Element::combine(a, b, op),
            (Values::I32(a), ValuesRef::I32(b)) => Element::combine(a, b, op),
            (Values::I64(a), ValuesRef::I64(b)) => Element::combine(a, b, op),
            (Values::U32(a), ValuesRef::U32(b)) => Element::combine(a, b, op),
            (Values::U64(a), ValuesRef::U64(b)) => Element::combine(a, b, op),
            (Values::RankIds(a), ValuesRef::RankIds(b)) => element::union_rank_ids(a, b, op),
            _ => Err(ValuesError::DtypeMismatch { local, remote }),
        }
    }
}

/// A 64-bit digest of a vector's type, length and bytes: ranks report it instead of their
/// result, and the launcher compares it with the digest of the expected result. Not
/// cryptographic; equal vectors give equal digests, and a changed bit changes it with
/// overwhelming probability.
pub fn digest(values: ValuesRef<'_>) -> u64 {
    const MUL: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes = values.as_bytes();
    let mut h = (values.dtype() as u64) ^ (values.len() as u64).wrapping_mul(MUL);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let w = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        h = (h.rotate_left(23) ^ w).wrapping_mul(MUL);
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    h = (h.rotate_left(23) ^ u64::from_le_bytes(tail)).wrapping_mul(MUL);
    h ^ (h >> 29)
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
