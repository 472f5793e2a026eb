//! `ftcoll-launch bench allreduce`: latency of an 8-byte allreduce on real processes, ftcoll
//! beside Open MPI and MPICH in the same run.
//!
//! Every implementation is measured the same way: each rank times each operation; per
//! operation the slowest rank counts (the collective is done when the last rank has its result);
//! median and p99 over operations. The MPI side is a small C program (`bench/mpi_allreduce.c`)
//! compiled here with each library's `mpicc` when that library is installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

use super::BenchArgs;
use crate::live::{LaunchOptions, LiveSpec};

const MPI_SOURCE: &str = include_str!("../../bench/mpi_allreduce.c");
/// Most timed operations per size (each rank keeps one time per operation).
const MAX_ITERS: u32 = 10_000_000;
/// Longest one measurement may take before it is abandoned.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// One implementation at one size.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Implementation name.
    pub implementation: String,
    /// Ranks.
    pub n: u32,
    /// Median microseconds per allreduce.
    pub median_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// Why there is no figure.
    pub note: Option<String>,
}

/// An MPI library found on this machine.
struct MpiLibrary {
    name: &'static str,
    mpicc: &'static str,
    mpirun: &'static str,
    extra: &'static [&'static str],
}

const LIBRARIES: [MpiLibrary; 2] = [
    MpiLibrary {
        name: "openmpi",
        mpicc: "mpicc.openmpi",
        mpirun: "mpirun.openmpi",
        extra: &["--allow-run-as-root", "--oversubscribe"],
    },
    MpiLibrary {
        name: "mpich",
        mpicc: "mpicc.mpich",
        mpirun: "mpiexec.mpich",
        extra: &[],
    },
];

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Runs `command` with a time limit; returns its stdout.
pub fn run_bounded(command: &mut Command, what: &str) -> anyhow::Result<String> {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let started = std::time::Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if started.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} took longer than {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn parse_mpi_line(text: &str) -> Option<(f64, f64)> {
    let line = text.lines().find(|l| l.starts_with("median_us"))?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.get(5) != Some(&"0") {
        return None;
    }
    Some((fields.get(1)?.parse().ok()?, fields.get(3)?.parse().ok()?))
}

fn mpi_latency(lib: &MpiLibrary, binary: &Path, n: u32, iters: u32, warmup: u32) -> Latency {
    let mut command = Command::new(lib.mpirun);
    command
        .args(lib.extra)
        .args(["-n", &n.to_string()])
        .arg(binary)
        .args([iters.to_string(), warmup.to_string()]);
    let result = run_bounded(&mut command, lib.mpirun)
        .and_then(|out| parse_mpi_line(&out).context("no result line (or a wrong sum)"));
    match result {
        Ok((median, p99)) => Latency {
            implementation: lib.name.into(),
            n,
            median_us: Some(median),
            p99_us: Some(p99),
            note: None,
        },
        Err(error) => Latency {
            implementation: lib.name.into(),
            n,
            median_us: None,
            p99_us: None,
            note: Some(error.to_string()),
        },
    }
}

/// ftcoll's allreduce by `algo` at `n` ranks.
fn ftcoll_latency(algo: &'static str, n: u32, iters: u32, warmup: u32) -> anyhow::Result<Latency> {
    ftcoll_run(&FtcollCase::plain("ftcoll", algo), n, iters, warmup)
}

/// The algorithm `Communicator::allreduce` runs for an 8-byte vector at `n` ranks on this
/// machine (the same rule, on the cores this process may use).
fn library_pick(n: u32) -> &'static str {
    use ftcoll_algos::direct::{prefer_direct, Placement};
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get() as u32);
    if prefer_direct(n, 8, Placement::of(n, cores)) {
        "direct"
    } else {
        "rdb"
    }
}

/// One ftcoll configuration to time.
pub struct FtcollCase {
    /// Row label.
    pub label: String,
    /// `--algo`.
    pub algo: &'static str,
    /// `--tolerate`.
    pub tolerate: u32,
    /// Ranks SIGKILLed at the start of operation `dies_at_op`.
    pub dead: Vec<u32>,
    /// The operation (counting the warm-up) at whose start the dead ranks die.
    pub dies_at_op: u64,
    /// The agreement tree (`--era-tree`), if not the default.
    pub era_tree: Option<String>,
    /// Ranks per node of the agreement tree, if not all on one node.
    pub ranks_per_node: Option<u32>,
    /// More flags of the rank processes (e.g. `--bench-failure`).
    pub rank_args: Vec<String>,
}

impl FtcollCase {
    /// A failure-free case of `algo`.
    pub fn plain(label: &str, algo: &'static str) -> FtcollCase {
        FtcollCase {
            label: label.into(),
            algo,
            tolerate: 0,
            dead: Vec::new(),
            dies_at_op: 0,
            era_tree: None,
            ranks_per_node: None,
            rank_args: Vec::new(),
        }
    }
}

