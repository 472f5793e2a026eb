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

use std::sync::atomic::Ordering;

use anyhow::{bail, Context};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::topology::Topology;
use ftcoll_algos::{OpId, Protocol, ReduceOp};
use ftcoll_runtime::faults::FaultSpec;
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{SimConfig, SimReport, Simulation};

use super::svg::{render, Chart, Kind, Series};
use super::{size_label, Ctx};

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

// ---------------------------------------------------------------------------------------------
// Figs. 3 and 6: achievable accuracy against N.
// ---------------------------------------------------------------------------------------------

/// The two topologies of Figs. 3 and 6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Network {
    /// 2^i x 2^i x 2^i torus.
    Torus,
    /// Hypercube of 2^(3i) ranks.
    Hypercube,
}

impl Network {
    fn name(self) -> &'static str {
        match self {
            Network::Torus => "torus",
            Network::Hypercube => "hypercube",
        }
    }

    /// The topology for exponent `i` (N = 2^(3i) either way).
    fn topology(self, i: u32) -> anyhow::Result<Topology> {
        let side = 1u32 << i;
        Ok(match self {
            Network::Torus => Topology::torus3d_dims([side; 3])?,
            Network::Hypercube => Topology::hypercube(side * side * side)?,
        })
    }
}

/// `sum` or `avg`.
fn op_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        _ => "avg",
    }
}

/// Push budget of the accuracy runs, which stop here when they cannot reach 1e-15: 2000 by
/// default, 3000 with `--full`.
fn accuracy_budget(ctx: &Ctx) -> u32 {
    if ctx.full {
        3000
    } else {
        2000
    }
}

/// One point of Figs. 3 and 6 (one seed).
#[derive(Clone, Copy, Debug)]
struct AccuracyJob {
    network: Network,
    i: u32,
    op: ReduceOp,
    algo: Algorithm,
    seed_index: u64,
}

/// What one accuracy run measured.
#[derive(Clone, Copy, Debug)]
struct AccuracyRun {
    /// Max relative error over ranks when the run stopped.
    final_error: f64,
    /// The smallest max error sampled during the run (every push period).
    best_error: f64,
    /// The budget stopped the run (eps not reached).
    at_budget: bool,
    /// Pushes of the busiest rank.
    pushes: u32,
}

fn accuracy_run(ctx: &Ctx, job: &AccuracyJob) -> anyhow::Result<AccuracyRun> {
    let topology = job.network.topology(job.i)?;
    let spec = gossip_spec(job.algo, topology, job.op, accuracy_budget(ctx));
    let config = SimConfig {
        seed: ctx.run_seed(&[3, u64::from(job.i), job.seed_index]),
        history_every: Some(STEPS_PER_PUSH),
        ..SimConfig::default()
    };
    let report = simulate_counted(ctx, &spec, config)?;
    let best_sampled = report
        .history
        .iter()
        .map(|&(_, worst, _)| worst)
        .fold(f64::INFINITY, f64::min);
    Ok(AccuracyRun {
        final_error: report.max_rel_error,
        best_error: best_sampled.min(report.max_rel_error),
        at_budget: report.stopped_by_budget,
        pushes: report.rounds,
    })
}

/// The exponents i of Figs. 3 and 6 (N = 8^i): 1..3 by default, 1..4 with `--full` (003 goes
/// to 2^15 = 32K ranks, i = 5, which takes about an hour here).
fn accuracy_exponents(ctx: &Ctx) -> Vec<u32> {
    let top = if ctx.full { 4 } else { 3 };
    (1..=top)
        .filter(|&i| 1u64 << (3 * i) <= u64::from(ctx.max_ranks))
        .collect()
}

/// 003 Figs. 3 and 6.
pub fn fig3_6(ctx: &Ctx) -> anyhow::Result<()> {
    let seeds = u64::from(ctx.placements(3, 10));
    let exponents = accuracy_exponents(ctx);
    let mut points = Vec::new();
    for &i in &exponents {
        for network in [Network::Torus, Network::Hypercube] {
            for op in [ReduceOp::Sum, ReduceOp::Average] {
                for algo in ALGOS {
                    points.push((network, i, op, algo));
                }
            }
        }
    }
    let jobs: Vec<AccuracyJob> = points
        .iter()
        .flat_map(|&(network, i, op, algo)| {
            (0..seeds).map(move |seed_index| AccuracyJob {
                network,
                i,
                op,
                algo,
                seed_index,
            })
        })
        .collect();
    ctx.progress(&format!("{} accuracy runs", jobs.len()));
    let runs = ctx
        .par_map(&jobs, |job| accuracy_run(ctx, job))
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    write_accuracy_runs(ctx, &jobs, &runs)?;
    let summaries: Vec<AccuracySummary> = points
        .iter()
        .map(|&(network, i, op, algo)| {
            let mine: Vec<AccuracyRun> = jobs
                .iter()
                .zip(&runs)
                .filter(|(j, _)| (j.network, j.i, j.op, j.algo) == (network, i, op, algo))
                .map(|(_, r)| *r)
                .collect();
            AccuracySummary::of(network, i, op, algo, &mine)
        })
        .collect();
    print_accuracy(accuracy_budget(ctx), &summaries);
    write_accuracy_summary(ctx, &summaries)?;
    accuracy_chart(ctx, &exponents, &summaries)?;
    accuracy_claim(&summaries);
    Ok(())
}

