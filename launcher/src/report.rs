//! The JSON report of a run. Keys are stable: later versions add keys, never rename them. Units
//! are last in every name. Non-finite numbers (an error with no completed rank) are `null`.

use ftcoll_algos::registry::Kind;
use ftcoll_runtime::job::JobSpec;
use ftcoll_runtime::sim::{CrashCause, SimReport};
use serde::Serialize;

/// One failure of the run.
#[derive(Debug, Serialize)]
pub struct FailureJson {
    /// The failed rank.
    pub rank: u32,
    /// Who detected it: `detector` (the simulator's failure-detector model).
    pub detected_by: &'static str,
    /// How: `scripted` kill, or `fenced` after a timeout suspicion.
    pub how: &'static str,
    /// When it crashed, in simulator steps.
    pub at_steps: u64,
    /// When survivors were told, in steps (null if the run ended first).
    pub noticed_at_steps: Option<u64>,
}

/// The report written by `--json`.
#[derive(Debug, Serialize)]
pub struct RunJson {
    /// Schema version of this layout.
    pub schema_version: u32,
    /// Ranks.
    pub n: u32,
    /// Algorithm name.
    pub algo: String,
    /// Reduction operator.
    pub op: String,
    /// `sim` for simulated runs.
    pub transport: &'static str,
    /// The seed.
    pub seed: u64,
    /// Most rounds any rank completed.
    pub rounds: u32,
    /// Frames sent.
    pub messages: u64,
    /// Frames delivered to protocols.
    pub messages_delivered: u64,
    /// Frames lost to random loss, cut links, and dead receivers.
    pub messages_dropped: u64,
    /// Frames rejected as malformed or unexpected.
    pub messages_rejected: u64,
    /// Bit flips applied to messages and to state.
    pub bit_flips: u64,
    /// Virtual time at the end, in steps.
    pub sim_time_steps: u64,
    /// Max relative error over live ranks that completed.
    pub max_rel_error: Option<f64>,
    /// Error against survivors plus any subset of crashed ranks (runs with crashes).
    pub admissible_error: Option<f64>,
    /// Live ranks that completed.
    pub ranks_completed: u32,
    /// Ranks that aborted.
    pub ranks_aborted: u32,
    /// Live ranks that aborted: the operation ended in an error at a survivor.
    pub ranks_aborted_live: u32,
    /// Live ranks that neither completed nor aborted.
    pub ranks_incomplete: u32,
    /// Largest relative difference between two live ranks' results.
    pub result_spread: Option<f64>,
    /// Whether every live rank ended the same way (all completed, or all aborted) and the
    /// results agree (within eps for the approximate algorithms, to rounding for the others).
    pub consistent: bool,
    /// Why the run's outcome cannot be trusted (a hang, an error at a survivor, disagreeing
    /// or wrong results), if it cannot; the run then exits non-zero.
    pub wrong: Option<String>,
    /// Round at which the oracle stopped an approximate algorithm.
    pub oracle_stop_round: Option<u32>,
    /// The run hit the simulator's event or time bound.
    pub truncated: bool,
    /// Simulator events processed.
    pub events: u64,
    /// Simulator events per wall-clock second.
    pub events_per_s: f64,
    /// Trace hash, hex.
    pub trace_hash: String,
    /// Failures.
    pub failures: Vec<FailureJson>,
    /// Wall-clock seconds of the run.
    pub wall_s: f64,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl RunJson {
    /// The report of a simulated run.
    pub fn from_sim(report: &SimReport, spec: &JobSpec) -> RunJson {
        let verdict = sim_verdict(spec, report);
        RunJson {
            schema_version: 1,
            n: report.n,
            algo: spec.algo.name().to_string(),
            op: spec.op.name().to_string(),
            transport: "sim",
            seed: report.seed,
            rounds: report.rounds,
            messages: report.messages,
            messages_delivered: report.delivered,
            messages_dropped: report.dropped_loss + report.dropped_cut + report.dropped_dead,
            messages_rejected: report.rejected,
            bit_flips: report.message_flips + report.state_flips,
            sim_time_steps: report.sim_time_steps,
            max_rel_error: finite(report.max_rel_error),
            admissible_error: report.admissible_error.and_then(finite),
            ranks_completed: report.completed,
            ranks_aborted: report.aborted,
            ranks_aborted_live: report.live_aborted,
            ranks_incomplete: report.incomplete,
            result_spread: report.result_spread.and_then(finite),
            consistent: verdict.consistent,
            wrong: verdict.wrong,
            oracle_stop_round: report.oracle_stop_round,
            truncated: report.truncated,
            events: report.events,
            events_per_s: report.events as f64 / report.wall_s.max(1e-9),
            trace_hash: format!("{:016x}", report.trace_hash),
            failures: report
                .crashes
                .iter()
                .map(|c| FailureJson {
                    rank: c.rank.0,
                    detected_by: "detector",
                    how: match c.cause {
                        CrashCause::Scripted => "scripted",
                        CrashCause::Fenced => "fenced",
                    },
                    at_steps: c.at.0,
                    noticed_at_steps: c.noticed_at.map(|t| t.0),
                })
                .collect(),
            wall_s: report.wall_s,
        }
    }
}

/// Relative difference that rounding may leave between results of an exact algorithm (sums
/// in different orders).
const ROUNDING: f64 = 1e-12;

/// What a simulated run's outcome says.
#[derive(Debug, Clone, PartialEq)]
pub struct SimVerdict {
    /// Live ranks ended the same way, with agreeing results.
    pub consistent: bool,
    /// Why the outcome cannot be trusted, if it cannot.
    pub wrong: Option<String>,
}

/// Judges a simulated run: every live rank must end, all the same way; an error at a survivor
/// means the faults lay outside what the algorithm tolerates (a typed error, not a result);
/// results must agree and equal the expected value (an admissible one after crashes) to
/// rounding, or within eps for the approximate algorithms.
pub fn sim_verdict(spec: &JobSpec, report: &SimReport) -> SimVerdict {
    let approximate = match spec.algo.kind() {
        Kind::RecursiveDoubling { approximate } => approximate,
        Kind::Gossip { .. } => true,
        Kind::Direct
        | Kind::Ring
        | Kind::HalvingDoubling
        | Kind::FtRing
        | Kind::FtCorrected
        | Kind::Chain(_)
        | Kind::Corrected(_)
        | Kind::Ftco(_)
        | Kind::Agreement => false,
    };
    let tolerance = if approximate {
        spec.gossip_eps()
    } else {
        ROUNDING
    };
    let mixed = report.completed > 0 && report.live_aborted > 0;
    // ARDB stopped early holds averages of 2^k inputs after k exchanges, one per rank: its
    // accuracy target is the watched rank's (000 Sec. 6.3; Fig. 12 judges at the root), and
    // the oracle stopped it when that rank was within eps. The others' errors are reported,
    // not judged.
    let sampled = matches!(
        spec.algo.kind(),
        Kind::RecursiveDoubling { approximate: true }
    ) && report.oracle_stop_round.is_some()
        && !report.stopped_by_budget;
    // Approximate results differ by up to eps from the aggregate each: twice that between two.
    let spread_ok = sampled
        || report.result_spread.is_none_or(|s| {
            s <= if approximate {
                2.0 * tolerance
            } else {
                ROUNDING
            }
        });
    let consistent = !mixed && spread_ok && report.incomplete == 0;
    let error = match report.admissible_error {
        Some(admissible) => admissible.min(report.max_rel_error),
        None => report.max_rel_error,
    };
    let judgeable =
        !sampled && (report.crashes.is_empty() || report.admissible_error.is_some() || approximate);
    let wrong = if report.incomplete > 0 {
        Some(format!(
            "{} live ranks neither completed nor aborted: the operation hangs there{}",
            report.incomplete,
            if report.truncated {
                " (the run hit the simulator's event or time bound)"
            } else {
                ""
            }
        ))
    } else if mixed {
        Some(format!(
            "live ranks ended differently: {} completed, {} aborted",
            report.completed, report.live_aborted
        ))
    } else if report.live_aborted > 0 {
        Some(format!(
            "the operation failed at every survivor ({} aborted): the faults lie outside what {} tolerates",
            report.live_aborted, spec.algo
        ))
    } else if !spread_ok {
        Some(format!(
            "live ranks returned different results (largest relative difference {:.3e})",
            report.result_spread.unwrap_or(f64::NAN)
        ))
    } else if judgeable && (error.is_nan() || error > tolerance) {
        Some(if approximate {
            format!("a result is not within eps = {tolerance:e} (max rel. error {error:.3e})")
        } else {
            format!("a result differs from every admissible value (max rel. error {error:.3e})")
        })
    } else {
        None
    };
    SimVerdict { consistent, wrong }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ftcoll_algos::registry::Algorithm;

    fn clean(n: u32) -> SimReport {
        SimReport {
            n,
            completed: n,
            result_spread: Some(0.0),
            ..SimReport::default()
        }
    }

    fn judge(algo: Algorithm, report: &SimReport) -> SimVerdict {
        sim_verdict(&JobSpec::new(algo, report.n), report)
    }

    #[test]
    fn a_clean_run_is_trusted() {
        let verdict = judge(Algorithm::Rdb, &clean(8));
        assert_eq!(
            verdict,
            SimVerdict {
                consistent: true,
                wrong: None
            }
        );
    }

    #[test]
    fn a_hang_an_error_and_mixed_outcomes_are_not() {
        let hang = SimReport {
            completed: 2,
            incomplete: 6,
            ..clean(8)
        };
        let why = judge(Algorithm::CorrectedAllreduce, &hang).wrong.unwrap();
        assert!(
            why.contains("6 live ranks neither completed nor aborted"),
            "{why}"
        );
        let mixed = SimReport {
            completed: 2,
            aborted: 6,
            live_aborted: 6,
            ..clean(8)
        };
        let verdict = judge(Algorithm::CorrectedBcast, &mixed);
        assert!(!verdict.consistent);
        assert!(verdict.wrong.unwrap().contains("2 completed, 6 aborted"));
        let failed = SimReport {
            completed: 0,
            aborted: 7,
            live_aborted: 7,
            ..clean(8)
        };
        let why = judge(Algorithm::Rdb, &failed).wrong.unwrap();
        assert!(why.contains("outside what rdb tolerates"), "{why}");
    }

    #[test]
    fn ardb_is_judged_at_its_watched_rank_unless_its_budget_stopped_it() {
        let stopped_early = SimReport {
            result_spread: Some(0.1),
            max_rel_error: 0.097,
            oracle_stop_round: Some(10),
            ..clean(1 << 16)
        };
        assert_eq!(judge(Algorithm::Ardb, &stopped_early).wrong, None);
        let out_of_budget = SimReport {
            stopped_by_budget: true,
            ..stopped_early.clone()
        };
        assert!(judge(Algorithm::Ardb, &out_of_budget).wrong.is_some());
        // The same spread from an exact algorithm is a disagreement.
        assert!(judge(Algorithm::Rdb, &stopped_early).wrong.is_some());
    }

    #[test]
    fn disagreeing_or_wrong_results_are_not() {
        let spread = SimReport {
            result_spread: Some(0.05),
            ..clean(8)
        };
        let verdict = judge(Algorithm::FtcoAllreduce, &spread);
        assert!(!verdict.consistent && verdict.wrong.is_some());
        let wrong = SimReport {
            max_rel_error: 1e-3,
            ..clean(8)
        };
        assert!(judge(Algorithm::Rdb, &wrong).wrong.is_some());
        // After crashes an exact algorithm is judged against the admissible aggregates.
        let crashed = SimReport {
            max_rel_error: 0.1,
            admissible_error: Some(0.0),
            crashes: vec![ftcoll_runtime::sim::CrashRecord {
                rank: ftcoll_algos::Rank(3),
                at: ftcoll_algos::Time(5),
                cause: CrashCause::Scripted,
                noticed_at: None,
            }],
            ..clean(8)
        };
        assert_eq!(judge(Algorithm::CorrectedAllreduce, &crashed).wrong, None);
    }

    #[test]
    fn gossip_is_judged_against_its_eps() {
        let mut spec = JobSpec::new(Algorithm::Pf, 8);
        spec.eps = Some(1e-6);
        let close = SimReport {
            max_rel_error: 5e-7,
            result_spread: Some(9e-7),
            ..clean(8)
        };
        assert_eq!(sim_verdict(&spec, &close).wrong, None);
        let far = SimReport {
            max_rel_error: 1.5,
            result_spread: Some(1.5),
            ..clean(8)
        };
        assert!(sim_verdict(&spec, &far).wrong.is_some());
    }
}
