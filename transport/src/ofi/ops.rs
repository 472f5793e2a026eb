//! Operations posted to the endpoint. [`Ops`] owns the endpoint, and every posted operation
//! owns its buffer and its `fi_context2` until its completion is read; on drop it cancels what
//! is outstanding, waits (bounded) for the completions, closes the endpoint, and only then frees
//! the buffers.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ftcoll_algos::Rank;
use ftcoll_ofi_sys as sys;

use super::context::Contexts;
use super::cq::{self, Read};
use super::endpoint::{Endpoint, Posted};
use super::fabric::Domain;
use super::mr::{Buffer, MemoryRegion, UserRegistration};
use crate::{PinnedBuffer, TransportError};

/// Completion entries read per `fi_cq_read`.
const READ_BATCH: usize = 64;
/// How long dropping the transport waits for cancelled operations to complete before closing
/// the endpoint anyway (sends to a dead peer may never complete).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// The bytes of a send.
pub(super) enum SendPayload {
    /// A copy in a pooled, registered buffer.
    Pooled(Buffer),
    /// A registered user buffer, pinned until the send completes.
    Pinned(PinnedBuffer),
}

/// A posted operation and what it owns.
enum Op {
    Send {
        peer: Rank,
        payload: SendPayload,
        bytes: usize,
    },
    Recv {
        buffer: Buffer,
    },
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Status {
    /// It completed.
    Done,
    /// It was cancelled (the transport asked).
    Cancelled,
    /// It failed: the positive libfabric error code and the provider's text.
    Failed(i32, String),
}

impl Status {
    /// How an operation reported by an error completion ended.
    pub(super) fn of_error(error: cq::ErrorEntry) -> Status {
        if error.code == sys::FI_ECANCELED {
            Status::Cancelled
        } else {
            Status::Failed(error.code, error.why)
        }
    }
}

/// The region of a pinned user buffer, if this transport's domain registered it.
pub(super) fn pinned_region<'a>(
    pinned: &'a PinnedBuffer,
    domain: &Arc<Domain>,
) -> Option<&'a MemoryRegion> {
    pinned
        .registration()?
        .as_any()
        .downcast_ref::<UserRegistration>()?
        .region_of(domain)
}

/// A finished operation, handing back what it owned.
pub(super) enum Completion {
    /// A send ended.
    Send {
        peer: Rank,
        payload: SendPayload,
        bytes: usize,
        status: Status,
    },
    /// A receive ended: `len` bytes arrived with `tag` (`len` is 0 unless it is done).
    Recv {
        buffer: Buffer,
        tag: u64,
        len: usize,
        status: Status,
    },
}

/// A post the provider did not take, with what it would have owned.
pub(super) struct Refused<T> {
    /// Handed back.
    pub(super) item: T,
    /// `None`: out of resources for now, retry after reading completions.
    pub(super) error: Option<TransportError>,
}

/// The endpoint and its outstanding operations (see the module docs).
pub(super) struct Ops {
    // Field order is drop order: the endpoint closes before buffers and contexts are freed.
    ep: Endpoint,
    slots: Vec<Option<Op>>,
    free: Vec<usize>,
    contexts: Contexts,
    entries: Vec<cq::Entry>,
    sends: usize,
    /// Most sends outstanding at once: the other slots stay free for receives, so sends can
    /// never starve the receive buffers a peer's rendezvous needs.
    max_sends: usize,
}

// SAFETY: Ops owns everything its raw pointers point to; the endpoint is Send.
unsafe impl Send for Ops {}

impl Ops {
    /// Owns `ep`, with room for `max_sends` outstanding sends and `max_recvs` posted receives.
    pub(super) fn new(ep: Endpoint, max_sends: usize, max_recvs: usize) -> Ops {
        let capacity = max_sends + max_recvs;
        Ops {
            ep,
            slots: (0..capacity).map(|_| None).collect(),
            free: (0..capacity).rev().collect(),
            contexts: Contexts::new(capacity),
            entries: vec![cq::Entry::default(); READ_BATCH],
            sends: 0,
            max_sends,
        }
    }

    /// The endpoint (for its name, address vector and completion queue).
    pub(super) fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    /// Sends outstanding.
    pub(super) fn sends(&self) -> usize {
        self.sends
    }

    /// Whether a send could be posted now as far as this side goes (a refusal is then the
    /// provider's).
    pub(super) fn has_send_slot(&self) -> bool {
        self.sends < self.max_sends && !self.free.is_empty()
    }

    /// Posts a send of the first `bytes` bytes of `payload` to `dest` with `tag`. A pinned
    /// payload must carry a registration of this domain (see [`pinned_region`]).
    #[inline(always)]
    pub(super) fn post_send(
        &mut self,
        peer: Rank,
        dest: sys::fi_addr_t,
        tag: u64,
        mut payload: SendPayload,
        bytes: usize,
    ) -> Result<(), Refused<SendPayload>> {
        let slot = if self.sends < self.max_sends {
            self.free.pop()
        } else {
            None
        };
        let Some(slot) = slot else {
            return Err(Refused {
                item: payload,
                error: None,
            });
        };
        let (buf, desc): (*const u8, *mut c_void) = match &mut payload {
            SendPayload::Pooled(buffer) => (buffer.as_mut_ptr(), buffer.desc()),
            SendPayload::Pinned(pinned) => (
                pinned.bytes().as_ptr(),
                pinned_region(pinned, self.ep.domain())
                    .map_or(std::ptr::null_mut(), MemoryRegion::desc),
            ),
        };
        // SAFETY: the payload's memory is heap memory that moves into `slots` below (its address
        // does not change) and stays there, with its registration, until the completion is read
        // or the endpoint closed; the same holds for the context slot.
        let posted = unsafe {
            self.ep
                .post_send(buf, bytes, desc, dest, tag, self.contexts.get(slot))
        };
        match posted {
            Posted::Yes => {
                self.slots[slot] = Some(Op::Send {
                    peer,
                    payload,
                    bytes,
                });
                self.sends += 1;
                Ok(())
            }
            Posted::Again => {
                self.free.push(slot);
                Err(Refused {
                    item: payload,
                    error: None,
                })
            }
            Posted::Failed(error) => {
                self.free.push(slot);
                Err(Refused {
                    item: payload,
                    error: Some(error),
                })
            }
        }
    }

