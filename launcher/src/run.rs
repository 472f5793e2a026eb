//! A run: flags to a job, the job to a report.

use std::fs;

use anyhow::{bail, Context};
use ftcoll_algos::ftco::FtcoOptions;
use ftcoll_algos::gossip::SumForm;
use ftcoll_algos::topology::Topology;
use ftcoll_algos::values::Dtype;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::job::{simulate, Algorithm, GossipOptions, JobError, JobSpec};
use ftcoll_runtime::sim::{CostModel, DetectorModel, InputKind, SimConfig, SimReport};
use ftcoll_tui::JobInfo;

use crate::cli::RunArgs;
use crate::cluster::ClusterOptions;
use crate::console::live::Inputs;
use crate::live::{LaunchOptions, LiveSpec};
use crate::report::RunJson;

mod live;
mod soak;
mod swarm;
use live::run_live;
pub use live::{builtin_failure, builtin_run};
pub use soak::soak;
pub use swarm::check;

/// The operator and input distribution the flags name (simulated and real runs alike).
fn data_from_args(args: &RunArgs) -> anyhow::Result<(ReduceOp, InputKind)> {
    use ftcoll_launcher::text::options::{parse_input, parse_op};
    let op = parse_op(&args.op).map_err(anyhow::Error::msg)?;
    let input = parse_input(&args.input).map_err(anyhow::Error::msg)?;
    if args.len == 0 {
        bail!("--len must be at least 1");
    }
    Ok((op, input))
}

/// The `--fault` specs, parsed (simulated and real runs alike).
fn parse_faults(args: &RunArgs) -> anyhow::Result<Vec<ftcoll_runtime::faults::FaultSpec>> {
    args.faults
        .iter()
        .map(|spec| {
            ftcoll_launcher::text::parse_fault(spec).with_context(|| format!("in --fault {spec}"))
        })
        .collect()
}

/// The gossip flags, checked.
pub fn gossip_options(args: &RunArgs) -> anyhow::Result<GossipOptions> {
    let single = match args.precision.as_deref() {
        None => None,
        Some("f32") => Some(true),
        Some("f64") => Some(false),
        Some(other) => bail!("unknown --precision '{other}'; use f32 or f64"),
    };
    let stop_rule = match args.stop.as_str() {
        "oracle" => false,
        "rule" => true,
        other => bail!("unknown --stop '{other}'; use oracle or rule"),
    };
    let period = match (&args.gossip_period, args.sim) {
        (None, _) => None,
        (Some(text), true) => Some(text.parse::<u64>().ok().filter(|&p| p >= 1).with_context(
            || format!("--gossip-period '{text}': the simulator counts steps, e.g. 12"),
        )?),
        (Some(text), false) => {
            gossip_period(text)?;
            None
        }
    };
    let sum_form = match args.gossip_sum.as_str() {
        "live-count" => SumForm::LiveCount,
        "rank0-weight" if args.sim => SumForm::RankZeroWeight,
        "rank0-weight" => bail!(
            "--gossip-sum rank0-weight is for the simulator (add --sim): a crash of rank 0 would \
             leave real ranks nothing to divide by"
        ),
        other => bail!("unknown --gossip-sum '{other}'; use live-count or rank0-weight"),
    };
    Ok(GossipOptions {
        synchronous: args.gossip_sync,
        single,
        tau: args.tau,
        period,
        pcf_as_printed: args.pcf_as_printed,
        stop_rule,
        sum_form,
    })
}

/// Push period of gossip on real ranks.
pub fn gossip_period(text: &str) -> anyhow::Result<std::time::Duration> {
    let time = ftcoll_launcher::text::parse_time("gossip-period", text).with_context(|| {
        format!("--gossip-period '{text}': give a time with its unit, e.g. 1ms")
    })?;
    match time {
        ftcoll_runtime::faults::FaultTime::Nanos(ns) if ns > 0 => {
            Ok(std::time::Duration::from_nanos(ns))
        }
        _ => bail!("--gossip-period '{text}': real runs need a time with its unit, e.g. 1ms"),
    }
}

