//! Where every rank sits in a corrected-tree operation: up-correction groups, the I(f)-tree and
//! the correction ring, all relative to the operation's root.
//!
//! Ranks are renumbered *virtually* so that the root is 0: `v = (rank - root) mod n`. With
//! `k = f + 1` subtrees (001 Sec. 4.2):
//! - the root's children are virtual ranks `1..=k`, and virtual rank `v >= 1` lies in subtree
//!   `((v - 1) mod k) + 1` at position `j = (v - 1) / k` within it, so subtree sizes differ by at
//!   most one (the I(f)-tree of 001 Sec. 4.5);
//! - inside a subtree, positions form a heap of the given arity (position `j`'s parent is
//!   `(j - 1) / arity`), so the tree is `log_arity(n / k)` deep;
//! - up-correction group `g` holds virtual ranks `g k + 1 ..= g k + k`: one member per subtree. If
//!   the last group is short, the root joins it;
//! - ring neighbours `v` and `v + 1` lie in different subtrees whenever `k >= 2`, which is what
//!   the corrected broadcast's correction ring needs.
//!
//! Everything is computed on demand in O(1) or O(degree): nothing per rank is stored, so a layout
//! costs the same at 64 and at 2^20 ranks.

/// The layout of one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorrectedLayout {
    n: u32,
    root: u32,
    fanout: u32,
    arity: u32,
}

impl CorrectedLayout {
    /// A layout of `n` ranks around `root` with `fanout` subtrees (f + 1 for reduce) and heaps of
    /// `arity` inside them. `fanout` and `arity` are clamped to at least 1.
    pub fn new(n: u32, root: u32, fanout: u32, arity: u32) -> CorrectedLayout {
        CorrectedLayout {
            n: n.max(1),
            root: root % n.max(1),
            fanout: fanout.max(1),
            arity: arity.max(1),
        }
    }

    /// Ranks.
    pub fn size(&self) -> u32 {
        self.n
    }

    /// The real rank of the root.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// Subtrees of the root (k = f + 1).
    pub fn fanout(&self) -> u32 {
        self.fanout
    }

    /// The virtual rank of real rank `rank`.
    pub fn virt(&self, rank: u32) -> u32 {
        (rank % self.n + self.n - self.root) % self.n
    }

    /// The real rank of virtual rank `v`.
    pub fn real(&self, v: u32) -> u32 {
        ((u64::from(v % self.n) + u64::from(self.root)) % u64::from(self.n)) as u32
    }

    /// The subtree (1..=k) real rank `rank` lies in; `None` for the root.
    pub fn subtree_of(&self, rank: u32) -> Option<u32> {
        let v = self.virt(rank);
        (v > 0).then(|| (v - 1) % self.fanout + 1)
    }

    /// The tree parent of real rank `rank`; `None` for the root.
    pub fn parent(&self, rank: u32) -> Option<u32> {
        let v = self.virt(rank);
        if v == 0 {
            return None;
        }
        let j = (v - 1) / self.fanout;
        if j == 0 {
            return Some(self.root);
        }
        let subtree = (v - 1) % self.fanout + 1;
        let parent_j = (j - 1) / self.arity;
        Some(self.real(parent_j * self.fanout + subtree))
    }

