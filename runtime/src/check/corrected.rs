//! The checker of 001's semantics (reduce 4.1, allreduce 5.1) and of the corrected broadcast's
//! properties that Theorem 6 relies on, on random schedules of pre- and in-operational failures.
//!
//! Inputs are one-hot: rank r contributes the unit vector e_r, summed. A result then says, entry
//! by entry, how often each rank's value was counted: a value counted twice, a live rank left
//! out, or a pre-operationally failed rank counted all show. A rank's message is counted at most
//! once and a live rank's exactly once; an in-operationally failed rank's 0 or 1 times, the same at
//! every survivor (allreduce results must be identical).

use ftcoll_algos::corrected::{Correction, FailureInfo};
use ftcoll_algos::protocol::Phase;
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::{OpId, Protocol, Rank, ReduceOp};

use super::CountDeliveries;
use crate::faults::{FaultSpec, FaultTime, KillTime, Spread};
use crate::job::{Algorithm, JobSpec};
use crate::sim::{DetectorModel, SimConfig, SimReport, Simulation};

/// Which operation to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckedOp {
    /// Corrected reduce to rank 0.
    Reduce,
    /// Corrected broadcast from rank 0.
    Bcast,
    /// Corrected allreduce.
    Allreduce,
}

impl CheckedOp {
    /// The algorithm of the table.
    pub fn algorithm(self) -> Algorithm {
        match self {
            CheckedOp::Reduce => Algorithm::CorrectedReduce,
            CheckedOp::Bcast => Algorithm::CorrectedBcast,
            CheckedOp::Allreduce => Algorithm::CorrectedAllreduce,
        }
    }

    /// The operation an algorithm name denotes, if it is one of the corrected family.
    pub fn from_algorithm(algo: Algorithm) -> Option<CheckedOp> {
        match algo {
            Algorithm::CorrectedReduce => Some(CheckedOp::Reduce),
            Algorithm::CorrectedBcast => Some(CheckedOp::Bcast),
            Algorithm::CorrectedAllreduce => Some(CheckedOp::Allreduce),
            _ => None,
        }
    }
}

/// One failure of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduledFailure {
    /// The rank.
    pub rank: u32,
    /// When (0: before the operation).
    pub at: u64,
}

/// The simulator's kill faults of a schedule.
pub(crate) fn kill_faults(failures: &[ScheduledFailure]) -> Vec<FaultSpec> {
    failures
        .iter()
        .map(|f| FaultSpec::Kill {
            rank: Rank(f.rank),
            at: KillTime::At(FaultTime::Steps(f.at)),
        })
        .collect()
}

/// A checked run's simulator set-up: `faults`, start times spread on [0, spread], and a perfect
/// detector with the given delay (`None`: no detector, a crash is only silence).
pub(crate) fn checked_config(
    seed: u64,
    mut faults: Vec<FaultSpec>,
    spread: u64,
    detect_delay: Option<u64>,
) -> SimConfig {
    if spread > 0 {
        faults.push(FaultSpec::Spread(Spread::Uniform(FaultTime::Steps(spread))));
    }
    SimConfig {
        seed,
        detector: match detect_delay {
            Some(delay_steps) => DetectorModel::Perfect { delay_steps },
            None => DetectorModel::Silent,
        },
        faults,
        ..SimConfig::default()
    }
}

/// One checked run: the operation, its shape and its fault schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckCase {
    /// The operation.
    pub op: CheckedOp,
    /// Ranks.
    pub n: u32,
    /// f.
    pub tolerate: u32,
    /// Failure-information scheme.
    pub info: FailureInfo,
    /// Correction phase.
    pub correction: Correction,
    /// Failures, at most f, distinct ranks.
    pub failures: Vec<ScheduledFailure>,
    /// Detection delay of the perfect detector, in steps; `None`: no failure detector (timed
    /// correction, whose broadcast needs none while the root lives).
    pub detect_delay: Option<u64>,
    /// Start times uniform on [0, spread].
    pub spread: u64,
    /// The simulator's seed.
    pub seed: u64,
}

/// Stream of the schedule draws.
const CASE_STREAM: u64 = 0xC0AA_EC7E_D000_0001;

/// A gap of timed correction past every answer of a failure-free run in the default LogP
/// model (L = 10, o = 1): two latencies, the overheads and a few sends ahead of the answer.
const TIMED_EXACT_GAP: u64 = 40;

