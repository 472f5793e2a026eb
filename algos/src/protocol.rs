//! The state-machine interface every algorithm implements.
//!
//! A protocol is driven by [`Protocol::handle`]: the driver (the simulator, or the executor on a
//! real rank) passes the current time and one [`Input`]; the protocol appends what it wants done
//! to a caller-owned [`Outbox`]: frames to send and [`Event`]s to report. Timers follow
//! quinn-proto's `poll_timeout` contract: a protocol keeps its own deadlines (usually in a
//! [`TimerTable`]), the driver asks [`Protocol::poll_timeout`] after handling inputs and hands it
//! [`Input::Timeout`] once that time is reached, so drivers keep no tables of their own. The
//! protocol never performs I/O, reads a clock, spawns a thread or draws from a global RNG, so the
//! same code runs in the simulator and on real transports, and one seed replays a simulated run
//! exactly.

use crate::rank::Rank;
use crate::time::Time;
use crate::values::ValuesRef;
use crate::wire::{encode_into, Frame, FrameError, FrameHeader, Stamp};

mod segmented;
#[cfg(test)]
pub(crate) mod testing;
mod timers;
mod wrapper;

pub use segmented::{
    Layout, MakeSegment, SegmentPlan, SegmentProtocol, Segmented, ShellConfig, KIND_SHAPE_MISMATCH,
};
pub use timers::TimerTable;
pub use wrapper::Wrapper;

/// One input to a protocol.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// Begin the operation with this rank's local contribution.
    Start {
        /// The local input vector.
        data: ValuesRef<'a>,
    },
    /// A frame from a peer, already structurally decoded; the protocol checks that it belongs to
    /// it (algorithm, operation, kind, step) and rejects it otherwise.
    Message {
        /// The rank the transport received it from (not the header's claim).
        from: Rank,
        /// The frame.
        frame: Frame<'a>,
    },
    /// The time has reached the deadline [`Protocol::poll_timeout`] last reported: the
    /// protocol handles every timer due at `now`, earliest deadline first (ties in [`TimerId`]
    /// order). A wakeup with nothing due is harmless: drivers skip the ones they know to be
    /// stale, but need not.
    Timeout,
    /// The failure detector reports that `peer` has failed. Detectors are fail-stop by
    /// construction: the peer was killed before anyone is told, so the notice is never wrong.
    PeerFailed {
        /// The failed rank.
        peer: Rank,
    },
    /// The link to `peer` has failed permanently (both ends are told); the peer itself lives.
    /// Gossip drops the flow over the link (003 Sec. II-C); other protocols ignore it.
    LinkFailed {
        /// The rank at the other end.
        peer: Rank,
    },
    /// Silent corruption of local state, injected by a fault plan or the console.
    Fault(LocalFault),
    /// The driver ends the operation (an oracle in the simulator, a user cancel).
    Stop,
}

/// A protocol-defined timer: a small kind plus an index (e.g. a peer for per-peer timeouts).
/// Only the protocol sees it: drivers know the earliest deadline, not which timer it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimerId {
    /// Protocol-defined timer kind.
    pub kind: u8,
    /// Protocol-defined index (a peer rank, a round).
    pub index: u32,
}

/// Which piece of local state a bit flip hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateVar {
    /// Element `elem` of the local value / estimate vector.
    Value {
        /// Element index.
        elem: u32,
    },
    /// The weight of a value/weight pair (Push-Sum).
    Weight,
    /// Element `elem` of the flow variable towards `peer` (Push-Flow family).
    Flow {
        /// The neighbour.
        peer: Rank,
        /// Element index.
        elem: u32,
    },
    /// Some flow variable the rank holds, drawn by the driver: flow number `pick` modulo the
    /// flows held, element `elem` modulo its width; the flipped bit is taken modulo the value's
    /// width too. Random corruption at a rate (000 Sec. 4.4.5) needs it: the driver does not
    /// know which flows exist.
    AnyFlow {
        /// Which flow, modulo the count.
        pick: u32,
        /// Which element, modulo the width.
        elem: u32,
    },
}

