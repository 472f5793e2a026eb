//! Errors from building a topology or tree with invalid parameters.

/// Why a [`Topology`](super::Topology) or [`Tree`](super::Tree) could not be built.
///
/// Each message names the bad value and suggests a valid one, since these errors usually end up
/// in front of a user who typed a command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// N = 0: every topology and tree needs at least one rank.
    #[error("a topology needs at least one rank, got N = 0; pass N >= 1")]
    Empty,
    /// A hypercube was asked for with N not a power of two.
    #[error(
        "hypercube needs N to be a power of two, got {n}; {} or use a torus",
        power_of_two_suggestion(*.n)
    )]
    NotPowerOfTwo {
        /// The rejected rank count.
        n: u32,
    },
    /// An explicit torus with a dimension of size 0.
    #[error(
        "torus dimensions must all be at least 1, got {}x{}x{}; give three positive sizes \
         (e.g. 4x4x4) or let Topology::torus3d(N) factor N",
        .dims[0], .dims[1], .dims[2]
    )]
    ZeroTorusDimension {
        /// The rejected dimensions.
        dims: [u32; 3],
    },
    /// An explicit torus whose rank count does not fit in a [`Rank`](crate::rank::Rank).
    #[error(
        "torus {}x{}x{} has {} ranks, more than the {} a rank id can address; use smaller dimensions",
        .dims[0], .dims[1], .dims[2],
        u128::from(.dims[0]) * u128::from(.dims[1]) * u128::from(.dims[2]),
        u32::MAX
    )]
    TooManyRanks {
        /// The rejected dimensions.
        dims: [u32; 3],
    },
    /// A topology name that [`Topology::from_name`](super::Topology::from_name) does not know.
    #[error("unknown topology {name:?}; valid names are: full, hypercube, torus, ring, bus")]
    UnknownTopology {
        /// The rejected name, as given.
        name: String,
    },
    /// A tree radix below 2 (a 1-ary tree is a chain and a 0-ary tree has no children).
    #[error("tree radix k must be at least 2, got {k}; use k = 2 for a binary or binomial tree")]
    BadRadix {
        /// The rejected radix.
        k: u32,
    },
    /// A multi-root tree with no roots or more roots than ranks.
    #[error("a tree of {n} ranks needs between 1 and {n} roots, got {roots}; pick a root count in 1..={n}")]
    BadRoots {
        /// The rejected root count.
        roots: u32,
        /// The tree's rank count.
        n: u32,
    },
}

/// "pick N = 8 or 16" for N = 12; only the lower power when the upper one exceeds `u32`.
fn power_of_two_suggestion(n: u32) -> String {
    // n is never a power of two here, so n >= 3 and the lower power exists.
    let lower = 1u64 << (31 - n.max(1).leading_zeros());
    let upper = lower * 2;
    if upper <= u64::from(u32::MAX) {
        format!("pick N = {lower} or {upper}")
    } else {
        format!("pick N = {lower}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_value_and_a_fix() {
        assert_eq!(
            TopologyError::NotPowerOfTwo { n: 12 }.to_string(),
            "hypercube needs N to be a power of two, got 12; pick N = 8 or 16 or use a torus"
        );
        let huge = TopologyError::NotPowerOfTwo { n: u32::MAX }.to_string();
        assert!(huge.contains("pick N = 2147483648 or use"), "{huge}");
        let dims = TopologyError::TooManyRanks {
            dims: [65536, 65536, 2],
        }
        .to_string();
        assert!(dims.contains("8589934592 ranks"), "{dims}");
        let unknown = TopologyError::UnknownTopology {
            name: "mesh".into(),
        }
        .to_string();
        assert!(
            unknown.contains("\"mesh\"") && unknown.contains("full, hypercube"),
            "{unknown}"
        );
        let roots = TopologyError::BadRoots { roots: 5, n: 3 }.to_string();
        assert!(
            roots.contains("got 5") && roots.contains("1..=3"),
            "{roots}"
        );
    }
}
