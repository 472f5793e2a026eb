//! `ftcoll-launch experiment NAME [--full]`: the papers' figures, reproduced in the simulator.
//!
//! FTCO (004 Sec. 5.2) runs in the LogP step model the paper uses (L = 10, o = 1 steps, the
//! simulator's default), always as an allreduce of ones, with FTCO's default detection timeout
//! (40 steps), f_ETA slack (2) and RSD service distance. Latency is the step at which the last
//! live rank completed ([`ftcoll_runtime::sim::SimReport::completion_steps`]), not the end of the
//! simulation: FTCO leaves timers running after it is done.
//!
//! Each experiment writes, into `--out DIR` (default `results/NAME/` under the current
//! directory, created if missing), one or more CSV files with a header line and one SVG plot,
//! and prints the table, the base seed, the wall time and the simulator runs per second. The
//! default size is small enough for CI (each well under a minute in release on two cores);
//! `--full` runs the paper's sizes (up to 64K ranks, 1,000 placements a point) and takes many
//! minutes. One base seed (`--seed`, default 2024) reproduces every run: each simulation's seed,
//! fault placement and fault time is drawn from it. At most two simulations run side by side
//! (`--threads`).
//!
//! Every run is checked: no truncation, every live rank completed, none aborted, and (for up to
//! ten crashes, where the simulator enumerates the admissible aggregates) the result is one a
//! fault-tolerant allreduce may return. A failed check stops the experiment.

mod fig10;
mod fig7;
mod fig8;
mod fig9;
mod gossip_000;
mod gossip_003;
mod gossip_hps;
mod svg;
mod table2;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use ftcoll_algos::ftco::FtcoOptions;
use ftcoll_algos::topology::TreeShape;
use ftcoll_algos::Rank;
use ftcoll_runtime::check::ftco::{message_profile, simulate_watched, WatchedFtco};
use ftcoll_runtime::faults::{FaultSpec, FaultTime, KillTime};
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{InputKind, SimConfig, SimReport, Simulation};

/// Flags of `ftcoll-launch experiment`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// The experiment's name; `list` shows them.
    pub name: String,
    /// Run at the paper's size instead of the small default.
    #[arg(long)]
    pub full: bool,
    /// Where the CSV files and the SVG plot go (default: results/NAME).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Base seed: every run's seed, placement and start time derives from it.
    #[arg(long, default_value_t = 2024)]
    pub seed: u64,
    /// Simulations run side by side (1 or 2).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=2))]
    pub threads: u32,
    /// Random placements per point of the fault experiments (default: 20, with --full 1000);
    /// seeds per row of table2 (default 2, with --full 3).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub placements: Option<u32>,
    /// Largest N (ranks) to simulate: caps the size sweeps (default 2K, with --full 64K) and
    /// table2's N (default 4K).
    #[arg(long, value_name = "N")]
    pub max_ranks: Option<u32>,
}

/// The experiments this build can run: name, what it reproduces.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    (
        "fig7",
        "004 Fig. 7: fault-free FTCO allreduce latency, k-nomial single- vs multi-root at the best k, and the best tree",
    ),
    (
        "fig8",
        "004 Fig. 8: latency penalty per inactive rank (1, 10, 100 inactive), multi-root k-nomial",
    ),
    (
        "fig9",
        "004 Fig. 9: extra messages per rank per inactive rank (the runs of fig8)",
    ),
    (
        "fig10",
        "004 Fig. 10: total latency with inactive ranks vs run-time crashes (1, 10, 100)",
    ),
    (
        "table2",
        "004 Table 2: process imbalance, uniform and normal start spreads 0..16384",
    ),
    (
        "000-fig1",
        "000 Fig. 1: convergence of PF, PFLC, PFCC with a flip at bit 56 of a flow, N = 32 hypercube",
    ),
    (
        "000-fig2",
        "000 Fig. 2: max relative error after one flip at each of the 64 bits: PS, PF, PFLC, PFCC, RDB",
    ),
    (
        "000-fig3",
        "000 Fig. 3: mean messages per rank with one flip at each bit: PF, PFLC, PFCC vs PS without",
    ),
    (
        "000-fig4-5",
        "000 Figs. 4-5: iterations against tau for PFLC and PFCC at flip rate 1e-4, N = 32 and 64",
    ),
    (
        "000-fig6",
        "000 Fig. 6: iterations against the number of flips (rate 1e-4, N = 64), PFLC vs PFCC",
    ),
    (
        "000-fig7",
        "000 Fig. 7: synchronized Push-Sum iterations against N on full, hypercube and torus",
    ),
    (
        "000-fig9-10",
        "000 Figs. 9-10: HPS iterations against N for eps 1e-1 .. 1e-6",
    ),
    (
        "000-fig11",
        "000 Fig. 11: HPS iterations at 16K..128K ranks, mean and standard error, at the root",
    ),
    (
        "000-fig12",
        "000 Fig. 12: HPFLC vs ARDB iterations against N (median, min, max)",
    ),
    (
        "000-fig13",
        "000 Fig. 13: HPFLC iteration overhead of one flip at each of the 32 bits",
    ),
    (
        "003-fig3-6",
        "003 Figs. 3 and 6: achievable accuracy of PF vs PCF against N, torus and hypercube",
    ),
    (
        "003-fig4-7",
        "003 Figs. 4 and 7: a permanent link failure after 75 and 175 iterations, PF vs PCF",
    ),
    (
        "dmgs",
        "003 Fig. 8: dmGS QR factorization error over PF vs PCF against N",
    ),
];