impl CheckCase {
    /// A random case for `op` from `seed`: N in [f + 2, max_n], f in 0..=3, up to f failures
    /// of random ranks, each before or during the operation. Ranks that 5.1 requires to fail
    /// only before the operation (allreduce's root candidates, the broadcast's root) do.
    pub fn random(op: CheckedOp, seed: u64, max_n: u32) -> CheckCase {
        let mut rng = SimRng::for_stream(seed, CASE_STREAM);
        let max_n = max_n.max(3);
        let tolerate = rng.below(4.min(u64::from(max_n - 1))) as u32;
        let min_n = tolerate + 2;
        let n = min_n + rng.below(u64::from(max_n - min_n + 1)) as u32;
        let info = match rng.below(3) {
            0 => FailureInfo::List,
            1 => FailureInfo::CountAndBit,
            _ => FailureInfo::Bit,
        };
        let count = rng.below(u64::from(tolerate) + 1) as u32;
        let depth = 64 - u64::from(n).leading_zeros() as u64;
        let horizon = 12 * (2 * depth + 8);
        let mut failures: Vec<ScheduledFailure> = Vec::new();
        while failures.len() < count as usize {
            let rank = rng.below(u64::from(n)) as u32;
            if failures.iter().any(|f| f.rank == rank) {
                continue;
            }
            let only_before = match op {
                CheckedOp::Allreduce => rank <= tolerate,
                CheckedOp::Bcast => rank == 0,
                CheckedOp::Reduce => false,
            };
            let at = if only_before || rng.chance(0.4) {
                0
            } else {
                1 + rng.below(horizon)
            };
            failures.push(ScheduledFailure { rank, at });
        }
        CheckCase {
            op,
            n,
            tolerate,
            info,
            correction: Correction::Checked,
            failures,
            detect_delay: Some(rng.below(40)),
            spread: if rng.chance(0.5) { rng.below(30) } else { 0 },
            seed,
        }
    }

    /// A random broadcast with timed correction and no failure detector, from `seed`: N in
    /// [3, max_n], f in 0..=3, any number of ranks but the root (at most half) failing before
    /// the operation, and in half the cases during it too, a gap drawn from below a round trip
    /// to several, and start times spread or not. See [`CheckCase::must_all_deliver`] for what
    /// is checked.
    pub fn random_timed(seed: u64, max_n: u32) -> CheckCase {
        let mut case = CheckCase::random(CheckedOp::Bcast, seed, max_n);
        let mut rng = SimRng::for_stream(seed, CASE_STREAM ^ 0x71ED);
        let n = case.n;
        let count = rng.below(u64::from(n / 2) + 1) as usize;
        let depth = 64 - u64::from(n).leading_zeros() as u64;
        let horizon = 12 * (2 * depth + 8);
        case.failures.clear();
        let during = rng.chance(0.5);
        while case.failures.len() < count {
            let rank = 1 + rng.below(u64::from(n - 1)) as u32;
            if case.failures.iter().any(|f| f.rank == rank) {
                continue;
            }
            let at = if !during || rng.chance(0.4) {
                0
            } else {
                1 + rng.below(horizon)
            };
            case.failures.push(ScheduledFailure { rank, at });
        }
        case.correction = Correction::Timed {
            gap: ftcoll_algos::time::Duration(1 + rng.below(80)),
        };
        case.detect_delay = None;
        case
    }

    /// Whether every live rank must deliver. With no detector, a rank that heard from a
    /// neighbour which then died before correcting past the next dead rank cannot learn it:
    /// ranks behind it may never receive (on real ranks the operation's time limit ends them
    /// with an error). So without a detector only failures before the operation are bridged
    /// for sure; with failures during it the checker holds the broadcast to safety (at most one
    /// delivery, of the root's value, and nothing else).
    pub fn must_all_deliver(&self) -> bool {
        self.detect_delay.is_some() || self.failures.iter().all(|f| f.at == 0)
    }

    /// Whether a failure-free run must send exactly [`CheckCase::failure_free_messages`]:
    /// timed correction does only when every neighbour answers within the gap (all ranks
    /// start together and the gap exceeds a round trip with its sends).
    fn exact_message_count(&self) -> bool {
        match self.correction {
            Correction::Timed { gap } => self.spread == 0 && gap.0 >= TIMED_EXACT_GAP,
            _ => true,
        }
    }

    fn spec(&self) -> JobSpec {
        let mut spec = JobSpec::new(self.op.algorithm(), self.n);
        spec.tolerate = self.tolerate;
        spec.failure_info = self.info;
        spec.correction = self.correction;
        spec.op = ReduceOp::Sum;
        spec.input_len = self.n as usize;
        spec
    }

    fn config(&self) -> SimConfig {
        checked_config(
            self.seed,
            kill_faults(&self.failures),
            self.spread,
            self.detect_delay,
        )
    }

