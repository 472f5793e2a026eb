//! Paper 003 (push-cancel-flow, PCF) in the simulator: the accuracy, link-failure and dmGS
//! experiments.
//!
//! - `003-fig3-6` (Figs. 3 and 6): the accuracy PF and PCF reach with eps = 1e-15 against N, on
//!   a 3-D torus 2^i x 2^i x 2^i and on a hypercube of 2^(3i) ranks (i = 1..3, `--full` 1..4),
//!   for sum and average; per point the median over R seeds (3, `--full` 10) of the max
//!   relative error over ranks when the run stopped (plotted), of the best max error sampled
//!   during the run, and how many runs reached eps before the push budget.
//! - `003-fig4-7` (Figs. 4 and 7): a 6-D hypercube (N = 64) whose link 0-1 fails permanently
//!   after 75 and after 175 pushes per rank (steps 900 and 2100; both ends are told at once);
//!   the max error over time of PF and PCF run with the same seed, hence the same schedule up to
//!   the first point where the algorithms differ. Per run: the error level at the failure, the
//!   peak after it, the fall-back (0 = none, 1 = back to the start, on a log scale) and the
//!   pushes until the error is back at its level (see `ENVELOPE`). R seeds (3, `--full` 20);
//!   the first is plotted.
//! - `dmgs` (Sec. IV, Fig. 8): distributed modified Gram-Schmidt QR of a random N x 16 matrix,
//!   one row per rank, on a hypercube of N ranks (N = 16..64, `--full` 16..1024), every norm
//!   and dot product a gossip sum of its own [`Simulation`] whose per-rank estimates feed the
//!   next step; mean (as 003) and median (plotted: one failed reduction makes a run's error
//!   infinite) over R runs (3, `--full` 50, as 003) of `||V - Q R_0|| / ||V||` with rank 0's
//!   estimate of R (the worst rank's R is in the table), for dmGS(PF), dmGS(PCF) and the same
//!   steps with exact sums. The example `launcher/examples/dmgs.rs` runs the same steps on real
//!   ranks.
//!
//! Common set-up: asynchronous gossip in double precision, one push per rank every 12 steps on
//! average (the cost model's exchange time), partners uniform among the neighbours. The
//! simulator's all-live oracle stops every rank once every live rank is within eps = 1e-15
//! (element-wise relative error) of the exact aggregate, or once some rank has made the push
//! budget; each rank's result is then its estimate at that instant. `pf` is Push-Flow (003
//! Fig. 1); `pcf` is PCF in the bit-flip-tolerant form the text gives in prose (Sec. III-A),
//! ftcoll's default. A sum is computed, as everywhere in ftcoll, as the average times the number
//! of live ranks; for N a power of two that multiplication is exact, so sum and average have the
//! same relative errors here (003 Fig. 3 shows them apart).
//!
//! The seeds of PF and PCF runs are the same at each point (paired schedules); `--placements`
//! overrides R and `--max-ranks` caps N.
//!
//! [`Simulation`]: ftcoll_runtime::sim::Simulation

mod dmgs;
mod fig3_6;
mod fig4_7;

pub use dmgs::dmgs;
pub use fig3_6::fig3_6;
pub use fig4_7::fig4_7;

use std::sync::atomic::Ordering;

use anyhow::bail;
use ftcoll_algos::topology::Topology;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{SimConfig, SimReport};

use super::svg::{Chart, Kind, Series};
use super::Ctx;

/// The accuracy target of every reduction (003 Secs. II-B, III-C and IV).
const EPS: f64 = 1e-15;

/// Mean steps between two pushes of a rank (L + 2o of the default cost model).
const STEPS_PER_PUSH: u64 = 12;

/// The two algorithms every figure compares.
const ALGOS: [Algorithm; 2] = [Algorithm::Pf, Algorithm::Pcf];

/// A gossip job: `algo` over `topology` with eps = 1e-15 and a budget of `budget` pushes.
fn gossip_spec(algo: Algorithm, topology: Topology, op: ReduceOp, budget: u32) -> JobSpec {
    let mut spec = JobSpec::new(algo, topology.size());
    spec.op = op;
    spec.eps = Some(EPS);
    spec.steps = Some(budget);
    spec.topology = Some(topology);
    spec
}

/// Runs one gossip job with uniform inputs and counts it.
fn simulate_counted(ctx: &Ctx, spec: &JobSpec, config: SimConfig) -> anyhow::Result<SimReport> {
    let report = simulate(spec, config)?;
    ctx.runs.fetch_add(1, Ordering::Relaxed);
    if report.truncated || report.completed != spec.n {
        bail!(
            "{} over {} ranks did not complete (completed {}, truncated {})",
            spec.algo,
            spec.n,
            report.completed,
            report.truncated
        );
    }
    Ok(report)
}

/// The median of `values` (NaN sorts last); NaN for none.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The mean of `values`; NaN for none.
fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The larger of two errors, NaN counting as infinite (`f64::max` would drop it, and a failed
/// reduction would look accurate).
fn worse(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::INFINITY
    } else {
        a.max(b)
    }
}

/// An error in scientific notation.
fn sci(x: f64) -> String {
    format!("{x:.2e}")
}

/// A line chart of errors against evenly spaced x ticks.
fn error_chart(title: &str, x_label: &str, x_ticks: Vec<String>, series: Vec<Series>) -> Chart {
    Chart {
        title: title.into(),
        x_label: x_label.into(),
        y_label: "max relative error (log scale)".into(),
        x_ticks,
        series,
        kind: Kind::Lines,
        log_y: true,
    }
}
