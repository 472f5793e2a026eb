//! Single-root k-nomial trees over local indices `0..m`.
//!
//! Write `x` in base `k`. Its parent clears the lowest non-zero digit; its children set one digit
//! below that lowest non-zero digit (any digit for the root) to a value `1..k`. Hence the subtree
//! of `x` is the contiguous range `[x, x + w)`, clipped to `m`, where `w` is the weight `k^i` of
//! `x`'s lowest non-zero digit (the whole tree for the root), and the depth of `x` is its number
//! of non-zero digits. With `k = 2` this is the binomial tree.
//!
//! Weights are `u64` and stop growing once they pass `m`, so no product can overflow.

use std::ops::Range;

/// The weight `k^i` and value of the lowest non-zero base-`k` digit of `x > 0`.
fn lowest_digit(x: u32, k: u32) -> (u64, u64) {
    let (x, k) = (u64::from(x), u64::from(k.max(2)));
    let mut weight = 1u64;
    loop {
        let digit = (x / weight) % k;
        // For x > 0 a non-zero digit comes before weight exceeds x, so weight * k stays
        // below 2^64.
        if digit > 0 || x == 0 {
            return (weight, digit);
        }
        weight *= k;
    }
}

/// The parent of `x`, `None` for the root.
pub(super) fn parent(x: u32, k: u32) -> Option<u32> {
    if x == 0 {
        return None;
    }
    let (weight, digit) = lowest_digit(x, k);
    // The result is below x, so it fits in u32.
    Some((u64::from(x) - digit * weight) as u32)
}

/// The exclusive upper bound on child weights of `x`: the weight of its lowest non-zero digit,
/// unbounded for the root.
fn child_weight_limit(x: u32, k: u32) -> u64 {
    if x == 0 {
        u64::MAX
    } else {
        lowest_digit(x, k).0
    }
}

/// The local indices in the subtree of `x` in a tree of `m` nodes (`x < m`).
pub(super) fn subtree_range(x: u32, k: u32, m: u32) -> Range<u32> {
    if x == 0 {
        return 0..m;
    }
    let end = (u64::from(x) + lowest_digit(x, k).0).min(u64::from(m));
    // Clamped to m, so it fits in u32.
    x..end as u32
}

/// Number of edges from `x` up to the root: its count of non-zero base-`k` digits.
pub(super) fn depth(x: u32, k: u32) -> u32 {
    let k = k.max(2);
    let mut x = x;
    let mut depth = 0;
    while x > 0 {
        depth += u32::from(!x.is_multiple_of(k));
        x /= k;
    }
    depth
}

/// The largest depth in a tree of `m >= 1` nodes, in O(log_k m).
///
/// With `M = m - 1` of `L` base-`k` digits, the most non-zero digits any index `<= M` can have
/// is `L` if `M >= 11...1` (`L` ones in base `k`), else `L - 1` (reached by `(k-1)(k-1)...`
/// with `L - 1` digits, which is below `k^(L-1) <= M`).
pub(super) fn height(k: u32, m: u32) -> u32 {
    let (k, max) = (u64::from(k.max(2)), u64::from(m.saturating_sub(1)));
    let (mut digits, mut rest, mut all_ones) = (0u32, max, 0u64);
    while rest > 0 {
        digits += 1;
        rest /= k;
        all_ones = all_ones.saturating_mul(k).saturating_add(1);
    }
    if max >= all_ones {
        digits
    } else {
        digits - 1
    }
}

/// Number of children of `x` in a tree of `m` nodes, in O(log_k m).
pub(super) fn child_count(x: u32, k: u32, m: u32) -> u32 {
    let (x64, k64, m64) = (u64::from(x), u64::from(k.max(2)), u64::from(m));
    let limit = child_weight_limit(x, k);
    let mut count = 0u64;
    let mut weight = 1u64;
    while weight < limit && x64 + weight < m64 {
        count += ((m64 - 1 - x64) / weight).min(k64 - 1);
        weight = weight.saturating_mul(k64);
    }
    // At most m children, so it fits in u32.
    count as u32
}

