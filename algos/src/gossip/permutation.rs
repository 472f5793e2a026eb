//! Round partners for permutation gossip (paper 000 Sec. 6): HPS, where round r follows a random
//! permutation π_r of the ranks, and HPFLC, where round r follows one random N-cycle.
//!
//! Every rank must agree on π_r without talking, and N can be 2^30: a table of π_r would take
//! 4 GiB on every rank, and shuffling it would take N steps per round. So π_r is a keyed
//! pseudorandom permutation, [`KeyedPermutation`], that any rank evaluates at one point (and
//! inverts at one point) from the shared seed and the round number alone.
//!
//! Construction: a balanced Feistel network over the smallest even number of bits 2h with
//! 2^(2h) >= N, [`FEISTEL_ROUNDS`] rounds, each with its own 64-bit key derived from
//! `(seed, round)` and a SplitMix64 round function. A Feistel network is a bijection of the
//! domain 0..2^(2h) whatever its round function; *cycle-walking* (re-applying it until the value
//! falls below N) turns it into a bijection of 0..N.
//!
//! Cost: a permutation is 6 keys plus two integers (56 bytes) and takes 7 SplitMix64 steps to
//! build. One evaluation is [`FEISTEL_ROUNDS`] mixes per Feistel pass times the number of passes
//! of the walk. The domain is below 4N, and the walks of all x in 0..N together take at most as
//! many passes as the domain has points, so the walk averages fewer than 4 passes over the ranks.

use crate::rng::{derive_seed, splitmix64};

/// Number of Feistel rounds (4 already give a pseudorandom permutation; 6 add margin for the
/// small half-widths of small N).
pub const FEISTEL_ROUNDS: usize = 6;

/// A keyed pseudorandom permutation of 0..n (balanced Feistel network over the smallest even
/// number of bits covering n, with cycle-walking to stay inside 0..n).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyedPermutation {
    n: u32,
    /// Bits of each Feistel half, at most 16.
    half_bits: u32,
    keys: [u64; FEISTEL_ROUNDS],
}

/// The Feistel round function: a SplitMix64 mix of the half keyed by the round key.
#[inline]
fn round_function(key: u64, half: u64) -> u64 {
    let mut state = key ^ half;
    splitmix64(&mut state)
}

impl KeyedPermutation {
    /// The permutation of 0..n that every rank derives for `round` of the run seeded by `seed`.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn new(n: u32, seed: u64, round: u64) -> KeyedPermutation {
        assert!(n >= 1, "KeyedPermutation needs n >= 1");
        // ceil(log2 n): 0 for n = 1, 32 for n > 2^31; halves of up to 16 bits.
        let bits = u32::BITS - (n - 1).leading_zeros();
        let half_bits = bits.div_ceil(2);
        let mut state = derive_seed(seed, round);
        let keys = std::array::from_fn(|_| splitmix64(&mut state));
        KeyedPermutation { n, half_bits, keys }
    }

    /// The number of elements permuted.
    pub fn len(&self) -> u32 {
        self.n
    }

    /// Always false: a permutation has at least one element.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// π(x). Panics unless `x < self.len()`; the result is below `self.len()`.
    pub fn apply(&self, x: u32) -> u32 {
        self.walk(x, Self::encrypt).0
    }

    /// π^{-1}(y): `invert(apply(x)) == x`. Panics unless `y < self.len()`.
    pub fn invert(&self, y: u32) -> u32 {
        self.walk(y, Self::decrypt).0
    }

    fn mask(&self) -> u64 {
        (1u64 << self.half_bits) - 1
    }

    /// One pass of the Feistel network over 0..2^(2h).
    fn encrypt(&self, x: u64) -> u64 {
        let mask = self.mask();
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for &key in &self.keys {
            (left, right) = (right, left ^ (round_function(key, right) & mask));
        }
        (left << self.half_bits) | right
    }

    /// The inverse pass: the rounds in reverse order.
    fn decrypt(&self, y: u64) -> u64 {
        let mask = self.mask();
        let (mut left, mut right) = (y >> self.half_bits, y & mask);
        for &key in self.keys.iter().rev() {
            (left, right) = (right ^ (round_function(key, left) & mask), left);
        }
        (left << self.half_bits) | right
    }

    /// Cycle-walking: applies `pass` until the value is below n; returns it and the pass count.
    ///
    /// The loop terminates: `pass` is a bijection of the finite domain, so the orbit of `x` is a
    /// cycle that returns to `x` itself, and `x < n`. It therefore stops after at most
    /// `domain - n + 1` passes, at the next in-range point of that cycle (the previous one for
    /// the inverse pass, which walks the same cycle backwards: hence `invert(apply(x)) == x`).
    fn walk(&self, x: u32, pass: fn(&Self, u64) -> u64) -> (u32, u64) {
        assert!(x < self.n, "KeyedPermutation: {x} is not below {}", self.n);
        let n = u64::from(self.n);
        let mut y = pass(self, u64::from(x));
        let mut passes = 1;
        while y >= n {
            y = pass(self, y);
            passes += 1;
        }
        // y < n <= u32::MAX, so the cast is lossless.
        (y as u32, passes)
    }
}