/// Runs `ftcoll-launch experiment ...`.
pub fn run(args: &ExperimentArgs) -> anyhow::Result<()> {
    if args.name == "list" {
        for (name, what) in EXPERIMENTS {
            println!("{name:<8} {what}");
        }
        return Ok(());
    }
    if !EXPERIMENTS.iter().any(|(name, _)| *name == args.name) {
        bail!(
            "unknown experiment '{}'; `ftcoll-launch experiment list` shows the available ones",
            args.name
        );
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("results").join(&args.name));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let ctx = Ctx {
        full: args.full,
        out,
        seed: args.seed,
        threads: args.threads.clamp(1, 2) as usize,
        placements: args.placements,
        max_ranks: args.max_ranks.unwrap_or(u32::MAX),
        runs: AtomicU64::new(0),
        progress: std::io::stderr().is_terminal(),
    };
    println!(
        "experiment {} ({}), base seed {}, {} thread(s), output in {}",
        args.name,
        if ctx.full {
            "full size"
        } else {
            "default size"
        },
        ctx.seed,
        ctx.threads,
        ctx.out.display()
    );
    let started = Instant::now();
    match args.name.as_str() {
        "fig7" => fig7::run(&ctx)?,
        "fig8" => fig8::run(&ctx)?,
        "fig9" => fig9::run(&ctx)?,
        "fig10" => fig10::run(&ctx)?,
        "table2" => table2::run(&ctx)?,
        "000-fig1" => gossip_000::fig1(&ctx)?,
        "000-fig2" => gossip_000::fig2(&ctx)?,
        "000-fig3" => gossip_000::fig3(&ctx)?,
        "000-fig4-5" => gossip_000::fig4_5(&ctx)?,
        "000-fig6" => gossip_000::fig6(&ctx)?,
        "000-fig7" => gossip_hps::fig7(&ctx)?,
        "000-fig9-10" => gossip_hps::fig9_10(&ctx)?,
        "000-fig11" => gossip_hps::fig11(&ctx)?,
        "000-fig12" => gossip_hps::fig12(&ctx)?,
        "000-fig13" => gossip_hps::fig13(&ctx)?,
        "003-fig3-6" => gossip_003::fig3_6(&ctx)?,
        "003-fig4-7" => gossip_003::fig4_7(&ctx)?,
        "dmgs" => gossip_003::dmgs(&ctx)?,
        _ => unreachable!("checked against EXPERIMENTS above"),
    }
    let wall = started.elapsed().as_secs_f64();
    let runs = ctx.runs.load(Ordering::Relaxed);
    println!(
        "{}: {runs} simulations in {wall:.1} s ({:.1} runs/s), base seed {}",
        args.name,
        runs as f64 / wall.max(1e-9),
        ctx.seed
    );
    Ok(())
}