/// The runs of one point, summarised.
#[derive(Clone, Debug)]
struct AccuracySummary {
    network: Network,
    n: u32,
    op: ReduceOp,
    algo: Algorithm,
    runs: usize,
    median_final: f64,
    median_best: f64,
    worst_final: f64,
    at_budget: usize,
    median_pushes: f64,
}

impl AccuracySummary {
    fn of(network: Network, i: u32, op: ReduceOp, algo: Algorithm, runs: &[AccuracyRun]) -> Self {
        let finals: Vec<f64> = runs.iter().map(|r| r.final_error).collect();
        let bests: Vec<f64> = runs.iter().map(|r| r.best_error).collect();
        let pushes: Vec<f64> = runs.iter().map(|r| f64::from(r.pushes)).collect();
        AccuracySummary {
            network,
            n: 1 << (3 * i),
            op,
            algo,
            runs: runs.len(),
            median_final: median(&finals),
            median_best: median(&bests),
            worst_final: finals.iter().copied().fold(0.0, f64::max),
            at_budget: runs.iter().filter(|r| r.at_budget).count(),
            median_pushes: median(&pushes),
        }
    }
}

fn write_accuracy_runs(
    ctx: &Ctx,
    jobs: &[AccuracyJob],
    runs: &[AccuracyRun],
) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .zip(runs)
        .map(|(j, r)| {
            vec![
                j.network.name().into(),
                (1u32 << (3 * j.i)).to_string(),
                op_name(j.op).into(),
                j.algo.name().into(),
                ctx.run_seed(&[3, u64::from(j.i), j.seed_index]).to_string(),
                sci(r.final_error),
                sci(r.best_error),
                r.at_budget.to_string(),
                r.pushes.to_string(),
            ]
        })
        .collect();
    ctx.write_csv(
        "fig3_6_runs.csv",
        &[
            "topology",
            "n",
            "op",
            "algo",
            "seed",
            "final_max_rel_error",
            "best_max_rel_error",
            "stopped_by_budget",
            "pushes",
        ],
        &rows,
    )
}

fn print_accuracy(budget: u32, summaries: &[AccuracySummary]) {
    println!(
        "eps = {EPS:e}, budget {budget} pushes; median over seeds of the max relative error over ranks"
    );
    println!("topology   N      op   algo  final     best      worst     at-budget  pushes");
    for s in summaries {
        println!(
            "{:<10} {:<6} {:<4} {:<5} {:<9} {:<9} {:<9} {:>3}/{:<5} {:>6.0}",
            s.network.name(),
            size_label(s.n),
            op_name(s.op),
            s.algo.name(),
            sci(s.median_final),
            sci(s.median_best),
            sci(s.worst_final),
            s.at_budget,
            s.runs,
            s.median_pushes
        );
    }
}

fn write_accuracy_summary(ctx: &Ctx, summaries: &[AccuracySummary]) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = summaries
        .iter()
        .map(|s| {
            vec![
                s.network.name().into(),
                s.n.to_string(),
                op_name(s.op).into(),
                s.algo.name().into(),
                s.runs.to_string(),
                sci(s.median_final),
                sci(s.median_best),
                sci(s.worst_final),
                s.at_budget.to_string(),
                format!("{:.0}", s.median_pushes),
            ]
        })
        .collect();
    ctx.write_csv(
        "fig3_6.csv",
        &[
            "topology",
            "n",
            "op",
            "algo",
            "runs",
            "median_final_max_rel_error",
            "median_best_max_rel_error",
            "worst_final_max_rel_error",
            "runs_at_budget",
            "median_pushes",
        ],
        &rows,
    )
}

fn accuracy_chart(
    ctx: &Ctx,
    exponents: &[u32],
    summaries: &[AccuracySummary],
) -> anyhow::Result<()> {
    let ns: Vec<u32> = exponents.iter().map(|&i| 1 << (3 * i)).collect();
    let mut series = Vec::new();
    for algo in ALGOS {
        for network in [Network::Torus, Network::Hypercube] {
            for op in [ReduceOp::Sum, ReduceOp::Average] {
                series.push(Series {
                    name: format!("{} {} {}", algo.name(), network.name(), op_name(op)),
                    values: ns
                        .iter()
                        .map(|&n| {
                            summaries
                                .iter()
                                .find(|s| (s.algo, s.network, s.op, s.n) == (algo, network, op, n))
                                .map(|s| s.median_final)
                        })
                        .collect(),
                });
            }
        }
    }
    let chart = error_chart(
        "003 Figs. 3, 6: accuracy reached with eps 1e-15, PF vs PCF",
        "ranks N (torus 2^i x 2^i x 2^i, hypercube 2^3i)",
        ns.iter().map(|&n| size_label(n)).collect(),
        series,
    );
    ctx.write("fig3_6.svg", &render(&chart))
}

