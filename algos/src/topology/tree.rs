//! Rooted trees for broadcast and reduction, with one or several roots.

use std::ops::Range;

use super::{kary, knomial, TopologyError};
use crate::rank::Rank;

/// The branching rule of a [`Tree`], applied to local indices within one root's tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TreeShape {
    /// Breadth-first k-ary tree: the parent of local index `x` is `(x - 1) / k` and its children
    /// are `k*x + 1 ..= k*x + k`.
    KAry {
        /// Radix, at least 2.
        k: u32,
    },
    /// k-nomial tree: the parent of `x` clears the lowest non-zero base-`k` digit of `x`; its
    /// children are `x + j * k^i` for each digit position `i` below that digit (every position
    /// for the root) and `j = 1..k`. Every subtree is a contiguous range of local indices.
    KNomial {
        /// Radix, at least 2.
        k: u32,
    },
}

impl TreeShape {
    /// The binary tree, `KAry { k: 2 }`.
    pub const BINARY: TreeShape = TreeShape::KAry { k: 2 };
    /// The binomial tree, `KNomial { k: 2 }`.
    pub const BINOMIAL: TreeShape = TreeShape::KNomial { k: 2 };

    /// The radix `k`.
    pub fn radix(self) -> u32 {
        match self {
            TreeShape::KAry { k } | TreeShape::KNomial { k } => k,
        }
    }
}

/// A spanning forest of `n` ranks under `roots` roots, all queries computed in O(log N) or
/// O(degree) from the rank's number.
///
/// Numbering: ranks `0..roots` are the roots, which talk to each other directly (see
/// [`Tree::peer_roots`]). Rank `r` belongs to the tree of root `r % roots`, at local index
/// `r / roots`; within each root's tree the local indices `0..tree_size` form the single-root
/// tree of the [`TreeShape`]. So `parent(r) = roots * parent_local(r / roots) + r % roots`.
/// Children have larger local indices, hence larger ranks, than their parent.
///
/// Example, binary with `n = 10, roots = 3`: root 0's tree holds ranks 0, 3, 6, 9 (local
/// indices 0..4), so the children of 0 are 3 and 6, and 9 is the child of 3.
///
/// Queries about a rank outside `0..n` answer "none" (no parent, no children, size 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tree {
    shape: TreeShape,
    n: u32,
    roots: u32,
}

/// Where a rank sits: which root's tree, its local index there, and that tree's node count.
#[derive(Clone, Copy, Debug)]
struct Place {
    tree: u32,
    local: u32,
    tree_size: u32,
}

impl Tree {
    /// A tree of `n >= 1` ranks with the given shape (radix at least 2) and `1..=n` roots.
    pub fn new(shape: TreeShape, n: u32, roots: u32) -> Result<Self, TopologyError> {
        if n == 0 {
            return Err(TopologyError::Empty);
        }
        let k = shape.radix();
        if k < 2 {
            return Err(TopologyError::BadRadix { k });
        }
        if roots == 0 || roots > n {
            return Err(TopologyError::BadRoots { roots, n });
        }
        Ok(Tree { shape, n, roots })
    }

    /// A single-root binary tree of `n` ranks.
    pub fn binary(n: u32) -> Result<Self, TopologyError> {
        Tree::new(TreeShape::BINARY, n, 1)
    }

    /// A single-root binomial tree of `n` ranks.
    pub fn binomial(n: u32) -> Result<Self, TopologyError> {
        Tree::new(TreeShape::BINOMIAL, n, 1)
    }

    /// The branching rule.
    pub fn shape(&self) -> TreeShape {
        self.shape
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.n
    }

    /// Number of roots.
    pub fn roots(&self) -> u32 {
        self.roots
    }

    /// Whether `rank` is one of the roots `0..roots`.
    pub fn is_root(&self, rank: Rank) -> bool {
        rank.0 < self.roots
    }

