//! The checker of fault-tolerant collectives in segments: one operation per segment of a long
//! vector, pipelined by the operation shell ([`Segmented`]), on random crash schedules. Two
//! families run so: FTCO (004: broadcast, reduce, allreduce) and the corrected reduce (001).
//!
//! An FTCO case is [`FtcoCase::random`]'s draw (N, the tree, its roots, the collective, the
//! service distance, the timeout, inactive ranks and run-time crashes), run by the runtime's
//! engine in 004's fail-stop model (no laggards); a corrected case is
//! [`CheckCase::random`]'s reduce (N, f, up to f crashes before or during, the detector's
//! delay; no start spread, which the executor absorbs on real ranks) with the failure list,
//! as the library runs it in segments. Crash
//! times are spread over the segments. The vector is four to eight segments, with a window of
//! one to four in flight. Rank r's input is one-hot in every segment (element i is 1 where
//! i mod N = r), so element i of a result counts how often rank i mod N was reduced.
//!
//! Per run, on every live rank:
//! - Termination: it ends, done or with [`AbortReason::MixedContributors`]; nothing else.
//! - Whole vector: a result counts every rank 0 or 1 times, and the same number of times in
//!   every segment (a rank counted in some segments and not in others is the wrong answer
//!   the shell must refuse); it holds every rank that never failed. A broadcast delivers rank
//!   0's vector.
//! - Agreement (allreduce): every live rank ends the same way, with the same vector or the
//!   same error; the error comes only from a run where a rank crashed during it.
//!
//! The planted-bug control ([`SegmentsCase::accept_mixed`]) lets the shell join segments that
//! count different ranks; the checker must catch it.

use ftcoll_algos::corrected::{CorrectedReduce, FailureInfo, ReduceConfig};
use ftcoll_algos::ftco::{Collective, Ftco};
use ftcoll_algos::protocol::{
    AbortReason, Layout, Phase, Protocol, SegmentPlan, SegmentProtocol, Segmented, ShellConfig,
};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::{OpId, Rank, ReduceOp};

use super::corrected::{checked_config, kill_faults, CheckCase, CheckedOp, ScheduledFailure};
use super::ftco::FtcoCase;
use super::whole_f64;
use crate::sim::{SimConfig, SimReport, Simulation};

/// One checked run.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentsCase {
    /// What runs in each segment, and the crashes.
    pub family: SegmentsFamily,
    /// Whole segments of N elements.
    pub segments: usize,
    /// Elements of a last, shorter segment (fewer than N).
    pub tail: usize,
    /// Segments a rank starts ahead.
    pub window: u32,
    /// The planted-bug control: the shell joins segments that count different ranks.
    pub accept_mixed: bool,
}

/// The protocol of a segment, with its draw.
#[derive(Clone, Debug, PartialEq)]
pub enum SegmentsFamily {
    /// FTCO (its laggards dropped, the runtime's engine).
    Ftco(FtcoCase),
    /// The corrected reduce to rank 0, failure list on.
    CorrectedReduce(CheckCase),
}

const SEGMENTS_STREAM: u64 = 0xF7C0_5E65_0000_0026;

/// Spreads run-time crash times over `segments` operations' length.
fn spread_over(failures: &mut [ScheduledFailure], segments: usize, rng: &mut SimRng) {
    for failure in failures {
        if failure.at > 0 {
            failure.at = 1 + rng.below(failure.at.saturating_mul(segments as u64 / 2 + 1));
        }
    }
}

impl SegmentsCase {
    /// A random FTCO case with N in [2, max_n].
    pub fn random_ftco(seed: u64, max_n: u32) -> SegmentsCase {
        let mut ftco = FtcoCase::random(seed, max_n.max(2));
        // FtcoCase draws N from 1; one rank has no segment to lose.
        if ftco.n < 2 {
            ftco = FtcoCase::random(seed ^ SEGMENTS_STREAM, max_n.max(2));
        }
        ftco.laggards.clear();
        ftco.step_model = false;
        let mut rng = SimRng::for_stream(seed, SEGMENTS_STREAM);
        let mut case = SegmentsCase::shape(&mut rng, ftco.n);
        spread_over(&mut ftco.failures, case.segments, &mut rng);
        case.family = SegmentsFamily::Ftco(ftco);
        case
    }

