//! Frames from peers: decoding them into [`Inbound`] messages and handling each kind (Alg. 3,
//! and the DATA / KEEPALIVE / ACK handling of Alg. 2).

use crate::protocol::{Event, Outbox, Phase};
use crate::rank::Rank;
use crate::time::Time;
use crate::values::Dtype;
use crate::wire::{Frame, FrameError};

use super::super::pieces::{slice_values, Absorbed, Piece};
use super::super::ranges::Contributors;
use super::super::{Collective, FtcoKind, FLAG_DEAD_SET, FLAG_MORE, FLAG_PROVISIONAL, FLAG_RESULT};
use super::{Body, Ftco, Inbound};

impl Ftco {
    /// Structural checks of a frame; the value shape is checked when the message is handled.
    pub(super) fn decode(&self, from: Rank, frame: &Frame<'_>) -> Result<Inbound, FrameError> {
        let algo = self.config.collective.algo();
        frame.check(algo, self.config.op_id)?;
        let h = frame.header;
        let kind =
            FtcoKind::from_u8(h.kind).ok_or(FrameError::UnknownKind { algo, kind: h.kind })?;
        let n = self.view.tree.size();
        let bad = |what| FrameError::Unexpected { from: from.0, what };
        if h.source != from.0 || from.0 >= n || from.0 == self.me {
            return Err(bad("sender is not a peer in this group"));
        }
        let body = match kind {
            FtcoKind::Data => {
                if h.flags & !(FLAG_RESULT | FLAG_DEAD_SET | FLAG_MORE) != 0 {
                    return Err(bad("unknown flags"));
                }
                let result = h.flags & FLAG_RESULT != 0;
                let more = h.flags & FLAG_MORE != 0;
                if result && h.flags & (FLAG_DEAD_SET | FLAG_MORE) != 0 {
                    return Err(bad("a result with a dead set or in parts"));
                }
                let count = usize::try_from(h.aux).unwrap_or(usize::MAX);
                if count == 0 || count > n as usize || (result && count != 1) {
                    return Err(bad("bad piece count"));
                }
                let values = frame.values()?;
                if values.dtype() == Dtype::RankIds || values.len() % count != 0 {
                    return Err(bad("values do not split into the announced pieces"));
                }
                let len = values.len() / count;
                let mut words = frame.trailer()?;
                let mut pieces = Vec::with_capacity(count);
                for i in 0..count {
                    let (contributors, rest) = Contributors::decode(words, n)
                        .map_err(|_| bad("malformed contributor set"))?;
                    words = rest;
                    pieces.push(Piece {
                        contributors,
                        value: slice_values(values, i * len, len),
                    });
                }
                let seen_dead = if h.flags & FLAG_DEAD_SET == 0 {
                    None
                } else if let Some((0, rest)) = words.split_first() {
                    // No range: the sender knew no rank dead.
                    words = rest;
                    Some(Contributors::new())
                } else {
                    let (dead, rest) =
                        Contributors::decode(words, n).map_err(|_| bad("malformed dead set"))?;
                    words = rest;
                    Some(dead)
                };
                if !words.is_empty() {
                    return Err(bad("trailing contributor words"));
                }
                Body::Data {
                    result,
                    more,
                    pieces,
                    seen_dead,
                }
            }
            FtcoKind::KeepAlive | FtcoKind::Ack => {
                if !frame.payload.is_empty() || !frame.trailer.is_empty() {
                    return Err(bad("control message with a payload"));
                }
                match kind {
                    FtcoKind::Ack => Body::Ack {
                        seq: u32::try_from(h.aux).map_err(|_| bad("ACK sequence out of range"))?,
                        provisional: h.flags & FLAG_PROVISIONAL != 0,
                    },
                    _ => Body::KeepAlive,
                }
            }
        };
        Ok(Inbound {
            from: from.0,
            seq: h.step,
            body,
        })
    }

    pub(super) fn on_message(&mut self, now: Time, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let inbound = self.decode(from, &frame).and_then(|m| {
            if self.queue.len() >= self.config.max_queue {
                Err(FrameError::Unexpected {
                    from: from.0,
                    what: "inbound queue full",
                })
            } else {
                Ok(m)
            }
        });
        match inbound {
            Ok(message) => {
                self.counters.messages_received += 1;
                self.queue.push_back(message);
                if self.phase != Phase::Done {
                    self.queue_peak = self.queue_peak.max(self.queue.len());
                }
                self.advance(now, out);
            }
            Err(error) => {
                self.counters.frames_rejected += 1;
                out.emit(Event::Rejected { from, error });
            }
        }
    }