/// What every experiment gets.
pub struct Ctx {
    /// Paper size.
    pub full: bool,
    /// Output directory (exists).
    pub out: PathBuf,
    /// Base seed.
    pub seed: u64,
    /// Simulations side by side.
    pub threads: usize,
    /// Placements per point, if the user chose.
    pub placements: Option<u32>,
    /// Largest N to simulate.
    pub max_ranks: u32,
    /// Simulations run so far.
    pub runs: AtomicU64,
    /// Whether to show progress (stderr is a terminal).
    pub progress: bool,
}

impl Ctx {
    /// Placements per point: the user's, else `default` (CI size) or `full`.
    pub fn placements(&self, default: u32, full: u32) -> u32 {
        self.placements
            .unwrap_or(if self.full { full } else { default })
            .max(1)
    }

    /// A progress line on a terminal; nothing otherwise.
    pub fn progress(&self, what: &str) {
        if self.progress {
            eprintln!("  .. {what}");
        }
    }

    /// A seed for one run, derived from the base seed and the run's coordinates.
    pub fn run_seed(&self, parts: &[u64]) -> u64 {
        let mut h = self.seed ^ 0x9E37_79B9_7F4A_7C15;
        for &p in parts {
            h = (h ^ p).wrapping_mul(0x0100_0000_01B3).rotate_left(29);
        }
        h
    }

    /// Writes `name` (a CSV file) into the output directory.
    pub fn write_csv(
        &self,
        name: &str,
        header: &[&str],
        rows: &[Vec<String>],
    ) -> anyhow::Result<()> {
        let mut text = header.join(",");
        text.push('\n');
        for row in rows {
            assert_eq!(row.len(), header.len(), "CSV row width");
            text.push_str(&row.join(","));
            text.push('\n');
        }
        self.write(name, &text)
    }

    /// Writes a file into the output directory and says so.
    pub fn write(&self, name: &str, text: &str) -> anyhow::Result<()> {
        let path = self.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
        Ok(())
    }

    /// `f` over `items`, at most `self.threads` at a time; results in item order.
    pub fn par_map<T: Sync, R: Send>(&self, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
        if self.threads <= 1 || items.len() <= 1 {
            return items.iter().map(f).collect();
        }
        let next = AtomicUsize::new(0);
        let slots: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..self.threads {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else {
                        break;
                    };
                    let result = f(item);
                    slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
                });
            }
        });
        slots
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .flatten()
            .collect()
    }
}

/// An FTCO tree: shape and number of fully connected roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeChoice {
    /// k-ary or k-nomial, and k.
    pub shape: TreeShape,
    /// Roots (1 = single-root).
    pub roots: u32,
}

impl TreeChoice {
    /// A k-nomial tree.
    pub fn knomial(k: u32, roots: u32) -> TreeChoice {
        TreeChoice {
            shape: TreeShape::KNomial { k },
            roots,
        }
    }

    /// `knomial` or `kary`.
    pub fn kind(&self) -> &'static str {
        match self.shape {
            TreeShape::KNomial { .. } => "knomial",
            TreeShape::KAry { .. } => "kary",
        }
    }

    /// The radix k.
    pub fn k(&self) -> u32 {
        match self.shape {
            TreeShape::KNomial { k } | TreeShape::KAry { k } => k,
        }
    }

    /// `knomial:4/8` (shape:k/roots).
    pub fn label(&self) -> String {
        format!("{}:{}/{}", self.kind(), self.k(), self.roots)
    }
}

/// The FTCO allreduce job of the experiments.
pub fn allreduce_spec(n: u32, tree: TreeChoice) -> JobSpec {
    let mut spec = JobSpec::new(Algorithm::FtcoAllreduce, n);
    spec.input = InputKind::Ones;
    spec.ftco = FtcoOptions {
        shape: tree.shape,
        roots: tree.roots,
        step_model: true,
        ..FtcoOptions::default()
    };
    spec
}

/// Crash `rank` at step `at` (0 = inactive from the start).
pub fn kill(rank: u32, at: u64) -> FaultSpec {
    FaultSpec::Kill {
        rank: Rank(rank),
        at: KillTime::At(FaultTime::Steps(at)),
    }
}

