//! 000 Fig. 1: the convergence history (max and median relative error every push period) of
//! PF, PFLC and PFCC after bit 56 of one flow flips, beside a run without the flip; N = 32.

use anyhow::Context;
use ftcoll_runtime::job::Algorithm;
use ftcoll_runtime::sim::SimReport;

use super::{
    error_of, gossip_spec, iterations, run, run_flow_flip, FIG1_BIT, FLIP_STEP, N, STREAM_FIG1,
    TAU_SEC_441,
};
use crate::experiments::svg::{render, Chart, Kind, Series};
use crate::experiments::Ctx;

/// 000 Fig. 1: convergence of PF, PFLC and PFCC (and a run without the flip) when bit 56 of one
/// flow flips after about 150 pushes; one run, N = 32.
pub fn fig1(ctx: &Ctx) -> anyhow::Result<()> {
    let seed = ctx.run_seed(&[STREAM_FIG1]);
    let algos = [Algorithm::Pf, Algorithm::Pflc, Algorithm::Pfcc];
    let mut runs: Vec<(String, SimReport)> = Vec::new();
    let reference = run(ctx, &gossip_spec(Algorithm::Pf, N, None), seed, &[], true)?;
    runs.push(("no flip".into(), reference));
    let mut target = None;
    for algo in algos {
        let spec = gossip_spec(algo, N, Some(TAU_SEC_441));
        let (report, flow) = run_flow_flip(ctx, &spec, seed, FIG1_BIT, true)?;
        target = Some(flow);
        runs.push((algo.name().to_uppercase(), report));
    }
    let (rank, peer) = target.context("no flipped run")?;
    println!(
        "N = {N}, seed {seed}: bit {FIG1_BIT} of rank {rank}'s flow to rank {peer} flips at step \
         {FLIP_STEP}; tau = {TAU_SEC_441:e}"
    );
    println!("run        final max error  iterations  stopped by  flips");
    for (name, report) in &runs {
        println!(
            "{name:<10} {:>15.2e} {:>11} {:>11} {:>6}",
            error_of(report),
            iterations(report)?,
            if report.stopped_by_budget {
                "budget"
            } else {
                "accuracy"
            },
            report.state_flips
        );
    }
    print_history(&runs);
    let summary: Vec<String> = runs
        .iter()
        .map(|(name, r)| {
            Ok(format!(
                "{name} {:.1e} ({} it.)",
                error_of(r),
                iterations(r)?
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    println!(
        "claim: PF ends near 1e-11, PFLC and PFCC near 1e-14, PFCC with almost no slow-down; \
         measured: {}",
        summary.join(", ")
    );
    write_history(ctx, &runs)
}

// ---------------------------------------------------------------------------------------------
// Fig. 1's history.

/// Prints the max error of each run about every 300 steps.
fn print_history(runs: &[(String, SimReport)]) {
    let steps = history_steps(runs);
    print!("step  ");
    for (name, _) in runs {
        print!(" {name:>10}");
    }
    println!("   (max relative error over ranks)");
    for &step in steps.iter().step_by(25) {
        print!("{step:>5} ");
        for (_, report) in runs {
            match sample(report, step) {
                Some((max, _)) => print!(" {max:>10.2e}"),
                None => print!(" {:>10}", "-"),
            }
        }
        println!();
    }
}

/// Every sampled step of any run, in order.
fn history_steps(runs: &[(String, SimReport)]) -> Vec<u64> {
    let mut steps: Vec<u64> = runs
        .iter()
        .flat_map(|(_, r)| r.history.iter().map(|h| h.0))
        .collect();
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// A run's (max, median) error at `step`, if it was still running.
fn sample(report: &SimReport, step: u64) -> Option<(f64, f64)> {
    report
        .history
        .iter()
        .find(|h| h.0 == step)
        .map(|h| (h.1, h.2))
}

/// Fig. 1's CSV (max and median error of every run at every sampled step) and SVG.
fn write_history(ctx: &Ctx, runs: &[(String, SimReport)]) -> anyhow::Result<()> {
    let steps = history_steps(runs);
    let mut header = vec!["step".to_string()];
    for (name, _) in runs {
        let name = name.replace(' ', "_").to_lowercase();
        header.push(format!("{name}_max_rel_error"));
        header.push(format!("{name}_median_rel_error"));
    }
    let rows: Vec<Vec<String>> = steps
        .iter()
        .map(|&step| {
            let mut row = vec![step.to_string()];
            for (_, report) in runs {
                match sample(report, step) {
                    Some((max, median)) => row.extend([format!("{max:e}"), format!("{median:e}")]),
                    None => row.extend([String::new(), String::new()]),
                }
            }
            row
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    ctx.write_csv("fig1.csv", &header, &rows)?;
    let chart = Chart {
        title: format!("000 Fig. 1: bit {FIG1_BIT} of a flow flips at step {FLIP_STEP}, N = {N}"),
        x_label: "time (steps)".into(),
        y_label: "max relative error over ranks".into(),
        x_ticks: steps.iter().map(u64::to_string).collect(),
        series: runs
            .iter()
            .map(|(name, report)| Series {
                name: name.clone(),
                values: steps
                    .iter()
                    .map(|&s| sample(report, s).map(|(max, _)| max))
                    .collect(),
            })
            .collect(),
        kind: Kind::Lines,
        log_y: true,
    };
    ctx.write("fig1.svg", &render(&chart))
}
