//! The built-in job, as one rank runs it: draw a reproducible input, run the collective `ops`
//! times, report each outcome to the launcher.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use ftcoll_algos::corrected::{Correction, FailureInfo};
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{CommError, Communicator, CorrectedOptions, Outcome};
use ftcoll_runtime::control::OpReport;
use ftcoll_runtime::sim::{rank_inputs, InputKind};

/// Flags of the hidden `__rank` subcommand the launcher starts.
#[derive(Debug, Args, Clone)]
pub struct RankArgs {
    /// Algorithm.
    #[arg(long)]
    pub algo: String,
    /// Operator.
    #[arg(long)]
    pub op: String,
    /// Inputs.
    #[arg(long)]
    pub input: String,
    /// Elements per rank.
    #[arg(long)]
    pub len: usize,
    /// Seed.
    #[arg(long)]
    pub seed: u64,
    /// Operations.
    #[arg(long)]
    pub ops: u64,
    /// Failures the corrected-tree algorithms tolerate.
    #[arg(long, default_value_t = 1)]
    pub tolerate: u32,
    /// Failure information of corrected-reduce.
    #[arg(long, default_value = "count")]
    pub failure_info: String,
    /// Correction phase of the corrected broadcast.
    #[arg(long, default_value = "checked")]
    pub correction: String,
    /// Benchmark mode: untimed warm-up operations, then `ops` timed ones whose times are sent
    /// once at the end.
    #[arg(long)]
    pub bench_warmup: Option<u64>,
}

/// Runs one rank of the built-in job.
pub fn main(args: &RankArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("rank failed: {error}");
            ExitCode::from(3)
        }
    }
}

/// The collective the built-in job runs, from the launcher's flags.
#[derive(Clone, Copy, Debug)]
enum Collective {
    Rdb,
    CorrectedAllreduce(CorrectedOptions),
    CorrectedReduce(CorrectedOptions),
    CorrectedBcast(CorrectedOptions),
}

impl Collective {
    fn from_args(args: &RankArgs) -> Collective {
        // The launcher validated every flag before starting ranks.
        let options = CorrectedOptions {
            tolerate: args.tolerate,
            info: FailureInfo::parse(&args.failure_info).unwrap_or_default(),
            correction: crate::run::parse_correction(&args.correction)
                .unwrap_or(Correction::Checked),
        };
        match args.algo.as_str() {
            "corrected-allreduce" => Collective::CorrectedAllreduce(options),
            "corrected-reduce" => Collective::CorrectedReduce(options),
            "corrected-bcast" => Collective::CorrectedBcast(options),
            _ => Collective::Rdb,
        }
    }

    /// Runs it once; `Ok(true)` when this rank holds a result to report.
    fn run(
        self,
        comm: &mut Communicator,
        data: &mut [f64],
        op: ReduceOp,
    ) -> Result<(Outcome, bool), CommError> {
        let root_only = comm.rank() == 0;
        match self {
            Collective::Rdb => Ok((comm.allreduce(data, op)?, true)),
            Collective::CorrectedAllreduce(o) => Ok((comm.corrected_allreduce(data, op, o)?, true)),
            Collective::CorrectedReduce(o) => {
                Ok((comm.corrected_reduce(data, op, 0, o)?, root_only))
            }
            Collective::CorrectedBcast(o) => Ok((comm.corrected_bcast(data, 0, o)?, true)),
        }
    }
}

fn run(args: &RankArgs) -> Result<(), CommError> {
    let mut comm = Communicator::from_env()?;
    let op = ReduceOp::parse(&args.op).unwrap_or(ReduceOp::Sum);
    let input = InputKind::parse(&args.input).unwrap_or(InputKind::Uniform);
    let mine = rank_inputs(input, comm.rank(), args.len, args.seed);
    let collective = Collective::from_args(args);
    if let Some(warmup) = args.bench_warmup {
        return bench(comm, collective, &mine, op, warmup, args.ops);
    }
    for index in 0..args.ops {
        let mut data = mine.clone();
        let started = Instant::now();
        let result = collective.run(&mut comm, &mut data, op);
        let nanos = started.elapsed().as_nanos() as u64;
        let (ok, messages, has_value) = match &result {
            Ok((outcome, has_value)) => (true, outcome.messages, *has_value),
            Err(_) => (false, 0, false),
        };
        comm.report(OpReport {
            op: index,
            ok,
            value: if has_value { data } else { Vec::new() },
            failed: comm.failed_ranks(),
            nanos,
            messages,
        })?;
        match result {
            Ok(_) => {}
            // The job's verdict is in the report; a failed collective ends this rank's loop.
            Err(CommError::PeerFailed { .. }) | Err(CommError::TimedOut(_)) => break,
            Err(other) => return Err(other),
        }
    }
    comm.finish()
}

/// The benchmark loop: per-operation times kept locally and reported once.
fn bench(
    mut comm: Communicator,
    collective: Collective,
    input: &[f64],
    op: ReduceOp,
    warmup: u64,
    ops: u64,
) -> Result<(), CommError> {
    let mut data = input.to_vec();
    for _ in 0..warmup {
        data.copy_from_slice(input);
        collective.run(&mut comm, &mut data, op)?;
    }
    let mut nanos = Vec::with_capacity(ops as usize);
    for _ in 0..ops {
        data.copy_from_slice(input);
        let started = Instant::now();
        collective.run(&mut comm, &mut data, op)?;
        nanos.push(started.elapsed().as_nanos() as u64);
    }
    comm.report_timings(nanos)?;
    comm.finish()
}