    /// Messages of a failure-free run: 001 Theorem 5 for reduce, `n - 1` plus the correction
    /// for the broadcast, and their sum for allreduce (Theorem 7).
    pub fn failure_free_messages(&self) -> u64 {
        let spec = self.spec();
        let reduce = spec
            .corrected_reduce(Rank(0), OpId(1))
            .layout()
            .reduce_messages();
        let bcast = u64::from(self.n - 1) + self.correction.failure_free_messages(self.n);
        match self.op {
            CheckedOp::Reduce => reduce,
            CheckedOp::Bcast => bcast,
            CheckedOp::Allreduce => reduce + bcast,
        }
    }
}

/// What a passing run did.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseOutcome {
    /// The simulator's report.
    pub report: SimReport,
    /// Failed ranks whose value the result includes (reduce at a live root, allreduce).
    pub included_failed: Vec<u32>,
}

/// A violated property, in words, with the case that shows it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{what} (case: {case:?})")]
pub struct Violation {
    /// What went wrong.
    pub what: String,
    /// The case, to replay.
    pub case: Box<CheckCase>,
}

/// Runs `case` and checks every property; `Err` names the first violation.
pub fn check_case(case: &CheckCase) -> Result<CaseOutcome, Violation> {
    let spec = case.spec();
    let n = case.n as usize;
    let inputs: Vec<f64> = (0..n * n)
        .map(|i| if i / n == i % n { 1.0 } else { 0.0 })
        .collect();
    let fail = |what: String| Violation {
        what,
        case: Box::new(case.clone()),
    };
    let config = case.config();
    let op_id = OpId(1);
    let ranks = 0..case.n;
    let outcome = match case.op {
        CheckedOp::Reduce => {
            let protocols = ranks
                .map(|r| CountDeliveries::new(spec.corrected_reduce(Rank(r), op_id)))
                .collect();
            let mut sim = Simulation::new(config, protocols, inputs, n, ReduceOp::Sum)
                .map_err(|e| fail(format!("set-up: {e}")))?;
            let report = sim.run();
            verify(case, &sim, report, fail)?
        }
        CheckedOp::Bcast => {
            let protocols = ranks
                .map(|r| CountDeliveries::new(spec.corrected_bcast(Rank(r), op_id)))
                .collect();
            let mut sim = Simulation::new(config, protocols, inputs, n, ReduceOp::Sum)
                .map_err(|e| fail(format!("set-up: {e}")))?;
            let report = sim.run();
            verify(case, &sim, report, fail)?
        }
        CheckedOp::Allreduce => {
            let protocols = ranks
                .map(|r| CountDeliveries::new(spec.corrected_allreduce(Rank(r), op_id)))
                .collect();
            let mut sim = Simulation::new(config, protocols, inputs, n, ReduceOp::Sum)
                .map_err(|e| fail(format!("set-up: {e}")))?;
            let report = sim.run();
            verify(case, &sim, report, fail)?
        }
    };
    Ok(outcome)
}

