//! 3-D torus geometry: factoring N into near-cubic dimensions, and the wrap-around
//! neighbourhood of a rank.
//!
//! Ranks are laid out x-fastest: the rank at coordinates `(x, y, z)` in a torus of dims
//! `[a, b, c]` is `x + a * (y + b * z)`.

/// Factors `n >= 1` into torus dimensions `[a, b, c]` with `a >= b >= c` and `a * b * c == n`.
///
/// Greedy, smallest side first: `c` is the largest divisor of `n` with `c^3 <= n`, then `b` the
/// largest divisor of `n / c` with `b^2 <= n / c`, and `a = n / (b * c)`; the three are then
/// sorted in decreasing order (for `n = 2p`, p prime, the steps give `c = 2, b = 1` and sorting
/// yields `[p, 2, 1]`). Runs in O(sqrt(n)) time, once per construction.
pub(super) fn factor(n: u32) -> [u32; 3] {
    let n = u64::from(n.max(1));
    let mut c = icbrt(n);
    while c > 1 && !n.is_multiple_of(c) {
        c -= 1;
    }
    let m = n / c;
    let mut b = isqrt(m);
    while b > 1 && !m.is_multiple_of(b) {
        b -= 1;
    }
    let a = m / b;
    // Each factor divides n <= u32::MAX, so the narrowing casts are exact.
    let mut dims = [a as u32, b as u32, c as u32];
    dims.sort_unstable_by(|x, y| y.cmp(x));
    dims
}

/// Largest `r` with `r^3 <= n`.
fn icbrt(n: u64) -> u64 {
    // The float estimate is within one of the answer for n < 2^53; the loops make it exact.
    let mut r = (n as f64).cbrt() as u64;
    while r > 0 && r.saturating_mul(r).saturating_mul(r) > n {
        r -= 1;
    }
    while (r + 1).saturating_mul(r + 1).saturating_mul(r + 1) <= n {
        r += 1;
    }
    r
}

/// Largest `r` with `r^2 <= n`.
fn isqrt(n: u64) -> u64 {
    let mut r = (n as f64).sqrt() as u64;
    while r > 0 && r.saturating_mul(r) > n {
        r -= 1;
    }
    while (r + 1).saturating_mul(r + 1) <= n {
        r += 1;
    }
    r
}

/// Number of ranks of a torus with these dims (may exceed `u32` for hand-built dims).
/// Saturates at `u64::MAX`, which only hand-built dims can reach.
pub(super) fn volume(dims: [u32; 3]) -> u64 {
    dims.iter()
        .fold(1u64, |acc, &d| acc.saturating_mul(u64::from(d)))
}

/// Coordinates of rank `r`; `r` must be below the volume and every dim non-zero.
fn coords(dims: [u32; 3], r: u32) -> [u64; 3] {
    let [a, b, _] = dims.map(u64::from);
    let r = u64::from(r);
    [r % a, (r / a) % b, r / (a * b)]
}

/// The rank at the given coordinates, if it fits in a `u32`.
fn rank_at(dims: [u32; 3], c: [u64; 3]) -> Option<u32> {
    // u128: hand-built dims can make this exceed u64 before try_from rejects it.
    let [a, b, _] = dims.map(u128::from);
    let c = c.map(u128::from);
    u32::try_from(c[0] + a * (c[1] + b * c[2])).ok()
}

/// Number of distinct neighbours of any rank: a dimension of size 1 adds none (the step lands on
/// the rank itself), size 2 adds one (both directions meet), larger sizes add two.
pub(super) fn degree(dims: [u32; 3]) -> u32 {
    dims.iter()
        .map(|&d| match d {
            0 | 1 => 0,
            2 => 1,
            _ => 2,
        })
        .sum()
}

/// At most six neighbours of one rank, ascending and without duplicates.
#[derive(Clone, Copy, Debug)]
pub(super) struct SmallSet {
    items: [u32; 6],
    len: usize,
}

impl SmallSet {
    /// The `i`-th smallest element.
    pub(super) fn get(&self, i: u32) -> Option<u32> {
        self.items[..self.len].get(i as usize).copied()
    }

    /// The elements, ascending.
    #[cfg(test)]
    pub(super) fn as_slice(&self) -> &[u32] {
        &self.items[..self.len]
    }
}

