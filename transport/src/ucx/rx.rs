//! The receive side: tagged messages taken off the worker into 8-byte aligned buffers, kept
//! per source in arrival order until [`Transport::poll_recv`](super::super::Transport::poll_recv)
//! hands them out.
//!
//! Messages are taken with a probe that removes them from UCX's queue, so each gets a buffer of
//! exactly its size (rounded up to whole `u64`s, which makes the frame start 8-byte aligned).
//! Eager messages complete at once; a large (rendezvous) message completes during later
//! progress, and UCX may finish two of them from the same sender out of order, so each source
//! has a FIFO and only its front is handed out. Held frames are bounded; beyond the bound,
//! messages wait in UCX's own queue.
//!
//! Frames a rank sends itself never enter UCX: they are copied into the inbox directly and
//! handed out first. Frames from a peer declared failed are still received (UCX holds them
//! until they are) but discarded, held ones included, as a crashed process would never see
//! them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use ftcoll_algos::Rank;
use ftcoll_ucx_sys as sys;

use super::context::status_text;
use super::request::{take_message, Request, Started};
use super::worker::Worker;

/// Messages taken off the worker per call.
const MAX_TAKES_PER_CALL: usize = 256;
/// Frames held (received or receiving) before taking more waits for the application.
const MAX_HELD_FRAMES: usize = 4096;
/// Bytes held before taking more waits for the application (one frame is always taken).
const MAX_HELD_BYTES: usize = 256 << 20;

/// The upper half of every tag: marks messages as ftcoll frames. The lower half is the
/// sender's rank.
const TAG_MAGIC: u64 = 0x4654_434f; // "FTCO"

/// The tag a rank sends its frames with.
pub(super) fn tag_of(rank: Rank) -> u64 {
    (TAG_MAGIC << 32) | u64::from(rank.0)
}

/// The sender of a frame with `tag`, if it is one of ours from inside the job.
fn source_of(tag: u64, size: u32) -> Option<Rank> {
    let rank = (tag & u64::from(u32::MAX)) as u32;
    (tag >> 32 == TAG_MAGIC && rank < size).then_some(Rank(rank))
}

/// One frame from a source.
#[derive(Debug)]
enum Arrival {
    Receiving {
        request: Request<Box<[u64]>>,
        len: usize,
    },
    Ready {
        words: Box<[u64]>,
        len: usize,
    },
}

/// Frames taken off the worker and not yet handed out.
#[derive(Debug)]
pub(super) struct Inbox {
    rank: Rank,
    size: u32,
    max_frame_bytes: usize,
    sources: BTreeMap<Rank, VecDeque<Arrival>>,
    /// Frames sent to self, each in its own aligned buffer, with its length in bytes.
    own: VecDeque<(Box<[u64]>, usize)>,
    own_bytes: usize,
    /// Sources declared failed: their frames are discarded.
    ignored: BTreeSet<Rank>,
    held_frames: usize,
    held_bytes: usize,
    /// The source served last, so the next call starts after it.
    cursor: Rank,
    scratch: Vec<Rank>,
}

impl Inbox {
    /// An empty inbox of `rank` in a job of `size` ranks.
    pub(super) fn new(rank: Rank, size: u32, max_frame_bytes: usize) -> Inbox {
        Inbox {
            rank,
            size,
            max_frame_bytes,
            sources: BTreeMap::new(),
            own: VecDeque::new(),
            own_bytes: 0,
            ignored: BTreeSet::new(),
            held_frames: 0,
            held_bytes: 0,
            cursor: Rank(0),
            scratch: Vec::new(),
        }
    }

