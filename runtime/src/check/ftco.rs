//! The checker of FTCO's semantics (004 Definition 3.2) on random failure schedules, swarm
//! style: the seed draws N, the tree (k-ary or k-nomial, k in 2..=8, 1 to 4 roots), the
//! collective, the service distance, the detection timeout, and a set of inactive ranks (dead at
//! t = 0) and run-time crashes spread over the operation and its recovery. The broadcast and
//! reduce root, rank 0, never fails (004 Sec. 2); the allreduce roots may.
//!
//! Inputs are one-hot (rank r contributes e_r, summed, length N), so element i of a result
//! counts how often rank i's value was reduced. Per run the checker verifies:
//! - Termination: every live rank completes, exactly once; none aborts.
//! - Consistency: every live rank of an allreduce holds the same value; a broadcast delivers
//!   rank 0's value to every live rank.
//! - Definition 3.2 (allreduce): every element is 0 or 1; every rank that completed (before it
//!   failed, if it failed: RemainingNodes) is included; only ranks that failed are left out.
//!   Reduce keeps Definition 3.1 instead, with T the root's completion: a rank that completed
//!   and then failed before T may be missing, since its data can die with its parent (the
//!   rank's completion only means the parent acknowledged it).
//! - The result's contributor set names exactly the ranks the value includes.
//! - FTCO heard of no failure from the simulator (crashes are silence, [`DetectorModel::Silent`])
//!   and no frame was rejected; a failure-free run sends the pinned message count.
//!
//! A violation carries the whole case, from which the launcher formats the command that
//! replays the same run.
//!
//! [`DetectorModel::Silent`]: crate::sim::DetectorModel::Silent

use std::ops::Range;

use ftcoll_algos::fault::{FaultSpec, FaultTime};
use ftcoll_algos::ftco::{Collective, Ftco, FtcoOptions, Piece, ServiceDistance};
use ftcoll_algos::protocol::{Input, Outbox, Phase, Protocol, Wrapper};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::topology::{Tree, TreeShape};
use ftcoll_algos::values::Values;
use ftcoll_algos::{Duration, OpId, Rank, ReduceOp, Time};

use super::corrected::{kill_faults, ScheduledFailure};
use super::CountDeliveries;
use crate::job::{Algorithm, JobError, JobSpec};
use crate::sim::{generate_inputs, InputKind, SimConfig, SimReport, Simulation};

/// An FTCO rank under watch: its completions, when it first held the final result, and how many
/// messages it sent at which handling time.
#[derive(Clone, Debug)]
pub struct WatchedFtco {
    /// The rank, with its completions counted.
    pub rank: CountDeliveries<Ftco>,
    /// When it completed (its FinishTime).
    pub completed_at: Option<Time>,
    /// When the final result was first known here.
    pub result_at: Option<Time>,
    /// (time, messages sent) of each input whose handling sent something.
    pub sends: Vec<(Time, u32)>,
    /// Messages sent until it completed, the input that completed it included (004's work:
    /// Alg. 1 returns there).
    pub sent_until_done: u64,
}

impl WatchedFtco {
    /// Watches `rank`.
    pub fn new(rank: Ftco) -> WatchedFtco {
        WatchedFtco {
            rank: CountDeliveries::new(rank),
            completed_at: None,
            result_at: None,
            sends: Vec::new(),
            sent_until_done: 0,
        }
    }

    /// The FTCO instance.
    pub fn ftco(&self) -> &Ftco {
        &self.rank.inner
    }
}

impl Wrapper for WatchedFtco {
    type Inner = CountDeliveries<Ftco>;

    fn inner(&self) -> &CountDeliveries<Ftco> {
        &self.rank
    }

    fn inner_mut(&mut self) -> &mut CountDeliveries<Ftco> {
        &mut self.rank
    }

