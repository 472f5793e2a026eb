//! Single-root k-ary trees over local indices `0..m`, numbered breadth-first: the parent of `x`
//! is `(x - 1) / k` and its children are `k*x + 1 ..= k*x + k`, those below `m`.
//!
//! Arithmetic is done in `u64` (saturating where a level can overshoot) so that any `k` and `m`
//! up to `u32::MAX` are safe.

use std::ops::Range;

/// The parent of `x`, `None` for the root.
pub(super) fn parent(x: u32, k: u32) -> Option<u32> {
    x.checked_sub(1).map(|y| y / k.max(1))
}

/// The children of `x` in a tree of `m` nodes, as an ascending range (empty for a leaf).
pub(super) fn children(x: u32, k: u32, m: u32) -> Range<u32> {
    let first = u64::from(x) * u64::from(k) + 1;
    let end = (first + u64::from(k)).min(u64::from(m));
    // Both bounds are clamped to m, which fits in u32.
    let first = first.min(end);
    first as u32..end as u32
}

/// Number of edges from `x` up to the root, in O(log_k x).
pub(super) fn depth(x: u32, k: u32) -> u32 {
    let mut x = x;
    let mut depth = 0;
    while let Some(up) = parent(x, k) {
        x = up;
        depth += 1;
    }
    depth
}

/// The largest depth in a tree of `m >= 1` nodes: breadth-first numbering makes depth
/// non-decreasing in `x`, so it is the depth of the last node.
pub(super) fn height(k: u32, m: u32) -> u32 {
    depth(m.saturating_sub(1), k)
}

/// Number of nodes in the subtree of `x` (itself included), level by level in O(log_k m).
///
/// The descendants of `x` at `L` levels below it are the contiguous range
/// `[first_L, last_L]` with `first_{L+1} = k*first_L + 1` and `last_{L+1} = k*last_L + k`.
pub(super) fn subtree_size(x: u32, k: u32, m: u32) -> u32 {
    let (k, m) = (u64::from(k), u64::from(m));
    let (mut first, mut last) = (u64::from(x), u64::from(x));
    let mut total = 0u64;
    while first < m {
        total += last.min(m - 1) - first + 1;
        first = first.saturating_mul(k).saturating_add(1);
        last = last.saturating_mul(k).saturating_add(k);
    }
    // The subtree lies within 0..m, so its size fits in u32.
    total as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_tree_of_seven() {
        assert_eq!(parent(0, 2), None);
        assert_eq!(parent(5, 2), Some(2));
        assert_eq!(children(0, 2, 7), 1..3);
        assert_eq!(children(2, 2, 7), 5..7);
        assert!(children(3, 2, 7).is_empty());
        assert_eq!(children(2, 2, 6), 5..6);
        assert_eq!(depth(6, 2), 2);
        assert_eq!(height(2, 7), 2);
        assert_eq!(height(2, 8), 3);
        assert_eq!(height(2, 1), 0);
        assert_eq!(subtree_size(0, 2, 7), 7);
        assert_eq!(subtree_size(1, 2, 7), 3);
        assert_eq!(subtree_size(1, 2, 9), 5);
        assert_eq!(subtree_size(6, 2, 7), 1);
    }

    #[test]
    fn extreme_radix_and_size_do_not_overflow() {
        let max = u32::MAX;
        assert_eq!(children(0, max, 5), 1..5);
        assert!(children(max - 1, max, max).is_empty());
        assert_eq!(subtree_size(0, max, max), max);
        assert_eq!(subtree_size(1, max, max), 1);
        assert_eq!(height(max, max), 1);
        assert_eq!(height(2, max), 31);
        assert_eq!(subtree_size(0, 2, max), max);
        assert_eq!(subtree_size(1, 2, 1 << 30), 1 << 29);
    }
}
