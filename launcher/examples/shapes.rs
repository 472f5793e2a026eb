//! Ranks that pass different vectors to one allreduce, as a buggy application does:
//!
//! ```sh
//! ftcoll-launch -n 4 -- ./target/release/examples/shapes 1000 3 length [pick|ft|rhd]
//! ```
//!
//! With `ft` the calls are the fault-tolerant ring allreduce (`Communicator::ft_allreduce`),
//! with `rhd` recursive halving and doubling (`Communicator::allreduce_rhd`), otherwise the
//! library's pick (`Communicator::allreduce`).
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
    let call = match args.next().as_deref() {
        Some("ft") => Call::Ft,
        Some("rhd") => Call::Rhd,
        _ => Call::Pick,
    };
    match run(len, odd, &what, call) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shapes example: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Which allreduce the example calls.
#[derive(Clone, Copy)]
enum Call {
    Pick,
    Ft,
    Rhd,
}

impl Call {
    fn allreduce<T: ftcoll_algos::values::Element>(
        self,
        comm: &mut Communicator,
        data: &mut [T],
    ) -> Result<ftcoll_runtime::comm::Outcome, CommError> {
        match self {
            Call::Pick => comm.allreduce(data, ReduceOp::Sum),
            Call::Ft => comm.ft_allreduce(data, ReduceOp::Sum),
            Call::Rhd => comm.allreduce_rhd(data, ReduceOp::Sum),
        }
    }
}

fn run(len: usize, odd: u32, what: &str, call: Call) -> Result<(), CommError> {
    let mut comm = Communicator::from_env()?;
    let rank = comm.rank();
    let outcome = if rank == odd && what == "type" {
        call.allreduce(&mut comm, &mut vec![1i64; len])
    } else {
        let extra = usize::from(rank == odd && what == "length");
        call.allreduce(&mut comm, &mut vec![1.0f64; len + extra])
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
    call.allreduce(&mut comm, &mut data)?;
    if data.iter().any(|&x| x != f64::from(comm.size())) {
        return Err(CommError::Config(
            "the allreduce after the mismatch is wrong".into(),
        ));
    }
    comm.finish()
}