    fn wrap_handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        let before = out.send_count();
        self.rank.handle(now, input, out);
        let sent = out.send_count().saturating_sub(before);
        if sent > 0 {
            self.sends.push((now, sent as u32));
            if self.completed_at.is_none() {
                self.sent_until_done += sent as u64;
            }
        }
        if self.completed_at.is_none() && self.rank.deliveries > 0 {
            self.completed_at = Some(now);
        }
        if self.result_at.is_none() && self.ftco().result().is_some() {
            self.result_at = Some(now);
        }
    }
}

/// Runs an `ftco-*` job exactly as [`crate::job::simulate`] does (same inputs, same simulator
/// set-up, same rank instances), with every rank watched.
pub fn simulate_watched(
    spec: &JobSpec,
    config: SimConfig,
) -> Result<(Simulation<WatchedFtco>, SimReport), JobError> {
    spec.validate()?;
    let config = spec.sim_config(config);
    let inputs = generate_inputs(spec.input, spec.n, spec.input_len, config.seed);
    let ranks = spec
        .ftco_ranks(OpId(1), config.seed)?
        .into_iter()
        .map(WatchedFtco::new)
        .collect();
    let mut sim = Simulation::new(config, ranks, inputs, spec.input_len, spec.op)?;
    let report = sim.run();
    Ok((sim, report))
}

/// When an FTCO run's work happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MessageProfile {
    /// Messages sent in all.
    pub total: u64,
    /// When the last live rank that gets a result (every live rank for broadcast and allreduce,
    /// rank 0 for reduce) first held it.
    pub last_result_at: Option<Time>,
    /// Messages sent before that moment: the operation is over for everyone, and what follows
    /// is acknowledgement traffic (004 Fig. 9 counts this way).
    pub before_last_result: u64,
}

/// The message profile of a watched run.
pub fn message_profile(sim: &Simulation<WatchedFtco>, collective: Collective) -> MessageProfile {
    let holders = sim.ranks().iter().enumerate().filter(|&(r, _)| {
        sim.is_alive(Rank(r as u32)) && (collective != Collective::Reduce || r == 0)
    });
    let last_result_at = holders.filter_map(|(_, w)| w.result_at).max();
    let sends = sim.ranks().iter().flat_map(|w| w.sends.iter());
    let total = sends.clone().map(|&(_, k)| u64::from(k)).sum();
    let before_last_result = last_result_at.map_or(0, |last| {
        sends
            .filter(|&&(t, _)| t < last)
            .map(|&(_, k)| u64::from(k))
            .sum()
    });
    MessageProfile {
        total,
        last_result_at,
        before_last_result,
    }
}

/// Messages of a failure-free run: allreduce sends DATA up and down every tree edge (4 messages
/// with the ACKs, N - R edges) and each root its data to every other root (2R(R - 1) with the
/// ACKs); broadcast and reduce hang the other roots under rank 0, 2(N - 1).
pub fn failure_free_messages(collective: Collective, n: u32, roots: u32) -> u64 {
    let (n, r) = (u64::from(n), u64::from(roots.clamp(1, n.max(1))));
    match collective {
        Collective::Allreduce => 4 * (n - r) + 2 * r * (r - 1),
        Collective::Bcast | Collective::Reduce => 2 * (n - 1),
    }
}

/// One checked run.
#[derive(Clone, Debug, PartialEq)]
pub struct FtcoCase {
    /// The collective.
    pub collective: Collective,
    /// Ranks.
    pub n: u32,
    /// Tree shape and radix.
    pub shape: TreeShape,
    /// Roots of the tree (clamped to N).
    pub roots: u32,
    /// Service-distance function.
    pub service: ServiceDistance,
    /// Base of f_timeout, in steps.
    pub detect_timeout: u64,
    /// Failures, distinct ranks: at 0 an inactive rank, later a run-time crash.
    pub failures: Vec<ScheduledFailure>,
    /// Live ranks that turn slow or stop (hang) during the run, none of them in `failures`:
    /// outside fail-stop until a timeout takes them for dead, when the simulator fences them
    /// (kills them at once), as the launcher fences real ranks.
    pub laggards: Vec<FaultSpec>,
    /// 004's step model (one action per rank per step) instead of the runtime's engine.
    pub step_model: bool,
    /// The simulator's seed.
    pub seed: u64,
}

