//! The single-copy ring allreduce: the ring's schedule ([`ftcoll_algos::ring::reads`]) over
//! the user's own vector, each block read straight out of the left neighbour's vector. On one
//! node the reads are cross-memory attach or plain loads of a mapped shared-heap vector
//! ([`CrossMemorySource`]): a byte of the vector crosses memory once per step, with no
//! staging copy in or out. Over a network with remote reads ([`RemoteSource`], UCX or libfabric) a block
//! crosses the network once into the reader's buffer and is combined or copied from there:
//! the owner never copies its vector into send buffers. Only small notices travel as frames.
//!
//! This adapter is the I/O half: it performs the reads the schedule asks for (through its
//! [`BlockSource`]) and turns its notices into frames, so that the executor runs it like any
//! protocol (failure notices, frames held for later operations, the operation's time limit). Like the ring it is not
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
//! that made the owner give up. Over a network the word is exposed like the vector and read
//! by a remote read after each block's reads complete, so the word's read comes after the
//! block's at the owner. A rank's vector is registered for the call only (unless it lives in
//! the shared heap, see [`run`]): with an RDMA device, or libfabric's tcp provider (which
//! checks every read against the live registrations), a read that comes after the owner gave
//! up fails on the deregistered memory; UCX's emulation over TCP serves it from whatever the
//! owner's memory holds at that address, a read the lent word then discards, but one that
//! faults if the application has unmapped it meanwhile. That, and its speed, are why the
//! emulated reads are taken only when asked for (`FTCOLL_SINGLE_COPY=on`).
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
//! while its owner has started the next one is dropped like any withdrawn block. Those
//! attempts take the single copy on one node only.

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

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::in_place::announce_mismatch;
use super::saved_input::SavedInput;

mod cross_memory;
mod notice;
mod remote;
mod run;

pub(crate) use cross_memory::{CrossMemorySource, ReadScratch};
pub(crate) use remote::{OwnExposures, RemoteSource};

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
    /// A remote read over the network failed while its owner still lent the vector.
    RemoteRead,
    /// Another rank gave up for one of these reasons and said so.
    PeerGaveUp,
}

impl std::fmt::Display for SingleCopyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SingleCopyFailure::Refused => "the kernel refused a single-copy read between ranks",
            SingleCopyFailure::CorruptNotice => "a single-copy notice arrived corrupted",
            SingleCopyFailure::RemoteRead => "a remote read of a neighbour's vector failed",
            SingleCopyFailure::PeerGaveUp => "another rank's single-copy read failed",
        })
    }
}

/// Why a read does not count.
pub(crate) enum ReadEnd {
    /// The owner took its vector back during the read, or is gone: the cause (its notice, or
    /// the failure notice after the fence) ends the operation.
    Withdrawn,
    /// The read failed while the vector was still lent: this rank gives up, and says so.
    GiveUp(SingleCopyFailure),
}

/// Where this rank's vectors and lent word lie (addresses in this process).
pub(crate) struct OwnVectors {
    pub(crate) output_addr: u64,
    pub(crate) output_bytes: u64,
    /// The output's address when in place.
    pub(crate) input_addr: u64,
    pub(crate) lent_word: u64,
}

/// Where a read's block goes: this rank's vectors, and how to combine.
pub(crate) struct ReadTarget<'t, 'a, T> {
    pub(crate) data: &'t mut [T],
    pub(crate) input: Option<&'a [T]>,
    pub(crate) saved: Option<&'t mut SavedInput<'a>>,
    pub(crate) reduce: ReduceOp,
}

/// How the single-copy ring reaches its left neighbour's vector: by cross-memory attach on one
/// node ([`CrossMemorySource`]), by remote reads over a network ([`RemoteSource`]).
pub(crate) trait BlockSource {
    /// The payload of a Ready notice naming this rank's vectors to its reader, for the
    /// attempt `token`, from `from`, after `done` steps.
    fn ready_notice(&self, own: &OwnVectors, expects: (u64, Rank, u32)) -> Vec<u64>;

    /// Takes the left neighbour's Ready notice; `false` if it is not whole or not of a vector
    /// of `bytes` bytes.
    fn take_notice(&mut self, words: &[u64], expects: (u64, Rank, u32), bytes: u64) -> bool;

    /// Reads elements `block` of the left neighbour's input (`first`) or output into the
    /// same elements of `target`, combining or copying, then checks that the owner still
    /// lends the vector (its lent word holds `token`).
    fn read<T: Element>(
        &mut self,
        block: Range<usize>,
        first_and_combine: (bool, bool),
        target: ReadTarget<'_, '_, T>,
        token: u64,
    ) -> Result<(), ReadEnd>;

    /// The left neighbour failed.
    fn left_failed(&mut self);
}