/// The command that replays one run.
fn replay(spec: &JobSpec, config: &SimConfig) -> String {
    let mut command = format!(
        "ftcoll-launch --sim -n {} --algo ftco-allreduce --input ones --ftco-tree {}:{} --ftco-roots {} --seed {}",
        spec.n,
        match spec.ftco.shape {
            TreeShape::KNomial { .. } => "knomial",
            TreeShape::KAry { .. } => "kary",
        },
        match spec.ftco.shape {
            TreeShape::KNomial { k } | TreeShape::KAry { k } => k,
        },
        spec.ftco.roots,
        config.seed
    );
    for fault in &config.faults {
        if let FaultSpec::Kill {
            rank,
            at: KillTime::At(FaultTime::Steps(at)),
        } = fault
        {
            command.push_str(&format!(" --fault kill:rank={},at={at}", rank.0));
        } else {
            command.push_str(&format!(" --fault '{fault:?}'"));
        }
    }
    command
}

/// The checks every run passes (see the module docs).
fn check(spec: &JobSpec, config: &SimConfig, report: &SimReport) -> anyhow::Result<()> {
    let crashed = report.crashes.len() as u32;
    let admissible = match report.admissible_error {
        Some(error) => error < 1e-9,
        None if crashed == 0 => report.max_rel_error < 1e-9,
        None => true,
    };
    if report.truncated
        || report.aborted > 0
        || report.incomplete > 0
        || report.completed + crashed != spec.n
        || !admissible
    {
        bail!(
            "a run failed its checks (completed {}, aborted {}, incomplete {}, crashed {}, \
             truncated {}, error {:e}, admissible {:?}); replay: {}",
            report.completed,
            report.aborted,
            report.incomplete,
            crashed,
            report.truncated,
            report.max_rel_error,
            report.admissible_error,
            replay(spec, config)
        );
    }
    Ok(())
}

/// Bounds on one run of `n` ranks: virtual time (`extra_steps` plus 50,000 steps; a fault-free
/// run takes a few hundred) and events (5,000 per rank: a run with 100 inactive ranks at 2K
/// handles about 120 per rank, table2's widest normal spread sends about 450 messages per
/// rank; so only a livelock reaches it, and fails in seconds rather than minutes). A run that
/// reaches them fails its check.
pub fn bounded(mut config: SimConfig, n: u32, extra_steps: u64) -> SimConfig {
    config.max_time = ftcoll_algos::Time(50_000 + extra_steps);
    config.max_events = 5_000 * u64::from(n);
    config
}

/// Runs one allreduce and checks it.
pub fn simulate_checked(ctx: &Ctx, spec: &JobSpec, config: SimConfig) -> anyhow::Result<SimReport> {
    let config = bounded(config, spec.n, 0);
    let report = simulate(spec, config.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    ctx.runs.fetch_add(1, Ordering::Relaxed);
    check(spec, &config, &report)?;
    Ok(report)
}

/// Runs one allreduce with every rank watched, and checks it.
pub fn simulate_watched_checked(
    ctx: &Ctx,
    spec: &JobSpec,
    config: SimConfig,
) -> anyhow::Result<(Simulation<WatchedFtco>, SimReport)> {
    let spread = config
        .faults
        .iter()
        .map(|f| match f {
            FaultSpec::Spread(
                ftcoll_runtime::faults::Spread::Uniform(FaultTime::Steps(w))
                | ftcoll_runtime::faults::Spread::Normal(FaultTime::Steps(w)),
            ) => 8 * w,
            _ => 0,
        })
        .sum::<u64>()
        + config
            .start_times
            .as_ref()
            .and_then(|t| t.iter().max())
            .map_or(0, |&last| 2 * last);
    let config = bounded(config, spec.n, spread);
    let (sim, report) =
        simulate_watched(spec, config.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    ctx.runs.fetch_add(1, Ordering::Relaxed);
    check(spec, &config, &report)?;
    Ok((sim, report))
}

/// Latency and messages of one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Steps until the last live rank completed.
    pub latency: u64,
    /// Messages sent in all.
    pub messages: u64,
    /// Messages sent before the last live rank held the result.
    pub before_result: u64,
}

/// One watched run reduced to what the fault experiments need.
pub fn measure(ctx: &Ctx, spec: &JobSpec, config: SimConfig) -> anyhow::Result<Measured> {
    let (sim, report) = simulate_watched_checked(ctx, spec, config)?;
    let profile = message_profile(&sim, ftcoll_algos::ftco::Collective::Allreduce);
    Ok(Measured {
        latency: report.completion_steps,
        messages: report.messages,
        before_result: profile.before_last_result,
    })
}

/// `count` distinct ranks of `0..n`, uniformly.
pub fn distinct_ranks(rng: &mut ftcoll_algos::rng::SimRng, n: u32, count: u32) -> Vec<u32> {
    assert!(count < n, "more faults than ranks");
    let mut chosen = std::collections::BTreeSet::new();
    // Rejection sampling ends quickly for count << n; the bound only guards the loop.
    for _ in 0..(count as usize * 1000 + 1000) {
        if chosen.len() == count as usize {
            break;
        }
        chosen.insert(rng.below(u64::from(n)) as u32);
    }
    assert_eq!(chosen.len(), count as usize, "placement draw");
    chosen.into_iter().collect()
}

/// Ranks of the experiments' x axis: 1K to 64K in the paper.
pub fn sizes(ctx: &Ctx) -> Vec<u32> {
    let top = if ctx.full { 16 } else { 11 };
    let sizes: Vec<u32> = (10..=top).map(|p| 1u32 << p).collect();
    let capped: Vec<u32> = sizes
        .iter()
        .copied()
        .filter(|&n| n <= ctx.max_ranks)
        .collect();
    if capped.is_empty() {
        sizes[..1].to_vec()
    } else {
        capped
    }
}

/// `1K`, `64K`, or the number.
pub fn size_label(n: u32) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{}K", n / 1024)
    } else {
        n.to_string()
    }
}

