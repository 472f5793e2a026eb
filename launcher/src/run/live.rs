//! Real runs of the launcher: the built-in job (set up from the flags, run, judged) and user
//! programs.

use std::fs;

use anyhow::{bail, Context};
use ftcoll_algos::chain::ChainMode;
use ftcoll_algos::ftco::Collective;
use ftcoll_algos::values::Dtype;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::faults::FaultSpec;
use ftcoll_runtime::job::{Algorithm, JobSpec, Kind};
use ftcoll_runtime::sim::InputKind;
use ftcoll_runtime::transport::TransportKind;

use super::{
    cluster_options, console_job, data_from_args, ftco_options, gossip_options, gossip_rank_args,
    job_from_args, launch_options, parse_faults, transport_flag_error, LIVE_DETECT_TIMEOUT,
};
use crate::cli::RunArgs;
use crate::cluster::Cluster;
use crate::live::{BuiltinJob, Expected, LiveOutcome, LiveSpec};

/// The built-in job on real ranks as the flags describe it: how to start it, and what its
/// results are checked against.
pub struct BuiltinRun {
    /// The ranks, their program and faults.
    pub spec: LiveSpec,
    /// What their reports must show.
    pub job: BuiltinJob,
}

/// What the flags ask of real ranks: the built-in job, or a user program (already run).
enum LiveJob {
    Builtin(Box<BuiltinRun>, ReduceOp, InputKind),
    Program,
}

/// Checks the flags of a real run and sets the job up (a user program is run right away).
fn live_job(args: &RunArgs, console: bool) -> anyhow::Result<LiveJob> {
    if args.n == 0 {
        bail!("a job needs at least one rank; pass -n N with N >= 1");
    }
    let cluster = Cluster::detect(&cluster_options(args))?;
    let transport = ftcoll_runtime::transport::choose(&args.transport, cluster.is_none())
        .map_err(transport_flag_error)?;
    let faults = parse_faults(args)?;
    // Rank-side faults are checked here too, at rank 0 and at every rank a fault names, so a
    // bad unit fails before anything starts (a rank refuses only the faults that concern it).
    for rank in ranks_named(&faults, args.n) {
        ftcoll_runtime::rank_faults::RankFaults::for_rank(&faults, ftcoll_algos::Rank(rank), 0)?;
    }
    if let Some((program, program_args)) = args.program.split_first() {
        run_program(args, program, program_args, transport, faults, cluster)?;
        return Ok(LiveJob::Program);
    }
    let algo = args.algo();
    let is_gossip = algo.gossip_rule().is_some();
    if !algo.descriptor().runs.real {
        bail!("{algo} runs in the simulator only (--sim)");
    }
    if algo == Algorithm::Ardb {
        match args.steps {
            None => bail!(
                "ardb on real ranks stops after a budget of exchanges, as no rank can tell its \
                 accuracy: pass --steps K (1 to log2 N; the simulator's oracle stops it by --eps)"
            ),
            Some(0) => bail!("--steps 0: ardb needs at least one exchange"),
            Some(_) => {}
        }
    }
    if is_gossip && args.stop != "oracle" && args.stop != "rule" {
        bail!("unknown --stop '{}'; use oracle or rule", args.stop);
    }
    // A bad FTCO flag fails here, before any rank starts.
    ftco_options(args, false)?;
    // The same validation as a simulated job: a bad --tolerate fails before anything starts.
    job_from_args(args)?;
    let (op, input) = if algo == Algorithm::EraAgree {
        // Each rank reports how many ranks its decision names as contributors: every rank
        // contributes one, so the check is a sum of ones over the survivors plus any subset of
        // the failed ranks, the same at every rank.
        (
            ftcoll_algos::ReduceOp::Sum,
            ftcoll_runtime::sim::InputKind::Ones,
        )
    } else {
        data_from_args(args)?
    };
    check_dtype(args, algo, op)?;
    check_whole_vector(args, algo, transport)?;
    if cluster.is_none() {
        let vector = (args.len as u64).saturating_mul(args.dtype.elem_bytes() as u64);
        crate::memory::ensure_fits(
            &format!(
                "--len {} of {} on {} ranks",
                args.len,
                args.dtype.name(),
                args.n
            ),
            u64::from(args.n),
            vector,
            crate::memory::available_bytes(),
            "lower --len or -n, or spread the ranks over nodes (docs/clusters.md)",
        )?;
    }
    let spec = builtin_spec(args, transport, faults, console, cluster)?;
    let job = builtin_job(args, op, input);
    Ok(LiveJob::Builtin(
        Box::new(BuiltinRun { spec, job }),
        op,
        input,
    ))
}

