//! Recursive doubling in the simulator: exactness, determinism, and how a flipped bit spreads.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_algos::rdb::{RdbConfig, RdbShape, RecursiveDoubling};
use ftcoll_algos::{OpId, Phase, Protocol, Rank, ReduceOp};
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::oracle::compensated_sum;
use ftcoll_runtime::sim::{DetectorModel, SimConfig, SimReport, Simulation};
use proptest::prelude::*;

fn rdb_ranks(n: u32) -> Vec<RecursiveDoubling> {
    (0..n)
        .map(|r| RecursiveDoubling::new(RdbConfig::exact(Rank(r), n, ReduceOp::Sum, OpId(1))))
        .collect()
}

/// Runs RDB over `inputs` (one value per rank) and returns every rank's result.
fn run_rdb(inputs: Vec<f64>, config: SimConfig) -> (Vec<Option<f64>>, SimReport) {
    let n = inputs.len() as u32;
    let mut sim = Simulation::new(config, rdb_ranks(n), inputs, 1, ReduceOp::Sum).unwrap();
    let report = sim.run();
    let mut estimate = Vec::new();
    let results = sim
        .ranks()
        .iter()
        .map(|rank| {
            (rank.phase() == Phase::Done).then(|| {
                rank.estimate(&mut estimate);
                estimate[0]
            })
        })
        .collect();
    (results, report)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any N from 1 to 5000, any finite inputs of mixed sign and magnitude: every rank ends with
    /// the sum to within the error bound of a pairwise summation of depth log2 N + 2 (the fold
    /// adds a level), measured against a compensated sum.
    #[test]
    fn rdb_sums_exactly_for_any_n(
        n in 1u32..=5000,
        seed in any::<u64>(),
        scale_exp in -20i32..20,
    ) {
        let mut rng = ftcoll_algos::rng::SimRng::new(seed);
        let scale = 2f64.powi(scale_exp);
        let inputs: Vec<f64> = (0..n).map(|_| (rng.next_f64() - 0.3) * scale).collect();
        let exact = compensated_sum(inputs.iter().copied());
        let magnitude: f64 = inputs.iter().map(|x| x.abs()).sum();
        let depth = f64::from(RdbShape::new(n).rounds() + 1);
        let bound = depth * f64::EPSILON * magnitude;
        let (results, report) = run_rdb(inputs, SimConfig { seed, ..SimConfig::default() });
        prop_assert_eq!(report.messages, RdbShape::new(n).messages());
        prop_assert_eq!(report.rounds, RdbShape::new(n).rounds());
        // LogP: exactly R(L + 2o) for a power of two; the fold overlaps the first exchanges
        // otherwise, so R(L + 2o) bounds it.
        let logp_bound = u64::from(report.rounds) * 12;
        if n.is_power_of_two() {
            prop_assert_eq!(report.sim_time_steps, logp_bound);
        } else {
            prop_assert!(report.sim_time_steps <= logp_bound);
        }
        for (rank, result) in results.iter().enumerate() {
            let result = result.expect("every rank completes");
            prop_assert!((result - exact).abs() <= bound,
                "rank {} of {}: {} vs {} (bound {})", rank, n, result, exact, bound);
        }
        // Every rank holds the same bits: they summed the same tree in different orders of
        // the same pairs, and floating-point addition is commutative.
        prop_assert!(results.iter().all(|r| r.map(f64::to_bits) == results[0].map(f64::to_bits)));
    }

    /// Integer-valued inputs sum exactly.
    #[test]
    fn rdb_integer_sums_are_exact(n in 1u32..=3000, seed in any::<u64>()) {
        let mut spec = JobSpec::new(Algorithm::Rdb, n);
        spec.input = ftcoll_runtime::sim::InputKind::Integers;
        let report = simulate(&spec, SimConfig { seed, ..SimConfig::default() }).unwrap();
        prop_assert_eq!(report.max_rel_error, 0.0);
        prop_assert_eq!(report.completed, n);
    }
}

#[test]
fn one_seed_replays_and_different_seeds_differ() {
    let faulty = |seed| SimConfig {
        seed,
        faults: vec![
            ftcoll_launcher::text::parse_fault("drop:rank=all,rate=0.01").unwrap(),
            ftcoll_launcher::text::parse_fault("kill:rank=5,at=30").unwrap(),
            ftcoll_launcher::text::parse_fault("spread:uniform=20").unwrap(),
        ],
        detector: DetectorModel::Timeout {
            period_steps: 5,
            timeout_steps: 20,
        },
        ..SimConfig::default()
    };
    let spec = JobSpec::new(Algorithm::Rdb, 300);
    let a = simulate(&spec, faulty(7)).unwrap();
    let b = simulate(&spec, faulty(7)).unwrap();
    let c = simulate(&spec, faulty(8)).unwrap();
    assert_eq!(
        a,
        SimReport {
            wall_s: a.wall_s,
            ..b.clone()
        }
    );
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_ne!(a.trace_hash, c.trace_hash);
    assert!(a.dropped_loss > 0, "the loss fault dropped nothing");
}

