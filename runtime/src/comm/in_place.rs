//! The ring and recursive halving and doubling allreduces over the caller's own vector, where
//! blocks travel as frames (TCP, UCX, libfabric, and shared memory below the single-copy
//! threshold).
//!
//! Their state machines in `ftcoll_algos` own their segments' buffers: the operation shell
//! copies the caller's vector into them when the operation starts and the result out of them
//! when it ends, two passes over the vector that carry no data anywhere. Here the steps and
//! blocks are the same ([`schedules`]) and the frames identical on the wire, but a block is
//! encoded straight from the caller's vector and an arriving block is combined (or copied)
//! straight into it. Segments and the window are the shell's: each segment of
//! [`SegmentPlan::segment_elems`] elements runs the whole schedule, at most `window` of them
//! started by this rank's own schedule, and a segment a peer has started is started here on
//! its first frame.
//!
//! Why the vector may be worked on in place: a block is copied into the outbox when it is
//! sent, so what a later step writes into it never reaches a frame already queued; a step's
//! send goes out only once the step before it has been applied; and each step takes a block
//! its own send of that step does not read (the ring: a rank sends block r − s − 1 and combines
//! block r − s − 2; halving: the half it keeps, not the half it sends; doubling: the partner's
//! share beside its own). The property tests below run every size and length in random
//! delivery orders against a plain reduction.
//!
//! Not fault tolerant: a failed peer aborts the operation at every rank, and what the vector
//! then holds is no result (the caller gets the error).

mod schedules;

use ftcoll_algos::protocol::{
    AbortReason, Assembled, Counters, Event, Input, LocalFault, Outbox, Phase, Protocol,
    RankStatus, SegmentPlan, StateVar, KIND_SHAPE_MISMATCH,
};
use ftcoll_algos::values::{divide_floats, Dtype, Element};
use ftcoll_algos::wire::{Frame, FrameError, Stamp};
use ftcoll_algos::{FrameHeader, OpId, Rank, ReduceOp, Time, ValuesRef};

pub(crate) use schedules::{RdbSteps, RhdSteps, RingSteps, StepSchedule};

/// One segment's progress at this rank.
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    started: bool,
    /// The next step whose frame this rank takes from its left neighbour.
    next_step: u32,
}

/// A block that arrived before its step (a transport that reorders): kept as a copy.
struct Early<T> {
    segment: u32,
    step: u32,
    values: Vec<T>,
}

/// One rank's part in an allreduce of `data` in place by schedule `S` (see the module docs).
pub(crate) struct InPlace<'a, T: Element, S: StepSchedule> {
    data: &'a mut [T],
    schedule: S,
    rank: Rank,
    size: u32,
    op: OpId,
    reduce: ReduceOp,
    plan: SegmentPlan,
    segments: Vec<Progress>,
    /// Segments started by this rank's own schedule (the window's cursor).
    next_to_start: usize,
    running: usize,
    finished: usize,
    early: Vec<Early<T>>,
    phase: Phase,
    abort: Option<AbortReason>,
    counters: Counters,
}

impl<'a, T: Element, S: StepSchedule> InPlace<'a, T, S> {
    /// Rank `rank` of `size`, operation `op`, reducing `data` with `reduce` in segments of
    /// `plan`.
    pub(crate) fn new(
        (rank, size, op, reduce): (Rank, u32, OpId, ReduceOp),
        plan: SegmentPlan,
        data: &'a mut [T],
    ) -> Self {
        let count = plan.segments(data.len());
        InPlace {
            data,
            schedule: S::of(rank, size),
            rank,
            size: size.max(1),
            op,
            reduce,
            plan,
            segments: vec![Progress::default(); count],
            next_to_start: 0,
            running: 0,
            finished: 0,
            early: Vec::new(),
            phase: Phase::Idle,
            abort: None,
            counters: Counters::default(),
        }
    }

    /// Steps of each segment.
    fn steps(&self) -> u32 {
        self.schedule.steps()
    }

    fn stamp(&self, segment: usize) -> Stamp {
        Stamp {
            segment: segment as u32,
            dtype: T::DTYPE,
            len: self.data.len() as u64,
            attempt: 0,
        }
    }

