//! The agreement tree of ERA (002 Sec. 2) and its mending around dead ranks.
//!
//! Ranks are placed in a tree over *virtual ids* in which every ancestor has a smaller id than its
//! descendants: 002's Eld (the elders of p are the live ids below p) and its RESULTREQUEST rule
//! ("every id below the sender is dead") rely on that order. A flat tree numbers the members
//! directly; a hierarchical X/Y tree numbers node masters first (0..nodes, in an X-tree), then
//! the other ranks level by level of their node's Y-tree, so the order holds across both levels.
//!
//! `Parent(S, p)` is the nearest live ancestor, else the smallest live elder, else none (p is
//! root). `Children(S, p)` is derived without scanning all ranks: p's original children, with each
//! dead child replaced by its own children recursively, and, at the root, every live rank reached
//! from id 0 through dead ranks only (the ranks whose ancestors all died). The cost is p's degree
//! plus the dead ranks crossed, never O(N), except for the star's root, whose degree is N.

use crate::rank::RankSet;

/// The shape of one level of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A binary heap: the children of v are 2v+1 and 2v+2.
    Binary,
    /// Everyone is a child of id 0.
    Star,
    /// A chain: the child of v is v+1.
    String,
}

impl Shape {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Binary => "bin",
            Shape::Star => "star",
            Shape::String => "string",
        }
    }

    fn parse(name: &str) -> Option<Shape> {
        match name {
            "bin" | "binary" => Some(Shape::Binary),
            "star" => Some(Shape::Star),
            "string" | "chain" => Some(Shape::String),
            _ => None,
        }
    }

    /// The parent of `v` (v > 0) in a level of this shape.
    fn parent(self, v: u32) -> u32 {
        match self {
            Shape::Binary => (v - 1) / 2,
            Shape::Star => 0,
            Shape::String => v - 1,
        }
    }

    /// The children of `v` in a level of `size` ids, as a range.
    fn children(self, v: u32, size: u32) -> std::ops::Range<u32> {
        let range = match self {
            Shape::Binary => (2 * u64::from(v) + 1)..(2 * u64::from(v) + 3),
            Shape::Star if v == 0 => 1..u64::from(size),
            Shape::Star => 0..0,
            Shape::String => (u64::from(v) + 1)..(u64::from(v) + 2),
        };
        let end = range.end.min(u64::from(size)) as u32;
        let start = (range.start.min(u64::from(end))) as u32;
        start..end
    }
}

/// The tree ERA runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EraTopology {
    /// One tree over all members.
    Flat(Shape),
    /// Node masters (the first member of each node) in an `inter` tree; the members of a node in
    /// an `intra` tree below their master (002's X/Y trees, e.g. bin/star).
    Hierarchical {
        /// The tree between node masters.
        inter: Shape,
        /// The tree inside a node.
        intra: Shape,
        /// Members per node (the last node may hold fewer).
        ranks_per_node: u32,
    },
}

impl Default for EraTopology {
    fn default() -> Self {
        EraTopology::Flat(Shape::Binary)
    }
}

impl EraTopology {
    /// The tree called `bin`, `star`, `string` or `X/Y` (e.g. `bin/star`); `X/Y` needs
    /// `ranks_per_node` of at least 2.
    pub fn from_name(name: &str, ranks_per_node: u32) -> Result<EraTopology, String> {
        let bad = || {
            format!("unknown agreement tree '{name}': use bin, star, string or X/Y such as bin/bin or bin/star")
        };
        match name.split_once('/') {
            None => Shape::parse(name).map(EraTopology::Flat).ok_or_else(bad),
            Some((x, y)) => {
                let inter = Shape::parse(x).ok_or_else(bad)?;
                let intra = Shape::parse(y).ok_or_else(bad)?;
                if ranks_per_node < 2 {
                    return Err(format!(
                        "the hierarchical tree '{name}' groups ranks by node and needs at least 2 ranks per node"
                    ));
                }
                Ok(EraTopology::Hierarchical {
                    inter,
                    intra,
                    ranks_per_node,
                })
            }
        }
    }

    /// The name [`EraTopology::from_name`] accepts.
    pub fn name(&self) -> String {
        match self {
            EraTopology::Flat(shape) => shape.name().to_string(),
            EraTopology::Hierarchical { inter, intra, .. } => {
                format!("{}/{}", inter.name(), intra.name())
            }
        }
    }
}