    /// A random corrected-reduce case with N in [2, max_n].
    pub fn random_corrected_reduce(seed: u64, max_n: u32) -> SegmentsCase {
        let mut corrected = CheckCase::random(CheckedOp::Reduce, seed, max_n);
        corrected.info = FailureInfo::List;
        // Ranks start together: the shell takes an operation's frames once started, and on
        // real ranks the executor holds those that come earlier (the simulator does not).
        corrected.spread = 0;
        let mut rng = SimRng::for_stream(seed, SEGMENTS_STREAM);
        let mut case = SegmentsCase::shape(&mut rng, corrected.n);
        spread_over(&mut corrected.failures, case.segments, &mut rng);
        case.family = SegmentsFamily::CorrectedReduce(corrected);
        case
    }

    /// Segments, tail and window for N ranks (the family is set by the caller).
    fn shape(rng: &mut SimRng, n: u32) -> SegmentsCase {
        let segments = 4 + rng.below(5) as usize;
        let tail = if rng.chance(0.3) {
            rng.below(u64::from(n)) as usize
        } else {
            0
        };
        SegmentsCase {
            family: SegmentsFamily::CorrectedReduce(CheckCase::random(CheckedOp::Reduce, 0, 3)),
            segments,
            tail,
            window: 1 + rng.below(4) as u32,
            accept_mixed: false,
        }
    }

    /// Ranks.
    pub fn n(&self) -> u32 {
        match &self.family {
            SegmentsFamily::Ftco(c) => c.n,
            SegmentsFamily::CorrectedReduce(c) => c.n,
        }
    }

    /// The collective.
    pub fn collective(&self) -> Collective {
        match &self.family {
            SegmentsFamily::Ftco(c) => c.collective,
            SegmentsFamily::CorrectedReduce(_) => Collective::Reduce,
        }
    }

    /// Elements per rank.
    pub fn vector_len(&self) -> usize {
        self.n() as usize * self.segments + self.tail
    }

    /// Every rank's input, rank after rank: one-hot in every segment.
    pub fn inputs(&self) -> Vec<f64> {
        let (n, len) = (self.n() as usize, self.vector_len());
        (0..n)
            .flat_map(|r| (0..len).map(move |i| if i % n == r { 1.0 } else { 0.0 }))
            .collect()
    }

    /// The simulator set-up: FTCO's as its job runs it (no failure notices), the corrected
    /// checker's (a perfect detector with the drawn delay).
    fn sim_config(&self) -> SimConfig {
        match &self.family {
            SegmentsFamily::Ftco(c) => c.spec().sim_config(c.config()),
            SegmentsFamily::CorrectedReduce(c) => {
                checked_config(c.seed, kill_faults(&c.failures), c.spread, c.detect_delay)
            }
        }
    }

    fn shell<P: SegmentProtocol>(
        &self,
        r: u32,
        make: impl FnMut(&ShellConfig, u32, Option<P>) -> P + Send + 'static,
    ) -> Segmented<P> {
        let algo = match &self.family {
            SegmentsFamily::Ftco(c) => c.algorithm(),
            SegmentsFamily::CorrectedReduce(_) => ftcoll_algos::Algorithm::CorrectedReduce,
        };
        let shell = ShellConfig {
            rank: Rank(r),
            size: self.n(),
            algo,
            op: OpId(1),
            reduce: ReduceOp::Sum,
            plan: SegmentPlan {
                segment_elems: self.n() as usize,
                window: self.window,
            },
            layout: Layout::Contiguous,
            attempt: 0,
        };
        let mut shell = Segmented::new(shell, Box::new(make));
        if self.accept_mixed {
            shell.accept_mixed_contributors();
        }
        shell
    }

