//! Paper 000's round-based gossip (Sec. 6) in the simulator: Figs. 9-10 (HPS iterations against
//! N), Fig. 12 (HPFLC against approximate recursive doubling) and Fig. 13 (HPFLC's iteration
//! overhead after one bit flip in a flow variable).
//!
//! # How
//! Every run is one simulation of all N ranks in the round cost model
//! ([`CostModel::rounds`]: one round is one step), averaging uniform inputs in (0, 1) as the
//! paper does. HPS pushes along one shared random permutation per round, HPFLC along one shared
//! random N-cycle per round, over a fully connected base topology. The simulator's oracle stops
//! every rank once the *largest* relative error over all ranks is at most eps (000 Sec. 6.2:
//! "terminated once the maximum relative error over all processes fell below a certain
//! threshold"); the round at which it does is the run's iteration count. ARDB is watched at its
//! root (000 Sec. 6.3: the error "at the root node"), one exchange counting as one iteration. A run
//! that needs more than [`ROUND_BUDGET`] rounds, is truncated, or leaves a rank incomplete stops
//! the experiment with a replay command.
//!
//! # Precision
//! HPS and HPFLC keep their state in f32 as in 000 Sec. 6 for eps >= 1e-3. Single precision
//! cannot reliably reach eps = 1e-6 (HPFLC in f32 at N = 16K never gets there), so every curve
//! with eps <= 1e-4 runs in f64 ([`Precision::for_eps`]); the tables and CSV files name the
//! precision of each curve. ARDB always computes in f64.
//!
//! # Seeds
//! Run `r` at size N uses one seed for every eps and algorithm of a figure (derived from the base
//! seed, the figure and `(N, r)`), so the curves of a figure share inputs and permutations.
//! Runs per point: `--placements`, else 10 (Figs. 9-10 and 12) or 3 (Fig. 13), with `--full`
//! 100 and 20 as in the paper.

use std::sync::atomic::Ordering;

use anyhow::{anyhow, bail, Context};
use ftcoll_algos::gossip::permutation::cycle_partners;
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::{Rank, ReduceOp};
use ftcoll_runtime::faults::FaultSpec;
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{CostModel, InputKind, OracleStop, OracleWatch, SimConfig, SimReport};

use super::svg::{render, Chart, Kind, Series};
use super::{fmt, size_label, Ctx};

/// Round budget of one gossip run; a run that has not converged by then fails.
pub const ROUND_BUDGET: u32 = 500;

/// Seed tags: each figure draws its own runs.
const TAG_FIG9_10: u64 = 9_10;
const TAG_FIG12: u64 = 12;
const TAG_FIG13: u64 = 13;

/// Fig. 10's accuracy targets (low accuracy).
const FIG10_EPS: [f64; 3] = [1e-1, 1e-2, 1e-3];
/// Fig. 9's accuracy targets (high accuracy).
const FIG9_EPS: [f64; 3] = [1e-4, 1e-5, 1e-6];
/// Fig. 13's accuracy target.
const FIG13_EPS: f64 = 1e-3;
/// Fig. 13: the round (= step) at which the flow bit flips.
const FLIP_AT: u64 = 2;
/// Bits of an f32 flow element.
const F32_BITS: u32 = 32;

/// Floating-point type of the gossip state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Precision {
    Single,
    Double,
}

impl Precision {
    /// f32 down to eps = 1e-3, f64 below (see the module docs).
    fn for_eps(eps: f64) -> Precision {
        if eps >= 1e-3 * 0.999 {
            Precision::Single
        } else {
            Precision::Double
        }
    }

    fn label(self) -> &'static str {
        match self {
            Precision::Single => "f32",
            Precision::Double => "f64",
        }
    }
}

