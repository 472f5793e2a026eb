//! 003 Sec. IV, Fig. 8: distributed modified Gram-Schmidt (dmGS) QR of a random N x 16 matrix,
//! every norm and dot product a gossip sum (PF or PCF) or, for reference, an exact sum.

use std::sync::atomic::Ordering;

use anyhow::{bail, Context};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::topology::Topology;
use ftcoll_algos::{OpId, Protocol, ReduceOp};
use ftcoll_runtime::job::Algorithm;
use ftcoll_runtime::sim::{SimConfig, Simulation};

use super::{error_chart, gossip_spec, mean, median, sci, worse, EPS, STEPS_PER_PUSH};
use crate::experiments::svg::{render, Series};
use crate::experiments::{size_label, Ctx};

/// Columns of the factorized matrix (003 Sec. IV: V is n x 16).
const COLUMNS: usize = 16;

/// Push budget of each dmGS reduction ("a maximal number of iterations per reduction").
const DMGS_BUDGET: u32 = 1000;

/// A reduction whose max relative error over ranks exceeds this (or is not finite) failed.
const FAILED: f64 = 1e-8;

/// How dmGS sums: a gossip algorithm, or exact sums (the same steps, every rank the same R).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Summation {
    Gossip(Algorithm),
    Exact,
}

impl Summation {
    fn name(self) -> &'static str {
        match self {
            Summation::Gossip(algo) => algo.name(),
            Summation::Exact => "exact",
        }
    }
}

/// Rank i's row of V: 16 draws uniform in (0, 1) from the stream `i` of `seed` (the example
/// `dmgs` draws the same).
fn matrix_row(seed: u64, rank: u32) -> [f64; COLUMNS] {
    let mut rng = SimRng::for_stream(seed, u64::from(rank));
    std::array::from_fn(|_| rng.next_open01())
}

/// One rank's state in dmGS: its row of V (overwritten), its row of Q and its own estimate of R
/// (upper triangle).
#[derive(Clone, Copy, Debug)]
struct Rows {
    v: [f64; COLUMNS],
    q: [f64; COLUMNS],
    r: [[f64; COLUMNS]; COLUMNS],
}

/// The state of a dmGS run: every rank's [`Rows`].
struct Dmgs {
    ranks: Vec<Rows>,
}

/// How the reductions of one dmGS run went.
#[derive(Clone, Copy, Debug, Default)]
struct ReductionStats {
    reductions: u32,
    at_budget: u32,
    /// Reductions after which some rank's estimate was off by more than `FAILED` (relative).
    failed: u32,
    pushes: u64,
}

/// Sums each rank's `len` values over all ranks; every rank gets its own estimate.
struct Reducer<'a> {
    ctx: &'a Ctx,
    summation: Summation,
    n: u32,
    /// Seeds of the reductions derive from this and the step.
    seed: u64,
    stats: ReductionStats,
}

