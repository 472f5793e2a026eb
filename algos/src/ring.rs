//! Ring allreduce: a reduce-scatter then an allgather around a ring of the N ranks.
//!
//! The vector is cut into N blocks. In each of the N − 1 reduce-scatter steps a rank sends one
//! block to its right neighbour and combines the block arriving from its left; afterwards rank
//! r holds block (r + 1) mod N fully reduced. In the N − 1 allgather steps the reduced blocks
//! travel once more around the ring. Every rank sends and receives 2(N − 1)/N of the vector in
//! all, the least any allreduce moves (Patarasuk and Yuan's bandwidth bound), against log2 N
//! whole vectors for recursive doubling: the algorithm for large vectors. Under the operation
//! shell ([`crate::protocol::Segmented`]) each segment runs its own ring, so the rings of
//! successive segments pipeline.
//!
//! Not fault tolerant: a failed peer aborts the operation.

pub mod reads;

use crate::protocol::{Counters, Detail, Event, Input, Outbox, Phase, Protocol, RankStatus};
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::Time;
use crate::values::{ReduceOp, Values, ValuesRef};
use crate::wire::{Frame, FrameError, FrameHeader, OpId};

/// Vectors from this many bytes on go around the ring in the library's allreduce over shared
/// memory, up to 8 ranks (below, recursive doubling's log2 N steps cost less than the ring's
/// 2(N − 1)), however the ranks are placed. With the ring working on the caller's vector, on
/// the 2-core development VM (`bench allreduce --algo rdb|ring`, 3 runs, µs) the ring was
/// behind at 4 KiB (n = 2: 2.32 against 2.09; n = 4 on 2 cores: 16.0 against 14.4) and ahead
/// from 8 KiB (2.92 against 3.23; 16.1 against 17.4). On the lent 16-core machine with a
/// core per rank it was behind everywhere at 4 KiB, and at 8 KiB ahead at 2 and 8 ranks,
/// behind at 4 (9.1 against 8.4) and well behind at 16 (29.6 against 21.9), about even at 16
/// ranks and 16 KiB (37.0 against 34.5, 37.5 against 42.3), ahead from 64 KiB. See
/// docs/performance.md and [`ring_min_bytes`].
pub const RING_MIN_BYTES: usize = 8 << 10;

/// How the shared-memory threshold grows past 8 ranks: the ring's 2(N − 1) steps against
/// recursive doubling's log2 N.
pub const RING_MIN_BYTES_PER_RANK: usize = 1 << 10;

/// The shared-memory threshold at two ranks, where recursive doubling is one exchange of the
/// whole vector and the ring two of half: with both over the caller's vector, on the 2-core
/// VM with a core per rank (`bench allreduce --algo rdb|ring --sizes 2 --repeat 3`, µs, rdb
/// against ring), 8 KiB 2.51 against 3.26, 16 KiB 4.41 against 4.93, 32 KiB 6.66 against
/// 7.49, then even: 64 KiB 11.07 against 11.11, 256 KiB 40.8 against 40.9.
pub const RING_MIN_BYTES_PAIR: usize = 64 << 10;

/// From how many bytes an allreduce over `size` ranks takes the ring: on shared memory
/// [`RING_MIN_BYTES`], or [`RING_MIN_BYTES_PER_RANK`] times the ranks where that is more
/// (16 KiB at 16 ranks), [`RING_MIN_BYTES_PAIR`] at two ranks; over a network
/// [`RING_MIN_BYTES_NETWORK`].
pub fn ring_min_bytes(size: u32, network: bool) -> usize {
    match (network, size) {
        (true, _) => RING_MIN_BYTES_NETWORK,
        (false, 2) => RING_MIN_BYTES_PAIR,
        (false, _) => RING_MIN_BYTES.max(size as usize * RING_MIN_BYTES_PER_RANK),
    }
}

/// The same threshold over a network transport, where each of the ring's 2(N − 1) steps
/// costs a system call and a wake-up: over TCP on the development VM the ring was behind up
/// to 32 KiB (n = 4: 107 against 95 µs) and ahead from 64 KiB (130 against 153).
pub const RING_MIN_BYTES_NETWORK: usize = 64 << 10;