/// Silent data corruption of local state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalFault {
    /// Flip bit `bit` (numbered as in [`crate::bits`]) of `var`.
    FlipBit {
        /// The state variable.
        var: StateVar,
        /// The bit position.
        bit: u32,
    },
}

/// Why a protocol gave up on an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// A peer the protocol cannot complete without has failed.
    PeerFailed(Rank),
    /// The driver stopped the operation before it completed.
    Stopped,
    /// More ranks failed than the algorithm tolerates.
    TooManyFailures,
    /// A rank passed a vector of another type or length than this one.
    ShapeMismatch {
        /// The rank whose frame showed it (or that reported it).
        peer: Rank,
        /// This rank's vector.
        local: (crate::values::Dtype, u64),
        /// The other rank's vector.
        remote: (crate::values::Dtype, u64),
    },
    /// The segments of the vector count different ranks (a rank died while they streamed):
    /// no whole vector is the reduction over one set of ranks, so none is returned.
    MixedContributors {
        /// Segments whose set differs from the first segment's.
        segments: u32,
    },
}

/// Something a protocol reports to its driver.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event {
    /// A round / step finished locally.
    RoundDone {
        /// The round just finished (0-based).
        round: u32,
    },
    /// The local result is final (the collective completed at this rank).
    Completed,
    /// The operation failed at this rank.
    Aborted(AbortReason),
    /// The protocol itself suspects a peer (a timeout, a corrupted checksum).
    Suspected {
        /// The suspected rank.
        peer: Rank,
    },
    /// A frame was rejected.
    Rejected {
        /// The transport-level sender.
        from: Rank,
        /// Why.
        error: FrameError,
    },
    /// A local fault was applied to state that exists.
    FaultApplied(LocalFault),
    /// A local fault named state this protocol does not have; nothing changed.
    FaultIgnored(LocalFault),
}

/// One queued send: a frame in the outbox's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct QueuedSend {
    to: Rank,
    first_word: u32,
    len_bytes: u32,
}

/// What a protocol wants done, owned and reused by the caller so that handling an input does not
/// allocate: frames are encoded into one growing arena of 8-byte words (keeping payloads aligned
/// for in-place reading), and [`Outbox::clear`] keeps all capacity.
#[derive(Debug, Default)]
pub struct Outbox {
    words: Vec<u64>,
    sends: Vec<QueuedSend>,
    events: Vec<Event>,
    /// Written into every header encoded here: the operation's shape and the segment whose
    /// protocol is handling an input (set by [`Segmented`], or by a driver running a protocol
    /// bare).
    stamp: Stamp,
    /// Where a protocol runs over a subset of the ranks (the survivors of a failure), the
    /// ranks it numbers 0, 1, … as the driver numbers them: destinations and the headers'
    /// `source` are translated on the way out. Empty: the identity.
    ranks: Vec<u32>,
}

impl Outbox {
    /// An empty outbox.
    pub fn new() -> Outbox {
        Outbox::default()
    }

    /// Sets what every header encoded from now on carries in its shape and segment fields.
    #[inline(always)]
    pub fn set_stamp(&mut self, stamp: Stamp) {
        self.stamp = stamp;
    }

    /// What headers are stamped with now.
    pub fn stamp(&self) -> Stamp {
        self.stamp
    }

    /// Exchanges the outbox's rank map with `ranks` (see the field): a composite protocol
    /// swaps its subset's map in before handing an input to a part that numbers the subset
    /// from 0, and swaps it back out after, so that neither allocates.
    pub fn swap_rank_map(&mut self, ranks: &mut Vec<u32>) {
        std::mem::swap(&mut self.ranks, ranks);
    }

    #[inline(always)]
    fn mapped(&self, rank: u32) -> u32 {
        if self.ranks.is_empty() {
            rank
        } else {
            // A rank beyond the map is a protocol's bug; it goes out as a rank no one has.
            self.ranks.get(rank as usize).copied().unwrap_or(u32::MAX)
        }
    }

