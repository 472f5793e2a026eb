//! Paper 000's round-based gossip (Sec. 6) in the simulator: Fig. 7 (synchronized Push-Sum
//! iterations by topology, Sec. 5.1), Figs. 9-10 (HPS iterations against N), Fig. 11 (HPS
//! iterations at 16K-128K ranks, which 000 measured on Vulcan), Fig. 12 (HPFLC against
//! approximate recursive doubling) and Fig. 13 (HPFLC's iteration overhead after one bit flip
//! in a flow variable).
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

mod fig11;
mod fig12;
mod fig13;
mod fig7;
mod fig9_10;

pub use fig11::fig11;
pub use fig12::fig12;
pub use fig13::fig13;
pub use fig7::fig7;
pub use fig9_10::fig9_10;

use std::sync::atomic::Ordering;

use anyhow::{anyhow, bail};
use ftcoll_algos::{Rank, ReduceOp};
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{CostModel, InputKind, OracleStop, OracleWatch, SimConfig, SimReport};

use super::svg::{Chart, Kind, Series};
use super::{fmt, size_label, Ctx};

/// Round budget of one gossip run; a run that has not converged by then fails.
pub const ROUND_BUDGET: u32 = 500;

/// Seed tags: each figure draws its own runs.
const TAG_FIG9_10: u64 = 9_10;
const TAG_FIG11: u64 = 11;
const TAG_FIG12: u64 = 12;
const TAG_FIG13: u64 = 13;

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
        .map(|f| ftcoll_launcher::text::parse_fault(f).map_err(|e| anyhow!("fault '{f}': {e}")))
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

/// Median, minimum, maximum, mean and the mean's standard error of the iterations over the
/// runs of one point.
#[derive(Clone, Copy, Debug)]
struct Summary {
    median: f64,
    min: u32,
    max: u32,
    mean: f64,
    /// The sample standard deviation over the square root of the run count (0 for one run).
    std_error: f64,
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
        let count = sorted.len() as f64;
        let mean = sorted.iter().map(|&v| f64::from(v)).sum::<f64>() / count;
        let std_error = if sorted.len() > 1 {
            let var = sorted
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / (count - 1.0);
            (var / count).sqrt()
        } else {
            0.0
        };
        Ok(Summary {
            median,
            min,
            max,
            mean,
            std_error,
        })
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
                // 000 Sec. 6.3 judges HPS on Vulcan and ARDB at the root node.
                job.root_only = tag == TAG_FIG12 || tag == TAG_FIG11;
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

/// Prints a table of `curves` by N: a `label` column head per curve, `width` wide, and per N
/// the `cell` of each curve's summary ("-" where it has none).
fn print_curve_table(
    curves: &[Curve],
    sizes: &[u32],
    width: usize,
    label: impl Fn(&Curve) -> String,
    cell: impl Fn(&Summary) -> String,
) {
    let mut head = format!("{:<6} {:>5}", "N", "log2N");
    for c in curves {
        head.push_str(&format!(" {:>width$}", label(c)));
    }
    println!("{head}");
    for &n in sizes {
        let mut line = format!("{:<6} {:>5}", size_label(n), n.ilog2());
        for c in curves {
            let text = c.at(n).map_or("-".into(), |s| cell(&s));
            line.push_str(&format!(" {text:>width$}"));
        }
        println!("{line}");
    }
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

/// CSV rows `n, log2_n, algo, eps, precision, runs, median, min, max, mean, std_error` of
/// `curves`.
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
                fmt(s.mean),
                fmt(s.std_error),
            ]);
        }
    }
    rows
}

/// The header of [`curve_rows`].
const CURVE_HEADER: [&str; 11] = [
    "n",
    "log2_n",
    "algo",
    "eps",
    "precision",
    "runs",
    "median_iterations",
    "min_iterations",
    "max_iterations",
    "mean_iterations",
    "std_error",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_and_precision() {
        let s = Summary::of(&[5, 1, 3, 9]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.mean), (4.0, 1, 9, 4.5));
        // Sample variance of 5, 1, 3, 9 is 35/3; its standard error is sqrt(35/3/4).
        assert!((s.std_error - (35.0f64 / 12.0).sqrt()).abs() < 1e-12);
        assert_eq!(Summary::of(&[6]).unwrap().std_error, 0.0);
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
}
