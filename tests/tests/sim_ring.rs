//! The ring allreduce and recursive halving and doubling in the simulator: exact at every
//! size, and the LogGP cost model tells the latency-bound regime (recursive doubling's log2 N
//! steps win) from the bandwidth-bound one (the ring's 2(N − 1)/N of the vector per rank wins),
//! and the halving's log2 N steps with the ring's bytes from both.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{CostModel, InputKind, SimConfig, SimReport};

fn run(algo: Algorithm, n: u32, len: usize, cost: CostModel) -> SimReport {
    let mut spec = JobSpec::new(algo, n);
    spec.input = InputKind::Integers;
    spec.input_len = len;
    let config = SimConfig {
        cost,
        ..SimConfig::default()
    };
    simulate(&spec, config).unwrap()
}

#[test]
fn the_ring_is_exact_at_every_size() {
    for n in 1..=13 {
        for len in [1, 5, 64] {
            let report = run(Algorithm::Ring, n, len, CostModel::default());
            assert_eq!(report.max_rel_error, 0.0, "n={n} len={len}");
        }
    }
}

#[test]
fn recursive_halving_and_doubling_is_exact_at_every_size() {
    for n in 1..=19 {
        for len in [1, 5, 64, 1000] {
            let report = run(Algorithm::Rhd, n, len, CostModel::default());
            assert_eq!(report.max_rel_error, 0.0, "n={n} len={len}");
            assert_eq!(report.completed, n, "n={n} len={len}");
        }
    }
}

#[test]
fn loggp_puts_halving_and_doubling_between_rdb_and_the_ring() {
    let n = 16;
    // Bandwidth-bound (2 MiB): the ring's bytes in 8 steps, against rdb's 4 whole vectors.
    let bandwidth_bound = CostModel::loggp(10, 1, 1, 10_000);
    let rdb = run(Algorithm::Rdb, n, 1 << 18, bandwidth_bound);
    let rhd = run(Algorithm::Rhd, n, 1 << 18, bandwidth_bound);
    assert!(
        rhd.completion_steps * 2 < rdb.completion_steps,
        "rhd {} rdb {}",
        rhd.completion_steps,
        rdb.completion_steps
    );
    // Latency-bound with a per-byte cost: 8 steps against the ring's 30, the same bytes.
    let steps_matter = CostModel::loggp(1000, 1, 1, 10);
    let ring = run(Algorithm::Ring, n, 1 << 12, steps_matter);
    let rhd = run(Algorithm::Rhd, n, 1 << 12, steps_matter);
    assert!(
        rhd.completion_steps * 2 < ring.completion_steps,
        "rhd {} ring {}",
        rhd.completion_steps,
        ring.completion_steps
    );
}

#[test]
fn loggp_picks_rdb_for_latency_and_the_ring_for_bandwidth() {
    let n = 16;
    // Short vectors, size free: 4 exchange rounds against 30 ring steps.
    let latency_bound = CostModel::loggp(10, 1, 1, 0);
    let rdb = run(Algorithm::Rdb, n, 8, latency_bound);
    let ring = run(Algorithm::Ring, n, 8, latency_bound);
    assert!(
        rdb.completion_steps < ring.completion_steps,
        "rdb {} ring {}",
        rdb.completion_steps,
        ring.completion_steps
    );
    // 256 Ki doubles (2 MiB) at 10,000 steps per MiB: rdb sends the whole vector 4 times, the
    // ring 2 × 15/16 of it in 30 blocks.
    let bandwidth_bound = CostModel::loggp(10, 1, 1, 10_000);
    let rdb = run(Algorithm::Rdb, n, 1 << 18, bandwidth_bound);
    let ring = run(Algorithm::Ring, n, 1 << 18, bandwidth_bound);
    assert!(
        ring.completion_steps * 2 < rdb.completion_steps,
        "ring {} rdb {}",
        ring.completion_steps,
        rdb.completion_steps
    );
    assert_eq!(ring.max_rel_error, 0.0);
}

#[test]
fn message_size_costs_nothing_without_g() {
    let plain = run(Algorithm::Rdb, 8, 4096, CostModel::logp(10, 1, 1));
    let short = run(Algorithm::Rdb, 8, 1, CostModel::logp(10, 1, 1));
    assert_eq!(plain.completion_steps, short.completion_steps);
}