    #[inline(always)]
    fn stamped(&self, mut header: FrameHeader) -> FrameHeader {
        header.segment = self.stamp.segment;
        header.shape_dtype = self.stamp.dtype as u8;
        header.shape_len = self.stamp.len;
        let attempt = self
            .stamp
            .attempt
            .min(crate::wire::MAX_ATTEMPT)
            .to_le_bytes();
        header.attempt = [attempt[0], attempt[1], attempt[2]];
        header.source = self.mapped(header.source);
        header
    }

    /// Queues a frame for `to`.
    #[inline(always)]
    pub fn send(&mut self, to: Rank, header: FrameHeader, payload: ValuesRef<'_>) {
        let header = self.stamped(header);
        let first_word = self.words.len() as u32;
        let len_bytes = encode_into(&mut self.words, header, payload) as u32;
        self.sends.push(QueuedSend {
            to: Rank(self.mapped(to.0)),
            first_word,
            len_bytes,
        });
    }

    /// Queues a frame for `to` that carries a rank list after its values (see
    /// [`crate::wire`]'s rank trailer).
    pub fn send_with_ranks(
        &mut self,
        to: Rank,
        header: FrameHeader,
        payload: ValuesRef<'_>,
        ranks: &[u32],
    ) {
        let header = self.stamped(header);
        let first_word = self.words.len() as u32;
        let len_bytes =
            crate::wire::encode_with_trailer(&mut self.words, header, payload, ranks) as u32;
        self.sends.push(QueuedSend {
            to: Rank(self.mapped(to.0)),
            first_word,
            len_bytes,
        });
    }

    /// Reports an event.
    pub fn emit(&mut self, event: Event) {
        self.events.push(event);
    }

    /// Keeps, among the events reported from index `start` on, only those `keep` accepts: a
    /// composite protocol drops its parts' completion reports and makes its own.
    pub fn retain_events_from(&mut self, start: usize, mut keep: impl FnMut(&Event) -> bool) {
        let mut index = 0;
        self.events.retain(|event| {
            index += 1;
            index <= start || keep(event)
        });
    }

    /// Number of queued sends.
    pub fn send_count(&self) -> usize {
        self.sends.len()
    }

    /// The `i`-th queued send: destination and encoded bytes.
    pub fn send_at(&self, i: usize) -> Option<(Rank, &[u8])> {
        let send = self.sends.get(i)?;
        let start = send.first_word as usize;
        let words = self.words.get(start..)?;
        let bytes: &[u8] = bytemuck::cast_slice(words);
        Some((send.to, &bytes[..send.len_bytes as usize]))
    }

    /// The `i`-th queued send as its encoded words (8-byte aligned; the frame is the first
    /// `len` bytes, `len` being the second value).
    pub fn send_words_at(&self, i: usize) -> Option<(Rank, &[u64], usize)> {
        let send = self.sends.get(i)?;
        let start = send.first_word as usize;
        let words = (send.len_bytes as usize).div_ceil(8);
        Some((
            send.to,
            self.words.get(start..start + words)?,
            send.len_bytes as usize,
        ))
    }

    /// All queued sends, in order.
    pub fn sends(&self) -> impl Iterator<Item = (Rank, &[u8])> + '_ {
        (0..self.sends.len()).filter_map(|i| self.send_at(i))
    }

    /// Reported events, in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.sends.is_empty() && self.events.is_empty()
    }

    /// Forgets everything queued, keeping capacity.
    pub fn clear(&mut self) {
        self.words.clear();
        self.sends.clear();
        self.events.clear();
    }
}

/// Where a protocol instance is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Waiting for [`Input::Start`].
    #[default]
    Idle,
    /// Working.
    Running,
    /// The local result is final. A protocol may still answer peers (ERA serves requests after
    /// returning).
    Done,
    /// Gave up (see the [`Event::Aborted`] it emitted).
    Aborted,
}