    fn ftco_rank(&self, ftco: &FtcoCase, r: u32, seed: u64) -> Result<Segmented<Ftco>, String> {
        // As the job's ranks are made ([`crate::job::JobSpec::ftco`]).
        let config = ftco.spec().ftco.config(
            Rank(r),
            ftco.n,
            ftco.collective,
            ReduceOp::Sum,
            OpId(1),
            Vec::new(),
            seed,
        )?;
        Ok(self.shell(r, move |_, _, _| Ftco::new(config.clone())))
    }

    fn corrected_rank(&self, corrected: &CheckCase, r: u32) -> Segmented<CorrectedReduce> {
        let mut config = ReduceConfig::new(
            Rank(r),
            corrected.n,
            ReduceOp::Sum,
            OpId(1),
            corrected.tolerate,
            Rank(0),
        );
        config.info = FailureInfo::List;
        self.shell(r, move |_, _, _| CorrectedReduce::new(config))
    }
}

/// A violated property, with the case that shows it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{what}\n  case: {case:?}")]
pub struct SegmentsViolation {
    /// What went wrong.
    pub what: String,
    /// The case.
    pub case: Box<SegmentsCase>,
}

/// How a checked run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentsRun {
    /// The simulator's report.
    pub report: SimReport,
    /// Whether the ranks holding the result refused it as mixed.
    pub refused_mixed: bool,
    /// Whether the result counts a rank that crashed.
    pub dead_counted: bool,
}

/// How often each rank is counted, the same in every segment, or what differs.
fn counts_per_rank(result: &[f64], n: usize) -> Result<Vec<f64>, String> {
    let mut counts: Vec<Option<f64>> = vec![None; n];
    for (i, &v) in result.iter().enumerate() {
        if v != 0.0 && v != 1.0 {
            return Err(format!("element {i} counts rank {} {v} times", i % n));
        }
        match counts[i % n] {
            None => counts[i % n] = Some(v),
            Some(c) if c != v => {
                return Err(format!(
                    "rank {} is counted in some segments and not in others (element {i})",
                    i % n
                ))
            }
            Some(_) => {}
        }
    }
    Ok(counts.into_iter().map(|c| c.unwrap_or(0.0)).collect())
}

/// Runs `case` and checks its properties on every live rank.
pub fn check_segments_case(case: &SegmentsCase) -> Result<SegmentsRun, SegmentsViolation> {
    let fail = |what: String| SegmentsViolation {
        what,
        case: Box::new(case.clone()),
    };
    let config = case.sim_config();
    match &case.family {
        SegmentsFamily::Ftco(ftco) => {
            let ranks = (0..case.n())
                .map(|r| case.ftco_rank(ftco, r, config.seed))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| fail(format!("set-up: {e}")))?;
            check_ranks(case, config, ranks)
        }
        SegmentsFamily::CorrectedReduce(corrected) => {
            let ranks = (0..case.n())
                .map(|r| case.corrected_rank(corrected, r))
                .collect();
            check_ranks(case, config, ranks)
        }
    }
}

