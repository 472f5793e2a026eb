//! PCF after a permanent link failure: settling a cancellation the failure left half done.
//!
//! A cancellation completes in two steps: one end cancels its passive flow when it sees the
//! pair agree on it, the other end when the first one's next push shows it cancelled. Between
//! the two, the mass of that flow is cancelled mass at one end and a live flow at the other. A
//! failed link drops the live flows and keeps the cancelled mass (that is how PCF avoids PF's
//! fall-back, 003 Fig. 7), so a failure in between leaves the flow's mass counted at one end
//! only: a permanent error, up to 1.9e-4 on 64 ranks. Neither end can tell alone whether the
//! other cancelled (the two generals' problem), so after a link failure each end tells the
//! other its role-change count `r` over the links that still work, relayed hop by hop along a
//! shortest path that avoids the failed link. Counts differ by at most one (an end cancels at
//! `r` only when the other is at `r` too); the end that is one ahead undoes its last
//! cancellation, which leaves both where the slower one stopped. Until it has the other end's
//! count a rank holds its stopping rule, so no rank stops on the unsettled mass; if the count
//! never comes (the network split), the push budget runs out and the call fails loudly.
//!
//! Wire: a `Settle` frame has no payload; its `aux` holds the failed link's ends, the sending
//! end (`origin`) in the high half and the end it goes to (`target`) in the low half, its
//! `step` the origin's count, and flag bit 0 marks an answer (the target answers every
//! request, since an answer may be lost; answers are not answered).

use crate::protocol::{Event, Outbox};
use crate::rank::Rank;
use crate::time::Time;
use crate::values::ValuesRef;
use crate::wire::{Frame, FrameError, FrameHeader};

use super::engine::Gossip;
use super::mass::sub_into;
use super::real::Real;
use super::GossipKind;

/// Flag bit of a settle frame that answers a request.
const FLAG_ANSWER: u16 = 1;
/// The flags above this bit count the hops a settle frame made.
const HOPS_SHIFT: u16 = 1;
/// Most hops a settle frame makes: each relay picks a shortest path in its own view, and views
/// differ where links failed, so a frame could circle; a path this long is one that does.
const MAX_SETTLE_HOPS: u16 = 1 << 12;

/// One failed link's settlement at this end.
#[derive(Clone, Debug)]
pub(super) struct Settlement<T> {
    /// The rank at the other end of the failed link.
    pub(super) peer: u32,
    /// This end's role-change count when the link failed (it cannot change after).
    pub(super) round: u32,
    /// The mass this end cancelled last with `peer`: what it undoes if it is one ahead.
    pub(super) last_cancelled: Vec<T>,
    /// The other end's count, once it came.
    pub(super) theirs: Option<u32>,
}

/// A settle frame on its way: from `origin` (the end whose count `round` it carries) to
/// `target`, the other end of the failed link.
#[derive(Clone, Copy, Debug)]
struct Relay {
    origin: u32,
    target: u32,
    round: u32,
    answer: bool,
    /// Hops made so far.
    hops: u16,
    /// The neighbour it came from, if relayed.
    came_from: Option<u32>,
}

impl Relay {
    /// A frame that `origin` sends.
    fn start(origin: u32, target: u32, round: u32, answer: bool) -> Relay {
        Relay {
            origin,
            target,
            round,
            answer,
            hops: 0,
            came_from: None,
        }
    }
}

impl<T: Real> Gossip<T> {
    /// Whether every other rank of the group is excluded (dead, or behind a failed link), or
    /// there is none: nothing can change this rank's estimate any more.
    pub(super) fn alone(&self) -> bool {
        let me = self.config.rank.0;
        let others_excluded = self.excluded.iter().filter(|&&r| r != me).count();
        others_excluded + 1 >= self.config.size() as usize
    }

    /// Opens the settlement of the link to `peer`, which just failed: this end's count and the
    /// mass it cancelled last. Called before the link's flows are dropped.
    pub(super) fn open_settlement(&mut self, peer: Rank) {
        if self.settlements.iter().any(|s| s.peer == peer.0) {
            return;
        }
        let width = self.layout.width();
        let round = self.flows.get_mut(peer).map_or(0, |(_, tag)| tag.round);
        let last_cancelled = self
            .last_cancelled
            .get(peer)
            .map_or_else(|| vec![T::ZERO; width], <[T]>::to_vec);
        self.last_cancelled.remove(peer);
        // One per neighbour at most: bounded by the degree.
        self.settlements.push(Settlement {
            peer: peer.0,
            round,
            last_cancelled,
            theirs: None,
        });
    }

    /// Forgets the settlement with `peer`: it crashed, and everything exchanged with it goes.
    pub(super) fn drop_settlement(&mut self, peer: Rank) {
        self.settlements.retain(|s| s.peer != peer.0);
    }

    /// Whether a settlement still waits for the other end's count.
    pub(super) fn settling(&self) -> bool {
        self.settlements.iter().any(|s| s.theirs.is_none())
    }

    /// At each push while settling: holds the stopping rule and asks again (a request or its
    /// answer may have met another failed link, or a rank that left).
    pub(super) fn settle_tick(&mut self, out: &mut Outbox) {
        if !self.settling() {
            return;
        }
        self.hold_stop();
        let me = self.config.rank.0;
        let asks: Vec<(u32, u32)> = self
            .settlements
            .iter()
            .filter(|s| s.theirs.is_none())
            .map(|s| (s.peer, s.round))
            .collect();
        for (peer, round) in asks {
            self.forward_settle(Relay::start(me, peer, round, false), out);
        }
    }

