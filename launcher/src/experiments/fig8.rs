//! 004 Fig. 8: the latency penalty per inactive rank, (latency with F inactive ranks - fault-free
//! latency) / F, for F = 1, 10, 100, averaged over random placements, on the multi-root
//! k-nomial tree with the best k and root count for each N (the fig7 search restricted to
//! k-nomial trees with at least two roots). Inactive ranks are dead from step 0 and drawn
//! uniformly among all ranks, roots included (the allreduce routes around a dead root).
//! Default (CI-sized): N = 1K and 2K, 20 placements; `--full`: 1K..64K, 1,000 placements a point.
//!
//! The same runs give Fig. 9 ([`super::fig9`]); [`sweep`] is shared with Fig. 10.

use ftcoll_algos::rng::SimRng;
use ftcoll_runtime::sim::SimConfig;

use super::svg::{render, Chart, Kind, Series};
use super::{
    allreduce_spec, best_multiroot_knomial, distinct_ranks, fmt, kill, measure, size_label, sizes,
    Ctx, Measured, TreeChoice,
};

/// Fault counts of Figs. 8-10.
pub const FAULT_COUNTS: [u32; 3] = [1, 10, 100];

/// One (N, F) point of a fault sweep.
#[derive(Clone, Debug)]
pub struct Point {
    /// Ranks.
    pub n: u32,
    /// The tree.
    pub tree: TreeChoice,
    /// Faults per run.
    pub faults: u32,
    /// Runs averaged.
    pub placements: u32,
    /// Runs left out: they failed their checks.
    pub failed: u32,
    /// The fault-free run.
    pub base: Measured,
    /// Mean latency with the faults.
    pub latency: f64,
    /// Mean messages with the faults.
    pub messages: f64,
    /// Mean messages before the last live rank held the result.
    pub before_result: f64,
}

impl Point {
    /// (mean latency - fault-free latency) / F.
    pub fn penalty_per_fault(&self) -> f64 {
        (self.latency - self.base.latency as f64) / f64::from(self.faults)
    }

    /// Extra messages per live rank per fault, all messages.
    pub fn extra_messages(&self) -> f64 {
        (self.messages - self.base.messages as f64)
            / f64::from(self.n - self.faults)
            / f64::from(self.faults)
    }

    /// Extra messages per live rank per fault, sent before the last rank held the result.
    pub fn extra_before_result(&self) -> f64 {
        (self.before_result - self.base.before_result as f64)
            / f64::from(self.n - self.faults)
            / f64::from(self.faults)
    }
}

/// Runs F = 1, 10, 100 faults at every size: inactive ranks, or (`run_time`) crashes at a time
/// drawn uniformly from [0, fault-free latency).
pub fn sweep(ctx: &Ctx, run_time: bool) -> anyhow::Result<Vec<Point>> {
    let placements = ctx.placements(20, 1000);
    let mut points = Vec::new();
    for n in sizes(ctx) {
        ctx.progress(&format!(
            "N = {n}: searching the best multi-root k-nomial tree"
        ));
        let (tree, _) = best_multiroot_knomial(ctx, n)?;
        let spec = allreduce_spec(n, tree);
        let base_config = SimConfig {
            seed: ctx.run_seed(&[8, u64::from(n)]),
            ..SimConfig::default()
        };
        let base = measure(ctx, &spec, base_config)?;
        for faults in FAULT_COUNTS.into_iter().filter(|&f| f < n / 2) {
            ctx.progress(&format!(
                "N = {n}, {} {faults}: {placements} placements",
                if run_time {
                    "run-time crashes"
                } else {
                    "inactive"
                }
            ));
            let ids: Vec<u32> = (0..placements).collect();
            let runs = ctx.par_map(&ids, |&i| {
                let coords = [
                    8,
                    u64::from(n),
                    u64::from(faults),
                    u64::from(i),
                    u64::from(run_time),
                ];
                let seed = ctx.run_seed(&coords);
                let mut rng = SimRng::for_stream(seed, 0xF1_6008);
                let ranks = distinct_ranks(&mut rng, n, faults);
                let faults = ranks
                    .into_iter()
                    .map(|r| {
                        let at = if run_time {
                            rng.below(base.latency.max(1))
                        } else {
                            0
                        };
                        kill(r, at)
                    })
                    .collect();
                let config = SimConfig {
                    seed,
                    faults,
                    ..SimConfig::default()
                };
                measure(ctx, &spec, config)
            });
            // A run that fails its checks (e.g. hits the time bound) is left out of the
            // means, counted, and its replay command shown.
            let mut failed = 0;
            let runs: Vec<Measured> = runs
                .into_iter()
                .filter_map(|r| {
                    r.map_err(|e| {
                        failed += 1;
                        if failed <= 3 {
                            eprintln!("warning: N = {n}, {faults} faults: {e:#}");
                        }
                    })
                    .ok()
                })
                .collect();
            if runs.is_empty() {
                anyhow::bail!("N = {n}, {faults} faults: every run failed its checks");
            }
            let count = runs.len() as f64;
            let mean =
                |f: fn(&Measured) -> u64| runs.iter().map(|m| f(m) as f64).sum::<f64>() / count;
            points.push(Point {
                n,
                tree,
                faults,
                placements: runs.len() as u32,
                failed,
                base,
                latency: mean(|m| m.latency),
                messages: mean(|m| m.messages),
                before_result: mean(|m| m.before_result),
            });
        }
    }
    Ok(points)
}