/// The gossip flags a rank process needs.
fn gossip_rank_args(args: &RunArgs) -> Vec<String> {
    let mut out = vec![
        "--gossip-period".to_string(),
        args.gossip_period
            .clone()
            .unwrap_or_else(|| LIVE_GOSSIP_PERIOD.into()),
    ];
    let mut add = |flag: &str, value: Option<String>| {
        if let Some(value) = value {
            out.push(flag.into());
            out.push(value);
        }
    };
    add("--eps", args.eps.map(|e| e.to_string()));
    add("--steps", args.steps.map(|s| s.to_string()));
    add("--topology", args.topology.clone());
    add("--precision", args.precision.clone());
    add("--tau", args.tau.map(|t| t.to_string()));
    if args.gossip_sync {
        out.push("--gossip-sync".into());
    }
    if args.pcf_as_printed {
        out.push("--pcf-as-printed".into());
    }
    out
}

/// Push period of gossip on real ranks when --gossip-period is not given.
pub const LIVE_GOSSIP_PERIOD: &str = "1ms";

/// The job and simulator configuration the flags describe.
pub fn job_from_args(args: &RunArgs) -> anyhow::Result<(JobSpec, SimConfig)> {
    let algo = args.algo();
    let mut spec = JobSpec::new(algo, args.n);
    (spec.op, spec.input) = data_from_args(args)?;
    spec.input_len = args.len;
    spec.eps = args.eps;
    spec.steps = args.steps;
    spec.tolerate = match (args.tolerate, algo.kind()) {
        (None, _) => 1,
        (
            Some(f),
            ftcoll_algos::registry::Kind::Corrected(_) | ftcoll_algos::registry::Kind::FtCorrected,
        ) => f,
        // Only the corrected trees take a bound; a user who gives one elsewhere expects it
        // to mean something.
        (Some(_), _) => bail!(
            "--tolerate sets f of the corrected-tree algorithms (corrected-reduce, -bcast, \
             -allreduce, ft-corrected); {algo} takes no bound on failures (see docs/CLI.md)"
        ),
    };
    if args.failure_info.is_some() && algo == Algorithm::FtCorrected {
        bail!(
            "ft-corrected's segments always report failures as lists (the one scheme that tells \
             a root whose inputs a segment lacks); drop --failure-info"
        );
    }
    let failure_info = args.failure_info.as_deref().unwrap_or("count");
    spec.failure_info = ftcoll_launcher::text::options::parse_failure_info(failure_info)
        .map_err(anyhow::Error::msg)?;
    spec.correction =
        ftcoll_launcher::text::options::parse_correction_for(&args.correction, args.sim)
            .map_err(anyhow::Error::msg)?;
    if algo == Algorithm::EraAgree {
        // Agreement needs an idempotent operator; the default sum becomes the set union of
        // contributors (bor), which shows who participated.
        if spec.op == ftcoll_algos::ReduceOp::Sum {
            spec.op = ftcoll_algos::ReduceOp::BitOr;
        }
        spec.era_topology = ftcoll_algos::era::EraTopology::from_name(
            &args.era_tree,
            args.ranks_per_node.unwrap_or(args.n),
        )
        .map_err(|e| anyhow::anyhow!("--era-tree: {e} (set with --ranks-per-node)"))?;
    }
    spec.ftco = ftco_options(args, args.sim)?;
    spec.gossip = gossip_options(args)?;
    let has_out_of_place = matches!(
        algo.kind(),
        ftcoll_runtime::job::Kind::Ring | ftcoll_runtime::job::Kind::FtRing
    );
    // The agreement's operators work on its bit words, which the simulator has; the vector
    // algorithms' bitwise operators need integer vectors, which it has not.
    let vector_operators = algo.descriptor().operators == ftcoll_algos::registry::Operators::Any;
    if args.sim && vector_operators && !spec.op.applies_to(ftcoll_algos::values::Dtype::F64) {
        bail!(
            "--op {} needs integer vectors, which only real runs have (the simulator reduces \
             f64): drop --sim and add --dtype i32, i64, u32 or u64",
            spec.op.name()
        );
    }
    if args.out_of_place && args.sim {
        bail!("--out-of-place applies to real runs only; drop it or --sim");
    }
    if args.library_pick && args.sim {
        bail!(
            "--library-pick applies to real runs only (the simulator runs the algorithm --algo \
             names); drop it or --sim"
        );
    }
    if args.library_pick && args.algo.is_some() {
        bail!("--library-pick runs the allreduce the library picks; drop --algo, or drop --library-pick");
    }
    if args.out_of_place && !has_out_of_place && !args.library_pick {
        bail!(
            "--out-of-place applies to --algo ring and ft-ring and to --library-pick; drop it, \
             or pick one of those"
        );
    }
    if args.n == 0 {
        bail!("a job needs at least one rank; pass -n N with N >= 1");
    }
    if let Some(name) = &args.topology {
        spec.topology =
            Some(Topology::from_name(name, args.n).with_context(|| format!("--topology {name}"))?);
    }
    spec.validate().map_err(flag_error)?;
    let cost = match args.cost.as_str() {
        "logp" => CostModel::loggp(args.latency, args.overhead, args.gap, args.gap_per_mib),
        "rounds" => CostModel::rounds(),
        other => bail!("unknown cost model '{other}'; use logp or rounds"),
    };
    let faults = parse_faults(args)?;
    let crashes = faults.iter().any(|f| {
        matches!(
            f,
            ftcoll_runtime::faults::FaultSpec::Kill { .. }
                | ftcoll_runtime::faults::FaultSpec::KillNode { .. }
        )
    });
    if spec.gossip.sum_form == SumForm::RankZeroWeight && crashes {
        bail!(
            "--gossip-sum rank0-weight cannot survive a crash (rank 0's weight is what every \
             estimate divides by); drop the kill faults or use --gossip-sum live-count"
        );
    }
    let ranks_per_node = args.ranks_per_node.unwrap_or(1);
    if ranks_per_node == 0 {
        bail!("--ranks-per-node must be at least 1");
    }
    let config = SimConfig {
        seed: args.seed,
        cost,
        detector: parse_detector(&args.detector)?,
        faults,
        ranks_per_node,
        ..SimConfig::default()
    };
    Ok((spec, config))
}