/// One kind of run: algorithm, N, accuracy target, precision.
#[derive(Clone, Copy, Debug)]
struct Job {
    algo: Algorithm,
    n: u32,
    eps: f64,
    precision: Precision,
    /// Stop when rank 0 is within eps, as ARDB's oracle does (000 Sec. 6.3 judges HPS and
    /// ARDB "at the root node"); otherwise every rank must be.
    root_only: bool,
}

impl Job {
    /// HPS or HPFLC at the precision [`Precision::for_eps`] picks; ARDB in f64.
    fn new(algo: Algorithm, n: u32, eps: f64) -> Job {
        let precision = if algo.is_round_based_gossip() {
            Precision::for_eps(eps)
        } else {
            Precision::Double
        };
        Job {
            algo,
            n,
            eps,
            precision,
            root_only: false,
        }
    }

    /// The job the simulator runs.
    fn spec(&self) -> JobSpec {
        let mut spec = JobSpec::new(self.algo, self.n);
        spec.op = ReduceOp::Average;
        spec.input = InputKind::Uniform;
        spec.eps = Some(self.eps);
        if self.algo.is_round_based_gossip() {
            spec.steps = Some(ROUND_BUDGET);
            spec.gossip.single = Some(self.precision == Precision::Single);
        }
        spec
    }

    /// The command line that replays one run.
    fn replay(&self, seed: u64, faults: &[String]) -> String {
        let mut command = format!(
            "ftcoll-launch --sim --no-tui -n {} --algo {} --op avg --input uniform --eps {:e} --cost rounds --seed {seed}",
            self.n, self.algo, self.eps
        );
        if self.algo.is_round_based_gossip() {
            command.push_str(&format!(
                " --steps {ROUND_BUDGET} --precision {}",
                self.precision.label()
            ));
        }
        for fault in faults {
            command.push_str(&format!(" --fault {fault}"));
        }
        command
    }
}

