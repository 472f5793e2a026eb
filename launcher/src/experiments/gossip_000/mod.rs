//! Paper 000's resilience experiments (Sec. 4.4, Figs. 1-6) in the simulator.
//!
//! The setting of 000 Sec. 4.4.1: asynchronous gossip (each rank pushes on its own clock, on
//! average every L + 2o = 12 steps of the LogP model, L = 10, o = 1) on a hypercube of N = 32
//! ranks (64 for Figs. 5 and 6), the average of one uniform (0, 1) input per rank, and the
//! simulator's oracle stop: every rank stops once all are within eps = 1e-14 of the average, or
//! once the first rank has pushed 500 times. "Iterations" are the oracle's stopping round (the
//! most pushes any rank made).
//!
//! Seeds: one seed per run, derived from the base seed (`--seed`) and the run's index, drives the
//! inputs, the schedule, the flipped flow and the random flips. Every algorithm (and every bit
//! position) of a run gets the same seed, so the PF variants follow the same schedule until a
//! fault makes them differ (000: "All algorithms were run with the same sequence of random
//! numbers").
//!
//! - Fig. 1: one run. Bit 56 of the value element of one flow variable (a random rank's flow to a
//!   random hypercube neighbour) flips at step 1800, 150 mean push periods ("after the first
//!   process sent 150 messages"); tau = 1e-11 (Sec. 4.4.1). Max and median error every 12 steps.
//! - Figs. 2 and 3 (the same runs): that flip at each of the 64 bits, 5 runs per bit (`--full`:
//!   100); PS flips its value instead, RDB one of the log2 N messages a random rank sends.
//!   tau_PFLC = 0.5 and tau_PFCC = 1e-10 as Fig. 3's caption says (Sec. 4.4.1 says 1e-11).
//!   Fig. 2: the max over runs of the final max relative error; Fig. 3: the mean messages per rank
//!   against PS without a flip.
//! - Figs. 4 and 5: flip rate 1e-4 (`flip-rate`: after each message a rank sends, with this
//!   probability one random bit of a random element of one of its flows flips), tau from 1e-14 to
//!   1, N = 32 and 64, 10 runs a point (`--full`: 100): median and Tukey whiskers (the most
//!   extreme runs within 1.5 IQR of the quartiles) of the iterations.
//! - Fig. 6: flip rate 1e-4, N = 64, 60 runs (`--full`: 500) of PFLC (tau 0.5) and PFCC
//!   (tau 1e-10): the iterations grouped by the number of flips that hit a flow.
//!
//! PFCC runs as 000 Alg. 5 prints it (no recomputed estimate after a detected corruption, see
//! `ftcoll_algos::gossip`). Each experiment prints its table and a "claim / measured" line, and
//! writes CSV files and an SVG plot.

mod fig1;
mod fig2_3;
mod fig4_6;

pub use fig1::fig1;
pub use fig2_3::{fig2, fig3};
pub use fig4_6::{fig4_5, fig6};

use std::sync::atomic::Ordering;

use anyhow::{anyhow, bail, Context};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{SimConfig, SimReport};

use super::{fmt, Ctx};

/// Ranks of Figs. 1-4.
const N: u32 = 32;
/// Ranks of Figs. 5 and 6.
const N_LARGE: u32 = 64;
/// Accuracy target of the oracle stop.
const EPS: f64 = 1e-14;
/// Pushes after which the first rank to reach them stops the run.
const BUDGET: u32 = 500;
/// Mean steps between two pushes of a rank (L + 2o).
const PUSH_PERIOD: u64 = 12;
/// When the single flip of Figs. 1-3 happens: after about 150 pushes per rank.
const FLIP_STEP: u64 = 150 * PUSH_PERIOD;
/// The bit Fig. 1 flips.
const FIG1_BIT: u32 = 56;
/// Checksum threshold of Sec. 4.4.1 (Fig. 1).
const TAU_SEC_441: f64 = 1e-11;
/// Checksum thresholds of the captions of Figs. 3 and 6.
const TAU_PFLC: f64 = 0.5;
const TAU_PFCC: f64 = 1e-10;
/// Flips per sent message in Figs. 4-6.
const FLIP_RATE: f64 = 1e-4;
/// The thresholds of Figs. 4 and 5.
const TAUS: [f64; 10] = [1e-14, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 1e-1, 0.5, 1.0];
/// A final error above this counts as not recovered (Fig. 2's summary).
const FAILED: f64 = 1e-8;
/// A final error above this missed the target (10 eps): the run was stopped by the budget.
const MISSED: f64 = 10.0 * EPS;
/// Seed streams of the experiments, so that they draw different runs.
const STREAM_FIG1: u64 = 1;
const STREAM_BITS: u64 = 2;
const STREAM_TAU: u64 = 45;
const STREAM_FIG6: u64 = 6;

// ---------------------------------------------------------------------------------------------
// Runs.

/// A gossip job of these experiments: the average, eps 1e-14, 500 pushes, threshold `tau`
/// (checked rules only). RDB is exact and takes neither.
fn gossip_spec(algo: Algorithm, n: u32, tau: Option<f64>) -> JobSpec {
    let mut spec = JobSpec::new(algo, n);
    spec.op = ReduceOp::Average;
    if algo != Algorithm::Rdb {
        spec.eps = Some(EPS);
        spec.steps = Some(BUDGET);
        spec.gossip.tau = tau;
    }
    spec
}