    fn shape(&self) -> (Dtype, u64) {
        (T::DTYPE, self.data.len() as u64)
    }

    /// Elements of `segment` in the whole vector.
    fn segment_range(&self, segment: usize) -> std::ops::Range<usize> {
        let width = self.plan.segment_elems.max(1);
        let start = segment.saturating_mul(width).min(self.data.len());
        start..start.saturating_add(width).min(self.data.len())
    }

    fn on_start(&mut self, out: &mut Outbox) {
        if self.phase != Phase::Idle {
            return;
        }
        self.phase = Phase::Running;
        if self.size == 1 {
            // Alone: the vector is the reduction (an average of one input is itself).
            return self.complete(out);
        }
        self.start_window(out);
    }

    /// Starts this rank's own segments until the window is full.
    fn start_window(&mut self, out: &mut Outbox) {
        let window = self.plan.window.max(1) as usize;
        // Each turn moves the cursor: bounded by the segments.
        while self.running < window && self.next_to_start < self.segments.len() {
            let segment = self.next_to_start;
            self.next_to_start += 1;
            self.start_segment(segment, out);
        }
    }

    fn start_segment(&mut self, segment: usize, out: &mut Outbox) {
        match self.segments.get_mut(segment) {
            Some(progress) if !progress.started => progress.started = true,
            _ => return,
        }
        self.running += 1;
        self.advance(segment, 0, out);
    }

    /// Sends from `step` on until a step that takes a frame, or finishes the segment.
    fn advance(&mut self, segment: usize, mut step: u32, out: &mut Outbox) {
        let whole = self.segment_range(segment);
        // Each turn handles one step of the schedule's few.
        while step < self.steps() {
            if let Some((to, range, kind)) = self.schedule.send(step, whole.len()) {
                let header = FrameHeader::new(S::ALGORITHM, kind, self.op, self.rank, step);
                out.set_stamp(self.stamp(segment));
                let block = (whole.start + range.start)..(whole.start + range.end);
                let block = self.data.get(block).unwrap_or_default();
                out.send(to, header, T::view(block));
                self.counters.messages_sent += 1;
            }
            if self.schedule.take(step, whole.len()).is_some() {
                self.segments[segment].next_step = step;
                return;
            }
            step += 1;
        }
        self.segments[segment].next_step = step;
        self.finish_segment(out);
    }

    /// Applies the block of `step` of `segment` (its next one) and sends what it makes ready.
    fn apply(&mut self, segment: usize, step: u32, block: &[T], out: &mut Outbox) -> bool {
        let whole = self.segment_range(segment);
        let Some(take) = self.schedule.take(step, whole.len()) else {
            return false;
        };
        let range = (whole.start + take.range.start)..(whole.start + take.range.end);
        let Some(mine) = self.data.get_mut(range) else {
            return false;
        };
        if mine.len() != block.len() {
            return false;
        }
        if take.combine {
            if T::combine(mine, block, self.reduce).is_err() {
                return false;
            }
        } else {
            mine.copy_from_slice(block);
        }
        self.advance(segment, step + 1, out);
        true
    }

    fn finish_segment(&mut self, out: &mut Outbox) {
        self.running -= 1;
        self.finished += 1;
        if self.finished == self.segments.len() {
            return self.complete(out);
        }
        self.start_window(out);
    }

    fn complete(&mut self, out: &mut Outbox) {
        if self.reduce == ReduceOp::Average {
            divide_floats(self.data, self.size);
        }
        self.phase = Phase::Done;
        out.set_stamp(self.stamp(0));
        out.emit(Event::Completed);
    }

    fn abort(&mut self, reason: AbortReason, out: &mut Outbox) {
        if matches!(self.phase, Phase::Done | Phase::Aborted) {
            return;
        }
        self.phase = Phase::Aborted;
        self.abort = Some(reason);
        out.emit(Event::Aborted(reason));
    }

    fn reject(&mut self, from: Rank, error: FrameError, out: &mut Outbox) {
        self.counters.frames_rejected += 1;
        out.emit(Event::Rejected { from, error });
    }