/// Runs `job` with seed `seed` and the faults `faults` (`--fault` specs), checks that the
/// oracle stopped it at the accuracy target with every rank complete, and returns the report.
fn run_job(ctx: &Ctx, job: &Job, seed: u64, faults: &[String]) -> anyhow::Result<SimReport> {
    let replay = || job.replay(seed, faults);
    let parsed = faults
        .iter()
        .map(|f| FaultSpec::parse(f).map_err(|e| anyhow!("fault '{f}': {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let oracle_stop = (job.root_only && job.algo.is_round_based_gossip()).then_some(OracleStop {
        eps: job.eps,
        watch: OracleWatch::Rank(Rank(0)),
        max_round: Some(ROUND_BUDGET),
    });
    let config = SimConfig {
        seed,
        cost: CostModel::rounds(),
        faults: parsed,
        oracle_stop,
        ..SimConfig::default()
    };
    let report = simulate(&job.spec(), config).map_err(|e| anyhow!("{e}; replay: {}", replay()))?;
    ctx.runs.fetch_add(1, Ordering::Relaxed);
    if report.truncated
        || report.stopped_by_budget
        || report.oracle_stop_round.is_none()
        || report.aborted > 0
        || report.incomplete > 0
        || report.completed != job.n
    {
        bail!(
            "a run did not reach eps = {:e} (stop round {:?}, by budget {}, truncated {}, \
             completed {} of {}, aborted {}, incomplete {}, error {:e}); replay: {}",
            job.eps,
            report.oracle_stop_round,
            report.stopped_by_budget,
            report.truncated,
            report.completed,
            job.n,
            report.aborted,
            report.incomplete,
            report.max_rel_error,
            replay()
        );
    }
    Ok(report)
}

/// Iterations (oracle stop round) of a checked report.
fn iterations(report: &SimReport) -> u32 {
    report.oracle_stop_round.unwrap_or(0)
}

/// Median, minimum and maximum iterations over the runs of one point.
#[derive(Clone, Copy, Debug)]
struct Summary {
    median: f64,
    min: u32,
    max: u32,
}

impl Summary {
    /// The summary of `values` (the median of an even count is the mean of the middle two).
    fn of(values: &[u32]) -> anyhow::Result<Summary> {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let (Some(&min), Some(&max)) = (sorted.first(), sorted.last()) else {
            bail!("no runs to summarize");
        };
        let mid = sorted.len() / 2;
        let median = if !sorted.len().is_multiple_of(2) {
            f64::from(sorted[mid])
        } else {
            (f64::from(sorted[mid - 1]) + f64::from(sorted[mid])) / 2.0
        };
        Ok(Summary { median, min, max })
    }
}

/// One curve of a figure: an algorithm at one eps, summarized at every N.
#[derive(Clone, Debug)]
struct Curve {
    algo: Algorithm,
    eps: f64,
    precision: Precision,
    /// `(N, summary)`, N ascending.
    points: Vec<(u32, Summary)>,
}

impl Curve {
    /// `hps 1e-3 (f32)`.
    fn label(&self) -> String {
        format!(
            "{} {} ({})",
            self.algo,
            eps_label(self.eps),
            self.precision.label()
        )
    }

    /// The summary at `n`.
    fn at(&self, n: u32) -> Option<Summary> {
        self.points.iter().find(|(m, _)| *m == n).map(|(_, s)| *s)
    }
}

/// `1e-3`.
fn eps_label(eps: f64) -> String {
    format!("{eps:.0e}")
}

/// Powers of two from 16 up to 2^`default_top` (2^`full_top` with `--full`), capped by
/// `--max-ranks` (at least N = 16 stays).
fn sizes(ctx: &Ctx, default_top: u32, full_top: u32) -> Vec<u32> {
    let top = if ctx.full { full_top } else { default_top };
    let capped: Vec<u32> = (4..=top)
        .map(|p| 1u32 << p)
        .filter(|&n| n <= ctx.max_ranks)
        .collect();
    if capped.is_empty() {
        vec![16]
    } else {
        capped
    }
}

/// Runs every curve `(algo, eps)` at every size, `runs` times, and summarizes. Run `r` at size
/// N has the same seed on every curve. Large N go first, so that the two workers finish
/// together.
fn sweep(
    ctx: &Ctx,
    tag: u64,
    curves: &[(Algorithm, f64)],
    sizes: &[u32],
    runs: u32,
) -> anyhow::Result<Vec<Curve>> {
    let mut items = Vec::new();
    for &n in sizes.iter().rev() {
        for (c, &(algo, eps)) in curves.iter().enumerate() {
            for run in 0..runs {
                let mut job = Job::new(algo, n, eps);
                job.root_only = tag == TAG_FIG12;
                items.push((c, job, run));
            }
        }
    }
    let results = ctx.par_map(&items, |(_, job, run)| {
        if *run == 0 {
            ctx.progress(&format!(
                "{} N = {}, eps = {}: {runs} runs",
                job.algo,
                size_label(job.n),
                eps_label(job.eps)
            ));
        }
        let seed = ctx.run_seed(&[tag, u64::from(job.n), u64::from(*run)]);
        run_job(ctx, job, seed, &[]).map(|r| iterations(&r))
    });
    let mut done = Vec::new();
    for (c, &(algo, eps)) in curves.iter().enumerate() {
        let mut points = Vec::new();
        for &n in sizes {
            let values: Vec<u32> = items
                .iter()
                .zip(&results)
                .filter(|((ci, job, _), _)| *ci == c && job.n == n)
                .map(|(_, r)| r.as_ref().copied().map_err(|e| anyhow!("{e:#}")))
                .collect::<anyhow::Result<_>>()?;
            points.push((n, Summary::of(&values)?));
        }
        done.push(Curve {
            algo,
            eps,
            precision: Job::new(algo, 16, eps).precision,
            points,
        });
    }
    Ok(done)
}

/// Medians of `curves` as chart series over `sizes`.
fn median_series(curves: &[&Curve], sizes: &[u32]) -> Vec<Series> {
    curves
        .iter()
        .map(|c| Series {
            name: c.label(),
            values: sizes.iter().map(|&n| c.at(n).map(|s| s.median)).collect(),
        })
        .collect()
}

/// The series log2 N (recursive doubling's iterations).
fn log2_series(sizes: &[u32]) -> Series {
    Series {
        name: "log2 N (RDB)".into(),
        values: sizes.iter().map(|&n| Some(f64::from(n.ilog2()))).collect(),
    }
}

/// A line chart of iterations against N.
fn iterations_chart(title: &str, sizes: &[u32], series: Vec<Series>) -> Chart {
    Chart {
        title: title.into(),
        x_label: "ranks N (log2 scale)".into(),
        y_label: "iterations".into(),
        x_ticks: sizes.iter().map(|&n| size_label(n)).collect(),
        series,
        kind: Kind::Lines,
        log_y: false,
    }
}

/// CSV rows `n, log2_n, algo, eps, precision, runs, median, min, max` of `curves`.
fn curve_rows(curves: &[Curve], runs: u32) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for curve in curves {
        for (n, s) in &curve.points {
            rows.push(vec![
                n.to_string(),
                n.ilog2().to_string(),
                curve.algo.to_string(),
                format!("{:e}", curve.eps),
                curve.precision.label().into(),
                runs.to_string(),
                fmt(s.median),
                s.min.to_string(),
                s.max.to_string(),
            ]);
        }
    }
    rows
}

