//! Ranks that pass different vectors to one allreduce, as a buggy application does:
//!
//! ```sh
//! ftcoll-launch -n 4 -- ./target/release/examples/shapes 1000 3 length [ft]
//! ```
//!
//! With `ft` the calls are the fault-tolerant ring allreduce (`Communicator::ft_allreduce`).
//! Every rank passes `len` elements except rank `odd`, which passes one more (`length`) or the
//! same number of another type (`type`). Every rank must get `CommError::ShapeMismatch`, and
//! none may hang or return a result: a rank exits 0 only if it got the typed error, then runs
//! one correct allreduce to show the communicator still works.

use std::process::ExitCode;

use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{CommError, Communicator};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let len: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let odd: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let what = args.next().unwrap_or_else(|| "length".into());
    let ft = args.next().as_deref() == Some("ft");
    match run(len, odd, &what, ft) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shapes example: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(len: usize, odd: u32, what: &str, ft: bool) -> Result<(), CommError> {
    let mut comm = Communicator::from_env()?;
    let rank = comm.rank();
    let outcome = if rank == odd && what == "type" {
        let mut data = vec![1i64; len];
        if ft {
            comm.ft_allreduce(&mut data, ReduceOp::Sum)
        } else {
            comm.allreduce(&mut data, ReduceOp::Sum)
        }
    } else {
        let extra = usize::from(rank == odd && what == "length");
        let mut data = vec![1.0f64; len + extra];
        if ft {
            comm.ft_allreduce(&mut data, ReduceOp::Sum)
        } else {
            comm.allreduce(&mut data, ReduceOp::Sum)
        }
    };
    match outcome {
        Err(error @ CommError::ShapeMismatch { .. }) => println!("rank {rank}: {error}"),
        Err(other) => return Err(other),
        Ok(_) => {
            return Err(CommError::Config(format!(
                "rank {rank} returned a result from mismatched vectors"
            )))
        }
    }
    // The communicator is not poisoned: the next, well-formed call works.
    let mut data = vec![1.0f64; len];
    if ft {
        comm.ft_allreduce(&mut data, ReduceOp::Sum)?;
    } else {
        comm.allreduce(&mut data, ReduceOp::Sum)?;
    }
    if data.iter().any(|&x| x != f64::from(comm.size())) {
        return Err(CommError::Config(
            "the allreduce after the mismatch is wrong".into(),
        ));
    }
    comm.finish()
}
