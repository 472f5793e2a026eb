//! The receive side: posted buffers of two size classes, per-source reordering by sequence
//! number, and frames ready for [`Transport::poll_recv`](crate::Transport).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ftcoll_algos::Rank;

use super::fabric::Domain;
use super::mr::Buffer;
use super::ops::{Refused, Status};
use super::peer::Peer;
use super::tag::{TagLayout, SMALL_FRAME_BYTES};
use super::{max_frame_bytes, OfiTransport};
use crate::TransportError;

/// Receive buffers of [`SMALL_FRAME_BYTES`] posted at all times (2 MiB).
const SMALL_RECVS: usize = 32;
/// Small receive buffers posted with libfabric's `shm` provider. Version 1.17 of it silently
/// drops tagged frames that arrive unexpected (no receive posted) once about as many are
/// pending as receives are posted: with 32 posted, a burst of 100 frames to a rank that is not
/// polling delivers 64 and the sender sees every send complete. Posting many more receives
/// moves that point to bursts of about 1,800 frames at one rank. Their memory is
/// mapped lazily, so only the pages frames touch become resident (one page for most frames).
const SHM_SMALL_RECVS: usize = 1000;
/// Receive buffers of the maximum frame size posted at all times. Their memory is mapped
/// lazily, so only the pages large frames touch become resident (unless the provider pins
/// registered memory).
const LARGE_RECVS: usize = 2;

/// How many receive buffers of each class `provider` gets.
pub(super) fn recv_counts(provider: &str) -> (usize, usize) {
    let small = if loses_frames(provider) {
        SHM_SMALL_RECVS
    } else {
        SMALL_RECVS
    };
    (small, LARGE_RECVS)
}

/// Buffers `poll_recv` may leave for the next pump to re-post (out of [`SMALL_RECVS`] or more).
pub(super) const MAX_DEFERRED_REPOSTS: usize = 4;

/// A frame ready for the handler.
enum Ready {
    /// In the buffer it arrived in (re-posted after the handler ran).
    InPlace {
        source: Rank,
        buffer: Buffer,
        len: usize,
    },
    /// Copied out because it arrived ahead of an earlier frame from the same source.
    Copied {
        source: Rank,
        words: Vec<u64>,
        len: usize,
    },
}

/// Per-source ordering state.
#[derive(Default)]
struct Link {
    /// Sequence number of the next frame to deliver.
    expected: u64,
    /// Frames that completed before `expected`, by sequence number: small frames overtake a
    /// large one still in flight (the provider completes the small eager sends at once).
    ahead: BTreeMap<u64, (Vec<u64>, usize)>,
    /// Since when frames have been held ahead, on a provider that can lose frames.
    gap_since: Option<Instant>,
}

/// On a provider that can lose frames (see [`recv_counts`]), a frame missing while more than
/// this many later ones arrived...
const MAX_AHEAD: usize = 1024;
/// ... for this long is lost: on one machine even the largest frame takes milliseconds.
const MAX_GAP: Duration = Duration::from_secs(1);

/// Whether `provider` can lose frames (see [`SHM_SMALL_RECVS`]).
pub(super) fn loses_frames(provider: &str) -> bool {
    provider == "shm"
}

/// A frame the provider lost: its link's source, its sequence number, the frames held after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lost {
    pub(super) source: Rank,
    pub(super) seq: u64,
    pub(super) ahead: usize,
}

/// The receive side (see the module docs).
pub(super) struct RecvSide {
    layout: TagLayout,
    links: BTreeMap<Rank, Link>,
    ready: VecDeque<Ready>,
    /// Buffers not posted: new, handed back after delivery, or refused by the provider.
    idle: Vec<Buffer>,
    /// Gaps are checked for loss (the provider can lose frames).
    detect_loss: bool,
    /// The first frame found lost, not yet reported.
    lost: Option<Lost>,
}

impl RecvSide {
    /// Allocates and registers the receive buffers (posted by [`OfiTransport::repost_receives`]).
    pub(super) fn new(
        domain: &Arc<Domain>,
        layout: TagLayout,
        (small, large): (usize, usize),
        detect_loss: bool,
    ) -> Result<RecvSide, TransportError> {
        let mut idle = Vec::with_capacity(small + large);
        for _ in 0..large {
            idle.push(Buffer::new(domain, max_frame_bytes())?);
        }
        for _ in 0..small {
            idle.push(Buffer::new(domain, SMALL_FRAME_BYTES)?);
        }
        Ok(RecvSide {
            layout,
            links: BTreeMap::new(),
            ready: VecDeque::new(),
            idle,
            detect_loss,
            lost: None,
        })
    }

    /// Buffers handed back and not posted again yet.
    pub(super) fn idle_buffers(&self) -> usize {
        self.idle.len()
    }

    /// The first frame found lost since the last call, if any.
    pub(super) fn take_lost(&mut self) -> Option<Lost> {
        self.lost.take()
    }

