//! The built-in job, as one rank runs it: draw a reproducible input, run the collective `ops`
//! times, report each outcome to the launcher.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{CommError, Communicator};
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

fn run(args: &RankArgs) -> Result<(), CommError> {
    let mut comm = Communicator::from_env()?;
    let op = ReduceOp::parse(&args.op).unwrap_or(ReduceOp::Sum);
    let input = InputKind::parse(&args.input).unwrap_or(InputKind::Uniform);
    let mine = rank_inputs(input, comm.rank(), args.len, args.seed);
    if let Some(warmup) = args.bench_warmup {
        return bench(comm, &mine, op, warmup, args.ops);
    }
    for index in 0..args.ops {
        let mut data = mine.clone();
        let started = Instant::now();
        let result = comm.allreduce(&mut data, op);
        let nanos = started.elapsed().as_nanos() as u64;
        let (ok, messages) = match &result {
            Ok(outcome) => (true, outcome.messages),
            Err(_) => (false, 0),
        };
        comm.report(OpReport {
            op: index,
            ok,
            value: if ok { data } else { Vec::new() },
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
    input: &[f64],
    op: ReduceOp,
    warmup: u64,
    ops: u64,
) -> Result<(), CommError> {
    let mut data = input.to_vec();
    for _ in 0..warmup {
        data.copy_from_slice(input);
        comm.allreduce(&mut data, op)?;
    }
    let mut nanos = Vec::with_capacity(ops as usize);
    for _ in 0..ops {
        data.copy_from_slice(input);
        let started = Instant::now();
        comm.allreduce(&mut data, op)?;
        nanos.push(started.elapsed().as_nanos() as u64);
    }
    comm.report_timings(nanos)?;
    comm.finish()
}