    /// For a root, the other roots in ascending order; for any other rank, nothing.
    pub fn peer_roots(&self, rank: Rank) -> impl Iterator<Item = Rank> + '_ {
        let count = if self.is_root(rank) { self.roots } else { 0 };
        (0..count).filter(move |&p| p != rank.0).map(Rank)
    }

    /// Which root's tree `rank` belongs to (`rank % roots`), if it is in `0..n`.
    pub fn tree_of(&self, rank: Rank) -> Option<u32> {
        self.place(rank).map(|p| p.tree)
    }

    /// The local index of `rank` within its root's tree (`rank / roots`), if it is in `0..n`.
    pub fn local_index(&self, rank: Rank) -> Option<u32> {
        self.place(rank).map(|p| p.local)
    }

    /// Number of ranks in the tree of root `tree` (0 if `tree >= roots`).
    pub fn tree_size(&self, tree: u32) -> u32 {
        if tree >= self.roots {
            return 0;
        }
        let (n, roots, tree) = (u64::from(self.n), u64::from(self.roots), u64::from(tree));
        // At most n, so it fits in u32.
        ((n - tree).div_ceil(roots)) as u32
    }

    /// The rank at local index `local` of root `tree`'s tree, if there is one.
    pub fn rank_at(&self, tree: u32, local: u32) -> Option<Rank> {
        (local < self.tree_size(tree)).then(|| self.rank_of(tree, local))
    }

    /// Maps a valid `(tree, local)` pair to its rank.
    fn rank_of(&self, tree: u32, local: u32) -> Rank {
        // local < tree_size(tree) makes the result < n, so it fits in u32.
        Rank((u64::from(local) * u64::from(self.roots) + u64::from(tree)) as u32)
    }

    fn place(&self, rank: Rank) -> Option<Place> {
        (rank.0 < self.n).then(|| {
            let tree = rank.0 % self.roots;
            Place {
                tree,
                local: rank.0 / self.roots,
                tree_size: self.tree_size(tree),
            }
        })
    }

    /// The parent of `rank`; `None` for a root or a rank outside the tree.
    pub fn parent(&self, rank: Rank) -> Option<Rank> {
        let p = self.place(rank)?;
        let up = match self.shape {
            TreeShape::KAry { k } => kary::parent(p.local, k),
            TreeShape::KNomial { k } => knomial::parent(p.local, k),
        }?;
        Some(self.rank_of(p.tree, up))
    }

    /// The children of `rank` in ascending order.
    pub fn children(&self, rank: Rank) -> impl Iterator<Item = Rank> {
        let local = match (self.place(rank), self.shape) {
            (None, _) => LocalChildren::KAry(0..0),
            (Some(p), TreeShape::KAry { k }) => {
                LocalChildren::KAry(kary::children(p.local, k, p.tree_size))
            }
            (Some(p), TreeShape::KNomial { k }) => {
                LocalChildren::KNomial(knomial::Children::new(p.local, k, p.tree_size))
            }
        };
        Children {
            tree: *self,
            owner: rank.0 % self.roots,
            local,
        }
    }

    /// Number of children of `rank`, without listing them.
    pub fn child_count(&self, rank: Rank) -> u32 {
        match (self.place(rank), self.shape) {
            (None, _) => 0,
            (Some(p), TreeShape::KAry { k }) => {
                kary::children(p.local, k, p.tree_size).len() as u32
            }
            (Some(p), TreeShape::KNomial { k }) => knomial::child_count(p.local, k, p.tree_size),
        }
    }

    /// Number of edges from `rank` up to its root (0 for a root or a rank outside the tree), in
    /// O(log N).
    pub fn depth(&self, rank: Rank) -> u32 {
        match (self.place(rank), self.shape) {
            (None, _) => 0,
            (Some(p), TreeShape::KAry { k }) => kary::depth(p.local, k),
            (Some(p), TreeShape::KNomial { k }) => knomial::depth(p.local, k),
        }
    }

    /// The largest depth of any rank, in O(log N).
    ///
    /// Root 0's tree is the largest, and a larger tree of the same shape is never shallower, so
    /// this is the height of root 0's tree.
    pub fn height(&self) -> u32 {
        let m = self.tree_size(0);
        match self.shape {
            TreeShape::KAry { k } => kary::height(k, m),
            TreeShape::KNomial { k } => knomial::height(k, m),
        }
    }

    /// Number of ranks in the subtree under `rank`, itself included (0 outside the tree), in
    /// O(log N).
    pub fn subtree_size(&self, rank: Rank) -> u32 {
        match (self.place(rank), self.shape) {
            (None, _) => 0,
            (Some(p), TreeShape::KAry { k }) => kary::subtree_size(p.local, k, p.tree_size),
            (Some(p), TreeShape::KNomial { k }) => {
                knomial::subtree_range(p.local, k, p.tree_size).len() as u32
            }
        }
    }

    /// For a k-nomial tree, the local indices (within `rank`'s root's tree, see
    /// [`Tree::rank_at`]) of the subtree under `rank`: `[x, x + k^i)` clipped to the tree size,
    /// where `x` is `rank`'s local index and `k^i` the weight of its lowest non-zero base-`k`
    /// digit, or the whole tree for a root. `None` for a k-ary tree, whose subtrees are not
    /// contiguous, or a rank outside the tree.
    pub fn subtree_range(&self, rank: Rank) -> Option<Range<u32>> {
        match (self.place(rank), self.shape) {
            (Some(p), TreeShape::KNomial { k }) => {
                Some(knomial::subtree_range(p.local, k, p.tree_size))
            }
            _ => None,
        }
    }
}

