//! 004 Fig. 10: total latency of the FTCO allreduce with F = 1, 10, 100 inactive ranks (dead
//! from step 0) against F run-time crashes (each at a step drawn uniformly from
//! [0, fault-free latency)), on the trees and sizes of Fig. 8, averaged over the same number of
//! random placements.

use super::fig8::{sweep, FAULT_COUNTS};
use super::svg::{render, Chart, Kind, Series};
use super::{fmt, size_label, Ctx};

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> anyhow::Result<()> {
    let inactive = sweep(ctx, false)?;
    let run_time = sweep(ctx, true)?;
    let mut rows = Vec::new();
    println!("N      tree     F    runs  fault-free  inactive  run-time");
    for (a, b) in inactive.iter().zip(&run_time) {
        assert_eq!((a.n, a.faults), (b.n, b.faults), "the sweeps line up");
        println!(
            "{:<6} k{:<2} R{:<3} {:<4} {:<5} {:>10} {:>9.1} {:>9.1}",
            size_label(a.n),
            a.tree.k(),
            a.tree.roots,
            a.faults,
            a.placements,
            a.base.latency,
            a.latency,
            b.latency
        );
        rows.push(vec![
            a.n.to_string(),
            a.tree.k().to_string(),
            a.tree.roots.to_string(),
            a.faults.to_string(),
            a.placements.to_string(),
            b.placements.to_string(),
            a.base.latency.to_string(),
            fmt(a.latency),
            fmt(b.latency),
        ]);
    }
    ctx.write_csv(
        "fig10.csv",
        &[
            "n",
            "knomial_k",
            "roots",
            "faults",
            "inactive_runs",
            "run_time_runs",
            "fault_free_latency_steps",
            "inactive_mean_latency_steps",
            "run_time_mean_latency_steps",
        ],
        &rows,
    )?;
    let mut ns: Vec<u32> = inactive.iter().map(|p| p.n).collect();
    ns.dedup();
    let mut series = vec![Series {
        name: "fault-free".into(),
        values: ns
            .iter()
            .map(|&n| {
                inactive
                    .iter()
                    .find(|p| p.n == n)
                    .map(|p| p.base.latency as f64)
            })
            .collect(),
    }];
    for (label, points) in [("inactive", &inactive), ("run-time", &run_time)] {
        for f in FAULT_COUNTS {
            series.push(Series {
                name: format!("{f} {label}"),
                values: ns
                    .iter()
                    .map(|&n| {
                        points
                            .iter()
                            .find(|p| p.n == n && p.faults == f)
                            .map(|p| p.latency)
                    })
                    .collect(),
            });
        }
    }
    let chart = Chart {
        title: "004 Fig. 10: FTCO allreduce, inactive ranks vs run-time crashes".into(),
        x_label: "ranks N (log scale)".into(),
        y_label: "mean latency (steps)".into(),
        x_ticks: ns.iter().map(|&n| size_label(n)).collect(),
        series,
        kind: Kind::Lines,
        log_y: false,
    };
    ctx.write("fig10.svg", &render(&chart))
}
