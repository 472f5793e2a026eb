//! 004 Table 2: process imbalance, in 004's step model. For input spreads W = 0, 256, ...,
//! 16384, start times are uniform or normal draws placed affinely onto [0, W], so that
//! StartTime_first = 0 and StartTime_last = W (004's input spread); on the best multi-root
//! k-nomial tree for N (64K with `--full`, 4K by default), averaged over a few seeds (2 by
//! default, 3 with `--full`; `--placements` overrides). A rank that has not started answers DATA
//! and KEEPALIVE with ACK and keeps the DATA until it starts (004 App. B; the simulator does
//! this for FTCO frames).
//!
//! Per run, with FinishTime the end of the step in which a rank completed: latency =
//! FinishTime_last - StartTime_last; work = messages a rank sent until it finished, per rank,
//! the ACKs it sent before it started included (Alg. 1 returns at the finish; the ACKs and
//! answers a finished rank still sends are in the CSV's `all_msgs_per_rank`); output spread = FinishTime_last - FinishTime_first; Max. Len. = the
//! longest inbound queue of any rank, the maximum over the seeds.

use ftcoll_algos::rng::SimRng;
use ftcoll_algos::Rank;
use ftcoll_runtime::job::JobSpec;
use ftcoll_runtime::sim::SimConfig;

use super::svg::{render, Chart, Kind, Series};
use super::{
    allreduce_spec, best_multiroot_knomial, fmt, simulate_watched_checked, Ctx, TreeChoice,
};

/// The random stream of the start times.
const START_STREAM: u64 = 0x7AB1E2;

/// Input spreads of the table.
const SPREADS: [u64; 8] = [0, 256, 512, 1024, 2048, 4096, 8192, 16384];

/// One row: a distribution and a spread, averaged over seeds.
#[derive(Clone, Copy, Debug, Default)]
struct Row {
    latency: f64,
    /// Messages a rank sent until it finished, per rank (004's work).
    work: f64,
    /// Every message of the run per rank, the ACKs and answers sent after finishing included.
    all_messages: f64,
    output_spread: f64,
    input_spread: f64,
    /// The longest inbound queue of any rank (the maximum over seeds, not the mean).
    max_queue: f64,
}

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> anyhow::Result<()> {
    let n: u32 = if ctx.full { 65536 } else { 4096 }
        .min(ctx.max_ranks)
        .max(64);
    let reps = ctx.placements(2, 3);
    ctx.progress(&format!(
        "N = {n}: searching the best multi-root k-nomial tree"
    ));
    let (tree, _) = best_multiroot_knomial(ctx, n)?;
    let spec = allreduce_spec(n, tree);
    println!(
        "N = {n}, tree k-nomial k={} with {} roots, {reps} seed(s) a row",
        tree.k(),
        tree.roots
    );
    let mut jobs = Vec::new();
    for normal in [false, true] {
        for &width in &SPREADS {
            for rep in 0..reps {
                jobs.push((normal, width, rep));
            }
        }
    }
    let results = ctx.par_map(&jobs, |&(normal, width, rep)| {
        one_run(ctx, &spec, n, normal, width, rep)
    });
    let results = results.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let table = average(&jobs, &results, reps);
    write_table(ctx, n, tree, reps, &table)?;
    ctx.write("table2.svg", &render(&chart(n, &table)))
}

/// One run: start times spread by `width` (uniform, or `normal`), seed number `rep`.
fn one_run(
    ctx: &Ctx,
    spec: &JobSpec,
    n: u32,
    normal: bool,
    width: u64,
    rep: u32,
) -> anyhow::Result<Row> {
    let seed = ctx.run_seed(&[2, u64::from(n), u64::from(normal), width, u64::from(rep)]);
    let starts = start_times(n, normal, width, seed);
    let config = SimConfig {
        seed,
        start_times: Some(starts.clone()),
        ..SimConfig::default()
    };
    let (sim, report) = simulate_watched_checked(ctx, spec, config)?;
    let cost = spec.sim_config(SimConfig::default()).cost;
    let finish: Vec<u64> = sim
        .ranks()
        .iter()
        .filter_map(|w| w.completed_at.map(|t| cost.finish_of(t.0)))
        .collect();
    let max_start = starts.iter().copied().max().unwrap_or(0);
    let min_start = starts.iter().copied().min().unwrap_or(0);
    let last = finish.iter().copied().max().unwrap_or(0);
    let first = finish.iter().copied().min().unwrap_or(0);
    // A rank's work includes the ACKs it sent before it started (App. B), which the simulator
    // sends on its behalf.
    let work: u64 = sim
        .ranks()
        .iter()
        .enumerate()
        .map(|(r, w)| w.sent_until_done + sim.answered_before_start(Rank(r as u32)))
        .sum();
    let max_queue = sim.ranks().iter().map(|w| w.ftco().queue_peak()).max();
    Ok(Row {
        latency: last as f64 - max_start as f64,
        work: work as f64 / f64::from(n),
        all_messages: report.messages as f64 / f64::from(n),
        output_spread: (last - first) as f64,
        input_spread: (max_start - min_start) as f64,
        max_queue: max_queue.unwrap_or(0) as f64,
    })
}