/// Counters every protocol keeps, for status snapshots and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames queued for sending.
    pub messages_sent: u64,
    /// Frames accepted.
    pub messages_received: u64,
    /// Frames rejected (malformed, wrong operation, unexpected).
    pub frames_rejected: u64,
    /// Failure notices received.
    pub failures_noticed: u32,
    /// Local faults applied.
    pub faults_applied: u32,
}

/// Protocol-specific state shown by monitors; later protocols add variants.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum Detail {
    /// Nothing beyond the common fields.
    #[default]
    None,
    /// Recursive doubling and its approximate variant.
    RecursiveDoubling {
        /// Exchange steps completed.
        steps_done: u32,
        /// Exchange steps this rank takes in all (including fold steps).
        steps_total: u32,
        /// How many ranks' inputs the local value contains.
        contributions: u64,
    },
    /// The ring allreduce.
    Ring {
        /// Steps whose block arrived (reduce-scatter, then allgather).
        steps_done: u32,
        /// Steps in all: 2(N − 1).
        steps_total: u32,
    },
    /// The direct-exchange allreduce.
    DirectExchange {
        /// Other ranks' inputs received.
        inputs_received: u32,
        /// Inputs folded into the result so far (in rank order, this rank's own included).
        inputs_folded: u32,
        /// Group size.
        size: u32,
    },
    /// Corrected-tree reduce, broadcast and allreduce.
    CorrectedTree {
        /// The allreduce attempt (root candidate index); 0 for reduce and broadcast.
        attempt: u32,
        /// The root of the current attempt.
        root: u32,
        /// Failures this rank knows of.
        known_failed: u32,
        /// Peers this rank still waits for.
        waiting_for: u32,
    },
    /// Gossip reductions (000, 003).
    Gossip {
        /// Neighbours this rank holds flows for.
        flows: u32,
        /// Neighbours excluded after a crash or a failed link.
        excluded: u32,
        /// Corrupted mass vectors found by checksum.
        detections: u32,
        /// The rank finished on its stopping rule, or with no neighbour left to change its
        /// estimate; false while it runs and when its push budget or the driver ended it.
        settled: bool,
    },
    /// The fault-tolerant ring allreduce.
    FtRing {
        /// The attempt running (0 until a failure).
        attempt: u32,
        /// Members of the attempt.
        members: u32,
        /// Failures this rank knows of.
        known_failed: u32,
    },
    /// The Early Returning Agreement.
    Agreement {
        /// The agreement in progress (or the last one).
        agreement: u64,
        /// Failures this rank knows of.
        known_failed: u32,
        /// Agreements with state here (in flight, or decided and not yet collected).
        live_agreements: u32,
    },
}

/// A snapshot of one rank, for monitors and reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankStatus {
    /// Life cycle.
    pub phase: Phase,
    /// Rounds / iterations completed.
    pub iteration: u32,
    /// Common counters.
    pub counters: Counters,
    /// Protocol-specific detail.
    pub detail: Detail,
}

/// Applies a local fault to `value`, the only state of the plain collectives (rdb's peers
/// aside): a flip of a value element; weights and flows do not exist there. Counts and reports
/// what happened.
pub(crate) fn flip_value(
    value: &mut crate::values::Values,
    fault: LocalFault,
    counters: &mut Counters,
    out: &mut Outbox,
) {
    let LocalFault::FlipBit { var, bit } = fault;
    let applied = match var {
        StateVar::Value { elem } => value.flip_bit(elem as usize, bit),
        StateVar::Weight | StateVar::Flow { .. } | StateVar::AnyFlow { .. } => false,
    };
    if applied {
        counters.faults_applied += 1;
        out.emit(Event::FaultApplied(fault));
    } else {
        out.emit(Event::FaultIgnored(fault));
    }
}