/// The children of one node in ascending order: `x + j * k^i` for increasing `i`, then `j`.
///
/// That order is ascending because `(k - 1) * k^i < k^(i+1)`.
#[derive(Clone, Debug)]
pub(super) struct Children {
    x: u64,
    k: u64,
    m: u64,
    limit: u64,
    weight: u64,
    j: u64,
}

impl Children {
    /// The children of `x` in a tree of `m` nodes.
    pub(super) fn new(x: u32, k: u32, m: u32) -> Self {
        Children {
            x: u64::from(x),
            k: u64::from(k.max(2)),
            m: u64::from(m),
            limit: child_weight_limit(x, k),
            weight: 1,
            j: 1,
        }
    }
}

impl Iterator for Children {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while self.weight < self.limit && self.x + self.weight < self.m {
            if self.j < self.k {
                let child = self.x + self.j * self.weight;
                if child < self.m {
                    self.j += 1;
                    // Below m, so it fits in u32.
                    return Some(child as u32);
                }
            }
            self.weight = self.weight.saturating_mul(self.k);
            self.j = 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kids(x: u32, k: u32, m: u32) -> Vec<u32> {
        Children::new(x, k, m).collect()
    }

    #[test]
    fn binomial_tree_of_eight() {
        assert_eq!(kids(0, 2, 8), [1, 2, 4]);
        assert_eq!(kids(4, 2, 8), [5, 6]);
        assert_eq!(kids(6, 2, 8), [7]);
        assert_eq!(kids(4, 2, 6), [5]);
        assert_eq!(parent(6, 2), Some(4));
        assert_eq!(parent(7, 2), Some(6));
        assert_eq!(depth(7, 2), 3);
        assert_eq!(height(2, 8), 3);
        assert_eq!(height(2, 7), 2);
        assert_eq!(subtree_range(4, 2, 8), 4..8);
        assert_eq!(subtree_range(4, 2, 6), 4..6);
        assert_eq!(subtree_range(0, 2, 8), 0..8);
    }

    #[test]
    fn trinomial_children_set_lower_digits() {
        // 9 = 100 in base 3: children 10, 11 (digit 0) and 12, 15 (digit 1).
        assert_eq!(kids(9, 3, 27), [10, 11, 12, 15]);
        assert_eq!(kids(0, 3, 10), [1, 2, 3, 6, 9]);
        assert_eq!(child_count(0, 3, 10), 5);
        assert_eq!(parent(15, 3), Some(9));
        assert_eq!(parent(14, 3), Some(12));
        assert_eq!(subtree_range(3, 3, 27), 3..6);
        assert_eq!(subtree_range(9, 3, 27), 9..18);
    }

    #[test]
    fn height_matches_brute_force() {
        for k in 2..7 {
            let mut max = 0;
            for m in 1..400 {
                max = max.max(depth(m - 1, k));
                assert_eq!(height(k, m), max, "k = {k}, m = {m}");
            }
        }
    }

    #[test]
    fn child_count_matches_iterator() {
        for k in 2..6 {
            for m in 1..200 {
                for x in 0..m {
                    assert_eq!(child_count(x, k, m) as usize, kids(x, k, m).len());
                }
            }
        }
    }

    #[test]
    fn extreme_sizes_do_not_overflow() {
        let max = u32::MAX;
        assert_eq!(height(2, max), 31);
        assert_eq!(height(2, 1 << 30), 30);
        assert_eq!(child_count(0, 2, max), 32);
        assert_eq!(kids(0, 2, 1 << 30).len(), 30);
        assert_eq!(kids(0, max, 5), [1, 2, 3, 4]);
        assert_eq!(child_count(0, max, max), max - 1);
        assert_eq!(child_count(max - 1, 2, max), 0);
        assert_eq!(subtree_range(1 << 31, 2, max), (1 << 31)..max);
        assert_eq!(depth(max - 1, 2), 31);
        assert_eq!(parent(max - 1, max), Some(0));
    }
}
