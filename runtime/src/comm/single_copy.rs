//! The single-copy ring allreduce on one node: the ring's schedule
//! ([`ftcoll_algos::ring::reads`]) over the user's own vector, each block read straight out of
//! the left neighbour's vector by cross-memory attach
//! ([`crate::transport::shm::cross_memory`]). Only small notices travel through the shared
//! segment; a byte of the vector crosses memory once per step, with no staging copy in or out.
//!
//! This adapter is the I/O half: it performs the reads the schedule asks for and turns its
//! notices into frames, so that the executor runs it like any protocol (failure notices,
//! frames held for later operations, the operation's time limit). Like the ring it is not
//! fault tolerant: a failed peer aborts the operation at every rank.
//!
//! **Lending the vector.** A rank lends its vector to its right neighbour for the operation,
//! and the caller may reuse it the moment the call returns. On success a rank returns only once
//! its reader has sent Released. A rank that gives up (a failure, a mismatch) returns at once,
//! for its reader may never come to release it (the reader may have stopped in an earlier
//! operation); instead every rank keeps a *lent word* at a fixed address, the operation id and
//! attempt while its vector is lent and 0 otherwise, cleared the moment it gives up. A reader
//! checks the word after each block it reads: a block read while the owner had taken its
//! vector back is dropped, never combined into a result, and the reader ends with the cause
//! that made the owner give up.
//!
//! **Out of place.** With an input apart from the output, a rank lends both: the first step
//! of the reduce-scatter reads a block its left neighbour has not touched yet, which is its
//! input, and every later read reads a partial or final block of its output. The combine
//! writes input ⊕ neighbour's block into the output in one pass, so the input is read and
//! never written. In place, the two regions are the same vector.
//!
//! **Attempts.** The same ring runs the attempts of the fault-tolerant ring
//! ([`ftcoll_algos::ftring`]) as an [`AttemptRing`]. In place it keeps a copy of the input,
//! and every attempt after the first starts by writing it back into the vector; out of place
//! the input is intact and every attempt rewrites the whole output, so nothing is kept. The
//! attempt is part of the lent word, so a block that a reader of an abandoned attempt reads
//! while its owner has started the next one is dropped like any withdrawn block.

use ftcoll_algos::ftring::AttemptRing;
use ftcoll_algos::protocol::ShellConfig;
use ftcoll_algos::protocol::{
    AbortReason, Assembled, Counters, Event, Input, Outbox, Phase, Protocol, RankStatus,
    KIND_SHAPE_MISMATCH,
};
use ftcoll_algos::ring::reads::{ReadAction, ReadRing, KIND_ABANDONED, KIND_READY, KIND_RELEASED};
use ftcoll_algos::values::{divide_floats, Dtype, Element};
use ftcoll_algos::wire::{Frame, FrameError, Stamp};
use ftcoll_algos::{Algorithm, FrameHeader, OpId, Rank, ReduceOp, Time, ValuesRef};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use self::notice::ReadyNotice;
use super::in_place::announce_mismatch;
use super::saved_input::SavedInput;
use crate::transport::shm::cross_memory::{self, CrossMemoryError, PeerRegion};
use crate::transport::shm::peer_map::PeerMappings;
use crate::transport::shm::shared_heap::{self, SharedSpan};

mod notice;

/// Elements combined per read in the reduce-scatter: the bounce buffer they pass through stays
/// in the core's cache (256 KiB), so a combined byte crosses memory once.
const COMBINE_CHUNK_BYTES: usize = 256 << 10;

/// Why a single-copy operation gave up at this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SingleCopyFailure {
    /// The kernel refused the read (ptrace rules, a filter).
    Refused,
    /// A notice's region was not what the schedule reads (corrupted in flight), or a read
    /// fell outside the peer's memory.
    CorruptNotice,
    /// Another rank gave up for one of these reasons and said so.
    PeerGaveUp,
}

impl std::fmt::Display for SingleCopyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SingleCopyFailure::Refused => "the kernel refused a single-copy read between ranks",
            SingleCopyFailure::CorruptNotice => "a single-copy notice arrived corrupted",
            SingleCopyFailure::PeerGaveUp => "another rank's single-copy read failed",
        })
    }
}

/// Why a read does not count.
enum ReadEnd {
    /// The owner took its vector back during the read, or is gone.
    Withdrawn,
    /// The read failed while the vector was still lent.
    Failed(CrossMemoryError),
}