/// Answers the inputs every protocol that tolerates no failure answers alike, and hands back
/// the ones that are its own (a start, a frame). Every input reaches every result there, so a
/// failed peer fails the operation (unless it ended); a stop aborts it unless it is done; a
/// local fault flips a bit of the value ([`flip_value`]); timers and links mean nothing.
pub(crate) fn fail_stop_input<'a>(
    input: Input<'a>,
    (phase, value, counters): (&mut Phase, &mut crate::values::Values, &mut Counters),
    out: &mut Outbox,
) -> Option<Input<'a>> {
    match input {
        Input::Start { .. } | Input::Message { .. } => return Some(input),
        Input::Timeout | Input::LinkFailed { .. } => {}
        Input::PeerFailed { .. } => {
            counters.failures_noticed += 1;
            if matches!(*phase, Phase::Idle | Phase::Running) {
                *phase = Phase::Aborted;
                out.emit(Event::Aborted(AbortReason::TooManyFailures));
            }
        }
        Input::Fault(fault) => flip_value(value, fault, counters, out),
        Input::Stop => {
            if *phase != Phase::Done {
                *phase = Phase::Aborted;
                out.emit(Event::Aborted(AbortReason::Stopped));
            }
        }
    }
    None
}

/// An operation whose result lies in pieces of the caller's vector: the operation shell
/// ([`Segmented`]), and the protocols composed over it. Drivers that write results back into
/// a caller's vector take any of them.
pub trait Assembled: Protocol {
    /// The result piece by piece, each with its offset in the whole output, once final.
    fn results(&self) -> Option<impl Iterator<Item = (usize, ValuesRef<'_>)> + '_>;
    /// Elements of the whole result for this rank's input.
    fn output_len_total(&self) -> usize;
    /// Why the operation aborted, once it has.
    fn abort_reason(&self) -> Option<AbortReason>;

    /// Frees the result's buffers once the driver has written them back, before it keeps the
    /// finished operation to answer peers: a long vector's result need not stay alive then.
    fn release_results(&mut self) {}
}

/// A sans-IO collective protocol at one rank.
pub trait Protocol {
    /// Handles one input at time `now`, appending what must happen to `out`.
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox);

    /// The earliest deadline of a timer the protocol has armed and not yet handled, or `None`.
    /// Drivers ask after handling inputs and hand the protocol [`Input::Timeout`] once the time
    /// reaches it (quinn-proto's `poll_timeout`). Required, so that a wrapper written by hand
    /// cannot drop its inner protocol's timers; protocols without timers return `None`.
    fn poll_timeout(&self) -> Option<Time>;

    /// The current local estimate of the collective's result, written into `dst` (cleared
    /// first). Before completion this is the protocol's best guess (gossip estimates converge);
    /// protocols with no meaningful partial estimate write their current partial value.
    fn estimate(&self, dst: &mut Vec<f64>);

    /// Where the instance is in its life.
    fn phase(&self) -> Phase;