    /// Another rank's vector differs: every rank must end with the typed error, so this one
    /// names the shape to every peer before it aborts.
    fn mismatch(&mut self, peer: Rank, remote: (Dtype, u64), out: &mut Outbox) {
        if matches!(self.phase, Phase::Done | Phase::Aborted) {
            return;
        }
        out.set_stamp(self.stamp(0));
        let header = FrameHeader::new(S::ALGORITHM, KIND_SHAPE_MISMATCH, self.op, self.rank, 0);
        announce_mismatch(out, header, (self.rank, self.size), peer, remote);
        self.counters.messages_sent += u64::from(self.size - 1);
        let local = self.shape();
        self.abort(
            AbortReason::ShapeMismatch {
                peer,
                local,
                remote,
            },
            out,
        );
    }

    fn on_message(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let theirs = frame.header.stamp();
        let mine = self.shape();
        if let Err(error) = frame.check(S::ALGORITHM, self.op) {
            // Ranks pick an algorithm from the vector's size: a frame of this operation from
            // another algorithm that shows another shape (or reports one) is a mismatch, not
            // noise, or the two ranks would wait for each other until the time limit.
            let foreign_mismatch = frame.header.op_id == self.op.0
                && (frame.header.kind == KIND_SHAPE_MISMATCH
                    || (theirs.dtype != Dtype::Empty && (theirs.dtype, theirs.len) != mine));
            if !foreign_mismatch {
                return self.reject(from, error, out);
            }
        }
        if theirs.attempt != 0 {
            let what = "frame of another attempt of the operation";
            return self.reject(from, FrameError::Unexpected { from: from.0, what }, out);
        }
        if frame.header.kind == KIND_SHAPE_MISMATCH {
            // A peer saw two shapes and names a rank and that rank's shape; where that shape is
            // this rank's own, the peer itself holds the other one.
            let named = match frame.values() {
                Ok(ValuesRef::U64(&[len, dtype])) => Dtype::from_u8(dtype as u8).map(|d| (d, len)),
                _ => None,
            };
            return match named {
                Some(shape) if shape != mine => {
                    self.mismatch(Rank(frame.header.aux as u32), shape, out)
                }
                _ => self.mismatch(from, (theirs.dtype, theirs.len), out),
            };
        }
        if (theirs.dtype, theirs.len) != mine {
            return self.mismatch(from, (theirs.dtype, theirs.len), out);
        }
        let (segment, step) = (theirs.segment as usize, frame.header.step);
        let unexpected = |what| FrameError::Unexpected { from: from.0, what };
        // Who sends at a step and what kind is fixed by the schedule, whatever the length.
        let expected = self
            .schedule
            .take(step, 0)
            .map(|take| (take.from, take.kind));
        let checked = if segment >= self.segments.len() {
            Err(unexpected("segment beyond the operation's vector"))
        } else if expected.is_none() || expected.map(|e| e.1) != Some(frame.header.kind) {
            Err(unexpected("step out of range"))
        } else if expected.map(|e| e.0) != Some(from) || frame.header.source != from.0 {
            Err(unexpected("not this rank's peer at this step"))
        } else {
            frame.values().and_then(|values| {
                T::cast(values).ok_or(unexpected("block of another type than the vector"))
            })
        };
        let block = match checked {
            Ok(block) => block,
            Err(error) => return self.reject(from, error, out),
        };
        if self.phase != Phase::Running {
            // Frames of a finished or failed operation count for nothing.
            return;
        }
        self.start_segment(segment, out);
        let next = self.segments[segment].next_step;
        let held = |e: &Early<T>| e.segment == segment as u32 && e.step == step;
        if step < next || self.early.iter().any(held) {
            return self.reject(from, unexpected("duplicate step"), out);
        }
        self.counters.messages_received += 1;
        if step > next {
            // At most one frame per step of a started segment is held (duplicates are refused).
            self.early.push(Early {
                segment: segment as u32,
                step,
                values: block.to_vec(),
            });
            return;
        }
        if !self.apply(segment, step, block, out) {
            return self.reject(
                from,
                unexpected("block does not match the local vector"),
                out,
            );
        }
        self.drain_early(segment, out);
    }

