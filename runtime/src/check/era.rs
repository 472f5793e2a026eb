//! The checker of ERA's properties (002 Sec. 2.1) on random crash schedules, swarm style: the
//! seed draws N, the tree, how many agreements run back to back, how many ranks crash, which
//! (the root, a child of the root, a node master, any rank, a whole node) and when (before,
//! between UP and DOWN, after returning), and the detector's delay.
//!
//! Values are sets of rank ids (a bitmap under OR), so Participation is not vacuous: a decider's
//! own bit must be in the decision. The network is reliable (002's model): crashes only.

use ftcoll_algos::era::{EraTopology, Shape};
use ftcoll_algos::protocol::Phase;
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::{Protocol, Rank, ReduceOp};

use super::corrected::{checked_config, kill_faults, ScheduledFailure};
use crate::faults::{FaultSpec, FaultTime};
use crate::job::{Algorithm, JobSpec};
use crate::sim::{SimConfig, SimReport, Simulation};

/// One checked run.
#[derive(Clone, Debug, PartialEq)]
pub struct EraCase {
    /// Ranks.
    pub n: u32,
    /// The agreement tree.
    pub topology: EraTopology,
    /// Ranks per node (node crashes and hierarchical trees).
    pub ranks_per_node: u32,
    /// Blocking agreements in a row.
    pub agreements: u32,
    /// Rank crashes (distinct ranks, fewer than N).
    pub failures: Vec<ScheduledFailure>,
    /// A whole node crashing, and when.
    pub node_failure: Option<(u32, u64)>,
    /// Detection delay of the perfect detector.
    pub detect_delay: u64,
    /// Start times uniform on [0, spread].
    pub spread: u64,
    /// The simulator's seed.
    pub seed: u64,
}

const CASE_STREAM: u64 = 0xE2A0_C4EC_0000_0001;

impl EraCase {
    /// A random case with N in [2, max_n].
    pub fn random(seed: u64, max_n: u32) -> EraCase {
        let mut rng = SimRng::for_stream(seed, CASE_STREAM);
        let n = 2 + rng.below(u64::from(max_n.max(2) - 1)) as u32;
        let ranks_per_node = [1, 2, 4, 8][rng.below(4) as usize].min(n);
        let shapes = [Shape::Binary, Shape::Star, Shape::String];
        let topology = if ranks_per_node >= 2 && rng.chance(0.4) {
            EraTopology::Hierarchical {
                inter: shapes[rng.below(3) as usize],
                intra: shapes[rng.below(3) as usize],
                ranks_per_node,
            }
        } else {
            EraTopology::Flat(shapes[rng.below(3) as usize])
        };
        let agreements = 1 + rng.below(3) as u32;
        let depth = 64 - u64::from(n).leading_zeros() as u64;
        // Long enough to cover the UP and DOWN waves of every agreement, and the returns.
        let horizon = u64::from(agreements) * 24 * (depth + 2);
        // Swarm: some runs are failure-free, some lose a few ranks, some up to half.
        let count = match rng.below(4) {
            0 => 0,
            1 => 1,
            2 => 1 + rng.below(3) as u32,
            _ => rng.below(u64::from(n / 2) + 1) as u32,
        }
        .min(n - 1);
        let mut failures: Vec<ScheduledFailure> = Vec::new();
        // Bounded: each pass either adds a distinct rank or retries a collision; n > count.
        while failures.len() < count as usize {
            let rank = match rng.below(5) {
                // The root and a child of the root: the roles 002 Table 2d singles out.
                0 => 0,
                1 => 1 + rng.below(u64::from((n - 1).min(2))) as u32,
                // A node master.
                2 => rng.below(u64::from(n.div_ceil(ranks_per_node))) as u32 * ranks_per_node,
                _ => rng.below(u64::from(n)) as u32,
            }
            .min(n - 1);
            if failures.iter().any(|f| f.rank == rank) {
                continue;
            }
            let at = if rng.chance(0.2) {
                0
            } else {
                1 + rng.below(horizon)
            };
            failures.push(ScheduledFailure { rank, at });
        }
        let nodes = n.div_ceil(ranks_per_node);
        let node_failure = (ranks_per_node >= 2 && nodes >= 2 && rng.chance(0.15))
            .then(|| (rng.below(u64::from(nodes)) as u32, rng.below(horizon)));
        EraCase {
            n,
            topology,
            ranks_per_node,
            agreements,
            failures,
            node_failure,
            detect_delay: rng.below(40),
            spread: if rng.chance(0.5) { rng.below(30) } else { 0 },
            seed,
        }
    }

    fn spec(&self) -> JobSpec {
        let mut spec = JobSpec::new(Algorithm::EraAgree, self.n);
        spec.op = ReduceOp::BitOr;
        spec.era_topology = self.topology;
        spec.agreements = self.agreements;
        spec
    }

