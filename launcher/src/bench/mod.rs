//! `ftcoll-launch bench`: performance measurements reported as medians.

pub mod allreduce;
pub mod console;
pub mod era;
pub mod ftco;
pub mod transport;

use std::fs;

use anyhow::{bail, Context};
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::SimConfig;
use serde::Serialize;

use crate::cli::BenchArgs;

/// Results of `bench sim`.
#[derive(Debug, Serialize)]
struct SimBenchJson {
    n: u32,
    repeat: u32,
    events: u64,
    median_wall_s: f64,
    median_events_per_s: f64,
    min_events_per_s: f64,
    max_events_per_s: f64,
    peak_rss_bytes_per_rank: f64,
}

/// Runs the named benchmark.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    match args.name.as_str() {
        "sim" => bench_sim(args),
        "allreduce" => allreduce::run(args),
        "corrected" => allreduce::run_corrected(args),
        "era" => era::run(args),
        "ftco" => ftco::run(args),
        "console" => console::run(args),
        "transport" => transport::run(args),
        other => {
            bail!("unknown benchmark '{other}'; available: sim, allreduce, corrected, era, ftco, console, transport")
        }
    }
}

/// Resident memory of this process: (current, peak) in bytes, from /proc/self/status.
fn rss_bytes() -> Option<(u64, u64)> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Simulator throughput (events per second) and memory per simulated rank, on recursive
/// doubling: every rank sends and receives once per round, so it stresses the event loop, the
/// message store and the per-rank state, not the algorithm.
fn bench_sim(args: &BenchArgs) -> anyhow::Result<()> {
    if args.n == 0 || args.repeat == 0 {
        bail!("bench sim needs -n >= 1 and --repeat >= 1");
    }
    let spec = JobSpec::new(Algorithm::Rdb, args.n);
    let (rss_before, _) = rss_bytes().context("cannot read /proc/self/status")?;
    let mut rates = Vec::new();
    let mut walls = Vec::new();
    let mut events = 0;
    for i in 0..args.repeat {
        let report = simulate(&spec, SimConfig::default())?;
        events = report.events;
        let rate = report.events as f64 / report.wall_s.max(1e-9);
        eprintln!(
            "run {}/{}: {:.3} s, {:.2} M events/s",
            i + 1,
            args.repeat,
            report.wall_s,
            rate / 1e6
        );
        rates.push(rate);
        walls.push(report.wall_s);
    }
    let (_, peak) = rss_bytes().context("cannot read /proc/self/status")?;
    let per_rank = peak.saturating_sub(rss_before) as f64 / f64::from(args.n);
    let result = SimBenchJson {
        n: args.n,
        repeat: args.repeat,
        events,
        median_wall_s: median(&mut walls),
        median_events_per_s: median(&mut rates.clone()),
        min_events_per_s: rates.iter().copied().fold(f64::INFINITY, f64::min),
        max_events_per_s: rates.iter().copied().fold(0.0, f64::max),
        peak_rss_bytes_per_rank: per_rank,
    };
    println!(
        "bench sim: rdb allreduce, n = {}, {} runs",
        result.n, result.repeat
    );
    println!("  events per run          {}", result.events);
    println!("  median wall             {:.3} s", result.median_wall_s);
    println!(
        "  median throughput       {:.2} M events/s (min {:.2}, max {:.2})",
        result.median_events_per_s / 1e6,
        result.min_events_per_s / 1e6,
        result.max_events_per_s / 1e6
    );
    println!(
        "  peak memory per rank    {:.0} bytes",
        result.peak_rss_bytes_per_rank
    );
    if let Some(path) = &args.json {
        fs::write(path, serde_json::to_string_pretty(&result)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
