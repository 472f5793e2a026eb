//! Recursive halving and doubling allreduce (Rabenseifner): a reduce-scatter by recursive
//! halving, then an allgather by recursive doubling.
//!
//! Over p ranks, p a power of two, the vector is cut into p blocks. In halving step i
//! (i = 1 .. log2 p) a rank exchanges with the rank whose number differs in bit log2 p − i:
//! of the blocks it holds it sends the half its partner keeps and combines the partner's
//! copy of the half it keeps, so that after log2 p steps rank v holds block v reduced. The
//! doubling steps run the partners in the opposite order and send the reduced blocks back, a
//! rank's share doubling each step. Every rank sends and receives 2(p − 1)/p of the vector, as
//! around the ring, in 2 log2 p steps instead of 2(N − 1): the algorithm for large vectors where
//! a step costs more than the bytes it moves (many ranks, or more ranks than cores).
//!
//! N not a power of two: with p the largest power of two below N and r = N − p, the first 2r
//! ranks pair up: each even one sends its whole vector to the odd one above it (step 0) and
//! takes the whole result back from it at the end (step 2 log2 p + 1); the odd ones and the
//! ranks from 2r on run the power-of-two schedule as ranks 0 .. p − 1 (MPICH's way).
//!
//! Each block is reduced at exactly one rank and copied to the others, so every rank ends with
//! the same bits, floats included. Not fault tolerant: a failed peer aborts the operation.

use crate::protocol::{Counters, Detail, Event, Input, Outbox, Phase, Protocol, RankStatus};
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::Time;
use crate::values::{ReduceOp, Values, ValuesRef};
use crate::wire::{Frame, FrameError, FrameHeader, OpId};

/// Over a network, recursive halving and doubling replaces the ring in the library's allreduce
/// below this many bytes (from the ring's threshold, 64 KiB). Both over the caller's vector,
/// over TCP on the 2-core VM (`bench allreduce --transport tcp --algo ring|rhd --repeat 3`, ms,
/// ring against rhd): n = 4 at 1 MiB 1.57 against 1.12, 16 MiB 25.4 against 24.7, 128 MiB 197
/// against 222; n = 8 at 1 MiB 4.63 against 3.37, 16 MiB 71.7 against 59.5, 128 MiB 507
/// against 445; n = 16 at 1 MiB 6.87 against 8.99, 16 MiB 179 against 140. In: 16 MiB; out:
/// 128 MiB, where the ring's pipelined segments won at n = 4.
pub const RHD_NETWORK_MAX_BYTES: usize = 32 << 20;

/// On shared memory with more ranks than cores, recursive halving and doubling replaces the
/// ring below this many bytes, which is where the single-copy ring takes over: each of the
/// ring's 2(N − 1) steps waits for a peer to be scheduled. The 2-core VM, µs, ring against rhd
/// (both over the caller's vector): n = 4 at 64 KiB 58.0 against 52.3, 256 KiB 246 against
/// 138, 512 KiB 410 against 321; n = 8 at 64 KiB 136 against 120, 256 KiB 498 against 417,
/// 512 KiB 959 against 893; from 8 KiB (the ring's threshold there) rhd's fewer steps won
/// too (n = 8 at 8 KiB 56.2 against 33.2). With a core per rank the ring's threshold was
/// measured against recursive doubling on 16 cores, not against this: the ring stays there.
pub const RHD_SHM_OVERSUBSCRIBED_MAX_BYTES: usize = 1 << 20;

/// Whether the library's allreduce of `bytes` over `size` ranks, past the ring's threshold,
/// takes recursive halving and doubling instead of the ring: only where `size` is a power of
/// two from 4 (other sizes pay two steps of the whole vector: at n = 3 over TCP it lost from
/// 256 KiB; at n = 2 the two schedules move the same blocks in the same two steps), below
/// [`RHD_NETWORK_MAX_BYTES`] over a network, below [`RHD_SHM_OVERSUBSCRIBED_MAX_BYTES`] on an
/// oversubscribed node.
pub fn prefer_rhd(
    size: u32,
    bytes: usize,
    network: bool,
    placement: crate::direct::Placement,
) -> bool {
    let limit = match (network, placement) {
        (true, _) => RHD_NETWORK_MAX_BYTES,
        (false, crate::direct::Placement::Oversubscribed) => RHD_SHM_OVERSUBSCRIBED_MAX_BYTES,
        (false, crate::direct::Placement::OwnCores) => 0,
    };
    size >= 4 && size.is_power_of_two() && bytes < limit
}