    fn config(&self) -> SimConfig {
        let mut faults = kill_faults(&self.failures);
        if let Some((node, at)) = self.node_failure {
            faults.push(FaultSpec::KillNode {
                node,
                at: FaultTime::Steps(at),
            });
        }
        SimConfig {
            ranks_per_node: self.ranks_per_node,
            ..checked_config(self.seed, faults, self.spread, Some(self.detect_delay))
        }
    }

    fn failure_free(&self) -> bool {
        self.failures.is_empty() && self.node_failure.is_none()
    }
}

/// A violated property, with the case that shows it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{what} (case: {case:?})")]
pub struct EraViolation {
    /// What went wrong.
    pub what: String,
    /// The case, to replay.
    pub case: Box<EraCase>,
}

/// Runs `case` and checks Termination, Irrevocability, Agreement (non-uniform), Participation,
/// and the agreed failed set (only dead ranks, and every missing contribution explained).
pub fn check_era_case(case: &EraCase) -> Result<SimReport, EraViolation> {
    let fail = |what: String| EraViolation {
        what,
        case: Box::new(case.clone()),
    };
    let spec = case.spec();
    let ranks: Vec<_> = (0..case.n).map(|r| spec.era_run(Rank(r))).collect();
    let inputs = vec![0.0; case.n as usize];
    let mut sim = Simulation::new(case.config(), ranks, inputs, 1, ReduceOp::BitOr)
        .map_err(|e| fail(format!("set-up: {e}")))?;
    let report = sim.run();
    if report.truncated {
        return Err(fail("the run hit the simulator's bounds".into()));
    }
    let live: Vec<u32> = (0..case.n).filter(|&r| sim.is_alive(Rank(r))).collect();
    let Some(&first) = live.first() else {
        return Ok(report);
    };
    let agreements = case.agreements as usize;
    for &r in &live {
        let rank = &sim.ranks()[r as usize];
        if rank.phase() != Phase::Done || rank.decisions().len() != agreements {
            return Err(fail(format!(
                "Termination: live rank {r} decided {} of {agreements} agreements (phase {:?})",
                rank.decisions().len(),
                rank.phase()
            )));
        }
        if rank.changed_decisions() != 0 {
            return Err(fail(format!("Irrevocability: rank {r} changed a decision")));
        }
    }
    let bit = |words: &[u64], r: u32| words[(r / 64) as usize] & (1 << (r % 64)) != 0;
    for a in 0..agreements {
        let decided = &sim.ranks()[first as usize].decisions()[a];
        for &r in &live {
            let mine = &sim.ranks()[r as usize].decisions()[a];
            if mine != decided {
                return Err(fail(format!(
                    "Agreement: ranks {first} and {r} decided differently on agreement {}",
                    a + 1
                )));
            }
            if !bit(&mine.words, r) {
                return Err(fail(format!(
                    "Participation: rank {r}'s contribution is missing from agreement {}",
                    a + 1
                )));
            }
        }
        for r in 0..case.n {
            if decided.failed.contains(r) && sim.is_alive(Rank(r)) {
                return Err(fail(format!(
                    "agreement {} declares live rank {r} failed",
                    a + 1
                )));
            }
            let agreed_earlier = sim.ranks()[first as usize].decisions()[..a]
                .iter()
                .any(|d| d.failed.contains(r));
            if !bit(&decided.words, r) && !decided.failed.contains(r) && !agreed_earlier {
                return Err(fail(format!(
                    "agreement {} leaves out rank {r} without declaring it failed",
                    a + 1
                )));
            }
        }
    }
    let formula = 2 * u64::from(case.n - 1) * u64::from(case.agreements);
    if case.failure_free() && report.messages != formula {
        return Err(fail(format!(
            "failure-free run sent {} messages, 2(N-1) per agreement is {formula}",
            report.messages
        )));
    }
    Ok(report)
}

/// Aggregate of many checked seeds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EraSummary {
    /// Cases run.
    pub cases: u64,
    /// Cases with crashes.
    pub with_failures: u64,
    /// Cases where at least a quarter of the ranks crashed.
    pub heavy: u64,
    /// Cases with a whole node crashing.
    pub node_failures: u64,
    /// Crashes in all.
    pub crashes: u64,
    /// Agreements checked.
    pub agreements: u64,
}

/// Checks seeds `first..first + count` with N up to `max_n`; stops at the first violation.
pub fn check_era_seeds(first: u64, count: u64, max_n: u32) -> Result<EraSummary, EraViolation> {
    let mut summary = EraSummary::default();
    for seed in first..first.saturating_add(count) {
        let case = EraCase::random(seed, max_n);
        let report = check_era_case(&case)?;
        summary.cases += 1;
        summary.with_failures += u64::from(!case.failure_free());
        summary.heavy += u64::from(report.crashes.len() as u32 * 4 >= case.n);
        summary.node_failures += u64::from(case.node_failure.is_some());
        summary.crashes += report.crashes.len() as u64;
        summary.agreements += u64::from(case.agreements);
    }
    Ok(summary)
}
