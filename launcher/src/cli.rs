//! Command-line interface of `ftcoll-launch`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use ftcoll_algos::registry::{Algorithm, Runs};
use ftcoll_launcher::text::options::parse_algorithm;

/// Text after the flag list: the algorithm table and the fault syntax.
pub fn after_help() -> String {
    format!(
        "ALGORITHMS (--algo):\n{}\n\
FAULTS (--fault SPEC, repeatable; times in simulator steps, or with ns/us/ms/s on real runs):\n\
  kill:rank=R[,at=T]                crash rank R at T (0 = before the operation)\n\
  kill:rank=R,op=K                  crash rank R when operation K starts (real runs)\n\
  kill-node:node=N[,at=T]           crash every rank of node N (see --ranks-per-node)\n\
  flip-msg:rank=R,bit=B[,elem=E][,nth=K|,at=T]\n\
                                    flip bit B (0 = lowest mantissa bit, 63 = sign) of element E\n\
                                    of the K-th message rank R sends (or the first at/after T)\n\
  flip-msg:rank=R,raw=B[,nth=K]     flip bit B of the encoded frame, header included\n\
  flip-state:rank=R,var=value|weight|flow:P,bit=B[,elem=E][,at=T]\n\
                                    flip a bit of a state variable of rank R\n\
  drop:rank=R|all,rate=P            lose each message of R (or of everyone) with probability P\n\
  cut:link=R-S[,at=T]               lose every message between R and S from T on\n\
  slow:rank=R,factor=F[,at=T]       rank R's per-message CPU cost times F\n\
  stop:rank=R[,at=T]                rank R hangs (alive, silent): the timeout detector fences it\n\
  spread:uniform=W | spread:normal=S  start times uniform on [0,W] or |normal(0,S)|\n\n\
ENVIRONMENT:\n\
  FTCOLL_LOG   log filter (tracing EnvFilter syntax), e.g. FTCOLL_LOG=debug; logs go to stderr\n",
        algorithm_table()
    )
}

/// The registry as the help text's table: name, where it runs, summary.
pub fn algorithm_table() -> String {
    let mut text = String::new();
    for algo in Algorithm::ALL {
        let d = algo.descriptor();
        let runs = match d.runs {
            Runs {
                simulated: true,
                real: true,
            } => "",
            Runs {
                simulated: true,
                real: false,
            } => " [--sim only]",
            Runs {
                simulated: false,
                real: true,
            } => " [real ranks only]",
            Runs {
                simulated: false,
                real: false,
            } => " [not in this build]",
        };
        text.push_str(&format!("  {:<20} {}{}\n", d.name, d.summary, runs));
    }
    text
}

/// ftcoll-launch: fault-tolerant collectives, simulated or on real ranks.
#[derive(Debug, Parser)]
#[command(name = "ftcoll-launch", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// A job other than a plain run.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The run's flags.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Jobs other than a run.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Reproduce a figure of the papers (writes CSV and a plot).
    Experiment(crate::experiments::ExperimentArgs),
    /// Measure performance.
    Bench(Box<crate::bench::BenchArgs>),
    /// The swarm checker: random runs of every family under random faults in the simulator,
    /// each judged against its algorithm's model; a violation prints the command that replays it.
    Check(crate::check::CheckArgs),
    /// Agreements and fault-tolerant allreduces on real processes under random SIGKILLs, job
    /// after job, for a set time; every job must finish, agree and return admissible results.
    Soak(crate::soak::SoakArgs),
    /// One rank of the built-in job (started by the launcher, not by hand).
    #[command(name = "__rank", hide = true)]
    Rank(crate::live::rank_main::RankArgs),
    /// The node agent of a cluster run (started by the launcher over ssh or srun).
    #[command(name = "__agent", hide = true)]
    Agent(crate::cluster::agent::AgentArgs),
    /// One side of `bench transport`.
    #[command(name = "__pingpong", hide = true)]
    PingPong(crate::bench::transport::PingPongArgs),
}

impl RunArgs {
    /// The algorithm (`rdb` unless given; a real run without one runs the library's pick).
    pub fn algo(&self) -> Algorithm {
        self.algo.unwrap_or(Algorithm::Rdb)
    }
}

