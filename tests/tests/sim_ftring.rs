//! The fault-tolerant ring allreduce in the simulator: the semantics checker on 10,000 random
//! crash schedules over vectors of at least four segments, with attempts in rings and in
//! corrected trees, a planted-bug control for each, and the price of tolerance in the cost
//! model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_algos::ftring::CommitRule;
use ftcoll_runtime::check::ftring::{check_ft_ring_case, check_ft_ring_seeds, FtRingCase};

/// 10,000 schedules: N up to 24, up to N − 1 crashes before, during and after the rings and
/// the agreements; every survivor returns the same exact sum over a set holding every survivor.
#[test]
fn checker_passes_ten_thousand_random_crash_schedules() {
    let summary = check_ft_ring_seeds(0, 10_000, 24, CommitRule::Agreed, false)
        .unwrap_or_else(|v| panic!("{v}"));
    assert_eq!(summary.cases, 10_000);
    assert!(summary.with_failures > 6_000, "{summary:?}");
    // Both outcomes of a crash during the operation happen: retried without the rank, and
    // counted because the ring had completed everywhere.
    assert!(summary.retried > 2_000, "{summary:?}");
    assert!(summary.dead_counted > 100, "{summary:?}");
}

/// The control: a rank that returns when its own ring completes, before the agreement, is
/// caught: the survivors that did not complete retry without a rank the early ones counted,
/// and wait for them in vain (or, where they could finish, return another vector).
#[test]
fn checker_catches_the_planted_early_return() {
    let caught = check_ft_ring_seeds(0, 2_000, 24, CommitRule::LocalCompletion, false);
    let violation = caught.expect_err("the planted bug went unnoticed");
    assert!(
        ["Agreement", "Validity", "Termination"]
            .iter()
            .any(|p| violation.what.starts_with(p)),
        "{violation}"
    );
}

/// The same 10,000 schedules over attempts in corrected trees (`ft-corrected`): segments that
/// tolerate 1 to 3 failures each, an attempt run again whenever its segments disagree on a
/// rank that died during it.
#[test]
fn corrected_attempts_pass_ten_thousand_random_crash_schedules() {
    let summary = check_ft_ring_seeds(0, 10_000, 24, CommitRule::Agreed, true)
        .unwrap_or_else(|v| panic!("{v}"));
    assert_eq!(summary.cases, 10_000);
    assert!(summary.with_failures > 6_000, "{summary:?}");
    assert!(summary.retried > 1_000, "{summary:?}");
    // A rank that died after its input reached every segment is counted, without a retry.
    assert!(summary.dead_counted > 100, "{summary:?}");
}

/// The control of the corrected attempts: a rank that takes an attempt as complete although
/// some of its segments left out a rank that others counted returns a vector that mixes two
/// contributor sets, and the checker says so.
#[test]
fn checker_catches_corrected_attempts_that_mix_segments() {
    let caught = check_ft_ring_seeds(0, 2_000, 24, CommitRule::MixedSegments, true);
    let violation = caught.expect_err("the planted bug went unnoticed");
    assert!(violation.what.starts_with("Validity"), "{violation}");
}

/// Seeds replay exactly.
#[test]
fn a_seed_replays_the_same_trace() {
    let case = FtRingCase::random(2626, 24);
    let a = check_ft_ring_case(&case).unwrap();
    let b = check_ft_ring_case(&case).unwrap();
    assert_eq!(a.report.trace_hash, b.report.trace_hash);
}