/// The virtual-id layout of one tree over `members` members: original parent and children, with
/// ancestors always numbered below their descendants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    topology: EraTopology,
    members: u32,
}

impl Layout {
    /// Node count, size of the last node, and node size of a hierarchical layout.
    fn nodes(&self, k: u32) -> (u32, u32) {
        let nodes = self.members.div_ceil(k);
        let last = self.members - k * (nodes - 1);
        (nodes, last)
    }

    /// Virtual id of (node j, local index l).
    fn vid_of(&self, k: u32, j: u32, l: u32) -> u32 {
        if l == 0 {
            return j;
        }
        let (nodes, last) = self.nodes(k);
        nodes + (l - 1) * (nodes - 1) + (l - 1).min(last - 1) + j
    }

    /// (node, local index) of a virtual id.
    fn node_of(&self, k: u32, vid: u32) -> (u32, u32) {
        let (nodes, last) = self.nodes(k);
        if vid < nodes {
            return (vid, 0);
        }
        let x = vid - nodes;
        let full_levels = (last - 1) * nodes;
        if x < full_levels {
            (x % nodes, 1 + x / nodes)
        } else {
            let x = x - full_levels;
            (x % (nodes - 1), last + x / (nodes - 1))
        }
    }

    /// A member index's virtual id. Flat: the same; hierarchical: member m is local m % k of
    /// node m / k.
    fn vid(&self, member: u32) -> u32 {
        match self.topology {
            EraTopology::Flat(_) => member,
            EraTopology::Hierarchical { ranks_per_node, .. } => self.vid_of(
                ranks_per_node,
                member / ranks_per_node,
                member % ranks_per_node,
            ),
        }
    }

    fn member(&self, vid: u32) -> u32 {
        match self.topology {
            EraTopology::Flat(_) => vid,
            EraTopology::Hierarchical { ranks_per_node, .. } => {
                let (j, l) = self.node_of(ranks_per_node, vid);
                j * ranks_per_node + l
            }
        }
    }

    fn parent(&self, vid: u32) -> Option<u32> {
        if vid == 0 {
            return None;
        }
        Some(match self.topology {
            EraTopology::Flat(shape) => shape.parent(vid),
            EraTopology::Hierarchical {
                inter,
                intra,
                ranks_per_node: k,
            } => {
                let (j, l) = self.node_of(k, vid);
                if l == 0 {
                    inter.parent(j)
                } else {
                    self.vid_of(k, j, intra.parent(l))
                }
            }
        })
    }

    /// Calls `f` on every original child of `vid`.
    fn for_each_child(&self, vid: u32, mut f: impl FnMut(u32)) {
        match self.topology {
            EraTopology::Flat(shape) => shape.children(vid, self.members).for_each(f),
            EraTopology::Hierarchical {
                inter,
                intra,
                ranks_per_node: k,
            } => {
                let (nodes, last) = self.nodes(k);
                let (j, l) = self.node_of(k, vid);
                let node_size = if j + 1 == nodes { last } else { k };
                if l == 0 {
                    inter.children(j, nodes).for_each(&mut f);
                }
                for child in intra.children(l, node_size) {
                    f(self.vid_of(k, j, child));
                }
            }
        }
    }
}

/// The members of one communicator in a tree: members are world ranks (increasing), the tree is
/// laid out over their indices. Rebalancing builds a new one over the survivors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EraTree {
    layout: Layout,
    /// World ranks that are not members (below `span`), increasing: members are `0..span`
    /// without them, so membership costs the number of excluded ranks, not N.
    excluded: Vec<u32>,
    span: u32,
}

impl EraTree {
    /// A tree over world ranks `0..n` minus `excluded` (sorted, all below `n`).
    pub fn new(topology: EraTopology, n: u32, excluded: &[u32]) -> EraTree {
        let mut excluded: Vec<u32> = excluded.iter().copied().filter(|r| *r < n).collect();
        excluded.sort_unstable();
        excluded.dedup();
        let members = n - excluded.len() as u32;
        EraTree {
            layout: Layout { topology, members },
            excluded,
            span: n,
        }
    }

    /// Number of members.
    pub fn members(&self) -> u32 {
        self.layout.members
    }

    /// The topology.
    pub fn topology(&self) -> EraTopology {
        self.layout.topology
    }