fn accuracy_claim(summaries: &[AccuracySummary]) {
    let measured = |algo: Algorithm| {
        let of: Vec<&AccuracySummary> = summaries.iter().filter(|s| s.algo == algo).collect();
        let mut ns: Vec<u32> = of.iter().map(|s| s.n).collect();
        ns.dedup();
        // The worst topology and operator at each N.
        let at_n: Vec<String> = ns
            .iter()
            .map(|&n| {
                let here = of.iter().filter(|s| s.n == n);
                let final_error = here.clone().map(|s| s.median_final).fold(0.0, f64::max);
                let best = here.map(|s| s.median_best).fold(0.0, f64::max);
                format!(
                    "{} (best {}) at N = {}",
                    sci(final_error),
                    sci(best),
                    size_label(n)
                )
            })
            .collect();
        let reached: usize = of.iter().map(|s| s.runs - s.at_budget).sum();
        let total: usize = of.iter().map(|s| s.runs).sum();
        format!(
            "{} {}, eps reached in {reached}/{total} runs",
            algo.name(),
            at_n.join(", ")
        )
    };
    println!(
        "claim (003 Figs. 3, 6): PF's accuracy degrades as N grows; PCF reaches eps = 1e-15 on \
         torus and hypercube, sum and average, at every N; measured (worst over topology and \
         operator of the median max error at the stop): {}; {}",
        measured(Algorithm::Pf),
        measured(Algorithm::Pcf)
    );
}

// ---------------------------------------------------------------------------------------------
// Figs. 4 and 7: a permanent link failure.
// ---------------------------------------------------------------------------------------------

/// Ranks of Figs. 4 and 7: a 6-D hypercube.
const FAILURE_N: u32 = 64;

/// The failures of Figs. 4 and 7, in pushes per rank ("after 75 and 175 iterations").
const FAILURE_PUSHES: [u64; 2] = [75, 175];

/// Push budget of the failure runs.
const FAILURE_BUDGET: u32 = 800;

/// Width of the error envelope, in pushes. The max error over ranks is spiky: a rank that has
/// just pushed away most of its weight computes its ratio from small numbers, and one whose
/// weight is momentarily zero has an infinite error. The failure metrics therefore use the
/// envelope: at each push, the largest finite max error of the last `ENVELOPE` pushes.
const ENVELOPE: usize = 10;

/// Pushes after the failure in which the fall-back peak is looked for.
const PEAK_WINDOW: usize = 100;

/// What one failure run showed.
#[derive(Clone, Debug)]
struct FailureRun {
    algo: Algorithm,
    fail_push: u64,
    seed_index: u64,
    seed: u64,
    /// `(step, max error, median error)` every push period.
    history: Vec<(u64, f64, f64)>,
    /// Samples whose max error was not finite (a rank with zero weight).
    non_finite: usize,
    /// The envelope after the first `ENVELOPE` pushes.
    start_error: f64,
    /// The envelope at the failure.
    at_failure: Option<f64>,
    /// Largest finite max error in the `PEAK_WINDOW` pushes after the failure.
    peak_after: Option<f64>,
    /// Pushes from the failure until the max error stays at or below `at_failure` for
    /// `ENVELOPE` pushes.
    regain: Option<u64>,
    final_error: f64,
    pushes: u32,
}

impl FailureRun {
    /// How far the failure set the run back, on a log scale: 0 = not at all (the peak after the
    /// failure is no higher than the envelope at it), 1 = back to the start.
    fn fall_back(&self) -> Option<f64> {
        let (at, peak) = (self.at_failure?, self.peak_after?);
        let share = (peak / at).log10() / (self.start_error / at).log10();
        Some(share.max(0.0))
    }
}

/// At each sample, the largest finite max error of the last `ENVELOPE` samples (NaN when none
/// is finite).
fn envelope(history: &[(u64, f64, f64)]) -> Vec<f64> {
    (0..history.len())
        .map(|k| {
            history[k.saturating_sub(ENVELOPE - 1)..=k]
                .iter()
                .map(|s| s.1)
                .filter(|e| e.is_finite())
                .fold(f64::NAN, f64::max)
        })
        .collect()
}

fn failure_run(
    ctx: &Ctx,
    algo: Algorithm,
    fail_push: u64,
    seed_index: u64,
) -> anyhow::Result<FailureRun> {
    let topology = Topology::hypercube(FAILURE_N)?;
    let spec = gossip_spec(algo, topology, ReduceOp::Average, FAILURE_BUDGET);
    let at = fail_push * STEPS_PER_PUSH;
    let seed = ctx.run_seed(&[4, seed_index]);
    let config = SimConfig {
        seed,
        faults: vec![FaultSpec::parse(&format!("cut:link=0-1,at={at}"))?],
        history_every: Some(STEPS_PER_PUSH),
        ..SimConfig::default()
    };
    let report = simulate_counted(ctx, &spec, config)?;
    let history = report.history;
    let env = envelope(&history);
    // Sample k is at step 12 k; the failure strikes at sample `fail`.
    let fail = fail_push as usize;
    let at_failure = env.get(fail).copied().filter(|e| !e.is_nan());
    let peak_after = history
        .iter()
        .skip(fail + 1)
        .take(PEAK_WINDOW)
        .map(|s| s.1)
        .filter(|e| e.is_finite())
        .reduce(f64::max);
    // The first window of `ENVELOPE` pushes wholly after the failure that stays at or below
    // the level, counted from the failure to the window's start: 0 without a setback.
    let regain = at_failure.and_then(|level| {
        (fail + ENVELOPE..env.len())
            .find(|&k| env[k] <= level)
            .map(|k| (k - ENVELOPE - fail) as u64)
    });
    Ok(FailureRun {
        algo,
        fail_push,
        seed_index,
        seed,
        non_finite: history.iter().filter(|s| !s.1.is_finite()).count(),
        start_error: env.get(ENVELOPE).copied().unwrap_or(f64::NAN),
        at_failure,
        peak_after,
        regain,
        final_error: report.max_rel_error,
        pushes: report.rounds,
        history,
    })
}