/// Stream of the case draws.
const CASE_STREAM: u64 = 0xF7C0_CA5E_0000_0001;

/// Latency and overhead of the simulator's default LogP costs, in steps.
const LOGP_L: u64 = 10;
const LOGP_O: u64 = 1;

impl FtcoCase {
    /// A random case with N in [1, max_n].
    pub fn random(seed: u64, max_n: u32) -> FtcoCase {
        let mut rng = SimRng::for_stream(seed, CASE_STREAM);
        let n = 1 + rng.below(u64::from(max_n.max(1))) as u32;
        let collective =
            [Collective::Allreduce, Collective::Reduce, Collective::Bcast][rng.below(3) as usize];
        let k = 2 + rng.below(7) as u32;
        let shape = if rng.chance(0.5) {
            TreeShape::KNomial { k }
        } else {
            TreeShape::KAry { k }
        };
        let roots = (1 + rng.below(4) as u32).min(n);
        let service = match rng.below(3) {
            0 => ServiceDistance::Rsd { ratio: 0.5 },
            1 => ServiceDistance::Rsd { ratio: 0.25 },
            _ => ServiceDistance::Disd,
        };
        let detect_timeout = [40, 60, 100][rng.below(3) as usize];
        let immune = |rank: u32| rank == 0 && collective != Collective::Allreduce;
        let candidates = n - u32::from(collective != Collective::Allreduce);
        // Swarm: some runs are failure-free, some lose one rank, some a few, some up to half;
        // some have only inactive ranks, some only run-time crashes, some both.
        let count = match rng.below(4) {
            0 => 0,
            1 => 1,
            2 => 1 + rng.below(3) as u32,
            _ => rng.below(u64::from(n / 2) + 1) as u32,
        }
        .min(candidates)
        .min(n - 1);
        let inactive_share = [0.0, 0.5, 1.0][rng.below(3) as usize];
        let horizon = Self::fault_free_steps(shape, n, roots) * [1, 2, 4][rng.below(3) as usize];
        let mut failures: Vec<ScheduledFailure> = Vec::new();
        // Bounded: each pass adds a distinct rank or retries a collision; candidates > count
        // or candidates == count with every candidate eventually drawn.
        while failures.len() < count as usize {
            let rank = match rng.below(4) {
                // The roots and their first children: the ranks whose loss reshapes the top.
                0 => rng.below(u64::from((2 * roots).min(n))) as u32,
                _ => rng.below(u64::from(n)) as u32,
            };
            if immune(rank) || failures.iter().any(|f| f.rank == rank) {
                continue;
            }
            let at = if rng.chance(inactive_share) {
                0
            } else {
                1 + rng.below(horizon)
            };
            failures.push(ScheduledFailure { rank, at });
        }
        let laggards = Self::draw_laggards(&mut rng, n, horizon, &failures, immune);
        // Drawn last, so that the other draws of a seed are what they were before the model
        // was drawn at all.
        let step_model = rng.chance(0.5);
        FtcoCase {
            collective,
            n,
            shape,
            roots,
            service,
            detect_timeout,
            failures,
            laggards,
            step_model,
            seed,
        }
    }