    /// The ranks left out of this tree.
    pub fn excluded(&self) -> &[u32] {
        &self.excluded
    }

    /// Whether world rank `rank` is a member.
    pub fn is_member(&self, rank: u32) -> bool {
        rank < self.span && self.excluded.binary_search(&rank).is_err()
    }

    /// The member index of a member rank.
    fn member_index(&self, rank: u32) -> u32 {
        rank - self.excluded.partition_point(|&x| x < rank) as u32
    }

    /// The world rank of member index `m`: the m-th rank not excluded.
    fn rank_of_member(&self, m: u32) -> u32 {
        // The answer r satisfies r - |excluded below r| = m; walk past the excluded ranks.
        let mut r = m;
        for &x in &self.excluded {
            if x <= r {
                r += 1;
            } else {
                break;
            }
        }
        r
    }

    /// The virtual id of a member rank.
    pub fn vid(&self, rank: u32) -> u32 {
        self.layout.vid(self.member_index(rank))
    }

    /// The world rank at virtual id `vid`.
    pub fn rank_at(&self, vid: u32) -> u32 {
        self.rank_of_member(self.layout.member(vid))
    }

    /// The original parent of a member (none for the root).
    pub fn original_parent(&self, rank: u32) -> Option<u32> {
        self.layout.parent(self.vid(rank)).map(|v| self.rank_at(v))
    }

    /// 002's `Parent(S, p)`: the nearest live ancestor, else the smallest live elder, else none.
    pub fn parent(&self, dead: &RankSet, rank: u32) -> Option<u32> {
        let me = self.vid(rank);
        let mut ancestor = self.layout.parent(me);
        // Ancestors strictly decrease, so the walk ends at id 0.
        while let Some(a) = ancestor {
            let r = self.rank_at(a);
            if !dead.contains(r) {
                return Some(r);
            }
            ancestor = self.layout.parent(a);
        }
        // No live ancestor: the smallest live elder. Every id passed here is dead, so the scan is
        // bounded by the number of dead ranks.
        (0..me)
            .map(|v| self.rank_at(v))
            .find(|r| !dead.contains(*r))
    }

    /// 002's `Children(S, p)`, written into `dst` (cleared first): every member whose `Parent` is
    /// `rank`.
    pub fn children(&self, dead: &RankSet, rank: u32, dst: &mut Vec<u32>) {
        dst.clear();
        let me = self.vid(rank);
        let mut stack: Vec<u32> = Vec::new();
        self.layout.for_each_child(me, |c| stack.push(c));
        self.descend(dead, &mut stack, me, dst);
        if self.parent(dead, rank).is_none() && me != 0 {
            // The root also adopts every live rank whose ancestors all died: those reached from
            // id 0 through dead ranks (ids below the root are all dead).
            stack.push(0);
            self.descend(dead, &mut stack, me, dst);
        }
    }

    /// Pops ids from `stack`: a live one (other than `skip`) is a child; a dead one is replaced by
    /// its original children.
    fn descend(&self, dead: &RankSet, stack: &mut Vec<u32>, skip: u32, dst: &mut Vec<u32>) {
        // Every id is pushed at most once (the original tree has no cycles), so the loop is
        // bounded by the members.
        while let Some(v) = stack.pop() {
            if v == skip {
                continue;
            }
            let r = self.rank_at(v);
            if dead.contains(r) {
                self.layout.for_each_child(v, |c| stack.push(c));
            } else {
                dst.push(r);
            }
        }
    }

