//! The verdict of a real job from its ranks' reports: what exits non-zero.

use super::*;

const N: u32 = 4;

/// An era-agree job of `ops` agreements over inputs of ones (each rank contributes 1).
fn agreement_job(ops: u64) -> BuiltinJob {
    BuiltinJob {
        algo: "era-agree".into(),
        op: ReduceOp::Sum,
        input: InputKind::Ones,
        len: 1,
        dtype: Dtype::F64,
        seed: 1,
        ops,
        rounds: 1,
        expected: Expected::SurvivorsAggregate,
        eps: None,
        uniform: false,
    }
}

fn report(op: u64, ok: bool, value: f64, digest: u64) -> OpReport {
    OpReport {
        op,
        ok,
        value: if ok { vec![value] } else { Vec::new() },
        len: u64::from(ok),
        digest,
        failed: Vec::new(),
        nanos: 1000,
        messages: 1,
    }
}

fn outcome(reports: Vec<Vec<OpReport>>, failures: Vec<FailureRecord>) -> LiveOutcome {
    LiveOutcome {
        n: N,
        transport: TransportKind::Tcp,
        launch: "local",
        hosts: 1,
        wall_s: 0.1,
        spawn_s: 0.01,
        wireup_s: Some(0.02),
        failures,
        reports,
        timings: Vec::new(),
        pss_kb: Vec::new(),
        launcher_pss_kb: 0,
        timed_out: false,
        unfinished: 0,
    }
}

fn killed(rank: u32) -> FailureRecord {
    FailureRecord {
        rank,
        cause: FailureCause::Exited,
        how: "killed by signal 9".into(),
        at_s: 0.05,
        gave_up: false,
    }
}

/// Rank `rank` exited with an error of its own.
fn gave_up(rank: u32) -> FailureRecord {
    FailureRecord {
        how: "exited with status 3".into(),
        gave_up: true,
        ..killed(rank)
    }
}

#[test]
fn a_clean_job_is_exact_consistent_and_not_failed() {
    let reports = (0..N).map(|_| vec![report(0, true, 4.0, 7)]).collect();
    let json = outcome(reports, Vec::new()).builtin_report(&agreement_job(1));
    assert!(json.exact && json.consistent, "{json:?}");
    assert_eq!((json.wrong(), json.failed_ops()), (None, None));
}

#[test]
fn agreements_naming_different_sets_of_one_size_are_inconsistent() {
    // Rank 3 died; ranks 0 and 1 agreed on {0, 1, 2}, rank 2 on {0, 2, 3}: three
    // contributors each, two different sets.
    let reports = vec![
        vec![report(0, true, 3.0, 11)],
        vec![report(0, true, 3.0, 11)],
        vec![report(0, true, 3.0, 12)],
        Vec::new(),
    ];
    let json = outcome(reports, vec![killed(3)]).builtin_report(&agreement_job(1));
    assert!(!json.consistent, "{json:?}");
    assert!(json.wrong().is_some(), "{json:?}");
}

#[test]
fn a_decision_that_only_ranks_which_then_died_returned_may_differ_from_the_survivors() {
    // 002's footnote 1: ranks 0 and 1 decided {0, 1, 2, 3} and died before the decision
    // reached ranks 2 and 3, which then decided {2, 3} between themselves.
    let reports = vec![
        vec![report(0, true, 4.0, 11)],
        vec![report(0, true, 4.0, 11)],
        vec![report(0, true, 2.0, 12)],
        vec![report(0, true, 2.0, 12)],
    ];
    let failures = vec![killed(0), killed(1)];
    let json = outcome(reports.clone(), failures.clone()).builtin_report(&agreement_job(1));
    assert!(json.consistent && json.exact, "{json:?}");
    assert_eq!((json.wrong(), json.dying_differed()), (None, 1));
    // The other collectives promise their result to a rank that dies after returning it.
    let uniform = BuiltinJob {
        uniform: true,
        ..agreement_job(1)
    };
    let json = outcome(reports, failures).builtin_report(&uniform);
    assert!(!json.consistent && json.wrong().is_some(), "{json:?}");
}

#[test]
fn survivors_that_decided_differently_disagree_even_beside_dying_ranks() {
    let reports = vec![
        vec![report(0, true, 4.0, 11)],
        vec![report(0, true, 3.0, 13)],
        vec![report(0, true, 3.0, 12)],
        vec![report(0, true, 3.0, 12)],
    ];
    let json = outcome(reports, vec![killed(0)]).builtin_report(&agreement_job(1));
    assert!(!json.consistent && json.wrong().is_some(), "{json:?}");
}

