//! What a rank derives from the tree and the ranks it knows dead: its current Up and Down sets
//! (f_tree of 004, applied to every known death at once), tree distances, f_timeout and f_ETA.
//!
//! For broadcast and reduce the non-zero roots of a multi-root tree hang under root 0 (the
//! source or sink), so the *virtual* tree has one root. For allreduce every root is a top, and
//! the *root set* is the frontier of live ranks reached from the roots through dead ranks: a
//! dead root is replaced by its children, which then act as peer roots.

use crate::rank::{Rank, RankSet};
use crate::time::{Duration, Time};
use crate::topology::Tree;

use super::{Collective, LogP};

/// The tree as one collective sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    pub tree: Tree,
    pub collective: Collective,
}

impl View {
    pub fn roots_are_peers(&self) -> bool {
        self.collective == Collective::Allreduce
    }

    /// The parent in the virtual tree.
    pub fn parent(&self, rank: u32) -> Option<u32> {
        let r = Rank(rank);
        match self.tree.parent(r) {
            Some(p) => Some(p.0),
            None if !self.roots_are_peers() && rank != 0 && self.tree.is_root(r) => Some(0),
            None => None,
        }
    }

    /// The children in the virtual tree, appended to `dst`.
    pub fn children_into(&self, rank: u32, dst: &mut Vec<u32>) {
        dst.extend(self.tree.children(Rank(rank)).map(|c| c.0));
        if !self.roots_are_peers() && rank == 0 {
            dst.extend(self.tree.peer_roots(Rank(0)).map(|c| c.0));
        }
    }

    /// Number of children in the virtual tree.
    pub fn child_count(&self, rank: u32) -> u32 {
        let extra = if !self.roots_are_peers() && rank == 0 {
            self.tree.roots() - 1
        } else {
            0
        };
        self.tree.child_count(Rank(rank)) + extra
    }

    /// Depth in the virtual tree.
    pub fn depth(&self, rank: u32) -> u32 {
        let r = Rank(rank);
        let under_zero = !self.roots_are_peers() && self.tree.tree_of(r).is_some_and(|t| t != 0);
        self.tree.depth(r) + u32::from(under_zero)
    }

    /// The largest depth in the virtual tree.
    pub fn height(&self) -> u32 {
        let extra = u32::from(!self.roots_are_peers() && self.tree.roots() > 1);
        self.tree.height() + extra
    }

    /// Whether `a` is a strict ancestor of `b` (in O(height)).
    pub fn is_ancestor(&self, a: u32, b: u32) -> bool {
        let (da, mut db, mut at) = (self.depth(a), self.depth(b), b);
        if da >= db {
            return false;
        }
        while db > da {
            match self.parent(at) {
                Some(p) => at = p,
                None => return false,
            }
            db -= 1;
        }
        at == a
    }

    /// Tree distance: edges between `a` and `b`, counting one edge between two tops (peer roots).
    pub fn distance(&self, a: u32, b: u32) -> u32 {
        let (mut x, mut y) = (a, b);
        let (mut dx, mut dy) = (self.depth(a), self.depth(b));
        let mut edges = 0;
        // Each step lowers a depth; depths are at most the height, so this is bounded.
        while dx > dy {
            x = self.parent(x).unwrap_or(x);
            dx -= 1;
            edges += 1;
        }
        while dy > dx {
            y = self.parent(y).unwrap_or(y);
            dy -= 1;
            edges += 1;
        }
        while x != y {
            match (self.parent(x), self.parent(y)) {
                (Some(px), Some(py)) => {
                    x = px;
                    y = py;
                    edges += 2;
                }
                _ => return edges + 1,
            }
        }
        edges
    }

    /// Replaces every dead rank of `seeds` by its children, recursively, appending the live
    /// ranks reached to `dst` (each rank is reached at most once: the tree has no cycles).
    fn expand_into(&self, seeds: &[u32], dead: &RankSet, dst: &mut Vec<u32>) {
        let mut stack: Vec<u32> = seeds.to_vec();
        let mut kids = Vec::new();
        while let Some(x) = stack.pop() {
            if dead.contains(x) {
                kids.clear();
                self.children_into(x, &mut kids);
                stack.extend_from_slice(&kids);
            } else {
                dst.push(x);
            }
        }
    }

    /// The live frontier under the tops (the allreduce root set), ascending.
    pub fn root_set(&self, dead: &RankSet) -> Vec<u32> {
        let tops: Vec<u32> = (0..self.tree.roots()).collect();
        let mut set = Vec::new();
        self.expand_into(&tops, dead, &mut set);
        set.sort_unstable();
        set
    }

    /// Up for `me`: its nearest live ancestor; for a member of the root set (allreduce), the
    /// other members; for broadcast and reduce when every ancestor is dead, nothing.
    pub fn up(&self, me: u32, dead: &RankSet) -> Vec<u32> {
        let mut at = me;
        while let Some(p) = self.parent(at) {
            if !dead.contains(p) {
                return vec![p];
            }
            at = p;
        }
        if self.roots_are_peers() {
            let mut set = self.root_set(dead);
            set.retain(|&r| r != me);
            set
        } else {
            Vec::new()
        }
    }