/// Message kind of the step-0 frame: an even rank's whole vector to the odd one above it.
pub const KIND_FOLD: u8 = 1;
/// Message kind of a halving step.
pub const KIND_HALVE: u8 = 2;
/// Message kind of a doubling step.
pub const KIND_DOUBLE: u8 = 3;
/// Message kind of the last frame: the whole result back to an even rank of the first 2r.
pub const KIND_UNFOLD: u8 = 4;

/// The operation shell's maker of segments ([`crate::protocol::MakeSegment`]): restarts a
/// finished instance in place where there is one.
pub fn allreduce_segment(
    shell: &crate::protocol::ShellConfig,
    _segment: u32,
    spare: Option<HalvingDoubling>,
) -> HalvingDoubling {
    let config = RhdConfig {
        rank: shell.rank,
        size: shell.size,
        op: shell.reduce,
        op_id: shell.op,
    };
    match spare {
        Some(mut rhd) => {
            rhd.restart(config);
            rhd
        }
        None => HalvingDoubling::new(config),
    }
}

/// One rank's part in a recursive halving and doubling allreduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RhdConfig {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the operation.
    pub size: u32,
    /// The operator.
    pub op: ReduceOp,
    /// The operation id frames carry.
    pub op_id: OpId,
}

/// What a rank does in the schedule (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// An even rank of the first 2r: hands its vector to `keeper` and takes the result back.
    Folded { keeper: Rank },
    /// A rank of the power-of-two schedule, numbered `vrank` there; `extra` is the even rank
    /// whose vector it folds in, if any.
    Active { vrank: u32, extra: Option<Rank> },
}

/// One rank's schedule (see the module docs): at each step, which blocks of p it sends to whom
/// and which it takes from whom. A pure function of the rank, the size and the step, so the
/// state machine here and the runtime's allreduce over the caller's vector follow the same one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RhdSchedule {
    role: Role,
    /// p, the largest power of two at most N.
    pow2: u32,
    /// log2 p.
    levels: u32,
    /// r = N − p.
    extras: u32,
}

/// What a rank sends at a step: to whom, blocks `lo..hi` of p, the frame's kind.
pub type RhdSend = (Rank, (u32, u32), u8);
/// What a rank takes at a step: from whom, the blocks it lands on, the kind, whether it
/// combines them (or writes them).
pub type RhdTake = (Rank, (u32, u32), u8, bool);

impl RhdSchedule {
    /// The schedule of `rank` of `size`.
    pub fn of(rank: u32, size: u32) -> RhdSchedule {
        let size = size.max(1);
        let pow2 = 1u32 << (31 - size.leading_zeros());
        let extras = size - pow2;
        let role = if rank < 2 * extras && rank.is_multiple_of(2) {
            Role::Folded {
                keeper: Rank(rank + 1),
            }
        } else if rank < 2 * extras {
            Role::Active {
                vrank: rank / 2,
                extra: Some(Rank(rank - 1)),
            }
        } else {
            Role::Active {
                vrank: rank - extras,
                extra: None,
            }
        };
        RhdSchedule {
            role,
            pow2,
            levels: pow2.trailing_zeros(),
            extras,
        }
    }

    /// Steps of the schedule: the fold, log2 p halving, log2 p doubling, the unfold.
    pub fn steps(&self) -> u32 {
        self.last() + 1
    }

    /// Elements of blocks `lo..hi` of p in a vector of `len`.
    pub fn elements(&self, (lo, hi): (u32, u32), len: usize) -> std::ops::Range<usize> {
        let p = self.pow2 as usize;
        (lo as usize * len / p)..(hi as usize * len / p)
    }

    /// The real rank of schedule rank `vrank`.
    fn real(&self, vrank: u32) -> Rank {
        if vrank < self.extras {
            Rank(2 * vrank + 1)
        } else {
            Rank(vrank + self.extras)
        }
    }

    /// The last step: the unfold (2 log2 p + 1).
    fn last(&self) -> u32 {
        2 * self.levels + 1
    }