use ReadEnd::{Failed, Withdrawn};

/// Where the left neighbour's vectors and lent word lie, from its first notice.
#[derive(Clone, Copy, Debug)]
struct LeftRegions {
    /// Its input (the output itself when it reduces in place).
    input: PeerRegion,
    output: PeerRegion,
    lent_word: PeerRegion,
    /// The input's and output's memory files, where they are mapped here (read by plain
    /// loads; without one, by cross-memory attach).
    input_span: Option<SharedSpan>,
    output_span: Option<SharedSpan>,
}

/// What the single-copy ring keeps from call to call: cache-sized staging for combined
/// cross-memory reads, and the mappings of peers' shared vectors.
#[derive(Debug, Default)]
pub(crate) struct ReadScratch {
    bounce: Vec<u64>,
    mappings: PeerMappings,
}

/// One rank's part in a single-copy ring allreduce into `data`.
pub(crate) struct SingleCopyRing<'a, T: Element> {
    schedule: ReadRing,
    /// The output, which is also the input when `input` is `None` (in place).
    data: &'a mut [T],
    /// The input of an out-of-place operation, never written.
    input: Option<&'a [T]>,
    /// Staging and mappings, kept by the communicator from call to call.
    scratch: &'a mut ReadScratch,
    /// The input every attempt after the first starts from (the fault-tolerant ring only).
    saved: Option<SavedInput<'a>>,
    rank: Rank,
    size: u32,
    op: OpId,
    attempt: u32,
    reduce: ReduceOp,
    /// Where the left neighbour's vectors lie, from its first notice.
    left: Option<LeftRegions>,
    /// This rank's lent word (see the module docs), which peers read at its address.
    lent: Arc<AtomicU64>,
    phase: Phase,
    abort: Option<AbortReason>,
    failure: Option<SingleCopyFailure>,
    counters: Counters,
}

impl<'a, T: Element> SingleCopyRing<'a, T> {
    /// Into `data` from `input`, or in place without one (same length: the caller checks).
    /// `saved` keeps an in-place input for attempts after the first; a plain allreduce, and
    /// one out of place, need none.
    pub(crate) fn new(
        (rank, size, op, reduce): (Rank, u32, OpId, ReduceOp),
        (input, data): (Option<&'a [T]>, &'a mut [T]),
        (scratch, saved): (&'a mut ReadScratch, Option<&'a mut Vec<u64>>),
        lent: Arc<AtomicU64>,
    ) -> Self {
        debug_assert!(input.is_none_or(|input| input.len() == data.len()));
        SingleCopyRing {
            schedule: ReadRing::new(rank, size, data.len()),
            data,
            input,
            scratch,
            saved: saved.filter(|_| input.is_none()).map(SavedInput::new),
            rank,
            size,
            op,
            attempt: 0,
            reduce,
            left: None,
            lent,
            phase: Phase::Idle,
            abort: None,
            failure: None,
            counters: Counters::default(),
        }
    }

    /// Why the operation gave up, where it was this path's own reason.
    pub(crate) fn failure(&self) -> Option<SingleCopyFailure> {
        self.failure
    }

    fn stamp(&self) -> Stamp {
        Stamp {
            segment: 0,
            dtype: T::DTYPE,
            len: self.data.len() as u64,
            attempt: self.attempt,
        }
    }

    /// What the lent word holds while this attempt's vector is lent (never 0: ids start at 1,
    /// and attempts fit 24 bits).
    fn token(&self) -> u64 {
        (self.op.0 << 24) | u64::from(self.attempt & ftcoll_algos::wire::MAX_ATTEMPT)
    }

    /// The lent word's address, which notices carry.
    fn lent_word(&self) -> u64 {
        self.lent.as_ptr() as u64
    }

    fn header(&self, kind: u8, step: u32) -> FrameHeader {
        FrameHeader::new(Algorithm::Ring, kind, self.op, self.rank, step)
    }

    fn own_region(&self) -> PeerRegion {
        PeerRegion {
            pid: std::process::id(),
            addr: self.data.as_ptr() as u64,
            bytes: std::mem::size_of_val(self.data) as u64,
        }
    }

    /// Where the input lies: the output's address when in place.
    fn input_addr(&self) -> u64 {
        self.input
            .map_or(self.data.as_ptr() as u64, |input| input.as_ptr() as u64)
    }