#[test]
fn an_invalid_decision_fails_the_job_even_when_its_rank_is_killed_right_after() {
    // Rank 0 found its decision invalid, reported it as -1 contributors and was killed
    // before its error exit; the survivors agreed on {1, 2, 3}.
    let reports = vec![
        vec![report(0, true, -1.0, 11)],
        vec![report(0, true, 3.0, 12)],
        vec![report(0, true, 3.0, 12)],
        vec![report(0, true, 3.0, 12)],
    ];
    let json = outcome(reports, vec![killed(0)]).builtin_report(&agreement_job(1));
    assert!(!json.exact && json.wrong().is_some(), "{json:?}");
}

#[test]
fn an_operation_some_survivors_completed_and_others_failed_is_inconsistent_and_fails() {
    let reports = vec![
        Vec::new(),
        vec![report(0, true, 3.0, 11)],
        vec![report(0, false, 0.0, 0)],
        vec![report(0, true, 3.0, 11)],
    ];
    let json = outcome(reports, vec![killed(0)]).builtin_report(&agreement_job(1));
    assert!(!json.consistent && !json.exact, "{json:?}");
    let why = json
        .failed_ops()
        .expect("a failed operation is a failed job");
    assert!(why.contains("2 completed, 1 ended in an error"), "{why}");
}

#[test]
fn a_job_that_stopped_early_is_not_exact_and_fails() {
    // Every survivor completed the first operation exactly and stopped.
    let reports = vec![
        vec![report(0, true, 3.0, 11)],
        vec![report(0, true, 3.0, 11)],
        vec![report(0, true, 3.0, 11)],
        Vec::new(),
    ];
    let json = outcome(reports, vec![killed(3)]).builtin_report(&agreement_job(3));
    assert!(!json.exact, "{json:?}");
    let why = json
        .failed_ops()
        .expect("operations missing at survivors fail the job");
    assert!(why.starts_with("2 of 3 operations"), "{why}");
}

#[test]
fn a_rank_that_reported_an_error_and_exited_fails_the_job_even_if_the_others_completed() {
    // Rank 3 completed; ranks 0 to 2 reported their operation failed and exited with an
    // error: not crashes the algorithm tolerated.
    let mut reports: Vec<Vec<OpReport>> = (0..3).map(|_| vec![report(0, false, 0.0, 0)]).collect();
    reports.push(vec![report(0, true, 1.0, 11)]);
    let failures = (0..3).map(gave_up).collect();
    let json = outcome(reports, failures).builtin_report(&agreement_job(1));
    let why = json.failed_ops().expect("a rank's error is a failed job");
    assert!(why.contains("3 ended in an error"), "{why}");
}

#[test]
fn a_rank_that_exited_with_an_error_before_reporting_fails_the_job() {
    // Rank 3 completed the first of two operations, then exited with an error unreported.
    let mut reports: Vec<Vec<OpReport>> = (0..3)
        .map(|_| vec![report(0, true, 4.0, 7), report(1, true, 4.0, 7)])
        .collect();
    reports.push(vec![report(0, true, 4.0, 7)]);
    let json = outcome(reports, vec![gave_up(3)]).builtin_report(&agreement_job(2));
    let why = json.failed_ops().expect("a rank's error is a failed job");
    assert!(why.contains("operation 1"), "{why}");
    // The same silence after a kill is a crash the agreement tolerates.
    let mut reports: Vec<Vec<OpReport>> = (0..3)
        .map(|_| vec![report(0, true, 3.0, 7), report(1, true, 3.0, 7)])
        .collect();
    reports.push(vec![report(0, true, 3.0, 7)]);
    let json = outcome(reports, vec![killed(3)]).builtin_report(&agreement_job(2));
    assert_eq!(json.failed_ops(), None, "{json:?}");
}

#[test]
fn a_job_whose_every_rank_failed_fails_without_calling_its_results_wrong() {
    // Every rank completed the first of three agreements, then all four died (the last ones
    // fenced by the launcher): nothing came back that was wrong, and nobody was left.
    let reports = (0..N).map(|_| vec![report(0, true, 4.0, 7)]).collect();
    let failures = (0..N).map(killed).collect();
    let json = outcome(reports, failures).builtin_report(&agreement_job(3));
    assert_eq!(json.wrong(), None, "{json:?}");
    assert!(!json.exact, "{json:?}");
    let why = json.failed_ops().expect("nobody completed the job");
    assert!(
        why.starts_with("no rank survived: 2 of 3 operations") && why.contains("operation 1"),
        "{why}"
    );
    // A result no subset of the inputs gives is still wrong, whatever else went missing.
    let reports = (0..N).map(|_| vec![report(0, true, 9.0, 7)]).collect();
    let failures = (0..N).map(killed).collect();
    let json = outcome(reports, failures).builtin_report(&agreement_job(3));
    let why = json.wrong().expect("9 is no sum of four ones");
    assert!(why.contains("differs from every admissible"), "{why}");
}

