//! Carrying out what protocols and services queued: their events, and their sends through
//! this rank's scripted faults onto the transport.

use std::time::{Duration, Instant};

use ftcoll_algos::protocol::{Event, Outbox};
use ftcoll_algos::Rank;

use super::{log_rejected, Endpoint, ExecError, OpStats, MAX_SUSPICIONS};
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

    /// Waits (bounded) until queued sends have left.
    pub(super) fn drain_sends(
        &mut self,
        deadline: Option<Instant>,
        limit: Duration,
    ) -> Result<(), ExecError> {
        if self.transport.progress()? == 0 {
            return Ok(());
        }
        let deadline = deadline.unwrap_or_else(|| Instant::now() + limit);
        let mut stats = OpStats::default();
        while self.transport.progress()? > 0 && Instant::now() < deadline {
            for world in self.absorb_failures() {
                self.notify_lingering(world, &mut stats)?;
                self.drained_notices.push(world);
            }
            self.transport.wait(Some(Duration::from_millis(1)))?;
        }
        Ok(())
    }
}
