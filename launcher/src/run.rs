//! A run: flags to a job, the job to a report.

use std::fs;

use anyhow::{bail, Context};
use ftcoll_algos::topology::Topology;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::faults::FaultSpec;
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{CostModel, DetectorModel, InputKind, SimConfig, SimReport};

use crate::cli::RunArgs;
use crate::report::RunJson;

/// The job and simulator configuration the flags describe.
pub fn job_from_args(args: &RunArgs) -> anyhow::Result<(JobSpec, SimConfig)> {
    let algo = Algorithm::parse(&args.algo)?;
    let mut spec = JobSpec::new(algo, args.n);
    spec.op = ReduceOp::parse(&args.op)?;
    spec.input = InputKind::parse(&args.input).with_context(|| {
        format!(
            "unknown input '{}'; use uniform, int, ones or rank",
            args.input
        )
    })?;
    if args.len == 0 {
        bail!("--len must be at least 1");
    }
    spec.input_len = args.len;
    spec.eps = args.eps;
    spec.steps = args.steps;
    if args.n == 0 {
        bail!("a job needs at least one rank; pass -n N with N >= 1");
    }
    if let Some(name) = &args.topology {
        spec.topology = Some(Topology::parse(name, args.n)?);
    }
    spec.validate()?;
    let cost = match args.cost.as_str() {
        "logp" => CostModel::logp(args.latency, args.overhead, args.gap),
        "rounds" => CostModel::rounds(),
        other => bail!("unknown cost model '{other}'; use logp or rounds"),
    };
    let faults = args
        .faults
        .iter()
        .map(|spec| FaultSpec::parse(spec).with_context(|| format!("in --fault {spec}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if args.ranks_per_node == 0 {
        bail!("--ranks-per-node must be at least 1");
    }
    let config = SimConfig {
        seed: args.seed,
        cost,
        detector: parse_detector(&args.detector)?,
        faults,
        ranks_per_node: args.ranks_per_node,
        ..SimConfig::default()
    };
    Ok((spec, config))
}

/// Parses `perfect:DELAY` or `timeout:PERIOD,TIMEOUT`.
fn parse_detector(text: &str) -> anyhow::Result<DetectorModel> {
    let usage =
        || format!("bad --detector '{text}'; use perfect:DELAY or timeout:PERIOD,TIMEOUT (steps)");
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
    let (spec, config) = job_from_args(args)?;
    if !args.sim {
        bail!("runs on real ranks need the runtime's transports, which this build does not have yet; add --sim to simulate");
    }
    let report = simulate(&spec, config.clone())?;
    if args.check_determinism {
        let again = simulate(&spec, config)?;
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
    if let Some(path) = &args.json {
        let json = RunJson::from_sim(&report, spec.algo.name(), spec.op.name());
        let text = serde_json::to_string_pretty(&json)?;
        fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
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
    println!("  max rel. error    {:.3e}", report.max_rel_error);
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
