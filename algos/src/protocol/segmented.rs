//! The operation shell: any vector length over any protocol, and a shape check on every frame.
//!
//! A transport moves frames of bounded size (a shared-memory lane holds 32 KiB), and a vector may
//! be gigabytes. [`Segmented`] cuts the operation's vector into segments of at most
//! [`SegmentPlan::segment_elems`] elements and runs one instance of the inner protocol per
//! segment: every collective here is element-wise, so segments are independent operations that
//! share the operation id and tell themselves apart by the header's `segment` field. At most
//! [`SegmentPlan::window`] segments are started by this rank at once, so transfers of one
//! segment overlap the reduction of the next while memory and queues stay bounded; a segment a
//! peer has already started is started here on its first frame (its input is at hand), so no
//! frame is ever held.
//!
//! Every frame carries the sender's vector shape (type and length). A frame whose shape differs
//! from this rank's ends the operation with [`AbortReason::ShapeMismatch`], and this rank tells
//! every peer, so that every rank ends with the same typed error instead of waiting for data
//! that will never come (or combining vectors that do not match).

use super::{AbortReason, Counters, Event, Input, LocalFault, Outbox, Phase, Protocol, RankStatus};
use super::{StateVar, Time};
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::values::{Dtype, ReduceOp, Values, ValuesRef};
use crate::wire::{Frame, FrameError, FrameHeader, OpId, Stamp};

mod layout;
mod segment_protocol;

use layout::write_f64;
pub use layout::Layout;
pub use segment_protocol::SegmentProtocol;

/// Message kind reserved in every protocol for the shell's shape-mismatch notice.
pub const KIND_SHAPE_MISMATCH: u8 = 0xFF;

/// How an operation's vector is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentPlan {
    /// Elements per segment (at least 1): chosen so that the inner protocol's largest frame
    /// fits the transport.
    pub segment_elems: usize,
    /// Segments this rank starts before the first of them completes (at least 1).
    pub window: u32,
}

impl SegmentPlan {
    /// One segment, whatever the length (the simulator, whose frames have no size limit).
    pub const WHOLE: SegmentPlan = SegmentPlan {
        segment_elems: usize::MAX,
        window: 1,
    };

    /// Number of segments of a vector of `len` elements (one for an empty vector).
    pub fn segments(&self, len: usize) -> usize {
        len.div_ceil(self.segment_elems.max(1)).max(1)
    }
}

/// What the shell knows of the operation it runs.
#[derive(Clone, Copy, Debug)]
pub struct ShellConfig {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the group.
    pub size: u32,
    /// The inner protocol's algorithm (frames of the notice carry it).
    pub algo: Algorithm,
    /// The operation.
    pub op: OpId,
    /// The operator (an average's result comes from `estimate`).
    pub reduce: ReduceOp,
    /// How to cut the vector.
    pub plan: SegmentPlan,
    /// How input and output map to segments.
    pub layout: Layout,
    /// The attempt of an operation that restarts over its survivors (0 elsewhere): stamped
    /// into every frame, and a frame of another attempt is refused.
    pub attempt: u32,
}

/// One segment's life at this rank.
enum Slot<P> {
    NotStarted,
    Running(P),
    /// Done, its result written back; kept while it still owes peers answers.
    Finished(Option<P>),
}

/// Builds (or recycles) the inner protocol of one segment: called with the shell's
/// configuration, the segment, and a finished instance to restart in place where there is one.
pub type MakeSegment<P> = Box<dyn FnMut(&ShellConfig, u32, Option<P>) -> P + Send>;

/// The operation shell around a protocol `P` (see the module docs).
pub struct Segmented<P: SegmentProtocol> {
    config: ShellConfig,
    make: MakeSegment<P>,
    /// This rank's vector shape.
    shape: Stamp,
    /// Per segment: its input until it starts, its result once finished (kept from call to
    /// call, so a loop of long operations faults no page in again).
    buffers: Vec<Values>,
    slots: Vec<Slot<P>>,
    /// Segments started by this rank's own schedule (the window's cursor).
    next_to_start: usize,
    running: usize,
    finished: usize,
    /// Whether every finished segment left a result here (a reduce's non-roots get none).
    has_result: bool,
    /// Finished segments whose result leaves out a rank's input.
    partial_segments: u32,
    /// The contributor set of the first finished segment that names one
    /// ([`SegmentProtocol::contributors`]), and how many finished segments named another.
    contributors: Option<Vec<u32>>,
    mixed_segments: u32,
    /// The checker's planted-bug control: assemble segments that count different ranks.
    accept_mixed: bool,
    words: Vec<u32>,
    failed: Vec<Rank>,
    failed_links: Vec<Rank>,
    phase: Phase,
    abort: Option<AbortReason>,
    /// Counters of instances already dropped.
    retired: Counters,
    /// Finished instances kept to restart in place (at most a window's worth plus one): a
    /// loop of long operations allocates no protocol state after the first.
    spare: Vec<P>,
    scratch: Vec<f64>,
}