/// The header of [`curve_rows`].
const CURVE_HEADER: [&str; 9] = [
    "n",
    "log2_n",
    "algo",
    "eps",
    "precision",
    "runs",
    "median_iterations",
    "min_iterations",
    "max_iterations",
];

/// 000 Figs. 9-10: median HPS iterations against N, eps 1e-1 .. 1e-3 (Fig. 10, f32) and
/// 1e-4 .. 1e-6 (Fig. 9, f64), beside log2 N. Writes `fig9_10.csv`, `fig9.svg`, `fig10.svg`.
pub fn fig9_10(ctx: &Ctx) -> anyhow::Result<()> {
    let sizes = sizes(ctx, 14, 20);
    let runs = ctx.placements(10, 100);
    let targets: Vec<(Algorithm, f64)> = FIG10_EPS
        .iter()
        .chain(&FIG9_EPS)
        .map(|&eps| (Algorithm::Hps, eps))
        .collect();
    println!(
        "HPS, median iterations of {runs} runs (oracle: every rank within eps; eps >= 1e-3 in f32, \
         eps <= 1e-4 in f64)"
    );
    let curves = sweep(ctx, TAG_FIG9_10, &targets, &sizes, runs)?;
    print_median_table(&curves, &sizes);
    ctx.write_csv("fig9_10.csv", &CURVE_HEADER, &curve_rows(&curves, runs))?;
    for (file, title, eps_set) in [
        (
            "fig9.svg",
            "000 Fig. 9: HPS, high accuracy (f64)",
            &FIG9_EPS,
        ),
        (
            "fig10.svg",
            "000 Fig. 10: HPS, low accuracy (f32)",
            &FIG10_EPS,
        ),
    ] {
        let chosen: Vec<&Curve> = curves.iter().filter(|c| eps_set.contains(&c.eps)).collect();
        let mut series = median_series(&chosen, &sizes);
        series.push(log2_series(&sizes));
        ctx.write(file, &render(&iterations_chart(title, &sizes, series)))?;
    }
    for curve in &curves {
        println!("{}", growth_claim(curve));
    }
    Ok(())
}

