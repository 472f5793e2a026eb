//! `ftcoll-launch bench ft-allreduce`: what fault tolerance costs a large allreduce, and what a
//! crash in the middle of one costs, beside the ULFM way.
//!
//! Per rank count of `--sizes` and size of `--bytes` (doubles):
//! - the fault-free median of the plain ring allreduce and of the fault-tolerant one, `ft-ring`
//!   or (`--algo ft-corrected`) the corrected trees in segments (the price of tolerance: for
//!   the ring one agreement, and in place a copy of the input; `--out-of-place` calls both
//!   out of place, as the MPI side calls `MPI_Allreduce(in, out)`);
//! - the time to the survivors' result of the fault-tolerant one in which one rank is
//!   SIGKILLed half the fault-free median after the operation starts (median of `--repeat`
//!   runs);
//! - the ULFM way on ftcoll's runtime: the ring fails, the survivors revoke, acknowledge,
//!   shrink and run it again;
//! - the ULFM way with Open MPI 5 (`bench/ulfm_allreduce.c`, built with the mpicc under
//!   `--ulfm-prefix`): `MPI_Allreduce`, `MPIX_Comm_agree` on its success, revoke, shrink,
//!   `MPI_Allreduce` again, its victim killed half its own fault-free median into the call.
//!
//! Every figure is the slowest surviving rank's. Open MPI's results are checked by its
//! benchmark; ftcoll's by the multi-process tests of the same jobs (`live_ft_ring`), not here.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use serde::Serialize;

use super::allreduce::FtcollCase;
use super::allreduce::{ftcoll_timings, parse_sizes, run_bounded, slowest_per_op, tempdir};
use super::sweep::parse_bytes;
use super::BenchArgs;

const ULFM_SOURCE: &str = include_str!("../../bench/ulfm_allreduce.c");
/// Operations timed after the faulty one (reported by the ranks, not used here but checked).
const AFTER: u32 = 2;
/// Fault-free operations timed per figure, at most.
const MAX_ITERS: u32 = 50;

/// One line of the table (the `--json` output).
#[derive(Debug, Clone, Default, Serialize)]
pub struct FtAllreduceRow {
    /// The fault-tolerant algorithm (`ft-ring` or `ft-corrected`); the `ft_ring_*` fields
    /// are its figures.
    pub algo: &'static str,
    /// Ranks.
    pub n: u32,
    /// Bytes per rank.
    pub bytes: u64,
    /// The rank SIGKILLed in the faulty runs.
    pub victim: u32,
    /// Fault-free median of the plain ring, µs.
    pub ring_us: Option<f64>,
    /// Fault-free median of `ft-ring`, µs.
    pub ft_ring_us: Option<f64>,
    /// `ft_ring_us / ring_us`: the price of tolerance.
    pub price: Option<f64>,
    /// Time to the survivors' result of `ft-ring` with the victim killed halfway, µs.
    pub ft_ring_crash_us: Option<f64>,
    /// `ft_ring_crash_us / ft_ring_us`.
    pub crash_over_free: Option<f64>,
    /// The ring, then revoke, acknowledge, shrink and the ring again, on ftcoll's runtime, µs.
    pub ftcoll_shrink_retry_us: Option<f64>,
    /// Open MPI's fault-free `MPI_Allreduce` median, µs.
    pub ompi_us: Option<f64>,
    /// Open MPI with ULFM: the faulty call, agree, revoke, shrink, the call again, µs.
    pub ulfm_crash_us: Option<f64>,
    /// `ft_ring_crash_us / ulfm_crash_us`.
    pub vs_ulfm: Option<f64>,
    /// What went wrong, where a figure is missing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Open MPI 5 with ULFM and the reference benchmark built with its mpicc.
struct UlfmAllreduce {
    mpiexec: PathBuf,
    binary: PathBuf,
}

impl UlfmAllreduce {
    fn build(prefix: &Path, prebuilt: Option<&Path>, dir: &Path) -> Option<UlfmAllreduce> {
        let (mpiexec, binary) =
            super::allreduce::build_ulfm(prefix, prebuilt, dir, "ulfm_allreduce", ULFM_SOURCE)?;
        Some(UlfmAllreduce { mpiexec, binary })
    }