/// Times `case` at `n` ranks: per operation the slowest surviving rank, median and p99.
pub fn ftcoll_run(case: &FtcollCase, n: u32, iters: u32, warmup: u32) -> anyhow::Result<Latency> {
    let survivors = ftcoll_timings(case, n, iters, warmup)?;
    if survivors.iter().any(|t| t.len() != iters as usize) {
        bail!("the ftcoll benchmark job lost timings");
    }
    let mut slowest = slowest_per_op(&survivors, 0);
    slowest.sort_by(f64::total_cmp);
    Ok(Latency {
        implementation: case.label.clone(),
        n,
        median_us: slowest.get(slowest.len() / 2).copied(),
        p99_us: slowest.get((slowest.len() - 1) * 99 / 100).copied(),
        note: None,
    })
}

/// Per operation from index `skip` on, the slowest rank's time in microseconds.
pub fn slowest_per_op(timings: &[Vec<u64>], skip: usize) -> Vec<f64> {
    let ops = timings.iter().map(Vec::len).min().unwrap_or(0);
    (skip..ops)
        .map(|i| timings.iter().map(|t| t[i]).max().unwrap_or(0) as f64 / 1e3)
        .collect()
}

/// Runs `case` at `n` ranks in benchmark mode; returns the timings every survivor reported.
pub fn ftcoll_timings(
    case: &FtcollCase,
    n: u32,
    iters: u32,
    warmup: u32,
) -> anyhow::Result<Vec<Vec<u64>>> {
    let faults: Vec<String> = case
        .dead
        .iter()
        .map(|r| format!("kill:rank={r},op={}", case.dies_at_op))
        .collect();
    let parsed_faults = faults
        .iter()
        .map(|f| ftcoll_launcher::text::parse_fault(f))
        .collect::<Result<Vec<_>, _>>()?;
    let exe = std::env::current_exe()?;
    let mut program_args: Vec<String> = [
        "__rank",
        "--algo",
        case.algo,
        "--tolerate",
        &case.tolerate.to_string(),
        "--op",
        "sum",
        "--input",
        "rank",
        "--len",
        "1",
        "--seed",
        "1",
        "--ops",
        &iters.to_string(),
        "--bench-warmup",
        &warmup.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    program_args.extend(case.rank_args.iter().cloned());
    let default = LaunchOptions::local(n);
    let launch = LaunchOptions {
        timeout_s: RUN_LIMIT.as_secs(),
        era_tree: case.era_tree.clone().unwrap_or(default.era_tree.clone()),
        ranks_per_node: case.ranks_per_node,
        ..default
    };
    let spec = LiveSpec {
        cluster: None,
        launch,
        program: exe.to_string_lossy().into_owned(),
        program_args,
        builtin: true,
        transport: ftcoll_runtime::transport::TransportKind::Shm,
        faults: parsed_faults,
    };
    let outcome = crate::live::run(&spec)?;
    let survivors: Vec<Vec<u64>> = outcome
        .timings
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect();
    if outcome.failures.len() != case.dead.len() || survivors.len() + case.dead.len() != n as usize
    {
        bail!(
            "the ftcoll benchmark job lost ranks: {} failures for {} victims, {} of {} ranks reported",
            outcome.failures.len(),
            case.dead.len(),
            survivors.len(),
            n
        );
    }
    Ok(survivors)
}

/// Parses `--sizes`, each at least `min`.
pub fn parse_sizes(text: &str, min: u32) -> anyhow::Result<Vec<u32>> {
    let sizes: Vec<u32> = text
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<u32>()
                .context("--sizes takes numbers, e.g. 4,8,16")
        })
        .collect::<anyhow::Result<_>>()?;
    if sizes.iter().any(|&n| n < min) {
        bail!("--sizes must be at least {min} for this benchmark");
    }
    Ok(sizes)
}

/// Parses `--mpi`: library names, or `none`.
fn parse_mpi_list(text: &str) -> anyhow::Result<Vec<&'static str>> {
    let mut wanted = Vec::new();
    for name in text.split(',').map(str::trim) {
        if name == "none" {
            continue;
        }
        match LIBRARIES.iter().find(|lib| lib.name == name) {
            Some(lib) => wanted.push(lib.name),
            None => bail!("--mpi takes openmpi, mpich or none (comma-separated), not '{name}'"),
        }
    }
    Ok(wanted)
}