/// Whether an allreduce of `bytes` over `size` ranks should take the ring, given the
/// threshold `min_bytes` (normally [`ring_min_bytes`]).
pub fn prefer_ring(size: u32, bytes: usize, min_bytes: usize) -> bool {
    size >= 2 && bytes >= min_bytes
}

/// Message kind of a reduce-scatter step.
pub const KIND_REDUCE_SCATTER: u8 = 1;
/// Message kind of an allgather step.
pub const KIND_ALLGATHER: u8 = 2;

/// Elements `start..end` of block `b` (mod `size`) of a vector of `len` elements cut into
/// `size` blocks as even as can be.
pub fn block_range(b: u32, size: u32, len: usize) -> std::ops::Range<usize> {
    let n = size.max(1) as usize;
    let b = b as usize % n;
    (b * len / n)..((b + 1) * len / n)
}

/// The block `rank` sends at step `s` of a phase, and the one it takes: reduce-scatter
/// (`combine`) step s sends block r − s − 1 and combines block r − s − 2, so that rank r ends
/// with block r reduced; allgather step s sends block r − s (its own first) and stores block
/// r − s − 1 (all mod N).
pub fn phase_blocks(rank: u32, size: u32, combine: bool, s: u32) -> (u32, u32) {
    let (n, r) = (size.max(1), rank);
    let back = |k: u32| (r + 2 * n - k % n) % n;
    if combine {
        (back((s + 1) % n), back((s + 2) % n))
    } else {
        (back(s % n), back((s + 1) % n))
    }
}

/// Which collective the ring runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RingMode {
    /// Reduce-scatter then allgather: every rank gets the whole reduced vector.
    #[default]
    Allreduce,
    /// Reduce-scatter only: the input is N equal blocks, rank r gets block r reduced.
    ReduceScatter,
    /// Allgather only: the input is one block, every rank gets the N blocks in rank order.
    Allgather,
}

/// The operation shell's maker of ring allreduce segments ([`crate::protocol::MakeSegment`]):
/// restarts a finished instance in place where there is one.
pub fn allreduce_segment(
    shell: &crate::protocol::ShellConfig,
    _segment: u32,
    spare: Option<RingAllreduce>,
) -> RingAllreduce {
    let config = RingConfig {
        rank: shell.rank,
        size: shell.size,
        op: shell.reduce,
        op_id: shell.op,
        mode: RingMode::Allreduce,
    };
    match spare {
        Some(mut ring) => {
            ring.restart(config);
            ring
        }
        None => RingAllreduce::new(config),
    }
}

/// One rank's part in a ring collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the ring.
    pub size: u32,
    /// The operator.
    pub op: ReduceOp,
    /// The operation id frames carry.
    pub op_id: OpId,
    /// The collective.
    pub mode: RingMode,
}

/// The ring allreduce state machine (see the module docs).
#[derive(Debug)]
pub struct RingAllreduce {
    config: RingConfig,
    phase: Phase,
    value: Values,
    /// The next step whose frame this rank takes from its left neighbour (0 .. 2N − 2).
    next_step: u32,
    /// Frames that came before their step (a transport that reorders): their payloads.
    early: Vec<(u32, Values)>,
    counters: Counters,
}

