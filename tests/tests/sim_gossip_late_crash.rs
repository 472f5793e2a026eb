//! A crash at any moment of a gossip reduction under the local stopping rule, late ones
//! included (after some ranks finished): every survivor must return an admissible sum. That is
//! the survivors' inputs, or those plus the crashed rank's for a rank that finished before it
//! heard of the crash. `FTCOLL_LATE_CRASH_SEEDS` sets the seed count per algorithm (default 150).

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_algos::wire::OpId;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::job::{stepped_simulation, Algorithm, JobSpec};
use ftcoll_runtime::sim::{DetectorModel, SimConfig};

const N: u32 = 16;
const KILLED: usize = 5;
/// Simulated steps a fault-free run of these settings takes, about (the crash times span
/// it and a third more, so that some crashes come after every rank finished). PCF ignores
/// pushes while a pair's roles differ and needs more.
fn run_steps(algo: Algorithm) -> u64 {
    if algo == Algorithm::Pcf {
        4200
    } else {
        3000
    }
}

fn seeds() -> u64 {
    std::env::var("FTCOLL_LATE_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

fn relative_error(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs()
}

/// Runs every seed; returns how many runs had ranks finish before the crash reached them
/// while others returned the survivors' sum (the late crashes).
fn check(algo: Algorithm) -> u32 {
    let mut spec = JobSpec::new(algo, N);
    spec.op = ReduceOp::Sum;
    spec.eps = Some(1e-12);
    spec.steps = Some(5000);
    spec.gossip.stop_rule = true;
    let inputs: Vec<f64> = (0..N).map(|r| f64::from(100 + (37 * r) % 101)).collect();
    let all: f64 = inputs.iter().sum();
    let survivors = all - inputs[KILLED];
    let mut late = 0;
    for seed in 1..=seeds() {
        let at = seed * 7919 % (run_steps(algo) * 4 / 3);
        let config = SimConfig {
            seed,
            faults: vec![ftcoll_launcher::text::parse_fault(&format!(
                "kill:rank={KILLED},at={at}"
            ))
            .unwrap()],
            detector: DetectorModel::Perfect { delay_steps: 30 },
            ..SimConfig::default()
        };
        let mut sim = stepped_simulation(&spec, config, inputs.clone(), OpId(1)).unwrap();
        let report = sim.run();
        assert!(!report.truncated, "{algo} seed {seed}: truncated");
        let mut result = Vec::new();
        let (mut with_crashed, mut without) = (0, 0);
        for (r, rank) in sim.ranks().iter().enumerate() {
            if r == KILLED {
                continue;
            }
            rank.estimate(&mut result);
            let got = result[0];
            let (to_survivors, to_all) = (relative_error(got, survivors), relative_error(got, all));
            assert!(
                to_survivors.min(to_all) <= 1e-10,
                "{algo} seed {seed}, crash at {at}: rank {r} returned {got}, survivors' sum \
                 {survivors}, with the crashed rank {all}"
            );
            if to_all <= 1e-10 {
                with_crashed += 1;
            } else {
                without += 1;
            }
        }
        if with_crashed > 0 && without > 0 {
            late += 1;
        }
    }
    late
}

fn check_with_late_cases(algo: Algorithm) {
    let late = check(algo);
    eprintln!("{algo}: {late} late crashes in {} runs", seeds());
    // The schedule of crash times must include the case this file is about.
    assert!(
        late * 20 >= seeds() as u32,
        "{algo}: only {late} late crashes"
    );
}

#[test]
fn push_flow_survives_a_late_crash() {
    check_with_late_cases(Algorithm::Pf);
}

#[test]
fn pflc_survives_a_late_crash() {
    check_with_late_cases(Algorithm::Pflc);
}

#[test]
fn pfcc_survives_a_late_crash() {
    check_with_late_cases(Algorithm::Pfcc);
}

#[test]
fn pcf_survives_a_late_crash() {
    check_with_late_cases(Algorithm::Pcf);
}