/// Who a rank sends to and receives from in one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundPartners {
    /// The rank this rank sends to.
    pub send_to: u32,
    /// The rank this rank receives from.
    pub receive_from: u32,
}

/// HPS: a random permutation per round: rank i sends to π_r(i) and receives from π_r^{-1}(i).
/// A fixed point (π_r(i) = i) means the rank sits the round out.
///
/// Panics unless `rank < n`.
pub fn permutation_partners(n: u32, seed: u64, round: u64, rank: u32) -> RoundPartners {
    let pi = KeyedPermutation::new(n, seed, round);
    RoundPartners {
        send_to: pi.apply(rank),
        receive_from: pi.invert(rank),
    }
}

/// HPFLC: one random n-cycle per round (000 Sec. 6.1: "permutation cycles", so no two ranks
/// ever send to each other in the same round when n > 2): with σ a random ordering,
/// send_to = σ(σ^{-1}(i) + 1 mod n), receive_from = σ(σ^{-1}(i) - 1 mod n).
///
/// For n = 2 both partners are the other rank; for n = 1 rank 0 sits the round out. Panics
/// unless `rank < n`.
pub fn cycle_partners(n: u32, seed: u64, round: u64, rank: u32) -> RoundPartners {
    let sigma = KeyedPermutation::new(n, seed, round);
    let position = sigma.invert(rank);
    // Written without `position + n - 1`, which would overflow for n near u32::MAX.
    let next = if position + 1 == n { 0 } else { position + 1 };
    let previous = if position == 0 { n - 1 } else { position - 1 };
    RoundPartners {
        send_to: sigma.apply(next),
        receive_from: sigma.apply(previous),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEEDS: [u64; 3] = [0, 1, 0xDEAD_BEEF_1234_5678];
    const ROUNDS: [u64; 2] = [0, 7];

    fn sizes() -> impl Iterator<Item = u32> {
        (1..=300).chain([512, 1000, 1024, 4097, 65536])
    }

    fn images(n: u32, seed: u64, round: u64) -> Vec<u32> {
        let pi = KeyedPermutation::new(n, seed, round);
        (0..n.min(4096)).map(|x| pi.apply(x)).collect()
    }

    #[test]
    fn apply_is_a_bijection_and_invert_undoes_it() {
        for n in sizes() {
            for seed in SEEDS {
                for round in ROUNDS {
                    let pi = KeyedPermutation::new(n, seed, round);
                    assert_eq!(pi.len(), n);
                    assert!(!pi.is_empty());
                    let mut hit = vec![false; n as usize];
                    for x in 0..n {
                        let y = pi.apply(x);
                        assert!(y < n, "n={n} x={x} y={y}");
                        assert!(
                            !hit[y as usize],
                            "n={n} seed={seed} round={round}: {y} twice"
                        );
                        hit[y as usize] = true;
                        assert_eq!(pi.invert(y), x, "n={n} seed={seed} round={round}");
                    }
                }
            }
        }
    }

    #[test]
    fn one_element_maps_to_zero() {
        let pi = KeyedPermutation::new(1, 42, 3);
        assert_eq!((pi.apply(0), pi.invert(0)), (0, 0));
        let expected = RoundPartners {
            send_to: 0,
            receive_from: 0,
        };
        assert_eq!(permutation_partners(1, 42, 3, 0), expected);
        assert_eq!(cycle_partners(1, 42, 3, 0), expected);
    }

    #[test]
    fn rounds_and_seeds_change_the_permutation() {
        for n in [8, 9, 64, 1000, 1 << 20] {
            let base = images(n, 5, 0);
            assert_ne!(base, images(n, 5, 1), "n={n}: rounds 0 and 1 agree");
            assert_ne!(base, images(n, 6, 0), "n={n}: seeds 5 and 6 agree");
            assert_eq!(base, images(n, 5, 0), "n={n}: not deterministic");
            assert_ne!(
                images(n, 5, 1),
                images(n, 5, 2),
                "n={n}: rounds 1 and 2 agree"
            );
        }
    }

    #[test]
    fn cycle_partners_form_one_cycle_without_two_cycles() {
        for n in (1..=64).chain([100, 1000, 4097]) {
            for seed in SEEDS {
                for round in ROUNDS {
                    let mut seen = vec![false; n as usize];
                    let mut rank = 0;
                    for _ in 0..n {
                        assert!(!seen[rank as usize], "n={n}: {rank} visited twice");
                        seen[rank as usize] = true;
                        let p = cycle_partners(n, seed, round, rank);
                        assert!(p.send_to < n && p.receive_from < n);
                        let next = cycle_partners(n, seed, round, p.send_to);
                        assert_eq!(next.receive_from, rank, "n={n} seed={seed} round={round}");
                        if n > 1 {
                            assert_ne!(p.send_to, rank, "n={n}: {rank} sends to itself");
                        }
                        if n > 2 {
                            assert_ne!(p.send_to, p.receive_from, "n={n}: 2-cycle at {rank}");
                        }
                        rank = p.send_to;
                    }
                    assert_eq!(rank, 0, "n={n}: not back at 0 after n steps");
                    assert!(seen.iter().all(|&s| s), "n={n}: not every rank visited");
                }
            }
        }
    }

    #[test]
    fn permutation_partners_are_consistent() {
        for n in [1, 2, 3, 8, 100, 1000, 4097] {
            for seed in SEEDS {
                for rank in 0..n {
                    let p = permutation_partners(n, seed, 3, rank);
                    assert_eq!(
                        permutation_partners(n, seed, 3, p.send_to).receive_from,
                        rank
                    );
                    assert_eq!(
                        permutation_partners(n, seed, 3, p.receive_from).send_to,
                        rank
                    );
                }
            }
        }
    }

    #[test]
    fn first_image_is_roughly_uniform() {
        let mut counts = [0u32; 8];
        for seed in 0..20_000 {
            counts[KeyedPermutation::new(8, seed, 0).apply(0) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (2_000..=3_000).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn huge_n_round_trips() {
        for n in [1 << 30, (1 << 30) + 1, u32::MAX] {
            let pi = KeyedPermutation::new(n, 99, 12);
            let xs = (0..3_000u64).map(|i| (i * 357_913_941 % u64::from(n)) as u32);
            for x in xs.chain([0, n - 1]) {
                let y = pi.apply(x);
                assert!(y < n, "n={n} x={x} y={y}");
                assert_eq!(pi.invert(y), x, "n={n} x={x}");
                let p = cycle_partners(n, 99, 12, x);
                assert_eq!(cycle_partners(n, 99, 12, p.send_to).receive_from, x);
            }
        }
    }

    #[test]
    fn cycle_walks_are_short_on_average() {
        // Worst case for the domain: just above a power of 4, so the domain is almost 4n.
        for n in [2, 5, 17, 1025, (1 << 16) + 1] {
            let pi = KeyedPermutation::new(n, 3, 1);
            let domain = 1u64 << (2 * pi.half_bits);
            assert!(domain < 4 * u64::from(n), "n={n} domain={domain}");
            let total: u64 = (0..n)
                .map(|x| pi.walk(x, KeyedPermutation::encrypt).1)
                .sum();
            assert!(
                total <= domain,
                "n={n}: {total} passes for a domain of {domain}"
            );
        }
    }
}