/// The built-in job the flags describe, checked and set up, for a caller that runs it itself
/// (the soak); a user program is refused.
pub fn builtin_run(args: &RunArgs) -> anyhow::Result<BuiltinRun> {
    if !args.program.is_empty() {
        bail!("this command runs the built-in job; drop the program after --");
    }
    match live_job(args, false)? {
        LiveJob::Builtin(run, ..) => Ok(*run),
        LiveJob::Program => bail!("this command runs the built-in job"),
    }
}

/// Why a finished built-in job must exit non-zero, if it must: it timed out, a result is
/// wrong, inconsistent or not within eps, or operations did not complete at every survivor.
pub fn builtin_failure(outcome: &LiveOutcome, report: &crate::live::LiveJson) -> Option<String> {
    if outcome.timed_out {
        return Some("the job timed out".into());
    }
    // Both may hold (a rank that gave up and another whose lone estimate is off): say both,
    // rather than whichever the timing made come first.
    match (report.wrong(), report.failed_ops()) {
        (Some(wrong), Some(failed)) => Some(format!(
            "the job's result is wrong: {wrong}; and the job failed: {failed}"
        )),
        (Some(wrong), None) => Some(format!("the job's result is wrong: {wrong}")),
        (None, Some(failed)) => Some(format!("the job failed: {failed}")),
        (None, None) => None,
    }
}

/// A job on real rank processes, watched by the console if `console`.
pub(super) fn run_live(args: &RunArgs, console: bool) -> anyhow::Result<()> {
    let (run, op, input) = match live_job(args, console)? {
        LiveJob::Builtin(run, op, input) => (run, op, input),
        LiveJob::Program => return Ok(()),
    };
    if console {
        let (info, inputs) = console_job(args, &run.spec, op, input);
        return crate::console::live::run(&run.spec, info, inputs);
    }
    let outcome = crate::live::run(&run.spec)?;
    let report = outcome.builtin_report(&run.job);
    outcome.print_builtin(&report);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    }
    match builtin_failure(&outcome, &report) {
        Some(why) => bail!("{why}"),
        None => Ok(()),
    }
}

/// A user program (after `--`) started on N ranks.
fn run_program(
    args: &RunArgs,
    program: &str,
    program_args: &[String],
    transport: TransportKind,
    faults: Vec<FaultSpec>,
    cluster: Option<Cluster>,
) -> anyhow::Result<()> {
    let spec = LiveSpec {
        launch: launch_options(args),
        program: program.to_string(),
        program_args: program_args.to_vec(),
        builtin: false,
        transport,
        faults,
        cluster,
    };
    let outcome = crate::live::run(&spec)?;
    println!(
        "{} ranks of {} ({}): wall {:.3} s, launch + wire-up {}",
        args.n,
        program,
        transport,
        outcome.wall_s,
        outcome
            .wireup_s
            .map_or("incomplete".into(), |w| format!("{w:.3} s"))
    );
    outcome.print_failures();
    if outcome.timed_out {
        bail!(
            "the job did not finish within --timeout-s {} ({} of {} ranks failed); raise --timeout-s or look for a rank that waits forever",
            args.timeout_s,
            outcome.failures.len(),
            args.n
        );
    }
    if !outcome.failures.is_empty() {
        bail!("{} of {} ranks failed", outcome.failures.len(), args.n);
    }
    Ok(())
}