    /// Some runs slow down or stop one or two live ranks at a random moment: a slowdown from
    /// barely noticeable to far past any timeout, or a hang.
    fn draw_laggards(
        rng: &mut SimRng,
        n: u32,
        horizon: u64,
        failures: &[ScheduledFailure],
        immune: impl Fn(u32) -> bool,
    ) -> Vec<FaultSpec> {
        let mut laggards = Vec::new();
        if n < 2 || !rng.chance(1.0 / 3.0) {
            return laggards;
        }
        let count = 1 + rng.below(2);
        // Bounded: a few draws, each adding a rank or skipping a taken one.
        for _ in 0..4 * count {
            if laggards.len() as u64 >= count {
                break;
            }
            let rank = rng.below(u64::from(n)) as u32;
            let taken = |spec: &FaultSpec| matches!(spec, FaultSpec::Slow { rank: r, .. } | FaultSpec::Stop { rank: r, .. } if r.0 == rank);
            if immune(rank) || failures.iter().any(|f| f.rank == rank) || laggards.iter().any(taken)
            {
                continue;
            }
            let at = FaultTime::Steps(rng.below(horizon + 1));
            laggards.push(if rng.chance(0.25) {
                FaultSpec::Stop {
                    rank: Rank(rank),
                    at,
                }
            } else {
                let factor = [2, 8, 60, 1000][rng.below(4) as usize];
                FaultSpec::Slow {
                    rank: Rank(rank),
                    factor,
                    at,
                }
            });
        }
        laggards
    }

    /// About how long a failure-free run takes, in steps: up and down the tree, one level
    /// costing a latency plus the widest rank's overheads (the model f_ETA uses).
    fn fault_free_steps(shape: TreeShape, n: u32, roots: u32) -> u64 {
        let Ok(tree) = Tree::new(shape, n, roots.clamp(1, n)) else {
            return 1;
        };
        let widest = u64::from(tree.child_count(Rank(0)).max(roots)) + 2;
        (2 * u64::from(tree.height()) + 2) * (LOGP_L + LOGP_O * widest)
    }

    /// The algorithm of the job table.
    pub fn algorithm(&self) -> Algorithm {
        match self.collective {
            Collective::Bcast => Algorithm::FtcoBcast,
            Collective::Reduce => Algorithm::FtcoReduce,
            Collective::Allreduce => Algorithm::FtcoAllreduce,
        }
    }

    /// The job: a sum of one-hot inputs of length N.
    pub fn spec(&self) -> JobSpec {
        let mut spec = JobSpec::new(self.algorithm(), self.n);
        spec.op = ReduceOp::Sum;
        spec.input = InputKind::OneHot;
        spec.input_len = self.n as usize;
        spec.ftco = FtcoOptions {
            shape: self.shape,
            roots: self.roots,
            detect_timeout: Duration(self.detect_timeout),
            service: self.service,
            step_model: self.step_model,
            ..FtcoOptions::default()
        };
        spec
    }

    /// The simulator set-up (before [`JobSpec::sim_config`]): the kills, and bounds that turn a
    /// run that does not terminate into a reported violation.
    pub fn config(&self) -> SimConfig {
        SimConfig {
            seed: self.seed,
            faults: kill_faults(&self.failures)
                .into_iter()
                .chain(self.laggards.iter().copied())
                .collect(),
            max_events: 2_000_000 + 20_000 * u64::from(self.n),
            max_time: Time(10_000_000),
            ..SimConfig::default()
        }
    }

    fn failure_free(&self) -> bool {
        self.failures.is_empty() && self.laggards.is_empty()
    }
}

/// A violated property, with the case that shows it (the launcher formats the command that
/// replays it).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{what}\n  case: {case:?}")]
pub struct FtcoViolation {
    /// What went wrong.
    pub what: String,
    /// The case.
    pub case: Box<FtcoCase>,
}