    /// Fault-free median and the faulty call's time, µs.
    fn run(&self, n: u32, bytes: u64, iters: u32, victim: u32) -> anyhow::Result<(f64, f64)> {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get() as u32);
        let mut command = Command::new(&self.mpiexec);
        command
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .args(["--with-ft", "ulfm", "-n", &n.to_string()]);
        // One rank per core where there are cores enough, as ftcoll binds its ranks.
        if n <= cores {
            command.args(["--bind-to", "core"]);
        } else {
            command.args(["--oversubscribe", "--bind-to", "none"]);
            command.args(["--mca", "mpi_yield_when_idle", "1"]);
        }
        command.arg(&self.binary).args([
            (bytes / 8).to_string(),
            iters.to_string(),
            victim.to_string(),
        ]);
        let out = run_bounded(&mut command, "ULFM's mpiexec")?;
        let line = out
            .lines()
            .find(|l| l.starts_with("median_us"))
            .context("no 'median_us ...' line from the ULFM benchmark")?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let field = |name: &str| -> anyhow::Result<f64> {
            let at = words
                .iter()
                .position(|w| *w == name)
                .with_context(|| format!("no {name} in '{line}'"))?;
            Ok(words.get(at + 1).context("short line")?.parse()?)
        };
        if field("wrong")? != 0.0 {
            bail!("Open MPI's recovered allreduce returned a wrong result");
        }
        Ok((field("median_us")?, field("faulty_us")?))
    }
}

/// The ranks' flag for `--out-of-place`.
fn placement_args(out_of_place: bool) -> Vec<String> {
    out_of_place
        .then(|| "--out-of-place".to_string())
        .into_iter()
        .collect()
}

/// Fault-free median of `algo`, µs.
fn fault_free(
    algo: &'static str,
    (n, len): (u32, usize),
    iters: u32,
    out_of_place: bool,
) -> anyhow::Result<f64> {
    let case = FtcollCase {
        len,
        rank_args: placement_args(out_of_place),
        ..FtcollCase::plain(algo, algo)
    };
    let timings = ftcoll_timings(&case, n, iters, (iters / 5).max(2))?;
    let mut slowest = slowest_per_op(&timings, 0);
    if slowest.is_empty() {
        bail!("no timings");
    }
    Ok(super::median(&mut slowest))
}

/// The faulty operation's time (slowest survivor), median of `repeat` runs, µs: `algo` with
/// `victim` killed `after_us` into the operation; `recovery`: the ULFM way on failure.
fn faulty(
    algo: &'static str,
    (recovery, out_of_place): (bool, bool),
    (n, len, victim): (u32, usize, u32),
    after_us: u64,
    repeat: u32,
) -> anyhow::Result<f64> {
    const WARMUP: u32 = 2;
    let mut rank_args = placement_args(out_of_place);
    rank_args.push("--bench-fault-op".to_string());
    if recovery {
        rank_args.push("--bench-recovery".into());
    }
    let case = FtcollCase {
        len,
        dead: vec![victim],
        // The warm-up, the agreement that lines the ranks up, then the faulty operation.
        dies_at_op: u64::from(WARMUP) + 1,
        dies_after_us: Some(after_us),
        rank_args,
        ..FtcollCase::plain(algo, algo)
    };
    let mut times = Vec::new();
    for run in 0..repeat {
        eprintln!(
            "  {algo}{}: run {}/{repeat}",
            if recovery { " + shrink" } else { "" },
            run + 1
        );
        let survivors = ftcoll_timings(&case, n, AFTER, WARMUP)?;
        if survivors.iter().any(|t| t.len() != AFTER as usize + 1) {
            bail!("a survivor reported too few timings");
        }
        times.push(slowest_per_op(&survivors, 0)[0]);
    }
    Ok(super::median(&mut times))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn measure(
    args: &BenchArgs,
    ulfm: Option<&UlfmAllreduce>,
    (n, bytes): (u32, u64),
    iters: u32,
) -> FtAllreduceRow {
    let len = (bytes / 8) as usize;
    let victim = n / 2;
    let tolerant = row_algo(args);
    let mut row = FtAllreduceRow {
        algo: tolerant,
        n,
        bytes,
        victim,
        ..FtAllreduceRow::default()
    };
    let mut notes = Vec::new();
    eprintln!("n = {n}, {bytes} bytes: fault-free ring and {tolerant}");
    let oop = args.out_of_place;
    row.ring_us = fault_free("ring", (n, len), iters, oop)
        .map_err(|e| notes.push(row_note("ring", e)))
        .ok();
    row.ft_ring_us = fault_free(tolerant, (n, len), iters, oop)
        .map_err(|e| notes.push(row_note(tolerant, e)))
        .ok();
    if let Some(free) = row.ft_ring_us {
        let after = (free / 2.0).max(1.0) as u64;
        let shape = (n, len, victim);
        row.ft_ring_crash_us = faulty(tolerant, (false, oop), shape, after, args.repeat)
            .map_err(|e| notes.push(row_note("the crash run", e)))
            .ok();
        if let Some(ring) = row.ring_us {
            let after = (ring / 2.0).max(1.0) as u64;
            row.ftcoll_shrink_retry_us = faulty("ring", (true, oop), shape, after, args.repeat)
                .map_err(|e| notes.push(row_note("ring + shrink", e)))
                .ok();
        }
    }
    if let Some(ulfm) = ulfm {
        eprintln!("n = {n}, {bytes} bytes: Open MPI with ULFM");
        let mut crashes = Vec::new();
        for _ in 0..args.repeat.max(1) {
            match ulfm.run(n, bytes, iters, victim) {
                Ok((free, crash)) => {
                    row.ompi_us = Some(free);
                    crashes.push(crash);
                }
                Err(error) => notes.push(row_note("Open MPI ULFM", error)),
            }
        }
        if !crashes.is_empty() {
            row.ulfm_crash_us = Some(super::median(&mut crashes));
        }
    }
    row.price = ratio(row.ft_ring_us, row.ring_us);
    row.crash_over_free = ratio(row.ft_ring_crash_us, row.ft_ring_us);
    row.vs_ulfm = ratio(row.ft_ring_crash_us, row.ulfm_crash_us);
    row.notes = notes;
    row
}

/// The fault-tolerant algorithm `--algo` names (checked in [`run`]).
fn row_algo(args: &BenchArgs) -> &'static str {
    match args.allreduce_algo.as_deref() {
        Some("ft-corrected") => "ft-corrected",
        _ => "ft-ring",
    }
}

