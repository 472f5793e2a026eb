//! Graph topologies that gossip algorithms pick their peers from.

use super::{torus, TopologyError};
use crate::rank::Rank;

/// The peer graph of a gossip algorithm over ranks `0..size()`.
///
/// Every query is computed from the rank's number in O(1) or O(log N); nothing is stored per
/// rank, so `size()` may be as large as `u32::MAX`. Build values with the constructors, which
/// validate their input: a hand-built variant that they would reject (such as
/// `Hypercube { dim: 40 }` or a zero torus dimension) gives unspecified answers, though never a
/// panic. Ranks at or beyond `size()` have no neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Topology {
    /// Every rank is a neighbour of every other rank.
    FullyConnected {
        /// Number of ranks.
        n: u32,
    },
    /// `2^dim` ranks; two ranks are neighbours when their numbers differ in exactly one bit.
    Hypercube {
        /// Number of dimensions, so the rank count is `2^dim` (at most 31).
        dim: u32,
    },
    /// A 3-D torus with wrap-around: the rank at `(x, y, z)` is `x + a * (y + b * z)` for
    /// `dims = [a, b, c]`, and its neighbours are one step away along one axis, modulo the axis
    /// size.
    Torus3d {
        /// Axis sizes `[a, b, c]`, each at least 1.
        dims: [u32; 3],
    },
    /// Ranks on a cycle: the neighbours of `r` are `r - 1` and `r + 1` modulo `n`.
    Ring {
        /// Number of ranks.
        n: u32,
    },
    /// Ranks on a line without wrap-around (the "bus" network of push-flow): the neighbours of
    /// `r` are `r - 1` and `r + 1` where they exist, so both ends have one neighbour.
    Bus {
        /// Number of ranks.
        n: u32,
    },
}

/// A kind of topology without its size: what a caller chooses before the rank count is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopologyKind {
    /// [`Topology::fully_connected`].
    Full,
    /// [`Topology::hypercube`].
    Hypercube,
    /// [`Topology::torus3d`].
    Torus,
    /// [`Topology::ring`].
    Ring,
    /// [`Topology::bus`].
    Bus,
}

impl TopologyKind {
    /// The kind called `name` (one of [`Topology::NAMES`], ignoring ASCII case).
    pub fn from_name(name: &str) -> Result<TopologyKind, TopologyError> {
        match name.to_ascii_lowercase().as_str() {
            "full" => Ok(TopologyKind::Full),
            "hypercube" => Ok(TopologyKind::Hypercube),
            "torus" => Ok(TopologyKind::Torus),
            "ring" => Ok(TopologyKind::Ring),
            "bus" => Ok(TopologyKind::Bus),
            _ => Err(TopologyError::UnknownTopology {
                name: name.to_owned(),
            }),
        }
    }

    /// The kind's name, as [`TopologyKind::from_name`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            TopologyKind::Full => "full",
            TopologyKind::Hypercube => "hypercube",
            TopologyKind::Torus => "torus",
            TopologyKind::Ring => "ring",
            TopologyKind::Bus => "bus",
        }
    }

    /// This kind over `n` ranks, with the named constructor's checks.
    pub fn build(self, n: u32) -> Result<Topology, TopologyError> {
        match self {
            TopologyKind::Full => Topology::fully_connected(n),
            TopologyKind::Hypercube => Topology::hypercube(n),
            TopologyKind::Torus => Topology::torus3d(n),
            TopologyKind::Ring => Topology::ring(n),
            TopologyKind::Bus => Topology::bus(n),
        }
    }
}