impl RingAllreduce {
    /// A rank of a ring allreduce.
    pub fn new(config: RingConfig) -> RingAllreduce {
        RingAllreduce {
            config,
            phase: Phase::Idle,
            value: Values::F64(Vec::new()),
            next_step: 0,
            early: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// Makes the instance a fresh one for `config`, keeping its allocations.
    pub fn restart(&mut self, config: RingConfig) {
        self.config = config;
        self.phase = Phase::Idle;
        self.value.clear();
        self.next_step = 0;
        self.early.clear();
        self.counters = Counters::default();
    }

    /// Steps in all: N − 1 of reduce-scatter, N − 1 of allgather (one phase alone for the
    /// reduce-scatter and the allgather).
    fn steps(&self) -> u32 {
        let phase = self.config.size.saturating_sub(1);
        match self.config.mode {
            RingMode::Allreduce => 2 * phase,
            RingMode::ReduceScatter | RingMode::Allgather => phase,
        }
    }

    /// Whether `step` combines (reduce-scatter) rather than copies (allgather), and its number
    /// within its phase.
    fn phase_of(&self, step: u32) -> (bool, u32) {
        let phase = self.config.size.saturating_sub(1);
        match self.config.mode {
            RingMode::Allreduce if step < phase => (true, step),
            RingMode::Allreduce => (false, step - phase),
            RingMode::ReduceScatter => (true, step),
            RingMode::Allgather => (false, step),
        }
    }

    /// Elements `start..end` of block `b`.
    fn block(&self, b: u32) -> std::ops::Range<usize> {
        block_range(b, self.config.size, self.value.len())
    }

    /// The block this rank sends at `step`, and the one it takes at `step` (see
    /// [`phase_blocks`]).
    fn blocks_of(&self, step: u32) -> (u32, u32) {
        let (combine, s) = self.phase_of(step);
        phase_blocks(self.config.rank.0, self.config.size, combine, s)
    }

    fn left(&self) -> Rank {
        Rank((self.config.rank.0 + self.config.size - 1) % self.config.size)
    }

    fn right(&self) -> Rank {
        Rank((self.config.rank.0 + 1) % self.config.size)
    }

    fn send_step(&mut self, step: u32, out: &mut Outbox) {
        if step >= self.steps() {
            return;
        }
        let (send, _) = self.blocks_of(step);
        let kind = if self.phase_of(step).0 {
            KIND_REDUCE_SCATTER
        } else {
            KIND_ALLGATHER
        };
        let header = FrameHeader::new(
            Algorithm::Ring,
            kind,
            self.config.op_id,
            self.config.rank,
            step,
        );
        let range = self.block(send);
        let payload = self.value.as_ref().slice(range).unwrap_or(ValuesRef::Empty);
        out.send(self.right(), header, payload);
        self.counters.messages_sent += 1;
    }

    fn start(&mut self, data: ValuesRef<'_>, out: &mut Outbox) {
        if self.phase != Phase::Idle {
            return;
        }
        self.value.copy_from(data);
        self.begin(out);
    }

    fn begin(&mut self, out: &mut Outbox) {
        if self.config.mode == RingMode::Allgather {
            // The own block goes to its place among N.
            let own = std::mem::replace(&mut self.value, Values::F64(Vec::new()));
            let n = self.config.size as usize;
            self.value = own.dtype().zeros(own.len() * n);
            let placed = self
                .value
                .write_at(self.config.rank.index() * own.len(), own.as_ref());
            debug_assert!(placed.is_ok());
        }
        self.phase = Phase::Running;
        if self.steps() == 0 {
            self.finish(out);
            return;
        }
        self.send_step(0, out);
        // Frames that arrived before the start wait in `early`.
        self.drain_early(out);
    }

    /// Applies the frame of `step` (the next one) and sends what it makes ready.
    fn apply(
        &mut self,
        step: u32,
        payload: ValuesRef<'_>,
        out: &mut Outbox,
    ) -> Result<(), FrameError> {
        let (_, take) = self.blocks_of(step);
        let range = self.block(take);
        if payload.len() != range.len() || payload.dtype() != self.value.dtype() {
            return Err(FrameError::Unexpected {
                from: self.left().0,
                what: "block does not match the local vector",
            });
        }
        let applied = if self.phase_of(step).0 {
            self.value.combine_at(range.start, self.config.op, payload)
        } else {
            self.value.write_at(range.start, payload)
        };
        if applied.is_err() {
            return Err(FrameError::Unexpected {
                from: self.left().0,
                what: "block does not combine with the local vector",
            });
        }
        self.next_step = step + 1;
        out.emit(Event::RoundDone { round: step });
        if self.next_step == self.steps() {
            self.finish(out);
        } else {
            self.send_step(self.next_step, out);
        }
        Ok(())
    }

    fn drain_early(&mut self, out: &mut Outbox) {
        // Each pass applies one held frame or stops; the held frames bound it.
        while let Some(pos) = self.early.iter().position(|(s, _)| *s == self.next_step) {
            let (step, values) = self.early.swap_remove(pos);
            if let Err(error) = self.apply(step, values.as_ref(), out) {
                self.reject(self.left(), error, out);
            }
        }
    }

    fn finish(&mut self, out: &mut Outbox) {
        self.phase = Phase::Done;
        out.emit(Event::Completed);
    }

    fn reject(&mut self, from: Rank, error: FrameError, out: &mut Outbox) {
        self.counters.frames_rejected += 1;
        out.emit(Event::Rejected { from, error });
    }

    fn on_message(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        let step = frame.header.step;
        let checked = frame
            .check(Algorithm::Ring, self.config.op_id)
            .and_then(|()| {
                let unexpected = |what| FrameError::Unexpected { from: from.0, what };
                let kind = if self.phase_of(step).0 {
                    KIND_REDUCE_SCATTER
                } else {
                    KIND_ALLGATHER
                };
                if frame.header.kind != KIND_REDUCE_SCATTER && frame.header.kind != KIND_ALLGATHER {
                    return Err(FrameError::UnknownKind {
                        algo: Algorithm::Ring,
                        kind: frame.header.kind,
                    });
                }
                if from != self.left() || frame.header.source != from.0 {
                    return Err(unexpected("not this rank's left neighbour"));
                }
                if step >= self.steps() || frame.header.kind != kind {
                    return Err(unexpected("step out of range"));
                }
                if step < self.next_step || self.early.iter().any(|(s, _)| *s == step) {
                    return Err(unexpected("duplicate step"));
                }
                frame.values()
            });
        let payload = match checked {
            Ok(payload) => payload,
            Err(error) => return self.reject(from, error, out),
        };
        self.counters.messages_received += 1;
        if self.phase != Phase::Running || step != self.next_step {
            self.early.push((step, payload.to_owned_values()));
            return;
        }
        if let Err(error) = self.apply(step, payload, out) {
            return self.reject(from, error, out);
        }
        self.drain_early(out);
    }
}

impl crate::protocol::SegmentProtocol for RingAllreduce {
    fn reads_clock_unstarted() -> bool {
        // Never arms a timer nor reads `now` (see its `reads_clock`).
        false
    }

    fn start_owned(&mut self, _now: Time, data: Values, out: &mut Outbox) {
        if self.phase != Phase::Idle {
            return;
        }
        self.value = data;
        self.begin(out);
    }

    fn take_result(&mut self) -> Option<Values> {
        match (self.phase, self.config.mode) {
            (Phase::Done, RingMode::ReduceScatter) => self.result().map(|v| v.to_owned_values()),
            (Phase::Done, _) => Some(std::mem::replace(&mut self.value, Values::F64(Vec::new()))),
            _ => None,
        }
    }
}

impl Protocol for RingAllreduce {
    fn handle(&mut self, _now: Time, input: Input<'_>, out: &mut Outbox) {
        let state = (&mut self.phase, &mut self.value, &mut self.counters);
        match crate::protocol::fail_stop_input(input, state, out) {
            Some(Input::Start { data }) => self.start(data, out),
            Some(Input::Message { from, frame }) => self.on_message(from, frame, out),
            _ => {}
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn result(&self) -> Option<ValuesRef<'_>> {
        match (self.phase, self.config.mode) {
            (Phase::Done, RingMode::ReduceScatter) => {
                self.value.as_ref().slice(self.block(self.config.rank.0))
            }
            (Phase::Done, _) => Some(self.value.as_ref()),
            _ => None,
        }
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        match self.result() {
            Some(result) => result.push_as_f64(dst),
            None => self.value.push_as_f64(dst),
        }
        if self.config.op == ReduceOp::Average && self.phase == Phase::Done {
            crate::values::divide_floats(dst, self.config.size);
        }
    }

    fn phase(&self) -> Phase {
        self.phase
    }

    fn reads_clock(&self) -> bool {
        false
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: self.phase,
            iteration: self.next_step,
            counters: self.counters,
            detail: Detail::Ring {
                steps_done: self.next_step,
                steps_total: self.steps(),
            },
        }
    }
}

#[cfg(test)]
mod tests;
