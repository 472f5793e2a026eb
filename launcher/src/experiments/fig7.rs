//! 004 Fig. 7: fault-free latency of the FTCO allreduce, N = 1K..64K (default 1K and 2K).
//!
//! Runs in 004's step model. For every N the search runs every tree of shape k-ary and
//! k-nomial, k in [`radixes`], with each root count of [`roots_with`] below N (the list of
//! [`super::root_counts`] and k itself; with `--full` k = 2..=16 and roots 1, 2, 3, 4, 6, 8, 12,
//! 16, 24, 32; by default k = 2..=12 and roots 1, 2, 4, 6, 8, 12, 16), once each (one seed per
//! N; a fault-free run varies only through the RSD draws). The multi-root k-nomial series is
//! 004's: k fully connected roots for radix k. Reported per N: the best single-root
//! k-nomial (its k), the best multi-root k-nomial (its k, with k roots), and the best
//! tree of the whole search ("optimal tree": the minimum over both shapes and all root counts
//! tried). `fig7_search.csv` holds every run.

use anyhow::Context;
use ftcoll_algos::topology::TreeShape;

use super::svg::{render, Chart, Kind, Series};
use super::{best, fault_free, radixes, roots_with, size_label, sizes, Ctx, TreeChoice};

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> anyhow::Result<()> {
    let mut search_rows = Vec::new();
    let mut rows = Vec::new();
    let mut points = Vec::new();
    println!("N      single-root k-nomial  multi-root k-nomial      best tree tried");
    for n in sizes(ctx) {
        ctx.progress(&format!("fig7: N = {n}"));
        let mut trees = Vec::new();
        for kary in [false, true] {
            for k in radixes(ctx) {
                for roots in roots_with(ctx, k, n) {
                    let shape = if kary {
                        TreeShape::KAry { k }
                    } else {
                        TreeShape::KNomial { k }
                    };
                    trees.push(TreeChoice { shape, roots });
                }
            }
        }
        let runs = fault_free(ctx, n, &trees)?;
        for (tree, report) in &runs {
            search_rows.push(vec![
                n.to_string(),
                tree.kind().to_string(),
                tree.k().to_string(),
                tree.roots.to_string(),
                report.completion_steps.to_string(),
                report.messages.to_string(),
            ]);
        }
        let pick = |keep: &dyn Fn(&TreeChoice) -> bool| {
            let subset: Vec<_> = runs.iter().filter(|(t, _)| keep(t)).cloned().collect();
            best(&subset).context("empty search")
        };
        let is_knomial = |t: &TreeChoice| matches!(t.shape, TreeShape::KNomial { .. });
        let (single, single_lat) = pick(&|t| is_knomial(t) && t.roots == 1)?;
        let (multi, multi_lat) = pick(&|t| is_knomial(t) && t.roots == t.k() && t.roots < n)?;
        let (optimal, optimal_lat) = pick(&|_| true)?;
        println!(
            "{:<6} {:>4} steps (k={:<2})     {:>4} steps (k={:<2} R={:<2})  {:>4} steps ({})",
            size_label(n),
            single_lat,
            single.k(),
            multi_lat,
            multi.k(),
            multi.roots,
            optimal_lat,
            optimal.label()
        );
        rows.push(vec![
            n.to_string(),
            single.k().to_string(),
            single_lat.to_string(),
            multi.k().to_string(),
            multi.roots.to_string(),
            multi_lat.to_string(),
            optimal.kind().to_string(),
            optimal.k().to_string(),
            optimal.roots.to_string(),
            optimal_lat.to_string(),
        ]);
        points.push((n, single_lat, multi_lat, optimal_lat));
    }
    ctx.write_csv(
        "fig7_search.csv",
        &["n", "shape", "k", "roots", "latency_steps", "messages"],
        &search_rows,
    )?;
    ctx.write_csv(
        "fig7.csv",
        &[
            "n",
            "single_root_knomial_k",
            "single_root_latency_steps",
            "multi_root_knomial_k",
            "multi_root_roots",
            "multi_root_latency_steps",
            "optimal_shape",
            "optimal_k",
            "optimal_roots",
            "optimal_latency_steps",
        ],
        &rows,
    )?;
    let series = |name: &str, pick: fn(&(u32, u64, u64, u64)) -> u64| Series {
        name: name.into(),
        values: points.iter().map(|p| Some(pick(p) as f64)).collect(),
    };
    let chart = Chart {
        title: "004 Fig. 7: fault-free FTCO allreduce (LogP L=10, o=1)".into(),
        x_label: "ranks N (log scale)".into(),
        y_label: "latency (steps)".into(),
        x_ticks: points.iter().map(|p| size_label(p.0)).collect(),
        series: vec![
            series("k-nomial, 1 root", |p| p.1),
            series("k-nomial, multi-root", |p| p.2),
            series("best tree tried", |p| p.3),
        ],
        kind: Kind::Lines,
        log_y: false,
    };
    ctx.write("fig7.svg", &render(&chart))
}
