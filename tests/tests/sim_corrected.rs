//! Corrected-tree reduce, broadcast and allreduce (001) in the simulator: the paper's worked
//! example, the message-count formulas, and the semantics checker on thousands of random fault
//! schedules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_algos::corrected::{Correction, FailureInfo};
use ftcoll_algos::{OpId, Protocol, Rank, ReduceOp};
use ftcoll_runtime::check::corrected::{
    check_case, check_seeds, check_timed_seeds, CheckCase, CheckedOp, ScheduledFailure,
};
use ftcoll_runtime::faults::{FaultSpec, FaultTime, KillTime};
use ftcoll_runtime::job::{Algorithm, JobSpec};
use ftcoll_runtime::sim::{SimConfig, Simulation};

/// 001 Sec. 4.3: seven ranks sum their ids with f = 1 while rank 1 has failed before the
/// operation. Up-correction pairs {3,4} and {5,6}; rank 2 sends 2 + 7 + 11 = 20 to the root,
/// which adds its own 0.
#[test]
fn the_papers_worked_example_sums_to_twenty() {
    for info in [
        FailureInfo::List,
        FailureInfo::CountAndBit,
        FailureInfo::Bit,
    ] {
        let mut spec = JobSpec::new(Algorithm::CorrectedReduce, 7);
        spec.tolerate = 1;
        spec.failure_info = info;
        let ranks: Vec<_> = (0..7)
            .map(|r| spec.corrected_reduce(Rank(r), OpId(1)))
            .collect();
        let config = SimConfig {
            faults: vec![FaultSpec::Kill {
                rank: Rank(1),
                at: KillTime::At(FaultTime::Steps(0)),
            }],
            ..SimConfig::default()
        };
        let inputs = (0..7).map(f64::from).collect();
        let mut sim = Simulation::new(config, ranks, inputs, 1, ReduceOp::Sum).unwrap();
        sim.run();
        let root = &sim.ranks()[0];
        let mut result = Vec::new();
        root.estimate(&mut result);
        assert_eq!(result, [20.0], "{info:?}");
        assert_eq!(root.chosen_subtree(), Some(2), "the subtree without rank 1");
        if info == FailureInfo::List {
            assert_eq!(
                root.reported_failures(),
                &[1],
                "rank 2 could not hear from rank 1"
            );
        }
        let mut partial = Vec::new();
        sim.ranks()[4].estimate(&mut partial);
        assert_eq!(partial, [7.0], "rank 4 holds 3 + 4 after up-correction");
    }
}