/// Which ranks a value sent at `step` to `receiver` reaches, by following the schedule: an
/// exchange spreads a tainted value to both partners, the fold to the odd rank, the result step
/// replaces the folded rank's value with its partner's.
fn reached_by(n: u32, step: u32, receiver: u32) -> Vec<bool> {
    let shape = RdbShape::new(n);
    let mut tainted = vec![false; n as usize];
    tainted[receiver as usize] = true;
    for s in step + 1..=shape.exchanges + 1 {
        if s <= shape.exchanges {
            for v in 0..shape.pow2 {
                let w = v ^ (1 << (s - 1));
                if v < w {
                    let (a, b) = (shape.real_rank(v) as usize, shape.real_rank(w) as usize);
                    let t = tainted[a] || tainted[b];
                    tainted[a] = t;
                    tainted[b] = t;
                }
            }
        } else {
            for odd in (1..2 * shape.remainder).step_by(2) {
                tainted[odd as usize - 1] = tainted[odd as usize];
            }
        }
    }
    tainted
}

/// The step number and receiver of the `nth` message `sender` sends.
fn nth_send(n: u32, sender: u32, nth: u32) -> (u32, u32) {
    let shape = RdbShape::new(n);
    match shape.virtual_rank(sender) {
        None => (0, sender + 1),
        Some(v) if nth < shape.exchanges => (nth + 1, shape.real_rank(v ^ (1 << nth))),
        Some(_) => (shape.exchanges + 1, sender - 1),
    }
}

#[test]
fn a_sign_flip_in_one_message_changes_exactly_the_ranks_it_reaches() {
    let mut cases = 0;
    for n in [2u32, 8, 64, 12, 37, 100] {
        let shape = RdbShape::new(n);
        let inputs: Vec<f64> = (0..n).map(|r| 1.0 + f64::from(r)).collect();
        let (clean, _) = run_rdb(inputs.clone(), SimConfig::default());
        for sender in [0, 1, n / 2, n - 1] {
            let sends = match shape.virtual_rank(sender) {
                None => 1,
                Some(_) if sender < 2 * shape.remainder => shape.exchanges + 1,
                Some(_) => shape.exchanges,
            };
            for nth in 0..sends {
                let spec = format!("flip-msg:rank={sender},bit=63,nth={nth}");
                let config = SimConfig {
                    faults: vec![ftcoll_launcher::text::parse_fault(&spec).unwrap()],
                    ..SimConfig::default()
                };
                let (flipped, report) = run_rdb(inputs.clone(), config);
                assert_eq!(report.message_flips, 1, "{spec}: nothing flipped");
                let (step, receiver) = nth_send(n, sender, nth);
                let expected = reached_by(n, step, receiver);
                for rank in 0..n as usize {
                    let changed = clean[rank] != flipped[rank];
                    assert_eq!(changed, expected[rank], "n={n} {spec}: rank {rank}");
                }
                assert!(expected.iter().any(|&t| t));
                cases += 1;
            }
        }
    }
    assert!(cases > 50);
}

#[test]
fn power_of_two_flip_reaches_the_subcube_of_the_receiver() {
    // Closed form for N = 2^d: a message of step k (0-based) reaches the 2^(d-k-1) ranks that
    // share the receiver's low k+1 bits.
    let n = 64u32;
    for k in 0..6u32 {
        let receiver = 5 ^ (1 << k);
        let reached = reached_by(n, k + 1, receiver);
        let mask = (1u32 << (k + 1)) - 1;
        for rank in 0..n {
            assert_eq!(reached[rank as usize], rank & mask == receiver & mask);
        }
        assert_eq!(reached.iter().filter(|&&t| t).count(), 1 << (6 - k - 1));
    }
}

#[test]
fn a_corrupted_header_is_rejected_and_counted_not_a_panic() {
    let inputs = vec![1.0; 16];
    // Frame bit 29 is bit 5 of byte 3, the `algo` byte: the frame no longer names a protocol.
    let config = SimConfig {
        faults: vec![ftcoll_launcher::text::parse_fault("flip-msg:rank=3,raw=29,nth=0").unwrap()],
        ..SimConfig::default()
    };
    let (results, report) = run_rdb(inputs, config);
    assert_eq!(report.rejected, 1);
    assert!(
        report.incomplete > 0,
        "the partner cannot finish without that message"
    );
    assert!(results.iter().any(Option::is_some));
}

#[test]
fn a_1m_rank_allreduce_matches_the_formulas() {
    let n = 1u32 << 20;
    let report = simulate(&JobSpec::new(Algorithm::Rdb, n), SimConfig::default()).unwrap();
    assert_eq!(report.rounds, 20);
    assert_eq!(report.messages, 20 * u64::from(n));
    // R rounds of L + 2o with the default LogP (L = 10, o = 1).
    assert_eq!(report.sim_time_steps, 20 * (10 + 2));
    assert!(report.max_rel_error < 1e-12, "{}", report.max_rel_error);
    assert_eq!(report.completed, n);
}