/// Runs the comparison.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let sizes = parse_sizes(&args.sizes, 2)?;
    let wanted = parse_mpi_list(&args.mpi)?;
    let forced: Option<&'static str> = match args.allreduce_algo.as_deref() {
        None => None,
        Some("rdb") => Some("rdb"),
        Some("direct") => Some("direct"),
        Some(other) => bail!("bench allreduce --algo takes rdb or direct, not '{other}'"),
    };
    if !(1..=MAX_ITERS).contains(&args.iters) {
        bail!("--iters takes 1 to {MAX_ITERS} operations");
    }
    let dir = tempdir()?;
    let source = dir.join("mpi_allreduce.c");
    std::fs::write(&source, MPI_SOURCE)?;
    let mut libraries = Vec::new();
    for lib in LIBRARIES.iter().filter(|lib| wanted.contains(&lib.name)) {
        if !(on_path(lib.mpicc) && on_path(lib.mpirun)) {
            eprintln!(
                "{} not installed ({} / {} not found); apt-get install {}",
                lib.name,
                lib.mpicc,
                lib.mpirun,
                if lib.name == "openmpi" {
                    "openmpi-bin libopenmpi-dev"
                } else {
                    "mpich libmpich-dev"
                }
            );
            continue;
        }
        let binary = dir.join(format!("allreduce_{}", lib.name));
        let built = run_bounded(
            Command::new(lib.mpicc)
                .args(["-O2", "-o"])
                .arg(&binary)
                .arg(&source),
            lib.mpicc,
        );
        match built {
            Ok(_) => libraries.push((lib, binary)),
            Err(error) => eprintln!("cannot build the {} benchmark: {error}", lib.name),
        }
    }
    let mut rows = Vec::new();
    for &n in &sizes {
        eprintln!("n = {n}: ftcoll");
        let algo = forced.unwrap_or_else(|| library_pick(n));
        rows.push(ftcoll_latency(algo, n, args.iters, args.warmup)?);
        for (lib, binary) in &libraries {
            eprintln!("n = {n}: {}", lib.name);
            rows.push(mpi_latency(lib, binary, n, args.iters, args.warmup));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    print_table(&rows, &sizes, forced);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn print_table(rows: &[Latency], sizes: &[u32], forced: Option<&str>) {
    println!("8-byte allreduce, slowest rank per operation (us); ratio = ftcoll / fastest MPI");
    println!(
        "{:>4}  {:>7}  {:>18}  {:>18}  {:>18}  {:>13}",
        "n", "algo", "ftcoll med / p99", "openmpi med / p99", "mpich med / p99", "ratio (med)"
    );
    let cell = |implementation: &str, n: u32| {
        rows.iter()
            .find(|r| r.implementation == implementation && r.n == n)
            .map_or("not measured".to_string(), |r| {
                match (r.median_us, r.p99_us) {
                    (Some(m), Some(p)) => format!("{m:.2} / {p:.2}"),
                    _ => "failed".to_string(),
                }
            })
    };
    for &n in sizes {
        let ours = rows
            .iter()
            .find(|r| r.implementation == "ftcoll" && r.n == n)
            .and_then(|r| r.median_us);
        let best_mpi = rows
            .iter()
            .filter(|r| r.implementation != "ftcoll" && r.n == n)
            .filter_map(|r| r.median_us)
            .fold(None, |best: Option<f64>, m| {
                Some(best.map_or(m, |b| b.min(m)))
            });
        let ratio = match (ours, best_mpi) {
            (Some(o), Some(b)) if b > 0.0 => format!("{:.3}", o / b),
            _ => "-".to_string(),
        };
        println!(
            "{:>4}  {:>7}  {:>18}  {:>18}  {:>18}  {:>13}",
            n,
            forced.unwrap_or_else(|| library_pick(n)),
            cell("ftcoll", n),
            cell("openmpi", n),
            cell("mpich", n),
            ratio
        );
    }
}

pub fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ftcoll-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// `bench corrected`: the corrected-tree allreduce beside recursive doubling in the same run,
/// failure-free and with ranks dead before the measured operations.
pub fn run_corrected(args: &BenchArgs) -> anyhow::Result<()> {
    // Two dead ranks and f = 2 need at least four.
    let sizes = parse_sizes(&args.sizes, 4)?;
    let mut rows = Vec::new();
    for &n in &sizes {
        let cases = [
            FtcollCase::plain("ftcoll", "rdb"),
            FtcollCase {
                tolerate: 1,
                ..FtcollCase::plain("corrected f=1", "corrected-allreduce")
            },
            FtcollCase {
                tolerate: 2,
                dead: vec![n - 1, n / 2],
                ..FtcollCase::plain("corrected f=2, 2 dead", "corrected-allreduce")
            },
            FtcollCase {
                tolerate: 2,
                dead: vec![0, n / 2],
                ..FtcollCase::plain("corrected f=2, root 0 dead", "corrected-allreduce")
            },
        ];
        for case in &cases {
            eprintln!("n = {n}: {}", case.label);
            rows.push(ftcoll_run(case, n, args.iters, args.warmup)?);
        }
    }
    println!("8-byte allreduce, slowest surviving rank per operation (us); ratio = median / rdb's");
    println!(
        "{:>4}  {:>28}  {:>20}  {:>8}",
        "n", "configuration", "median / p99", "ratio"
    );
    for &n in &sizes {
        let reference = rows
            .iter()
            .find(|r| r.n == n && r.implementation == "ftcoll")
            .and_then(|r| r.median_us);
        for row in rows.iter().filter(|r| r.n == n) {
            let (Some(median), Some(p99)) = (row.median_us, row.p99_us) else {
                continue;
            };
            let ratio = reference.map_or("-".into(), |r| format!("{:.2}", median / r));
            let label = if row.implementation == "ftcoll" {
                "rdb (reference)"
            } else {
                &row.implementation
            };
            println!(
                "{n:>4}  {label:>28}  {:>20}  {ratio:>8}",
                format!("{median:.2} / {p99:.2}")
            );
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
