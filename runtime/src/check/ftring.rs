//! The checker of the fault-tolerant ring allreduce ([`ftcoll_algos::ftring`]) on random crash
//! schedules, swarm style: the seed draws N, the frame size (every vector is at least four
//! segments), the agreement tree, how many ranks crash (none, one, a few, all but one) and
//! when, the detector's delay and the start spread.
//!
//! Inputs are chosen so that a violation shows: rank r's element i is 2^r (i + 1), so a sum
//! names the ranks it counts, and counting one twice or half of one is visible. On every live
//! rank it checks what the module docs argue: Termination (every survivor returns), Validity
//! (the result is exactly the sum over the contributors it reports, each once, and those hold
//! every survivor) and Agreement (every survivor returns the same vector and the same
//! contributors).

use ftcoll_algos::corrected::Correction;
use ftcoll_algos::era::{EraConfig, EraTopology, Shape};
use ftcoll_algos::ftring::{AttemptRing, CommitRule, FtRing, FtRingConfig};
use ftcoll_algos::protocol::Phase;
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::{Duration, OpId, Protocol, Rank, ReduceOp};

use super::corrected::{checked_config, kill_faults, ScheduledFailure};
use super::whole_f64;
use crate::sim::{SimReport, Simulation};

/// One checked run.
#[derive(Clone, Debug, PartialEq)]
pub struct FtRingCase {
    /// Ranks (at most 24: the inputs are powers of two).
    pub n: u32,
    /// Elements per frame; a segment is this many per member.
    pub frame_elems: usize,
    /// Vector length: at least four segments of the first attempt.
    pub len: usize,
    /// Segments started ahead.
    pub window: u32,
    /// The agreement tree.
    pub topology: EraTopology,
    /// Rank crashes (distinct ranks, fewer than N).
    pub failures: Vec<ScheduledFailure>,
    /// Detection delay of the perfect detector.
    pub detect_delay: u64,
    /// Start times uniform on [0, spread].
    pub spread: u64,
    /// When ranks return (the planted-bug control uses the wrong rule).
    pub commit: CommitRule,
    /// What each attempt runs.
    pub attempts: Attempts,
    /// The simulator's seed.
    pub seed: u64,
}

/// What the attempts of a checked case run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempts {
    /// The ring (`ft-ring`).
    Ring,
    /// Corrected trees in segments, each tolerating `tolerate` failures (`ft-corrected`).
    Corrected {
        /// Failures a segment's trees tolerate.
        tolerate: u32,
    },
}

const CASE_STREAM: u64 = 0xF7_0A1B_0000_0026;
const CORRECTED_STREAM: u64 = 0xF7_C0DE_0000_0026;

impl FtRingCase {
    /// A random case with N in [2, max_n] (max_n at most 24).
    pub fn random(seed: u64, max_n: u32) -> FtRingCase {
        let mut rng = SimRng::for_stream(seed, CASE_STREAM);
        let n = 2 + rng.below(u64::from(max_n.clamp(2, 24) - 1)) as u32;
        let frame_elems = 1 + rng.below(3) as usize;
        let segment = frame_elems * n as usize;
        let segments = 4 + rng.below(5) as usize;
        let len = segment * segments + rng.below(segment as u64) as usize;
        let shapes = [Shape::Binary, Shape::Star, Shape::String];
        let topology = EraTopology::Flat(shapes[rng.below(3) as usize]);
        // About the failure-free run's length: ring steps of every segment, with the window.
        let horizon = 12 * (2 * u64::from(n) + 8) * (segments as u64).div_ceil(2) + 200;
        let count = match rng.below(4) {
            0 => 0,
            1 => 1,
            2 => 1 + rng.below(3) as u32,
            _ => rng.below(u64::from(n)) as u32,
        }
        .min(n - 1);
        let mut failures: Vec<ScheduledFailure> = Vec::new();
        // Bounded: each pass adds a distinct rank or retries a collision; n > count.
        while failures.len() < count as usize {
            let rank = rng.below(u64::from(n)) as u32;
            if failures.iter().any(|f| f.rank == rank) {
                continue;
            }
            let at = if rng.chance(0.1) {
                0
            } else {
                1 + rng.below(horizon)
            };
            failures.push(ScheduledFailure { rank, at });
        }
        FtRingCase {
            n,
            frame_elems,
            len,
            window: 1 + rng.below(4) as u32,
            topology,
            failures,
            detect_delay: rng.below(60),
            spread: if rng.chance(0.3) { rng.below(40) } else { 0 },
            commit: CommitRule::Agreed,
            attempts: Attempts::Ring,
            seed,
        }
    }

