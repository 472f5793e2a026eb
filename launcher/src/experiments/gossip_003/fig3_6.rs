//! 003 Figs. 3 and 6: the accuracy PF and PCF reach with eps = 1e-15 against N, on a 3-D torus
//! and a hypercube, for sum and average. Sums are Push-Sum's own (weight 1 at rank 0 only, so
//! the ratio converges to the sum itself), as 003 computes them; ftcoll's default sum, the
//! average times the live rank count, would repeat the average's error.

use ftcoll_algos::gossip::SumForm;
use ftcoll_algos::topology::Topology;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::job::Algorithm;
use ftcoll_runtime::sim::SimConfig;

use super::{error_chart, gossip_spec, median, sci, simulate_counted, ALGOS, EPS, STEPS_PER_PUSH};
use crate::experiments::svg::{render, Series};
use crate::experiments::{size_label, Ctx};

/// The two topologies of Figs. 3 and 6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Network {
    /// 2^i x 2^i x 2^i torus.
    Torus,
    /// Hypercube of 2^(3i) ranks.
    Hypercube,
}

impl Network {
    fn name(self) -> &'static str {
        match self {
            Network::Torus => "torus",
            Network::Hypercube => "hypercube",
        }
    }

    /// The topology for exponent `i` (N = 2^(3i) either way).
    fn topology(self, i: u32) -> anyhow::Result<Topology> {
        let side = 1u32 << i;
        Ok(match self {
            Network::Torus => Topology::torus3d_dims([side; 3])?,
            Network::Hypercube => Topology::hypercube(side * side * side)?,
        })
    }
}

/// `sum` or `avg`.
fn op_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        _ => "avg",
    }
}

/// Push budget of the accuracy runs, which stop here when they cannot reach 1e-15: 2000 by
/// default, 3000 with `--full`.
fn accuracy_budget(ctx: &Ctx) -> u32 {
    if ctx.full {
        3000
    } else {
        2000
    }
}

/// One point of Figs. 3 and 6 (one seed).
#[derive(Clone, Copy, Debug)]
struct AccuracyJob {
    network: Network,
    i: u32,
    op: ReduceOp,
    algo: Algorithm,
    seed_index: u64,
}

/// What one accuracy run measured.
#[derive(Clone, Copy, Debug)]
struct AccuracyRun {
    /// Max relative error over ranks when the run stopped.
    final_error: f64,
    /// The smallest max error sampled during the run (every push period).
    best_error: f64,
    /// The budget stopped the run (eps not reached).
    at_budget: bool,
    /// Pushes of the busiest rank.
    pushes: u32,
}

fn accuracy_run(ctx: &Ctx, job: &AccuracyJob) -> anyhow::Result<AccuracyRun> {
    let topology = job.network.topology(job.i)?;
    let mut spec = gossip_spec(job.algo, topology, job.op, accuracy_budget(ctx));
    if job.op == ReduceOp::Sum {
        spec.gossip.sum_form = SumForm::RankZeroWeight;
    }
    let config = SimConfig {
        seed: ctx.run_seed(&[3, u64::from(job.i), job.seed_index]),
        history_every: Some(STEPS_PER_PUSH),
        ..SimConfig::default()
    };
    let report = simulate_counted(ctx, &spec, config)?;
    let best_sampled = report
        .history
        .iter()
        .map(|&(_, worst, _)| worst)
        .fold(f64::INFINITY, f64::min);
    Ok(AccuracyRun {
        final_error: report.max_rel_error,
        best_error: best_sampled.min(report.max_rel_error),
        at_budget: report.stopped_by_budget,
        pushes: report.rounds,
    })
}

/// The exponents i of Figs. 3 and 6 (N = 8^i): 1..3 by default, 1..4 with `--full` (003 goes
/// to 2^15 = 32K ranks, i = 5, which takes about an hour here).
fn accuracy_exponents(ctx: &Ctx) -> Vec<u32> {
    let top = if ctx.full { 4 } else { 3 };
    (1..=top)
        .filter(|&i| 1u64 << (3 * i) <= u64::from(ctx.max_ranks))
        .collect()
}