/// What a passing run did.
#[derive(Clone, Debug, PartialEq)]
pub struct FtcoOutcome {
    /// The simulator's report.
    pub report: SimReport,
    /// When the work happened.
    pub profile: MessageProfile,
    /// Failed ranks whose value the result includes (reduce and allreduce).
    pub included_failed: Vec<u32>,
    /// Ranks that completed and failed afterwards.
    pub finished_then_failed: Vec<u32>,
    /// Of those, the ones a reduce result leaves out (their data died with their parent).
    pub lost_after_finishing: Vec<u32>,
    /// Arriving pieces the ranks refused as partial overlaps (a double count avoided).
    pub conflicts: u64,
    /// A run with laggards whose survivors disagree: outside the model, and visible in the
    /// report (see [`check_ftco_case`]).
    pub outside_model: Option<String>,
}

/// Runs `case` and checks every property; `Err` names the first violation.
pub fn check_ftco_case(case: &FtcoCase) -> Result<FtcoOutcome, FtcoViolation> {
    let fail = |what: String| FtcoViolation {
        what,
        case: Box::new(case.clone()),
    };
    let (sim, report) =
        simulate_watched(&case.spec(), case.config()).map_err(|e| fail(format!("set-up: {e}")))?;
    check_report(&report).map_err(fail)?;
    let n = case.n;
    // Scripted kills and the laggards a timeout took for dead, fenced at that moment.
    let failure_at = |r: u32| {
        report
            .crashes
            .iter()
            .find(|c| c.rank.0 == r)
            .map(|c| c.at.0)
    };
    let failed = |r: u32| failure_at(r).is_some();
    let mut finished_then_failed = Vec::new();
    let mut conflicts = 0;
    for (r, watched) in sim.ranks().iter().enumerate() {
        let r = r as u32;
        let deliveries = watched.rank.deliveries;
        conflicts += watched.ftco().conflicts();
        if deliveries > 1 {
            return Err(fail(format!("rank {r} completed {deliveries} times")));
        }
        if !sim.is_alive(Rank(r)) {
            if deliveries == 1 {
                finished_then_failed.push(r);
            }
            continue;
        }
        if sim.is_stopped(Rank(r)) {
            // Hung, and never taken for dead because no rank waited for it: it owes nothing.
            continue;
        }
        if watched.phase() != Phase::Done || deliveries != 1 {
            return Err(fail(format!(
                "Termination: live rank {r} did not complete (phase {:?}, known dead {:?})",
                watched.phase(),
                watched.ftco().known_dead()
            )));
        }
        if !watched.settled() {
            return Err(fail(format!(
                "live rank {r} still waits for ACKs at the end"
            )));
        }
    }
    // Which ranks a result must include. Allreduce, Definition 3.2: every rank that completed,
    // live or failed since (RemainingNodes; a live rank has completed by now). Reduce, whose
    // non-root ranks complete once their parent acknowledged their data, cannot promise that:
    // a parent that fails before passing the data on loses it, and if the child fails too
    // nobody can resend it. Definition 3.1 is what holds: T is rank 0's completion, and every
    // rank that had not failed by T is included.
    let completed = |r: u32| sim.ranks()[r as usize].rank.deliveries == 1;
    let root_done = sim.ranks()[0].completed_at.map_or(u64::MAX, |t| t.0);
    let must_include = |r: u32| match case.collective {
        Collective::Reduce => failure_at(r).is_none_or(|at| at > root_done),
        Collective::Allreduce | Collective::Bcast => completed(r) || !failed(r),
    };
    let holders: Vec<u32> = match case.collective {
        Collective::Reduce => vec![0],
        Collective::Bcast | Collective::Allreduce => (0..n)
            .filter(|&r| sim.is_alive(Rank(r)) && !sim.is_stopped(Rank(r)))
            .collect(),
    };
    let mut first: Option<(u32, Vec<f64>)> = None;
    let mut included_failed = Vec::new();
    let mut lost_after_finishing = Vec::new();
    let mut outside_model = None;
    for &r in &holders {
        let Some(piece) = sim.ranks()[r as usize].ftco().result() else {
            return Err(fail(format!("rank {r} completed without a result")));
        };
        let value = counted_contributions(r, piece, n).map_err(fail)?;
        let ones = value.iter().filter(|&&c| c == 1.0).count();
        if case.collective == Collective::Bcast {
            if !(value[0] == 1.0 && ones == 1) {
                return Err(fail(format!(
                    "rank {r} delivered {value:?}, not rank 0's value"
                )));
            }
            continue;
        }
        for i in 0..n {
            let included = value[i as usize] == 1.0;
            if !included && must_include(i) {
                return Err(fail(format!(
                    "rank {r}'s result leaves out rank {i}, which completed at {:?} and \
                     failed at {:?}",
                    sim.ranks()[i as usize].completed_at,
                    failure_at(i)
                )));
            }
        }
        match &first {
            Some((other, seen)) if seen.as_slice() != value => {
                let what = format!("Consistency: ranks {other} and {r} returned different values");
                if !case.laggards.is_empty() && report.result_spread.is_some_and(|s| s > 0.0) {
                    // A rank slow past the timeouts, fenced mid-operation: until the fence
                    // its messages came later than LogP's model (which FTCO's timing assumes)
                    // allows, which is outside the model. The run must then be loud: the
                    // differing results are in the report, and the launcher exits non-zero.
                    outside_model = Some(what);
                    break;
                }
                return Err(fail(what));
            }
            Some(_) => {}
            None => {
                included_failed = (0..n)
                    .filter(|&i| failed(i) && value[i as usize] == 1.0)
                    .collect();
                lost_after_finishing = finished_then_failed
                    .iter()
                    .copied()
                    .filter(|&i| value[i as usize] == 0.0)
                    .collect();
                first = Some((r, value.to_vec()));
            }
        }
    }
    let formula = failure_free_messages(case.collective, n, case.roots);
    if outside_model.is_none() && case.failure_free() && report.messages != formula {
        return Err(fail(format!(
            "failure-free run sent {} messages, the pinned count is {formula}",
            report.messages
        )));
    }
    Ok(FtcoOutcome {
        profile: message_profile(&sim, case.collective),
        report,
        included_failed,
        finished_then_failed,
        lost_after_finishing,
        conflicts,
        outside_model,
    })
}

