//! The direct-exchange allreduce in the simulator: exact and identical results, its message
//! count, and how it fails (it is not fault tolerant, like recursive doubling).

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_algos::{OpId, Protocol};
use ftcoll_runtime::faults::FaultSpec;
use ftcoll_runtime::job::{simulate, stepped_simulation, Algorithm, JobSpec};
use ftcoll_runtime::sim::{DetectorModel, InputKind, SimConfig};

/// Integer inputs: every correct sum is exact.
fn spec(n: u32) -> JobSpec {
    let mut spec = JobSpec::new(Algorithm::Direct, n);
    spec.input = InputKind::Integers;
    spec
}

fn faults(specs: &[&str]) -> Vec<FaultSpec> {
    specs
        .iter()
        .map(|s| ftcoll_launcher::text::parse_fault(s).unwrap())
        .collect()
}

#[test]
fn every_size_sums_exactly_with_n_times_n_minus_one_messages() {
    for n in [1u32, 2, 3, 7, 16, 33, 100] {
        for seed in 1..=5 {
            let config = SimConfig {
                seed,
                ..SimConfig::default()
            };
            let report = simulate(&spec(n), config).unwrap();
            assert_eq!(report.completed, n, "n={n} seed={seed}");
            assert_eq!(report.max_rel_error, 0.0, "n={n} seed={seed}");
            assert_eq!(report.messages, u64::from(n) * u64::from(n - 1), "n={n}");
        }
    }
}

#[test]
fn a_crash_mid_operation_fails_it_at_every_survivor_in_bounded_time() {
    for seed in 1..=50u64 {
        let victim = seed % 12;
        let config = SimConfig {
            seed,
            faults: faults(&[&format!("kill:rank={victim},at={}", seed % 4)]),
            detector: DetectorModel::Perfect { delay_steps: 5 },
            ..SimConfig::default()
        };
        let report = simulate(&spec(12), config).unwrap();
        assert_eq!(report.crashes.len(), 1, "seed {seed}");
        // A survivor that had every input before the notice completes with the exact sum; the
        // others fail the operation. None waits forever.
        assert_eq!(report.incomplete, 0, "seed {seed}");
        assert_eq!(report.completed + report.aborted, 11, "seed {seed}");
        if report.completed > 0 {
            assert_eq!(report.max_rel_error, 0.0, "seed {seed}");
        }
    }
}

#[test]
fn a_flipped_message_reaches_only_its_receiver() {
    // Rank 2's first message goes to rank 3 (each rank starts after itself).
    let config = SimConfig {
        faults: faults(&["flip-msg:rank=2,bit=62,nth=0"]),
        ..SimConfig::default()
    };
    let spec = JobSpec::new(Algorithm::Direct, 8);
    let inputs: Vec<f64> = (0..8).map(f64::from).collect();
    let mut sim = stepped_simulation(&spec, config, inputs, OpId(1)).unwrap();
    let report = sim.run();
    assert_eq!(report.message_flips, 1);
    assert_eq!(report.completed, 8);
    let mut value = Vec::new();
    let wrong: Vec<usize> = sim
        .ranks()
        .iter()
        .enumerate()
        .filter(|(_, rank)| {
            rank.estimate(&mut value);
            value != [28.0]
        })
        .map(|(r, _)| r)
        .collect();
    assert_eq!(wrong, [3]);
}