    /// Whether frames wait for the handler.
    pub(super) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Files a completed receive: ready if it is next on its link, held if it is ahead.
    #[inline(always)]
    fn arrived(
        &mut self,
        buffer: Buffer,
        tag: u64,
        len: usize,
        status: Status,
        size: u32,
        peers: &BTreeMap<Rank, Peer>,
    ) {
        match status {
            Status::Done => {}
            Status::Cancelled => {
                self.idle.push(buffer);
                return;
            }
            Status::Failed(code, why) => {
                // The error entry's tag is not the frame's (rxm copies it from its message
                // provider's entry: 0 over tcp), so it names no link: using up a sequence
                // number by it would make a live link discard its real frame as a duplicate.
                // The frame is lost with its connection, in practice with a sender that died,
                // whose link is dropped once it is reported failed.
                tracing::warn!(code, %why, "a receive failed; its frame is lost");
                self.idle.push(buffer);
                return;
            }
        }
        let tag = self.layout.decode(tag);
        let source = tag.source;
        let known = source.0 < size
            && len <= buffer.capacity()
            && tag.large == (buffer.capacity() > SMALL_FRAME_BYTES);
        if !known || peers.get(&source).is_some_and(Peer::is_failed) {
            if !known {
                tracing::warn!(
                    source = source.0,
                    len,
                    "discarded a frame with an impossible tag"
                );
            }
            self.idle.push(buffer);
            return;
        }
        let link = self.links.entry(source).or_default();
        match self.layout.ahead(tag.seq, link.expected) {
            Some(0) => {
                link.expected = self.layout.wrap(link.expected + 1);
                self.ready.push_back(Ready::InPlace {
                    source,
                    buffer,
                    len,
                });
                while let Some((words, len)) = link.ahead.remove(&link.expected) {
                    link.expected = self.layout.wrap(link.expected + 1);
                    self.ready.push_back(Ready::Copied { source, words, len });
                }
                if link.ahead.is_empty() {
                    link.gap_since = None;
                }
            }
            Some(_) => {
                let mut words = vec![0u64; len.div_ceil(8)];
                bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..len]
                    .copy_from_slice(&buffer.bytes()[..len]);
                link.ahead.insert(tag.seq, (words, len));
                self.idle.push(buffer);
                if !self.detect_loss {
                    return;
                }
                let since = *link.gap_since.get_or_insert_with(Instant::now);
                if link.ahead.len() > MAX_AHEAD && since.elapsed() >= MAX_GAP {
                    // Nothing will fill the gap: stop holding the link's frames and report
                    // the loss once.
                    self.lost.get_or_insert(Lost {
                        source,
                        seq: link.expected,
                        ahead: link.ahead.len(),
                    });
                    link.ahead.clear();
                }
            }
            None => {
                tracing::warn!(
                    source = source.0,
                    seq = tag.seq,
                    expected = link.expected,
                    "discarded a stale or duplicate frame"
                );
                self.idle.push(buffer);
            }
        }
    }

    /// Hands up to `max` ready frames to `handler`, skipping those of failed peers.
    #[inline]
    pub(super) fn deliver(
        &mut self,
        max: usize,
        peers: &BTreeMap<Rank, Peer>,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> usize {
        // Called on every poll; most find nothing ready.
        if self.ready.is_empty() {
            return 0;
        }
        self.deliver_ready(max, peers, handler)
    }

    fn deliver_ready(
        &mut self,
        max: usize,
        peers: &BTreeMap<Rank, Peer>,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> usize {
        let mut handled = 0;
        while handled < max {
            let Some(ready) = self.ready.pop_front() else {
                break;
            };
            let (Ready::InPlace { source, .. } | Ready::Copied { source, .. }) = &ready;
            let skip = peers.get(source).is_some_and(Peer::is_failed);
            match ready {
                Ready::InPlace {
                    source,
                    buffer,
                    len,
                } => {
                    if !skip {
                        handler(source, &buffer.bytes()[..len]);
                        handled += 1;
                    }
                    self.idle.push(buffer);
                }
                Ready::Copied { source, words, len } => {
                    if !skip {
                        let bytes: &[u8] = bytemuck::cast_slice(&words);
                        handler(source, &bytes[..len]);
                        handled += 1;
                    }
                }
            }
        }
        handled
    }

    /// Per link: source, next expected sequence number, frames held ahead (for test reports).
    #[cfg(test)]
    pub(super) fn links(&self) -> Vec<(u32, u64, usize)> {
        self.links
            .iter()
            .map(|(r, l)| (r.0, l.expected, l.ahead.len()))
            .collect()
    }

    /// Drops what is held for `peer` (its frames are no longer wanted).
    pub(super) fn forget(&mut self, peer: Rank) {
        self.links.remove(&peer);
    }
}

impl OfiTransport {
    /// Posts every idle receive buffer the provider takes. A refusal of one class does not
    /// stop the other: posting small buffers is what drains the unexpected messages that can
    /// make a provider refuse large ones.
    #[inline]
    pub(super) fn repost_receives(&mut self) -> Result<(), TransportError> {
        // Called on every poll; most find nothing to post.
        if self.rx.idle.is_empty() {
            return Ok(());
        }
        self.post_idle_receives()
    }

    fn post_idle_receives(&mut self) -> Result<(), TransportError> {
        let mut refused = [false; 2];
        // In place, so the list keeps its allocation. Each pass posts a buffer (the list
        // shrinks), skips one (`at` grows) or marks a class refused (at most twice).
        let mut at = 0;
        while at < self.rx.idle.len() {
            let large = self.rx.idle[at].capacity() > SMALL_FRAME_BYTES;
            if refused[usize::from(large)] {
                at += 1;
                continue;
            }
            let buffer = self.rx.idle.swap_remove(at);
            let (tag, ignore) = self.layout.recv_match(large);
            if let Err(Refused { item, error }) = self.ops.post_recv(buffer, tag, ignore) {
                self.rx.idle.push(item);
                if let Some(error) = error {
                    return Err(error);
                }
                refused[usize::from(large)] = true;
            }
        }
        Ok(())
    }

    /// Handles a receive completion.
    #[inline]
    pub(super) fn on_recv_done(&mut self, buffer: Buffer, tag: u64, len: usize, status: Status) {
        self.rx
            .arrived(buffer, tag, len, status, self.size, &self.peers);
    }
}
