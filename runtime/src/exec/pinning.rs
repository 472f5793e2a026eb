//! Pinning a rank to one core, and moving it when ranks of its node die.
//!
//! Pinned ranks take cores in turn within their node (`FTCOLL_BIND=core`, set by the
//! launcher): the k-th rank of a node gets the (k mod c)-th of the c cores it may run on. When
//! a rank dies, the survivors of its node take their cores again by their places among the
//! survivors, so that no core is left idle while two survivors share another: three ranks on
//! two cores with the middle one killed would otherwise leave the other two on one core for
//! the rest of the job, and a fault-tolerant collective's retry at half speed.

use std::collections::BTreeSet;

/// The cores a pinned rank may run on and where its node's ranks start.
#[derive(Clone, Debug)]
pub struct CorePinning {
    /// The cores of the affinity mask the process started with (which `taskset` or a batch
    /// system's cpuset may have narrowed), increasing.
    cores: Vec<usize>,
    /// The first world rank of this rank's node.
    node_first: u32,
    /// The core this rank runs on now.
    current: Option<usize>,
}

impl CorePinning {
    /// Pins rank `rank` of a job with `ranks_per_node` ranks per node; `None` (and a warning)
    /// where the affinity mask cannot be read or set.
    pub fn bind(rank: u32, ranks_per_node: u32) -> Option<CorePinning> {
        let allowed = match rustix::thread::sched_getaffinity(None) {
            Ok(set) => set,
            Err(error) => {
                tracing::warn!(%error, "cannot read the cores this rank may use; running unbound");
                return None;
            }
        };
        let cores: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&cpu| allowed.is_set(cpu))
            .collect();
        if cores.is_empty() {
            return None;
        }
        let per_node = ranks_per_node.max(1);
        let mut pinning = CorePinning {
            cores,
            node_first: rank / per_node * per_node,
            current: None,
        };
        pinning.repin(rank, &BTreeSet::new());
        Some(pinning)
    }

    /// The core of rank `rank` with `failed` dead: its place among its node's live ranks
    /// before it, modulo the cores.
    pub fn core_for(&self, rank: u32, failed: &BTreeSet<u32>) -> usize {
        let place = (self.node_first..rank)
            .filter(|r| !failed.contains(r))
            .count();
        self.cores[place % self.cores.len()]
    }

    /// Moves this rank (`rank`) to its core with `failed` dead, if that changed.
    pub fn repin(&mut self, rank: u32, failed: &BTreeSet<u32>) {
        let core = self.core_for(rank, failed);
        if self.current == Some(core) {
            return;
        }
        let mut set = rustix::thread::CpuSet::new();
        set.set(core);
        match rustix::thread::sched_setaffinity(None, &set) {
            Ok(()) => {
                if self.current.is_some() {
                    tracing::info!(
                        rank,
                        core,
                        "moved to another core after a death on its node"
                    );
                }
                self.current = Some(core);
            }
            Err(error) => tracing::warn!(%error, core, "cannot bind to a core; running unbound"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinning(cores: &[usize], node_first: u32) -> CorePinning {
        CorePinning {
            cores: cores.to_vec(),
            node_first,
            current: None,
        }
    }

    #[test]
    fn survivors_spread_over_the_cores_a_dead_rank_freed() {
        let two = pinning(&[0, 1], 0);
        let none = BTreeSet::new();
        assert_eq!(
            (0..3).map(|r| two.core_for(r, &none)).collect::<Vec<_>>(),
            [0, 1, 0]
        );
        // Rank 1 dies: ranks 0 and 2 no longer share core 0.
        let dead = BTreeSet::from([1]);
        assert_eq!((two.core_for(0, &dead), two.core_for(2, &dead)), (0, 1));
        // Five ranks on four cores (2, 3, 5, 7 allowed), ranks 0 and 3 dead.
        let four = pinning(&[2, 3, 5, 7], 0);
        let dead = BTreeSet::from([0, 3]);
        let survivors: Vec<usize> = [1, 2, 4].iter().map(|&r| four.core_for(r, &dead)).collect();
        assert_eq!(survivors, [2, 3, 5]);
    }

    #[test]
    fn a_node_counts_only_its_own_ranks() {
        // Ranks 4..8 on the second node of two cores: a death on the first node moves no one.
        let node = pinning(&[0, 1], 4);
        let dead = BTreeSet::from([1]);
        let places: Vec<usize> = (4..8).map(|r| node.core_for(r, &dead)).collect();
        assert_eq!(places, [0, 1, 0, 1]);
        let dead = BTreeSet::from([5]);
        assert_eq!((node.core_for(6, &dead), node.core_for(7, &dead)), (1, 0));
    }
}
