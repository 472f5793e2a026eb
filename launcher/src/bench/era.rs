//! `ftcoll-launch bench era`: the agreement on real processes, measured as 002 Sec. 4 does.
//!
//! Two parts, each with ftcoll and Open MPI 5's ULFM `MPIX_Comm_agree` side by side in the
//! same run (ULFM when it is installed; see `bench/ULFM.md`):
//! - failure-free latency against N, beside the runtime's own recursive-doubling allreduce
//!   (002 Fig. 2a reports the agreement at about twice the allreduce);
//! - 002 Fig. 3 with a SIGKILL: the detecting agreement, the stabilizing agreements until every
//!   survivor has acknowledged the failure, and the post-failure agreements, by the role of the
//!   failed ranks in the tree (002 Table 2d: root, child of the root, node master, child of a
//!   node master, whole node).
//!
//! Every figure is the slowest survivor's (per operation for medians), a median over runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use ftcoll_algos::corrected::RankSet;
use ftcoll_algos::era::{EraTopology, EraTree};
use serde::Serialize;

use super::allreduce::{
    ftcoll_run, ftcoll_timings, parse_sizes, run_bounded, slowest_per_op, tempdir, FtcollCase,
    Latency,
};
use super::BenchArgs;

const ULFM_SOURCE: &str = include_str!("../../bench/ulfm_agree.c");

/// The ranks that fail in one row of the failure table.
#[derive(Debug, Clone, Serialize)]
pub struct Role {
    /// 002 Table 2d's name for them.
    pub name: String,
    /// The ranks killed.
    pub victims: Vec<u32>,
}

/// The failed ranks by role in `topology` over `n` ranks, nodes of `ranks_per_node`.
pub fn roles(topology: EraTopology, n: u32, ranks_per_node: u32) -> anyhow::Result<Vec<Role>> {
    let k = ranks_per_node;
    if k < 2 || n < 2 * k {
        bail!("the failure table needs --ranks-per-node >= 2 and at least two nodes' ranks");
    }
    let tree = EraTree::new(topology, n, &[]);
    let none = RankSet::default();
    let mut children = Vec::new();
    let root = tree.rank_at(0);
    tree.children(&none, root, &mut children);
    // Of the root's children, one on its own node (the intra-node tree), as 002's rank 4.
    let child_of_root = children
        .iter()
        .copied()
        .filter(|&c| c / k == root / k)
        .min()
        .or_else(|| children.iter().copied().min())
        .context("the agreement tree's root has no child")?;
    // The first rank of the second node: its master in a hierarchical tree.
    let master = k;
    tree.children(&none, master, &mut children);
    let child_of_master = children
        .iter()
        .copied()
        .filter(|&c| c / k == master / k)
        .min()
        .context("the node master has no child on its node")?;
    let role = |name: &str, victims: Vec<u32>| Role {
        name: name.into(),
        victims,
    };
    Ok(vec![
        role("root", vec![root]),
        role("child of root", vec![child_of_root]),
        role("node master", vec![master]),
        role("child of master", vec![child_of_master]),
        role("whole node", (k..2 * k).collect()),
    ])
}

/// One failure run's (or the median of several runs') figures, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct FailureFigures {
    /// The agreement that discovers the failure.
    pub detect_us: f64,
    /// The stabilizing agreements, summed.
    pub stabilize_us: f64,
    /// How many stabilizing agreements.
    pub stabilize_count: f64,
    /// Median of the post-failure agreements.
    pub post_median_us: f64,
}

impl FailureFigures {
    fn median_of(runs: &[FailureFigures]) -> Option<FailureFigures> {
        if runs.is_empty() {
            return None;
        }
        let pick = |f: fn(&FailureFigures) -> f64| {
            let mut values: Vec<f64> = runs.iter().map(f).collect();
            super::median(&mut values)
        };
        Some(FailureFigures {
            detect_us: pick(|r| r.detect_us),
            stabilize_us: pick(|r| r.stabilize_us),
            stabilize_count: pick(|r| r.stabilize_count),
            post_median_us: pick(|r| r.post_median_us),
        })
    }
}

/// One row of the failure table.
#[derive(Debug, Clone, Serialize)]
pub struct FailureRow {
    /// Which ranks failed.
    pub role: Role,
    /// Implementation: `ftcoll` or `ulfm`.
    pub implementation: String,
    /// Median over the runs that completed.
    pub figures: Option<FailureFigures>,
    /// Runs that completed, of those tried.
    pub runs_ok: u32,
    /// Runs tried.
    pub runs: u32,
    /// Why a run gave no figures (the last such reason).
    pub note: Option<String>,
}

