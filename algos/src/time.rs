//! The crate's own clock type.
//!
//! Algorithms never read a clock: the driver passes `now` with every input. In the simulator a
//! `Time` counts LogP steps (or rounds); on real ranks it counts nanoseconds since the job's epoch.
//! Nothing in `algos` depends on which.

use std::fmt;
use std::ops::{Add, Sub};

/// A point in time, in driver units (simulator steps or nanoseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

/// A span of time in the same units as [`Time`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Time {
    /// The start of a run.
    pub const ZERO: Time = Time(0);
    /// Later than any real deadline; used for "never".
    pub const NEVER: Time = Time(u64::MAX);

    /// `self + d`, saturating at [`Time::NEVER`].
    #[inline]
    pub fn after(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.0))
    }

    /// The span from `earlier` to `self`, zero if `earlier` is later.
    #[inline]
    pub fn since(self, earlier: Time) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, rhs: Duration) -> Time {
        self.after(rhs)
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    fn sub(self, rhs: Time) -> Duration {
        self.since(rhs)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}", self.0)
    }
}