impl Reducer<'_> {
    fn sum(&mut self, inputs: &[Vec<f64>]) -> anyhow::Result<Vec<Vec<f64>>> {
        self.stats.reductions += 1;
        let step = self.stats.reductions;
        match self.summation {
            Summation::Exact => {
                let len = inputs.first().map_or(0, Vec::len);
                let total: Vec<f64> = (0..len)
                    .map(|e| inputs.iter().map(|row| row[e]).sum())
                    .collect();
                Ok(vec![total; inputs.len()])
            }
            Summation::Gossip(algo) => self.gossip(algo, step, inputs),
        }
    }

    fn gossip(
        &mut self,
        algo: Algorithm,
        step: u32,
        inputs: &[Vec<f64>],
    ) -> anyhow::Result<Vec<Vec<f64>>> {
        let len = inputs.first().map_or(0, Vec::len);
        let mut spec = gossip_spec(
            algo,
            Topology::hypercube(self.n)?,
            ReduceOp::Sum,
            DMGS_BUDGET,
        );
        spec.input_len = len;
        spec.validate()?;
        let seed = self.ctx.run_seed(&[self.seed, u64::from(step)]);
        let config = spec.sim_config(SimConfig {
            seed,
            ..SimConfig::default()
        });
        let ranks = spec.gossip_ranks::<f64>(OpId(u64::from(step)), seed, STEPS_PER_PUSH)?;
        let flat: Vec<f64> = inputs.iter().flatten().copied().collect();
        let mut sim = Simulation::new(config, ranks, flat, len, ReduceOp::Sum)?;
        let report = sim.run();
        self.ctx.runs.fetch_add(1, Ordering::Relaxed);
        if report.completed != self.n || report.truncated {
            bail!(
                "dmGS reduction {step} over {} ranks did not complete",
                self.n
            );
        }
        self.stats.at_budget += u32::from(report.stopped_by_budget);
        self.stats.failed +=
            u32::from(report.max_rel_error.is_nan() || report.max_rel_error > FAILED);
        self.stats.pushes += u64::from(report.rounds);
        let estimates: Vec<Vec<f64>> = sim
            .ranks()
            .iter()
            .map(|rank| {
                let mut estimate = Vec::new();
                rank.estimate(&mut estimate);
                estimate
            })
            .collect();
        if estimates.iter().any(|e| e.len() != len) {
            bail!("dmGS reduction {step}: a rank's estimate does not hold {len} values");
        }
        Ok(estimates)
    }
}

impl Dmgs {
    fn new(original: &[[f64; COLUMNS]]) -> Dmgs {
        let ranks = original
            .iter()
            .map(|&v| Rows {
                v,
                q: [0.0; COLUMNS],
                r: [[0.0; COLUMNS]; COLUMNS],
            })
            .collect();
        Dmgs { ranks }
    }

    /// Modified Gram-Schmidt, one column at a time (the steps of the example `dmgs`):
    /// 1. `||v_k||^2` by a sum; each rank takes the root of its estimate as r_kk and sets
    ///    `q_ik = v_ik / r_kk`;
    /// 2. `r_kj = sum_i q_ik v_ij` for every j > k as one vector sum (15 - k values);
    /// 3. each rank updates its row: `v_ij -= q_ik r_kj` with its own estimates.
    fn factorize(&mut self, reducer: &mut Reducer<'_>) -> anyhow::Result<()> {
        for k in 0..COLUMNS {
            let squares: Vec<Vec<f64>> = self
                .ranks
                .iter()
                .map(|rows| vec![rows.v[k] * rows.v[k]])
                .collect();
            let norms = reducer.sum(&squares)?;
            for (rows, norm_sq) in self.ranks.iter_mut().zip(&norms) {
                let norm = norm_sq[0].sqrt();
                rows.r[k][k] = norm;
                rows.q[k] = rows.v[k] / norm;
            }
            if k + 1 == COLUMNS {
                break;
            }
            let dots: Vec<Vec<f64>> = self
                .ranks
                .iter()
                .map(|rows| (k + 1..COLUMNS).map(|j| rows.q[k] * rows.v[j]).collect())
                .collect();
            let r_rows = reducer.sum(&dots)?;
            for (rows, r_row) in self.ranks.iter_mut().zip(&r_rows) {
                for (j, &r_kj) in (k + 1..COLUMNS).zip(r_row) {
                    rows.r[k][j] = r_kj;
                    rows.v[j] -= rows.q[k] * r_kj;
                }
            }
        }
        Ok(())
    }

    /// `||V - Q R_j||_inf / ||V||_inf`: every row of Q times rank `j`'s estimate of R.
    fn factorization_error(&self, original: &[[f64; COLUMNS]], j: usize) -> f64 {
        let r = &self.ranks[j].r;
        let mut residual: f64 = 0.0;
        let mut norm: f64 = 0.0;
        for (v, rows) in original.iter().zip(&self.ranks) {
            let row_residual: f64 = (0..COLUMNS)
                .map(|c| {
                    let qr: f64 = (0..=c).map(|k| rows.q[k] * r[k][c]).sum();
                    (v[c] - qr).abs()
                })
                .sum();
            residual = worse(residual, row_residual);
            norm = norm.max(v.iter().map(|x| x.abs()).sum());
        }
        residual / norm
    }

