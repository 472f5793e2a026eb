//! Carrying out what protocols and services queued: their events, and their sends through
//! this rank's scripted faults onto the transport.

use std::time::{Duration, Instant};

use ftcoll_algos::protocol::{Event, Outbox, Protocol};
use ftcoll_algos::Rank;

use super::operation::OpDeadline;
use super::{log_rejected, Endpoint, ExecError, OpStats, MAX_SUSPICIONS, RECV_BATCH};
use crate::transport::Transport;

impl<T: Transport> Endpoint<T> {
    /// Carries out both outboxes: the protocols' (member indices) and the services' (world
    /// ranks).
    #[inline]
    pub(super) fn after_handle(&mut self, stats: &mut OpStats) -> Result<(), ExecError> {
        if !self.outbox.is_empty() {
            self.carry_out(false, stats)?;
        }
        if !self.services.outbox.is_empty() {
            self.carry_out(true, stats)?;
        }
        Ok(())
    }

    /// Carries out one outbox (the services' if `services`, whose sends address world ranks;
    /// otherwise the protocols', whose sends address member indices) and clears it.
    fn carry_out(&mut self, services: bool, stats: &mut OpStats) -> Result<(), ExecError> {
        let Endpoint {
            transport,
            epoch,
            failed,
            faults,
            outbox,
            services: service_state,
            group,
            scratch,
            sent_total,
            telemetry_on,
            suspicions,
            to_fence,
            ..
        } = self;
        let (outbox, members): (&mut Outbox, Option<&[u32]>) = if services {
            (&mut service_state.outbox, None)
        } else {
            (outbox, group.as_deref())
        };
        let elapsed = if faults.time_sensitive() {
            epoch.elapsed()
        } else {
            Duration::ZERO
        };
        for &event in outbox.events() {
            match event {
                Event::Rejected { from, error } => {
                    stats.rejected += 1;
                    log_rejected(from, error);
                }
                Event::Aborted(reason) if !services => {
                    stats.abort.get_or_insert(reason);
                }
                Event::Suspected { peer } => {
                    tracing::debug!(peer = peer.0, "the protocol took a silent peer for dead");
                    let world = match members {
                        Some(members) => members.get(peer.index()).copied().unwrap_or(peer.0),
                        None => peer.0,
                    };
                    if *telemetry_on && suspicions.len() < MAX_SUSPICIONS {
                        suspicions.push(world);
                    }
                    // Fail-stop: the launcher kills it; a protocol suspects each peer once.
                    if to_fence.len() < MAX_SUSPICIONS && !to_fence.contains(&world) {
                        to_fence.push(world);
                    }
                }
                _ => {}
            }
        }
        for i in 0..outbox.send_count() {
            let Some((to, frame)) = outbox.send_at(i) else {
                continue;
            };
            let to = match members {
                Some(members) => match members.get(to.index()) {
                    Some(&world) => Rank(world),
                    None => continue,
                },
                None => to,
            };
            stats.sent += 1;
            *sent_total += 1;
            if failed.contains(&to.0) {
                continue;
            }
            if let Some(bytes) = faults.outgoing(to, frame, elapsed, scratch) {
                transport.send(to, bytes)?;
            }
        }
        outbox.clear();
        Ok(())
    }

    /// Waits (bounded by the operation's deadline) until queued sends have left, receiving
    /// all the while. A peer may be draining towards this rank too: over TCP a frame larger
    /// than the sockets' buffers leaves only as the receiver reads it, so two ranks that both
    /// waited for their own sends without reading would wait for each other until the
    /// deadline (a 4 MB corrected broadcast at n = 4 did). Frames of the finished operation
    /// still reach it, later operations' are held and services' are served, as in its loop.
    ///
    /// It also stops once no frame has left for [`SendStall::PATIENCE`]: a receiver inside an
    /// operation reads its frames, so one that reads nothing for that long is computing, or
    /// has finished the job (a corrected broadcast's receiver leaves once it has the data,
    /// and the corrections still queued to it would otherwise hold this rank until the
    /// operation's deadline). The frames stay queued and leave during later calls.
    pub(super) fn drain_sends<P: Protocol>(
        &mut self,
        protocol: &mut P,
        op_id: u64,
        timed: bool,
        deadline: &mut OpDeadline,
        stats: &mut OpStats,
    ) -> Result<(), ExecError> {
        let queued = self.transport.progress()?;
        if queued == 0 {
            return Ok(());
        }
        let deadline = *deadline
            .at
            .get_or_insert_with(|| Instant::now() + deadline.limit);
        let mut stall = SendStall::new(queued);
        loop {
            let queued = self.transport.progress()?;
            let now = Instant::now();
            if queued == 0 || now >= deadline || stall.stalled(queued, now) {
                return Ok(());
            }
            for world in self.absorb_failures() {
                self.notify_lingering(world, stats)?;
                self.drained_notices.push(world);
            }
            let handled = self.receive::<P, RECV_BATCH>(protocol, op_id, true, timed, stats)?;
            if handled == 0 {
                self.transport.wait(Some(Duration::from_millis(1)))?;
            }
        }
    }
}

/// Whether queued sends have stopped leaving: no frame left for [`SendStall::PATIENCE`].
#[derive(Debug)]
pub(crate) struct SendStall {
    fewest: usize,
    since: Instant,
}

impl SendStall {
    /// How long a drain waits without a frame leaving. A frame as large as the wire allows
    /// (64 MiB) leaves a socket in well under this at loopback or network speeds.
    pub(crate) const PATIENCE: Duration = Duration::from_secs(2);

    /// Watching `queued` frames from now.
    pub(crate) fn new(queued: usize) -> SendStall {
        SendStall {
            fewest: queued,
            since: Instant::now(),
        }
    }

    /// True once the queue has not shrunk below its smallest size for the patience.
    pub(crate) fn stalled(&mut self, queued: usize, now: Instant) -> bool {
        if queued < self.fewest {
            self.fewest = queued;
            self.since = now;
        }
        now.saturating_duration_since(self.since) >= Self::PATIENCE
    }
}

#[cfg(test)]
mod stall_tests {
    use super::*;

    #[test]
    fn a_queue_that_shrinks_is_never_stalled_and_one_that_sits_is() {
        let start = Instant::now();
        let mut stall = SendStall::new(10);
        let later = |ms| start + Duration::from_millis(ms);
        assert!(!stall.stalled(10, later(1_000)));
        // A frame left: the patience starts again.
        assert!(!stall.stalled(9, later(1_900)));
        assert!(!stall.stalled(9, later(3_800)));
        assert!(stall.stalled(9, later(3_901)));
        // More queued (new sends) is no progress either.
        assert!(stall.stalled(12, later(4_000)));
    }
}