/// Runs `spec` with `seed` and the fault specs `faults`, recording the error history if asked.
fn run(
    ctx: &Ctx,
    spec: &JobSpec,
    seed: u64,
    faults: &[String],
    history: bool,
) -> anyhow::Result<SimReport> {
    let faults = faults
        .iter()
        .map(|f| ftcoll_launcher::text::parse_fault(f).map_err(|e| anyhow!("fault '{f}': {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let config = SimConfig {
        seed,
        faults,
        history_every: history.then_some(PUSH_PERIOD),
        ..SimConfig::default()
    };
    let report = simulate(spec, config)
        .map_err(|e| anyhow!("{} with N = {}, seed {seed}: {e}", spec.algo, spec.n))?;
    ctx.runs.fetch_add(1, Ordering::Relaxed);
    if report.truncated {
        bail!(
            "{} with N = {}, seed {seed} reached the simulator's bounds",
            spec.algo,
            spec.n
        );
    }
    Ok(report)
}

/// The flow variable a run corrupts: a random rank and a random hypercube dimension (its
/// neighbour across it), drawn from the run's seed.
fn flow_target(seed: u64, n: u32) -> (u32, u32) {
    let mut rng = SimRng::for_stream(seed, 0xF10F);
    let rank = rng.below(u64::from(n)) as u32;
    let dim = rng.below(u64::from(n.trailing_zeros().max(1))) as u32;
    (rank, dim)
}

/// Runs `spec` with bit `bit` of the value element of one flow variable flipped at
/// [`FLIP_STEP`] ([`flow_target`]); if that flow does not exist yet (the two never exchanged), the
/// flow across the next dimension. Returns the report and the (rank, peer) of the flipped flow.
fn run_flow_flip(
    ctx: &Ctx,
    spec: &JobSpec,
    seed: u64,
    bit: u32,
    history: bool,
) -> anyhow::Result<(SimReport, (u32, u32))> {
    let dims = spec.n.trailing_zeros().max(1);
    let (rank, dim) = flow_target(seed, spec.n);
    for k in 0..dims {
        let peer = rank ^ (1 << ((dim + k) % dims));
        let fault =
            format!("flip-state:rank={rank},bit={bit},var=flow:{peer},elem=0,at={FLIP_STEP}");
        let report = run(ctx, spec, seed, &[fault], history)?;
        if report.state_flips == 1 {
            return Ok((report, (rank, peer)));
        }
    }
    bail!(
        "{}: rank {rank} held no flow to flip at step {FLIP_STEP} (seed {seed})",
        spec.algo
    )
}

// ---------------------------------------------------------------------------------------------
// Numbers.

/// The final max relative error, a NaN counted as infinite.
fn error_of(report: &SimReport) -> f64 {
    if report.max_rel_error.is_nan() {
        f64::INFINITY
    } else {
        report.max_rel_error
    }
}

/// The oracle's stopping round: the iterations of the run.
fn iterations(report: &SimReport) -> anyhow::Result<u32> {
    report
        .oracle_stop_round
        .context("the gossip run ended without the oracle stopping it")
}

/// Messages sent per rank.
fn per_rank(report: &SimReport) -> f64 {
    report.messages as f64 / f64::from(report.n.max(1))
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    sum(values) / values.len() as f64
}

fn sum(values: &[f64]) -> f64 {
    values.iter().sum()
}

fn max_of(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// Median, quartiles and Tukey whiskers of a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Summary {
    median: f64,
    q1: f64,
    q3: f64,
    /// The smallest value at or above q1 - 1.5 IQR.
    low: f64,
    /// The largest value at or below q3 + 1.5 IQR.
    high: f64,
}

impl Summary {
    /// median, q1, q3, low, high for a CSV row.
    fn fields(&self) -> Vec<String> {
        [self.median, self.q1, self.q3, self.low, self.high]
            .iter()
            .map(|&v| fmt(v))
            .collect()
    }
}

/// The summary of `values`; none for an empty sample.
fn summarize(values: &[f64]) -> Option<Summary> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (first, last) = (*sorted.first()?, *sorted.last()?);
    let q1 = quantile(&sorted, 0.25);
    let q3 = quantile(&sorted, 0.75);
    let reach = 1.5 * (q3 - q1);
    Some(Summary {
        median: quantile(&sorted, 0.5),
        q1,
        q3,
        low: sorted
            .iter()
            .copied()
            .find(|&v| v >= q1 - reach)
            .unwrap_or(first),
        high: sorted
            .iter()
            .rev()
            .copied()
            .find(|&v| v <= q3 + reach)
            .unwrap_or(last),
    })
}

/// The `q` quantile of a sorted non-empty sample, interpolated linearly.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_use_tukey_whiskers() {
        let s = summarize(&[1.0, 2.0, 3.0, 4.0, 100.0]).unwrap_or_default();
        assert_eq!((s.median, s.q1, s.q3), (3.0, 2.0, 4.0));
        assert_eq!((s.low, s.high), (1.0, 4.0), "100 is an outlier");
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn flow_targets_are_hypercube_neighbours() {
        for seed in 0..50 {
            let (rank, dim) = flow_target(seed, 32);
            assert!(rank < 32 && dim < 5);
        }
    }
}
