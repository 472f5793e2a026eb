//! The floating-point types gossip state is kept in: double precision for the asynchronous
//! algorithms of 000 Sec. 4 and 003, single precision for the round-based HPS and HPFLC of 000
//! Sec. 6 ("we internally stored all data in single precision"), either selectable.

use std::fmt::Debug;
use std::ops::{Add, Div, Mul, Neg, Sub};

use bytemuck::Pod;

use crate::bits::{flip_f32, flip_f64};
use crate::values::{Dtype, ValuesRef};

/// A floating-point element of gossip state and messages.
pub trait Real:
    Pod
    + Debug
    + Default
    + PartialEq
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + Send
    + Sync
    + 'static
{
    /// Zero.
    const ZERO: Self;
    /// Bits per value (bit flips are numbered 0..BITS).
    const BITS: u32;
    /// The payload type of a frame carrying these values.
    const DTYPE: Dtype;
    /// The default checksum threshold tau (see [`super::GossipConfig::tau`]).
    const DEFAULT_TAU: f64;
    /// The unit round-off: the largest relative error of one rounded operation.
    const UNIT_ROUNDOFF: f64;
    /// Rounds an `f64` to this type.
    fn from_f64(x: f64) -> Self;
    /// Widens to `f64`.
    fn to_f64(self) -> f64;
    /// Flips bit `bit` (0 = least significant mantissa bit).
    fn flip(self, bit: u32) -> Self;
    /// Half of the value (exact unless it underflows).
    fn half(self) -> Self;
    /// A frame payload over `values`.
    fn payload(values: &[Self]) -> ValuesRef<'_>;
    /// The values of a frame payload, if it holds this type.
    fn from_payload(values: ValuesRef<'_>) -> Option<&[Self]>;
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const BITS: u32 = 64;
    const DTYPE: Dtype = Dtype::F64;
    /// 000 Sec. 4.4.1 uses 1e-11 for values in [0, 1]; round-off of a double checksum is about
    /// 1e-16 relative, so 1e-11 leaves five orders of margin.
    const DEFAULT_TAU: f64 = 1e-11;
    /// 2^-53.
    const UNIT_ROUNDOFF: f64 = f64::EPSILON / 2.0;
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn flip(self, bit: u32) -> f64 {
        flip_f64(self, bit)
    }
    fn half(self) -> f64 {
        self * 0.5
    }
    fn payload(values: &[f64]) -> ValuesRef<'_> {
        ValuesRef::F64(values)
    }
    fn from_payload(values: ValuesRef<'_>) -> Option<&[f64]> {
        match values {
            ValuesRef::F64(v) => Some(v),
            _ => None,
        }
    }
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const BITS: u32 = 32;
    const DTYPE: Dtype = Dtype::F32;
    /// 1e-11 is far below single-precision round-off (6e-8 relative): every checksum would look
    /// corrupted. 1e-4 is about 800 ulps: sums of a few dozen flows stay below it, while a flip
    /// that matters at the accuracies HPFLC targets (1e-1 to 1e-5) is above it.
    const DEFAULT_TAU: f64 = 1e-4;
    /// 2^-24.
    const UNIT_ROUNDOFF: f64 = 5.960_464_477_539_063e-8;
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn flip(self, bit: u32) -> f32 {
        flip_f32(self, bit)
    }
    fn half(self) -> f32 {
        self * 0.5
    }
    fn payload(values: &[f32]) -> ValuesRef<'_> {
        ValuesRef::F32(values)
    }
    fn from_payload(values: ValuesRef<'_>) -> Option<&[f32]> {
        match values {
            ValuesRef::F32(v) => Some(v),
            _ => None,
        }
    }
}