    pub(super) fn handle_inbound(&mut self, message: Inbound, now: Time, out: &mut Outbox) {
        let Inbound { from, seq, body } = message;
        if matches!(body, Body::Data { .. } | Body::KeepAlive) {
            self.heard_from(from);
        }
        match body {
            Body::Data {
                result,
                more,
                pieces,
                seen_dead,
            } => {
                if !self.shape_ok(&pieces) {
                    self.reject(from, "value shape differs from the local input", out);
                    return;
                }
                if !result && self.late_from_dead_descendant(from) {
                    return;
                }
                self.learn_from_contact(from, out);
                if !self.dead.contains(from) {
                    self.owe_ack(from, seq);
                }
                // A DATA in parts has arrived with its last part.
                if !more {
                    self.peer(from).arrived = true;
                }
                if result {
                    if self.result.is_none() {
                        self.result = pieces.into_iter().next();
                        // Peer roots compute the result themselves from each other's DATA. A
                        // top rank handed the result by a peer root (it joined late, or the
                        // exchange was disrupted) will never send its own DATA now, so the
                        // peer roots it has not sent DATA to yet get the result instead: they
                        // may be waiting for this rank. Those it has sent DATA to compute it.
                        self.final_peers = if self.at_top {
                            let has_ours = |x: &u32| {
                                *x == from || self.peers.get(x).is_some_and(|p| p.known.sent_any())
                            };
                            self.up.iter().copied().filter(has_ours).collect()
                        } else {
                            self.up.clone()
                        };
                        self.rebuild_result_targets();
                        if self.shape.is_none() {
                            self.shape = self
                                .result
                                .as_ref()
                                .map(|p| (p.value.dtype(), p.value.len()));
                        }
                    }
                    return;
                }
                let descendant = self.view.is_ancestor(self.me, from);
                let mut taken = Contributors::new();
                let mut received = Vec::with_capacity(pieces.len());
                for piece in pieces {
                    let contributors = piece.contributors.clone();
                    if self.pieces.absorb(piece, !descendant) == Absorbed::Conflict {
                        self.conflicts += 1;
                    } else if contributors.contains(from) {
                        // The sender's own subtree: the piece only it sends.
                        taken.union_with(&contributors);
                    }
                    received.push(contributors);
                }
                self.peer(from).known.add_received(&received);
                if let Some(seen_dead) = seen_dead {
                    self.owe_relays(from, &seen_dead, &taken);
                }
                self.adopt_descendant(from, descendant, out);
            }
            Body::KeepAlive => {
                self.learn_from_contact(from, out);
                if !self.dead.contains(from) {
                    self.owe_ack(from, seq);
                }
                let descendant = self.view.is_ancestor(self.me, from);
                self.adopt_descendant(from, descendant, out);
            }
            Body::Ack {
                seq,
                provisional: true,
            } => {
                // Alive but not started: wait one more timeout before asking again.
                let peer = self.peer(from);
                if seq <= peer.seq_sent && peer.outstanding() {
                    peer.provisional = true;
                    peer.last_sent = Some(now);
                }
            }
            Body::Ack { seq, .. } => {
                let peer = self.peer(from);
                peer.provisional = false;
                if peer.last_data_seq > 0 && seq >= peer.last_data_seq && seq <= peer.seq_sent {
                    // It took our last DATA, so it is alive: the probes sent since need no
                    // answer of their own (one sent before it started may never get one).
                    peer.seq_acked = peer.seq_sent;
                } else if seq > peer.seq_acked && seq <= peer.seq_sent {
                    peer.seq_acked = seq;
                }
            }
        }
    }

    /// DATA from a descendant a failure notice reported dead, arriving after this rank sent
    /// its subtree up: the news of the death overtook the DATA. Taking it would make a supplement to what
    /// went up, which peer roots that already fixed their result would never see, while others
    /// would. The descendant's own children re-send to this rank what they gave it, so only the
    /// dead rank's own input is lost, as Definition 3.2 allows. DATA from a dead peer root is
    /// still taken: it went to every peer root at once. So is DATA from a rank only suspected
    /// by a timeout: its arrival shows the suspicion was false, and leaving a live rank's
    /// input out would break Definition 3.2 for it.
    pub(super) fn late_from_dead_descendant(&self, from: u32) -> bool {
        self.noticed.contains(from)
            && self.view.is_ancestor(self.me, from)
            && self
                .up
                .iter()
                .any(|x| self.peers.get(x).is_some_and(|p| p.known.sent_any()))
    }

