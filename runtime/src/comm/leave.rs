//! Leaving the job.

use std::time::{Duration, Instant};

use ftcoll_algos::ReduceOp;

use super::{CommError, Communicator};
use crate::exec::SendStall;
use crate::transport::Transport;

/// Longest a leaving rank keeps serving finished operations that owe peers answers.
const LINGER_AT_EXIT: Duration = Duration::from_secs(5);
/// How long a leaving rank answers late requests of its flushing agreement.
const FLUSH_LINGER: Duration = Duration::from_millis(50);

impl Communicator {
    /// Leaves the job: reports this rank's memory footprint and flushes sends.
    pub fn finish(mut self) -> Result<(), CommError> {
        // Also after operations that stay reachable once finished (FTCO's probes): they are
        // served until the flush shows every survivor returned from them.
        let flush =
            self.agreements > 0 || self.ft_rings > 0 || self.endpoint().keeps_finished_reachable();
        if flush {
            // 002 Sec. 3: a flushing agreement before leaving, so that every survivor has
            // returned from every earlier agreement and nobody will ask this rank for one.
            match self.agree_with(&[], ReduceOp::BitOr) {
                Ok(_) | Err(CommError::UnacknowledgedFailure { .. }) => {}
                Err(error) => tracing::warn!(%error, "flushing agreement failed"),
            }
            // Answer stragglers of the flush itself for a moment (a peer whose parent died
            // during it re-sends its contribution here).
            let epoch = self.epoch;
            let linger = Instant::now() + FLUSH_LINGER;
            self.wait_era(epoch, FLUSH_LINGER, |_| Instant::now() >= linger)?;
            // Every survivor has returned from every earlier operation: finished operations
            // kept only to answer late requests (the fault-tolerant ring's agreements) are
            // done; those still correcting towards a peer stay.
            self.endpoint().forget_settled_lingering();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        // Neighbours may still be correcting towards this rank; answer them before leaving.
        let serve_until = Instant::now() + self.op_timeout.min(LINGER_AT_EXIT);
        self.endpoint().serve_lingering(self.ops + 1, serve_until)?;
        // Receiving all the while: a peer may be sending to this rank a frame that leaves it
        // only as this rank reads, while waiting for its own sends in turn. A peer that reads
        // nothing for a while has left the job itself (see `SendStall`).
        let mut stall: Option<SendStall> = None;
        loop {
            let queued = self.endpoint().transport.progress()?;
            let now = Instant::now();
            let stall = stall.get_or_insert_with(|| SendStall::new(queued));
            if queued == 0 || now >= deadline || stall.stalled(queued, now) {
                break;
            }
            if !self.endpoint().serve_between_operations()? {
                self.endpoint()
                    .transport
                    .wait(Some(Duration::from_millis(1)))?;
            }
        }
        self.control.finished(own_pss_kb())?;
        Ok(())
    }
}

/// This process's proportional set size in KiB (shared pages divided among their users).
pub fn own_pss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}