/// Prints N, log2 N and the median of every curve.
fn print_median_table(curves: &[Curve], sizes: &[u32]) {
    let mut head = format!("{:<6} {:>5}", "N", "log2N");
    for c in curves {
        head.push_str(&format!(
            " {:>11}",
            format!("{} {}", eps_label(c.eps), c.precision.label())
        ));
    }
    println!("{head}");
    for &n in sizes {
        let mut line = format!("{:<6} {:>5}", size_label(n), n.ilog2());
        for c in curves {
            let median = c.at(n).map_or("-".into(), |s| format!("{:.1}", s.median));
            line.push_str(&format!(" {median:>11}"));
        }
        println!("{line}");
    }
}

/// Figs. 9-10's claim against one HPS curve: the growth per doubling of N over the upper half of
/// the sizes, and where the median falls below log2 N.
fn growth_claim(curve: &Curve) -> String {
    let claim = format!(
        "claim (HPS, eps {}): iterations grow slower than log2 N (< 1 per doubling of N), fewer \
         than log2 N at low accuracy and large N",
        eps_label(curve.eps)
    );
    let (Some(&(n_mid, mid)), Some(&(n_top, top))) = (
        curve.points.get(curve.points.len() / 2),
        curve.points.last(),
    ) else {
        return format!("{claim}; measured: no points");
    };
    let doublings = f64::from(n_top.ilog2() - n_mid.ilog2());
    let slope = if doublings > 0.0 {
        format!(
            "{:+.2} iterations per doubling over N = {}..{}",
            (top.median - mid.median) / doublings,
            size_label(n_mid),
            size_label(n_top)
        )
    } else {
        "one size only, no growth measured".into()
    };
    let below = curve
        .points
        .iter()
        .find(|(n, s)| s.median < f64::from(n.ilog2()))
        .map_or(
            format!("median >= log2 N up to N = {}", size_label(n_top)),
            |(n, _)| format!("median < log2 N from N = {}", size_label(*n)),
        );
    format!(
        "{claim}; measured: {slope}; median {:.1} vs log2 N = {} at N = {}; {below}",
        top.median,
        n_top.ilog2(),
        size_label(n_top)
    )
}

/// 000 Fig. 12: HPFLC against ARDB, iterations (median, min, max) against N for eps 1e-2 ..
/// 1e-4 (with `--full` also 1e-5). Writes `fig12.csv` and `fig12.svg`.
pub fn fig12(ctx: &Ctx) -> anyhow::Result<()> {
    let sizes = sizes(ctx, 14, 20);
    let runs = ctx.placements(10, 100);
    let eps_set: &[f64] = if ctx.full {
        &[1e-2, 1e-3, 1e-4, 1e-5]
    } else {
        &[1e-2, 1e-3, 1e-4]
    };
    let mut targets = Vec::new();
    for &eps in eps_set {
        targets.push((Algorithm::Hpflc, eps));
        targets.push((Algorithm::Ardb, eps));
    }
    println!(
        "HPFLC vs ARDB, both judged at the root (rank 0 within eps, as 000 Sec. 6.3; f32 for \
         eps >= 1e-3, f64 below), iterations median [min, max] over {runs} runs"
    );
    let curves = sweep(ctx, TAG_FIG12, &targets, &sizes, runs)?;
    print_range_table(&curves, &sizes);
    ctx.write_csv("fig12.csv", &CURVE_HEADER, &curve_rows(&curves, runs))?;
    let all: Vec<&Curve> = curves.iter().collect();
    let mut series = median_series(&all, &sizes);
    series.push(log2_series(&sizes));
    let chart = iterations_chart(
        "000 Fig. 12: HPFLC vs ARDB (median iterations)",
        &sizes,
        series,
    );
    ctx.write("fig12.svg", &render(&chart))?;
    for pair in curves.chunks(2) {
        if let [hpflc, ardb] = pair {
            println!("{}", versus_claim(hpflc, ardb));
        }
    }
    Ok(())
}

