//! Rank identifiers and group membership.

use std::fmt;

/// The id of one rank (process) in a job, `0..size`.
///
/// `u32` keeps per-rank state small at millions of simulated ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rank(pub u32);

impl Rank {
    /// The rank as an index into per-rank tables.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<u32> for Rank {
    fn from(value: u32) -> Self {
        Rank(value)
    }
}

/// The members of a communicator: a contiguous range of job ranks, or an explicit sorted list
/// (what remains after a shrink).
///
/// Members are addressed by their *local* index `0..len()`; algorithms work on local indices and
/// the driver maps them to job ranks. The list form is sparse in the sense that it holds only the
/// members, never an N-sized bitmap of the whole job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Group {
    /// Job ranks `0..size`.
    Range {
        /// Number of members.
        size: u32,
    },
    /// An explicit, strictly increasing list of job ranks.
    List(Vec<Rank>),
}

/// An invalid group description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// A group needs at least one member.
    #[error("a group needs at least one rank (got 0); pass N >= 1")]
    Empty,
    /// Member lists must be strictly increasing so lookups are binary searches.
    #[error("group members must be listed in strictly increasing order (rank {0} is out of order or repeated)")]
    Unsorted(Rank),
}

impl Group {
    /// All job ranks `0..size`.
    pub fn range(size: u32) -> Result<Self, GroupError> {
        if size == 0 {
            return Err(GroupError::Empty);
        }
        Ok(Group::Range { size })
    }

    /// An explicit member list, validated to be non-empty and strictly increasing.
    pub fn list(members: Vec<Rank>) -> Result<Self, GroupError> {
        if members.is_empty() {
            return Err(GroupError::Empty);
        }
        if let Some(pair) = members.windows(2).find(|pair| pair[0] >= pair[1]) {
            return Err(GroupError::Unsorted(pair[1]));
        }
        Ok(Group::List(members))
    }

    /// Number of members.
    pub fn len(&self) -> u32 {
        match self {
            Group::Range { size } => *size,
            Group::List(members) => members.len() as u32,
        }
    }

    /// Always false: a group is never empty by construction.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The job rank of local member `local`, if it exists.
    pub fn job_rank(&self, local: u32) -> Option<Rank> {
        match self {
            Group::Range { size } => (local < *size).then_some(Rank(local)),
            Group::List(members) => members.get(local as usize).copied(),
        }
    }

    /// The local index of job rank `rank`, if it is a member (O(log N)).
    pub fn local_index(&self, rank: Rank) -> Option<u32> {
        match self {
            Group::Range { size } => (rank.0 < *size).then_some(rank.0),
            Group::List(members) => members.binary_search(&rank).ok().map(|i| i as u32),
        }
    }

    /// The group without the given job ranks (which must be sorted); what a shrink produces.
    pub fn without(&self, excluded: &[Rank]) -> Result<Self, GroupError> {
        let mut kept = Vec::with_capacity(self.len() as usize);
        for local in 0..self.len() {
            if let Some(rank) = self.job_rank(local) {
                if excluded.binary_search(&rank).is_err() {
                    kept.push(rank);
                }
            }
        }
        Group::list(kept)
    }
}

/// A sorted set of ranks (known failures, correction targets, acknowledged failures): bounded by
/// the group size, and in practice by the number of failures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankSet {
    ranks: Vec<u32>,
}

impl RankSet {
    /// Adds `rank`; false if it was known.
    pub fn insert(&mut self, rank: u32) -> bool {
        match self.ranks.binary_search(&rank) {
            Ok(_) => false,
            Err(at) => {
                self.ranks.insert(at, rank);
                true
            }
        }
    }

    /// Whether `rank` is known failed.
    pub fn contains(&self, rank: u32) -> bool {
        self.ranks.binary_search(&rank).is_ok()
    }

    /// The ranks, increasing.
    pub fn as_slice(&self) -> &[u32] {
        &self.ranks
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }
    /// Removes `rank`; false if it was absent.
    pub fn remove(&mut self, rank: u32) -> bool {
        match self.ranks.binary_search(&rank) {
            Ok(at) => {
                self.ranks.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// A set from any list of ranks (sorted and deduplicated here).
    pub fn from_unsorted(mut ranks: Vec<u32>) -> RankSet {
        ranks.sort_unstable();
        ranks.dedup();
        RankSet { ranks }
    }

    /// Adds every rank of `other`.
    pub fn union_with(&mut self, other: &[u32]) {
        if other.iter().all(|r| self.contains(*r)) {
            return;
        }
        self.ranks.extend_from_slice(other);
        self.ranks.sort_unstable();
        self.ranks.dedup();
    }

    /// Keeps only the ranks also in `other` (sorted).
    pub fn intersect_with(&mut self, other: &[u32]) {
        self.ranks.retain(|r| other.binary_search(r).is_ok());
    }

    /// Whether every rank of `self` is in `other`.
    pub fn is_subset_of(&self, other: &RankSet) -> bool {
        self.ranks.iter().all(|r| other.contains(*r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_and_list_agree() {
        let range = Group::range(5).unwrap();
        let list = Group::list((0..5).map(Rank).collect()).unwrap();
        for local in 0..6 {
            assert_eq!(range.job_rank(local), list.job_rank(local));
        }
        assert_eq!(list.local_index(Rank(3)), Some(3));
    }

    #[test]
    fn without_removes_members() {
        let g = Group::range(6)
            .unwrap()
            .without(&[Rank(1), Rank(4)])
            .unwrap();
        assert_eq!(g.len(), 4);
        assert_eq!(g.job_rank(1), Some(Rank(2)));
        assert_eq!(g.local_index(Rank(4)), None);
        assert_eq!(g.local_index(Rank(5)), Some(3));
    }

    #[test]
    fn bad_groups_are_errors() {
        assert_eq!(Group::range(0), Err(GroupError::Empty));
        assert_eq!(
            Group::list(vec![Rank(2), Rank(1)]),
            Err(GroupError::Unsorted(Rank(1)))
        );
    }
}