/// Everything `bench era` measured.
#[derive(Debug, Serialize)]
struct EraBenchJson {
    tree: String,
    ranks_per_node: u32,
    latency: Vec<Latency>,
    failure_n: u32,
    failure: Vec<FailureRow>,
}

/// Open MPI 5 with ULFM, and the reference benchmark built with its mpicc.
struct Ulfm {
    mpiexec: PathBuf,
    binary: PathBuf,
}

impl Ulfm {
    /// Builds the reference benchmark in `dir` if `prefix` holds an Open MPI with ULFM.
    fn build(prefix: &Path, prebuilt: Option<&Path>, dir: &Path) -> Option<Ulfm> {
        let (mpiexec, binary) =
            super::allreduce::build_ulfm(prefix, prebuilt, dir, "ulfm_agree", ULFM_SOURCE)?;
        Some(Ulfm { mpiexec, binary })
    }

    fn command(&self, n: u32) -> Command {
        let mut command = Command::new(&self.mpiexec);
        command
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .args(["--with-ft", "ulfm", "--oversubscribe", "-n", &n.to_string()])
            .args(["--mca", "mpi_yield_when_idle", "1"])
            .arg(&self.binary);
        command
    }

    fn latency(&self, n: u32, iters: u32, warmup: u32) -> Latency {
        let mut command = self.command(n);
        command.args(["latency", &iters.to_string(), &warmup.to_string()]);
        let parsed = run_bounded(&mut command, "ULFM's mpiexec").and_then(|out| {
            let fields = result_fields(&out, "median_us")?;
            if fields.get("wrong") != Some(&0.0) {
                bail!("MPIX_Comm_agree decided a wrong value or failed");
            }
            Ok((fields["median_us"], fields["p99_us"]))
        });
        let (median_us, p99_us, note) = match parsed {
            Ok((median, p99)) => (Some(median), Some(p99), None),
            Err(error) => (None, None, Some(error.to_string())),
        };
        Latency {
            implementation: "ulfm".into(),
            n,
            median_us,
            p99_us,
            note,
        }
    }

    fn failure(
        &self,
        n: u32,
        iters: u32,
        warmup: u32,
        victims: &[u32],
    ) -> anyhow::Result<FailureFigures> {
        let list: Vec<String> = victims.iter().map(u32::to_string).collect();
        let mut command = self.command(n);
        command.args([
            "failure",
            &iters.to_string(),
            &warmup.to_string(),
            &list.join(","),
        ]);
        let out = run_bounded(&mut command, "ULFM's mpiexec")?;
        let fields = result_fields(&out, "detect_us")?;
        Ok(FailureFigures {
            detect_us: fields["detect_us"],
            stabilize_us: fields["stabilize_us"],
            stabilize_count: fields["stabilize_count"],
            post_median_us: fields["post_median_us"],
        })
    }
}

