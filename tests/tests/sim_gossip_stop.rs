//! The gossip stopping rule against the oracle: on many seeds per algorithm, every rank stops at
//! the requested accuracy, and the last rank stops within twice the rounds the oracle needs.
//! `FTCOLL_STOP_SEEDS` sets the seed count (default 1000).

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_algos::ReduceOp;
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::SimConfig;

fn seeds() -> u64 {
    std::env::var("FTCOLL_STOP_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

/// Runs `algo` on `seeds()` seeds with the oracle and with the rule; returns the worst ratio of
/// rounds (rule / oracle) and the worst error under the rule.
fn compare(algo: Algorithm, n: u32, eps: f64) -> (f64, f64) {
    let mut spec = JobSpec::new(algo, n);
    spec.op = ReduceOp::Average;
    spec.eps = Some(eps);
    spec.steps = Some(5000);
    let mut worst_ratio: f64 = 0.0;
    let mut worst_error: f64 = 0.0;
    for seed in 1..=seeds() {
        let config = SimConfig {
            seed,
            ..SimConfig::default()
        };
        let oracle = simulate(&spec, config.clone()).unwrap();
        let needed = oracle.oracle_stop_round.unwrap();
        assert!(
            !oracle.stopped_by_budget,
            "{algo} seed {seed}: oracle hit the budget"
        );
        let mut ruled = spec.clone();
        ruled.gossip.stop_rule = true;
        let report = simulate(&ruled, config).unwrap();
        assert_eq!(report.completed, n, "{algo} seed {seed}");
        let ratio = f64::from(report.rounds) / f64::from(needed);
        assert!(
            report.max_rel_error <= eps,
            "{algo} seed {seed}: stopped at error {:e} > {eps:e} after {} rounds (oracle {needed})",
            report.max_rel_error,
            report.rounds
        );
        assert!(
            ratio <= 2.0,
            "{algo} seed {seed}: {} rounds, oracle {needed}",
            report.rounds
        );
        worst_ratio = worst_ratio.max(ratio);
        worst_error = worst_error.max(report.max_rel_error);
    }
    eprintln!("{algo}: worst rounds ratio {worst_ratio:.2}, worst error {worst_error:.1e}");
    (worst_ratio, worst_error)
}

#[test]
fn push_sum_stops_within_twice_the_oracle() {
    compare(Algorithm::Ps, 32, 1e-10);
}

#[test]
fn push_flow_stops_within_twice_the_oracle() {
    compare(Algorithm::Pf, 32, 1e-10);
}

#[test]
fn pflc_stops_within_twice_the_oracle() {
    compare(Algorithm::Pflc, 32, 1e-10);
}

#[test]
fn pfcc_stops_within_twice_the_oracle() {
    compare(Algorithm::Pfcc, 32, 1e-10);
}

#[test]
fn pcf_stops_within_twice_the_oracle() {
    compare(Algorithm::Pcf, 32, 1e-10);
}

#[test]
fn hps_stops_within_twice_the_oracle() {
    compare(Algorithm::Hps, 64, 1e-3);
}

#[test]
fn hpflc_stops_within_twice_the_oracle() {
    compare(Algorithm::Hpflc, 64, 1e-3);
}
