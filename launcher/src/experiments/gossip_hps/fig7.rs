//! 000 Fig. 7 (Sec. 5.1): synchronized, round-based Push-Sum iterations until every rank is
//! within eps = 1e-14 of the average of uniform (0, 1) inputs, against N, on a fully connected
//! graph, a hypercube and a 3D torus, beside log2 N (recursive doubling's steps).
//!
//! 000 derives the shape from Push-Sum's O((log N + log 1/eps) / (1 - lambda_2)) iterations:
//! the spectral gap of a fully connected graph does not depend on N, a hypercube's shrinks
//! logarithmically and a torus's much faster. Its two claims, each checked on a printed line:
//! small-gap topologies need many more iterations than fully connected graphs and hypercubes,
//! and Push-Sum's overhead over recursive doubling is a constant, "independently of the
//! communication topology and the number of nodes".

use std::sync::atomic::Ordering;

use anyhow::{anyhow, bail};
use ftcoll_algos::topology::TopologyKind;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{CostModel, InputKind, SimConfig};

use super::{iterations_chart, log2_series, sizes, Summary};
use crate::experiments::svg::{render, Series};
use crate::experiments::{fmt, size_label, Ctx};

/// Fig. 7's accuracy target (its caption's eps_rm).
const EPS: f64 = 1e-14;
/// The topologies of the figure, best connected first.
const TOPOLOGIES: [TopologyKind; 3] = [
    TopologyKind::Full,
    TopologyKind::Hypercube,
    TopologyKind::Torus,
];
/// Rounds after which a run fails: the torus needs about 2,300 at N = 1K, growing about as
/// N^(2/3) (some 15,000 at 16K).
const BUDGET: u32 = 60_000;
/// Seed tag of the figure's runs.
const TAG_FIG7: u64 = 7;

/// One topology's curve: `(N, summary)`, N ascending.
struct Curve {
    topology: TopologyKind,
    points: Vec<(u32, Summary)>,
}

/// 000 Fig. 7. Writes `fig7.csv` and `fig7.svg`.
pub fn fig7(ctx: &Ctx) -> anyhow::Result<()> {
    let sizes = sizes(ctx, 10, 14);
    let runs = ctx.placements(5, 20);
    println!(
        "Push-Sum, synchronized rounds, median iterations of {runs} runs until every rank is \
         within {EPS:e} of the average"
    );
    let mut items = Vec::new();
    for &n in sizes.iter().rev() {
        for topology in TOPOLOGIES {
            for run in 0..runs {
                items.push((topology, n, run));
            }
        }
    }
    let results = ctx.par_map(&items, |&(topology, n, run)| {
        if run == 0 {
            ctx.progress(&format!(
                "{} N = {}: {runs} runs",
                topology.name(),
                size_label(n)
            ));
        }
        // Run r at size N has one seed on every topology: the same inputs.
        let seed = ctx.run_seed(&[TAG_FIG7, u64::from(n), u64::from(run)]);
        iterations(ctx, topology, n, seed)
    });
    let mut curves = Vec::new();
    for topology in TOPOLOGIES {
        let mut points = Vec::new();
        for &n in &sizes {
            let values: Vec<u32> = items
                .iter()
                .zip(&results)
                .filter(|((t, m, _), _)| *t == topology && *m == n)
                .map(|(_, r)| r.as_ref().copied().map_err(|e| anyhow!("{e:#}")))
                .collect::<anyhow::Result<_>>()?;
            points.push((n, Summary::of(&values)?));
        }
        curves.push(Curve { topology, points });
    }
    print_table(&curves, &sizes);
    ctx.write_csv("fig7.csv", &HEADER, &rows(&curves, runs))?;
    let mut series: Vec<Series> = curves
        .iter()
        .map(|c| Series {
            name: format!("Push-Sum, {}", c.topology.name()),
            values: sizes
                .iter()
                .map(|&n| {
                    c.points
                        .iter()
                        .find(|(m, _)| *m == n)
                        .map(|(_, s)| s.median)
                })
                .collect(),
        })
        .collect();
    series.push(log2_series(&sizes));
    let mut chart = iterations_chart(
        "000 Fig. 7: Push-Sum iterations by topology (eps 1e-14)",
        &sizes,
        series,
    );
    chart.log_y = true;
    ctx.write("fig7.svg", &render(&chart))?;
    for line in claims(&curves) {
        println!("{line}");
    }
    Ok(())
}