    /// The result in the operation's own element type, once final: what a typed call writes
    /// back into the user's vector without a detour through f64. `None` where the protocol
    /// keeps no such vector (then [`Protocol::estimate`] is the result), and for averages,
    /// whose result is a quotient computed by `estimate`.
    fn result(&self) -> Option<ValuesRef<'_>> {
        None
    }

    /// Whether [`Protocol::estimate`] is the collective's result at this rank: true once done,
    /// except at ranks that by definition receive no result (a reduce's non-roots).
    fn has_result(&self) -> bool {
        self.phase() == Phase::Done
    }

    /// Whether the instance looks at the time it is given. A protocol that never arms a timer
    /// and whose every transition ignores `now` says false; a real-time driver may then hand it
    /// the last time it read instead of reading the clock on the latency path.
    fn reads_clock(&self) -> bool {
        true
    }

    /// A snapshot for monitors.
    fn status(&self) -> RankStatus;

    /// Whether the instance owes peers nothing more. A protocol may be done (its result final)
    /// and still unsettled: a corrected broadcast keeps correcting towards a neighbour that died
    /// late. Drivers keep feeding an unsettled instance messages and failure notices after it
    /// returns its result.
    fn settled(&self) -> bool {
        true
    }

    /// Until when a finished instance must stay reachable even once settled: peers may still
    /// come to it for the result. FTCO (004) needs this: a rank whose parent took the data and
    /// died before passing it on probes up the tree, and the first live ancestor answers with
    /// the result, finished or not. `None`: not needed.
    fn serve_until(&self) -> Option<Time> {
        None
    }

    /// Whether a finished instance with a [`Protocol::serve_until`] must in fact stay
    /// reachable until every live rank has finished, however late that is. FTCO needs it: a
    /// rank that starts late along a path broken by deaths probes later than any time the
    /// instance can foresee. A runtime then serves it until its flushing agreement at the exit
    /// decides; others (gossip's courtesy answers) only until `serve_until`.
    fn serves_until_all_finish(&self) -> bool {
        false
    }

    /// Checks what must hold at this instance after every step of a fault-free run (mass,
    /// flow and checksum accounting for gossip). The simulator calls it after every input in
    /// debug builds when no fault is scheduled. `Ok` by default.
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }

    /// The console's detail view of this rank (fields, and per-peer state where the algorithm
    /// has it). The default shows the common status; algorithms add their own.
    fn inspect(&self) -> crate::inspect::Inspection {
        let status = self.status();
        let mut view = crate::inspect::Inspection::default();
        match status.detail {
            Detail::RecursiveDoubling {
                steps_done,
                steps_total,
                contributions,
            } => {
                view.field("exchanges", format!("{steps_done} of {steps_total}"));
                view.field("inputs combined", contributions);
            }
            Detail::Ring {
                steps_done,
                steps_total,
            } => view.field("ring steps", format!("{steps_done} of {steps_total}")),
            Detail::DirectExchange {
                inputs_received,
                inputs_folded,
                size,
            } => {
                view.field(
                    "inputs received",
                    format!("{inputs_received} of {}", size.saturating_sub(1)),
                );
                view.field("inputs folded", format!("{inputs_folded} of {size}"));
            }
            Detail::CorrectedTree {
                attempt,
                root,
                known_failed,
                waiting_for,
            } => {
                view.field("attempt", attempt);
                view.field("root", root);
                view.field("known failed", known_failed);
                view.field("waiting for", waiting_for);
            }
            Detail::Gossip {
                flows,
                excluded,
                detections,
                settled,
            } => {
                view.field("flows", flows);
                view.field("excluded peers", excluded);
                view.field("checksum detections", detections);
                view.field("settled", if settled { "yes" } else { "no" });
            }
            Detail::Agreement {
                agreement,
                known_failed,
                live_agreements,
            } => {
                view.field("agreement", agreement);
                view.field("known failed", known_failed);
                view.field("agreements in flight", live_agreements);
            }
            Detail::FtRing {
                attempt,
                members,
                known_failed,
            } => {
                view.field("attempt", attempt);
                view.field("members", members);
                view.field("known failed", known_failed);
            }
            Detail::None => {}
        }
        view.field("iteration", status.iteration);
        view.field("sent", status.counters.messages_sent);
        view.field("received", status.counters.messages_received);
        view.field("rejected", status.counters.frames_rejected);
        view.field("failures noticed", status.counters.failures_noticed);
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Algorithm;
    use crate::wire::OpId;

    #[test]
    fn outbox_reuses_capacity_and_keeps_frames_aligned() {
        let mut out = Outbox::new();
        for round in 0..3 {
            let header = FrameHeader::new(Algorithm::Rdb, 1, OpId(1), Rank(0), round);
            out.send(Rank(1), header, ValuesRef::F32(&[1.0, 2.0, 3.0]));
            out.send(Rank(2), header, ValuesRef::F64(&[4.0]));
            for (_, bytes) in out.sends() {
                let frame = Frame::decode(bytes).unwrap();
                assert!(frame.values().is_ok());
            }
            assert_eq!(out.send_count(), 2);
            out.clear();
            assert!(out.is_empty());
        }
    }
}
