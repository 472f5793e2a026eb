//! `ftcoll-launch bench gossip`: the run-time figures of 000 on real processes. 000's Fig. 8
//! times Push-Sum until ε = 1e-14 on each communication topology (MPI on VSC-2); its Fig. 11
//! counts the iterations HPS needs for ε = 1e-2 … 1e-5 (MPI on Vulcan) against log2 N. Here
//! each case is a job of real ranks over shared memory, in the same run as ARDB at each budget
//! of exchanges, exact recursive doubling and `MPI_Allreduce` of one double: per case the
//! median time of an operation (its slowest rank), the frames a rank sent per operation (a
//! gossip rank sends one per push, so this is its iteration count plus the answers it gave)
//! and the worst relative error of any rank's result.
//!
//! The ftcoll side runs this launcher as a child (`ftcoll-launch -n N --algo … --json`), so
//! each case is judged exactly as a user's job is; a gossip job that misses its eps exits
//! non-zero there and counts here as a run outside eps.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};
use ftcoll_algos::rdb::RdbShape;
use ftcoll_algos::topology::TopologyKind;
use ftcoll_runtime::transport::TransportKind;
use serde::{Deserialize, Serialize};

use super::allreduce::{parse_sizes, run_bounded, tempdir};
use super::sweep::{mpi_binaries, mpi_row, Swept};
use super::BenchArgs;

/// 000 Fig. 8's accuracy target.
const FIG8_EPS: f64 = 1e-14;
/// 000 Fig. 11's accuracy targets.
const FIG11_EPS: [f64; 4] = [1e-2, 1e-3, 1e-4, 1e-5];
/// Fig. 8's topologies; a hypercube needs a power of two, a torus at least 8 ranks.
const FIG8_TOPOLOGIES: [TopologyKind; 3] = [
    TopologyKind::Hypercube,
    TopologyKind::Torus,
    TopologyKind::Full,
];
/// Most operations per gossip job: a gossip operation is thousands of frames.
const MAX_OPS: u32 = 1000;
/// Most operations per job of `ardb` and `rdb` (`--iters`).
const MAX_EXCHANGE_OPS: u32 = 100_000;