/// The neighbours of rank `r` (which must be below the volume), ascending and deduplicated.
pub(super) fn neighbours(dims: [u32; 3], r: u32) -> SmallSet {
    let mut set = SmallSet {
        items: [0; 6],
        len: 0,
    };
    if dims.contains(&0) {
        return set;
    }
    let here = coords(dims, r);
    for axis in 0..3 {
        let size = u64::from(dims[axis]);
        for step in [1, size - 1] {
            let mut there = here;
            there[axis] = (here[axis] + step) % size;
            if let Some(other) = rank_at(dims, there) {
                // A size-1 axis steps back onto r; a size-2 axis gives the same rank twice.
                if other != r && !set.items[..set.len].contains(&other) {
                    set.items[set.len] = other;
                    set.len += 1;
                }
            }
        }
    }
    set.items[..set.len].sort_unstable();
    set
}

/// Whether ranks `p` and `q` (both below the volume) differ by one wrap-around step along
/// exactly one axis.
pub(super) fn adjacent(dims: [u32; 3], p: u32, q: u32) -> bool {
    if p == q || dims.contains(&0) {
        return false;
    }
    let (cp, cq) = (coords(dims, p), coords(dims, q));
    let mut differing = (0..3).filter(|&axis| cp[axis] != cq[axis]);
    match (differing.next(), differing.next()) {
        (Some(axis), None) => {
            let size = u64::from(dims[axis]);
            let forward = (cq[axis] + size - cp[axis]) % size;
            forward == 1 || forward == size - 1
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factoring_matches_the_documented_examples() {
        assert_eq!(factor(1), [1, 1, 1]);
        assert_eq!(factor(8), [2, 2, 2]);
        assert_eq!(factor(12), [3, 2, 2]);
        assert_eq!(factor(14), [7, 2, 1]);
        assert_eq!(factor(13), [13, 1, 1]);
        assert_eq!(factor(64), [4, 4, 4]);
        assert_eq!(factor(1 << 30), [1024, 1024, 1024]);
        assert_eq!(factor(u32::MAX), [65537, 1285, 51]);
    }

    #[test]
    fn integer_roots_are_exact() {
        for n in 0..2000u64 {
            let c = icbrt(n);
            assert!(c * c * c <= n && (c + 1).pow(3) > n);
            let s = isqrt(n);
            assert!(s * s <= n && (s + 1).pow(2) > n);
        }
        assert_eq!(icbrt(u64::from(u32::MAX)), 1625);
        assert_eq!(isqrt(u64::from(u32::MAX)), 65535);
    }

    #[test]
    fn factors_multiply_back_and_are_sorted() {
        for n in 1..3000u32 {
            let dims = factor(n);
            assert_eq!(volume(dims), u64::from(n), "{n}");
            assert!(dims[0] >= dims[1] && dims[1] >= dims[2], "{n}: {dims:?}");
        }
    }

    #[test]
    fn small_axes_collapse_duplicate_neighbours() {
        // 2 x 1 x 3: the x axis gives one neighbour, y none, z two.
        let dims = [2, 1, 3];
        assert_eq!(degree(dims), 3);
        assert_eq!(neighbours(dims, 0).as_slice(), &[1, 2, 4]);
        assert_eq!(neighbours(dims, 5).as_slice(), &[1, 3, 4]);
        assert!(adjacent(dims, 0, 4) && adjacent(dims, 4, 0));
        assert!(!adjacent(dims, 0, 3) && !adjacent(dims, 2, 2));
        assert_eq!(degree([1, 1, 1]), 0);
        assert_eq!(neighbours([1, 1, 1], 0).as_slice(), &[] as &[u32]);
    }

    #[test]
    fn a_corner_of_a_big_cube_wraps_around() {
        let dims = [1024, 1024, 1024];
        let far = 1023 + 1024 * 1023 + 1024 * 1024 * 1023;
        assert_eq!(
            neighbours(dims, 0).as_slice(),
            &[1, 1023, 1024, 1024 * 1023, 1024 * 1024, 1023 * 1024 * 1024]
        );
        assert!(adjacent(dims, 0, 1024 * 1024 * 1023));
        assert!(!adjacent(dims, 0, far));
    }
}