/// 003 Figs. 4 and 7.
pub fn fig4_7(ctx: &Ctx) -> anyhow::Result<()> {
    let seeds = u64::from(ctx.placements(3, 20));
    let mut jobs = Vec::new();
    for fail_push in FAILURE_PUSHES {
        for seed_index in 0..seeds {
            for algo in ALGOS {
                jobs.push((algo, fail_push, seed_index));
            }
        }
    }
    let runs = ctx
        .par_map(&jobs, |&(algo, fail_push, seed_index)| {
            failure_run(ctx, algo, fail_push, seed_index)
        })
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    print_failures(&runs);
    write_failure_summary(ctx, &runs)?;
    write_failure_histories(ctx, &runs)?;
    for fail_push in FAILURE_PUSHES {
        failure_chart(ctx, fail_push, &runs)?;
    }
    failure_claim(&runs);
    Ok(())
}

/// An optional number for tables and CSV ("-" for none).
fn opt<T: ToString>(x: Option<T>) -> String {
    x.map_or_else(|| "-".into(), |x| x.to_string())
}

fn print_failures(runs: &[FailureRun]) {
    println!(
        "N = {FAILURE_N} hypercube, average, eps = {EPS:e}, budget {FAILURE_BUDGET} pushes, link \
         0-1 fails for good; max relative error over ranks: start and at-fail are its envelope \
         (largest of the last {ENVELOPE} pushes), peak the largest in the {PEAK_WINDOW} pushes \
         after, regain the pushes until it stays at or below its level at the failure for \
         {ENVELOPE} pushes, fall-back log(peak/at-fail) / log(start/at-fail), inf-samples those with a zero weight"
    );
    println!(
        "fail@  seed algo  start     at-fail   peak-after  fall-back  regain  final     pushes  inf-samples"
    );
    for r in runs {
        println!(
            "{:<6} {:<4} {:<5} {:<9} {:<9} {:<11} {:<10} {:<7} {:<9} {:<7} {}",
            r.fail_push,
            r.seed_index,
            r.algo.name(),
            sci(r.start_error),
            opt(r.at_failure.map(sci)),
            opt(r.peak_after.map(sci)),
            opt(r.fall_back().map(|f| format!("{f:.2}"))),
            opt(r.regain),
            sci(r.final_error),
            r.pushes,
            r.non_finite
        );
    }
}

fn write_failure_summary(ctx: &Ctx, runs: &[FailureRun]) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.fail_push.to_string(),
                r.seed.to_string(),
                r.algo.name().into(),
                sci(r.start_error),
                opt(r.at_failure.map(sci)),
                opt(r.peak_after.map(sci)),
                opt(r.fall_back().map(|f| format!("{f:.3}"))),
                opt(r.regain),
                sci(r.final_error),
                r.pushes.to_string(),
                r.non_finite.to_string(),
            ]
        })
        .collect();
    ctx.write_csv(
        "fig4_7.csv",
        &[
            "failure_after_pushes",
            "seed",
            "algo",
            "start_max_error_envelope",
            "max_error_envelope_at_failure",
            "peak_max_error_after",
            "fall_back_log_share",
            "pushes_to_regain",
            "final_max_error",
            "pushes",
            "non_finite_samples",
        ],
        &rows,
    )
}

/// Every sampled point of every run (the first seed's are plotted).
fn write_failure_histories(ctx: &Ctx, runs: &[FailureRun]) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for r in runs {
        for &(t, worst, median) in &r.history {
            rows.push(vec![
                r.fail_push.to_string(),
                r.seed.to_string(),
                r.algo.name().into(),
                t.to_string(),
                format!("{:.2}", t as f64 / STEPS_PER_PUSH as f64),
                sci(worst),
                sci(median),
            ]);
        }
    }
    ctx.write_csv(
        "fig4_7_history.csv",
        &[
            "failure_after_pushes",
            "seed",
            "algo",
            "step",
            "pushes",
            "max_rel_error",
            "median_rel_error",
        ],
        &rows,
    )
}

/// The first seed's max error against pushes, PF and PCF, for one failure time.
fn failure_chart(ctx: &Ctx, fail_push: u64, runs: &[FailureRun]) -> anyhow::Result<()> {
    let plotted: Vec<&FailureRun> = runs
        .iter()
        .filter(|r| r.seed_index == 0 && r.fail_push == fail_push)
        .collect();
    let samples = plotted.iter().map(|r| r.history.len()).max().unwrap_or(0);
    // One sample per push period: tick k is k pushes per rank.
    let x_ticks = (0..samples).map(|k| k.to_string()).collect();
    let series = plotted
        .iter()
        .map(|r| Series {
            name: r.algo.name().into(),
            values: (0..samples)
                .map(|k| r.history.get(k).map(|s| s.1).filter(|e| e.is_finite()))
                .collect(),
        })
        .collect();
    let chart = error_chart(
        &format!("003 Figs. 4, 7: N = 64 hypercube, link 0-1 fails after {fail_push} pushes"),
        "pushes per rank (time / 12 steps)",
        x_ticks,
        series,
    );
    ctx.write(&format!("fig4_7_{fail_push}.svg"), &render(&chart))
}