    /// Applies held frames of `segment` that are now next.
    fn drain_early(&mut self, segment: usize, out: &mut Outbox) {
        // Each pass applies one held frame or stops: bounded by the held frames.
        while self.phase == Phase::Running {
            let next = self.segments[segment].next_step;
            let Some(at) = self
                .early
                .iter()
                .position(|e| e.segment == segment as u32 && e.step == next)
            else {
                return;
            };
            let held = self.early.swap_remove(at);
            if !self.apply(segment, held.step, &held.values, out) {
                let from = self
                    .schedule
                    .take(held.step, 0)
                    .map_or(self.rank, |t| t.from);
                let what = "block does not match the local vector";
                self.reject(from, FrameError::Unexpected { from: from.0, what }, out);
                return;
            }
        }
    }

    /// A flipped bit in the vector this rank reduces (its state is the caller's vector).
    fn on_fault(&mut self, fault: LocalFault, out: &mut Outbox) {
        let LocalFault::FlipBit { var, bit } = fault;
        let elem = match var {
            StateVar::Value { elem } => elem as usize,
            _ => return out.emit(Event::FaultIgnored(fault)),
        };
        let Some(slot) = self.data.get_mut(elem..elem + 1) else {
            return out.emit(Event::FaultIgnored(fault));
        };
        let mut one = T::view(slot).to_owned_values();
        let flipped = one.flip_bit(0, bit);
        match T::cast(one.as_ref()) {
            Some(value) if flipped => {
                slot.copy_from_slice(value);
                self.counters.faults_applied += 1;
                out.emit(Event::FaultApplied(fault));
            }
            _ => out.emit(Event::FaultIgnored(fault)),
        }
    }
}

/// Tells every peer of a group of `size` that rank `peer` holds a vector of shape `remote`
/// (the notice's own stamp is the sender's shape), so that every rank ends with the same
/// typed error instead of waiting for data that will never come.
pub(super) fn announce_mismatch(
    out: &mut Outbox,
    header: FrameHeader,
    (rank, size): (Rank, u32),
    peer: Rank,
    remote: (Dtype, u64),
) {
    let header = header.with_aux(u64::from(peer.0));
    let named = [remote.1, remote.0 as u64];
    for to in (0..size).map(Rank).filter(|&to| to != rank) {
        out.send(to, header, ValuesRef::U64(&named));
    }
}

impl<T: Element, S: StepSchedule> Protocol for InPlace<'_, T, S> {
    fn handle(&mut self, _now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Start { .. } => self.on_start(out),
            Input::Message { from, frame } => self.on_message(from, frame, out),
            Input::PeerFailed { .. } => {
                self.counters.failures_noticed += 1;
                // Every rank's input reaches every block: any failure fails the operation.
                self.abort(AbortReason::TooManyFailures, out);
            }
            Input::Stop => self.abort(AbortReason::Stopped, out),
            Input::Fault(fault) => self.on_fault(fault, out),
            Input::Timeout | Input::LinkFailed { .. } => {}
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        T::view(self.data).push_as_f64(dst);
    }

    fn phase(&self) -> Phase {
        self.phase
    }

    fn has_result(&self) -> bool {
        // The result is already in the caller's vector.
        false
    }

    fn reads_clock(&self) -> bool {
        false
    }

    fn status(&self) -> RankStatus {
        let steps: u64 = self.segments.iter().map(|p| u64::from(p.next_step)).sum();
        let done = steps / self.segments.len().max(1) as u64;
        RankStatus {
            phase: self.phase,
            iteration: done as u32,
            counters: self.counters,
            detail: self.schedule.detail(done as u32),
        }
    }
}

impl<T: Element, S: StepSchedule> Assembled for InPlace<'_, T, S> {
    fn results(&self) -> Option<impl Iterator<Item = (usize, ValuesRef<'_>)> + '_> {
        None::<std::iter::Empty<(usize, ValuesRef<'_>)>>
    }

    fn output_len_total(&self) -> usize {
        self.data.len()
    }

    fn abort_reason(&self) -> Option<AbortReason> {
        self.abort
    }
}

#[cfg(test)]
mod tests;