    /// Where this rank's vectors lie, for its reader: by address, and by memory file where
    /// they live in the shared heap.
    fn ready_notice(&self) -> ReadyNotice {
        let bytes = std::mem::size_of_val(self.data);
        let output_span = shared_heap::lookup(self.data.as_ptr().cast(), bytes);
        let input_span = match self.input {
            Some(input) => shared_heap::lookup(input.as_ptr().cast(), bytes),
            None => output_span,
        };
        ReadyNotice {
            output: self.own_region(),
            input_addr: self.input_addr(),
            lent_word: self.lent_word(),
            output_span,
            input_span,
        }
    }

    fn abort(&mut self, reason: AbortReason, out: &mut Outbox) {
        if !matches!(self.phase, Phase::Done | Phase::Aborted) {
            // The vector goes back to the caller (or to the next attempt) now.
            self.lent.store(0, Ordering::Release);
            self.phase = Phase::Aborted;
            self.abort = Some(reason);
            out.emit(Event::Aborted(reason));
        }
    }

    /// Abandons the operation: no more reads, and a Release to the left neighbour, which
    /// would otherwise wait for it; the vector goes back to the caller at once (the lent
    /// word, cleared by the caller, keeps the reader from using what it reads after that).
    fn stop(&mut self, reason: AbortReason, out: &mut Outbox) {
        if matches!(self.phase, Phase::Done | Phase::Aborted) {
            return;
        }
        if let Some(left) = self.schedule.stop() {
            out.send(left, self.header(KIND_RELEASED, 0), ValuesRef::Empty);
            self.counters.messages_sent += 1;
        }
        self.abort(reason, out);
    }

    /// Gives up for a reason of this path and tells every peer, so that none waits for a
    /// notice that will not come.
    fn give_up(&mut self, failure: SingleCopyFailure, out: &mut Outbox) {
        if matches!(self.phase, Phase::Done | Phase::Aborted) {
            return;
        }
        self.failure = Some(failure);
        let header = self.header(KIND_ABANDONED, 0);
        for to in (0..self.size).map(Rank).filter(|&to| to != self.rank) {
            out.send(to, header, ValuesRef::Empty);
            self.counters.messages_sent += 1;
        }
        self.stop(AbortReason::Stopped, out);
    }

    /// Does what the schedule asks until it waits.
    fn drive(&mut self, out: &mut Outbox) {
        // Each turn finishes a read or sends a notice, and the schedule asks for at most
        // 2N − 1 notices and 2N − 2 reads.
        let bound = 4 * self.schedule.steps() as usize + 4;
        for _ in 0..bound {
            if self.phase != Phase::Running {
                return;
            }
            match self.schedule.next_action() {
                Some(ReadAction::Ready { to, done }) => {
                    let words = self.ready_notice().words(self.token(), self.rank, done);
                    out.send(to, self.header(KIND_READY, done), ValuesRef::U64(&words));
                    self.counters.messages_sent += 1;
                }
                Some(ReadAction::Release { to }) => {
                    out.send(to, self.header(KIND_RELEASED, 0), ValuesRef::Empty);
                    self.counters.messages_sent += 1;
                }
                Some(ReadAction::Read { block, combine, .. }) => {
                    let read = self.read(block, combine);
                    match self.still_lent(read) {
                        Ok(()) => self.schedule.read_done(),
                        // The left neighbour took its vector back (it gave up), or died: the
                        // block is not counted, and the cause (its notice, or the failure
                        // notice after the fence) ends the operation here.
                        Err(Withdrawn) => return,
                        Err(Failed(CrossMemoryError::Refused { .. })) => {
                            return self.give_up(SingleCopyFailure::Refused, out)
                        }
                        Err(Failed(_)) => {
                            return self.give_up(SingleCopyFailure::CorruptNotice, out)
                        }
                    }
                }
                None => break,
            }
        }
        if self.schedule.finished() {
            // The reader released the vector: nothing reads it any more, so the average may
            // now turn the sum in it into the mean (the copying ring's shell does the same
            // from the estimate).
            if self.reduce == ReduceOp::Average {
                divide_floats(self.data, self.size);
            }
            self.lent.store(0, Ordering::Release);
            self.phase = Phase::Done;
            out.emit(Event::Completed);
        }
    }