/// The `name value name value ...` result line that starts with `first`, every value a number.
fn result_fields(
    out: &str,
    first: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, f64>> {
    let line = out
        .lines()
        .find(|l| l.starts_with(first))
        .with_context(|| format!("no '{first} ...' result line in the benchmark's output"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut fields = std::collections::BTreeMap::new();
    for pair in words.chunks(2) {
        let [name, value] = pair else {
            bail!("malformed result line: {line}");
        };
        let value: f64 = value
            .parse()
            .with_context(|| format!("malformed result line: {line}"))?;
        fields.insert((*name).to_string(), value);
    }
    Ok(fields)
}

/// One ftcoll failure run of `victims` at `n` ranks.
fn ftcoll_failure(args: &BenchArgs, n: u32, victims: &[u32]) -> anyhow::Result<FailureFigures> {
    let case = FtcollCase {
        dead: victims.to_vec(),
        dies_at_op: u64::from(args.warmup),
        era_tree: Some(args.era_tree.clone()),
        ranks_per_node: Some(args.ranks_per_node),
        rank_args: vec!["--bench-failure".into()],
        ..FtcollCase::plain("ftcoll", "era-agree")
    };
    let survivors = ftcoll_timings(&case, n, args.iters, args.warmup)?;
    let expected = args.iters as usize + 3;
    if survivors.iter().any(|t| t.len() != expected) {
        bail!("a survivor reported {expected} figures short");
    }
    let worst = |i: usize| survivors.iter().map(|t| t[i]).max().unwrap_or(0) as f64;
    let mut post = slowest_per_op(&survivors, 3);
    Ok(FailureFigures {
        detect_us: worst(0) / 1e3,
        stabilize_us: worst(1) / 1e3,
        stabilize_count: worst(2),
        post_median_us: super::median(&mut post),
    })
}

/// Runs `one` `repeat` times and keeps the median of what completed.
fn failure_row(
    role: &Role,
    implementation: &str,
    repeat: u32,
    mut one: impl FnMut() -> anyhow::Result<FailureFigures>,
) -> FailureRow {
    let mut runs = Vec::new();
    let mut note = None;
    for i in 0..repeat {
        eprintln!(
            "  {implementation}, {} killed, run {}/{repeat}",
            role.name,
            i + 1
        );
        match one() {
            Ok(figures) => runs.push(figures),
            Err(error) => {
                eprintln!("  run gave no figures: {error}");
                note = Some(error.to_string());
            }
        }
    }
    FailureRow {
        role: role.clone(),
        implementation: implementation.into(),
        figures: FailureFigures::median_of(&runs),
        runs_ok: runs.len() as u32,
        runs: repeat,
        note,
    }
}

/// The three implementations at `n` ranks, `--repeat` runs each, interleaved so that the
/// machine's slow spells fall on all alike; each figure is the median of the runs' figures.
fn latency_rows(args: &BenchArgs, ulfm: Option<&Ulfm>, n: u32) -> anyhow::Result<Vec<Latency>> {
    let era = FtcollCase {
        era_tree: Some(args.era_tree.clone()),
        ranks_per_node: Some(args.ranks_per_node),
        ..FtcollCase::plain("era", "era-agree")
    };
    let rdb = FtcollCase::plain("rdb", "rdb");
    let kinds = if ulfm.is_some() { 3 } else { 2 };
    let mut runs: Vec<Vec<Latency>> = vec![Vec::new(); kinds];
    for i in 0..args.repeat as usize {
        eprintln!("n = {n}: latency run {}/{}", i + 1, args.repeat);
        // The order rotates, so that whatever a run leaves behind (page cache, a busy
        // scheduler) weighs on the next implementation in turn, never always on the same one.
        for kind in (0..kinds).map(|k| (k + i) % kinds) {
            let row = match (kind, ulfm) {
                (0, _) => ftcoll_run(&era, n, args.iters, args.warmup)?,
                (1, _) => ftcoll_run(&rdb, n, args.iters, args.warmup)?,
                (_, Some(ulfm)) => ulfm.latency(n, args.iters, args.warmup),
                (_, None) => continue,
            };
            runs[kind].push(row);
        }
    }
    Ok(runs.iter().map(|r| median_latency(r)).collect())
}

/// The median of the runs' medians and of their p99s, over the runs that gave figures.
fn median_latency(runs: &[Latency]) -> Latency {
    let mut medians: Vec<f64> = runs.iter().filter_map(|r| r.median_us).collect();
    let mut p99s: Vec<f64> = runs.iter().filter_map(|r| r.p99_us).collect();
    let figure = |values: &mut Vec<f64>| (!values.is_empty()).then(|| super::median(values));
    Latency {
        implementation: runs[0].implementation.clone(),
        n: runs[0].n,
        median_us: figure(&mut medians),
        p99_us: figure(&mut p99s),
        note: runs.iter().find_map(|r| r.note.clone()),
    }
}

/// Runs `bench era`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let sizes = parse_sizes(args.sizes_or(super::DEFAULT_SIZES), 2)?;
    let topology =
        EraTopology::from_name(&args.era_tree, args.ranks_per_node).map_err(anyhow::Error::msg)?;
    let roles = roles(topology, args.failure_n, args.ranks_per_node)?;
    if args.repeat == 0 || args.iters == 0 || args.warmup == 0 {
        bail!("bench era needs --repeat, --iters and --warmup of at least 1");
    }
    let dir = tempdir()?;
    let ulfm = Ulfm::build(&args.ulfm_prefix, args.mpi_prebuilt.as_deref(), &dir);
    let mut latency = Vec::new();
    for &n in &sizes {
        latency.extend(latency_rows(args, ulfm.as_ref(), n)?);
    }
    let mut failure = Vec::new();
    for role in &roles {
        eprintln!(
            "n = {}: {} ({:?}) killed",
            args.failure_n, role.name, role.victims
        );
        failure.push(failure_row(role, "ftcoll", args.repeat, || {
            ftcoll_failure(args, args.failure_n, &role.victims)
        }));
        if let Some(ulfm) = &ulfm {
            failure.push(failure_row(role, "ulfm", args.repeat, || {
                ulfm.failure(args.failure_n, args.iters, args.warmup, &role.victims)
            }));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let result = EraBenchJson {
        tree: args.era_tree.clone(),
        ranks_per_node: args.ranks_per_node,
        latency,
        failure_n: args.failure_n,
        failure,
    };
    print_latency(&result, &sizes);
    print_failure(&result);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&result)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn median_of(rows: &[Latency], implementation: &str, n: u32) -> Option<f64> {
    rows.iter()
        .find(|r| r.implementation == implementation && r.n == n)
        .and_then(|r| r.median_us)
}

fn print_latency(result: &EraBenchJson, sizes: &[u32]) {
    println!(
        "agreement latency, failure-free ({} tree, {} ranks per node), slowest rank per operation, median us",
        result.tree, result.ranks_per_node
    );
    println!(
        "{:>4}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}",
        "n", "ftcoll agree", "ftcoll rdb", "ulfm agree", "agree / rdb", "agree / ulfm"
    );
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".to_string(),
    };
    for &n in sizes {
        let era = median_of(&result.latency, "era", n);
        let rdb = median_of(&result.latency, "rdb", n);
        let ulfm = median_of(&result.latency, "ulfm", n);
        println!(
            "{n:>4}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}",
            show(era),
            show(rdb),
            show(ulfm),
            ratio(era, rdb),
            ratio(era, ulfm)
        );
    }
}

fn print_failure(result: &EraBenchJson) {
    println!(
        "\nafter a SIGKILL (002 Fig. 3), n = {}, slowest survivor, median of runs; us",
        result.failure_n
    );
    println!(
        "{:>16}  {:>11}  {:>6}  {:>12}  {:>16}  {:>10}  {:>6}",
        "failed", "ranks", "impl", "detecting", "stabilizing (k)", "post", "runs"
    );
    for row in &result.failure {
        let victims = match row.role.victims.as_slice() {
            [one] => one.to_string(),
            many => format!("{}-{}", many[0], many[many.len() - 1]),
        };
        let (detect, stabilize, post) =
            row.figures
                .as_ref()
                .map_or(("-".into(), "-".into(), "-".into()), |f| {
                    (
                        format!("{:.1}", f.detect_us),
                        format!("{:.1} ({})", f.stabilize_us, f.stabilize_count),
                        format!("{:.1}", f.post_median_us),
                    )
                });
        println!(
            "{:>16}  {:>11}  {:>6}  {:>12}  {:>16}  {:>10}  {:>6}",
            row.role.name,
            victims,
            row.implementation,
            detect,
            stabilize,
            post,
            format!("{}/{}", row.runs_ok, row.runs)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_the_hierarchical_tree() {
        let topology = EraTopology::from_name("bin/bin", 4).unwrap();
        let roles = roles(topology, 16, 4).unwrap();
        let victims: Vec<Vec<u32>> = roles.iter().map(|r| r.victims.clone()).collect();
        assert_eq!(
            victims,
            vec![vec![0], vec![1], vec![4], vec![5], vec![4, 5, 6, 7]]
        );
    }

    #[test]
    fn roles_need_two_nodes() {
        let topology = EraTopology::from_name("bin/bin", 8).unwrap();
        assert!(roles(topology, 12, 8).is_err());
        let topology = EraTopology::from_name("bin", 1).unwrap();
        assert!(roles(topology, 12, 1).is_err());
    }

    #[test]
    fn result_lines_parse_and_malformed_ones_are_errors() {
        let out = "noise\ndetect_us 1.5 stabilize_us 2 stabilize_count 1 post_median_us 3.25\n";
        let fields = result_fields(out, "detect_us").unwrap();
        assert_eq!(fields["detect_us"], 1.5);
        assert_eq!(fields["post_median_us"], 3.25);
        assert!(result_fields("median_us 1 p99_us\n", "median_us").is_err());
        assert!(result_fields("median_us x\n", "median_us").is_err());
        assert!(result_fields("other\n", "median_us").is_err());
    }
}