impl Topology {
    /// The names [`Topology::from_name`] accepts, in the order of the variants.
    pub const NAMES: [&'static str; 5] = ["full", "hypercube", "torus", "ring", "bus"];

    /// `n` ranks, each a neighbour of all others.
    pub fn fully_connected(n: u32) -> Result<Self, TopologyError> {
        non_empty(n).map(|n| Topology::FullyConnected { n })
    }

    /// A hypercube of `n` ranks; `n` must be a power of two.
    pub fn hypercube(n: u32) -> Result<Self, TopologyError> {
        let n = non_empty(n)?;
        if !n.is_power_of_two() {
            return Err(TopologyError::NotPowerOfTwo { n });
        }
        Ok(Topology::Hypercube {
            dim: n.trailing_zeros(),
        })
    }

    /// A 3-D torus of `n` ranks with dimensions as close to a cube as `n`'s divisors allow.
    ///
    /// The factoring is greedy, smallest side first: `c` is the largest divisor of `n` with
    /// `c^3 <= n`, then `b` the largest divisor of `n / c` with `b^2 <= n / c`, then
    /// `a = n / (b * c)`, and the sides are sorted so that `dims = [a, b, c]` with
    /// `a >= b >= c`. Examples: 64 gives 4x4x4, 12 gives 3x2x2, 2^30 gives 1024x1024x1024,
    /// `2p` for a prime `p > 3` gives `p`x2x1, and a prime `n` degenerates to a ring `n`x1x1.
    pub fn torus3d(n: u32) -> Result<Self, TopologyError> {
        let n = non_empty(n)?;
        Ok(Topology::Torus3d {
            dims: torus::factor(n),
        })
    }

    /// A 3-D torus with the given axis sizes, kept in the given order; each must be at least 1
    /// and their product must fit in a `u32`.
    pub fn torus3d_dims(dims: [u32; 3]) -> Result<Self, TopologyError> {
        if dims.contains(&0) {
            return Err(TopologyError::ZeroTorusDimension { dims });
        }
        if torus::volume(dims) > u64::from(u32::MAX) {
            return Err(TopologyError::TooManyRanks { dims });
        }
        Ok(Topology::Torus3d { dims })
    }

    /// `n` ranks on a cycle.
    pub fn ring(n: u32) -> Result<Self, TopologyError> {
        non_empty(n).map(|n| Topology::Ring { n })
    }

    /// `n` ranks on a line without wrap-around.
    pub fn bus(n: u32) -> Result<Self, TopologyError> {
        non_empty(n).map(|n| Topology::Bus { n })
    }

    /// Builds the topology called `name` (one of [`Topology::NAMES`], ignoring ASCII case) over
    /// `n` ranks, with the same checks as the named constructor.
    pub fn from_name(name: &str, n: u32) -> Result<Self, TopologyError> {
        TopologyKind::from_name(name)?.build(n)
    }

    /// The name [`Topology::from_name`] accepts for this kind of topology.
    pub fn name(&self) -> &'static str {
        match self {
            Topology::FullyConnected { .. } => "full",
            Topology::Hypercube { .. } => "hypercube",
            Topology::Torus3d { .. } => "torus",
            Topology::Ring { .. } => "ring",
            Topology::Bus { .. } => "bus",
        }
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        match *self {
            Topology::FullyConnected { n } | Topology::Ring { n } | Topology::Bus { n } => n,
            Topology::Hypercube { dim } => 1u32.checked_shl(dim).unwrap_or(u32::MAX),
            Topology::Torus3d { dims } => u32::try_from(torus::volume(dims)).unwrap_or(u32::MAX),
        }
    }

    /// Whether `rank` is one of the ranks of this topology.
    fn contains(&self, rank: Rank) -> bool {
        rank.0 < self.size()
    }

    /// Number of neighbours of `rank` (0 for a rank outside the topology).
    pub fn degree(&self, rank: Rank) -> u32 {
        if !self.contains(rank) {
            return 0;
        }
        match *self {
            Topology::FullyConnected { n } => n - 1,
            Topology::Hypercube { dim } => dim.min(32),
            Topology::Torus3d { dims } => torus::degree(dims),
            Topology::Ring { n } => n.min(3) - 1,
            Topology::Bus { n } => u32::from(rank.0 > 0) + u32::from(rank.0 + 1 < n),
        }
    }