    /// `||I - Q^T Q||_inf`.
    fn orthogonality_error(&self) -> f64 {
        (0..COLUMNS)
            .map(|k| {
                (0..COLUMNS)
                    .map(|l| {
                        let dot: f64 = self.ranks.iter().map(|rows| rows.q[k] * rows.q[l]).sum();
                        (f64::from(u8::from(k == l)) - dot).abs()
                    })
                    .sum::<f64>()
            })
            .fold(0.0, worse)
    }
}

/// What one dmGS run measured.
///
/// Each rank holds its own estimate R_j of R. The factorization error takes one R for all
/// rows: rank 0's (the figure), and the worst over all ranks j. Row i against rank i's own R
/// is no measure: MGS makes `v_i = q_i R_i` hold row by row for whatever R_i the rank used,
/// so that error is local rounding (about 1e-16) however inaccurate the reductions were.
#[derive(Clone, Copy, Debug)]
struct DmgsRun {
    /// `||V - Q R_0|| / ||V||`.
    rank0_r_error: f64,
    /// The largest `||V - Q R_j|| / ||V||` over ranks j.
    worst_r_error: f64,
    /// `||I - Q^T Q||`.
    orthogonality: f64,
    stats: ReductionStats,
}

/// The seed of run `run`'s matrix at `n` ranks (the same for every summation).
fn matrix_seed(ctx: &Ctx, n: u32, run: u64) -> u64 {
    ctx.run_seed(&[8, u64::from(n), run])
}

fn dmgs_run(ctx: &Ctx, summation: Summation, n: u32, run: u64) -> anyhow::Result<DmgsRun> {
    let matrix_seed = matrix_seed(ctx, n, run);
    let original: Vec<[f64; COLUMNS]> = (0..n).map(|i| matrix_row(matrix_seed, i)).collect();
    let mut dmgs = Dmgs::new(&original);
    let mut reducer = Reducer {
        ctx,
        summation,
        n,
        seed: matrix_seed,
        stats: ReductionStats::default(),
    };
    dmgs.factorize(&mut reducer)
        .with_context(|| format!("dmGS({}) over {n} ranks", summation.name()))?;
    let errors: Vec<f64> = (0..dmgs.ranks.len())
        .map(|j| dmgs.factorization_error(&original, j))
        .collect();
    Ok(DmgsRun {
        rank0_r_error: errors[0],
        worst_r_error: errors.iter().copied().fold(0.0, worse),
        orthogonality: dmgs.orthogonality_error(),
        stats: reducer.stats,
    })
}

/// N of Fig. 8: 2^4..2^6 by default, 2^4..2^10 with `--full`. N starts at 16 because V is
/// N x 16 and 003 takes n >= m: with fewer rows than columns the trailing columns are
/// rounding noise and their norms near zero.
fn dmgs_sizes(ctx: &Ctx) -> Vec<u32> {
    let top = if ctx.full { 10 } else { 6 };
    (4..=top)
        .map(|p| 1u32 << p)
        .filter(|&n| n <= ctx.max_ranks)
        .collect()
}

/// One point of Fig. 8.
struct DmgsPoint {
    summation: Summation,
    n: u32,
    runs: Vec<DmgsRun>,
}

impl DmgsPoint {
    fn mean_of(&self, f: impl Fn(&DmgsRun) -> f64) -> f64 {
        mean(&self.runs.iter().map(f).collect::<Vec<_>>())
    }

    fn median_of(&self, f: impl Fn(&DmgsRun) -> f64) -> f64 {
        median(&self.runs.iter().map(f).collect::<Vec<_>>())
    }

    /// Runs in which some reduction failed.
    fn failed_runs(&self) -> usize {
        self.runs.iter().filter(|r| r.stats.failed > 0).count()
    }

