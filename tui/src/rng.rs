//! The console's own random numbers (random kill), reproducible from the job's seed.

/// SplitMix64: tiny, fast, and good enough to pick a victim rank.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (0 when `bound` is 0); multiply-shift keeps the bias below
    /// `bound / 2^64`, invisible for rank counts.
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_repeats_for_a_seed() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for bound in [0u64, 1, 2, 3, 1000, u64::MAX] {
            let x = a.below(bound);
            assert_eq!(x, b.below(bound));
            assert!(bound == 0 && x == 0 || x < bound);
        }
    }
}
