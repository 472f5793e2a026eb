//! The simulator's fault model and failure detectors, observed through recursive doubling.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_runtime::faults::FaultSpec;
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{CrashCause, DetectorModel, SimConfig, SimError};

fn faults(specs: &[&str]) -> Vec<FaultSpec> {
    specs
        .iter()
        .map(|s| ftcoll_launcher::text::parse_fault(s).unwrap())
        .collect()
}

#[test]
fn a_crash_is_noticed_after_the_detector_delay_and_partners_abort() {
    let config = SimConfig {
        faults: faults(&["kill:rank=6,at=13"]),
        detector: DetectorModel::Perfect { delay_steps: 7 },
        ..SimConfig::default()
    };
    let report = simulate(&JobSpec::new(Algorithm::Rdb, 16), config).unwrap();
    assert_eq!(report.crashes.len(), 1);
    let crash = report.crashes[0];
    assert_eq!(
        (crash.rank.0, crash.at.0, crash.cause),
        (6, 13, CrashCause::Scripted)
    );
    assert_eq!(crash.noticed_at.map(|t| t.0), Some(20));
    assert_eq!(report.aborted, 15, "every survivor fails the operation");
    assert_eq!(report.notices, 15);
}

#[test]
fn a_pre_operational_crash_leaves_the_rank_out() {
    let config = SimConfig {
        faults: faults(&["kill:rank=0"]),
        ..SimConfig::default()
    };
    let report = simulate(&JobSpec::new(Algorithm::Rdb, 8), config).unwrap();
    assert_eq!(report.crashes[0].at.0, 0);
    // Recursive doubling has no way around a failure (the gossip and tree algorithms exist for
    // that): every survivor is told and fails the operation rather than wait forever.
    assert_eq!(report.completed, 0);
    assert_eq!(report.aborted, 7);
    assert_eq!(report.incomplete, 0);
}

#[test]
fn the_timeout_detector_fences_a_stopped_rank_before_telling_anyone() {
    let config = SimConfig {
        faults: faults(&["stop:rank=3,at=5"]),
        detector: DetectorModel::Timeout {
            period_steps: 10,
            timeout_steps: 50,
        },
        ..SimConfig::default()
    };
    let report = simulate(&JobSpec::new(Algorithm::Rdb, 8), config).unwrap();
    assert_eq!(report.crashes.len(), 1);
    let fence = report.crashes[0];
    assert_eq!(fence.cause, CrashCause::Fenced);
    assert!(fence.at.0 >= 45 && fence.at.0 <= 55, "{fence:?}");
    assert_eq!(fence.noticed_at, Some(fence.at), "notice before the fence");
    assert!(report.aborted > 0);
}

#[test]
fn a_perfect_detector_never_reports_a_stopped_rank() {
    let config = SimConfig {
        faults: faults(&["stop:rank=3,at=5"]),
        ..SimConfig::default()
    };
    let report = simulate(&JobSpec::new(Algorithm::Rdb, 8), config).unwrap();
    assert!(report.crashes.is_empty());
    assert_eq!(report.notices, 0);
    assert!(report.incomplete > 0, "partners of a hung rank wait");
}

#[test]
fn a_node_failure_crashes_all_its_ranks() {
    let config = SimConfig {
        faults: faults(&["kill-node:node=1,at=0"]),
        ranks_per_node: 4,
        ..SimConfig::default()
    };
    let report = simulate(&JobSpec::new(Algorithm::Rdb, 16), config).unwrap();
    let ranks: Vec<u32> = report.crashes.iter().map(|c| c.rank.0).collect();
    assert_eq!(ranks, [4, 5, 6, 7]);
}

#[test]
fn a_cut_link_and_loss_leave_ranks_waiting_without_a_hang() {
    let cut = SimConfig {
        faults: faults(&["cut:link=0-1"]),
        ..SimConfig::default()
    };
    let report = simulate(&JobSpec::new(Algorithm::Rdb, 8), cut).unwrap();
    assert_eq!(report.dropped_cut, 2);
    assert!(report.incomplete >= 2);
    let lossy = SimConfig {
        faults: faults(&["drop:rank=2,rate=1.0"]),
        ..SimConfig::default()
    };
    let report = simulate(&JobSpec::new(Algorithm::Rdb, 8), lossy).unwrap();
    assert_eq!(report.dropped_loss, 3);
}

#[test]
fn a_state_flip_reaches_the_algorithm() {
    let config = SimConfig {
        faults: faults(&["flip-state:rank=2,var=value,bit=62,at=1"]),
        ..SimConfig::default()
    };
    let report = simulate(&JobSpec::new(Algorithm::Rdb, 8), config).unwrap();
    assert_eq!(report.state_flips, 1);
    assert!(report.max_rel_error > 1.0, "{}", report.max_rel_error);
    // At t = 0 faults strike before the operation starts: there is no value to flip yet.
    let early = SimConfig {
        faults: faults(&["flip-state:rank=2,var=value,bit=62,at=0"]),
        ..SimConfig::default()
    };
    let report = simulate(&JobSpec::new(Algorithm::Rdb, 8), early).unwrap();
    assert_eq!(report.state_flips, 0);
}

#[test]
fn slow_ranks_and_start_spread_delay_the_end() {
    let base = simulate(&JobSpec::new(Algorithm::Rdb, 64), SimConfig::default()).unwrap();
    for spec in [
        "slow:rank=9,factor=20",
        "spread:uniform=100",
        "spread:normal=50",
    ] {
        let config = SimConfig {
            faults: faults(&[spec]),
            ..SimConfig::default()
        };
        let report = simulate(&JobSpec::new(Algorithm::Rdb, 64), config).unwrap();
        assert!(report.sim_time_steps > base.sim_time_steps, "{spec}");
        assert_eq!(report.max_rel_error, base.max_rel_error, "{spec}");
    }
}

#[test]
fn faults_outside_the_run_are_set_up_errors() {
    for spec in [
        "kill:rank=8",
        "kill-node:node=2",
        "cut:link=1-9",
        "kill:rank=1,op=2",
        "kill:rank=1,at=5ms",
    ] {
        let config = SimConfig {
            faults: faults(&[spec]),
            ranks_per_node: 4,
            ..SimConfig::default()
        };
        let error = simulate(&JobSpec::new(Algorithm::Rdb, 8), config).unwrap_err();
        assert!(
            matches!(error, ftcoll_runtime::job::JobError::Sim(SimError::Plan(_))),
            "{spec}"
        );
    }
}
