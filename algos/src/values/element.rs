//! The element types a user vector may have, and the reduction kernels over each.

use bytemuck::{Pod, Zeroable};

use super::{Dtype, ReduceOp, ValuesError, ValuesRef};

/// A Rust type a collective reduces: its [`Dtype`], its view as a [`ValuesRef`], and the
/// element-wise kernels of every operator that applies to it.
pub trait Element: Pod + Zeroable + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// The type's code on the wire.
    const DTYPE: Dtype;

    /// The slice as a type-erased payload.
    fn view(slice: &[Self]) -> ValuesRef<'_>;

    /// The payload as a slice of this type; `None` when it holds another type.
    fn cast(values: ValuesRef<'_>) -> Option<&[Self]>;

    /// Combines `other` into `acc` element-wise.
    fn combine(acc: &mut [Self], other: &[Self], op: ReduceOp) -> Result<(), ValuesError>;

    /// Writes `acc` combined with `other` into `out`, element-wise, in one pass: the same
    /// values as copying `acc` into `out` and combining `other` into it (an out-of-place
    /// reduction reads its input and writes its output, touching neither twice).
    fn combine_into(
        out: &mut [Self],
        acc: &[Self],
        other: &[Self],
        op: ReduceOp,
    ) -> Result<(), ValuesError>;

    /// The value nearest `x` (integers truncate and saturate).
    fn from_f64(x: f64) -> Self;
}

/// Float element types that reductions apply to.
pub trait Float: Element + std::ops::Add<Output = Self> {
    /// The smaller of two values, ignoring a NaN operand as `f64::min` does.
    fn min_of(self, other: Self) -> Self;
    /// The larger of two values.
    fn max_of(self, other: Self) -> Self;
}

fn same_len(local: usize, remote: usize) -> Result<(), ValuesError> {
    if local == remote {
        Ok(())
    } else {
        Err(ValuesError::LengthMismatch { local, remote })
    }
}

/// Applies `f` pairwise; written as an indexed loop over equal-length slices so that the
/// compiler vectorises it (the reduction is the data path's inner loop).
#[inline(always)]
fn zip_apply<T: Copy>(acc: &mut [T], other: &[T], f: impl Fn(T, T) -> T) {
    let n = acc.len().min(other.len());
    let (acc, other) = (&mut acc[..n], &other[..n]);
    for i in 0..n {
        acc[i] = f(acc[i], other[i]);
    }
}

/// [`zip_apply`] into a third slice.
#[inline(always)]
fn zip_apply_into<T: Copy>(out: &mut [T], acc: &[T], other: &[T], f: impl Fn(T, T) -> T) {
    let n = out.len().min(acc.len()).min(other.len());
    let (out, acc, other) = (&mut out[..n], &acc[..n], &other[..n]);
    for i in 0..n {
        out[i] = f(acc[i], other[i]);
    }
}

/// Expands `$body` once per operator of a float type with `$f` bound to its kernel, so that
/// every kernel is inlined into its own loop (a function pointer would not vectorise).
macro_rules! float_kernel {
    ($t:ty, $op:expr, |$f:ident| $body:expr) => {
        match $op {
            ReduceOp::Sum | ReduceOp::Average => {
                let $f = |a: $t, b: $t| a + b;
                $body
            }
            ReduceOp::Prod => {
                let $f = |a: $t, b: $t| a * b;
                $body
            }
            ReduceOp::Min => {
                let $f = <$t>::min;
                $body
            }
            ReduceOp::Max => {
                let $f = <$t>::max;
                $body
            }
            op @ (ReduceOp::BitAnd | ReduceOp::BitOr | ReduceOp::BitXor | ReduceOp::RankUnion) => {
                return Err(ValuesError::OpNotDefined {
                    op,
                    dtype: Self::DTYPE,
                })
            }
        }
    };
}

