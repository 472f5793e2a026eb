//! An agreement answered by a rank that has returned from it and is computing (002's early
//! return): the case the agreement progress thread exists for.
//!
//! ```sh
//! ftcoll-launch -n 4 --heartbeat-ms 100 --suspect-ms 1000 --fault stop:rank=1,at=100ms \
//!     -- ./target/release/examples/agree_progress DIR
//! ```
//!
//! Four ranks on the binary agreement tree: 0 is the root, 1 and 2 its children, 3 the child
//! of 1. Ranks 1, 2 and 3 agree at once, so rank 1's contribution (holding rank 3's) reaches
//! the root; then the launcher stops rank 1 (SIGSTOP). The root starts late, decides, returns
//! and computes: it makes no library call until rank 3 has the decision. Rank 3 waits for the
//! decision from rank 1, which never comes. When rank 1 is found dead (killed for its silence),
//! rank 3 asks the root. Only the root's progress thread can answer while the root computes.
//! Rank 3 says it is done by creating `DIR/rank3.done`. The root gives up after 30 s and fails.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ftcoll_runtime::comm::{CommError, Communicator};

/// How long the root computes at most, waiting for rank 3's decision.
const COMPUTE_LIMIT: Duration = Duration::from_secs(30);
/// How late the root starts its agreement: after rank 1 has passed its contribution up and
/// been stopped (at 100 ms), before rank 1 is found dead (about a second later).
const ROOT_START: Duration = Duration::from_millis(400);

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: agree_progress DIR (a directory the ranks share)");
        return ExitCode::from(2);
    };
    match run(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("agree_progress: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Agrees once; a decision that reports an unacknowledged failure is still the decision.
fn agree_once(comm: &mut Communicator) -> Result<u64, CommError> {
    match comm.agree(u64::MAX) {
        Ok(value) => Ok(value),
        Err(CommError::UnacknowledgedFailure { agreed, .. }) => Ok(agreed),
        Err(other) => Err(other),
    }
}

fn run(dir: &Path) -> Result<(), CommError> {
    let mut comm = Communicator::from_env()?;
    let rank = comm.rank();
    if comm.size() != 4 {
        return Err(CommError::Config("run it with -n 4".into()));
    }
    let done = dir.join("rank3.done");
    if rank == 0 {
        std::thread::sleep(ROOT_START);
        let value = agree_once(&mut comm)?;
        // Compute: no library call until rank 3 has the decision.
        let started = Instant::now();
        while !done.exists() {
            if started.elapsed() > COMPUTE_LIMIT {
                return Err(CommError::Config(format!(
                    "rank 3 got no decision in {COMPUTE_LIMIT:?} while rank 0 computed"
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        println!(
            "rank 0: decided {value:#x}; rank 3 got the decision {} ms into rank 0's computation",
            started.elapsed().as_millis()
        );
    } else {
        let value = agree_once(&mut comm)?;
        if rank == 3 {
            std::fs::write(&done, format!("{value:#x}\n"))
                .map_err(|e| CommError::Config(format!("cannot write {}: {e}", done.display())))?;
            println!("rank 3: decided {value:#x}");
        }
    }
    comm.ack_failed();
    comm.finish()
}