    /// A settle frame arrived (already checked to come from a live neighbour of this
    /// operation): relays it, or takes the count and answers a request addressed to this rank.
    pub(super) fn on_settle(&mut self, now: Time, from: Rank, frame: &Frame<'_>, out: &mut Outbox) {
        let h = &frame.header;
        let (origin, target) = ((h.aux >> 32) as u32, h.aux as u32);
        let n = self.config.size();
        let answer = h.flags & FLAG_ANSWER != 0;
        let hops = h.flags >> HOPS_SHIFT;
        let valid = origin < n
            && target < n
            && origin != target
            && frame.payload.is_empty()
            && (self.config.schedule.is_permutation()
                || self
                    .config
                    .topology
                    .are_neighbours(Rank(origin), Rank(target)));
        if !valid {
            self.counters.frames_rejected += 1;
            out.emit(Event::Rejected {
                from,
                error: FrameError::Unexpected {
                    from: from.0,
                    what: "malformed settle frame",
                },
            });
            return;
        }
        self.counters.messages_received += 1;
        if target != self.config.rank.0 {
            if hops < MAX_SETTLE_HOPS.min(u16::try_from(n).unwrap_or(u16::MAX)) {
                let relay = Relay {
                    origin,
                    target,
                    round: h.step,
                    answer,
                    hops: hops + 1,
                    came_from: Some(from.0),
                };
                self.forward_settle(relay, out);
            }
            return;
        }
        // The other end knows the link failed: this end takes it as failed too (it may not
        // have noticed the silence yet), which fixes its count.
        if !self.is_excluded(Rank(origin)) {
            self.on_link_failed(now, Rank(origin));
        }
        let Some(at) = self.settlements.iter().position(|s| s.peer == origin) else {
            // The other end crashed meanwhile, or this rank was told so: nothing to settle.
            return;
        };
        let mine = self.settlements[at].round;
        if !answer {
            let me = self.config.rank.0;
            self.forward_settle(Relay::start(me, origin, mine, true), out);
        }
        if self.settlements[at].theirs.is_some() {
            return;
        }
        self.settlements[at].theirs = Some(h.step);
        if mine > h.step {
            // This end cancelled once more than the other: undo that cancellation, as if the
            // flow had still been live when the link failed and had been dropped with it.
            let undo = std::mem::take(&mut self.settlements[at].last_cancelled);
            sub_into(&mut self.phi, &undo);
            sub_into(&mut self.retired, &undo);
            if let Some((kept, _)) = self.retired_by.get_mut(Rank(origin)) {
                sub_into(kept, &undo);
            }
            if let Some(rule) = self.config.stop {
                self.stop.unsettle(&rule);
            }
            self.keep_trusted_ratio();
        }
    }

    /// Sends a settle frame one hop on towards its target. Lost when no path is left that this
    /// rank knows of.
    fn forward_settle(&mut self, relay: Relay, out: &mut Outbox) {
        let Relay {
            origin,
            target,
            round,
            answer,
            hops,
            came_from,
        } = relay;
        let link = (origin.min(target), origin.max(target));
        let Some(next) = self.next_hop(target, link, came_from) else {
            return;
        };
        let header = FrameHeader::new(
            self.config.algo_id(),
            GossipKind::Settle as u8,
            self.config.op_id,
            self.config.rank,
            round,
        )
        .with_aux((u64::from(origin) << 32) | u64::from(target))
        .with_flags(u16::from(answer) | (hops << HOPS_SHIFT));
        self.counters.messages_sent += 1;
        out.send(next, header, ValuesRef::Empty);
    }

    /// The neighbour to forward to on a shortest path from this rank to `to` that avoids the
    /// failed `link`, the links this rank excluded and the way back to `came_from` (no frame
    /// bounces between two relays whose views differ); breadth-first over the topology, at
    /// most every rank once, run only for settle frames, which follow link failures.
    fn next_hop(&self, to: u32, link: (u32, u32), came_from: Option<u32>) -> Option<Rank> {
        let me = self.config.rank.0;
        let n = self.config.size();
        let usable_at_me = |x: u32| !self.is_excluded(Rank(x)) && Some(x) != came_from;
        let usable = |a: u32, b: u32| {
            (a.min(b), a.max(b)) != link
                && (a != me || usable_at_me(b))
                && (b != me || usable_at_me(a))
        };
        if self.config.schedule.is_permutation() {
            // Any rank is a neighbour: straight to `to`, or through the first usable rank.
            if usable(me, to) {
                return Some(Rank(to));
            }
            return (1..n)
                .map(|k| (me + k) % n)
                .find(|&r| r != to && usable(me, r) && usable(r, to))
                .map(Rank);
        }
        let topology = self.config.topology;
        // Breadth-first from `to`, so the first neighbour of this rank reached is one hop on a
        // shortest path.
        let mut seen = vec![false; n as usize];
        let mut queue = std::collections::VecDeque::with_capacity(n as usize);
        seen[to as usize] = true;
        queue.push_back(to);
        while let Some(at) = queue.pop_front() {
            for next in topology.neighbours(Rank(at)) {
                let b = next.0;
                if seen[b as usize] || !usable(at, b) {
                    continue;
                }
                if b == me {
                    return Some(Rank(at));
                }
                seen[b as usize] = true;
                queue.push_back(b);
            }
        }
        None
    }
}
