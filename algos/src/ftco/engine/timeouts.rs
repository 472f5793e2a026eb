//! Failure detection by timeouts (Alg. 4): per-peer timeouts, KEEPALIVE probes, and the two
//! timers that wake the rank when an ACK is overdue or a probe is due.

use crate::protocol::{Event, Outbox};
use crate::rank::Rank;
use crate::time::{Duration, Time};

use super::super::view::View;
use super::super::{Collective, FtcoKind, LogP};
use super::{Ftco, TIMER_ACK, TIMER_PROBE};

impl Ftco {
    /// f_timeout(me, x) in the current view.
    pub(super) fn timeout_for(&self, x: u32) -> Duration {
        peer_timeout(self, x)
    }

    /// The time one vector takes to cross: LogGP's G times its size (zero in 004's model).
    pub(super) fn transfer(&self) -> Duration {
        let c = &self.config;
        Duration(c.costs.per_mib.0.saturating_mul(c.payload_bytes) >> 20)
    }

    /// The costs f_ETA and the send times assume: every message's overhead includes the
    /// transfer of a vector, which DATA carries and a control message may wait behind.
    pub(super) fn costs(&self) -> LogP {
        let c = self.config.costs;
        LogP {
            overhead: Duration(c.overhead.0.saturating_add(self.transfer().0)),
            ..c
        }
    }

    /// Re-derives the root-set size and every peer's timeout after a death: a peer may have
    /// joined the root set, and the root set's members answer more ranks.
    pub(super) fn refresh_timeouts(&mut self) {
        if self.config.collective != Collective::Allreduce {
            return;
        }
        // The root set: Up and this rank when it is a member, else the live frontier below
        // the tops. A live peer is a member exactly when it is in it.
        let tops = if self.at_top {
            let mut tops = self.up.clone();
            if let Err(at) = tops.binary_search(&self.me) {
                tops.insert(at, self.me);
            }
            tops
        } else {
            self.view.root_set(&self.dead)
        };
        self.root_count = tops.len() as u32;
        if self.config.fixed_timeout {
            return;
        }
        // In place, with each peer's distance as cached: after a cascade of deaths a rank of
        // the root set has hundreds of peers, and this runs at every death it learns of. A
        // live peer is at the top exactly when it is in the root set; a dead one (whose
        // ancestors may all be dead too) is walked up.
        let base = self.config.detect_timeout;
        let transfer = self.transfer();
        for (&x, peer) in self.peers.iter_mut() {
            let at_top = if self.dead.contains(x) {
                self.view.at_top(x, &self.dead)
            } else {
                tops.binary_search(&x).is_ok()
            };
            let allowance = transfer_allowance(&self.view, transfer, x, at_top, self.root_count);
            peer.timeout = Duration(
                self.view
                    .timeout_of(base, peer.distance, x, at_top, self.root_count)
                    .0
                    .saturating_add(allowance.0),
            );
        }
    }

    /// The ranks this rank waits for, all expected by one time (f_ETA of the current phase):
    /// `(eta, from_down)`, the ranks being those of Down (or Up) not heard from.
    fn probe_plan(&self) -> Option<(Time, bool)> {
        let c = &self.config;
        if self.result.is_some() {
            return None;
        }
        if self.has_up_phase() && !self.down_satisfied() {
            let eta = self
                .view
                .eta_subtree(self.start, self.costs(), c.eta_slack, self.me);
            return Some((eta, true));
        }
        let eta = if self.at_top && c.collective == Collective::Allreduce {
            self.view
                .eta_exchange(self.start, self.costs(), c.eta_slack)
        } else if !self.at_top && c.collective != Collective::Reduce {
            self.view
                .eta_result(self.start, self.costs(), c.eta_slack, self.me)
        } else {
            return None;
        };
        Some((eta, false))
    }

    /// The ranks of a probe plan, in the order they are probed.
    fn probe_ranks(&self, from_down: bool) -> impl Iterator<Item = u32> + '_ {
        let (set, down) = if from_down {
            (&self.down, true)
        } else {
            (&self.up, false)
        };
        set.iter()
            .copied()
            .filter(move |&y| !(self.arrived(y) || down && self.pieces.cover().contains(y)))
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
        let pending = self
            .acks_due
            .iter()
            .copied()
            .find(|&x| self.should_handle(x, service_distance))
            .and_then(|x| Some((x, self.peers.get(&x)?.to_ack?)));
        if let Some((x, seq)) = pending {
            self.peer(x).to_ack = None;
            self.acks_due.remove(&x);
            self.send_control(x, FtcoKind::Ack, u64::from(seq), out);
            return true;
        }
        // Probe suspected ranks once their expected arrival time has passed.
        // Every rank of a plan shares its f_ETA: before it, no rank is scanned.
        let probe = self
            .probe_plan()
            .filter(|&(eta, _)| now >= eta)
            .and_then(|(_, from_down)| {
                self.probe_ranks(from_down).find(|&x| {
                    let p = self.peers.get(&x);
                    let idle = p.is_none_or(|p| {
                        !p.outstanding() && p.last_sent.is_none_or(|t| now >= t.after(p.timeout))
                    });
                    idle && self.should_handle(x, service_distance)
                })
            });
        if let Some(x) = probe {
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
            self.probe_plan().and_then(|(eta, from_down)| {
                self.probe_ranks(from_down)
                    .filter_map(|x| match self.peers.get(&x) {
                        None => Some(eta),
                        Some(p) if p.outstanding() => None,
                        Some(p) => Some(p.last_sent.map_or(eta, |t| eta.max(t.after(p.timeout)))),
                    })
                    .min()
            })
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

/// f_timeout(me, x) in `ftco`'s current view (a free function, so that the peers can be
/// updated in place while the rest of the state is read).
fn peer_timeout(ftco: &Ftco, x: u32) -> Duration {
    let base = ftco.config.detect_timeout;
    let at_top = ftco.view.roots_are_peers() && ftco.view.at_top(x, &ftco.dead);
    let allowance = transfer_allowance(&ftco.view, ftco.transfer(), x, at_top, ftco.root_count);
    let timeout = if ftco.config.fixed_timeout {
        base
    } else {
        ftco.view
            .timeout_at_top(base, ftco.me, x, &ftco.dead, ftco.root_count)
    };
    Duration(timeout.0.saturating_add(allowance.0))
}

/// What a timeout towards `x` adds for the vectors `x` may move before it answers: one from
/// each of its neighbours (its degree) and its own, sent ahead of the answer on the same
/// link. Zero in 004's model, where a message's size costs nothing.
fn transfer_allowance(
    view: &View,
    transfer: Duration,
    x: u32,
    at_top: bool,
    roots: u32,
) -> Duration {
    let vectors = view.degree(x, at_top, roots).saturating_add(1);
    Duration(transfer.0.saturating_mul(vectors))
}