impl<P: SegmentProtocol> Segmented<P> {
    /// A shell whose segments are built by `make(segment, spare)`; `spare` is a finished
    /// instance to restart in place, when there is one.
    pub fn new(config: ShellConfig, make: MakeSegment<P>) -> Segmented<P> {
        Segmented {
            config,
            make,
            shape: Stamp::default(),
            buffers: Vec::new(),
            slots: Vec::new(),
            next_to_start: 0,
            running: 0,
            finished: 0,
            has_result: true,
            partial_segments: 0,
            contributors: None,
            mixed_segments: 0,
            accept_mixed: false,
            words: Vec::new(),
            failed: Vec::new(),
            failed_links: Vec::new(),
            phase: Phase::Idle,
            abort: None,
            retired: Counters::default(),
            spare: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Makes the shell ready for another operation, keeping its allocations and one inner
    /// instance to restart.
    pub fn restart(&mut self, config: ShellConfig) {
        self.config = config;
        let keep = self.config.plan.window as usize + 1;
        for slot in self.slots.drain(..) {
            if let Slot::Running(p) | Slot::Finished(Some(p)) = slot {
                if self.spare.len() < keep {
                    self.spare.push(p);
                }
            }
        }
        self.next_to_start = 0;
        self.running = 0;
        self.finished = 0;
        self.has_result = true;
        self.partial_segments = 0;
        self.contributors = None;
        self.mixed_segments = 0;
        self.failed.clear();
        self.failed_links.clear();
        self.phase = Phase::Idle;
        self.abort = None;
        self.retired = Counters::default();
    }

    /// Finished segments whose result leaves out some rank's input (see
    /// [`SegmentProtocol::counts_every_rank`]).
    pub fn partial_segments(&self) -> u32 {
        self.partial_segments
    }

    /// Finished segments whose contributor set differs from the first one's.
    pub fn mixed_segments(&self) -> u32 {
        self.mixed_segments
    }

    /// The checker's planted-bug control: complete with segments whose contributor sets
    /// differ instead of ending with [`AbortReason::MixedContributors`]. Never in a library
    /// call.
    pub fn accept_mixed_contributors(&mut self) {
        self.accept_mixed = true;
    }

    /// The result segment by segment, once final (`None` before, or where this rank gets
    /// none): each piece with its offset in the whole output, in order of segments.
    pub fn results(&self) -> Option<impl Iterator<Item = (usize, ValuesRef<'_>)> + '_> {
        if !self.has_result() {
            return None;
        }
        let (layout, chunk, len) = (
            self.config.layout,
            self.config.plan.segment_elems,
            self.shape.len as usize,
        );
        // Every buffer was checked to hold its segment's whole result when it finished, so no
        // slice fails; one that did would leave a hole the caller's length check catches.
        Some(
            self.buffers
                .iter()
                .enumerate()
                .flat_map(move |(segment, buffer)| {
                    let (piece, places) = layout.output_places(len, chunk, segment);
                    places.filter_map(move |(from, to)| {
                        Some((to, buffer.as_ref().slice(from..from + piece)?))
                    })
                }),
        )
    }

    /// Elements of the whole result for this rank's input.
    pub fn output_len_total(&self) -> usize {
        self.config.layout.output_total(self.shape.len as usize)
    }

    /// Why the operation aborted, once it has.
    pub fn abort_reason(&self) -> Option<AbortReason> {
        self.abort
    }

    /// Number of segments of the operation.
    pub fn segments(&self) -> usize {
        self.slots.len()
    }

    /// The configuration of the operation.
    pub fn config(&self) -> &ShellConfig {
        &self.config
    }

    /// An instance of the inner protocol, live or finished (with one segment: the one that ran
    /// it), for callers that read what the protocol knows beyond its result.
    pub fn any_instance(&self) -> Option<&P> {
        self.instances().next().or(self.spare.last())
    }

    fn stamp(&self, segment: usize) -> Stamp {
        Stamp {
            segment: segment as u32,
            ..self.shape
        }
    }

    /// Elements of `segment`'s result.
    fn output_len(&self, segment: usize) -> usize {
        let chunk = self.config.plan.segment_elems;
        self.config
            .layout
            .output_len(self.shape.len as usize, chunk, segment)
    }

    fn on_start(&mut self, now: Time, data: ValuesRef<'_>, out: &mut Outbox) {
        self.shape = Stamp {
            segment: 0,
            dtype: data.dtype(),
            len: data.len() as u64,
            attempt: self.config.attempt,
        };
        let (layout, chunk) = (self.config.layout, self.config.plan.segment_elems);
        let count = layout.segments(data.len(), chunk);
        self.slots.clear();
        self.slots.resize_with(count, || Slot::NotStarted);
        self.buffers.truncate(count);
        self.buffers.resize_with(count, || data.dtype().zeros(0));
        for segment in 0..count {
            let buffer = &mut self.buffers[segment];
            if buffer.dtype() != data.dtype() {
                // A segment of an earlier operation that never finished left its placeholder.
                *buffer = data.dtype().zeros(0);
            }
            buffer.clear();
            for range in layout.input_ranges(data.len(), chunk, segment) {
                let part = data.slice(range).unwrap_or(ValuesRef::Empty);
                let appended = buffer.extend_from(part);
                debug_assert!(appended.is_ok(), "a buffer keeps its type");
            }
        }
        self.phase = Phase::Running;
        let window = (self.config.plan.window.max(1) as usize).min(count);
        for segment in 0..window {
            self.start_segment(now, segment, out);
        }
        self.next_to_start = window;
    }

    /// Starts `segment`, handing it the failures known so far.
    fn start_segment(&mut self, now: Time, segment: usize, out: &mut Outbox) {
        if !matches!(self.slots.get(segment), Some(Slot::NotStarted))
            || self.phase != Phase::Running
        {
            return;
        }
        let mut protocol = (self.make)(&self.config, segment as u32, self.spare.pop());
        let input = std::mem::replace(&mut self.buffers[segment], Values::F64(Vec::new()));
        out.set_stamp(self.stamp(segment));
        let first = out.events().len();
        protocol.start_owned(now, input, out);
        for &peer in &self.failed {
            protocol.handle(now, Input::PeerFailed { peer }, out);
        }
        for &peer in &self.failed_links {
            protocol.handle(now, Input::LinkFailed { peer }, out);
        }
        self.slots[segment] = Slot::Running(protocol);
        self.running += 1;
        self.after_inner(now, segment, first, out);
    }

    /// Hands `input` to the live instance of `segment`.
    fn deliver(&mut self, now: Time, segment: usize, input: Input<'_>, out: &mut Outbox) {
        let stamp = self.stamp(segment);
        let first = out.events().len();
        match self.slots.get_mut(segment) {
            Some(Slot::Running(p)) | Some(Slot::Finished(Some(p))) => {
                out.set_stamp(stamp);
                p.handle(now, input, out);
            }
            _ => return,
        }
        self.after_inner(now, segment, first, out);
    }

    /// Looks at what a segment's instance reported from event `first` on: its completion and
    /// abort become the shell's business; everything else passes through.
    ///
    /// A peer one segment suspects (its own timeout took it for dead; the driver fences it, as
    /// fail-stop requires) is this rank's knowledge: every other segment is told at once, as
    /// of a failure, rather than each waiting out its own timeout for the same silent rank.
    fn after_inner(&mut self, now: Time, segment: usize, first: usize, out: &mut Outbox) {
        let mut completed = false;
        let mut aborted = None;
        let mut suspected: Vec<Rank> = Vec::new();
        out.retain_events_from(first, |event| match event {
            Event::Completed => {
                completed = true;
                false
            }
            Event::Aborted(reason) => {
                aborted = Some(*reason);
                false
            }
            Event::RoundDone { .. } => segment == 0,
            Event::Suspected { peer } => {
                suspected.push(*peer);
                true
            }
            _ => true,
        });
        if let Some(reason) = aborted {
            self.fail(reason, out);
            return;
        }
        if completed {
            self.finish_segment(now, segment, out);
        }
        // Telling the segments may make them suspect another peer, which comes back here;
        // each peer is told once, so the recursion ends within N.
        for peer in suspected {
            if !self.failed.contains(&peer) && self.phase == Phase::Running {
                self.failed.push(peer);
                self.hand_every_live(now, Input::PeerFailed { peer }, out);
            }
        }
    }

    fn finish_segment(&mut self, now: Time, segment: usize, out: &mut Outbox) {
        let expected_len = self.output_len(segment);
        let dtype = self.shape.dtype;
        let Some(Slot::Running(protocol)) = self.slots.get_mut(segment) else {
            return;
        };
        if !protocol.counts_every_rank() {
            self.partial_segments += 1;
        }
        self.words.clear();
        if protocol.contributors(&mut self.words) {
            match &self.contributors {
                None => self.contributors = Some(self.words.clone()),
                Some(first) if *first != self.words => self.mixed_segments += 1,
                Some(_) => {}
            }
        }
        if protocol.has_result() {
            let average = self.config.reduce == ReduceOp::Average;
            let buffer = &mut self.buffers[segment];
            let taken = if average {
                None
            } else {
                protocol.take_result()
            };
            match (taken, protocol.result()) {
                (Some(result), _) => *buffer = result,
                (None, Some(result)) if !average => buffer.copy_from(result),
                _ => {
                    protocol.estimate(&mut self.scratch);
                    *buffer = dtype.zeros(self.scratch.len());
                    write_f64(buffer, 0, &self.scratch);
                }
            }
            let written = buffer.len() == expected_len && buffer.dtype() == dtype;
            if !written {
                // A protocol whose result does not fit its segment: never hand it to the user.
                self.fail(AbortReason::Stopped, out);
                return;
            }
        } else {
            self.has_result = false;
        }
        let Slot::Running(protocol) = std::mem::replace(&mut self.slots[segment], Slot::NotStarted)
        else {
            return;
        };
        let keep =
            !protocol.settled() || protocol.serve_until().is_some() || protocol.answers_when_done();
        if keep {
            self.slots[segment] = Slot::Finished(Some(protocol));
        } else {
            self.retire(protocol);
            self.slots[segment] = Slot::Finished(None);
        }
        self.running -= 1;
        self.finished += 1;
        if self.finished == self.slots.len() {
            if self.mixed_segments > 0 && !self.accept_mixed {
                let segments = self.mixed_segments;
                self.fail(AbortReason::MixedContributors { segments }, out);
                return;
            }
            self.phase = Phase::Done;
            out.set_stamp(self.stamp(0));
            out.emit(Event::Completed);
            return;
        }
        while self.running < self.config.plan.window.max(1) as usize
            && self.next_to_start < self.slots.len()
        {
            let next = self.next_to_start;
            self.next_to_start += 1;
            self.start_segment(now, next, out);
        }
    }

    fn retire(&mut self, protocol: P) {
        let c = protocol.status().counters;
        self.retired.messages_sent += c.messages_sent;
        self.retired.messages_received += c.messages_received;
        self.retired.frames_rejected += c.frames_rejected;
        self.retired.faults_applied += c.faults_applied;
        if self.spare.len() <= self.config.plan.window as usize {
            self.spare.push(protocol);
        }
    }

    fn fail(&mut self, reason: AbortReason, out: &mut Outbox) {
        if self.phase == Phase::Aborted {
            return;
        }
        self.phase = Phase::Aborted;
        self.abort = Some(reason);
        out.emit(Event::Aborted(reason));
    }

    /// Ends the operation on a shape mismatch and tells every peer.
    fn mismatch(&mut self, peer: Rank, remote: (Dtype, u64), out: &mut Outbox) {
        if self.phase == Phase::Aborted {
            return;
        }
        let local = (self.shape.dtype, self.shape.len);
        out.set_stamp(self.stamp(0));
        let header = FrameHeader::new(
            self.config.algo,
            KIND_SHAPE_MISMATCH,
            self.config.op,
            self.config.rank,
            0,
        )
        .with_aux(u64::from(peer.0));
        // The notice names the rank and its shape; its own stamp is the sender's shape.
        let named = [remote.1, remote.0 as u64];
        for to in (0..self.config.size).map(Rank) {
            if to != self.config.rank {
                out.send(to, header, ValuesRef::U64(&named));
            }
        }
        self.fail(
            AbortReason::ShapeMismatch {
                peer,
                local,
                remote,
            },
            out,
        );
    }

    fn on_message(&mut self, now: Time, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let theirs = frame.header.stamp();
        if let Err(error) = frame.check(self.config.algo, self.config.op) {
            // Ranks pick an algorithm from the vector's size: a frame of this operation from
            // another algorithm that shows another shape (or reports one) is a mismatch, not
            // noise, or the two ranks would wait for each other until the time limit.
            let foreign_mismatch = frame.header.op_id == self.config.op.0
                && (frame.header.kind == KIND_SHAPE_MISMATCH
                    || (theirs.dtype != Dtype::Empty
                        && (theirs.dtype, theirs.len) != (self.shape.dtype, self.shape.len)));
            if !foreign_mismatch {
                out.emit(Event::Rejected { from, error });
                return;
            }
        }
        if theirs.attempt != self.config.attempt {
            out.emit(Event::Rejected {
                from,
                error: FrameError::Unexpected {
                    from: from.0,
                    what: "frame of another attempt of the operation",
                },
            });
            return;
        }
        if frame.header.kind == KIND_SHAPE_MISMATCH {
            // A peer saw two shapes: it names a rank and that rank's shape. Where that shape is
            // this rank's own, the peer itself holds the other one.
            let named = match frame.values() {
                Ok(ValuesRef::U64(&[len, dtype])) => Dtype::from_u8(dtype as u8).map(|d| (d, len)),
                _ => None,
            };
            let mine = (self.shape.dtype, self.shape.len);
            match named {
                Some(shape) if shape != mine => {
                    self.mismatch(Rank(frame.header.aux as u32), shape, out)
                }
                _ => self.mismatch(from, (theirs.dtype, theirs.len), out),
            }
            return;
        }
        // A frame sent outside any shell (an answer a driver gives for an operation it has not
        // started, 004's early ACK) carries no shape and no values: nothing to check.
        let shapeless = theirs.dtype == Dtype::Empty && frame.payload.is_empty();
        if !shapeless && (theirs.dtype, theirs.len) != (self.shape.dtype, self.shape.len) {
            self.mismatch(from, (theirs.dtype, theirs.len), out);
            return;
        }
        let segment = theirs.segment as usize;
        match self.slots.get(segment) {
            None => out.emit(Event::Rejected {
                from,
                error: FrameError::Unexpected {
                    from: from.0,
                    what: "segment beyond the operation's vector",
                },
            }),
            Some(Slot::NotStarted) => {
                self.start_segment(now, segment, out);
                self.deliver(now, segment, Input::Message { from, frame }, out);
            }
            Some(_) => self.deliver(now, segment, Input::Message { from, frame }, out),
        }
    }

    /// Every live instance's index.
    fn live(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&s| matches!(self.slots[s], Slot::Running(_) | Slot::Finished(Some(_))))
            .collect()
    }

    fn hand_every_live(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        for segment in self.live() {
            self.deliver(now, segment, input, out);
        }
    }

    fn on_fault(&mut self, now: Time, fault: LocalFault, out: &mut Outbox) {
        let LocalFault::FlipBit { var, bit } = fault;
        let target = match var {
            StateVar::Value { elem } => {
                let width = self.config.plan.segment_elems.max(1);
                let segment = elem as usize / width;
                let local = StateVar::Value {
                    elem: (elem as usize % width) as u32,
                };
                Some((segment, LocalFault::FlipBit { var: local, bit }))
            }
            _ => self.live().first().map(|&s| (s, fault)),
        };
        match target {
            Some((segment, fault)) if matches!(self.slots.get(segment), Some(Slot::Running(_))) => {
                self.deliver(now, segment, Input::Fault(fault), out)
            }
            _ => out.emit(Event::FaultIgnored(fault)),
        }
    }

    fn instances(&self) -> impl Iterator<Item = &P> {
        self.slots.iter().filter_map(|slot| match slot {
            Slot::Running(p) | Slot::Finished(Some(p)) => Some(p),
            _ => None,
        })
    }
}

impl<P: SegmentProtocol> Protocol for Segmented<P> {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        let before = out.stamp();
        match input {
            Input::Start { data } if self.phase == Phase::Idle => self.on_start(now, data, out),
            Input::Start { .. } => {}
            Input::Message { from, frame } => self.on_message(now, from, frame, out),
            Input::Timeout => {
                for segment in self.live() {
                    let due = match &self.slots[segment] {
                        Slot::Running(p) | Slot::Finished(Some(p)) => {
                            p.poll_timeout().is_some_and(|at| at <= now)
                        }
                        _ => false,
                    };
                    if due {
                        self.deliver(now, segment, Input::Timeout, out);
                    }
                }
            }
            Input::PeerFailed { peer } => {
                if !self.failed.contains(&peer) {
                    self.failed.push(peer);
                }
                self.hand_every_live(now, input, out);
            }
            Input::LinkFailed { peer } => {
                if !self.failed_links.contains(&peer) {
                    self.failed_links.push(peer);
                }
                self.hand_every_live(now, input, out);
            }
            Input::Fault(fault) => self.on_fault(now, fault, out),
            Input::Stop => {
                self.hand_every_live(now, input, out);
                self.fail(AbortReason::Stopped, out);
            }
        }
        out.set_stamp(before);
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.instances().filter_map(Protocol::poll_timeout).min()
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        if self.phase == Phase::Done || self.slots.len() <= 1 {
            match self.slots.first() {
                Some(Slot::Running(p)) if self.phase != Phase::Done => p.estimate(dst),
                _ => self.buffers.iter().for_each(|b| b.push_as_f64(dst)),
            }
            return;
        }
        let mut part = Vec::new();
        for (segment, slot) in self.slots.iter().enumerate() {
            match slot {
                Slot::Running(p) => {
                    p.estimate(&mut part);
                    dst.extend_from_slice(&part);
                }
                _ => {
                    if let Some(values) = self.buffers.get(segment) {
                        values.push_as_f64(dst);
                    }
                }
            }
        }
    }

    fn phase(&self) -> Phase {
        self.phase
    }

    fn has_result(&self) -> bool {
        self.phase == Phase::Done && self.has_result
    }

    /// The whole result where it lies in one buffer (one segment); a longer one is read with
    /// [`Segmented::results`].
    fn result(&self) -> Option<ValuesRef<'_>> {
        match self.buffers.as_slice() {
            [only] if self.has_result() => Some(only.as_ref()),
            _ => None,
        }
    }