    /// The neighbours of `rank` in ascending order, without duplicates and never `rank` itself.
    ///
    /// Each step costs O(1) (O(log N) for the hypercube); nothing is allocated.
    pub fn neighbours(&self, rank: Rank) -> impl Iterator<Item = Rank> + '_ {
        Neighbours {
            topology: *self,
            rank,
            next: 0,
            end: self.degree(rank),
        }
    }

    /// The `i`-th neighbour of `rank` in the order of [`Topology::neighbours`], or `None` when
    /// `i >= degree(rank)`.
    ///
    /// O(1), or O(log N) for the hypercube: drawing `i` uniformly from `0..degree(rank)` picks
    /// a uniformly random neighbour without listing them.
    pub fn neighbour(&self, rank: Rank, i: u32) -> Option<Rank> {
        if i >= self.degree(rank) {
            return None;
        }
        let r = rank.0;
        let other = match *self {
            // Skip over the rank itself.
            Topology::FullyConnected { .. } => Some(if i < r { i } else { i + 1 }),
            Topology::Hypercube { dim } => hypercube_neighbour(r, dim, i),
            Topology::Torus3d { dims } => torus::neighbours(dims, r).get(i),
            Topology::Ring { n } => ring_neighbours(r, n).get(i as usize).copied().flatten(),
            Topology::Bus { .. } => Some(if i == 0 && r > 0 { r - 1 } else { r + 1 }),
        };
        other.map(Rank)
    }

    /// Whether `a` and `b` are neighbours (symmetric, false for `a == b`), in O(1).
    pub fn are_neighbours(&self, a: Rank, b: Rank) -> bool {
        if a == b || !self.contains(a) || !self.contains(b) {
            return false;
        }
        let gap = a.0.abs_diff(b.0);
        match *self {
            Topology::FullyConnected { .. } => true,
            Topology::Hypercube { .. } => (a.0 ^ b.0).is_power_of_two(),
            Topology::Torus3d { dims } => torus::adjacent(dims, a.0, b.0),
            Topology::Ring { n } => gap == 1 || gap == n - 1,
            Topology::Bus { .. } => gap == 1,
        }
    }
}

/// Rejects N = 0, which every topology shares.
fn non_empty(n: u32) -> Result<u32, TopologyError> {
    if n == 0 {
        Err(TopologyError::Empty)
    } else {
        Ok(n)
    }
}

/// The ring neighbours of `r < n` in ascending order; the wrap-around makes rank 0's second
/// neighbour `n - 1`, and for n <= 2 the two directions coincide.
fn ring_neighbours(r: u32, n: u32) -> [Option<u32>; 2] {
    match n {
        0 | 1 => [None, None],
        2 => [Some(1 - r), None],
        _ if r == 0 => [Some(1), Some(n - 1)],
        _ if r == n - 1 => [Some(0), Some(n - 2)],
        _ => [Some(r - 1), Some(r + 1)],
    }
}

/// The `i`-th smallest neighbour of `r` in a `dim`-cube, in O(dim).
///
/// Clearing a set bit gives a smaller rank, and clearing a higher bit a smaller one still, so the
/// ascending order is: set bits from the highest down, then clear bits from the lowest up.
fn hypercube_neighbour(r: u32, dim: u32, i: u32) -> Option<u32> {
    let set = r.count_ones();
    if i < set {
        let mut bits = r;
        for _ in 0..i {
            bits &= !highest_bit(bits);
        }
        return Some(r ^ highest_bit(bits));
    }
    (0..dim.min(32))
        .map(|b| 1u32 << b)
        .filter(|bit| r & bit == 0)
        .nth((i - set) as usize)
        .map(|bit| r | bit)
}

/// The highest set bit of `x` (0 for 0).
fn highest_bit(x: u32) -> u32 {
    match x.checked_ilog2() {
        Some(b) => 1 << b,
        None => 0,
    }
}

/// Iterator behind [`Topology::neighbours`]: walks `Topology::neighbour(rank, i)` for
/// `i = 0..degree`, so the two can never disagree.
struct Neighbours {
    topology: Topology,
    rank: Rank,
    next: u32,
    end: u32,
}

impl Iterator for Neighbours {
    type Item = Rank;