/// 003 Figs. 3 and 6.
pub fn fig3_6(ctx: &Ctx) -> anyhow::Result<()> {
    let seeds = u64::from(ctx.placements(3, 10));
    let exponents = accuracy_exponents(ctx);
    let mut points = Vec::new();
    for &i in &exponents {
        for network in [Network::Torus, Network::Hypercube] {
            for op in [ReduceOp::Sum, ReduceOp::Average] {
                for algo in ALGOS {
                    points.push((network, i, op, algo));
                }
            }
        }
    }
    let jobs: Vec<AccuracyJob> = points
        .iter()
        .flat_map(|&(network, i, op, algo)| {
            (0..seeds).map(move |seed_index| AccuracyJob {
                network,
                i,
                op,
                algo,
                seed_index,
            })
        })
        .collect();
    ctx.progress(&format!("{} accuracy runs", jobs.len()));
    let runs = ctx
        .par_map(&jobs, |job| accuracy_run(ctx, job))
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    write_accuracy_runs(ctx, &jobs, &runs)?;
    let summaries: Vec<AccuracySummary> = points
        .iter()
        .map(|&(network, i, op, algo)| {
            let mine: Vec<AccuracyRun> = jobs
                .iter()
                .zip(&runs)
                .filter(|(j, _)| (j.network, j.i, j.op, j.algo) == (network, i, op, algo))
                .map(|(_, r)| *r)
                .collect();
            AccuracySummary::of(network, i, op, algo, &mine)
        })
        .collect();
    print_accuracy(accuracy_budget(ctx), &summaries);
    write_accuracy_summary(ctx, &summaries)?;
    accuracy_chart(ctx, &exponents, &summaries)?;
    accuracy_claim(&summaries);
    Ok(())
}

/// The runs of one point, summarised.
#[derive(Clone, Debug)]
struct AccuracySummary {
    network: Network,
    n: u32,
    op: ReduceOp,
    algo: Algorithm,
    runs: usize,
    median_final: f64,
    median_best: f64,
    worst_final: f64,
    at_budget: usize,
    median_pushes: f64,
}

impl AccuracySummary {
    fn of(network: Network, i: u32, op: ReduceOp, algo: Algorithm, runs: &[AccuracyRun]) -> Self {
        let finals: Vec<f64> = runs.iter().map(|r| r.final_error).collect();
        let bests: Vec<f64> = runs.iter().map(|r| r.best_error).collect();
        let pushes: Vec<f64> = runs.iter().map(|r| f64::from(r.pushes)).collect();
        AccuracySummary {
            network,
            n: 1 << (3 * i),
            op,
            algo,
            runs: runs.len(),
            median_final: median(&finals),
            median_best: median(&bests),
            worst_final: finals.iter().copied().fold(0.0, f64::max),
            at_budget: runs.iter().filter(|r| r.at_budget).count(),
            median_pushes: median(&pushes),
        }
    }
}

fn write_accuracy_runs(
    ctx: &Ctx,
    jobs: &[AccuracyJob],
    runs: &[AccuracyRun],
) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .zip(runs)
        .map(|(j, r)| {
            vec![
                j.network.name().into(),
                (1u32 << (3 * j.i)).to_string(),
                op_name(j.op).into(),
                j.algo.name().into(),
                ctx.run_seed(&[3, u64::from(j.i), j.seed_index]).to_string(),
                sci(r.final_error),
                sci(r.best_error),
                r.at_budget.to_string(),
                r.pushes.to_string(),
            ]
        })
        .collect();
    ctx.write_csv(
        "fig3_6_runs.csv",
        &[
            "topology",
            "n",
            "op",
            "algo",
            "seed",
            "final_max_rel_error",
            "best_max_rel_error",
            "stopped_by_budget",
            "pushes",
        ],
        &rows,
    )
}