    /// Whether `step` is a halving step (1 ..= log2 p) and its mask, or a doubling step.
    fn mask(&self, step: u32) -> u32 {
        if step <= self.levels {
            self.pow2 >> step
        } else {
            1 << (step - self.levels - 1)
        }
    }

    /// The partner of schedule rank `vrank` at halving or doubling `step`.
    fn partner(&self, vrank: u32, step: u32) -> Rank {
        self.real(vrank ^ self.mask(step))
    }

    /// The blocks schedule rank `vrank` holds before halving or doubling `step`: all p before
    /// the first halving step, half as many after each, block `vrank` alone after the last,
    /// twice as many after each doubling step.
    fn held(&self, vrank: u32, step: u32) -> (u32, u32) {
        let width = if step <= self.levels {
            self.pow2 >> (step - 1)
        } else {
            1 << (step - self.levels - 1)
        };
        let lo = vrank / width * width;
        (lo, lo + width)
    }

    /// What this rank sends at `step`, if anything.
    pub fn send(&self, step: u32) -> Option<RhdSend> {
        let whole = (0, self.pow2);
        match self.role {
            Role::Folded { keeper } => (step == 0).then_some((keeper, whole, KIND_FOLD)),
            Role::Active { extra, .. } if step == self.last() => {
                extra.map(|to| (to, whole, KIND_UNFOLD))
            }
            Role::Active { .. } if step == 0 || step > self.last() => None,
            Role::Active { vrank, .. } => {
                let to = self.partner(vrank, step);
                let (lo, hi) = self.held(vrank, step);
                if step <= self.levels {
                    let mid = (lo + hi) / 2;
                    let lower = vrank & self.mask(step) == 0;
                    Some((to, if lower { (mid, hi) } else { (lo, mid) }, KIND_HALVE))
                } else {
                    Some((to, (lo, hi), KIND_DOUBLE))
                }
            }
        }
    }

    /// What this rank takes at `step`, if anything.
    pub fn take(&self, step: u32) -> Option<RhdTake> {
        let whole = (0, self.pow2);
        match self.role {
            Role::Folded { keeper } => {
                (step == self.last()).then_some((keeper, whole, KIND_UNFOLD, false))
            }
            Role::Active { extra, .. } if step == 0 => {
                extra.map(|from| (from, whole, KIND_FOLD, true))
            }
            Role::Active { .. } if step >= self.last() => None,
            Role::Active { vrank, .. } => {
                let from = self.partner(vrank, step);
                let (lo, hi) = self.held(vrank, step);
                let lower = vrank & self.mask(step) == 0;
                if step <= self.levels {
                    let mid = (lo + hi) / 2;
                    let kept = if lower { (lo, mid) } else { (mid, hi) };
                    Some((from, kept, KIND_HALVE, true))
                } else {
                    let width = hi - lo;
                    let theirs = if lower {
                        (hi, hi + width)
                    } else {
                        (lo - width, lo)
                    };
                    Some((from, theirs, KIND_DOUBLE, false))
                }
            }
        }
    }
}

/// The recursive halving and doubling state machine (see the module docs).
#[derive(Debug)]
pub struct HalvingDoubling {
    config: RhdConfig,
    schedule: RhdSchedule,
    phase: Phase,
    value: Values,
    /// The next step whose frame this rank takes.
    next_step: u32,
    /// Frames that came before their step (a transport that reorders): their payloads.
    early: Vec<(u32, Values)>,
    counters: Counters,
}