fn check_ranks<P: SegmentProtocol + Send>(
    case: &SegmentsCase,
    config: SimConfig,
    ranks: Vec<Segmented<P>>,
) -> Result<SegmentsRun, SegmentsViolation> {
    let fail = |what: String| SegmentsViolation {
        what,
        case: Box::new(case.clone()),
    };
    let n = case.n();
    let len = case.vector_len();
    let inputs = case.inputs();
    let mut sim = Simulation::new(config, ranks, inputs.clone(), len, ReduceOp::Sum)
        .map_err(|e| fail(format!("set-up: {e}")))?;
    let report = sim.run();
    if report.truncated {
        return Err(fail(
            "Termination: the run hit the simulator's bounds".into(),
        ));
    }
    let crashed_during = report.crashes.iter().any(|c| c.at.0 > 0);
    let live: Vec<u32> = (0..n).filter(|&r| sim.is_alive(Rank(r))).collect();
    let collective = case.collective();
    let holds_result = |r: u32| collective != Collective::Reduce || r == 0;
    let mut first: Option<(u32, Option<Vec<f64>>)> = None;
    let mut refused_mixed = false;
    let mut dead_counted = false;
    for &r in &live {
        let rank = &sim.ranks()[r as usize];
        let ending = match (rank.phase(), rank.abort_reason()) {
            (Phase::Done, _) if holds_result(r) => {
                match rank.results().and_then(|p| whole_f64(p, len)) {
                    Some(result) => Some(result),
                    None => return Err(fail(format!("rank {r} is done without a result"))),
                }
            }
            (Phase::Done, _) => continue,
            (Phase::Aborted, Some(AbortReason::MixedContributors { .. }))
                if holds_result(r) && collective != Collective::Bcast =>
            {
                if !crashed_during {
                    return Err(fail(format!(
                        "rank {r} refused mixed segments in a run where no rank crashed during it"
                    )));
                }
                refused_mixed = true;
                None
            }
            (phase, reason) => {
                return Err(fail(format!(
                    "Termination: live rank {r} ended {phase:?} ({reason:?})"
                )))
            }
        };
        if let Some(result) = &ending {
            if collective == Collective::Bcast {
                if result.as_slice() != &inputs[..len] {
                    return Err(fail(format!("rank {r} did not get rank 0's vector")));
                }
            } else {
                let counts = counts_per_rank(result, n as usize)
                    .map_err(|why| fail(format!("Whole vector: rank {r}: {why}")))?;
                if let Some(missing) =
                    (0..n).find(|&q| counts[q as usize] != 1.0 && live.contains(&q))
                {
                    return Err(fail(format!(
                        "Validity: rank {r}'s result leaves out live rank {missing}"
                    )));
                }
                dead_counted |= (0..n).any(|q| counts[q as usize] == 1.0 && !live.contains(&q));
            }
        }
        match &first {
            None => first = Some((r, ending)),
            Some((q, theirs)) if collective == Collective::Allreduce && *theirs != ending => {
                return Err(fail(format!(
                    "Agreement: ranks {q} and {r} ended differently ({} and {})",
                    if theirs.is_some() {
                        "a result"
                    } else {
                        "an error"
                    },
                    if ending.is_some() {
                        "a result"
                    } else {
                        "an error"
                    },
                )))
            }
            Some(_) => {}
        }
    }
    Ok(SegmentsRun {
        report,
        refused_mixed,
        dead_counted,
    })
}

/// Aggregate of many checked seeds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentsSummary {
    /// Cases run.
    pub cases: u64,
    /// Cases with a crash during the operation.
    pub crashed_during: u64,
    /// Cases whose result holders refused mixed segments.
    pub refused_mixed: u64,
    /// Cases whose result counts a rank that crashed.
    pub dead_counted: u64,
}

/// Which family [`check_segments_seeds`] draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drawn {
    /// FTCO's three collectives.
    Ftco,
    /// The corrected reduce.
    CorrectedReduce,
}

/// Checks seeds `first..first + count` of `family` with N up to `max_n`; `accept_mixed` plants
/// the bug. Stops at the first violation.
pub fn check_segments_seeds(
    family: Drawn,
    (first, count): (u64, u64),
    max_n: u32,
    accept_mixed: bool,
) -> Result<SegmentsSummary, SegmentsViolation> {
    let mut summary = SegmentsSummary::default();
    for seed in first..first.saturating_add(count) {
        let drawn = match family {
            Drawn::Ftco => SegmentsCase::random_ftco(seed, max_n),
            Drawn::CorrectedReduce => SegmentsCase::random_corrected_reduce(seed, max_n),
        };
        let case = SegmentsCase {
            accept_mixed,
            ..drawn
        };
        let run = check_segments_case(&case)?;
        summary.cases += 1;
        summary.crashed_during += u64::from(run.report.crashes.iter().any(|c| c.at.0 > 0));
        summary.refused_mixed += u64::from(run.refused_mixed);
        summary.dead_counted += u64::from(run.dead_counted);
    }
    Ok(summary)
}