fn print_accuracy(budget: u32, summaries: &[AccuracySummary]) {
    println!(
        "eps = {EPS:e}, budget {budget} pushes; median over seeds of the max relative error over ranks"
    );
    println!("topology   N      op   algo  final     best      worst     at-budget  pushes");
    for s in summaries {
        println!(
            "{:<10} {:<6} {:<4} {:<5} {:<9} {:<9} {:<9} {:>3}/{:<5} {:>6.0}",
            s.network.name(),
            size_label(s.n),
            op_name(s.op),
            s.algo.name(),
            sci(s.median_final),
            sci(s.median_best),
            sci(s.worst_final),
            s.at_budget,
            s.runs,
            s.median_pushes
        );
    }
}

fn write_accuracy_summary(ctx: &Ctx, summaries: &[AccuracySummary]) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = summaries
        .iter()
        .map(|s| {
            vec![
                s.network.name().into(),
                s.n.to_string(),
                op_name(s.op).into(),
                s.algo.name().into(),
                s.runs.to_string(),
                sci(s.median_final),
                sci(s.median_best),
                sci(s.worst_final),
                s.at_budget.to_string(),
                format!("{:.0}", s.median_pushes),
            ]
        })
        .collect();
    ctx.write_csv(
        "fig3_6.csv",
        &[
            "topology",
            "n",
            "op",
            "algo",
            "runs",
            "median_final_max_rel_error",
            "median_best_max_rel_error",
            "worst_final_max_rel_error",
            "runs_at_budget",
            "median_pushes",
        ],
        &rows,
    )
}

fn accuracy_chart(
    ctx: &Ctx,
    exponents: &[u32],
    summaries: &[AccuracySummary],
) -> anyhow::Result<()> {
    let ns: Vec<u32> = exponents.iter().map(|&i| 1 << (3 * i)).collect();
    let mut series = Vec::new();
    for algo in ALGOS {
        for network in [Network::Torus, Network::Hypercube] {
            for op in [ReduceOp::Sum, ReduceOp::Average] {
                series.push(Series {
                    name: format!("{} {} {}", algo.name(), network.name(), op_name(op)),
                    values: ns
                        .iter()
                        .map(|&n| {
                            summaries
                                .iter()
                                .find(|s| (s.algo, s.network, s.op, s.n) == (algo, network, op, n))
                                .map(|s| s.median_final)
                        })
                        .collect(),
                });
            }
        }
    }
    let chart = error_chart(
        "003 Figs. 3, 6: accuracy reached with eps 1e-15, PF vs PCF",
        "ranks N (torus 2^i x 2^i x 2^i, hypercube 2^3i)",
        ns.iter().map(|&n| size_label(n)).collect(),
        series,
    );
    ctx.write("fig3_6.svg", &render(&chart))
}

fn accuracy_claim(summaries: &[AccuracySummary]) {
    let measured = |algo: Algorithm| {
        let of: Vec<&AccuracySummary> = summaries.iter().filter(|s| s.algo == algo).collect();
        let mut ns: Vec<u32> = of.iter().map(|s| s.n).collect();
        ns.dedup();
        // The worst topology and operator at each N.
        let at_n: Vec<String> = ns
            .iter()
            .map(|&n| {
                let here = of.iter().filter(|s| s.n == n);
                let final_error = here.clone().map(|s| s.median_final).fold(0.0, f64::max);
                let best = here.map(|s| s.median_best).fold(0.0, f64::max);
                format!(
                    "{} (best {}) at N = {}",
                    sci(final_error),
                    sci(best),
                    size_label(n)
                )
            })
            .collect();
        let reached: usize = of.iter().map(|s| s.runs - s.at_budget).sum();
        let total: usize = of.iter().map(|s| s.runs).sum();
        format!(
            "{} {}, eps reached in {reached}/{total} runs",
            algo.name(),
            at_n.join(", ")
        )
    };
    println!(
        "claim (003 Figs. 3, 6): PF's accuracy degrades as N grows; PCF reaches eps = 1e-15 on \
         torus and hypercube, sum and average, at every N; measured (worst over topology and \
         operator of the median max error at the stop): {}; {}",
        measured(Algorithm::Pf),
        measured(Algorithm::Pcf)
    );
}