    /// The tree children of real rank `rank`, in increasing virtual order.
    pub fn children(&self, rank: u32) -> impl Iterator<Item = u32> + '_ {
        let v = self.virt(rank);
        let (first, count, stride) = if v == 0 {
            (1u64, u64::from(self.fanout), 1u64)
        } else {
            let j = u64::from((v - 1) / self.fanout);
            let subtree = u64::from((v - 1) % self.fanout + 1);
            let first_j = j * u64::from(self.arity) + 1;
            (
                first_j * u64::from(self.fanout) + subtree,
                u64::from(self.arity),
                u64::from(self.fanout),
            )
        };
        (0..count)
            .map(move |i| first + i * stride)
            .take_while(move |&cv| cv < u64::from(self.n))
            .map(move |cv| self.real(cv as u32))
    }

    /// `a = ((n - 1) mod k) + 1` of 001 Theorem 5: when `a > 1`, the last group is short, has
    /// `a - 1` members besides the root, and the root joins it.
    pub fn last_group_a(&self) -> u32 {
        (self.n - 1) % self.fanout + 1
    }

    /// Whether the root belongs to an up-correction group.
    pub fn root_in_group(&self) -> bool {
        self.last_group_a() > 1
    }

    /// The other members of real rank `rank`'s up-correction group, in increasing virtual order
    /// (the root, when it belongs, first).
    pub fn group_peers(&self, rank: u32) -> impl Iterator<Item = u32> + '_ {
        let v = self.virt(rank);
        let groups_full = (self.n - 1) / self.fanout;
        let (group, includes_root) = if v == 0 {
            (groups_full, self.root_in_group())
        } else {
            let g = (v - 1) / self.fanout;
            (g, g == groups_full)
        };
        let with_root = (v != 0 && includes_root).then_some(0u32);
        let members = if v == 0 && !includes_root {
            0..0
        } else {
            let lo = group * self.fanout + 1;
            let hi = (lo + self.fanout).min(self.n);
            lo..hi
        };
        with_root
            .into_iter()
            .chain(members)
            .filter(move |&m| m != v)
            .map(move |m| self.real(m))
    }

    /// Whether the root adds its own (up-corrected) value to the result of subtree `k`: exactly
    /// when that subtree holds no member of the root's group (the slip list of the papers index).
    pub fn root_adds_own_value(&self, subtree: u32) -> bool {
        subtree >= self.last_group_a()
    }

    /// The real rank at ring distance `distance` to the right (`+`) of `rank`.
    pub fn ring_right(&self, rank: u32, distance: u32) -> u32 {
        self.real(self.virt(rank) + distance % self.n)
    }

    /// The real rank at ring distance `distance` to the left (`-`) of `rank`.
    pub fn ring_left(&self, rank: u32, distance: u32) -> u32 {
        self.real(self.virt(rank) + self.n - distance % self.n)
    }

    /// Messages of a failure-free reduce (001 Theorem 5): up-correction plus the tree.
    pub fn reduce_messages(&self) -> u64 {
        let k = u64::from(self.fanout);
        let n = u64::from(self.n);
        let f = k - 1;
        let a = u64::from(self.last_group_a());
        f * k * ((n - 1) / k) + a * (a - 1) + (n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subtree_members(layout: &CorrectedLayout, root_child: u32) -> Vec<u32> {
        let mut stack = vec![root_child];
        let mut seen = Vec::new();
        while let Some(r) = stack.pop() {
            seen.push(r);
            stack.extend(layout.children(r));
        }
        seen.sort_unstable();
        seen
    }

    #[test]
    fn the_papers_seven_rank_example_has_its_groups_and_tree() {
        let layout = CorrectedLayout::new(7, 0, 2, 2);
        assert_eq!(layout.children(0).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(layout.children(2).collect::<Vec<_>>(), vec![4, 6]);
        assert_eq!(layout.children(1).collect::<Vec<_>>(), vec![3, 5]);
        assert_eq!(layout.group_peers(3).collect::<Vec<_>>(), vec![4]);
        assert_eq!(layout.group_peers(6).collect::<Vec<_>>(), vec![5]);
        assert_eq!(layout.group_peers(1).collect::<Vec<_>>(), vec![2]);
        assert!(!layout.root_in_group());
        assert_eq!(layout.group_peers(0).count(), 0);
    }

    #[test]
    fn every_shape_is_an_i_f_tree_with_consistent_groups() {
        for n in 2..=40u32 {
            for fanout in 1..=5u32.min(n - 1) {
                for root in [0, n / 2, n - 1] {
                    for arity in [1, 2, 3] {
                        check_shape(CorrectedLayout::new(n, root, fanout, arity));
                    }
                }
            }
        }
    }

    fn check_shape(layout: CorrectedLayout) {
        let n = layout.size();
        let k = layout.fanout();
        let root = layout.root();
        // Parent and children agree, and every rank hangs under the root exactly once.
        let mut covered = vec![false; n as usize];
        covered[root as usize] = true;
        let mut sizes = Vec::new();
        for child in layout.children(root) {
            assert_eq!(layout.parent(child), Some(root));
            let members = subtree_members(&layout, child);
            for &m in &members {
                assert!(!covered[m as usize], "{m} twice in {layout:?}");
                covered[m as usize] = true;
                assert_eq!(layout.subtree_of(m), layout.subtree_of(child));
                for c in layout.children(m) {
                    assert_eq!(layout.parent(c), Some(m));
                }
            }
            sizes.push(members.len());
        }
        assert!(
            covered.iter().all(|&c| c),
            "not a spanning tree: {layout:?}"
        );
        assert_eq!(sizes.len() as u32, k.min(n - 1));
        let (lo, hi) = (sizes.iter().min(), sizes.iter().max());
        assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{sizes:?}");
        // Groups are symmetric, one member per subtree, of size k (the last one with the root).
        let mut messages = 0u64;
        for r in 0..n {
            let peers: Vec<u32> = layout.group_peers(r).collect();
            messages += peers.len() as u64;
            assert!(peers.len() < k as usize);
            let mut subtrees: Vec<Option<u32>> =
                peers.iter().map(|&p| layout.subtree_of(p)).collect();
            subtrees.push(layout.subtree_of(r));
            let before = subtrees.len();
            subtrees.sort_unstable();
            subtrees.dedup();
            assert_eq!(subtrees.len(), before, "two group members share a subtree");
            for p in peers {
                assert!(layout.group_peers(p).any(|q| q == r));
            }
        }
        assert_eq!(messages + u64::from(n - 1), layout.reduce_messages());
        // Ring neighbours sit in different subtrees when there are at least two.
        if k >= 2 {
            for r in 0..n {
                let right = layout.ring_right(r, 1);
                if r != root && right != root && n > 2 {
                    assert_ne!(layout.subtree_of(r), layout.subtree_of(right));
                }
                assert_eq!(layout.ring_left(right, 1), r);
            }
        }
    }
}