    /// Reads elements `block` of the left neighbour's vector into the same elements here:
    /// plain loads where its vector is mapped here, cross-memory reads otherwise.
    fn read(
        &mut self,
        block: std::ops::Range<usize>,
        combine: bool,
    ) -> Result<(), CrossMemoryError> {
        let elem = std::mem::size_of::<T>();
        // The first step reads a block its owner has not reached: its input (see the module
        // docs); every later step reads what the owner wrote into its output.
        let first = self.schedule.done() == 0;
        let Some((left, span)) = self.left.map(|l| match first {
            true => (l.input, l.input_span),
            false => (l.output, l.output_span),
        }) else {
            return Err(CrossMemoryError::OutOfRegion {
                pid: 0,
                offset: 0,
                end: 0,
                bytes: 0,
            });
        };
        let offset = |i: usize| (i * elem) as u64;
        let out_of_region = || CrossMemoryError::OutOfRegion {
            pid: left.pid,
            offset: offset(block.start),
            end: offset(block.end),
            bytes: left.bytes,
        };
        let Some(mine) = self.data.get_mut(block.clone()) else {
            return Err(out_of_region());
        };
        let ReadScratch { bounce, mappings } = &mut *self.scratch;
        let theirs: Option<&[T]> = match span {
            Some(span) => {
                let at = span.offset.saturating_add(offset(block.start));
                let bytes = mappings
                    .bytes(left.pid, span.serial, at, block.len() * elem)
                    .ok_or_else(out_of_region)?;
                Some(bytemuck::try_cast_slice(bytes).map_err(|_| out_of_region())?)
            }
            None => None,
        };
        // A fault-tolerant attempt keeps the input of what it writes first, part by part as
        // the combine passes over it (see [`SavedInput`]), so that the read overwrites lines
        // the save just brought into the cache.
        let mut saved = self.saved.as_mut();
        let chunk = (COMBINE_CHUNK_BYTES / elem).max(1);
        if theirs.is_none() && combine {
            bounce.resize(COMBINE_CHUNK_BYTES.div_ceil(8), 0);
        }
        let staging: &mut [T] = bytemuck::cast_slice_mut(&mut bounce[..]);
        for (k, part) in mine.chunks_mut(chunk).enumerate() {
            let at = block.start + k * chunk;
            if let Some(saved) = saved.as_mut() {
                saved.save(at, part);
            }
            let got: &[T] = match (theirs, combine) {
                (Some(theirs), _) => &theirs[k * chunk..k * chunk + part.len()],
                (None, false) => {
                    cross_memory::read(&left, offset(at), bytemuck::cast_slice_mut(part))?;
                    continue;
                }
                (None, true) => {
                    let got = &mut staging[..part.len()];
                    cross_memory::read(&left, offset(at), bytemuck::cast_slice_mut(got))?;
                    got
                }
            };
            if !combine {
                part.copy_from_slice(got);
                continue;
            }
            // Same type and length by construction; an error here is a bug, not a result.
            let combined = match self.input {
                Some(input) => T::combine_into(part, &input[at..at + got.len()], got, self.reduce),
                None => T::combine(part, got, self.reduce),
            };
            if combined.is_err() {
                return Err(out_of_region());
            }
        }
        Ok(())
    }

    /// The left neighbour's vectors from its notice, mapping those in its shared heap (once:
    /// the mappings are kept from call to call). A vector that cannot be mapped is read by
    /// cross-memory attach, which reports a refusal of its own.
    fn left_regions(&mut self, notice: &ReadyNotice) -> LeftRegions {
        let pid = notice.output.pid;
        let mut mapped = |span: Option<SharedSpan>| {
            let span = span?;
            match self.scratch.mappings.ensure(pid, &span) {
                Ok(()) => Some(span),
                Err(error) => {
                    tracing::debug!(%error, "reading the left neighbour by cross-memory attach");
                    None
                }
            }
        };
        let (output_span, input_span) = (mapped(notice.output_span), mapped(notice.input_span));
        let at = |addr, bytes| PeerRegion { pid, addr, bytes };
        LeftRegions {
            input: at(notice.input_addr, notice.output.bytes),
            output: notice.output,
            lent_word: at(notice.lent_word, 8),
            input_span,
            output_span,
        }
    }