#[test]
fn results_past_the_enumerated_failures_are_reported_as_not_judged() {
    // Twelve ranks, eleven of them killed after the first of two agreements: more failures than
    // the launcher enumerates admissible sums for, so the survivor's 12 can be neither called
    // right nor wrong, and the report says so.
    let n = 12;
    let mut reports: Vec<Vec<OpReport>> = (0..n).map(|_| vec![report(0, true, 12.0, 7)]).collect();
    reports[11].push(report(1, true, 1.0, 9));
    let failures = (0..11).map(killed).collect();
    let mut twelve = outcome(reports, failures);
    twelve.n = n;
    let json = twelve.builtin_report(&agreement_job(2));
    assert_eq!(json.wrong(), None, "{json:?}");
    let why = json.unjudged.as_deref().expect("not enumerated");
    assert!(
        why.starts_with("11 ranks failed, more than the 10"),
        "{why}"
    );
    // Within the enumerated failures the verdict judges, and says nothing of the kind.
    let reports = (0..N).map(|_| vec![report(0, true, 4.0, 7)]).collect();
    let json = outcome(reports, vec![killed(3)]).builtin_report(&agreement_job(1));
    assert_eq!(json.unjudged, None, "{json:?}");
}

#[test]
fn long_vectors_are_judged_against_as_many_failures_as_the_budget_allows() {
    // 2^k candidates of n inputs of len elements within 2^28 generated elements, 3 to 10.
    assert_eq!(max_streamed_failures(8, 10_000), 10);
    assert_eq!(max_streamed_failures(8, 1 << 20), 5);
    assert_eq!(max_streamed_failures(8, 3_000_000), 3);
    assert_eq!(max_streamed_failures(64, 16 << 20), 3);
}

/// A ring allreduce job of one operation over one element per rank.
fn ring_job(op: ReduceOp, input: InputKind) -> BuiltinJob {
    BuiltinJob {
        algo: "ring".into(),
        op,
        input,
        expected: Expected::Aggregate,
        ..agreement_job(1)
    }
}

/// Every rank returns `value`.
fn judge(job: &BuiltinJob, value: f64) -> LiveJson {
    let reports = (0..N).map(|_| vec![report(0, true, value, 7)]).collect();
    outcome(reports, Vec::new()).builtin_report(job)
}

#[test]
fn an_average_that_is_the_sum_is_wrong_and_one_rounded_differently_is_not() {
    // Ones: the average is 1, and a path that forgot to divide returns the sum, 4.
    let job = ring_job(ReduceOp::Average, InputKind::Ones);
    assert!(judge(&job, 4.0).wrong().is_some());
    assert_eq!(judge(&job, 1.0).wrong(), None);
    // One rounding away (a product by 1/n where the launcher divides) is right, not exact.
    let rounded = judge(&job, 1.0 + f64::EPSILON);
    assert_eq!(rounded.wrong(), None, "{rounded:?}");
    assert!(!rounded.exact);
}

#[test]
fn sums_of_uniform_inputs_are_judged_within_their_rounding() {
    let job = ring_job(ReduceOp::Sum, InputKind::Uniform);
    let inputs = generate_inputs(InputKind::Uniform, N, 1, job.seed);
    let sum: f64 = inputs.iter().sum();
    assert_eq!(judge(&job, sum).wrong(), None);
    // Summed in another order: a few units in the last place.
    assert_eq!(judge(&job, sum * (1.0 + 3.0 * f64::EPSILON)).wrong(), None);
    // A lost input and a doubled one are wrong answers, not rounding.
    assert!(judge(&job, sum - inputs[2]).wrong().is_some());
    assert!(judge(&job, sum + inputs[0]).wrong().is_some());
}

#[test]
fn integer_products_and_bitwise_results_are_judged_in_their_type() {
    // Four ranks of ones: the xor is 0, the and 1; as u64 both exact, and 1 ulp is wrong.
    let xor = BuiltinJob {
        dtype: Dtype::U64,
        ..ring_job(ReduceOp::BitXor, InputKind::Ones)
    };
    assert_eq!(judge(&xor, 0.0).wrong(), None);
    assert!(judge(&xor, 1.0).wrong().is_some());
    let and = BuiltinJob {
        dtype: Dtype::I32,
        ..ring_job(ReduceOp::BitAnd, InputKind::Ones)
    };
    assert!(judge(&and, 1.0).exact);
    assert!(judge(&and, 0.0).wrong().is_some());
    // A wrapped product: rank ids 0..4 multiply to 0, whatever the width.
    let prod = BuiltinJob {
        dtype: Dtype::U32,
        ..ring_job(ReduceOp::Prod, InputKind::RankId)
    };
    assert!(judge(&prod, 0.0).exact);
    assert!(judge(&prod, 6.0).wrong().is_some());
}