fn row_note(what: &str, error: anyhow::Error) -> String {
    eprintln!("  {what} failed: {error:#}");
    format!("{what}: {error:#}")
}

/// Runs `bench ft-allreduce`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let sizes = parse_sizes(args.sizes_or("3,4"), 3)?;
    let bytes = parse_bytes(&args.bytes)?;
    crate::memory::ensure_bench_fits((args.sizes_or("3,4"), &args.bytes), &sizes, &bytes)?;
    if args.repeat == 0 {
        bail!("bench ft-allreduce needs --repeat >= 1");
    }
    if let Some(other) = args
        .allreduce_algo
        .as_deref()
        .filter(|a| !["ft-ring", "ft-corrected"].contains(a))
    {
        bail!("bench ft-allreduce --algo takes ft-ring or ft-corrected, not '{other}'");
    }
    let dir = tempdir()?;
    let ulfm = UlfmAllreduce::build(&args.ulfm_prefix, args.mpi_prebuilt.as_deref(), &dir);
    // Each fault-free median runs `iters` operations of a job and each crash run a job of its
    // own: the range keeps a row to minutes, and the table says what it used.
    let iters = args.iters.clamp(3, MAX_ITERS);
    let mut rows = Vec::new();
    for &n in &sizes {
        for &b in &bytes {
            rows.push(measure(args, ulfm.as_ref(), (n, b), iters));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    print_table(&rows, args, iters);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn print_table(rows: &[FtAllreduceRow], args: &BenchArgs, iters: u32) {
    let (out_of_place, asked) = (args.out_of_place, args.iters);
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    println!(
        "allreduce of doubles ({}), slowest survivor, medians in us; the crash kills rank n/2 halfway",
        if out_of_place { "ftcoll out of place" } else { "ftcoll in place" }
    );
    let bounded = if asked == iters {
        String::new()
    } else {
        format!(" (--iters {asked} is outside 3..={MAX_ITERS})")
    };
    println!("fault-free medians over {iters} operations{bounded}");
    println!(
        "{:>4} {:>10} {:>9} {:>12} {:>6} {:>10} {:>7} {:>10} {:>9} {:>10} {:>8}",
        "n",
        "bytes",
        "ring",
        row_algo(args),
        "price",
        "ft crash",
        "/free",
        "ring+shrink",
        "ompi",
        "ulfm crash",
        "/ulfm"
    );
    for r in rows {
        println!(
            "{:>4} {:>10} {:>9} {:>12} {:>6} {:>10} {:>7} {:>10} {:>9} {:>10} {:>8}",
            r.n,
            r.bytes,
            us(r.ring_us),
            us(r.ft_ring_us),
            x(r.price),
            us(r.ft_ring_crash_us),
            x(r.crash_over_free),
            us(r.ftcoll_shrink_retry_us),
            us(r.ompi_us),
            us(r.ulfm_crash_us),
            x(r.vs_ulfm),
        );
        for note in &r.notes {
            println!("     note: {note}");
        }
    }
}