fn verify<P: Protocol>(
    case: &CheckCase,
    sim: &Simulation<CountDeliveries<P>>,
    report: SimReport,
    fail: impl Fn(String) -> Violation,
) -> Result<CaseOutcome, Violation> {
    if report.truncated {
        return Err(fail("the run hit the simulator's bounds".into()));
    }
    let n = case.n;
    let before: Vec<u32> = case
        .failures
        .iter()
        .filter(|f| f.at == 0)
        .map(|f| f.rank)
        .collect();
    let failed = |r: u32| case.failures.iter().any(|f| f.rank == r);
    let root_alive = sim.is_alive(Rank(0));
    let mut result_seen: Option<Vec<f64>> = None;
    let mut included_failed = Vec::new();
    for (r, rank) in sim.ranks().iter().enumerate() {
        let r = r as u32;
        if rank.deliveries > 1 {
            return Err(fail(format!(
                "rank {r} delivered {} times",
                rank.deliveries
            )));
        }
        if !sim.is_alive(Rank(r)) {
            continue;
        }
        let must_deliver = match case.op {
            CheckedOp::Reduce | CheckedOp::Allreduce => true,
            CheckedOp::Bcast => root_alive && case.must_all_deliver(),
        };
        if case.op == CheckedOp::Bcast && root_alive && !must_deliver && rank.deliveries == 0 {
            // Stranded by a failure during the operation with no detector (see
            // `must_all_deliver`): still waiting, never a value it did not receive.
            if rank.phase() != Phase::Running {
                return Err(fail(format!(
                    "rank {r} ended ({:?}) without the value",
                    rank.phase()
                )));
            }
            continue;
        }
        if must_deliver && (rank.phase() != Phase::Done || rank.deliveries != 1) {
            return Err(fail(format!(
                "live rank {r} did not deliver (phase {:?})",
                rank.phase()
            )));
        }
        if !must_deliver && !root_alive {
            if rank.deliveries != 0 || rank.phase() != Phase::Aborted {
                return Err(fail(format!(
                    "rank {r} did not detect the failed root consistently (phase {:?})",
                    rank.phase()
                )));
            }
            continue;
        }
        if !rank.settled() {
            return Err(fail(format!(
                "live rank {r} still owes corrections when the run ended"
            )));
        }
        if !rank.has_result() {
            continue;
        }
        let mut result = Vec::new();
        rank.estimate(&mut result);
        if result.len() != n as usize {
            return Err(fail(format!("rank {r} holds {} entries", result.len())));
        }
        if case.op == CheckedOp::Bcast {
            let expected = (0..n).map(|i| if i == 0 { 1.0 } else { 0.0 });
            if !result.iter().copied().eq(expected) {
                return Err(fail(format!(
                    "rank {r} delivered {result:?}, not the root's value"
                )));
            }
            continue;
        }
        for (i, &count) in result.iter().enumerate() {
            let i = i as u32;
            let ok = if before.contains(&i) {
                count == 0.0
            } else if failed(i) {
                count == 0.0 || count == 1.0
            } else {
                count == 1.0
            };
            if !ok {
                return Err(fail(format!(
                    "rank {r} counts rank {i}'s value {count} times (failed: {}, before the operation: {})",
                    failed(i),
                    before.contains(&i)
                )));
            }
        }
        match &result_seen {
            Some(first) if *first != result => {
                return Err(fail(format!(
                    "rank {r}'s result differs from another rank's"
                )));
            }
            Some(_) => {}
            None => {
                included_failed = (0..n)
                    .filter(|&i| failed(i) && result[i as usize] == 1.0)
                    .collect();
                result_seen = Some(result);
            }
        }
    }
    let formula = case.failure_free_messages();
    if case.failures.is_empty() && case.exact_message_count() && report.messages != formula {
        return Err(fail(format!(
            "failure-free run sent {} messages, the formula says {formula}",
            report.messages
        )));
    }
    // 001 Theorem 7: at most f + 1 times the failure-free count. Timed correction trades
    // messages for needing no detector: each rank may try every rank of a side once.
    let bound = match case.correction {
        Correction::Timed { .. } => formula + 2 * u64::from(n) * u64::from(n - 1),
        _ => formula * u64::from(case.tolerate + 1),
    };
    if report.messages > bound {
        return Err(fail(format!(
            "{} messages exceed (f + 1) times the failure-free {formula}",
            report.messages
        )));
    }
    Ok(CaseOutcome {
        report,
        included_failed,
    })
}

/// Aggregate of many checked seeds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckSummary {
    /// Cases run.
    pub cases: u64,
    /// Cases with at least one failure.
    pub with_failures: u64,
    /// Cases with an in-operational failure.
    pub in_operation: u64,
    /// Failed ranks whose value was included in a result.
    pub failed_included: u64,
    /// Timed correction without a detector: cases in which a live rank never received (a
    /// failure during the operation stranded it; see [`CheckCase::must_all_deliver`]).
    pub stranded: u64,
}

/// Checks seeds `first..first + count` of `op` with N up to `max_n`; stops at the first
/// violation.
pub fn check_seeds(
    op: CheckedOp,
    first: u64,
    count: u64,
    max_n: u32,
) -> Result<CheckSummary, Violation> {
    let mut summary = CheckSummary::default();
    for seed in first..first.saturating_add(count) {
        let case = CheckCase::random(op, seed, max_n);
        let outcome = check_case(&case)?;
        summary.cases += 1;
        summary.with_failures += u64::from(!case.failures.is_empty());
        summary.in_operation += u64::from(case.failures.iter().any(|f| f.at > 0));
        summary.failed_included += outcome.included_failed.len() as u64;
    }
    Ok(summary)
}

/// Checks seeds `first..first + count` of the broadcast with timed correction and no failure
/// detector ([`CheckCase::random_timed`]); stops at the first violation.
pub fn check_timed_seeds(first: u64, count: u64, max_n: u32) -> Result<CheckSummary, Violation> {
    let mut summary = CheckSummary::default();
    for seed in first..first.saturating_add(count) {
        let case = CheckCase::random_timed(seed, max_n);
        let outcome = check_case(&case)?;
        let live = u64::from(case.n) - case.failures.len() as u64;
        summary.stranded += u64::from(u64::from(outcome.report.completed) < live);
        summary.cases += 1;
        summary.with_failures += u64::from(!case.failures.is_empty());
        summary.in_operation += u64::from(case.failures.iter().any(|f| f.at > 0));
    }
    Ok(summary)
}