    /// Down for `me`: its children with every dead one replaced by its children, ascending.
    pub fn down(&self, me: u32, dead: &RankSet) -> Vec<u32> {
        let mut kids = Vec::new();
        self.children_into(me, &mut kids);
        let mut set = Vec::new();
        self.expand_into(&kids, dead, &mut set);
        set.sort_unstable();
        set
    }

    /// Whether `me` is at the top: a member of the root set (allreduce), or rank 0.
    pub fn at_top(&self, me: u32, dead: &RankSet) -> bool {
        let mut at = me;
        while let Some(p) = self.parent(at) {
            if !dead.contains(p) {
                return false;
            }
            at = p;
        }
        self.roots_are_peers() || at == 0 && me == 0
    }

    /// The ancestors of `rank` strictly below `top` (all of them if `top` is `None`), appended
    /// to `dst`.
    pub fn ancestors_below(&self, rank: u32, top: Option<u32>, dst: &mut Vec<u32>) {
        let mut at = rank;
        while let Some(p) = self.parent(at) {
            if Some(p) == top {
                return;
            }
            dst.push(p);
            at = p;
        }
    }

    /// f_timeout(me, x): the base detection timeout times the tree distance times the
    /// destination's degree (its children plus its parent). A member of the allreduce root set
    /// answers every other member as well as its children, so its degree counts the `roots - 1`
    /// other members where a tree rank counts its parent. Ranks that replace dead roots are
    /// close in the tree (a dead root's children are siblings), and with the tree's degree
    /// alone their timeout stays a few times the base while the exchange they joined grows: a
    /// member busy with hundreds of peer roots is then taken for dead, and its children join
    /// the exchange in turn.
    pub fn timeout_at_top(
        &self,
        base: Duration,
        me: u32,
        x: u32,
        dead: &RankSet,
        roots: u32,
    ) -> Duration {
        let at_top = self.roots_are_peers() && self.at_top(x, dead);
        self.timeout_of(base, self.distance(me, x), x, at_top, roots)
    }

    /// f_timeout of a rank `x` at tree distance `distance`, given whether `x` is a member of
    /// the allreduce root set of `roots` members (for a caller that knows both already).
    pub fn timeout_of(
        &self,
        base: Duration,
        distance: u32,
        x: u32,
        at_top: bool,
        roots: u32,
    ) -> Duration {
        let degree = u64::from(self.child_count(x)) + 1;
        let distance = u64::from(distance.max(1));
        let tree = Duration(base.0.saturating_mul(distance).saturating_mul(degree));
        if !at_top || !self.roots_are_peers() {
            return tree;
        }
        let degree = u64::from(self.child_count(x)) + u64::from(roots.saturating_sub(1).max(1));
        tree.max(Duration(base.0.saturating_mul(degree)))
    }

    /// The neighbours `x` answers: its children and its parent, or, as a member of the
    /// allreduce root set of `roots` members, its children and the other members (as in
    /// [`View::timeout_of`]).
    pub fn degree(&self, x: u32, at_top: bool, roots: u32) -> u64 {
        let children = u64::from(self.child_count(x));
        if at_top && self.roots_are_peers() {
            children + u64::from(roots.saturating_sub(1).max(1))
        } else {
            children + 1
        }
    }

    /// The cost of one tree level in the LogP-like model: a message's latency plus the
    /// overheads of the widest node handling its children's messages and its own send.
    fn level_cost(&self, costs: LogP) -> u64 {
        let widest = u64::from(self.child_count(0).max(self.tree.roots())) + 2;
        costs
            .latency
            .0
            .saturating_add(costs.overhead.0.saturating_mul(widest))
    }

    /// f_ETA for subtree data: when the data of `me`'s whole subtree should have arrived.
    pub fn eta_subtree(&self, start: Time, costs: LogP, slack: u32, me: u32) -> Time {
        let levels = u64::from(self.height().saturating_sub(self.depth(me)));
        let span = levels
            .saturating_mul(self.level_cost(costs))
            .saturating_mul(u64::from(slack));
        start.after(Duration(span))
    }

    /// f_ETA for the final result at `me`: the subtree phase of the whole tree, the exchange
    /// between peer roots, then `me`'s depth on the way down.
    pub fn eta_result(&self, start: Time, costs: LogP, slack: u32, me: u32) -> Time {
        let up = match self.collective {
            Collective::Bcast => 0,
            Collective::Reduce | Collective::Allreduce => u64::from(self.height()),
        };
        let exchange = u64::from(self.roots_are_peers() && self.tree.roots() > 1);
        let levels = up + exchange + u64::from(self.depth(me));
        let span = levels
            .saturating_mul(self.level_cost(costs))
            .saturating_mul(u64::from(slack));
        start.after(Duration(span))
    }

    /// f_ETA for a peer root's subtree data (allreduce root set).
    pub fn eta_exchange(&self, start: Time, costs: LogP, slack: u32) -> Time {
        let levels = u64::from(self.height()) + 1;
        let span = levels
            .saturating_mul(self.level_cost(costs))
            .saturating_mul(u64::from(slack));
        start.after(Duration(span))
    }
}