/// The oracle's stopping round of one run: every rank within [`EPS`] of the average.
fn iterations(ctx: &Ctx, topology: TopologyKind, n: u32, seed: u64) -> anyhow::Result<u32> {
    let replay = format!(
        "ftcoll-launch --sim --no-tui -n {n} --algo ps --topology {} --gossip-sync \
         --op avg --input uniform --eps {EPS:e} --cost rounds --steps {BUDGET} --seed {seed}",
        topology.name()
    );
    let mut spec = JobSpec::new(Algorithm::Ps, n);
    spec.op = ReduceOp::Average;
    spec.input = InputKind::Uniform;
    spec.eps = Some(EPS);
    spec.steps = Some(BUDGET);
    spec.gossip.synchronous = true;
    spec.topology = Some(topology.build(n)?);
    let config = SimConfig {
        seed,
        cost: CostModel::rounds(),
        ..SimConfig::default()
    };
    let report = simulate(&spec, config).map_err(|e| anyhow!("{e}; replay: {replay}"))?;
    ctx.runs.fetch_add(1, Ordering::Relaxed);
    match report.oracle_stop_round {
        Some(round) if !report.truncated && !report.stopped_by_budget && report.completed == n => {
            Ok(round)
        }
        _ => bail!(
            "a run did not reach eps = {EPS:e} within {BUDGET} rounds (error {:e}, completed {} \
             of {n}); replay: {replay}",
            report.max_rel_error,
            report.completed
        ),
    }
}

/// Prints N, log2 N and each topology's median (min-max).
fn print_table(curves: &[Curve], sizes: &[u32]) {
    let mut head = format!("{:<6} {:>5}", "N", "log2N");
    for c in curves {
        head.push_str(&format!(" {:>22}", c.topology.name()));
    }
    println!("{head}");
    for (i, &n) in sizes.iter().enumerate() {
        let mut line = format!("{:<6} {:>5}", size_label(n), n.ilog2());
        for c in curves {
            let cell = c.points.get(i).map_or("-".into(), |(_, s)| {
                format!("{:.1} ({}-{})", s.median, s.min, s.max)
            });
            line.push_str(&format!(" {cell:>22}"));
        }
        println!("{line}");
    }
}

/// Fig. 7's two claims against the medians.
fn claims(curves: &[Curve]) -> Vec<String> {
    let median = |topology: TopologyKind, at: usize| {
        curves
            .iter()
            .find(|c| c.topology == topology)
            .and_then(|c| c.points.get(at))
            .map(|&(n, s)| (n, s.median))
    };
    let last = curves
        .first()
        .map_or(0, |c| c.points.len().saturating_sub(1));
    let mut lines = Vec::new();
    if let (Some((n, full)), Some((_, cube)), Some((_, torus))) = (
        median(TopologyKind::Full, last),
        median(TopologyKind::Hypercube, last),
        median(TopologyKind::Torus, last),
    ) {
        lines.push(format!(
            "claim: topologies with a small spectral gap need many more iterations than fully \
             connected graphs and hypercubes; measured at N = {}: torus {:.1}x the fully \
             connected graph's, hypercube {:.1}x",
            size_label(n),
            torus / full,
            cube / full
        ));
    }
    let mut overheads = Vec::new();
    for c in curves {
        if let (Some(&(n0, first)), Some(&(n1, top))) = (c.points.first(), c.points.last()) {
            overheads.push(format!(
                "{} {:.1} at N = {} -> {:.1} at N = {}",
                c.topology.name(),
                first.median - f64::from(n0.ilog2()),
                size_label(n0),
                top.median - f64::from(n1.ilog2()),
                size_label(n1)
            ));
        }
    }
    lines.push(format!(
        "claim: Push-Sum's overhead over recursive doubling is constant, whatever the topology \
         and N; measured (median - log2 N): {}",
        overheads.join("; ")
    ));
    lines
}

/// CSV rows `n, log2_n, topology, runs, median, min, max`.
fn rows(curves: &[Curve], runs: u32) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for c in curves {
        for (n, s) in &c.points {
            rows.push(vec![
                n.to_string(),
                n.ilog2().to_string(),
                c.topology.name().into(),
                runs.to_string(),
                fmt(s.median),
                s.min.to_string(),
                s.max.to_string(),
            ]);
        }
    }
    rows
}

/// The header of [`rows`].
const HEADER: [&str; 7] = [
    "n",
    "log2_n",
    "topology",
    "runs",
    "median_iterations",
    "min_iterations",
    "max_iterations",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(median: f64) -> Summary {
        Summary {
            median,
            min: median as u32,
            max: median as u32,
            mean: median,
            std_error: 0.0,
        }
    }

    #[test]
    fn claims_compare_the_largest_size_and_the_overheads() {
        let curve = |topology, a: f64, b: f64| Curve {
            topology,
            points: vec![(16, summary(a)), (1024, summary(b))],
        };
        let curves = [
            curve(TopologyKind::Full, 90.0, 100.0),
            curve(TopologyKind::Hypercube, 150.0, 300.0),
            curve(TopologyKind::Torus, 120.0, 2300.0),
        ];
        let lines = claims(&curves);
        assert!(lines[0].contains("N = 1K: torus 23.0x"), "{}", lines[0]);
        assert!(lines[0].contains("hypercube 3.0x"), "{}", lines[0]);
        assert!(
            lines[1].contains("full 86.0 at N = 16 -> 90.0 at N = 1K"),
            "{}",
            lines[1]
        );
        assert_eq!(rows(&curves, 5).len(), 6);
    }
}