    fn total_of(&self, f: impl Fn(&ReductionStats) -> u64) -> u64 {
        self.runs.iter().map(|r| f(&r.stats)).sum()
    }
}

/// 003 Sec. IV, Fig. 8.
pub fn dmgs(ctx: &Ctx) -> anyhow::Result<()> {
    let repeats = u64::from(ctx.placements(3, 50));
    let sizes = dmgs_sizes(ctx);
    let mut jobs = Vec::new();
    for &n in &sizes {
        for summation in SUMMATIONS {
            for run in 0..repeats {
                jobs.push((summation, n, run));
            }
        }
    }
    ctx.progress(&format!("{} dmGS factorizations", jobs.len()));
    let runs = ctx
        .par_map(&jobs, |&(summation, n, run)| {
            dmgs_run(ctx, summation, n, run)
        })
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    write_dmgs_runs(ctx, &jobs, &runs)?;
    let mut points: Vec<DmgsPoint> = Vec::new();
    for (&(summation, n, _), run) in jobs.iter().zip(runs) {
        match points.last_mut() {
            Some(p) if p.summation == summation && p.n == n => p.runs.push(run),
            _ => points.push(DmgsPoint {
                summation,
                n,
                runs: vec![run],
            }),
        }
    }
    print_dmgs(&points);
    write_dmgs(ctx, &points)?;
    dmgs_chart(ctx, &sizes, &points)?;
    dmgs_claim(&points);
    Ok(())
}

/// Every factorization, with the seed of its matrix (which the example `dmgs` takes).
fn write_dmgs_runs(
    ctx: &Ctx,
    jobs: &[(Summation, u32, u64)],
    runs: &[DmgsRun],
) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .zip(runs)
        .map(|(&(summation, n, run), r)| {
            vec![
                n.to_string(),
                summation.name().into(),
                run.to_string(),
                matrix_seed(ctx, n, run).to_string(),
                sci(r.rank0_r_error),
                sci(r.worst_r_error),
                sci(r.orthogonality),
                r.stats.reductions.to_string(),
                r.stats.at_budget.to_string(),
                r.stats.failed.to_string(),
                r.stats.pushes.to_string(),
            ]
        })
        .collect();
    ctx.write_csv(
        "dmgs_runs.csv",
        &[
            "n",
            "summation",
            "run",
            "matrix_seed",
            "factorization_error_rank0_r",
            "factorization_error_worst_r",
            "orthogonality_error",
            "reductions",
            "reductions_at_budget",
            "reductions_failed",
            "pushes_of_busiest_rank_summed",
        ],
        &rows,
    )
}

fn print_dmgs(points: &[DmgsPoint]) {
    println!(
        "V: N x {COLUMNS} uniform (0,1), hypercube of N ranks, each reduction eps = {EPS:e} with \
         at most {DMGS_BUDGET} pushes; factorization error ||V - Q R_j||_inf / ||V||_inf with rank \
         0's R and with the worst rank's R, orthogonality ||I - Q^T Q||_inf; mean (median) over \
         runs; reductions that ran to the budget; runs in which a reduction failed (some rank \
         off by more than {FAILED:e}; the error then spreads to every later step)"
    );
    println!(
        "N      sum    runs  rank-0 R            worst R    ||I-QtQ||  at-budget    failed  pushes/reduction"
    );
    for p in points {
        let reductions = p.total_of(|s| u64::from(s.reductions)).max(1);
        println!(
            "{:<6} {:<6} {:<5} {:<9} ({:<8}) {:<10} {:<10} {:>5}/{:<6} {:<7} {:.0}",
            size_label(p.n),
            p.summation.name(),
            p.runs.len(),
            sci(p.mean_of(|r| r.rank0_r_error)),
            sci(p.median_of(|r| r.rank0_r_error)),
            sci(p.mean_of(|r| r.worst_r_error)),
            sci(p.mean_of(|r| r.orthogonality)),
            p.total_of(|s| u64::from(s.at_budget)),
            reductions,
            format!("{}/{}", p.failed_runs(), p.runs.len()),
            p.total_of(|s| s.pushes) as f64 / reductions as f64
        );
    }
}