/// The candidate radixes of the tree search: 2..=16 with `--full`, 2..=12 by default.
pub fn radixes(ctx: &Ctx) -> std::ops::RangeInclusive<u32> {
    if ctx.full {
        2..=16
    } else {
        2..=12
    }
}

/// The candidate root counts of the tree search (those below N).
pub fn root_counts(ctx: &Ctx) -> &'static [u32] {
    if ctx.full {
        &[1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    } else {
        &[1, 2, 4, 6, 8, 12, 16]
    }
}

/// The root counts tried with radix `k` at `n` ranks: [`root_counts`] and `k` itself (the
/// k-nomial tree whose first level is the fully connected root set), those below `n`.
pub fn roots_with(ctx: &Ctx, k: u32, n: u32) -> Vec<u32> {
    let mut roots: Vec<u32> = root_counts(ctx).iter().copied().chain([k]).collect();
    roots.retain(|&r| r < n);
    roots.sort_unstable();
    roots.dedup();
    roots
}

/// Fault-free latency of every tree in `trees` at `n` ranks, in order.
pub fn fault_free(
    ctx: &Ctx,
    n: u32,
    trees: &[TreeChoice],
) -> anyhow::Result<Vec<(TreeChoice, SimReport)>> {
    let results = ctx.par_map(trees, |&tree| {
        let spec = allreduce_spec(n, tree);
        let config = SimConfig {
            seed: ctx.run_seed(&[7, u64::from(n)]),
            ..SimConfig::default()
        };
        simulate_checked(ctx, &spec, config).map(|r| (tree, r))
    });
    results.into_iter().collect()
}

/// The best multi-root k-nomial tree for `n` and its fault-free latency: k in [`radixes`] with
/// k fully connected roots (the k-nomial tree whose first level is the root set: 004's
/// multi-root k-nomial, whose Table 2 at 64K uses k = 9); ties go to the smaller k.
pub fn best_multiroot_knomial(ctx: &Ctx, n: u32) -> anyhow::Result<(TreeChoice, u64)> {
    let trees: Vec<TreeChoice> = radixes(ctx)
        .filter(|&k| k < n)
        .map(|k| TreeChoice::knomial(k, k))
        .collect();
    let runs = fault_free(ctx, n, &trees)?;
    best(&runs).context("no multi-root tree fits")
}

/// The tree with the lowest latency (the first on a tie).
pub fn best(runs: &[(TreeChoice, SimReport)]) -> Option<(TreeChoice, u64)> {
    let mut found: Option<(TreeChoice, u64)> = None;
    for (tree, report) in runs {
        if found.is_none_or(|(_, latency)| report.completion_steps < latency) {
            found = Some((*tree, report.completion_steps));
        }
    }
    found
}

/// A float for CSV and tables.
pub fn fmt(x: f64) -> String {
    format!("{x:.3}")
}