/// [`float_kernel`] for an integer type.
macro_rules! int_kernel {
    ($t:ty, $op:expr, |$f:ident| $body:expr) => {
        match $op {
            ReduceOp::Sum => {
                let $f = <$t>::wrapping_add;
                $body
            }
            ReduceOp::Prod => {
                let $f = <$t>::wrapping_mul;
                $body
            }
            ReduceOp::Min => {
                let $f = <$t as Ord>::min;
                $body
            }
            ReduceOp::Max => {
                let $f = <$t as Ord>::max;
                $body
            }
            ReduceOp::BitAnd => {
                let $f = |a: $t, b: $t| a & b;
                $body
            }
            ReduceOp::BitOr => {
                let $f = |a: $t, b: $t| a | b;
                $body
            }
            ReduceOp::BitXor => {
                let $f = |a: $t, b: $t| a ^ b;
                $body
            }
            op @ (ReduceOp::Average | ReduceOp::RankUnion) => {
                return Err(ValuesError::OpNotDefined {
                    op,
                    dtype: Self::DTYPE,
                })
            }
        }
    };
}

/// The [`Element`] impl of `$t`, its kernels from `$kernel` ([`float_kernel`] or
/// [`int_kernel`]).
macro_rules! element {
    ($t:ty, $variant:ident, $kernel:ident) => {
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$variant;

            fn view(slice: &[Self]) -> ValuesRef<'_> {
                ValuesRef::$variant(slice)
            }

            fn cast(values: ValuesRef<'_>) -> Option<&[Self]> {
                match values {
                    ValuesRef::$variant(v) => Some(v),
                    _ => None,
                }
            }

            fn combine(acc: &mut [Self], other: &[Self], op: ReduceOp) -> Result<(), ValuesError> {
                same_len(acc.len(), other.len())?;
                $kernel!($t, op, |f| zip_apply(acc, other, f));
                Ok(())
            }

            fn combine_into(
                out: &mut [Self],
                acc: &[Self],
                other: &[Self],
                op: ReduceOp,
            ) -> Result<(), ValuesError> {
                same_len(acc.len(), other.len())?;
                same_len(out.len(), acc.len())?;
                $kernel!($t, op, |f| zip_apply_into(out, acc, other, f));
                Ok(())
            }

            fn from_f64(x: f64) -> Self {
                x as $t
            }
        }
    };
}

/// [`element`] for a float type, and its [`Float`] impl.
macro_rules! float_element {
    ($t:ty, $variant:ident) => {
        element!($t, $variant, float_kernel);

        impl Float for $t {
            fn min_of(self, other: Self) -> Self {
                self.min(other)
            }
            fn max_of(self, other: Self) -> Self {
                self.max(other)
            }
        }
    };
}

float_element!(f64, F64);
float_element!(f32, F32);
element!(i32, I32, int_kernel);
element!(i64, I64, int_kernel);
element!(u32, U32, int_kernel);
element!(u64, U64, int_kernel);

/// Flips bit `bit` of element `elem` with `flip`; false when either does not exist.
pub(super) fn flip_in<T: Copy>(v: &mut [T], elem: usize, bit: u32, flip: fn(T, u32) -> T) -> bool {
    let bits = (std::mem::size_of::<T>() * 8) as u32;
    match v.get_mut(elem) {
        Some(x) if bit < bits => {
            *x = flip(*x, bit);
            true
        }
        _ => false,
    }
}

/// Merges the strictly increasing rank set `other` into `acc`.
pub(super) fn union_rank_ids(
    acc: &mut Vec<u32>,
    other: &[u32],
    op: ReduceOp,
) -> Result<(), ValuesError> {
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

/// Divides a float vector by `count` in place, as [`ReduceOp::Average`] finishes a sum of
/// `count` inputs where the vector itself holds the result: each element times `1 / count`,
/// computed in f64 as the protocols' estimates are, so every path rounds alike. Integer
/// vectors are left as they are (the average applies to floats only).
pub fn divide_floats<T: Element>(data: &mut [T], count: u32) {
    let scale = 1.0 / f64::from(count.max(1));
    match T::DTYPE {
        Dtype::F64 => {
            let data: &mut [f64] = bytemuck::cast_slice_mut(data);
            data.iter_mut().for_each(|x| *x *= scale);
        }
        Dtype::F32 => {
            let data: &mut [f32] = bytemuck::cast_slice_mut(data);
            data.iter_mut()
                .for_each(|x| *x = (f64::from(*x) * scale) as f32);
        }
        _ => {}
    }
}