fn failure_claim(runs: &[FailureRun]) {
    let mut parts = Vec::new();
    for fail_push in FAILURE_PUSHES {
        for algo in ALGOS {
            let mine: Vec<&FailureRun> = runs
                .iter()
                .filter(|r| r.algo == algo && r.fail_push == fail_push)
                .collect();
            let shares: Vec<f64> = mine.iter().filter_map(|r| r.fall_back()).collect();
            let regains: Vec<f64> = mine
                .iter()
                .map(|r| r.regain.map_or(f64::INFINITY, |p| p as f64))
                .collect();
            let finals: Vec<f64> = mine.iter().map(|r| r.final_error).collect();
            let worst_final = finals.iter().copied().fold(0.0, worse);
            parts.push(format!(
                "{} at {fail_push}: median fall-back {:.2}, median regain {} pushes, final error \
                 median {} worst {}",
                algo.name(),
                median(&shares),
                median(&regains),
                sci(median(&finals)),
                sci(worst_final)
            ));
        }
    }
    println!(
        "claim (003 Figs. 4, 7): after a permanent link failure PF falls back almost to the \
         start (fall-back near 1) whether it fails after 75 or 175 iterations; PCF shows no \
         fall-back (near 0), and both converge after it; measured: {}",
        parts.join("; ")
    );
}

// ---------------------------------------------------------------------------------------------
// Sec. IV, Fig. 8: dmGS.
// ---------------------------------------------------------------------------------------------

/// Columns of the factorized matrix (003 Sec. IV: V is n x 16).
const COLUMNS: usize = 16;

/// Push budget of each dmGS reduction ("a maximal number of iterations per reduction").
const DMGS_BUDGET: u32 = 1000;

/// A reduction whose max relative error over ranks exceeds this (or is not finite) failed: a
/// rank stopped by the budget at an instant when its weight was near zero.
const FAILED: f64 = 1e-8;

/// How dmGS sums: a gossip algorithm, or exact sums (the same steps, every rank the same R).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Summation {
    Gossip(Algorithm),
    Exact,
}

impl Summation {
    fn name(self) -> &'static str {
        match self {
            Summation::Gossip(algo) => algo.name(),
            Summation::Exact => "exact",
        }
    }
}

/// Rank i's row of V: 16 draws uniform in (0, 1) from the stream `i` of `seed` (the example
/// `dmgs` draws the same).
fn matrix_row(seed: u64, rank: u32) -> [f64; COLUMNS] {
    let mut rng = SimRng::for_stream(seed, u64::from(rank));
    std::array::from_fn(|_| rng.next_open01())
}

/// One rank's state in dmGS: its row of V (overwritten), its row of Q and its own estimate of R
/// (upper triangle).
#[derive(Clone, Copy, Debug)]
struct Rows {
    v: [f64; COLUMNS],
    q: [f64; COLUMNS],
    r: [[f64; COLUMNS]; COLUMNS],
}

/// The state of a dmGS run: every rank's [`Rows`].
struct Dmgs {
    ranks: Vec<Rows>,
}

/// How the reductions of one dmGS run went.
#[derive(Clone, Copy, Debug, Default)]
struct ReductionStats {
    reductions: u32,
    at_budget: u32,
    /// Reductions after which some rank's estimate was off by more than `FAILED` (relative).
    failed: u32,
    pushes: u64,
}

/// Sums each rank's `len` values over all ranks; every rank gets its own estimate.
struct Reducer<'a> {
    ctx: &'a Ctx,
    summation: Summation,
    n: u32,
    /// Seeds of the reductions derive from this and the step.
    seed: u64,
    stats: ReductionStats,
}