/// Flags of a run.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Number of ranks.
    #[arg(short = 'n', long = "ranks", default_value_t = 16)]
    pub n: u32,
    /// Algorithm (see the table below); default: on real ranks the library's allreduce (as
    /// --library-pick), in the simulator rdb, under the console pfcc.
    #[arg(long, value_parser = parse_algorithm)]
    pub algo: Option<Algorithm>,
    /// Run in the deterministic simulator (all ranks in this process, virtual time).
    #[arg(long)]
    pub sim: bool,
    /// Seed of every random draw (inputs, faults, message order).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Accuracy target of approximate algorithms (relative error).
    #[arg(long)]
    pub eps: Option<f64>,
    /// Step budget of approximate algorithms on real ranks (ARDB: exchanges).
    #[arg(long)]
    pub steps: Option<u32>,
    /// Failures the corrected-tree algorithms tolerate (f): the root gets f + 1 subtrees and
    /// allreduce tries up to f + 1 root candidates (ranks 0..=f) [default: 1].
    #[arg(long)]
    pub tolerate: Option<u32>,
    /// How corrected-reduce reports failures up the tree: list, count (count + bit) or bit
    /// [default: count]. Not with ft-corrected, whose segments always report lists.
    #[arg(long)]
    pub failure_info: Option<String>,
    /// Correction phase of corrected-bcast / corrected-allreduce: checked, opportunistic:D
    /// (the D nearest ring neighbours on each side), or `timed[:GAP]` (checked with no failure
    /// detector: GAP steps in the simulator, default 40; a time on real ranks, default 1ms).
    #[arg(long, default_value = "checked")]
    pub correction: String,
    /// Agreement tree of era-agree and of the library's agree/shrink: bin, star, string, or
    /// X/Y over nodes of --ranks-per-node (bin/bin, bin/star).
    #[arg(long, default_value = "bin")]
    pub era_tree: String,
    /// Tree of the ftco-* algorithms: kary:K or knomial:K.
    #[arg(long, default_value = "knomial:2")]
    pub ftco_tree: String,
    /// Fully connected roots of the ftco-* tree (1 = a single-root tree).
    #[arg(long, default_value_t = 1)]
    pub ftco_roots: u32,
    /// Detection timeout of the ftco-* algorithms (the per-message timeout towards a neighbour
    /// of degree 1): steps in the simulator (default 40), a time with its unit on real ranks
    /// (default 100ms).
    #[arg(long, value_name = "T")]
    pub detect_timeout: Option<String>,
    /// Service-distance function of the ftco-* algorithms: rsd, rsd:R (0 < R <= 0.5) or disd.
    #[arg(long, default_value = "rsd")]
    pub service_distance: String,
    /// On real ranks, the ftco-* algorithms also act on the launcher's failure notices during
    /// the operation (by default they detect failures by their own timeouts only, as 004).
    #[arg(long)]
    pub ftco_notices: bool,
    /// The ftco-* algorithms use the detection timeout itself for every message, as with
    /// ULFM's fixed timeout (004's Table 1 ran so), instead of scaling it by the tree distance
    /// and the destination's degree (004 App. A).
    #[arg(long)]
    pub ftco_fixed_timeout: bool,
    /// Simulator: run the ftco-* algorithms in 004's step model (one action per rank per
    /// step, a rank done when its traversal is), as 004's Figs. 7-10 and Table 2 were made.
    #[arg(long)]
    pub ftco_step_model: bool,
    /// Gossip (ps .. pcf): push on a shared round clock instead of each rank's own
    /// (round-synchronous mode; hps and hpflc always are).
    #[arg(long)]
    pub gossip_sync: bool,
    /// Gossip: time between pushes, steps in the simulator (default: one exchange, L + 2o), a
    /// time with its unit on real ranks (default 1ms).
    #[arg(long, value_name = "T")]
    pub gossip_period: Option<String>,
    /// Gossip: keep state in f32 or f64 (default f32 for hps and hpflc as in 000 Sec. 6, f64
    /// otherwise).
    #[arg(long, value_name = "P")]
    pub precision: Option<String>,
    /// Checksum threshold tau of pflc, pfcc and hpflc (default 1e-11 in f64, 1e-4 in f32).
    #[arg(long)]
    pub tau: Option<f64>,
    /// pcf as 003 Fig. 5 prints it (phi kept incrementally, not bit-flip tolerant).
    #[arg(long)]
    pub pcf_as_printed: bool,
    /// Gossip sums: live-count (every rank starts with weight 1; the sum is the average times
    /// the live rank count, which survives crashes) or rank0-weight (Push-Sum's own sum, as
    /// 003 computes sums: only rank 0 starts with weight 1; simulator only, no crashes).
    #[arg(
        long,
        default_value = "live-count",
        value_name = "live-count|rank0-weight"
    )]
    pub gossip_sum: String,
    /// Gossip in the simulator: stop by the oracle (every rank within --eps, as the papers) or
    /// by the local stopping rule real runs use.
    #[arg(long, default_value = "oracle", value_name = "oracle|rule")]
    pub stop: String,
    /// Scripted fault (repeatable); syntax below.
    #[arg(long = "fault", value_name = "SPEC")]
    pub faults: Vec<String>,
    /// Write the run's report as JSON (schema in docs/CLI.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run headless: print a summary instead of opening the console.
    #[arg(long)]
    pub no_tui: bool,
    /// Reduction operator: sum, avg, min, max; with rdb, direct, ring and chain-reduce also
    /// prod, and band, bor, bxor over integer vectors (--dtype i32, i64, u32, u64).
    #[arg(long, default_value = "sum")]
    pub op: String,
    /// Input distribution: uniform (0,1), int (0..=1000), ones, rank.
    #[arg(long, default_value = "uniform")]
    pub input: String,
    /// Elements per rank.
    #[arg(long, default_value_t = 1)]
    pub len: usize,
    /// Element type of the vectors (real runs): f64, f32, i32, i64, u32, u64. rdb, direct
    /// and ring reduce every type; the other algorithms reduce f64.
    #[arg(long, default_value = "f64", value_parser = ftcoll_launcher::text::options::parse_dtype)]
    pub dtype: ftcoll_algos::values::Dtype,
    /// Real runs of ring and ft-ring: each rank reduces its input into a second vector
    /// (`allreduce_ring_into`, `ft_allreduce_into`), as `MPI_Allreduce(in, out)` does, instead
    /// of in place; on shared memory the fault-tolerant ring then keeps no copy of its input.
    #[arg(long)]
    pub out_of_place: bool,
    /// Real runs: the allreduce an application gets from `Communicator::allreduce`, picked by
    /// size, rank count, placement and transport (recursive doubling, the ring or recursive
    /// halving and doubling, single copy on shared memory from 1 MiB), instead of the one
    /// --algo names; a real run without --algo runs it.
    #[arg(long)]
    pub library_pick: bool,
    /// Network topology: full, hypercube, torus, ring, bus.
    #[arg(long)]
    pub topology: Option<String>,
    /// Ranks per node (node failures, hierarchical algorithms); default: 1 in the simulator,
    /// all ranks on one node in a real run.
    #[arg(long)]
    pub ranks_per_node: Option<u32>,
    /// Simulator cost model: logp or rounds.
    #[arg(long, default_value = "logp")]
    pub cost: String,
    /// LogP latency L in steps.
    #[arg(long, default_value_t = 10)]
    pub latency: u64,
    /// LogP overhead o in steps.
    #[arg(long, default_value_t = 1)]
    pub overhead: u64,
    /// LogP gap g in steps.
    #[arg(long, default_value_t = 1)]
    pub gap: u64,
    /// LogGP's G: steps per MiB a sender spends on a message (0: message size is free).
    #[arg(long, default_value_t = 0)]
    pub gap_per_mib: u64,
    /// Failure detector of the simulator: perfect:DELAY, timeout:PERIOD,TIMEOUT (steps), or
    /// none (a crash is only silence; for algorithms that need no detector).
    #[arg(long, default_value = "perfect:0")]
    pub detector: String,
    /// Run the simulation twice and fail unless both traces hash the same.
    #[arg(long)]
    pub check_determinism: bool,
    /// Data-plane transport of a real run: auto (an RDMA backend compiled in that finds a
    /// device, else shm on one machine, else tcp), shm, tcp, ucx or ofi (ucx and ofi need the
    /// cargo features of the same names).
    #[arg(long, default_value = "auto")]
    pub transport: String,
    /// libfabric provider for --transport ofi (e.g. tcp, shm, verbs); default: FI_PROVIDER,
    /// else libfabric's first RDM provider.
    #[arg(long)]
    pub ofi_provider: Option<String>,
    /// IP the control plane (and, on one machine, the TCP data plane) listen on; cluster runs
    /// need one the hosts reach (inside Slurm the host's own address is taken by default).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// Run the ranks on the hosts of this file (Open MPI format: `host slots=K`), started over
    /// ssh (`FTCOLL_SSH`, default `ssh`; batch mode) in blocks of --ranks-per-node per host.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<std::path::PathBuf>,
    /// Inside a Slurm allocation, still start every rank on this machine instead of with srun.
    #[arg(long)]
    pub no_slurm: bool,
    /// Operations the built-in job runs.
    #[arg(long, default_value_t = 1)]
    pub ops: u64,
    /// Heartbeat period of ranks to the launcher, in ms.
    #[arg(long, default_value_t = 500)]
    pub heartbeat_ms: u64,
    /// A rank silent this long is killed, then reported failed, in ms.
    #[arg(long, default_value_t = 3000)]
    pub suspect_ms: u64,
    /// Heartbeats every 25 ms, suspicion after 100 ms.
    #[arg(long)]
    pub aggressive_detector: bool,
    /// Kill the whole job after this many seconds (at least 1).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_s: u64,
    /// A program to start N times instead of the built-in job (after `--`).
    #[arg(last = true, value_name = "PROGRAM")]
    pub program: Vec<String>,
}