/// What a run's report alone shows wrong: bounds hit, failure notices sent to a protocol that
/// must find crashes itself, frames rejected on a reliable network.
fn check_report(report: &SimReport) -> Result<(), String> {
    if report.truncated {
        return Err(format!(
            "Termination: the run hit the simulator's bounds at step {} after {} events",
            report.sim_time_steps, report.events
        ));
    }
    if report.notices != 0 {
        return Err(format!(
            "FTCO was sent {} failure notices; it must detect crashes by its own timeouts",
            report.notices
        ));
    }
    if report.rejected != 0 {
        return Err(format!(
            "{} frames rejected on a reliable network",
            report.rejected
        ));
    }
    Ok(())
}

/// Rank `r`'s result as one count per rank (the inputs are one-hot): each 0 or 1, and the
/// contributor set naming exactly the ranks counted.
fn counted_contributions(r: u32, piece: &Piece, n: u32) -> Result<&[f64], String> {
    let Values::F64(value) = &piece.value else {
        return Err(format!("rank {r} holds a {:?} result", piece.value));
    };
    if value.len() != n as usize {
        return Err(format!("rank {r} holds {} elements", value.len()));
    }
    for (i, &count) in value.iter().enumerate() {
        let i = i as u32;
        if count != 0.0 && count != 1.0 {
            return Err(format!("rank {r} counts rank {i}'s value {count} times"));
        }
        if (count == 1.0) != piece.contributors.contains(i) {
            return Err(format!(
                "rank {r}'s contributor set {:?} disagrees with its value on rank {i}",
                piece.contributors
            ));
        }
    }
    let ones = value.iter().filter(|&&c| c == 1.0).count() as u64;
    if piece.contributors.len() != ones {
        return Err(format!(
            "rank {r}'s contributor set {:?} names ranks its value leaves out",
            piece.contributors
        ));
    }
    Ok(value)
}