impl Reducer<'_> {
    fn sum(&mut self, inputs: &[Vec<f64>]) -> anyhow::Result<Vec<Vec<f64>>> {
        self.stats.reductions += 1;
        let step = self.stats.reductions;
        match self.summation {
            Summation::Exact => {
                let len = inputs.first().map_or(0, Vec::len);
                let total: Vec<f64> = (0..len)
                    .map(|e| inputs.iter().map(|row| row[e]).sum())
                    .collect();
                Ok(vec![total; inputs.len()])
            }
            Summation::Gossip(algo) => self.gossip(algo, step, inputs),
        }
    }

    fn gossip(
        &mut self,
        algo: Algorithm,
        step: u32,
        inputs: &[Vec<f64>],
    ) -> anyhow::Result<Vec<Vec<f64>>> {
        let len = inputs.first().map_or(0, Vec::len);
        let mut spec = gossip_spec(
            algo,
            Topology::hypercube(self.n)?,
            ReduceOp::Sum,
            DMGS_BUDGET,
        );
        spec.input_len = len;
        spec.validate()?;
        let seed = self.ctx.run_seed(&[self.seed, u64::from(step)]);
        let config = spec.sim_config(SimConfig {
            seed,
            ..SimConfig::default()
        });
        let ranks = spec.gossip_ranks::<f64>(OpId(u64::from(step)), seed, STEPS_PER_PUSH)?;
        let flat: Vec<f64> = inputs.iter().flatten().copied().collect();
        let mut sim = Simulation::new(config, ranks, flat, len, ReduceOp::Sum)?;
        let report = sim.run();
        self.ctx.runs.fetch_add(1, Ordering::Relaxed);
        if report.completed != self.n || report.truncated {
            bail!(
                "dmGS reduction {step} over {} ranks did not complete",
                self.n
            );
        }
        self.stats.at_budget += u32::from(report.stopped_by_budget);
        self.stats.failed +=
            u32::from(report.max_rel_error.is_nan() || report.max_rel_error > FAILED);
        self.stats.pushes += u64::from(report.rounds);
        let estimates: Vec<Vec<f64>> = sim
            .ranks()
            .iter()
            .map(|rank| {
                let mut estimate = Vec::new();
                rank.estimate(&mut estimate);
                estimate
            })
            .collect();
        if estimates.iter().any(|e| e.len() != len) {
            bail!("dmGS reduction {step}: a rank's estimate does not hold {len} values");
        }
        Ok(estimates)
    }
}

impl Dmgs {
    fn new(original: &[[f64; COLUMNS]]) -> Dmgs {
        let ranks = original
            .iter()
            .map(|&v| Rows {
                v,
                q: [0.0; COLUMNS],
                r: [[0.0; COLUMNS]; COLUMNS],
            })
            .collect();
        Dmgs { ranks }
    }

    /// Modified Gram-Schmidt, one column at a time (the steps of the example `dmgs`):
    /// 1. `||v_k||^2` by a sum; each rank takes the root of its estimate as r_kk and sets
    ///    `q_ik = v_ik / r_kk`;
    /// 2. `r_kj = sum_i q_ik v_ij` for every j > k as one vector sum (15 - k values);
    /// 3. each rank updates its row: `v_ij -= q_ik r_kj` with its own estimates.
    fn factorize(&mut self, reducer: &mut Reducer<'_>) -> anyhow::Result<()> {
        for k in 0..COLUMNS {
            let squares: Vec<Vec<f64>> = self
                .ranks
                .iter()
                .map(|rows| vec![rows.v[k] * rows.v[k]])
                .collect();
            let norms = reducer.sum(&squares)?;
            for (rows, norm_sq) in self.ranks.iter_mut().zip(&norms) {
                let norm = norm_sq[0].sqrt();
                rows.r[k][k] = norm;
                rows.q[k] = rows.v[k] / norm;
            }
            if k + 1 == COLUMNS {
                break;
            }
            let dots: Vec<Vec<f64>> = self
                .ranks
                .iter()
                .map(|rows| (k + 1..COLUMNS).map(|j| rows.q[k] * rows.v[j]).collect())
                .collect();
            let r_rows = reducer.sum(&dots)?;
            for (rows, r_row) in self.ranks.iter_mut().zip(&r_rows) {
                for (j, &r_kj) in (k + 1..COLUMNS).zip(r_row) {
                    rows.r[k][j] = r_kj;
                    rows.v[j] -= rows.q[k] * r_kj;
                }
            }
        }
        Ok(())
    }

    /// `||V - Q R_j||_inf / ||V||_inf`: every row of Q times rank `j`'s estimate of R.
    fn factorization_error(&self, original: &[[f64; COLUMNS]], j: usize) -> f64 {
        let r = &self.ranks[j].r;
        let mut residual: f64 = 0.0;
        let mut norm: f64 = 0.0;
        for (v, rows) in original.iter().zip(&self.ranks) {
            let row_residual: f64 = (0..COLUMNS)
                .map(|c| {
                    let qr: f64 = (0..=c).map(|k| rows.q[k] * r[k][c]).sum();
                    (v[c] - qr).abs()
                })
                .sum();
            residual = worse(residual, row_residual);
            norm = norm.max(v.iter().map(|x| x.abs()).sum());
        }
        residual / norm
    }

    /// `||I - Q^T Q||_inf`.
    fn orthogonality_error(&self) -> f64 {
        (0..COLUMNS)
            .map(|k| {
                (0..COLUMNS)
                    .map(|l| {
                        let dot: f64 = self.ranks.iter().map(|rows| rows.q[k] * rows.q[l]).sum();
                        (f64::from(u8::from(k == l)) - dot).abs()
                    })
                    .sum::<f64>()
            })
            .fold(0.0, worse)
    }
}

/// What one dmGS run measured.
///
/// Each rank holds its own estimate R_j of R. The factorization error takes one R for all
/// rows: rank 0's (the figure), and the worst over all ranks j. Row i against rank i's own R
/// is no measure: MGS makes `v_i = q_i R_i` hold row by row for whatever R_i the rank used,
/// so that error is local rounding (about 1e-16) however inaccurate the reductions were.
#[derive(Clone, Copy, Debug)]
struct DmgsRun {
    /// `||V - Q R_0|| / ||V||`.
    rank0_r_error: f64,
    /// The largest `||V - Q R_j|| / ||V||` over ranks j.
    worst_r_error: f64,
    /// `||I - Q^T Q||`.
    orthogonality: f64,
    stats: ReductionStats,
}