    /// Whether a read counts: the left neighbour's lent word must still hold this operation
    /// after the read (a read that failed because the owner took its vector back counts as
    /// withdrawn, not as a corrupt notice).
    fn still_lent(&self, read: Result<(), CrossMemoryError>) -> Result<(), ReadEnd> {
        let Some(LeftRegions {
            lent_word: word, ..
        }) = self.left
        else {
            return Err(Withdrawn);
        };
        let mut lent = [0u8; 8];
        match cross_memory::read(&word, 0, &mut lent) {
            Ok(()) if u64::from_le_bytes(lent) == self.token() => read.map_err(Failed),
            Ok(()) | Err(CrossMemoryError::Gone { .. }) => Err(Withdrawn),
            Err(error) => Err(Failed(read.err().unwrap_or(error))),
        }
    }

    fn on_frame(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let reject = |out: &mut Outbox, error| out.emit(Event::Rejected { from, error });
        if frame.header.op_id != self.op.0 {
            return reject(
                out,
                FrameError::WrongOperation {
                    expected: self.op.0,
                    got: frame.header.op_id,
                },
            );
        }
        // The notices that end an operation count whatever shape the sender has: a rank
        // that saw a mismatch still releases its left neighbour.
        if frame.header.algo == Algorithm::Ring.wire_id() {
            match frame.header.kind {
                KIND_RELEASED => {
                    self.counters.messages_received += 1;
                    return self.schedule.on_released();
                }
                KIND_ABANDONED => {
                    self.counters.messages_received += 1;
                    if self.phase == Phase::Running {
                        self.failure = Some(SingleCopyFailure::PeerGaveUp);
                    }
                    return self.stop(AbortReason::Stopped, out);
                }
                _ => {}
            }
        }
        let theirs = frame.header.stamp();
        let mine = (T::DTYPE, self.data.len() as u64);
        if frame.header.kind == KIND_SHAPE_MISMATCH {
            let named = match frame.values() {
                Ok(ValuesRef::U64(&[len, dtype])) => Dtype::from_u8(dtype as u8).map(|d| (d, len)),
                _ => None,
            };
            let (peer, remote) = match named {
                Some(shape) if shape != mine => (Rank(frame.header.aux as u32), shape),
                _ => (from, (theirs.dtype, theirs.len)),
            };
            return self.mismatch(peer, remote, out);
        }
        // Ranks pick their algorithm from the vector's size: a frame of this operation from
        // another algorithm, or of another shape, means the vectors differ.
        if (theirs.dtype, theirs.len) != mine && theirs.dtype != Dtype::Empty {
            return self.mismatch(from, (theirs.dtype, theirs.len), out);
        }
        if let Err(error) = frame.check(Algorithm::Ring, self.op) {
            return reject(out, error);
        }
        self.counters.messages_received += 1;
        match frame.header.kind {
            KIND_READY => {
                let step = frame.header.step;
                let notice = match frame.values() {
                    Ok(ValuesRef::U64(words)) => {
                        ReadyNotice::parse(words, self.token(), from, step)
                    }
                    _ => None,
                };
                let expected = std::mem::size_of_val(self.data) as u64;
                let left = (from.0 + 1) % self.size == self.rank.0;
                match notice.filter(|n| n.output.bytes == expected && left) {
                    Some(notice) => {
                        self.left = Some(self.left_regions(&notice));
                        self.schedule.on_ready(step);
                    }
                    None => self.give_up(SingleCopyFailure::CorruptNotice, out),
                }
            }
            _ => reject(
                out,
                FrameError::Unexpected {
                    from: from.0,
                    what: "frame of another ring path",
                },
            ),
        }
    }

    /// Another rank's vector differs: every rank must end with the typed error, so this one
    /// names the shape to every peer before it aborts.
    fn mismatch(&mut self, peer: Rank, remote: (Dtype, u64), out: &mut Outbox) {
        if matches!(self.phase, Phase::Done | Phase::Aborted) {
            return;
        }
        let header = self.header(KIND_SHAPE_MISMATCH, 0);
        announce_mismatch(out, header, (self.rank, self.size), peer, remote);
        self.counters.messages_sent += u64::from(self.size.saturating_sub(1));
        let local = (T::DTYPE, self.data.len() as u64);
        self.stop(
            AbortReason::ShapeMismatch {
                peer,
                local,
                remote,
            },
            out,
        );
    }
}