    /// Posts `buffer` to receive a message whose tag matches `tag` outside the bits of `ignore`.
    #[inline]
    pub(super) fn post_recv(
        &mut self,
        mut buffer: Buffer,
        tag: u64,
        ignore: u64,
    ) -> Result<(), Refused<Buffer>> {
        let Some(slot) = self.free.pop() else {
            return Err(Refused {
                item: buffer,
                error: None,
            });
        };
        let (ptr, len, desc) = (buffer.as_mut_ptr(), buffer.capacity(), buffer.desc());
        // SAFETY: as in `post_send`; the buffer moves into `slots` and no Rust code touches it
        // there.
        let posted = unsafe {
            self.ep
                .post_recv(ptr, len, desc, tag, ignore, self.contexts.get(slot))
        };
        match posted {
            Posted::Yes => {
                self.slots[slot] = Some(Op::Recv { buffer });
                Ok(())
            }
            Posted::Again => {
                self.free.push(slot);
                Err(Refused {
                    item: buffer,
                    error: None,
                })
            }
            Posted::Failed(error) => {
                self.free.push(slot);
                Err(Refused {
                    item: buffer,
                    error: Some(error),
                })
            }
        }
    }

    /// Reads up to `max` completions into `out`; returns how many.
    pub(super) fn poll(
        &mut self,
        max: usize,
        out: &mut Vec<Completion>,
    ) -> Result<usize, TransportError> {
        let mut done = 0;
        while done < max {
            let batch = READ_BATCH.min(max - done);
            match self.ep.cq().read(&mut self.entries[..batch])? {
                Read::Empty => break,
                Read::Entries(n) => {
                    for k in 0..n {
                        let entry = self.entries[k];
                        let completion = self.finish(
                            entry.op_context as usize,
                            entry.tag,
                            entry.len,
                            Status::Done,
                        );
                        out.extend(completion);
                    }
                    done += n;
                    // A short read emptied the queue. Reading again now would only run the
                    // provider's progress once more (a system call over tcp) on the path of
                    // every completion, to find nothing: the next call reads what comes later.
                    if n < batch {
                        break;
                    }
                }
                Read::ErrorAvailable => {
                    let Some(error) = self.ep.cq().read_error()? else {
                        break;
                    };
                    let (context, tag) = (error.context, error.tag);
                    out.extend(self.finish(context, tag, 0, Status::of_error(error)));
                    done += 1;
                }
            }
        }
        Ok(done)
    }

    /// Takes the operation a completion reports back out of its slot.
    #[inline(always)]
    fn finish(
        &mut self,
        context: usize,
        tag: u64,
        len: usize,
        status: Status,
    ) -> Option<Completion> {
        let op = self.contexts.slot_of(context).and_then(|slot| {
            let op = self.slots[slot].take()?;
            self.free.push(slot);
            Some(op)
        });
        let Some(op) = op else {
            tracing::warn!(
                context,
                "completion for an operation this endpoint did not post"
            );
            return None;
        };
        Some(match op {
            Op::Send {
                peer,
                payload,
                bytes,
            } => {
                self.sends -= 1;
                Completion::Send {
                    peer,
                    payload,
                    bytes,
                    status,
                }
            }
            Op::Recv { buffer } => Completion::Recv {
                buffer,
                tag,
                len,
                status,
            },
        })
    }

    /// Asks the provider to cancel the outstanding sends to `peer` (those it can cancel complete
    /// with FI_ECANCELED; the others complete as usual).
    pub(super) fn cancel_sends_to(&self, peer: Rank) {
        self.cancel_where(|op| matches!(op, Op::Send { peer: p, .. } if *p == peer));
    }

    fn cancel_where(&self, filter: impl Fn(&Op) -> bool) {
        for (slot, op) in self.slots.iter().enumerate() {
            if op.as_ref().is_some_and(&filter) {
                // SAFETY: the slot holds an outstanding operation posted with this context.
                unsafe { self.ep.cancel(self.contexts.get(slot)) };
            }
        }
    }

    fn outstanding(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

impl Drop for Ops {
    fn drop(&mut self) {
        self.cancel_where(|_| true);
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        let mut scratch = Vec::new();
        while self.outstanding() > 0 && Instant::now() < deadline {
            scratch.clear();
            match self.poll(READ_BATCH, &mut scratch) {
                Ok(0) => std::thread::sleep(Duration::from_micros(200)),
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "reading completions while closing the endpoint");
                    break;
                }
            }
        }
        if self.outstanding() > 0 {
            tracing::debug!(
                outstanding = self.outstanding(),
                "closing the endpoint with operations outstanding"
            );
        }
    }
}