/// Prints, per N, `median [min, max]` of every curve.
fn print_range_table(curves: &[Curve], sizes: &[u32]) {
    let mut head = format!("{:<6} {:>5}", "N", "log2N");
    for c in curves {
        head.push_str(&format!(
            " {:>16}",
            format!("{} {}", c.algo, eps_label(c.eps))
        ));
    }
    println!("{head}");
    for &n in sizes {
        let mut line = format!("{:<6} {:>5}", size_label(n), n.ilog2());
        for c in curves {
            let cell = c.at(n).map_or("-".into(), |s| {
                format!("{:.1} [{}, {}]", s.median, s.min, s.max)
            });
            line.push_str(&format!(" {cell:>16}"));
        }
        println!("{line}");
    }
}

/// Fig. 12's claim at one eps: where HPFLC's median is below ARDB's.
fn versus_claim(hpflc: &Curve, ardb: &Curve) -> String {
    let claim = format!(
        "claim (eps {}): HPFLC needs fewer iterations than ARDB at low accuracy",
        eps_label(hpflc.eps)
    );
    let mut wins = Vec::new();
    let mut last = None;
    for (n, h) in &hpflc.points {
        if let Some(a) = ardb.at(*n) {
            if h.median < a.median {
                wins.push(size_label(*n));
            }
            last = Some((*n, h.median, a.median));
        }
    }
    let Some((n, h, a)) = last else {
        return format!("{claim}; measured: no points");
    };
    let wins = if wins.is_empty() {
        "at no N".to_string()
    } else {
        format!("at N = {}", wins.join(", "))
    };
    format!(
        "{claim}; measured: at N = {} HPFLC median {h:.1} vs ARDB {a:.1} ({:+.1}); HPFLC below \
         ARDB {wins} of {}..{}",
        size_label(n),
        h - a,
        size_label(hpflc.points.first().map_or(n, |p| p.0)),
        size_label(n)
    )
}

/// One run of Fig. 13: its seed, where the flip goes, and iterations without and with it.
#[derive(Clone, Debug)]
struct FlipRun {
    seed: u64,
    rank: u32,
    peer: u32,
    base: u32,
    /// Iterations with a flip at bit b, for b in 0..32.
    flipped: Vec<u32>,
}

/// The flipped variable of run `seed`: a rank drawn from the seed, and the flow towards the rank
/// it sent to in round 0 (set before the flip at round [`FLIP_AT`]).
fn flip_target(n: u32, seed: u64) -> (u32, u32) {
    let rank = SimRng::for_stream(seed, TAG_FIG13).below(u64::from(n)) as u32;
    let peer = cycle_partners(n, seed, 0, rank).send_to;
    (rank, peer)
}

/// The `--fault` spec of Fig. 13's flip.
fn flip_fault(rank: u32, peer: u32, bit: u32) -> String {
    format!("flip-state:rank={rank},bit={bit},var=flow:{peer},elem=0,at={FLIP_AT}")
}

/// Runs the no-flip run and the 32 flipped runs of every seed, checking that each flipped run
/// applied exactly one flip and the base run none.
fn flip_runs(ctx: &Ctx, n: u32, runs: u32) -> anyhow::Result<Vec<FlipRun>> {
    let job = Job::new(Algorithm::Hpflc, n, FIG13_EPS);
    let items: Vec<(u32, Option<u32>)> = (0..runs)
        .flat_map(|run| {
            std::iter::once(None)
                .chain((0..F32_BITS).map(Some))
                .map(move |b| (run, b))
        })
        .collect();
    let seeds: Vec<u64> = (0..runs)
        .map(|run| ctx.run_seed(&[TAG_FIG13, u64::from(n), u64::from(run)]))
        .collect();
    let results = ctx.par_map(&items, |&(run, bit)| -> anyhow::Result<u32> {
        let seed = seeds[run as usize];
        let (rank, peer) = flip_target(n, seed);
        let faults: Vec<String> = bit.map(|b| flip_fault(rank, peer, b)).into_iter().collect();
        if bit.is_none() {
            ctx.progress(&format!(
                "run {run}: N = {}, flips at rank {rank}",
                size_label(n)
            ));
        }
        let report = run_job(ctx, &job, seed, &faults)?;
        let expected = u64::from(bit.is_some());
        if report.state_flips != expected {
            bail!(
                "{} state flips applied, expected {expected}; replay: {}",
                report.state_flips,
                job.replay(seed, &faults)
            );
        }
        Ok(iterations(&report))
    });
    let mut done = Vec::new();
    let mut results = results.into_iter();
    for &seed in &seeds {
        let (rank, peer) = flip_target(n, seed);
        let mut next = || -> anyhow::Result<u32> {
            results
                .next()
                .context("a run result is missing")?
                .map_err(|e| anyhow!("{e:#}"))
        };
        let base = next()?;
        let flipped = (0..F32_BITS)
            .map(|_| next())
            .collect::<anyhow::Result<_>>()?;
        done.push(FlipRun {
            seed,
            rank,
            peer,
            base,
            flipped,
        });
    }
    Ok(done)
}

