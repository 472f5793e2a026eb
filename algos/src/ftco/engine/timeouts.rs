//! Failure detection by timeouts (Alg. 4): per-peer timeouts, KEEPALIVE probes, and the two
//! timers that wake the rank when an ACK is overdue or a probe is due.

use crate::protocol::{Event, Outbox};
use crate::rank::Rank;
use crate::time::{Duration, Time};

use super::super::{Collective, FtcoKind};
use super::{Ftco, TIMER_ACK, TIMER_PROBE};

impl Ftco {
    /// f_timeout(me, x) in the current view.
    pub(super) fn timeout_for(&self, x: u32) -> Duration {
        let base = self.config.detect_timeout;
        if self.config.fixed_timeout {
            return base;
        }
        self.view
            .timeout_at_top(base, self.me, x, &self.dead, self.root_count)
    }

    /// Re-derives the root-set size and every peer's timeout after a death: a peer may have
    /// joined the root set, and the root set's members answer more ranks.
    pub(super) fn refresh_timeouts(&mut self) {
        if self.config.collective != Collective::Allreduce {
            return;
        }
        let roots = if self.at_top {
            self.up.len() as u32 + 1
        } else {
            self.view.root_set(&self.dead).len() as u32
        };
        self.root_count = roots;
        let timeouts: Vec<(u32, Duration)> = self
            .peers
            .keys()
            .map(|&x| (x, self.timeout_for(x)))
            .collect();
        for (x, timeout) in timeouts {
            if let Some(peer) = self.peers.get_mut(&x) {
                peer.timeout = timeout;
            }
        }
    }

    /// Ranks this rank waits for and when it expects them (f_ETA of the current phase).
    pub(super) fn probe_candidates(&self) -> Vec<(u32, Time)> {
        let c = &self.config;
        if self.result.is_some() {
            return Vec::new();
        }
        if self.has_up_phase() && !self.down_satisfied() {
            let eta = self
                .view
                .eta_subtree(self.start, c.costs, c.eta_slack, self.me);
            return self
                .down
                .iter()
                .filter(|&&y| !(self.arrived(y) || self.pieces.cover().contains(y)))
                .map(|&y| (y, eta))
                .collect();
        }
        let eta = if self.at_top && c.collective == Collective::Allreduce {
            self.view.eta_exchange(self.start, c.costs, c.eta_slack)
        } else if !self.at_top && c.collective != Collective::Reduce {
            self.view
                .eta_result(self.start, c.costs, c.eta_slack, self.me)
        } else {
            return Vec::new();
        };
        self.up
            .iter()
            .filter(|&&x| !self.arrived(x))
            .map(|&x| (x, eta))
            .collect()
    }

    /// Alg. 4. Returns whether it changed anything.
    pub(super) fn fault_tolerance(
        &mut self,
        service_distance: u32,
        now: Time,
        out: &mut Outbox,
    ) -> bool {
        // Skip failed ranks: an unacknowledged DATA or KEEPALIVE past its timeout.
        let expired = self
            .ack_timer_fired
            .then(|| {
                self.peers.iter().find_map(|(&x, p)| {
                    let late = p.last_sent.is_some_and(|t| now >= t.after(p.timeout));
                    (p.outstanding() && late && self.should_handle(x, service_distance))
                        .then_some(x)
                })
            })
            .flatten();
        if let Some(x) = expired {
            if self.peers.get(&x).is_some_and(|p| p.provisional) {
                // It said it is alive and has not started: ask again rather than bury it.
                self.peer(x).provisional = false;
                self.send_control(x, FtcoKind::KeepAlive, 0, out);
                self.peer(x).last_sent = Some(self.departure(now, out));
                return true;
            }
            if self.mark_dead(x) {
                out.emit(Event::Suspected { peer: Rank(x) });
                self.recompute_view(out);
            }
            return true;
        }
        // Answer pending DATA and KEEPALIVE (of every rank, not only Up and Down, so that a
        // rank that reached us past dead ranks does not take us for dead).
        let pending = self.peers.iter().find_map(|(&x, p)| {
            p.to_ack
                .filter(|_| self.should_handle(x, service_distance))
                .map(|seq| (x, seq))
        });
        if let Some((x, seq)) = pending {
            self.peer(x).to_ack = None;
            self.send_control(x, FtcoKind::Ack, u64::from(seq), out);
            return true;
        }
        // Probe suspected ranks once their expected arrival time has passed.
        let probe = self.probe_candidates().into_iter().find(|&(x, eta)| {
            let p = self.peers.get(&x);
            let idle = p.is_none_or(|p| {
                !p.outstanding() && p.last_sent.is_none_or(|t| now >= t.after(p.timeout))
            });
            now >= eta && idle && self.should_handle(x, service_distance)
        });
        if let Some((x, _)) = probe {
            self.send_control(x, FtcoKind::KeepAlive, 0, out);
            self.peer(x).last_sent = Some(self.departure(now, out));
            return true;
        }
        false
    }

    pub(super) fn arm_timers(&mut self, now: Time, quiet: bool) {
        let ack = self
            .peers
            .values()
            .filter(|p| p.outstanding())
            .filter_map(|p| p.last_sent.map(|t| t.after(p.timeout)))
            .min();
        match ack {
            Some(at) => self.timers.arm(TIMER_ACK, at),
            None => self.timers.disarm(TIMER_ACK),
        }
        let probe = if quiet {
            self.probe_candidates()
                .into_iter()
                .filter_map(|(x, eta)| match self.peers.get(&x) {
                    None => Some(eta),
                    Some(p) if p.outstanding() => None,
                    Some(p) => Some(p.last_sent.map_or(eta, |t| eta.max(t.after(p.timeout)))),
                })
                .min()
        } else {
            // The step budget ran out: continue at once.
            Some(now)
        };
        match probe {
            Some(at) => self.timers.arm(TIMER_PROBE, at),
            None => self.timers.disarm(TIMER_PROBE),
        }
    }
}