    /// Members in virtual-id order, for tests and reports.
    pub fn ranks_by_vid(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.members()).map(|v| self.rank_at(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_topologies(n: u32) -> Vec<EraTopology> {
        let mut out = vec![
            EraTopology::Flat(Shape::Binary),
            EraTopology::Flat(Shape::Star),
            EraTopology::Flat(Shape::String),
        ];
        for k in [2, 3, 4, 16] {
            for (inter, intra) in [
                (Shape::Binary, Shape::Binary),
                (Shape::Binary, Shape::Star),
                (Shape::Star, Shape::String),
            ] {
                if k <= n.max(2) {
                    out.push(EraTopology::Hierarchical {
                        inter,
                        intra,
                        ranks_per_node: k,
                    });
                }
            }
        }
        out
    }

    /// The definition of 002, by brute force over all ranks.
    fn brute_parent(tree: &EraTree, dead: &RankSet, rank: u32) -> Option<u32> {
        let me = tree.vid(rank);
        let mut best = None;
        let mut a = tree.layout.parent(me);
        while let Some(v) = a {
            if !dead.contains(tree.rank_at(v)) && best.is_none() {
                best = Some(tree.rank_at(v));
            }
            a = tree.layout.parent(v);
        }
        best.or_else(|| {
            (0..me)
                .map(|v| tree.rank_at(v))
                .find(|r| !dead.contains(*r))
        })
    }

    #[test]
    fn virtual_ids_are_a_heap_ordered_bijection() {
        for n in 1..70 {
            for topology in all_topologies(n) {
                let tree = EraTree::new(topology, n, &[]);
                let mut seen = vec![false; n as usize];
                for r in 0..n {
                    let v = tree.vid(r);
                    assert!(v < n, "{topology:?} n={n} r={r}");
                    assert!(!seen[v as usize]);
                    seen[v as usize] = true;
                    assert_eq!(tree.rank_at(v), r);
                    if let Some(p) = tree.layout.parent(v) {
                        assert!(p < v, "{topology:?} n={n}: parent {p} of {v}");
                        let mut kids = Vec::new();
                        tree.layout.for_each_child(p, |c| kids.push(c));
                        assert!(
                            kids.contains(&v),
                            "{topology:?} n={n}: {v} not a child of {p}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn hierarchical_masters_are_first_members_of_nodes() {
        let topology = EraTopology::from_name("bin/star", 4).unwrap();
        let tree = EraTree::new(topology, 10, &[]);
        for r in 0..10 {
            let parent = tree.original_parent(r);
            match r % 4 {
                0 if r > 0 => assert_eq!(parent.map(|p| p % 4), Some(0), "master {r}"),
                0 => assert_eq!(parent, None),
                _ => assert_eq!(parent, Some(r - r % 4), "rank {r}"),
            }
        }
    }

    #[test]
    fn mended_parent_and_children_match_the_definition() {
        let mut rng = crate::rng::SimRng::for_stream(7, 1);
        for case in 0..400 {
            let n = 1 + rng.below(48) as u32;
            let topologies = all_topologies(n);
            let topology = topologies[rng.below(topologies.len() as u64) as usize];
            let excluded: Vec<u32> = (0..n).filter(|_| rng.chance(0.1)).collect();
            let tree = EraTree::new(topology, n, &excluded);
            let members: Vec<u32> = tree.ranks_by_vid().collect();
            let dead = RankSet::from_unsorted(
                members
                    .iter()
                    .copied()
                    .filter(|_| rng.chance(0.3))
                    .collect(),
            );
            let mut kids = Vec::new();
            for &p in &members {
                if dead.contains(p) {
                    continue;
                }
                let parent = tree.parent(&dead, p);
                assert_eq!(parent, brute_parent(&tree, &dead, p), "case {case} p={p}");
                tree.children(&dead, p, &mut kids);
                kids.sort_unstable();
                let expected: Vec<u32> = members
                    .iter()
                    .copied()
                    .filter(|&q| q != p && !dead.contains(q) && tree.parent(&dead, q) == Some(p))
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                assert_eq!(
                    kids, expected,
                    "case {case} {topology:?} n={n} p={p} dead={dead:?}"
                );
            }
        }
    }

    #[test]
    fn excluded_ranks_are_skipped() {
        let tree = EraTree::new(EraTopology::Flat(Shape::Binary), 8, &[0, 3, 3, 9]);
        assert_eq!(tree.members(), 6);
        assert_eq!(
            tree.ranks_by_vid().collect::<Vec<_>>(),
            vec![1, 2, 4, 5, 6, 7]
        );
        assert!(!tree.is_member(3));
        assert_eq!(tree.original_parent(1), None);
        assert_eq!(tree.original_parent(4), Some(1));
        assert_eq!(tree.original_parent(5), Some(2));
    }

    #[test]
    fn names_parse_and_hierarchy_needs_nodes() {
        assert_eq!(
            EraTopology::from_name("bin/star", 16).unwrap().name(),
            "bin/star"
        );
        assert!(EraTopology::from_name("bin/bin", 1).is_err());
        assert!(EraTopology::from_name("ring", 1)
            .unwrap_err()
            .contains("bin, star, string"));
    }
}
