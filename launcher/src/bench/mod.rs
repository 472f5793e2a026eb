//! `ftcoll-launch bench`: performance measurements reported as medians.

pub mod allreduce;
pub mod console;
pub mod corrected;
pub mod era;
pub mod ft_allreduce;
pub mod ftco;
pub mod gossip;
pub mod sweep;
pub mod transport;

use std::fs;

use anyhow::{bail, Context};
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::SimConfig;
use serde::Serialize;

use std::path::PathBuf;

use clap::Args;

/// Flags of `ftcoll-launch bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to measure: `sim` (simulator events per second and bytes per rank), `allreduce`
    /// (allreduce time and bandwidth over `--bytes` on real processes, beside Open MPI and
    /// MPICH and the machine's memcpy), `bcast` and `reduce` (the same for the broadcast from
    /// and reduce to rank 0), `corrected`
    /// (corrected-tree allreduce beside rdb, with dead ranks), or `era` (agreement latency
    /// beside the allreduce and ULFM, and the cost of a failure by the failed rank's role), or
    /// `ftco` (FTCO allreduce with offline faults, 004 Table 1, and against the ULFM way,
    /// Fig. 6), or `console` (the launcher's CPU while the console watches N ranks, beside
    /// the same job unwatched), or `transport` (8-byte one-way latency over UCX and libfabric
    /// beside ucx_perftest and fi_pingpong), or `gossip` (000 Figs. 8 and 11 on real
    /// processes: Push-Sum per topology, HPS and HPFLC per eps, ARDB per budget, beside
    /// recursive doubling and MPI_Allreduce).
    pub name: String,
    /// Ranks, comma-separated [default: 2,4,8,16; `corrected` 4,8,16; `ft-allreduce` 3,4;
    /// `ftco` 8,16,32,64]
    #[arg(long)]
    pub sizes: Option<String>,
    /// Timed operations per size for `allreduce`.
    #[arg(long, default_value_t = 2000)]
    pub iters: u32,
    /// Untimed warm-up operations per size for `allreduce`.
    #[arg(long, default_value_t = 200)]
    pub warmup: u32,
    /// Ranks to simulate.
    #[arg(short = 'n', long = "ranks", default_value_t = 1 << 20)]
    pub n: u32,
    /// Repetitions; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub repeat: u32,
    /// Agreement tree of `era` (bin, star, string, or X/Y over nodes of --ranks-per-node).
    #[arg(long, default_value = "bin/bin")]
    pub era_tree: String,
    /// Ranks per node of `era`'s tree and of its failure roles (node master, whole node).
    #[arg(long, default_value_t = 4)]
    pub ranks_per_node: u32,
    /// Ranks of `era`'s failure runs.
    #[arg(long, default_value_t = 16)]
    pub failure_n: u32,
    /// Tree of `ftco`.
    #[arg(long, default_value = "kary:2")]
    pub ftco_tree: String,
    /// Detection timeout of `ftco`.
    #[arg(long, default_value = "100ms")]
    pub detect_timeout: String,
    /// `ftco` with one fixed timeout for every message (see `--ftco-fixed-timeout` of a job).
    #[arg(long)]
    pub ftco_fixed_timeout: bool,
    /// Ranks of `ftco`'s Fig. 6 comparison, comma-separated.
    #[arg(long, default_value = "8,16,32,64")]
    pub fig6_sizes: String,
    /// Where Open MPI 5 with ULFM is installed, for `era`'s side-by-side figures.
    #[arg(long, default_value = "/opt/ulfm")]
    pub ulfm_prefix: PathBuf,
    /// Ranks of `console`, comma-separated.
    #[arg(long, default_value = "4096")]
    pub console_sizes: String,
    /// `console`: seconds after wire-up before measuring.
    #[arg(long, default_value_t = 5.0)]
    pub warmup_s: f64,
    /// `console`: seconds measured.
    #[arg(long, default_value_t = 10.0)]
    pub window_s: f64,
    /// ftcoll's algorithm in `allreduce` (`rdb`, `direct`, `ring` or `rhd`; default: what
    /// `Communicator::allreduce` picks at each size), and the fault-tolerant one in
    /// `ft-allreduce` (`ft-ring`, the default, or `ft-corrected`).
    #[arg(long = "algo")]
    pub allreduce_algo: Option<String>,
    /// MPI libraries `allreduce` compares against, comma-separated (`openmpi`, `mpich`), or
    /// `none` to time ftcoll alone.
    #[arg(long, default_value = "openmpi,mpich")]
    pub mpi: String,
    /// Bytes per rank of `allreduce` (doubles, so multiples of 8), comma-separated.
    #[arg(long, default_value = "8")]
    pub bytes: String,
    /// The transport of `allreduce`, `bcast` and `reduce`: `shm`, or `tcp` (Open MPI then
    /// runs its TCP transport too: `--mca pml ob1 --mca btl tcp,self` over the loopback).
    #[arg(long, default_value = "shm")]
    pub transport: String,
    /// `allreduce`, `bcast`, `reduce`: both sides' vectors in the kernel's base pages. By
    /// default both are hinted for transparent huge pages before first use, as ftcoll's job
    /// allocates its own (and as every large mapping gets them where the kernel's setting is
    /// `always`); this measures what an application that does not ask gets where it is
    /// `madvise` or `never`.
    #[arg(long)]
    pub base_pages: bool,
    /// `allreduce`, `ft-allreduce`: ftcoll reduces each rank's input into a second vector
    /// (`allreduce_into`, `allreduce_ring_into`, `ft_allreduce_into`), as the MPI side's
    /// `MPI_Allreduce(in, out)` does, instead of in place.
    #[arg(long)]
    pub out_of_place: bool,
    /// A machine without `mpicc`: a directory with the MPI side already built
    /// (`allreduce_openmpi`, `allreduce_mpich` from `launcher/bench/mpi_allreduce.c` for
    /// `allreduce`, `bcast`, `reduce`; `ulfm_allreduce`, `ulfm_agree` built with the mpicc under
    /// `--ulfm-prefix` for `ft-allreduce` and `era`).
    #[arg(long)]
    pub mpi_prebuilt: Option<PathBuf>,
    /// Operations per job of `gossip` (each runs to its stopping rule or budget).
    #[arg(long, default_value_t = 20)]
    pub gossip_ops: u32,
    /// Push period of the gossip jobs of `gossip`, a time with its unit.
    #[arg(long, default_value = "5us")]
    pub gossip_period: String,
    /// Write the results as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

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
/// The ranks of a benchmark that has no `--sizes` of its own.
pub const DEFAULT_SIZES: &str = "2,4,8,16";

impl BenchArgs {
    /// `--sizes` as given, or `default`, the benchmark's own.
    pub fn sizes_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.sizes.as_deref().unwrap_or(default)
    }
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if args.out_of_place && !matches!(args.name.as_str(), "allreduce" | "ft-allreduce") {
        bail!(
            "--out-of-place applies to bench allreduce and ft-allreduce, not {}; drop it",
            args.name
        );
    }
    match args.name.as_str() {
        "sim" => bench_sim(args),
        "allreduce" => sweep::run(args, sweep::Swept::Allreduce),
        "bcast" => sweep::run(args, sweep::Swept::Bcast),
        "reduce" => sweep::run(args, sweep::Swept::Reduce),
        "corrected" => corrected::run(args),
        "era" => era::run(args),
        "ftco" => ftco::run(args),
        "ft-allreduce" => ft_allreduce::run(args),
        "gossip" => gossip::run(args),
        "console" => console::run(args),
        "transport" => transport::run(args),
        other => {
            bail!("unknown benchmark '{other}'; available: sim, allreduce, bcast, reduce, corrected, era, ftco, ft-allreduce, gossip, console, transport")
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