/// Aggregate of many checked seeds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FtcoSummary {
    /// Cases run.
    pub cases: u64,
    /// Cases per collective: allreduce, reduce, broadcast.
    pub allreduce: u64,
    /// Reduce cases.
    pub reduce: u64,
    /// Broadcast cases.
    pub bcast: u64,
    /// Cases with at least one failure.
    pub with_failures: u64,
    /// Inactive ranks (dead at t = 0), in all.
    pub inactive: u64,
    /// Run-time crashes, in all.
    pub run_time: u64,
    /// Allreduce roots that failed.
    pub root_failures: u64,
    /// Ranks that completed and failed afterwards.
    pub finished_then_failed: u64,
    /// Of those, ranks a reduce result leaves out (Definition 3.1 allows it).
    pub lost_after_finishing: u64,
    /// Failed ranks whose value a result includes.
    pub failed_included: u64,
    /// Pieces refused as partial overlaps.
    pub conflicts: u64,
    /// Messages, in all.
    pub messages: u64,
    /// Cases with slow or stopped ranks.
    pub with_laggards: u64,
    /// Laggards a timeout took for dead, fenced by the simulator.
    pub fenced: u64,
    /// Cases with laggards that ended outside the model, loudly (disagreeing results in the
    /// report, a non-zero exit from the launcher).
    pub outside_model: u64,
}

/// Checks the seeds in `seeds` with N up to `max_n`; stops at the first violation.
pub fn check_ftco_seeds(seeds: Range<u64>, max_n: u32) -> Result<FtcoSummary, FtcoViolation> {
    let mut summary = FtcoSummary::default();
    for seed in seeds {
        let case = FtcoCase::random(seed, max_n);
        let outcome = check_ftco_case(&case)?;
        summary.cases += 1;
        match case.collective {
            Collective::Allreduce => summary.allreduce += 1,
            Collective::Reduce => summary.reduce += 1,
            Collective::Bcast => summary.bcast += 1,
        }
        summary.with_failures += u64::from(!case.failure_free());
        summary.with_laggards += u64::from(!case.laggards.is_empty());
        summary.fenced += outcome
            .report
            .crashes
            .iter()
            .filter(|c| c.cause == crate::sim::CrashCause::Fenced)
            .count() as u64;
        summary.outside_model += u64::from(outcome.outside_model.is_some());
        for f in &case.failures {
            summary.inactive += u64::from(f.at == 0);
            summary.run_time += u64::from(f.at > 0);
            summary.root_failures +=
                u64::from(case.collective == Collective::Allreduce && f.rank < case.roots);
        }
        summary.finished_then_failed += outcome.finished_then_failed.len() as u64;
        summary.lost_after_finishing += outcome.lost_after_finishing.len() as u64;
        summary.failed_included += outcome.included_failed.len() as u64;
        summary.conflicts += outcome.conflicts;
        summary.messages += outcome.report.messages;
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_a_function_of_the_seed_and_spare_the_root_where_required() {
        for seed in 0..300 {
            let case = FtcoCase::random(seed, 64);
            assert_eq!(case, FtcoCase::random(seed, 64));
            assert!((1..=64).contains(&case.n));
            assert!(case.roots >= 1 && case.roots <= case.n.min(4));
            assert!(case.failures.len() < case.n as usize || case.n == 1);
            if case.collective != Collective::Allreduce {
                assert!(case.failures.iter().all(|f| f.rank != 0), "{case:?}");
            }
        }
    }

    #[test]
    fn a_few_seeds_pass() {
        let summary = check_ftco_seeds(0..200, 24).unwrap_or_else(|v| panic!("{v}"));
        assert_eq!(summary.cases, 200);
        assert!(summary.with_failures > 100, "{summary:?}");
    }
}