/// One case at one size, over `--repeat` runs (the `--json` output).
#[derive(Debug, Clone, Serialize)]
pub struct GossipRow {
    /// 000's figure the case belongs to (8 or 11).
    pub figure: u32,
    /// `ps`, `hps`, `hpflc`, `ardb`, `rdb`, or an MPI library (`MPI_Allreduce`).
    pub implementation: String,
    /// Ranks.
    pub n: u32,
    /// The gossip topology (Fig. 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<&'static str>,
    /// The accuracy target of the gossip stopping rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eps: Option<f64>,
    /// ARDB's budget of exchanges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchanges: Option<u32>,
    /// Runs that gave figures.
    pub runs: u32,
    /// Of those, runs whose every result was within eps (exact for rdb and MPI).
    pub runs_within_eps: u32,
    /// Median over runs of the median operation time (slowest rank), microseconds.
    pub median_us: Option<f64>,
    /// Median over runs of the frames a rank sent per operation.
    pub messages_per_rank: Option<f64>,
    /// Worst relative error of any rank's result over all runs.
    pub max_rel_error: Option<f64>,
    /// Why a run gave no figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One ftcoll case.
#[derive(Clone, Copy, Debug)]
struct Case {
    figure: u32,
    algo: &'static str,
    topology: Option<TopologyKind>,
    eps: Option<f64>,
    exchanges: Option<u32>,
}

/// The cases at `n` ranks: Fig. 8's Push-Sum per topology the size allows, Fig. 11's HPS and
/// HPFLC per eps, ARDB at each budget, and exact recursive doubling.
fn cases(n: u32) -> Vec<Case> {
    let plain = |figure, algo| Case {
        figure,
        algo,
        topology: None,
        eps: None,
        exchanges: None,
    };
    let mut cases: Vec<Case> = FIG8_TOPOLOGIES
        .iter()
        .filter(|kind| kind.build(n).is_ok())
        .map(|&kind| Case {
            topology: Some(kind),
            eps: Some(FIG8_EPS),
            ..plain(8, "ps")
        })
        .collect();
    for algo in ["hps", "hpflc"] {
        cases.extend(FIG11_EPS.iter().map(|&eps| Case {
            eps: Some(eps),
            ..plain(11, algo)
        }));
    }
    cases.extend((1..=RdbShape::new(n).exchanges).map(|k| Case {
        exchanges: Some(k),
        ..plain(11, "ardb")
    }));
    cases.push(plain(11, "rdb"));
    cases
}

/// What one ftcoll job reported (fields of the launcher's `--json`).
#[derive(Debug, Deserialize)]
struct JobJson {
    ops_ok_all_ranks: u64,
    messages: u64,
    max_rel_error: Option<f64>,
    exact: bool,
    within_eps: Option<bool>,
    median_slowest_op_us: Option<f64>,
}

/// One run's figures: (median µs, frames per rank per operation, max error, within eps).
type RunFigures = (f64, f64, Option<f64>, bool);

/// Runs `case` once at `n` ranks with `seed`; the job's report, even when it exited non-zero
/// because a result missed eps.
fn run_case(
    case: &Case,
    n: u32,
    seed: u64,
    args: &BenchArgs,
    dir: &Path,
) -> anyhow::Result<RunFigures> {
    let gossip =
        ftcoll_algos::Algorithm::from_name(case.algo).is_some_and(|a| a.gossip_rule().is_some());
    // A few gossip operations give a steady median; an 8-byte exchange of a microsecond needs
    // as many as MPI's side gets, or the first operations' page faults weigh in.
    let ops = if gossip {
        args.gossip_ops
    } else {
        args.iters.min(MAX_EXCHANGE_OPS)
    };
    let json = dir.join(format!("job-{n}-{seed}.json"));
    let _ = std::fs::remove_file(&json);
    let mut command = Command::new(std::env::current_exe()?);
    command.args(["-n", &n.to_string(), "--algo", case.algo, "--no-tui"]);
    command.args(["--input", "uniform", "--seed", &seed.to_string()]);
    command.args(["--ops", &ops.to_string()]);
    command.arg("--json").arg(&json);
    if let Some(kind) = case.topology {
        command.args(["--topology", kind.name()]);
    }
    if let Some(eps) = case.eps {
        command.args(["--eps", &format!("{eps:e}")]);
    }
    if let Some(k) = case.exchanges {
        command.args(["--steps", &k.to_string()]);
    }
    if gossip {
        command.args(["--gossip-period", &args.gossip_period]);
    }
    let exited = run_bounded(&mut command, &format!("the {} job", case.algo));
    let Ok(text) = std::fs::read_to_string(&json) else {
        exited?;
        bail!("the {} job wrote no report", case.algo);
    };
    let job: JobJson = serde_json::from_str(&text).context("the job's report")?;
    if job.ops_ok_all_ranks != u64::from(ops) {
        bail!(
            "{} of {ops} operations completed at every rank",
            job.ops_ok_all_ranks
        );
    }
    let median = job
        .median_slowest_op_us
        .context("the job timed no operation")?;
    let per_rank = job.messages as f64 / (f64::from(n) * f64::from(ops));
    let within = job.within_eps.unwrap_or(job.exact);
    Ok((median, per_rank, job.max_rel_error, within))
}

/// A row from the runs' figures.
fn row(case: &Case, n: u32, runs: &[RunFigures], note: Option<String>) -> GossipRow {
    let mut medians: Vec<f64> = runs.iter().map(|r| r.0).collect();
    let mut messages: Vec<f64> = runs.iter().map(|r| r.1).collect();
    let figure = |values: &mut Vec<f64>| (!values.is_empty()).then(|| super::median(values));
    GossipRow {
        figure: case.figure,
        implementation: case.algo.into(),
        n,
        topology: case.topology.map(TopologyKind::name),
        eps: case.eps,
        exchanges: case.exchanges,
        runs: runs.len() as u32,
        runs_within_eps: runs.iter().filter(|r| r.3).count() as u32,
        median_us: figure(&mut medians),
        messages_per_rank: figure(&mut messages),
        max_rel_error: runs.iter().filter_map(|r| r.2).reduce(f64::max),
        note,
    }
}

/// Runs `bench gossip`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let sizes = parse_sizes(args.sizes_or(super::DEFAULT_SIZES), 2)?;
    if args.repeat == 0 {
        bail!("--repeat takes at least one run");
    }
    if !(1..=MAX_OPS).contains(&args.gossip_ops) {
        bail!("--gossip-ops takes 1 to {MAX_OPS} operations per job");
    }
    if !(1..=MAX_EXCHANGE_OPS).contains(&args.iters) {
        bail!("--iters takes 1 to {MAX_EXCHANGE_OPS} operations per job");
    }
    ftcoll_launcher::text::options::parse_wall_time(&args.gossip_period)
        .map_err(|e| anyhow::anyhow!("--gossip-period: {e}"))?;
    let dir = tempdir()?;
    let measured = measure(args, &sizes, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let rows = measured?;
    print_table(&rows);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn measure(args: &BenchArgs, sizes: &[u32], dir: &Path) -> anyhow::Result<Vec<GossipRow>> {
    let libraries = mpi_binaries(args, dir)?;
    let mut rows = Vec::new();
    for &n in sizes {
        for case in cases(n) {
            let mut runs = Vec::new();
            let mut note = None;
            for i in 0..args.repeat {
                eprintln!(
                    "n = {n}: {} {} run {}/{}",
                    case.algo,
                    describe(&case),
                    i + 1,
                    args.repeat
                );
                match run_case(&case, n, 1 + u64::from(i), args, dir) {
                    Ok(figures) => runs.push(figures),
                    Err(error) => note = Some(error.to_string()),
                }
            }
            rows.push(row(&case, n, &runs, note));
        }
        for (lib, binary) in &libraries {
            let mut medians = Vec::new();
            let mut note = None;
            for i in 0..args.repeat {
                eprintln!("n = {n}: {} run {}/{}", lib.name, i + 1, args.repeat);
                let warm = args.warmup.min(args.iters / 10 + 2);
                let timed = mpi_row(
                    Swept::Allreduce,
                    (lib, binary),
                    (n, TransportKind::Shm, super::sweep::Pages::Huge),
                    8,
                    (args.iters, warm),
                );
                match timed.median_us {
                    Some(us) => medians.push(us),
                    None => note = timed.note,
                }
            }
            let runs = medians.len() as u32;
            rows.push(GossipRow {
                figure: 11,
                implementation: lib.name.into(),
                n,
                topology: None,
                eps: None,
                exchanges: None,
                runs,
                runs_within_eps: runs,
                median_us: (!medians.is_empty()).then(|| super::median(&mut medians)),
                messages_per_rank: None,
                max_rel_error: None,
                note,
            });
        }
    }
    Ok(rows)
}

/// The case's parameter in words: topology and eps, eps, or ARDB's budget.
fn describe(case: &Case) -> String {
    match (case.topology, case.eps, case.exchanges) {
        (Some(kind), Some(eps), _) => format!("{} eps {eps:e}", kind.name()),
        (None, Some(eps), _) => format!("eps {eps:e}"),
        (_, _, Some(k)) => format!("{k} exchanges"),
        _ => String::new(),
    }
}

fn print_table(rows: &[GossipRow]) {
    println!("bench gossip: 000 Figs. 8 and 11 on real processes (shared memory), beside MPI_Allreduce of one double");
    println!(
        "{:>4} {:>4}  {:<10} {:<22} {:>12} {:>10} {:>10} {:>9}",
        "fig", "n", "impl", "case", "median us", "msgs/rank", "max err", "in eps"
    );
    for r in rows {
        let case = describe(&Case {
            figure: r.figure,
            algo: "",
            topology: r.topology.and_then(|t| TopologyKind::from_name(t).ok()),
            eps: r.eps,
            exchanges: r.exchanges,
        });
        let number = |v: Option<f64>, precision: usize| {
            v.map_or("-".to_string(), |v| format!("{v:.precision$}"))
        };
        println!(
            "{:>4} {:>4}  {:<10} {:<22} {:>12} {:>10} {:>10} {:>9}{}",
            r.figure,
            r.n,
            r.implementation,
            case,
            number(r.median_us, 1),
            number(r.messages_per_rank, 1),
            r.max_rel_error
                .map_or("-".to_string(), |e| format!("{e:.1e}")),
            format!("{}/{}", r.runs_within_eps, r.runs),
            r.note
                .as_ref()
                .map_or(String::new(), |n| format!("  ({n})")),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::cases;

    #[test]
    fn cases_follow_the_figures_and_what_each_size_allows() {
        let at = |n| {
            cases(n)
                .iter()
                .map(|c| (c.figure, c.algo, c.topology.map(|t| t.name()), c.exchanges))
                .collect::<Vec<_>>()
        };
        let eight = at(8);
        let fig8: Vec<_> = eight.iter().filter(|c| c.0 == 8).map(|c| c.2).collect();
        assert_eq!(fig8, [Some("hypercube"), Some("torus"), Some("full")]);
        assert_eq!(eight.iter().filter(|c| c.1 == "hps").count(), 4);
        let budgets: Vec<_> = eight.iter().filter_map(|c| c.3).collect();
        assert_eq!(budgets, [1, 2, 3]);
        // Six ranks: no hypercube; ARDB's budget stops at log2 of the power of two below.
        let six = at(6);
        assert!(!six.iter().any(|c| c.2 == Some("hypercube")));
        assert_eq!(six.iter().filter_map(|c| c.3).max(), Some(2));
        assert_eq!(six.last().map(|c| c.1), Some("rdb"));
    }
}