    /// Peer root `from` sent its own piece, `taken`, to the root set it derives from
    /// `seen_dead`. Members of ours outside that set (children of a root it did not know dead)
    /// did not get it, and `from` may die before its own timeout on that root sends it to them:
    /// this rank passes `taken` on to them with its next DATA (see [`Ftco::needs_subtree`]).
    /// Only the sender's own piece: the peer pieces it forwards reach us from their senders, and
    /// relaying those as well flooded the root set under heavy loss. Only a top rank that has
    /// not fixed its result sends peer DATA, so only it owes relays.
    pub(super) fn owe_relays(&mut self, from: u32, seen_dead: &Contributors, taken: &Contributors) {
        if !self.at_top || self.result.is_some() || taken.is_empty() {
            return;
        }
        // A sender that knows every death we know sent to each of our members (or knows it
        // dead, and then it is).
        if self.dead_ranges.is_subset_of(seen_dead) {
            return;
        }
        // A member is in the sender's root set when the sender knows all its ancestors dead.
        let view = self.view;
        let unknown_ancestor = |y: u32| {
            let mut at = y;
            // Each step goes up one level: bounded by the tree's height.
            while let Some(p) = view.parent(at) {
                if !seen_dead.contains(p) {
                    return true;
                }
                at = p;
            }
            false
        };
        let missed: Vec<u32> = self
            .up
            .iter()
            .copied()
            .filter(|&y| y != from && !seen_dead.contains(y) && unknown_ancestor(y))
            .collect();
        for y in missed {
            self.peer(y).known.add_relay(taken);
        }
    }

    /// DATA or KEEPALIVE from `x` shows it alive and in the operation: our KEEPALIVEs to it
    /// need no answer of their own, and an earlier provisional answer is out of date. (A
    /// late starter that was probed before it started is otherwise probed once more and must
    /// answer within one timeout, which a busy rank may not.) Our unacknowledged DATA still
    /// waits for its ACK: only that says `x` took it.
    pub(super) fn heard_from(&mut self, x: u32) {
        if let Some(peer) = self.peers.get_mut(&x) {
            peer.provisional = false;
            if peer.last_data_seq <= peer.seq_acked {
                peer.seq_acked = peer.seq_sent;
            }
        }
    }

    /// A descendant that reached us but is not in Down joins Down (it waits for our result).
    pub(super) fn adopt_descendant(&mut self, from: u32, descendant: bool, out: &mut Outbox) {
        if descendant && !self.down.contains(&from) && !self.dead.contains(from) {
            self.extra_down.insert(from);
            self.recompute_view(out);
        }
    }

    /// A DATA or KEEPALIVE from `s` that skips tree neighbours tells that those are dead: `s`
    /// detected them (or it would not have contacted us).
    pub(super) fn learn_from_contact(&mut self, s: u32, out: &mut Outbox) {
        let mut skipped = Vec::new();
        if self.view.is_ancestor(self.me, s) {
            self.view.ancestors_below(s, Some(self.me), &mut skipped);
        } else if self.view.is_ancestor(s, self.me) {
            self.view.ancestors_below(self.me, Some(s), &mut skipped);
        } else if self.config.collective == Collective::Allreduce {
            self.view.ancestors_below(s, None, &mut skipped);
            self.view.ancestors_below(self.me, None, &mut skipped);
        }
        let mut changed = false;
        for r in skipped {
            if r != s {
                changed |= self.mark_dead(r);
            }
        }
        if changed {
            self.recompute_view(out);
        }
    }

    pub(super) fn reject(&mut self, from: u32, what: &'static str, out: &mut Outbox) {
        self.counters.frames_rejected += 1;
        out.emit(Event::Rejected {
            from: Rank(from),
            error: FrameError::Unexpected { from, what },
        });
    }

    pub(super) fn shape_ok(&self, pieces: &[Piece]) -> bool {
        match self.shape {
            None => true,
            Some((dtype, len)) => pieces
                .iter()
                .all(|p| p.value.dtype() == dtype && p.value.len() == len),
        }
    }
}
