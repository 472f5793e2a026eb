//! Serving between operations: failure notices, services' frames, finished operations that
//! still owe answers, and holding the frames of the next operation until it starts.

use std::time::{Duration, Instant};

use ftcoll_algos::protocol::{Input, Outbox, Phase, Protocol};
use ftcoll_algos::Time;

use super::{Endpoint, ExecError, OpStats, RECV_BATCH};
use crate::transport::Transport;

impl<T: Transport> Endpoint<T> {
    /// One pass without waiting, between operations: failure notices, arrivals (services'
    /// frames reach their services, others are held for their operation) and sends. True if
    /// anything happened. The agreement progress thread calls this while the application
    /// computes.
    pub fn serve_between_operations(&mut self) -> Result<bool, ExecError> {
        self.serve_once(&mut OpStats::default())
    }

    /// [`Endpoint::serve_between_operations`], counting into `stats`.
    pub(super) fn serve_once(&mut self, stats: &mut OpStats) -> Result<bool, ExecError> {
        let mut progressed = false;
        for rank in self.absorb_failures() {
            self.notify_lingering(rank, stats)?;
            progressed = true;
        }
        self.after_handle(stats)?;
        let next = self.next_op_id;
        progressed |=
            self.receive::<_, RECV_BATCH>(&mut BetweenOperations, next, false, true, stats)? > 0;
        progressed |= self.fire_lingering_timers(stats)?;
        self.transport.progress()?;
        Ok(progressed)
    }

    /// Serves unsettled finished operations until they settle or `deadline` passes; a rank
    /// calls it before leaving the job, so that neighbours still correcting towards it hear back.
    pub fn serve_lingering(&mut self, next_op_id: u64, deadline: Instant) -> Result<(), ExecError> {
        let mut stats = OpStats::default();
        // Each turn waits at most a millisecond; the deadline bounds the loop.
        while !self.lingering.is_empty() && Instant::now() < deadline {
            for rank in self.absorb_failures() {
                self.notify_lingering(rank, &mut stats)?;
            }
            let next = next_op_id.max(self.next_op_id);
            let handled = self.receive::<_, RECV_BATCH>(
                &mut BetweenOperations,
                next,
                false,
                true,
                &mut stats,
            )?;
            let fired = self.fire_lingering_timers(&mut stats)?;
            self.transport.progress()?;
            if handled == 0 && !fired {
                self.transport.wait(Some(Duration::from_millis(1)))?;
            }
        }
        Ok(())
    }
}

/// Stands for "no operation running" while finished operations are served: `receive` never
/// hands it a frame (those of the next operation are held as early frames, as usual).
struct BetweenOperations;

impl Protocol for BetweenOperations {
    fn handle(&mut self, _now: Time, _input: Input<'_>, _out: &mut Outbox) {}

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
    }

    fn phase(&self) -> Phase {
        Phase::Idle
    }

    fn status(&self) -> ftcoll_algos::RankStatus {
        ftcoll_algos::RankStatus::default()
    }
}