impl<T: Element> Protocol for SingleCopyRing<'_, T> {
    fn handle(&mut self, _now: Time, input: Input<'_>, out: &mut Outbox) {
        out.set_stamp(self.stamp());
        match input {
            Input::Start { .. } if self.phase == Phase::Idle => {
                if let (1, Some(input)) = (self.size, self.input) {
                    // Alone: the reduction is the input, and no step will write it.
                    self.data.copy_from_slice(input);
                }
                self.lent.store(self.token(), Ordering::Release);
                self.phase = Phase::Running;
                self.drive(out);
            }
            Input::Message { from, frame } => {
                self.on_frame(from, frame, out);
                self.drive(out);
            }
            Input::PeerFailed { peer } => {
                self.counters.failures_noticed += 1;
                let left = Rank((self.rank.0 + self.size - 1) % self.size.max(1));
                if let (true, Some(regions)) = (peer == left, self.left) {
                    // Its memory lives on while mapped here.
                    self.scratch.mappings.forget(regions.output.pid);
                }
                self.stop(AbortReason::PeerFailed(peer), out);
            }
            Input::Stop => self.abort(AbortReason::Stopped, out),
            // The vector is the caller's, not state of the protocol's to corrupt.
            Input::Fault(fault) => out.emit(Event::FaultIgnored(fault)),
            Input::Start { .. } | Input::Timeout | Input::LinkFailed { .. } => {}
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
        RankStatus {
            phase: self.phase,
            iteration: self.schedule.done(),
            counters: self.counters,
            detail: Default::default(),
        }
    }
}

impl<T: Element> Assembled for SingleCopyRing<'_, T> {
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

impl<T: Element> AttemptRing for SingleCopyRing<'_, T> {
    fn keep_input(&mut self, _data: ValuesRef<'_>) {
        // The input is the vector itself (the operation starts with nothing else).
        if let Some(saved) = self.saved.as_mut() {
            saved.reset(self.data);
        }
    }

    fn shape(&self) -> (Dtype, u64) {
        (T::DTYPE, self.data.len() as u64)
    }

    fn restart(&mut self, shell: ShellConfig) {
        self.rank = shell.rank;
        self.size = shell.size;
        self.op = shell.op;
        self.attempt = shell.attempt;
        self.schedule = ReadRing::new(shell.rank, shell.size, self.data.len());
        self.left = None;
        self.phase = Phase::Idle;
        self.abort = None;
    }

    fn start(&mut self, now: Time, out: &mut Outbox) {
        if self.attempt > 0 {
            // The last attempt left partial sums in the vector; it is no longer lent (the
            // attempt ended here, which cleared the lent word).
            if let Some(saved) = self.saved.as_mut() {
                saved.restore(self.data);
            }
        }
        self.handle(
            now,
            Input::Start {
                data: ValuesRef::Empty,
            },
            out,
        );
    }

    fn input_estimate(&self, dst: &mut Vec<f64>) {
        match self.input {
            Some(input) => {
                dst.clear();
                T::view(input).push_as_f64(dst);
            }
            None => self.estimate(dst),
        }
    }
}

impl super::Communicator {
    /// Allreduce of `input` into `data`, or of `data` in place without an input, by the
    /// single-copy ring (see the module docs): called by
    /// [`super::Communicator::allreduce_ring`] and [`super::Communicator::allreduce_into`]
    /// where the transport allows it.
    pub(super) fn allreduce_single_copy<T: Element>(
        &mut self,
        input: Option<&[T]>,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<super::Outcome, super::CommError> {
        let shell = self.shell_config(Algorithm::Ring, op, T::DTYPE, super::run::Slack::NONE)?;
        let mut scratch = std::mem::take(&mut self.read_scratch);
        let mut protocol = SingleCopyRing::new(
            (shell.rank, shell.size, shell.op, op),
            (input, data),
            (&mut scratch, None),
            Arc::clone(&self.lent),
        );
        let ended = self.execute(&mut protocol, ValuesRef::Empty);
        // Before the vector goes back to the caller, however the operation ended.
        self.lent.store(0, Ordering::Release);
        let failure = protocol.failure();
        let concluded = ended.and_then(|ended| {
            // The result is in `data` already: nothing to write back.
            self.conclude(&mut protocol, ended, &mut [] as &mut [T], |_, _| {})
        });
        self.read_scratch = scratch;
        match (concluded, failure) {
            (Err(_), Some(reason)) => Err(super::CommError::SingleCopy { reason }),
            (concluded, _) => concluded.map(|(outcome, _)| outcome),
        }
    }
}