    /// Queues a copy of a frame this rank sent itself.
    pub(super) fn push_own(&mut self, frame: &[u8]) {
        let mut words = vec![0u64; frame.len().div_ceil(8)].into_boxed_slice();
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..frame.len()].copy_from_slice(frame);
        self.own.push_back((words, frame.len()));
        self.own_bytes += frame.len();
    }

    /// Bytes of frames to self not yet handed out (they count against the send bound).
    pub(super) fn own_bytes(&self) -> usize {
        self.own_bytes
    }

    /// Discards frames from `source` from now on, those already held included.
    pub(super) fn ignore(&mut self, source: Rank) {
        self.ignored.insert(source);
    }

    fn full(&self) -> bool {
        self.held_frames > 0
            && (self.held_frames >= MAX_HELD_FRAMES || self.held_bytes >= MAX_HELD_BYTES)
    }

    /// Takes waiting messages off the worker (bounded); returns how many.
    pub(super) fn take_arrivals(&mut self, worker: &Arc<Worker>) -> usize {
        let mut taken = 0;
        while taken < MAX_TAKES_PER_CALL && !self.full() {
            let (size, max) = (self.size, self.max_frame_bytes);
            let wanted = |tag, len| source_of(tag, size).is_some() && len > 0 && len <= max;
            let Some(incoming) = take_message(worker, |tag, len| {
                // An unwanted message gets one word: its receive fails as truncated, which
                // releases it without allocating what it claims to need.
                let words = if wanted(tag, len) { len.div_ceil(8) } else { 1 };
                vec![0u64; words].into_boxed_slice()
            }) else {
                break;
            };
            taken += 1;
            let (tag, len) = (incoming.tag, incoming.len);
            let Some(source) = source_of(tag, size).filter(|_| wanted(tag, len)) else {
                tracing::warn!(
                    rank = self.rank.0,
                    tag,
                    len,
                    "discarded a UCX message that is not a frame of this job"
                );
                // Dropping an unfinished receive cancels and waits for it.
                drop(incoming.started);
                continue;
            };
            let arrival = match incoming.started {
                Started::Done { hold, status } if status == sys::UCS_OK => {
                    Arrival::Ready { words: hold, len }
                }
                Started::Done { status, .. } => {
                    tracing::debug!(
                        rank = self.rank.0,
                        source = source.0,
                        error = status_text(status),
                        "receive failed at start; frame lost with its sender"
                    );
                    continue;
                }
                Started::Pending(request) => Arrival::Receiving { request, len },
            };
            self.held_frames += 1;
            self.held_bytes += len;
            self.sources.entry(source).or_default().push_back(arrival);
        }
        taken
    }

    /// Whether a frame can be handed out now.
    pub(super) fn has_ready(&self) -> bool {
        !self.own.is_empty()
            || self.sources.values().any(|queue| match queue.front() {
                Some(Arrival::Ready { .. }) => true,
                Some(Arrival::Receiving { request, .. }) => request.status().is_some(),
                None => false,
            })
    }

    /// Hands up to `max_frames` frames to `handler`: frames to self first, then the other
    /// sources in turn; returns how many.
    pub(super) fn deliver(
        &mut self,
        max_frames: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> usize {
        let mut handled = 0;
        while handled < max_frames {
            let Some((words, len)) = self.own.pop_front() else {
                break;
            };
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            handler(self.rank, bytes.get(..len).unwrap_or_default());
            self.own_bytes -= len;
            handled += 1;
        }
        let mut order = std::mem::take(&mut self.scratch);
        order.clear();
        let after = (Bound::Excluded(self.cursor), Bound::Unbounded);
        order.extend(self.sources.range(after).map(|(rank, _)| *rank));
        order.extend(self.sources.range(..=self.cursor).map(|(rank, _)| *rank));
        for &source in &order {
            if handled >= max_frames {
                break;
            }
            self.cursor = source;
            handled += self.deliver_from(source, max_frames - handled, handler);
        }
        self.sources.retain(|_, queue| !queue.is_empty());
        self.scratch = order;
        handled
    }

    /// Hands out the completed frames at the front of one source's queue (discarding them if
    /// the source is ignored).
    fn deliver_from(
        &mut self,
        source: Rank,
        budget: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> usize {
        let Some(queue) = self.sources.get_mut(&source) else {
            return 0;
        };
        let mut handled = 0;
        while handled < budget {
            let Some(front) = queue.pop_front() else {
                break;
            };
            let (words, len) = match front {
                Arrival::Ready { words, len } => (words, len),
                Arrival::Receiving { request, len } => match request.finish() {
                    Ok((words, sys::UCS_OK)) => (words, len),
                    Ok((_, status)) => {
                        tracing::debug!(
                            rank = self.rank.0,
                            source = source.0,
                            error = status_text(status),
                            "receive failed; frame lost with its sender"
                        );
                        self.held_frames -= 1;
                        self.held_bytes -= len;
                        continue;
                    }
                    Err(request) => {
                        queue.push_front(Arrival::Receiving { request, len });
                        break;
                    }
                },
            };
            self.held_frames -= 1;
            self.held_bytes -= len;
            if self.ignored.contains(&source) {
                continue;
            }
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            handler(source, bytes.get(..len).unwrap_or_default());
            handled += 1;
        }
        handled
    }
}
