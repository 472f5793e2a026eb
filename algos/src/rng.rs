//! A small, explicitly seeded random number generator.
//!
//! Algorithms that draw (gossip partners, permutations) get their own generator from the driver,
//! seeded from the run's seed and the rank: there is no global RNG, and the sequence is fixed by
//! this code, not by a dependency's version. The generator is xoshiro256++ seeded through
//! SplitMix64, as its authors recommend.

/// xoshiro256++: fast, 256 bits of state, good statistical quality for simulation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRng {
    state: [u64; 4],
}

/// One SplitMix64 step: used to expand seeds and to derive independent sub-seeds.
#[inline]
pub fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Mixes a seed with a stream id (e.g. a rank) into an independent seed.
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut x = seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    splitmix64(&mut x)
}

impl SimRng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let state = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        SimRng { state }
    }

    /// A generator for stream `stream` (a rank, a fault class) of the run seeded by `seed`.
    pub fn for_stream(seed: u64, stream: u64) -> Self {
        SimRng::new(derive_seed(seed, stream))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in the open interval `(0, 1)`: never 0, so `ln` and divisions are safe.
    #[inline]
    pub fn next_open01(&mut self) -> f64 {
        ((self.next_u64() >> 12) as f64 + 0.5) * (1.0 / (1u64 << 52) as f64)
    }

    /// Uniform in `0..bound` (Lemire's multiply-shift with rejection, so unbiased).
    /// `bound` must be positive.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "SimRng::below needs a positive bound");
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let wide = u128::from(self.next_u64()) * u128::from(bound);
            if (wide as u64) >= threshold {
                return (wide >> 64) as u64;
            }
        }
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }

    /// A standard normal draw (Box-Muller; one of the pair is discarded for simplicity).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.next_open01();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Shuffles `items` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = SimRng::new(7);
        let mut b = SimRng::new(7);
        let mut c = SimRng::new(8);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = SimRng::new(1);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[rng.below(7) as usize] += 1;
        }
        assert!(seen.iter().all(|&count| count > 800), "{seen:?}");
    }

    #[test]
    fn open_interval_excludes_endpoints() {
        let mut rng = SimRng::new(3);
        for _ in 0..10_000 {
            let x = rng.next_open01();
            assert!(x > 0.0 && x < 1.0);
        }
    }
}