fn write_dmgs(ctx: &Ctx, points: &[DmgsPoint]) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                p.n.to_string(),
                p.summation.name().into(),
                p.runs.len().to_string(),
                sci(p.mean_of(|r| r.rank0_r_error)),
                sci(p.median_of(|r| r.rank0_r_error)),
                sci(p.mean_of(|r| r.worst_r_error)),
                sci(p.mean_of(|r| r.orthogonality)),
                p.total_of(|s| u64::from(s.reductions)).to_string(),
                p.total_of(|s| u64::from(s.at_budget)).to_string(),
                p.total_of(|s| u64::from(s.failed)).to_string(),
                p.failed_runs().to_string(),
                p.total_of(|s| s.pushes).to_string(),
            ]
        })
        .collect();
    ctx.write_csv(
        "dmgs.csv",
        &[
            "n",
            "summation",
            "runs",
            "mean_factorization_error_rank0_r",
            "median_factorization_error_rank0_r",
            "mean_factorization_error_worst_r",
            "mean_orthogonality_error",
            "reductions",
            "reductions_at_budget",
            "reductions_failed",
            "runs_with_a_failed_reduction",
            "pushes_of_busiest_rank_summed",
        ],
        &rows,
    )
}

/// The summations of Fig. 8, plus the exact reference.
const SUMMATIONS: [Summation; 3] = [
    Summation::Gossip(Algorithm::Pf),
    Summation::Gossip(Algorithm::Pcf),
    Summation::Exact,
];

fn dmgs_chart(ctx: &Ctx, sizes: &[u32], points: &[DmgsPoint]) -> anyhow::Result<()> {
    let series = SUMMATIONS
        .into_iter()
        .map(|summation| Series {
            name: format!("dmGS({})", summation.name()),
            values: sizes
                .iter()
                .map(|&n| {
                    points
                        .iter()
                        .find(|p| p.summation == summation && p.n == n)
                        .map(|p| p.median_of(|r| r.rank0_r_error))
                })
                .collect(),
        })
        .collect();
    let mut chart = error_chart(
        "003 Fig. 8: dmGS factorization error, hypercube",
        "ranks N = rows of V",
        sizes.iter().map(|&n| size_label(n)).collect(),
        series,
    );
    // The median: one failed reduction makes a run's error infinite, and the mean with it.
    chart.y_label = "median ||V - Q R_0|| / ||V|| (log scale)".into();
    ctx.write("dmgs.svg", &render(&chart))
}

fn dmgs_claim(points: &[DmgsPoint]) {
    let trend = |summation: Summation| {
        let values: Vec<String> = points
            .iter()
            .filter(|p| p.summation == summation)
            .map(|p| {
                format!(
                    "{} (median {}) at N = {}",
                    sci(p.mean_of(|r| r.rank0_r_error)),
                    sci(p.median_of(|r| r.rank0_r_error)),
                    size_label(p.n)
                )
            })
            .collect();
        let mine = points.iter().filter(|p| p.summation == summation);
        let failed: usize = mine.clone().map(DmgsPoint::failed_runs).sum();
        let total: usize = mine.map(|p| p.runs.len()).sum();
        format!(
            "dmGS({}) {} (a reduction failed in {failed}/{total} runs)",
            summation.name(),
            values.join(", ")
        )
    };
    println!(
        "claim (003 Fig. 8): dmGS(PCF) reaches the 1e-15 target of its reductions and does not \
         grow with N, dmGS(PF) misses it and grows with N; measured (mean and median over runs of \
         ||V - Q R_0|| / ||V||): {}; {}; reference {}",
        trend(Summation::Gossip(Algorithm::Pf)),
        trend(Summation::Gossip(Algorithm::Pcf)),
        trend(Summation::Exact)
    );
}
