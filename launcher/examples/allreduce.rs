//! A user program under `ftcoll-launch`, the way an MPI program runs under `mpirun`:
//!
//! ```sh
//! cargo build --release -p ftcoll-launcher --example allreduce
//! ftcoll-launch -n 8 -- ./target/release/examples/allreduce 100
//! ```
//!
//! Each rank contributes its rank id; every rank checks the sum N(N-1)/2 each iteration and
//! reports failures the way a fault-aware application would.

use std::process::ExitCode;

use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{CommError, Communicator};

fn main() -> ExitCode {
    let iterations: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    match run(iterations) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("allreduce example: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(iterations: u64) -> Result<(), CommError> {
    let mut comm = Communicator::from_env()?;
    let (rank, size) = (comm.rank(), comm.size());
    let expected = f64::from(size) * f64::from(size - 1) / 2.0;
    for iteration in 0..iterations {
        let mut data = [f64::from(rank), 1.0];
        let started = std::time::Instant::now();
        let outcome = comm.allreduce(&mut data, ReduceOp::Sum)?;
        if data != [expected, f64::from(size)] {
            eprintln!(
                "rank {rank}: iteration {iteration} gave {data:?}, expected [{expected}, {size}]"
            );
            return Err(CommError::PeerFailed {
                failed: comm.failed_ranks(),
            });
        }
        if rank == 0 && iteration + 1 == iterations {
            println!(
                "rank 0 of {size}: {iterations} allreduces, sum {} each, last took {:?} ({} messages, excluded {:?})",
                data[0],
                started.elapsed(),
                outcome.messages,
                outcome.excluded
            );
        }
    }
    comm.finish()
}