/// The CSV of a sweep (Figs. 8 and 9 write the same columns).
pub fn write_points(ctx: &Ctx, name: &str, points: &[Point]) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                p.n.to_string(),
                p.tree.k().to_string(),
                p.tree.roots.to_string(),
                p.faults.to_string(),
                p.placements.to_string(),
                p.failed.to_string(),
                p.base.latency.to_string(),
                fmt(p.latency),
                fmt(p.penalty_per_fault()),
                fmt(p.base.messages as f64 / f64::from(p.n)),
                fmt(p.base.before_result as f64 / f64::from(p.n)),
                fmt(p.extra_messages()),
                fmt(p.extra_before_result()),
            ]
        })
        .collect();
    ctx.write_csv(
        name,
        &[
            "n",
            "knomial_k",
            "roots",
            "inactive",
            "placements",
            "failed_runs",
            "fault_free_latency_steps",
            "mean_latency_steps",
            "penalty_per_inactive_steps",
            "fault_free_msgs_per_rank",
            "fault_free_msgs_per_rank_before_result",
            "extra_msgs_per_rank_per_inactive",
            "extra_msgs_per_rank_per_inactive_before_result",
        ],
        &rows,
    )
}

/// Bars per N, one per fault count, of `value`.
pub fn bar_chart(points: &[Point], title: &str, y_label: &str, value: fn(&Point) -> f64) -> Chart {
    let mut ns: Vec<u32> = points.iter().map(|p| p.n).collect();
    ns.dedup();
    let series = FAULT_COUNTS
        .iter()
        .map(|&f| Series {
            name: format!("{f} inactive"),
            values: ns
                .iter()
                .map(|&n| points.iter().find(|p| p.n == n && p.faults == f).map(value))
                .collect(),
        })
        .collect();
    Chart {
        title: title.into(),
        x_label: "ranks N (best multi-root k-nomial tree)".into(),
        y_label: y_label.into(),
        x_ticks: ns
            .iter()
            .map(|&n| {
                let p = points.iter().find(|p| p.n == n);
                let tree = p.map_or(String::new(), |p| {
                    format!(" k{}R{}", p.tree.k(), p.tree.roots)
                });
                format!("{}{tree}", size_label(n))
            })
            .collect(),
        series,
        kind: Kind::Bars,
        log_y: false,
    }
}

/// Prints the sweep.
pub fn print_points(points: &[Point]) {
    println!("N      tree     F    runs  fault-free  mean lat.  penalty/F  msgs/rank  extra msgs/rank/F (before result)");
    for p in points {
        println!(
            "{:<6} k{:<2} R{:<3} {:<4} {:<5} {:>10} {:>10.1} {:>10.2} {:>10.2} {:>10.3} ({:.3})",
            size_label(p.n),
            p.tree.k(),
            p.tree.roots,
            p.faults,
            p.placements,
            p.base.latency,
            p.latency,
            p.penalty_per_fault(),
            p.base.messages as f64 / f64::from(p.n),
            p.extra_messages(),
            p.extra_before_result()
        );
    }
}

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> anyhow::Result<()> {
    let points = sweep(ctx, false)?;
    print_points(&points);
    write_points(ctx, "fig8.csv", &points)?;
    let chart = bar_chart(
        &points,
        "004 Fig. 8: FTCO allreduce latency penalty per inactive rank",
        "extra latency per inactive rank (steps)",
        Point::penalty_per_fault,
    );
    ctx.write("fig8.svg", &render(&chart))
}