/// Children as local indices, per shape.
#[derive(Clone, Debug)]
enum LocalChildren {
    KAry(Range<u32>),
    KNomial(knomial::Children),
}

/// Iterator behind [`Tree::children`]: maps local indices back to ranks.
#[derive(Clone, Debug)]
struct Children {
    tree: Tree,
    owner: u32,
    local: LocalChildren,
}

impl Iterator for Children {
    type Item = Rank;

    fn next(&mut self) -> Option<Rank> {
        let local = match &mut self.local {
            LocalChildren::KAry(range) => range.next(),
            LocalChildren::KNomial(children) => children.next(),
        }?;
        Some(self.tree.rank_of(self.owner, local))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ranks(it: impl Iterator<Item = Rank>) -> Vec<u32> {
        it.map(|r| r.0).collect()
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert_eq!(
            Tree::new(TreeShape::KAry { k: 1 }, 5, 1),
            Err(TopologyError::BadRadix { k: 1 })
        );
        assert_eq!(
            Tree::new(TreeShape::KNomial { k: 0 }, 5, 1),
            Err(TopologyError::BadRadix { k: 0 })
        );
        assert_eq!(
            Tree::new(TreeShape::BINARY, 5, 0),
            Err(TopologyError::BadRoots { roots: 0, n: 5 })
        );
        assert_eq!(
            Tree::new(TreeShape::BINARY, 3, 4),
            Err(TopologyError::BadRoots { roots: 4, n: 3 })
        );
        assert_eq!(Tree::binomial(0), Err(TopologyError::Empty));
    }

    #[test]
    fn binary_and_binomial_shapes() -> Result<(), TopologyError> {
        let bin = Tree::binary(7)?;
        assert_eq!(ranks(bin.children(Rank(1))), [3, 4]);
        assert_eq!(bin.parent(Rank(6)), Some(Rank(2)));
        assert_eq!(bin.height(), 2);
        assert_eq!(bin.subtree_range(Rank(1)), None);
        let nom = Tree::binomial(8)?;
        assert_eq!(ranks(nom.children(Rank(0))), [1, 2, 4]);
        assert_eq!(ranks(nom.children(Rank(4))), [5, 6]);
        assert_eq!(nom.depth(Rank(7)), 3);
        assert_eq!(nom.height(), 3);
        assert_eq!(nom.subtree_size(Rank(4)), 4);
        assert_eq!(nom.subtree_range(Rank(4)), Some(4..8));
        Ok(())
    }

    #[test]
    fn multi_root_numbering() -> Result<(), TopologyError> {
        let t = Tree::new(TreeShape::BINARY, 10, 3)?;
        assert_eq!(ranks(t.children(Rank(0))), [3, 6]);
        assert_eq!(ranks(t.children(Rank(3))), [9]);
        assert_eq!(ranks(t.children(Rank(1))), [4, 7]);
        assert_eq!(t.parent(Rank(9)), Some(Rank(3)));
        assert_eq!(t.parent(Rank(2)), None);
        assert_eq!([0, 1, 2].map(|r| t.subtree_size(Rank(r))), [4, 3, 3]);
        assert_eq!([0, 1, 2, 3].map(|i| t.tree_size(i)), [4, 3, 3, 0]);
        assert_eq!(t.height(), 2);
        assert_eq!(ranks(t.peer_roots(Rank(1))), [0, 2]);
        assert_eq!(ranks(t.peer_roots(Rank(4))), [] as [u32; 0]);
        assert_eq!(
            (t.tree_of(Rank(8)), t.local_index(Rank(8))),
            (Some(2), Some(2))
        );
        assert_eq!(t.rank_at(2, 2), Some(Rank(8)));
        assert_eq!(t.rank_at(1, 3), None);
        let every_rank_a_root = Tree::new(TreeShape::BINOMIAL, 4, 4)?;
        assert_eq!(every_rank_a_root.height(), 0);
        assert_eq!(every_rank_a_root.children(Rank(0)).count(), 0);
        Ok(())
    }

    #[test]
    fn ranks_outside_the_tree_have_nothing() -> Result<(), TopologyError> {
        for shape in [TreeShape::BINARY, TreeShape::BINOMIAL] {
            let t = Tree::new(shape, 5, 2)?;
            let out = Rank(5);
            assert_eq!(t.parent(out), None);
            assert_eq!(t.children(out).count(), 0);
            assert_eq!(
                (t.child_count(out), t.depth(out), t.subtree_size(out)),
                (0, 0, 0)
            );
            assert_eq!(t.subtree_range(out), None);
            assert_eq!(t.tree_of(out), None);
        }
        Ok(())
    }

    #[test]
    fn huge_trees_answer_in_logarithmic_time() -> Result<(), TopologyError> {
        let n = 1u32 << 30;
        let nom = Tree::binomial(n)?;
        assert_eq!(nom.height(), 30);
        assert_eq!(nom.child_count(Rank(0)), 30);
        assert_eq!(nom.children(Rank(0)).last(), Some(Rank(1 << 29)));
        assert_eq!(nom.subtree_size(Rank(0)), n);
        assert_eq!(nom.subtree_size(Rank(1 << 29)), 1 << 29);
        assert_eq!(nom.depth(Rank(n - 1)), 30);
        assert_eq!(nom.parent(Rank(n - 1)), Some(Rank(n - 2)));
        let wide = Tree::new(TreeShape::KAry { k: 4 }, u32::MAX, 4)?;
        assert_eq!(wide.tree_size(0), 1 << 30);
        assert_eq!(wide.tree_size(3), (1 << 30) - 1);
        assert_eq!(wide.height(), 15);
        assert_eq!(ranks(wide.children(Rank(0))), [4, 8, 12, 16]);
        assert_eq!(wide.subtree_size(Rank(3)), (1 << 30) - 1);
        Ok(())
    }

    fn any_tree() -> impl Strategy<Value = Tree> {
        (1u32..5000, 2u32..9, 1u32..=4, any::<bool>()).prop_filter_map(
            "valid tree",
            |(n, k, roots, nomial)| {
                let shape = if nomial {
                    TreeShape::KNomial { k }
                } else {
                    TreeShape::KAry { k }
                };
                Tree::new(shape, n, roots.min(n)).ok()
            },
        )
    }

    proptest! {
        #[test]
        fn tree_invariants(t in any_tree()) {
            let (n, roots) = (t.size(), t.roots());
            let kids: Vec<Vec<u32>> = (0..n).map(|r| ranks(t.children(Rank(r)))).collect();
            let mut child_total = 0;
            for r in 0..n {
                let rank = Rank(r);
                let mine = &kids[r as usize];
                prop_assert!(mine.windows(2).all(|w| w[0] < w[1]), "{:?}", mine);
                prop_assert!(mine.iter().all(|&c| c < n && c > r));
                prop_assert_eq!(t.child_count(rank) as usize, mine.len());
                for &c in mine {
                    prop_assert_eq!(t.parent(Rank(c)), Some(rank));
                }
                child_total += mine.len() as u32;
                prop_assert_eq!(t.is_root(rank), r < roots);
                match t.parent(rank) {
                    None => prop_assert!(t.is_root(rank)),
                    Some(p) => prop_assert!(kids[p.index()].binary_search(&r).is_ok()),
                }
                let (mut at, mut steps) = (rank, 0);
                while let Some(up) = t.parent(at) {
                    at = up;
                    steps += 1;
                    prop_assert!(steps <= t.height());
                }
                prop_assert!(t.is_root(at));
                prop_assert_eq!(t.depth(rank), steps);
                let (tree, local) = (t.tree_of(rank), t.local_index(rank));
                prop_assert_eq!(tree.zip(local).and_then(|(i, x)| t.rank_at(i, x)), Some(rank));
            }
            prop_assert_eq!(child_total, n - roots);
            prop_assert_eq!((0..n).map(|r| t.depth(Rank(r))).max(), Some(t.height()));

            // Children outnumber their parents, so a descending sweep counts each subtree.
            let mut counted = vec![1u32; n as usize];
            for r in (0..n).rev() {
                if let Some(p) = t.parent(Rank(r)) {
                    counted[p.index()] += counted[r as usize];
                }
            }
            for r in 0..n {
                prop_assert_eq!(t.subtree_size(Rank(r)), counted[r as usize]);
            }
            let root_total: u32 = (0..roots).map(|r| t.subtree_size(Rank(r))).sum();
            prop_assert_eq!(root_total, n);

            for r in 0..roots {
                let peers = ranks(t.peer_roots(Rank(r)));
                let expected: Vec<u32> = (0..roots).filter(|&p| p != r).collect();
                prop_assert_eq!(peers, expected);
            }
            if let TreeShape::KNomial { .. } = t.shape() {
                for r in 0..n {
                    let range = t.subtree_range(Rank(r));
                    prop_assert_eq!(range.as_ref().map(|x| x.start), t.local_index(Rank(r)));
                    prop_assert_eq!(range.as_ref().map(|x| x.len() as u32), Some(counted[r as usize]));
                    for &c in &kids[r as usize] {
                        let inner = t.subtree_range(Rank(c));
                        let nested = matches!((&range, &inner), (Some(o), Some(i)) if o.start < i.start && i.end <= o.end);
                        prop_assert!(nested, "{:?} not inside {:?}", inner, range);
                    }
                }
            }
        }
    }
}