impl HalvingDoubling {
    /// A rank of a recursive halving and doubling allreduce.
    pub fn new(config: RhdConfig) -> HalvingDoubling {
        HalvingDoubling {
            config,
            schedule: RhdSchedule::of(config.rank.0, config.size),
            phase: Phase::Idle,
            value: Values::F64(Vec::new()),
            next_step: 0,
            early: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// Makes the instance a fresh one for `config`, keeping its allocations.
    pub fn restart(&mut self, config: RhdConfig) {
        self.config = config;
        self.schedule = RhdSchedule::of(config.rank.0, config.size);
        self.phase = Phase::Idle;
        self.value.clear();
        self.next_step = 0;
        self.early.clear();
        self.counters = Counters::default();
    }

    /// Elements of blocks `lo..hi` of p.
    fn elements(&self, blocks: (u32, u32)) -> std::ops::Range<usize> {
        self.schedule.elements(blocks, self.value.len())
    }

    /// Sends this rank's frame of `step`, if it has one.
    fn send_step(&mut self, step: u32, out: &mut Outbox) {
        let Some((to, blocks, kind)) = self.schedule.send(step) else {
            return;
        };
        let header = FrameHeader::new(
            Algorithm::Rhd,
            kind,
            self.config.op_id,
            self.config.rank,
            step,
        );
        let payload = self
            .value
            .as_ref()
            .slice(self.elements(blocks))
            .unwrap_or(ValuesRef::Empty);
        out.send(to, header, payload);
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
        self.phase = Phase::Running;
        if self.config.size <= 1 {
            return self.finish(out);
        }
        self.advance(0, out);
        // Frames that arrived before the start wait in `early`.
        self.drain_early(out);
    }

    /// Sends from `step` on until the next step that takes a frame (or the end).
    fn advance(&mut self, mut step: u32, out: &mut Outbox) {
        // Each turn handles one step; there are 2 log2 p + 2 of them.
        while step < self.schedule.steps() {
            self.send_step(step, out);
            if self.schedule.take(step).is_some() {
                self.next_step = step;
                return;
            }
            step += 1;
        }
        self.next_step = step;
        self.finish(out);
    }

    /// Applies the frame of `step` (the next one) and goes on.
    fn apply(
        &mut self,
        step: u32,
        payload: ValuesRef<'_>,
        out: &mut Outbox,
    ) -> Result<(), FrameError> {
        let Some((from, blocks, _, combine)) = self.schedule.take(step) else {
            return Err(FrameError::Unexpected {
                from: self.config.rank.0,
                what: "no frame is taken at this step",
            });
        };
        let range = self.elements(blocks);
        if payload.len() != range.len() || payload.dtype() != self.value.dtype() {
            return Err(FrameError::Unexpected {
                from: from.0,
                what: "blocks do not match the local vector",
            });
        }
        let applied = if combine {
            self.value.combine_at(range.start, self.config.op, payload)
        } else {
            self.value.write_at(range.start, payload)
        };
        if applied.is_err() {
            return Err(FrameError::Unexpected {
                from: from.0,
                what: "blocks do not combine with the local vector",
            });
        }
        out.emit(Event::RoundDone { round: step });
        self.advance(step + 1, out);
        Ok(())
    }

    fn drain_early(&mut self, out: &mut Outbox) {
        // Each pass applies one held frame or stops; the held frames bound it.
        while let Some(pos) = self
            .early
            .iter()
            .position(|(s, _)| *s == self.next_step && self.phase == Phase::Running)
        {
            let (step, values) = self.early.swap_remove(pos);
            if let Err(error) = self.apply(step, values.as_ref(), out) {
                let from = self.schedule.take(step).map_or(self.config.rank, |t| t.0);
                self.reject(from, error, out);
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
            .check(Algorithm::Rhd, self.config.op_id)
            .and_then(|()| {
                let unexpected = |what| FrameError::Unexpected { from: from.0, what };
                if !(KIND_FOLD..=KIND_UNFOLD).contains(&frame.header.kind) {
                    return Err(FrameError::UnknownKind {
                        algo: Algorithm::Rhd,
                        kind: frame.header.kind,
                    });
                }
                // Which step a frame may be is fixed by the schedule; what it holds is
                // checked against the blocks once its step comes.
                let expected = self
                    .schedule
                    .take(step)
                    .map(|(from, _, kind, _)| (from, kind));
                if expected != Some((from, frame.header.kind)) || frame.header.source != from.0 {
                    return Err(unexpected("not this rank's partner at this step"));
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

impl crate::protocol::SegmentProtocol for HalvingDoubling {
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
        match self.phase {
            Phase::Done => Some(std::mem::replace(&mut self.value, Values::F64(Vec::new()))),
            _ => None,
        }
    }
}

impl Protocol for HalvingDoubling {
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
        (self.phase == Phase::Done).then(|| self.value.as_ref())
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
        self.value.push_as_f64(dst);
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
                steps_total: self.schedule.steps(),
            },
        }
    }
}

#[cfg(test)]
mod tests;