/// The seed of run `run`'s matrix at `n` ranks (the same for every summation).
fn matrix_seed(ctx: &Ctx, n: u32, run: u64) -> u64 {
    ctx.run_seed(&[8, u64::from(n), run])
}

fn dmgs_run(ctx: &Ctx, summation: Summation, n: u32, run: u64) -> anyhow::Result<DmgsRun> {
    let matrix_seed = matrix_seed(ctx, n, run);
    let original: Vec<[f64; COLUMNS]> = (0..n).map(|i| matrix_row(matrix_seed, i)).collect();
    let mut dmgs = Dmgs::new(&original);
    let mut reducer = Reducer {
        ctx,
        summation,
        n,
        seed: matrix_seed,
        stats: ReductionStats::default(),
    };
    dmgs.factorize(&mut reducer)
        .with_context(|| format!("dmGS({}) over {n} ranks", summation.name()))?;
    let errors: Vec<f64> = (0..dmgs.ranks.len())
        .map(|j| dmgs.factorization_error(&original, j))
        .collect();
    Ok(DmgsRun {
        rank0_r_error: errors[0],
        worst_r_error: errors.iter().copied().fold(0.0, worse),
        orthogonality: dmgs.orthogonality_error(),
        stats: reducer.stats,
    })
}

/// N of Fig. 8: 2^4..2^6 by default, 2^4..2^10 with `--full`. N starts at 16 because V is
/// N x 16 and 003 takes n >= m: with fewer rows than columns the trailing columns are
/// rounding noise and their norms near zero.
fn dmgs_sizes(ctx: &Ctx) -> Vec<u32> {
    let top = if ctx.full { 10 } else { 6 };
    (4..=top)
        .map(|p| 1u32 << p)
        .filter(|&n| n <= ctx.max_ranks)
        .collect()
}

/// One point of Fig. 8.
struct DmgsPoint {
    summation: Summation,
    n: u32,
    runs: Vec<DmgsRun>,
}

impl DmgsPoint {
    fn mean_of(&self, f: impl Fn(&DmgsRun) -> f64) -> f64 {
        mean(&self.runs.iter().map(f).collect::<Vec<_>>())
    }

    fn median_of(&self, f: impl Fn(&DmgsRun) -> f64) -> f64 {
        median(&self.runs.iter().map(f).collect::<Vec<_>>())
    }

    /// Runs in which some reduction failed.
    fn failed_runs(&self) -> usize {
        self.runs.iter().filter(|r| r.stats.failed > 0).count()
    }

    fn total_of(&self, f: impl Fn(&ReductionStats) -> u64) -> u64 {
        self.runs.iter().map(|r| f(&r.stats)).sum()
    }
}

/// 003 Sec. IV, Fig. 8.
pub fn dmgs(ctx: &Ctx) -> anyhow::Result<()> {
    let repeats = u64::from(ctx.placements(3, 50));
    let sizes = dmgs_sizes(ctx);
    let mut jobs = Vec::new();
    for &n in &sizes {
        for summation in SUMMATIONS {
            for run in 0..repeats {
                jobs.push((summation, n, run));
            }
        }
    }
    ctx.progress(&format!("{} dmGS factorizations", jobs.len()));
    let runs = ctx
        .par_map(&jobs, |&(summation, n, run)| {
            dmgs_run(ctx, summation, n, run)
        })
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    write_dmgs_runs(ctx, &jobs, &runs)?;
    let mut points: Vec<DmgsPoint> = Vec::new();
    for (&(summation, n, _), run) in jobs.iter().zip(runs) {
        match points.last_mut() {
            Some(p) if p.summation == summation && p.n == n => p.runs.push(run),
            _ => points.push(DmgsPoint {
                summation,
                n,
                runs: vec![run],
            }),
        }
    }
    print_dmgs(&points);
    write_dmgs(ctx, &points)?;
    dmgs_chart(ctx, &sizes, &points)?;
    dmgs_claim(&points);
    Ok(())
}

/// Every factorization, with the seed of its matrix (which the example `dmgs` takes).
fn write_dmgs_runs(
    ctx: &Ctx,
    jobs: &[(Summation, u32, u64)],
    runs: &[DmgsRun],
) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .zip(runs)
        .map(|(&(summation, n, run), r)| {
            vec![
                n.to_string(),
                summation.name().into(),
                run.to_string(),
                matrix_seed(ctx, n, run).to_string(),
                sci(r.rank0_r_error),
                sci(r.worst_r_error),
                sci(r.orthogonality),
                r.stats.reductions.to_string(),
                r.stats.at_budget.to_string(),
                r.stats.failed.to_string(),
                r.stats.pushes.to_string(),
            ]
        })
        .collect();
    ctx.write_csv(
        "dmgs_runs.csv",
        &[
            "n",
            "summation",
            "run",
            "matrix_seed",
            "factorization_error_rank0_r",
            "factorization_error_worst_r",
            "orthogonality_error",
            "reductions",
            "reductions_at_budget",
            "reductions_failed",
            "pushes_of_busiest_rank_summed",
        ],
        &rows,
    )
}