/// Default detection timeout on real ranks.
const LIVE_DETECT_TIMEOUT: &str = "100ms";

/// The FTCO options of the flags: time in LogP steps for the simulator (`sim`), in
/// nanoseconds on real ranks.
pub fn ftco_options(args: &RunArgs, sim: bool) -> anyhow::Result<FtcoOptions> {
    use ftcoll_algos::time::Duration as Ticks;
    use ftcoll_launcher::text::parse_time;
    use ftcoll_runtime::faults::FaultTime;
    let shape = ftcoll_launcher::text::parse_shape(&args.ftco_tree).map_err(anyhow::Error::msg)?;
    let service =
        ftcoll_launcher::text::parse_service(&args.service_distance).map_err(anyhow::Error::msg)?;
    if args.ftco_roots == 0 {
        bail!("--ftco-roots must be at least 1");
    }
    if args.ftco_step_model && !sim {
        bail!("--ftco-step-model is a simulator model; add --sim, or drop it on real ranks");
    }
    let text =
        args.detect_timeout
            .as_deref()
            .unwrap_or(if sim { "40" } else { LIVE_DETECT_TIMEOUT });
    let timeout = parse_time("detect-timeout", text).map_err(anyhow::Error::msg)?;
    match (sim, timeout) {
        (true, FaultTime::Steps(steps)) if steps > 0 => Ok(FtcoOptions {
            shape,
            roots: args.ftco_roots,
            detect_timeout: Ticks(steps),
            fixed_timeout: args.ftco_fixed_timeout,
            service,
            step_model: args.ftco_step_model,
            ..FtcoOptions::default()
        }),
        (false, FaultTime::Nanos(nanos)) if nanos > 0 => {
            Ok(crate::live::rank_main::live_ftco_options(
                shape,
                args.ftco_roots,
                std::time::Duration::from_nanos(nanos),
                service,
                args.ftco_fixed_timeout,
            ))
        }
        (true, _) => {
            bail!("--detect-timeout in the simulator is a positive number of steps, e.g. 40")
        }
        (false, _) => {
            bail!("--detect-timeout on real ranks is a positive time with its unit, e.g. 100ms")
        }
    }
}

