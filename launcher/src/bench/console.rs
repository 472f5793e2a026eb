//! `ftcoll-launch bench console`: what watching a job costs the launcher.
//!
//! The bound: with 4096 ranks, the launcher and the console together stay below a tenth of a
//! core in steady state. The benchmark runs the console's job (pfcc, paced, fresh inputs; pushes
//! 20 ms apart up to 256 ranks, proportionally further apart above, so that thousands of rank
//! processes fit a small machine) twice side by side: with the console (every rank sampling at its period, the
//! launcher aggregating, a 120x40 frame rendered off-screen ten times a second) and without
//! it (the same paced job, no samples, no frames). Each run measures the launcher process's own
//! CPU time over a window after wire-up and a warm-up; the figure is CPU seconds per wall
//! second (cores), median over the repeats.

use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::BenchArgs;
use crate::cluster::{Cluster, ClusterOptions};
use crate::console::live::{Inputs, LiveConsole};
use crate::console::window::BenchWindow;
use crate::live::{LaunchOptions, LiveSpec};

#[derive(Serialize)]
struct Row {
    n: u32,
    variant: &'static str,
    launcher_cores_median: f64,
    launcher_cores_runs: Vec<f64>,
    samples_per_s_median: f64,
}

/// Runs the benchmark.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let sizes = super::allreduce::parse_sizes_of("--console-sizes", &args.console_sizes, 1)?;
    let mut rows = Vec::new();
    for &n in &sizes {
        for (variant, console) in [("without console", false), ("with console", true)] {
            let mut cores = Vec::new();
            let mut rates = Vec::new();
            for _ in 0..args.repeat.max(1) {
                let (c, r) = one_run(n, console, args)?;
                cores.push(c);
                rates.push(r);
            }
            let row = Row {
                n,
                variant,
                launcher_cores_median: super::median(&mut cores.clone()),
                launcher_cores_runs: cores,
                samples_per_s_median: super::median(&mut rates),
            };
            println!(
                "N={n:5}  {variant:16}  launcher {:.4} cores (median of {}), {:.0} samples/s",
                row.launcher_cores_median,
                row.launcher_cores_runs.len(),
                row.samples_per_s_median
            );
            rows.push(row);
        }
        let [.., without, with] = &rows[..] else {
            continue;
        };
        println!(
            "N={n:5}  the console costs {:+.4} cores ({:.2}x the launcher alone); bound 0.1",
            with.launcher_cores_median - without.launcher_cores_median,
            with.launcher_cores_median / without.launcher_cores_median.max(1e-9)
        );
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn one_run(n: u32, console: bool, args: &BenchArgs) -> anyhow::Result<(f64, f64)> {
    // Thousands of rank processes on a few cores: pushes are spaced so the ranks' own work
    // stays within what the machine runs (20 ms up to 256 ranks, then proportionally longer),
    // and suspicion is relaxed, so that what is measured is the launcher watching a job, not
    // an overloaded machine fencing ranks.
    let period_ms = 20 * (u64::from(n) / 256).max(1);
    let period = format!("{period_ms}ms");
    let exe = std::env::current_exe().context("cannot find this program to start ranks")?;
    // The console's job as `ftcoll-launch -n N --algo pfcc --gossip-period P` starts it under
    // the console (paced, operations until stopped); the ranks' other flags keep their defaults.
    let program_args = [
        "__rank",
        "--algo",
        "pfcc",
        "--op",
        "sum",
        "--input",
        "uniform",
        "--len",
        "1",
        "--seed",
        "1",
        "--ops",
        &u64::MAX.to_string(),
        "--paced",
        "--gossip-period",
        &period,
    ]
    .map(String::from)
    .to_vec();
    let spec = LiveSpec {
        launch: LaunchOptions {
            suspect_ms: 30_000,
            timeout_s: 600,
            ..LaunchOptions::local(n)
        },
        program: exe.to_string_lossy().into_owned(),
        program_args,
        builtin: true,
        transport: ftcoll_runtime::transport::TransportKind::Shm,
        faults: Vec::new(),
        cluster: Cluster::detect(&ClusterOptions {
            n,
            ..ClusterOptions::default()
        })?,
    };
    let info = ftcoll_tui::JobInfo {
        algo: "pfcc".into(),
        n,
        transport: "shm".into(),
        simulated: false,
        value_bits: 64,
        ranks_per_node: n,
        seed: 1,
    };
    let inputs = Inputs {
        op: ftcoll_algos::ReduceOp::Sum,
        kind: ftcoll_runtime::sim::InputKind::Uniform,
        len: 1,
        seed: 1,
    };
    let window = BenchWindow::new(
        Duration::from_secs_f64(args.warmup_s),
        Duration::from_secs_f64(args.window_s),
    );
    let mut watcher = LiveConsole::headless(info, inputs, console, window);
    crate::live::run_with_console(&spec, Some(&mut watcher))?;
    watcher
        .bench_result()
        .context("the job ended before the measuring window did")
}