/// Writes `got` into `part` (elements from `at`): copied, or combined with what `part` holds
/// (in place) or with the input's elements (out of place). An error is a length mismatch,
/// a bug rather than a result.
fn place<T: Element>(
    part: &mut [T],
    got: &[T],
    (at, input, combine, reduce): (usize, Option<&[T]>, bool, ReduceOp),
) -> Result<(), ()> {
    if !combine {
        if part.len() != got.len() {
            return Err(());
        }
        part.copy_from_slice(got);
        return Ok(());
    }
    let combined = match input {
        Some(input) => match input.get(at..at + got.len()) {
            Some(acc) => T::combine_into(part, acc, got, reduce),
            None => return Err(()),
        },
        None => T::combine(part, got, reduce),
    };
    combined.map_err(|_| ())
}

/// One rank's part in a single-copy ring allreduce into `data`.
pub(crate) struct SingleCopyRing<'a, T: Element, S: BlockSource> {
    schedule: ReadRing,
    /// The output, which is also the input when `input` is `None` (in place).
    data: &'a mut [T],
    /// The input of an out-of-place operation, never written.
    input: Option<&'a [T]>,
    /// How the left neighbour's blocks are read.
    source: S,
    /// The input every attempt after the first starts from (the fault-tolerant ring only).
    saved: Option<SavedInput<'a>>,
    rank: Rank,
    size: u32,
    op: OpId,
    attempt: u32,
    reduce: ReduceOp,
    /// This rank's lent word (see the module docs), which peers read at its address.
    lent: Arc<AtomicU64>,
    phase: Phase,
    abort: Option<AbortReason>,
    failure: Option<SingleCopyFailure>,
    counters: Counters,
}

impl<'a, T: Element, S: BlockSource> SingleCopyRing<'a, T, S> {
    /// Into `data` from `input`, or in place without one (same length: the caller checks).
    /// `saved` keeps an in-place input for attempts after the first; a plain allreduce, and
    /// one out of place, need none.
    pub(crate) fn new(
        (rank, size, op, reduce): (Rank, u32, OpId, ReduceOp),
        (input, data): (Option<&'a [T]>, &'a mut [T]),
        (source, saved): (S, Option<&'a mut Vec<u64>>),
        lent: Arc<AtomicU64>,
    ) -> Self {
        debug_assert!(input.is_none_or(|input| input.len() == data.len()));
        SingleCopyRing {
            schedule: ReadRing::new(rank, size, data.len()),
            data,
            input,
            source,
            saved: saved.filter(|_| input.is_none()).map(SavedInput::new),
            rank,
            size,
            op,
            attempt: 0,
            reduce,
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

    /// Where this rank's vectors lie, for its reader's notice.
    fn own_vectors(&self) -> OwnVectors {
        let output_addr = self.data.as_ptr() as u64;
        OwnVectors {
            output_addr,
            output_bytes: std::mem::size_of_val(self.data) as u64,
            input_addr: self.input.map_or(output_addr, |i| i.as_ptr() as u64),
            lent_word: self.lent_word(),
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
                    let expects = (self.token(), self.rank, done);
                    let words = self.source.ready_notice(&self.own_vectors(), expects);
                    out.send(to, self.header(KIND_READY, done), ValuesRef::U64(&words));
                    self.counters.messages_sent += 1;
                }
                Some(ReadAction::Release { to }) => {
                    out.send(to, self.header(KIND_RELEASED, 0), ValuesRef::Empty);
                    self.counters.messages_sent += 1;
                }
                Some(ReadAction::Read { block, combine, .. }) => {
                    let first = self.schedule.done() == 0;
                    let token = self.token();
                    let target = ReadTarget {
                        data: &mut *self.data,
                        input: self.input,
                        saved: self.saved.as_mut(),
                        reduce: self.reduce,
                    };
                    match self.source.read(block, (first, combine), target, token) {
                        Ok(()) => self.schedule.read_done(),
                        // The left neighbour took its vector back (it gave up), or died: the
                        // block is not counted, and the cause ends the operation here.
                        Err(ReadEnd::Withdrawn) => return,
                        Err(ReadEnd::GiveUp(failure)) => return self.give_up(failure, out),
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
                let expected = std::mem::size_of_val(self.data) as u64;
                let left = (from.0 + 1) % self.size == self.rank.0;
                let taken = match frame.values() {
                    Ok(ValuesRef::U64(words)) if left => {
                        let expects = (self.token(), from, step);
                        self.source.take_notice(words, expects, expected)
                    }
                    _ => false,
                };
                match taken {
                    true => self.schedule.on_ready(step),
                    false => self.give_up(SingleCopyFailure::CorruptNotice, out),
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

impl<T: Element, S: BlockSource> Protocol for SingleCopyRing<'_, T, S> {
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
                if peer == left {
                    self.source.left_failed();
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

impl<T: Element, S: BlockSource> Assembled for SingleCopyRing<'_, T, S> {
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

impl<T: Element, S: BlockSource> AttemptRing for SingleCopyRing<'_, T, S> {
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