/// Parses `perfect:DELAY`, `timeout:PERIOD,TIMEOUT` or `none`.
fn parse_detector(text: &str) -> anyhow::Result<DetectorModel> {
    let usage = || {
        format!(
            "bad --detector '{text}'; use perfect:DELAY, timeout:PERIOD,TIMEOUT (steps) or none"
        )
    };
    if text == "none" {
        return Ok(DetectorModel::Silent);
    }
    let (kind, rest) = text.split_once(':').unwrap_or((text, "0"));
    let numbers: Vec<u64> = rest
        .split(',')
        .map(|x| x.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow::anyhow!(usage()))?;
    match (kind, numbers.as_slice()) {
        ("perfect", [delay_steps]) => Ok(DetectorModel::Perfect {
            delay_steps: *delay_steps,
        }),
        ("timeout", [period_steps, timeout_steps]) if period_steps <= timeout_steps => {
            Ok(DetectorModel::Timeout {
                period_steps: *period_steps,
                timeout_steps: *timeout_steps,
            })
        }
        _ => bail!(usage()),
    }
}

/// Runs the job the flags describe.
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    if args.sim && args.dtype != Dtype::F64 {
        bail!("the simulator reduces f64 vectors; --dtype applies to real runs (drop --sim)");
    }
    if args.sim {
        // A simulated rank holds at least its input and its state's vector, all in this process.
        crate::memory::ensure_fits(
            &format!("--sim -n {} --len {}", args.n, args.len),
            u64::from(args.n),
            (args.len as u64).saturating_mul(8),
            crate::memory::available_bytes(),
            "lower --len or -n",
        )?;
    }
    if console_wanted(args) {
        let args = &console_args(args);
        if args.sim {
            let (spec, config) = job_from_args(args)?;
            return crate::console::sim::run(spec, config, value_bits(args));
        }
        return run_live(args, true);
    }
    if !args.sim {
        return run_live(&real_run_args(args), false);
    }
    let (spec, config) = job_from_args(args)?;
    let report = simulate(&spec, config.clone()).map_err(flag_error)?;
    if args.check_determinism {
        let again = simulate(&spec, config).map_err(flag_error)?;
        if again.trace_hash != report.trace_hash {
            bail!(
                "determinism check failed: seed {} gave trace hashes {:016x} and {:016x}",
                args.seed,
                report.trace_hash,
                again.trace_hash
            );
        }
        eprintln!(
            "determinism check passed: trace hash {:016x} twice",
            report.trace_hash
        );
    }
    print_summary(&spec, &report);
    let json = RunJson::from_sim(&report, &spec);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&json)?;
        fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(why) = &json.wrong {
        bail!("the run's outcome cannot be trusted: {why}");
    }
    Ok(())
}

/// The flags of a real run: the built-in job without `--algo` runs the allreduce an
/// application gets from `Communicator::allreduce` (as `--library-pick`), so that the first
/// command a user types measures what the library does at that size, not recursive doubling
/// of a 128 MiB vector. The simulator's default stays `rdb` (it has no transport or placement
/// to pick by), the console's a gossip reduction.
fn real_run_args(args: &RunArgs) -> RunArgs {
    let mut args = args.clone();
    if args.algo.is_none() && args.program.is_empty() {
        args.library_pick = true;
    }
    args
}