/// Per bit: mean extra iterations, largest extra iterations, mean overhead in percent.
#[derive(Clone, Copy, Debug)]
struct BitOverhead {
    bit: u32,
    mean_extra: f64,
    max_extra: i64,
    mean_percent: f64,
}

/// The overhead of a flip at each bit, over all runs.
fn overheads(runs: &[FlipRun]) -> Vec<BitOverhead> {
    let count = runs.len().max(1) as f64;
    (0..F32_BITS)
        .map(|bit| {
            let extra: Vec<i64> = runs
                .iter()
                .map(|r| i64::from(r.flipped[bit as usize]) - i64::from(r.base))
                .collect();
            let percent: f64 = runs
                .iter()
                .zip(&extra)
                .map(|(r, &e)| 100.0 * e as f64 / f64::from(r.base.max(1)))
                .sum();
            BitOverhead {
                bit,
                mean_extra: extra.iter().sum::<i64>() as f64 / count,
                max_extra: extra.iter().copied().max().unwrap_or(0),
                mean_percent: percent / count,
            }
        })
        .collect()
}

/// 000 Fig. 13: HPFLC (f32, eps = 1e-3, N = 2^12, with `--full` 2^20) with one flip of bit b of
/// one flow variable at round 2, for each b in 0..32: average iteration overhead against the run
/// of the same seed without the flip. Writes `fig13_runs.csv`, `fig13.csv` and `fig13.svg`.
pub fn fig13(ctx: &Ctx) -> anyhow::Result<()> {
    let paper: u32 = if ctx.full { 1 << 20 } else { 1 << 12 };
    let n = 1u32 << paper.min(ctx.max_ranks).max(16).ilog2();
    let runs = ctx.placements(3, 20);
    println!(
        "HPFLC, N = {}, eps = {}, f32: one flip of bit b of a flow element at round {FLIP_AT}, \
         {runs} runs per bit",
        size_label(n),
        eps_label(FIG13_EPS)
    );
    let done = flip_runs(ctx, n, runs)?;
    let mut run_rows = Vec::new();
    for r in &done {
        for (bit, &it) in r.flipped.iter().enumerate() {
            run_rows.push(vec![
                r.seed.to_string(),
                r.rank.to_string(),
                r.peer.to_string(),
                bit.to_string(),
                r.base.to_string(),
                it.to_string(),
            ]);
        }
    }
    ctx.write_csv(
        "fig13_runs.csv",
        &[
            "seed",
            "rank",
            "flow_peer",
            "bit",
            "base_iterations",
            "flip_iterations",
        ],
        &run_rows,
    )?;
    let per_bit = overheads(&done);
    println!("bit  mean extra  max extra  mean overhead %");
    for o in &per_bit {
        println!(
            "{:>3} {:>11.2} {:>10} {:>16.3}",
            o.bit, o.mean_extra, o.max_extra, o.mean_percent
        );
    }
    let rows: Vec<Vec<String>> = per_bit
        .iter()
        .map(|o| {
            vec![
                o.bit.to_string(),
                runs.to_string(),
                fmt(o.mean_extra),
                o.max_extra.to_string(),
                fmt(o.mean_percent),
            ]
        })
        .collect();
    ctx.write_csv(
        "fig13.csv",
        &[
            "bit",
            "runs",
            "mean_extra_iterations",
            "max_extra_iterations",
            "mean_overhead_percent",
        ],
        &rows,
    )?;
    let chart = Chart {
        title: format!(
            "000 Fig. 13: HPFLC overhead of one flow bit flip (N = {}, eps = 1e-3)",
            size_label(n)
        ),
        x_label: "flipped bit (0 = least significant mantissa bit, 31 = sign)".into(),
        y_label: "mean iteration overhead (%)".into(),
        x_ticks: per_bit.iter().map(|o| o.bit.to_string()).collect(),
        series: vec![Series {
            name: "HPFLC".into(),
            values: per_bit.iter().map(|o| Some(o.mean_percent)).collect(),
        }],
        kind: Kind::Bars,
        log_y: false,
    };
    ctx.write("fig13.svg", &render(&chart))?;
    println!("{}", flip_claim(&done, &per_bit));
    Ok(())
}