    fn next(&mut self) -> Option<Rank> {
        while self.next < self.end {
            let i = self.next;
            self.next += 1;
            if let Some(other) = self.topology.neighbour(self.rank, i) {
                return Some(other);
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.end - self.next) as usize;
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn list(t: &Topology, r: u32) -> Vec<u32> {
        t.neighbours(Rank(r)).map(|x| x.0).collect()
    }

    #[test]
    fn constructors_validate() {
        assert_eq!(
            Topology::hypercube(12),
            Err(TopologyError::NotPowerOfTwo { n: 12 })
        );
        assert_eq!(Topology::hypercube(16), Ok(Topology::Hypercube { dim: 4 }));
        for make in [
            Topology::fully_connected,
            Topology::hypercube,
            Topology::torus3d,
            Topology::ring,
            Topology::bus,
        ] {
            assert_eq!(make(0), Err(TopologyError::Empty));
            assert_eq!(make(1).map(|t| t.size()), Ok(1));
        }
        assert_eq!(
            Topology::torus3d_dims([4, 0, 2]),
            Err(TopologyError::ZeroTorusDimension { dims: [4, 0, 2] })
        );
        assert_eq!(
            Topology::torus3d_dims([1 << 16, 1 << 16, 1]),
            Err(TopologyError::TooManyRanks {
                dims: [1 << 16, 1 << 16, 1]
            })
        );
        assert_eq!(Topology::torus3d_dims([2, 3, 4]).map(|t| t.size()), Ok(24));
    }

    #[test]
    fn torus_factoring() {
        assert_eq!(
            Topology::torus3d(64),
            Ok(Topology::Torus3d { dims: [4, 4, 4] })
        );
        assert_eq!(
            Topology::torus3d(12),
            Ok(Topology::Torus3d { dims: [3, 2, 2] })
        );
        assert_eq!(
            Topology::torus3d(13),
            Ok(Topology::Torus3d { dims: [13, 1, 1] })
        );
    }

    #[test]
    fn parse_accepts_every_name_and_rejects_others() {
        for name in Topology::NAMES {
            let t = Topology::from_name(name, 8);
            assert_eq!(t.map(|t| t.name()), Ok(name));
        }
        assert_eq!(Topology::from_name("Ring", 3), Topology::ring(3));
        assert_eq!(
            Topology::from_name("hypercube", 12),
            Topology::hypercube(12)
        );
        let err = Topology::from_name("mesh", 8).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("unknown topology \"mesh\"; valid names are: full, hypercube, torus, ring, bus")
        );
    }

    #[test]
    fn known_neighbour_lists() {
        let cube = Topology::Hypercube { dim: 3 };
        assert_eq!(list(&cube, 5), [1, 4, 7]);
        assert_eq!(list(&cube, 0), [1, 2, 4]);
        assert_eq!(list(&Topology::Ring { n: 5 }, 0), [1, 4]);
        assert_eq!(list(&Topology::Ring { n: 5 }, 4), [0, 3]);
        assert_eq!(list(&Topology::Ring { n: 2 }, 1), [0]);
        assert_eq!(list(&Topology::Ring { n: 1 }, 0), [] as [u32; 0]);
        assert_eq!(list(&Topology::FullyConnected { n: 4 }, 2), [0, 1, 3]);
        assert_eq!(list(&Topology::Torus3d { dims: [2, 2, 1] }, 3), [1, 2]);
    }

    #[test]
    fn bus_endpoints_have_one_neighbour() {
        let bus = Topology::Bus { n: 5 };
        assert_eq!(bus.degree(Rank(0)), 1);
        assert_eq!(bus.degree(Rank(4)), 1);
        assert_eq!(bus.degree(Rank(2)), 2);
        assert_eq!(list(&bus, 0), [1]);
        assert_eq!(list(&bus, 4), [3]);
        assert!(!bus.are_neighbours(Rank(0), Rank(4)));
        assert_eq!(Topology::Bus { n: 1 }.degree(Rank(0)), 0);
    }

    #[test]
    fn ranks_outside_have_no_neighbours() {
        for t in [
            Topology::FullyConnected { n: 4 },
            Topology::Hypercube { dim: 2 },
            Topology::Torus3d { dims: [2, 2, 1] },
            Topology::Ring { n: 4 },
            Topology::Bus { n: 4 },
        ] {
            assert_eq!(t.degree(Rank(4)), 0);
            assert_eq!(t.neighbours(Rank(4)).count(), 0);
            assert_eq!(t.neighbour(Rank(4), 0), None);
            assert!(!t.are_neighbours(Rank(3), Rank(4)));
        }
    }

    #[test]
    fn hand_built_invalid_values_do_not_panic() {
        for t in [
            Topology::Hypercube { dim: 40 },
            Topology::Torus3d { dims: [0, 3, 3] },
            Topology::Torus3d {
                dims: [u32::MAX, u32::MAX, 2],
            },
            Topology::Ring { n: 0 },
            Topology::FullyConnected { n: 0 },
        ] {
            for r in [0, 1, u32::MAX - 1, u32::MAX] {
                let _ = t.neighbours(Rank(r)).take(100).count();
                let _ = t.neighbour(Rank(r), 33);
                let _ = t.are_neighbours(Rank(r), Rank(0));
            }
        }
    }

    #[test]
    fn huge_topologies_answer_without_allocating() -> Result<(), TopologyError> {
        let n = 1u32 << 30;
        let full = Topology::FullyConnected { n };
        assert_eq!(full.degree(Rank(5)), n - 1);
        assert_eq!(full.neighbour(Rank(5), 4), Some(Rank(4)));
        assert_eq!(full.neighbour(Rank(5), 5), Some(Rank(6)));
        assert_eq!(full.neighbour(Rank(5), n - 2), Some(Rank(n - 1)));
        assert_eq!(full.neighbour(Rank(5), n - 1), None);
        let cube = Topology::hypercube(n)?;
        assert_eq!(cube.degree(Rank(0)), 30);
        assert_eq!(
            cube.neighbour(Rank(n - 1), 0),
            Some(Rank(n - 1 - (1 << 29)))
        );
        assert_eq!(cube.neighbour(Rank(0), 29), Some(Rank(1 << 29)));
        assert!(cube.are_neighbours(Rank(0), Rank(1 << 29)));
        assert!(!cube.are_neighbours(Rank(1), Rank(2)));
        let torus = Topology::torus3d(n)?;
        assert_eq!(torus.degree(Rank(12345)), 6);
        assert_eq!(torus.neighbours(Rank(n - 1)).count(), 6);
        let ring = Topology::ring(u32::MAX)?;
        assert_eq!(list(&ring, 0), [1, u32::MAX - 1]);
        Ok(())
    }

    /// Neighbours straight from each variant's definition, for comparison.
    fn reference(t: &Topology, a: u32) -> BTreeSet<u32> {
        let n = t.size();
        let mut out: BTreeSet<u32> = match *t {
            Topology::FullyConnected { .. } => (0..n).collect(),
            Topology::Hypercube { dim } => (0..dim).map(|b| a ^ (1 << b)).collect(),
            Topology::Torus3d { dims: [x, y, z] } => {
                let (ca, cb, cc) = (a % x, a / x % y, a / (x * y));
                let at = |i: u32, j: u32, k: u32| i % x + x * (j % y + y * (k % z));
                [
                    at(ca + 1, cb, cc),
                    at(ca + x - 1, cb, cc),
                    at(ca, cb + 1, cc),
                    at(ca, cb + y - 1, cc),
                    at(ca, cb, cc + 1),
                    at(ca, cb, cc + z - 1),
                ]
                .into()
            }
            Topology::Ring { n } => [(a + 1) % n, (a + n - 1) % n].into(),
            Topology::Bus { n } => [a.wrapping_sub(1), a + 1]
                .into_iter()
                .filter(|&b| b < n)
                .collect(),
        };
        out.remove(&a);
        out
    }

    fn any_topology() -> impl Strategy<Value = Topology> {
        prop_oneof![
            (1u32..5000).prop_map(|n| Topology::FullyConnected { n }),
            (0u32..13).prop_map(|dim| Topology::Hypercube { dim }),
            (1u32..5000).prop_map(|n| Topology::Torus3d {
                dims: torus::factor(n)
            }),
            (1u32..18, 1u32..18, 1u32..18)
                .prop_map(|(a, b, c)| Topology::Torus3d { dims: [a, b, c] }),
            (1u32..5000).prop_map(|n| Topology::Ring { n }),
            (1u32..5000).prop_map(|n| Topology::Bus { n }),
        ]
    }

    proptest! {
        #[test]
        fn neighbour_queries_agree((t, a) in any_topology().prop_flat_map(|t| (Just(t), 0..t.size()))) {
            let n = t.size();
            let ns = list(&t, a);
            prop_assert_eq!(ns.len() as u32, t.degree(Rank(a)));
            prop_assert!(ns.windows(2).all(|w| w[0] < w[1]), "not ascending: {:?}", ns);
            prop_assert!(ns.iter().all(|&b| b < n && b != a));
            let expected: Vec<u32> = reference(&t, a).into_iter().collect();
            prop_assert_eq!(&ns, &expected);
            for (i, &b) in ns.iter().enumerate() {
                prop_assert_eq!(t.neighbour(Rank(a), i as u32), Some(Rank(b)));
            }
            prop_assert_eq!(t.neighbour(Rank(a), ns.len() as u32), None);
            let by_predicate: Vec<u32> =
                (0..n).filter(|&b| t.are_neighbours(Rank(a), Rank(b))).collect();
            prop_assert_eq!(&by_predicate, &ns);
            for &b in &ns {
                prop_assert!(t.are_neighbours(Rank(b), Rank(a)));
                // Listing a fully connected rank's neighbours is O(N); the predicate covers it.
                if t.degree(Rank(b)) <= 64 {
                    prop_assert!(t.neighbours(Rank(b)).any(|x| x == Rank(a)));
                }
            }
        }
    }
}