/// Rank 0 and the ranks below `n` that `faults` name, ascending, each once.
fn ranks_named(faults: &[FaultSpec], n: u32) -> Vec<u32> {
    let mut ranks: Vec<u32> = faults
        .iter()
        .flat_map(|spec| match *spec {
            FaultSpec::Kill { rank, .. }
            | FaultSpec::FlipMessage { rank, .. }
            | FaultSpec::FlipState { rank, .. }
            | FaultSpec::Slow { rank, .. }
            | FaultSpec::Stop { rank, .. } => vec![rank.0],
            FaultSpec::FlipRate { rank, .. } | FaultSpec::Drop { rank, .. } => {
                rank.map(|r| r.0).into_iter().collect()
            }
            FaultSpec::Cut { a, b, .. } => vec![a.0, b.0],
            FaultSpec::KillNode { .. } | FaultSpec::Spread(_) => Vec::new(),
        })
        .chain(std::iter::once(0))
        .filter(|&rank| rank < n)
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks
}

/// Whether `--len` fits an algorithm that carries its vector in one frame (the fault-tolerant
/// ones), on shared memory or TCP; checked before any rank starts, as each rank would refuse.
fn check_whole_vector(
    args: &RunArgs,
    algo: Algorithm,
    transport: TransportKind,
) -> anyhow::Result<()> {
    if algo.descriptor().payload.segmented || algo.kind() == Kind::Agreement {
        return Ok(());
    }
    let frame = match transport {
        TransportKind::Shm => {
            let lane = std::env::var("FTCOLL_SHM_LANE_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| ftcoll_runtime::transport::shm::default_lane_bytes(args.n));
            ftcoll_runtime::transport::shm::ring::max_frame_bytes(lane as usize)
        }
        TransportKind::Tcp => ftcoll_runtime::transport::network_max_frame_bytes(),
        // UCX and libfabric report their limit in the rank; it refuses with a typed error.
        _ => return Ok(()),
    };
    let slack = ftcoll_algos::wire::HEADER_BYTES
        + ftcoll_runtime::comm::whole_vector_trailer_bytes(args.n)
        + 8;
    let most = frame.saturating_sub(slack) / 8;
    if args.len > most {
        let instead = match algo.kind() {
            Kind::Corrected(Collective::Allreduce) => {
                "ft-corrected (the same trees, any length) or ft-ring"
            }
            _ => "ft-ring (fault-tolerant, any length)",
        };
        bail!(
            "{algo} carries its vector in one frame: at most {most} elements over {transport} with {} ranks, not --len {}; lower --len, or use --algo {instead} or rdb, direct or ring",
            args.n,
            args.len
        );
    }
    Ok(())
}

/// Whether `--dtype` suits the algorithm and the operator.
fn check_dtype(args: &RunArgs, algo: Algorithm, op: ReduceOp) -> anyhow::Result<()> {
    let dtype = args.dtype;
    if algo.kind() == Kind::Agreement && dtype == Dtype::F64 {
        // The job builds the agreement's words itself; its report is a count.
        return Ok(());
    }
    if !algo.descriptor().payload.elements.contains(&dtype) {
        bail!(
            "{algo} reduces {} vectors; use --dtype {} or --algo rdb, direct or ring",
            algo.descriptor().payload.elements[0].name(),
            algo.descriptor().payload.elements[0].name()
        );
    }
    if !op.applies_to(dtype) {
        bail!(
            "--op {} does not apply to {} vectors; pick another --op or --dtype",
            op.name(),
            dtype.name()
        );
    }
    Ok(())
}

/// What the built-in job's ranks should report, for checking their answers.
fn builtin_job(args: &RunArgs, op: ReduceOp, input: InputKind) -> BuiltinJob {
    let algo = args.algo();
    let is_gossip = algo.gossip_rule().is_some();
    BuiltinJob {
        algo: if args.library_pick {
            "allreduce (library pick)".to_string()
        } else {
            args.algo().name().to_string()
        },
        op,
        input,
        len: if algo == Algorithm::EraAgree {
            1
        } else {
            args.len
        },
        dtype: args.dtype,
        seed: args.seed,
        ops: args.ops,
        rounds: match algo.kind() {
            Kind::RecursiveDoubling { approximate } => {
                let shape = ftcoll_algos::rdb::RdbShape::new(args.n);
                // ARDB stops after its budget of exchanges; folding in and out stays.
                let skipped = match args.steps {
                    Some(budget) if approximate => shape.exchanges.saturating_sub(budget),
                    _ => 0,
                };
                shape.rounds() - skipped
            }
            _ => 1,
        },
        expected: match algo.kind() {
            Kind::Corrected(Collective::Bcast)
            | Kind::Ftco(Collective::Bcast)
            | Kind::Chain(ChainMode::Bcast) => Expected::RootInput,
            Kind::Corrected(_)
            | Kind::Ftco(_)
            | Kind::Agreement
            | Kind::FtRing
            | Kind::FtCorrected => Expected::SurvivorsAggregate,
            // ARDB's estimates differ from rank to rank (each has averaged its own 2^k
            // inputs): each must be within eps, as a gossip estimate.
            Kind::Gossip { .. } | Kind::RecursiveDoubling { approximate: true } => {
                Expected::Survivors
            }
            Kind::RecursiveDoubling { approximate: false }
            | Kind::Direct
            | Kind::Ring
            | Kind::HalvingDoubling
            | Kind::Chain(ChainMode::Reduce) => Expected::Aggregate,
        },
        eps: (is_gossip || algo == Algorithm::Ardb).then(|| {
            let mut spec = JobSpec::new(algo, args.n);
            spec.eps = args.eps;
            spec.gossip.single = gossip_options(args).ok().and_then(|o| o.single);
            spec.gossip_eps()
        }),
        // 002's agreement is non-uniform; every other collective promises its result to every
        // rank that returns, whether or not it dies later.
        uniform: algo.kind() != Kind::Agreement,
    }
}

/// The built-in job on real ranks: this program, started N times in rank mode with the flags'
/// algorithm and options (`--paced` under the console).
fn builtin_spec(
    args: &RunArgs,
    transport: ftcoll_runtime::transport::TransportKind,
    faults: Vec<FaultSpec>,
    console: bool,
    cluster: Option<Cluster>,
) -> anyhow::Result<LiveSpec> {
    let exe = std::env::current_exe().context("cannot find this program to start ranks")?;
    Ok(LiveSpec {
        cluster,
        launch: launch_options(args),
        program: exe.to_string_lossy().into_owned(),
        program_args: vec![
            "__rank".into(),
            "--algo".into(),
            args.algo().name().to_string(),
            "--op".into(),
            args.op.clone(),
            "--input".into(),
            args.input.clone(),
            "--len".into(),
            args.len.to_string(),
            "--dtype".into(),
            args.dtype.name().to_string(),
            "--seed".into(),
            args.seed.to_string(),
            "--ops".into(),
            args.ops.to_string(),
            "--tolerate".into(),
            args.tolerate.unwrap_or(1).to_string(),
            "--failure-info".into(),
            args.failure_info.clone().unwrap_or_else(|| "count".into()),
            "--correction".into(),
            args.correction.clone(),
            "--ftco-tree".into(),
            args.ftco_tree.clone(),
            "--ftco-roots".into(),
            args.ftco_roots.to_string(),
            "--detect-timeout".into(),
            args.detect_timeout
                .clone()
                .unwrap_or_else(|| LIVE_DETECT_TIMEOUT.into()),
            "--service-distance".into(),
            args.service_distance.clone(),
        ]
        .into_iter()
        .chain(args.ftco_notices.then(|| "--ftco-notices".to_string()))
        .chain(
            args.ftco_fixed_timeout
                .then(|| "--ftco-fixed-timeout".to_string()),
        )
        .chain(console.then(|| "--paced".to_string()))
        .chain(args.out_of_place.then(|| "--out-of-place".to_string()))
        .chain(args.library_pick.then(|| "--library-pick".to_string()))
        .chain(gossip_rank_args(args))
        .collect(),
        builtin: true,
        transport,
        faults,
    })
}