/// The flags under the console: a gossip reduction unless an algorithm is named (or the
/// library's pick asked for), repeated until the user quits, slow enough on real ranks to
/// watch.
fn console_args(args: &RunArgs) -> RunArgs {
    let mut args = args.clone();
    if !args.library_pick {
        args.algo
            .get_or_insert(crate::console::DEFAULT_CONSOLE_ALGO);
    }
    if !args.sim {
        args.gossip_period
            .get_or_insert_with(|| crate::console::CONSOLE_GOSSIP_PERIOD.into());
    }
    args.ops = u64::MAX;
    args
}

/// Whether a run with these flags opens the console: the built-in job (not a user program),
/// with a terminal on both ends and no `--no-tui`.
fn console_wanted(args: &RunArgs) -> bool {
    {
        use std::io::IsTerminal;
        !args.no_tui
            && args.program.is_empty()
            && std::io::stdout().is_terminal()
            && std::io::stdin().is_terminal()
    }
}

/// Bits a flip may target in the job's values.
fn value_bits(args: &RunArgs) -> u32 {
    let single = match args.precision.as_deref() {
        Some("f32") => true,
        Some(_) => false,
        // The round-based gossip of 000 Sec. 6 keeps single precision by default.
        None => args.algo().is_round_based_gossip(),
    };
    if single {
        32
    } else {
        64
    }
}

/// How the launcher starts and watches the ranks, from the flags.
pub fn launch_options(args: &RunArgs) -> LaunchOptions {
    let (heartbeat_ms, suspect_ms) = if args.aggressive_detector {
        (25, 100)
    } else {
        (args.heartbeat_ms, args.suspect_ms)
    };
    LaunchOptions {
        n: args.n,
        bind: args.bind.clone(),
        heartbeat_ms,
        suspect_ms,
        ranks_per_node: args.ranks_per_node,
        era_tree: args.era_tree.clone(),
        ofi_provider: args.ofi_provider.clone(),
        timeout_s: args.timeout_s,
    }
}

/// Where the ranks may run, from the flags.
fn cluster_options(args: &RunArgs) -> ClusterOptions {
    ClusterOptions {
        n: args.n,
        hostfile: args.hostfile.clone(),
        ranks_per_node: args.ranks_per_node,
        no_slurm: args.no_slurm,
    }
}

/// What the console shows of a real job, and how its ranks draw their inputs.
fn console_job(
    args: &RunArgs,
    spec: &LiveSpec,
    op: ReduceOp,
    input: InputKind,
) -> (JobInfo, Inputs) {
    let info = JobInfo {
        algo: args.algo().name().to_string(),
        n: args.n,
        transport: spec.transport.name().to_string(),
        simulated: false,
        value_bits: value_bits(args),
        ranks_per_node: args.ranks_per_node.unwrap_or(args.n).clamp(1, args.n),
        seed: args.seed,
    };
    let inputs = Inputs {
        op,
        kind: input,
        len: args.len,
        seed: args.seed,
    };
    (info, inputs)
}