/// Start times whose first is 0 and whose last is `width` (004's input spread,
/// StartTime_last - StartTime_first): uniform or normal draws placed affinely onto
/// `[0, width]`.
fn start_times(n: u32, normal: bool, width: u64, seed: u64) -> Vec<u64> {
    let mut rng = SimRng::for_stream(seed, START_STREAM);
    let draws: Vec<f64> = (0..n)
        .map(|_| {
            if normal {
                rng.normal()
            } else {
                rng.next_open01()
            }
        })
        .collect();
    let lo = draws.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = draws.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if width == 0 || hi <= lo {
        return vec![0; n as usize];
    }
    let scale = width as f64 / (hi - lo);
    draws
        .iter()
        .map(|d| ((d - lo) * scale).round() as u64)
        .collect()
}

/// The rows averaged over each point's seeds: (normal, width, mean row).
fn average(jobs: &[(bool, u64, u32)], results: &[Row], reps: u32) -> Vec<(bool, u64, Row)> {
    let mut table = Vec::new();
    for (i, chunk) in results.chunks(reps as usize).enumerate() {
        let count = chunk.len() as f64;
        let mean = |f: fn(&Row) -> f64| chunk.iter().map(f).sum::<f64>() / count;
        let (normal, width, _) = jobs[i * reps as usize];
        table.push((
            normal,
            width,
            Row {
                latency: mean(|r| r.latency),
                work: mean(|r| r.work),
                all_messages: mean(|r| r.all_messages),
                output_spread: mean(|r| r.output_spread),
                input_spread: mean(|r| r.input_spread),
                max_queue: chunk.iter().map(|r| r.max_queue).fold(0.0, f64::max),
            },
        ));
    }
    table
}

/// Prints the table and writes it as CSV.
fn write_table(
    ctx: &Ctx,
    n: u32,
    tree: TreeChoice,
    reps: u32,
    table: &[(bool, u64, Row)],
) -> anyhow::Result<()> {
    println!("         uniform                                       normal");
    println!(
        "spread   latency  work   out.spread  max.len  in.spread   latency  work   out.spread  max.len  in.spread"
    );
    let mut rows = Vec::new();
    for &width in &SPREADS {
        let find = |normal: bool| {
            table
                .iter()
                .find(|(m, w, _)| *m == normal && *w == width)
                .map(|t| t.2)
                .unwrap_or_default()
        };
        let (u, g) = (find(false), find(true));
        println!(
            "{width:<7} {:>8.1} {:>6.2} {:>10.1} {:>8.0} {:>10.0}   {:>7.1} {:>6.2} {:>10.1} {:>8.0} {:>10.0}",
            u.latency,
            u.work,
            u.output_spread,
            u.max_queue,
            u.input_spread,
            g.latency,
            g.work,
            g.output_spread,
            g.max_queue,
            g.input_spread
        );
        for (name, r) in [("uniform", u), ("normal", g)] {
            rows.push(vec![
                name.to_string(),
                width.to_string(),
                n.to_string(),
                tree.k().to_string(),
                tree.roots.to_string(),
                reps.to_string(),
                fmt(r.latency),
                fmt(r.work),
                fmt(r.all_messages),
                fmt(r.output_spread),
                fmt(r.input_spread),
                fmt(r.max_queue),
            ]);
        }
    }
    ctx.write_csv(
        "table2.csv",
        &[
            "distribution",
            "spread_steps",
            "n",
            "knomial_k",
            "roots",
            "seeds",
            "latency_steps",
            "work_msgs_per_rank",
            "all_msgs_per_rank",
            "output_spread_steps",
            "measured_input_spread_steps",
            "max_queue_len",
        ],
        &rows,
    )
}

/// Latency and output spread against the input spread.
fn chart(n: u32, table: &[(bool, u64, Row)]) -> Chart {
    let spreads = &SPREADS;
    let series = |name: &str, normal: bool, f: fn(&Row) -> f64| Series {
        name: name.into(),
        values: spreads
            .iter()
            .map(|&w| {
                table
                    .iter()
                    .find(|t| t.0 == normal && t.1 == w)
                    .map(|t| f(&t.2))
            })
            .collect(),
    };
    Chart {
        title: format!("004 Table 2: process imbalance, FTCO allreduce, N = {n}"),
        x_label: "input spread W (steps, log scale after 0)".into(),
        y_label: "steps (latency, output spread)".into(),
        x_ticks: spreads.iter().map(|w| w.to_string()).collect(),
        series: vec![
            series("latency, uniform", false, |r| r.latency),
            series("latency, normal", true, |r| r.latency),
            series("out. spread, uniform", false, |r| r.output_spread),
            series("out. spread, normal", true, |r| r.output_spread),
        ],
        kind: Kind::Lines,
        log_y: false,
    }
}