    /// A random case of attempts in corrected trees: the ring case of `seed` (the same N,
    /// vector, crashes and timing), with frames that hold a whole segment of the ring's, so
    /// the vector is again four to eight segments, and trees tolerating 1 to 3 failures.
    pub fn random_corrected(seed: u64, max_n: u32) -> FtRingCase {
        let ring = FtRingCase::random(seed, max_n);
        let mut rng = SimRng::for_stream(seed, CORRECTED_STREAM);
        FtRingCase {
            frame_elems: ring.frame_elems * ring.n as usize,
            attempts: Attempts::Corrected {
                tolerate: 1 + rng.below(3) as u32,
            },
            ..ring
        }
    }

    fn config(&self, rank: u32) -> FtRingConfig {
        FtRingConfig {
            rank: Rank(rank),
            size: self.n,
            op: ReduceOp::Sum,
            op_id: OpId(1),
            frame_elems: self.frame_elems,
            window: self.window,
            era: EraConfig {
                topology: self.topology,
                ..EraConfig::default()
            },
            linger: Duration(u64::MAX / 4),
            commit: self.commit,
        }
    }

    /// Every rank's input, rank after rank.
    pub fn inputs(&self) -> Vec<f64> {
        (0..self.n)
            .flat_map(|r| (0..self.len).map(move |i| f64::from(1u32 << r) * (i + 1) as f64))
            .collect()
    }
}

/// A violated property, with the case that shows it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{what} (case: {case:?})")]
pub struct FtRingViolation {
    /// What went wrong.
    pub what: String,
    /// The case, to replay.
    pub case: Box<FtRingCase>,
}

/// What a checked run showed beyond its verdict.
#[derive(Clone, Debug)]
pub struct FtRingRun {
    /// The simulator's report.
    pub report: SimReport,
    /// The attempt the survivors returned from (0: the first ring completed).
    pub attempt: u32,
    /// Whether a rank that crashed is counted in the result.
    pub dead_counted: bool,
}

/// Runs `case` and checks Termination, Validity and Agreement on every live rank.
pub fn check_ft_ring_case(case: &FtRingCase) -> Result<FtRingRun, FtRingViolation> {
    match case.attempts {
        Attempts::Ring => {
            let ranks = (0..case.n).map(|r| FtRing::new(case.config(r))).collect();
            check_ranks(case, ranks)
        }
        Attempts::Corrected { tolerate } => {
            let ranks = (0..case.n)
                .map(|r| FtRing::corrected(case.config(r), tolerate, Correction::Checked))
                .collect();
            check_ranks(case, ranks)
        }
    }
}