fn print_summary(spec: &JobSpec, report: &SimReport) {
    println!(
        "{} {} over {} ranks (simulated, seed {})",
        spec.algo,
        spec.op.name(),
        report.n,
        report.seed
    );
    println!("  rounds            {}", report.rounds);
    println!("  messages          {}", report.messages);
    println!("  sim time          {} steps", report.sim_time_steps);
    if report.completion_steps < report.sim_time_steps {
        println!(
            "  last completion   {} steps (later events were timers no rank needed)",
            report.completion_steps
        );
    }
    if spec.algo.ftco_collective().is_some() {
        println!("  failure notices   none: FTCO finds crashes by its own ACK timeouts");
    }
    println!("  max rel. error    {:.3e}", report.max_rel_error);
    if let Some(error) = report.admissible_error {
        println!("  vs survivors      {error:.3e} (survivors' inputs plus any subset of the crashed ranks')");
    }
    println!(
        "  ranks             {} completed, {} aborted, {} incomplete, {} crashed",
        report.completed,
        report.aborted,
        report.incomplete,
        report.crashes.len()
    );
    let dropped = report.dropped_loss + report.dropped_cut + report.dropped_dead;
    if dropped + report.rejected + report.message_flips + report.state_flips > 0 {
        println!(
            "  faults            {} dropped, {} rejected, {} message flips, {} state flips",
            dropped, report.rejected, report.message_flips, report.state_flips
        );
    }
    if let Some(round) = report.oracle_stop_round {
        println!("  oracle stop       after round {round}");
    }
    println!(
        "  wall              {:.3} s ({:.1} M events/s)",
        report.wall_s,
        report.events as f64 / report.wall_s.max(1e-9) / 1e6
    );
    if report.truncated {
        println!("  warning: the run hit the simulator's event or time bound and was cut short");
    }
}

/// A job the library refused, worded in the flags that set the refused field.
pub fn flag_error(error: JobError) -> anyhow::Error {
    let text = match &error {
        JobError::NoRanks => "a job needs at least one rank; pass -n N with N >= 1".to_string(),
        JobError::TopologyUnsupported { algo, topology } => format!(
            "{algo} exchanges along hypercube edges and cannot run on a {topology}; use --topology hypercube or full"
        ),
        JobError::OpUnsupported { algo, op } => {
            format!("{algo} cannot compute '{op}'; pick another --op (see --help)")
        }
        JobError::TooFewRanks { algo, tolerate } => format!(
            "{algo} with --tolerate {tolerate} needs at least {} ranks (the root and f + 1 subtrees); lower --tolerate or raise -n",
            tolerate + 2
        ),
        JobError::NeedsFullTopology { algo } => format!(
            "{algo} sends along its own overlay (tree, ring) over a fully connected network; drop --topology or use --topology full"
        ),
        JobError::RoundBasedOnGraph { algo } => format!(
            "{algo}: the round-based gossip draws partners from permutations of all ranks; drop --topology or use --topology full"
        ),
        JobError::NoAgreements => "--agreements must be at least 1".to_string(),
        JobError::BadTau(tau) => format!("--tau must be a positive number, got {tau}"),
        JobError::NoSteps => "--steps must be at least 1".to_string(),
        JobError::SumFormWithoutSum => {
            "--gossip-sum rank0-weight forms a sum; add --op sum or drop it".to_string()
        }
        JobError::BadEps(eps) => format!("--eps must lie in (0, 1), got {eps}"),
        JobError::Topology(_)
        | JobError::Ftco { .. }
        | JobError::NotGossip { .. }
        | JobError::Sim(_) => error.to_string(),
    };
    anyhow::anyhow!(text)
}

/// A transport the runtime refused, worded with the build command that adds it.
fn transport_flag_error(error: ftcoll_runtime::transport::TransportError) -> anyhow::Error {
    use ftcoll_runtime::transport::TransportError;
    match error {
        TransportError::NotCompiledIn(kind) => anyhow::anyhow!(
            "transport {kind} is not compiled into this build; rebuild with `cargo build --release --features {kind}` (see docs/clusters.md) or use --transport shm or tcp"
        ),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// Benchmarks start jobs from `LaunchOptions::local`: it must say what the flags say.
    #[test]
    fn local_launch_options_are_the_flag_defaults() {
        let cli = crate::cli::Cli::parse_from(["ftcoll-launch", "-n", "7"]);
        assert_eq!(launch_options(&cli.run), LaunchOptions::local(7));
        let aggressive =
            crate::cli::Cli::parse_from(["ftcoll-launch", "-n", "7", "--aggressive-detector"]);
        let options = launch_options(&aggressive.run);
        assert_eq!((options.heartbeat_ms, options.suspect_ms), (25, 100));
    }
}