#[test]
fn failure_free_message_counts_equal_the_formulas() {
    for n in 2..=40u32 {
        for tolerate in 0..=3u32.min(n - 2) {
            for correction in [
                Correction::Checked,
                Correction::Opportunistic { distance: 1 },
                Correction::Opportunistic { distance: 3 },
                Correction::Timed {
                    gap: ftcoll_algos::time::Duration(40),
                },
            ] {
                for op in [CheckedOp::Reduce, CheckedOp::Bcast, CheckedOp::Allreduce] {
                    let case = CheckCase {
                        op,
                        n,
                        tolerate,
                        info: FailureInfo::List,
                        correction,
                        failures: Vec::new(),
                        detect_delay: Some(0),
                        spread: 0,
                        seed: u64::from(n),
                    };
                    let outcome = check_case(&case).unwrap();
                    assert_eq!(
                        outcome.report.messages,
                        case.failure_free_messages(),
                        "{case:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn theorem_five_counts_for_the_papers_shapes() {
    // f(f+1) floor((n-1)/(f+1)) + a(a-1) + n - 1, with a = ((n-1) mod (f+1)) + 1.
    let count = |n: u64, f: u64| {
        let a = (n - 1) % (f + 1) + 1;
        f * (f + 1) * ((n - 1) / (f + 1)) + a * (a - 1) + n - 1
    };
    for (n, f) in [(7u32, 1u32), (64, 2), (100, 3), (1000, 5)] {
        let spec = {
            let mut s = JobSpec::new(Algorithm::CorrectedReduce, n);
            s.tolerate = f;
            s
        };
        let layout = spec.corrected_reduce(Rank(0), OpId(1)).layout();
        assert_eq!(layout.reduce_messages(), count(u64::from(n), u64::from(f)));
    }
}

#[test]
fn allreduce_semantics_hold_on_ten_thousand_fault_schedules() {
    let summary = check_seeds(CheckedOp::Allreduce, 0, 10_000, 64).unwrap();
    assert_eq!(summary.cases, 10_000);
    assert!(summary.with_failures > 4_000, "{summary:?}");
    assert!(summary.in_operation > 1_000, "{summary:?}");
    assert!(
        summary.failed_included > 0,
        "no in-operation failure was ever counted: the schedules never hit mid-operation"
    );
}

#[test]
fn reduce_semantics_hold_on_ten_thousand_fault_schedules() {
    let summary = check_seeds(CheckedOp::Reduce, 1 << 32, 10_000, 64).unwrap();
    assert!(summary.in_operation > 2_000, "{summary:?}");
}

#[test]
fn broadcast_semantics_hold_on_ten_thousand_fault_schedules() {
    let summary = check_seeds(CheckedOp::Bcast, 2 << 32, 10_000, 64).unwrap();
    assert!(summary.with_failures > 4_000, "{summary:?}");
}

/// The checker is not vacuous: beyond f failures, schedules exist that it rejects.
#[test]
fn the_checker_catches_more_failures_than_tolerated() {
    // f = 1, and both children of the root fail after up-correction began but before the tree
    // phase reached the root: no subtree can report cleanly.
    let mut caught = 0;
    for at in 1..40 {
        let case = CheckCase {
            op: CheckedOp::Allreduce,
            n: 9,
            tolerate: 1,
            info: FailureInfo::CountAndBit,
            correction: Correction::Checked,
            failures: vec![
                ScheduledFailure { rank: 1, at },
                ScheduledFailure { rank: 2, at },
            ],
            detect_delay: Some(5),
            spread: 0,
            seed: at,
        };
        caught += usize::from(check_case(&case).is_err());
    }
    assert!(caught > 0, "two failures with f = 1 never broke a property");
}

#[test]
fn opportunistic_correction_bridges_a_failed_inner_node() {
    // Rank 1 is an inner node of subtree 1 (children 4 and 7 with f = 2); its failure before
    // the broadcast leaves them to correction from their ring neighbours.
    let case = CheckCase {
        op: CheckedOp::Bcast,
        n: 16,
        tolerate: 2,
        info: FailureInfo::Bit,
        correction: Correction::Opportunistic { distance: 1 },
        failures: vec![ScheduledFailure { rank: 1, at: 0 }],
        detect_delay: Some(0),
        spread: 0,
        seed: 3,
    };
    let outcome = check_case(&case).unwrap();
    assert_eq!(outcome.report.completed, 15);
}

/// The root of an allreduce dies at every instant, during its broadcast too (outside 5.1's
/// model, which lets candidates fail only before the operation): ranks that had not received
/// its result used to move to the next candidate, which had delivered it and never ran the
/// next attempt, and 61 of 63 survivors waited forever. Now every survivor ends with the
/// result some rank already returned.
#[test]
fn a_root_dying_while_it_broadcasts_leaves_no_survivor_waiting() {
    for (n, tolerate) in [(64, 1), (37, 2)] {
        for at in 0..160 {
            let mut spec = JobSpec::new(Algorithm::CorrectedAllreduce, n);
            spec.input = ftcoll_runtime::sim::InputKind::Integers;
            spec.tolerate = tolerate;
            let config = SimConfig {
                faults: vec![FaultSpec::Kill {
                    rank: Rank(0),
                    at: KillTime::At(FaultTime::Steps(at)),
                }],
                ..SimConfig::default()
            };
            let report = ftcoll_runtime::job::simulate(&spec, config).unwrap();
            let what = format!("n={n} f={tolerate} root killed at {at}: {report:?}");
            assert_eq!(report.incomplete, 0, "{what}");
            assert_eq!(report.live_aborted, 0, "{what}");
            assert_eq!(report.completed, n - 1, "{what}");
            assert_eq!(report.result_spread, Some(0.0), "{what}");
            assert_eq!(report.admissible_error, Some(0.0), "{what}");
        }
    }
}

#[test]
fn timed_correction_delivers_everywhere_without_a_detector_on_five_thousand_schedules() {
    let summary = check_timed_seeds(3 << 32, 5_000, 64).unwrap();
    assert_eq!(summary.cases, 5_000);
    assert!(summary.with_failures > 4_000, "{summary:?}");
    assert!(summary.in_operation > 1_500, "{summary:?}");
}

/// The control of the timed checker: the detector-based checked correction, given the same
/// schedules with no detector, leaves ranks behind dead neighbours without the value, and the
/// checker says so. Timed correction passes every one of them.
#[test]
fn without_a_detector_only_timed_correction_bridges_dead_neighbours() {
    let mut stranded = 0;
    for seed in 0..200 {
        let timed = CheckCase::random_timed(seed, 32);
        check_case(&timed).unwrap();
        let detector_based = CheckCase {
            correction: Correction::Checked,
            ..timed
        };
        if let Err(violation) = check_case(&detector_based) {
            // It waits for a notice that never comes: ranks behind dead neighbours never
            // receive, or ranks with the value never finish correcting.
            assert!(
                violation.what.contains("did not deliver")
                    || violation.what.contains("still owes corrections"),
                "{violation}"
            );
            stranded += 1;
        }
    }
    assert!(
        stranded > 20,
        "checked correction without a detector stranded {stranded} of 200"
    );
}

#[test]
fn timed_correction_reaches_the_subtree_of_a_dead_inner_node_with_no_detector() {
    // Rank 1 is an inner node of subtree 1 (children 4 and 7 with f = 2); nobody is ever told
    // it died. Its children hear from their ring neighbours, which pass it after the gap.
    let case = CheckCase {
        op: CheckedOp::Bcast,
        n: 16,
        tolerate: 2,
        info: FailureInfo::Bit,
        correction: Correction::Timed {
            gap: ftcoll_algos::time::Duration(40),
        },
        failures: vec![ScheduledFailure { rank: 1, at: 0 }],
        detect_delay: None,
        spread: 0,
        seed: 3,
    };
    let outcome = check_case(&case).unwrap();
    assert_eq!(outcome.report.completed, 15);
    // Rank 1's ring neighbours pass it with one more correction each; rank 1 itself sends
    // nothing, so the run costs at most a few messages more than a failure-free one.
    let free = CheckCase {
        failures: Vec::new(),
        ..case.clone()
    };
    let free = check_case(&free).unwrap().report.messages;
    assert!(
        outcome.report.messages <= free + 4,
        "{} messages against {free} failure-free",
        outcome.report.messages
    );
}