fn check_ranks<R: AttemptRing + Send>(
    case: &FtRingCase,
    ranks: Vec<FtRing<R>>,
) -> Result<FtRingRun, FtRingViolation> {
    let fail = |what: String| FtRingViolation {
        what,
        case: Box::new(case.clone()),
    };
    let config = checked_config(
        case.seed,
        kill_faults(&case.failures),
        case.spread,
        Some(case.detect_delay),
    );
    let mut sim = Simulation::new(config, ranks, case.inputs(), case.len, ReduceOp::Sum)
        .map_err(|e| fail(format!("set-up: {e}")))?;
    let report = sim.run();
    if report.truncated {
        return Err(fail("the run hit the simulator's bounds".into()));
    }
    let live: Vec<u32> = (0..case.n).filter(|&r| sim.is_alive(Rank(r))).collect();
    let mut first: Option<(u32, Vec<f64>, Vec<u32>)> = None;
    // Results first (a wrong one says more than a rank left waiting), then Termination.
    let done = live
        .iter()
        .filter(|&&r| sim.ranks()[r as usize].phase() == Phase::Done);
    for &r in done {
        let rank = &sim.ranks()[r as usize];
        let (Some(result), Some(contributors)) = (
            rank.results().and_then(|p| whole_f64(p, case.len)),
            rank.contributors(),
        ) else {
            return Err(fail(format!("Termination: live rank {r} holds no result")));
        };
        if let Some(missing) = live.iter().find(|s| !contributors.contains(s)) {
            return Err(fail(format!(
                "Validity: rank {r}'s result leaves out live rank {missing}"
            )));
        }
        let mask: u32 = contributors.iter().map(|c| 1u32 << c).sum();
        let wrong = (0..case.len).find(|&i| result[i] != f64::from(mask) * (i + 1) as f64);
        if let Some(i) = wrong {
            return Err(fail(format!(
                "Validity: rank {r}'s element {i} is {} where its contributors {contributors:?} \
                 sum to {}",
                result[i],
                f64::from(mask) * (i + 1) as f64
            )));
        }
        match &first {
            None => first = Some((r, result, contributors.to_vec())),
            Some((q, theirs, with)) if *theirs != result || with.as_slice() != contributors => {
                return Err(fail(format!(
                    "Agreement: ranks {q} and {r} returned different results ({with:?} and \
                     {contributors:?})"
                )))
            }
            Some(_) => {}
        }
    }
    if let Some(&r) = live
        .iter()
        .find(|&&r| sim.ranks()[r as usize].phase() != Phase::Done)
    {
        let rank = &sim.ranks()[r as usize];
        return Err(fail(format!(
            "Termination: live rank {r} ended {:?} ({:?})",
            rank.phase(),
            rank.abort_reason()
        )));
    }
    let (attempt, dead_counted) = match (&first, live.first()) {
        (Some((_, _, contributors)), Some(&r)) => (
            sim.ranks()[r as usize].attempt(),
            contributors.iter().any(|c| !sim.is_alive(Rank(*c))),
        ),
        _ => (0, false),
    };
    Ok(FtRingRun {
        report,
        attempt,
        dead_counted,
    })
}

/// Aggregate of many checked seeds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FtRingSummary {
    /// Cases run.
    pub cases: u64,
    /// Cases with crashes.
    pub with_failures: u64,
    /// Cases whose survivors returned from a later attempt than the first.
    pub retried: u64,
    /// Cases where a rank that crashed during the operation is counted in the result.
    pub dead_counted: u64,
    /// Crashes in all.
    pub crashes: u64,
}

/// Checks seeds `first..first + count` with N up to `max_n`, the given commit rule and
/// attempts in rings (`corrected` false) or corrected trees; stops at the first violation.
pub fn check_ft_ring_seeds(
    first: u64,
    count: u64,
    max_n: u32,
    commit: CommitRule,
    corrected: bool,
) -> Result<FtRingSummary, FtRingViolation> {
    let mut summary = FtRingSummary::default();
    for seed in first..first.saturating_add(count) {
        let drawn = if corrected {
            FtRingCase::random_corrected(seed, max_n)
        } else {
            FtRingCase::random(seed, max_n)
        };
        let case = FtRingCase { commit, ..drawn };
        let run = check_ft_ring_case(&case)?;
        summary.cases += 1;
        summary.with_failures += u64::from(!case.failures.is_empty());
        summary.crashes += run.report.crashes.len() as u64;
        summary.retried += u64::from(run.attempt > 0);
        summary.dead_counted += u64::from(run.dead_counted);
    }
    Ok(summary)
}
