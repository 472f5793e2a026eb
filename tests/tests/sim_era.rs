//! The Early Returning Agreement (002) in the simulator: the failure-free message count and
//! logarithmic latency, and the property checker on thousands of random crash schedules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_algos::era::{EraTopology, Shape};
use ftcoll_algos::Rank;
use ftcoll_runtime::check::corrected::ScheduledFailure;
use ftcoll_runtime::check::era::{check_era_case, check_era_seeds, EraCase};
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::SimConfig;

fn agreement(n: u32, topology: EraTopology) -> ftcoll_runtime::sim::SimReport {
    let mut spec = JobSpec::new(Algorithm::EraAgree, n);
    spec.op = ftcoll_algos::ReduceOp::BitAnd;
    spec.era_topology = topology;
    simulate(&spec, SimConfig::default()).unwrap()
}

/// 002: a failure-free agreement is one reduction and one broadcast along the tree.
#[test]
fn failure_free_agreement_sends_two_messages_per_non_root() {
    for n in [1, 2, 3, 5, 16, 100, 1000] {
        for topology in [
            EraTopology::Flat(Shape::Binary),
            EraTopology::Flat(Shape::Star),
            EraTopology::from_name("bin/bin", 16).unwrap(),
        ] {
            let report = agreement(n, topology);
            assert_eq!(report.messages, 2 * u64::from(n - 1), "n={n} {topology:?}");
            assert_eq!(report.completed, n);
            assert_eq!(report.max_rel_error, 0.0, "n={n}: wrong decision");
        }
    }
}

/// 002 Fig. 2a: latency grows with log N on a binary tree (each level costs a fixed number of
/// LogP steps up and down), so the per-doubling cost is constant from 2^4 to 2^16.
#[test]
fn failure_free_latency_is_logarithmic_in_n() {
    let latency = |n: u32| agreement(n, EraTopology::Flat(Shape::Binary)).sim_time_steps as f64;
    let points: Vec<(f64, f64)> = (4..=16)
        .step_by(2)
        .map(|k| (k as f64, latency(1 << k)))
        .collect();
    let slopes: Vec<f64> = points
        .windows(2)
        .map(|w| (w[1].1 - w[0].1) / (w[1].0 - w[0].0))
        .collect();
    let (lo, hi) = slopes
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    assert!(
        lo > 0.0 && hi <= 1.1 * lo,
        "per-doubling cost varies: {slopes:?} from {points:?}"
    );
}

/// 10,000 random crash schedules, N up to 64: roots, children of roots, node masters, whole
/// nodes, up to half the ranks, before, during and after the agreements.
#[test]
fn checker_passes_ten_thousand_random_crash_schedules() {
    let summary = check_era_seeds(0, 10_000, 64).unwrap_or_else(|v| panic!("{v}"));
    assert_eq!(summary.cases, 10_000);
    assert!(summary.with_failures > 6_000, "{summary:?}");
    assert!(summary.heavy > 1_000, "{summary:?}");
    assert!(summary.node_failures > 300, "{summary:?}");
}

/// The root dies at every instant of two agreements, and one of its children three steps later:
/// the survivors still decide one value per agreement.
#[test]
fn root_crash_mid_broadcast_still_agrees() {
    for at in 1..60 {
        let case = EraCase {
            n: 15,
            topology: EraTopology::Flat(Shape::Binary),
            ranks_per_node: 1,
            agreements: 2,
            failures: vec![
                ScheduledFailure { rank: 0, at },
                ScheduledFailure {
                    rank: 2,
                    at: at + 3,
                },
            ],
            node_failure: None,
            detect_delay: 5,
            spread: 0,
            seed: at,
        };
        let report = check_era_case(&case).unwrap_or_else(|v| panic!("{v}"));
        let crashed: Vec<Rank> = report.crashes.iter().map(|c| c.rank).collect();
        assert_eq!(crashed.len(), 2, "{crashed:?}");
        assert!(crashed.contains(&Rank(0)) && crashed.contains(&Rank(2)));
    }
}

/// Seeds replay exactly.
#[test]
fn a_seed_replays_the_same_trace() {
    let case = EraCase::random(4242, 64);
    let a = check_era_case(&case).unwrap();
    let b = check_era_case(&case).unwrap();
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.messages, b.messages);
}

/// The long mode: `cargo test --release -p ftcoll-tests --test sim_era -- --ignored`.
#[test]
#[ignore = "long mode: 200,000 seeds up to N = 256"]
fn checker_long_mode() {
    let summary = check_era_seeds(1_000_000, 200_000, 256).unwrap_or_else(|v| panic!("{v}"));
    println!("{summary:?}");
}