    fn reads_clock(&self) -> bool {
        // Drivers ask before the operation starts, when no segment runs: a kept instance
        // answers for the next ones, else the protocol's type. Answering "true" for a
        // protocol that never reads the clock put every small operation on the driver's
        // timed path (a clock read per batch of frames, and no lean loop).
        match self.any_instance() {
            Some(p) => p.reads_clock(),
            None => P::reads_clock_unstarted(),
        }
    }

    fn status(&self) -> RankStatus {
        let mut counters = self.retired;
        let mut detail = None;
        let mut inner_iteration = None;
        for p in self.instances() {
            let status = p.status();
            inner_iteration.get_or_insert(status.iteration);
            let c = status.counters;
            counters.messages_sent += c.messages_sent;
            counters.messages_received += c.messages_received;
            counters.frames_rejected += c.frames_rejected;
            counters.faults_applied += c.faults_applied;
            counters.failures_noticed = counters.failures_noticed.max(c.failures_noticed);
            detail.get_or_insert(status.detail);
        }
        // One segment shows its protocol's own progress (rounds, pushes); many, how many
        // segments are done.
        let iteration = match (self.slots.len(), inner_iteration) {
            (0 | 1, Some(inner)) => inner,
            _ => self.finished as u32,
        };
        RankStatus {
            phase: self.phase,
            iteration,
            counters,
            detail: detail.unwrap_or_default(),
        }
    }

    fn settled(&self) -> bool {
        self.instances().all(Protocol::settled)
    }

    fn serve_until(&self) -> Option<Time> {
        self.instances().filter_map(Protocol::serve_until).max()
    }

    fn serves_until_all_finish(&self) -> bool {
        self.instances().any(Protocol::serves_until_all_finish)
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.instances().try_for_each(Protocol::check_invariants)
    }
}

impl<P: SegmentProtocol> super::Assembled for Segmented<P> {
    fn results(&self) -> Option<impl Iterator<Item = (usize, ValuesRef<'_>)> + '_> {
        Segmented::results(self)
    }

    fn output_len_total(&self) -> usize {
        Segmented::output_len_total(self)
    }

    fn abort_reason(&self) -> Option<AbortReason> {
        Segmented::abort_reason(self)
    }

    fn release_results(&mut self) {
        self.buffers = Vec::new();
        self.spare.clear();
    }
}

#[cfg(test)]
mod tests;
