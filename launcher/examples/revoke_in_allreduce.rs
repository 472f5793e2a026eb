//! A revocation reaching ranks in the middle of a collective, as ULFM's `MPI_Comm_revoke`
//! does: the way an application stops its peers without a failure.
//!
//! ```sh
//! cargo build --release -p ftcoll-launcher --example revoke_in_allreduce
//! ftcoll-launch -n 4 -- ./target/release/examples/revoke_in_allreduce
//! ```
//!
//! Every rank runs a few allreduces and one agreement; then rank 0 revokes the communicator
//! instead of joining the next allreduce. The others are inside it by then, waiting for rank
//! 0's part, and must leave it with `CommError::Revoked` at once rather than wait out their time
//! limit.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{CommError, Communicator};

/// Allreduces every rank completes before rank 0 revokes.
const BEFORE_REVOKE: u64 = 100;
/// How long rank 0 waits before it revokes: the others have entered the allreduce by then.
const REVOKE_DELAY: Duration = Duration::from_millis(200);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("revoke_in_allreduce: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), CommError> {
    let mut comm = Communicator::from_env()?;
    let (rank, size) = (comm.rank(), comm.size());
    for _ in 0..BEFORE_REVOKE {
        let mut data = [1.0];
        comm.allreduce_rdb(&mut data, ReduceOp::Sum)?;
        if data[0] != f64::from(size) {
            return Err(CommError::Config(format!("sum {} of {size} ones", data[0])));
        }
    }
    // Line every rank up: a revocation also ends the operations still pending, and a rank may
    // still be in the last allreduce when rank 0 has finished it. Agreements are not revoked.
    comm.agree(u64::MAX)?;
    if rank == 0 {
        std::thread::sleep(REVOKE_DELAY);
        comm.revoke()?;
        println!("rank 0 revoked the communicator");
    } else {
        let mut data = [1.0];
        let started = Instant::now();
        match comm.allreduce_rdb(&mut data, ReduceOp::Sum) {
            Err(CommError::Revoked) => println!(
                "rank {rank}: the allreduce ended with the revocation after {:?}",
                started.elapsed()
            ),
            Ok(_) => {
                return Err(CommError::Config(
                    "an allreduce without rank 0 completed".into(),
                ))
            }
            Err(other) => return Err(other),
        }
    }
    comm.finish()
}