/// Fig. 13's claim against the measured overheads.
fn flip_claim(runs: &[FlipRun], per_bit: &[BitOverhead]) -> String {
    let worst_extra = per_bit.iter().max_by_key(|o| o.max_extra);
    let worst_mean = per_bit
        .iter()
        .max_by(|a, b| a.mean_percent.total_cmp(&b.mean_percent));
    let below = per_bit.iter().filter(|o| o.mean_percent < 1.0).count();
    let base: f64 = runs.iter().map(|r| f64::from(r.base)).sum::<f64>() / runs.len().max(1) as f64;
    let (Some(extra), Some(mean)) = (worst_extra, worst_mean) else {
        return "claim: at most one extra iteration; measured: no runs".into();
    };
    let extras = runs
        .iter()
        .flat_map(|r| r.flipped.iter().map(|&f| i64::from(f) - i64::from(r.base)));
    let (mut more, mut same, mut fewer) = (0, 0, 0);
    for e in extras {
        match e.signum() {
            1 => more += 1,
            0 => same += 1,
            _ => fewer += 1,
        }
    }
    format!(
        "claim: a flip costs at most one extra iteration, average overhead < 1% at every bit; \
         measured: at most {:+} iterations (bit {}), largest mean overhead {:.2}% (bit {}), {} of \
         {} bits below 1%; of {} flipped runs {more} took more iterations, {same} the same, \
         {fewer} fewer; base run {:.1} iterations on average",
        extra.max_extra,
        extra.bit,
        mean.mean_percent,
        mean.bit,
        below,
        per_bit.len(),
        more + same + fewer,
        base
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_and_precision() {
        let s = Summary::of(&[5, 1, 3, 9]).unwrap();
        assert_eq!((s.median, s.min, s.max), (4.0, 1, 9));
        assert_eq!(Summary::of(&[7, 2, 3]).unwrap().median, 3.0);
        assert!(Summary::of(&[]).is_err());
        assert_eq!(Precision::for_eps(1e-3), Precision::Single);
        assert_eq!(Precision::for_eps(1e-4), Precision::Double);
        assert_eq!(
            Job::new(Algorithm::Ardb, 16, 1e-2).precision,
            Precision::Double
        );
        assert_eq!(eps_label(1e-5), "1e-5");
    }

    #[test]
    fn the_flip_targets_a_flow_the_rank_has() {
        let (rank, peer) = flip_target(64, 7);
        assert!(rank < 64 && peer < 64 && peer != rank);
        assert!(FaultSpec::parse(&flip_fault(rank, peer, 31)).is_ok());
    }
}