fn print_dmgs(points: &[DmgsPoint]) {
    println!(
        "V: N x {COLUMNS} uniform (0,1), hypercube of N ranks, each reduction eps = {EPS:e} with \
         at most {DMGS_BUDGET} pushes; factorization error ||V - Q R_j||_inf / ||V||_inf with rank \
         0's R and with the worst rank's R, orthogonality ||I - Q^T Q||_inf; mean (median) over \
         runs; reductions that ran to the budget; runs in which a reduction failed (some rank \
         off by more than {FAILED:e}; the error then spreads to every later step)"
    );
    println!(
        "N      sum    runs  rank-0 R            worst R    ||I-QtQ||  at-budget    failed  pushes/reduction"
    );
    for p in points {
        let reductions = p.total_of(|s| u64::from(s.reductions)).max(1);
        println!(
            "{:<6} {:<6} {:<5} {:<9} ({:<8}) {:<10} {:<10} {:>5}/{:<6} {:<7} {:.0}",
            size_label(p.n),
            p.summation.name(),
            p.runs.len(),
            sci(p.mean_of(|r| r.rank0_r_error)),
            sci(p.median_of(|r| r.rank0_r_error)),
            sci(p.mean_of(|r| r.worst_r_error)),
            sci(p.mean_of(|r| r.orthogonality)),
            p.total_of(|s| u64::from(s.at_budget)),
            reductions,
            format!("{}/{}", p.failed_runs(), p.runs.len()),
            p.total_of(|s| s.pushes) as f64 / reductions as f64
        );
    }
}

fn write_dmgs(ctx: &Ctx, points: &[DmgsPoint]) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                p.n.to_string(),
                p.summation.name().into(),
                p.runs.len().to_string(),
                sci(p.mean_of(|r| r.rank0_r_error)),
                sci(p.median_of(|r| r.rank0_r_error)),
                sci(p.mean_of(|r| r.worst_r_error)),
                sci(p.mean_of(|r| r.orthogonality)),
                p.total_of(|s| u64::from(s.reductions)).to_string(),
                p.total_of(|s| u64::from(s.at_budget)).to_string(),
                p.total_of(|s| u64::from(s.failed)).to_string(),
                p.failed_runs().to_string(),
                p.total_of(|s| s.pushes).to_string(),
            ]
        })
        .collect();
    ctx.write_csv(
        "dmgs.csv",
        &[
            "n",
            "summation",
            "runs",
            "mean_factorization_error_rank0_r",
            "median_factorization_error_rank0_r",
            "mean_factorization_error_worst_r",
            "mean_orthogonality_error",
            "reductions",
            "reductions_at_budget",
            "reductions_failed",
            "runs_with_a_failed_reduction",
            "pushes_of_busiest_rank_summed",
        ],
        &rows,
    )
}

/// The summations of Fig. 8, plus the exact reference.
const SUMMATIONS: [Summation; 3] = [
    Summation::Gossip(Algorithm::Pf),
    Summation::Gossip(Algorithm::Pcf),
    Summation::Exact,
];

fn dmgs_chart(ctx: &Ctx, sizes: &[u32], points: &[DmgsPoint]) -> anyhow::Result<()> {
    let series = SUMMATIONS
        .into_iter()
        .map(|summation| Series {
            name: format!("dmGS({})", summation.name()),
            values: sizes
                .iter()
                .map(|&n| {
                    points
                        .iter()
                        .find(|p| p.summation == summation && p.n == n)
                        .map(|p| p.median_of(|r| r.rank0_r_error))
                })
                .collect(),
        })
        .collect();
    let mut chart = error_chart(
        "003 Fig. 8: dmGS factorization error, hypercube",
        "ranks N = rows of V",
        sizes.iter().map(|&n| size_label(n)).collect(),
        series,
    );
    // The median: one failed reduction makes a run's error infinite, and the mean with it.
    chart.y_label = "median ||V - Q R_0|| / ||V|| (log scale)".into();
    ctx.write("dmgs.svg", &render(&chart))
}

fn dmgs_claim(points: &[DmgsPoint]) {
    let trend = |summation: Summation| {
        let values: Vec<String> = points
            .iter()
            .filter(|p| p.summation == summation)
            .map(|p| {
                format!(
                    "{} (median {}) at N = {}",
                    sci(p.mean_of(|r| r.rank0_r_error)),
                    sci(p.median_of(|r| r.rank0_r_error)),
                    size_label(p.n)
                )
            })
            .collect();
        let mine = points.iter().filter(|p| p.summation == summation);
        let failed: usize = mine.clone().map(DmgsPoint::failed_runs).sum();
        let total: usize = mine.map(|p| p.runs.len()).sum();
        format!(
            "dmGS({}) {} (a reduction failed in {failed}/{total} runs)",
            summation.name(),
            values.join(", ")
        )
    };
    println!(
        "claim (003 Fig. 8): dmGS(PCF) reaches the 1e-15 target of its reductions and does not \
         grow with N, dmGS(PF) misses it and grows with N; measured (mean and median over runs of \
         ||V - Q R_0|| / ||V||): {}; {}; reference {}",
        trend(Summation::Gossip(Algorithm::Pf)),
        trend(Summation::Gossip(Algorithm::Pcf)),
        trend(Summation::Exact)
    );
}
