//! The built-in job's benchmark modes: per-operation times kept by the rank and reported once
//! (`--bench-warmup`), for fault-free operations, 002's agreements around a failure, and a
//! collective that meets a crash.

use std::time::Instant;

use ftcoll_algos::values::Values;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{CommError, Communicator};

use super::{hinted, Collective};
use crate::live::hooks::BuiltinJobHooks;

/// The benchmark loop: per-operation times kept locally and reported once.
/// Out of place, the input stays as it is and every operation overwrites the output; in
/// place, the input is written in again before each, outside the timed call.
pub(super) fn bench(
    mut comm: Communicator,
    collective: Collective,
    input: &Values,
    op: ReduceOp,
    (warmup, ops): (u64, u64),
    (base_pages, out_of_place): (bool, bool),
) -> Result<(), CommError> {
    let mut data = hinted(input, base_pages);
    let from = out_of_place.then_some(input);
    for _ in 0..warmup {
        if !out_of_place {
            data.copy_from(input.as_ref());
        }
        collective.run_from(&mut comm, from, &mut data, op)?;
    }
    let mut nanos = Vec::with_capacity(ops as usize);
    for _ in 0..ops {
        if !out_of_place {
            data.copy_from(input.as_ref());
        }
        let started = Instant::now();
        collective.run_timed(&mut comm, from, &mut data, op)?;
        nanos.push(started.elapsed().as_nanos() as u64);
    }
    comm.report_timings(nanos)?;
    comm.finish()
}

/// More stabilizing agreements than this means the failed set never settles; give up.
const MAX_STABILIZING: u64 = 1000;

/// 002 Fig. 3 on this rank: warm-up agreements; then (the victims die at the next operation's
/// start) the detecting agreement, acknowledge-and-agree until no failure is unacknowledged,
/// one untimed agreement to line the survivors up, and `ops` timed post-failure agreements on
/// the same communicator. Reports `[detect, stabilizing total, stabilizing count, post...]`
/// in nanoseconds.
pub(super) fn bench_failure(
    mut comm: Communicator,
    warmup: u64,
    ops: u64,
) -> Result<(), CommError> {
    let all = [u64::MAX];
    for _ in 0..warmup {
        comm.agree_with(&all, ReduceOp::BitAnd)?;
    }
    let started = Instant::now();
    let mut agreed = comm.agree_with(&all, ReduceOp::BitAnd)?;
    let detect = started.elapsed().as_nanos() as u64;
    let mut stabilizing = 0u64;
    let mut count = 0u64;
    while !agreed.unacknowledged.is_empty() {
        if count == MAX_STABILIZING {
            return Err(CommError::Config(format!(
                "no stable failed set after {MAX_STABILIZING} agreements"
            )));
        }
        comm.ack_failed();
        let started = Instant::now();
        agreed = comm.agree_with(&all, ReduceOp::BitAnd)?;
        stabilizing += started.elapsed().as_nanos() as u64;
        count += 1;
    }
    comm.agree_with(&all, ReduceOp::BitAnd)?;
    let mut nanos = Vec::with_capacity(ops as usize + 3);
    nanos.extend([detect, stabilizing, count]);
    for _ in 0..ops {
        let started = Instant::now();
        let agreed = comm.agree_with(&all, ReduceOp::BitAnd)?;
        nanos.push(started.elapsed().as_nanos() as u64);
        if agreed.words != all || !agreed.unacknowledged.is_empty() {
            return Err(CommError::Config(
                "a post-failure agreement decided a wrong value or a new failure".into(),
            ));
        }
    }
    comm.report_timings(nanos)?;
    comm.finish()
}

/// One benchmark of a collective that meets a fault (see `--bench-fault-op`).
pub(super) struct FaultOpRun<'a> {
    pub collective: Collective,
    /// The f64 input.
    pub input: &'a Values,
    pub op: ReduceOp,
    pub warmup: u64,
    pub ops: u64,
    pub recovery: bool,
    /// See `--bench-victims-lag`.
    pub victims_lag: bool,
    /// See `--base-pages`.
    pub base_pages: bool,
    /// See `--out-of-place`.
    pub out_of_place: bool,
}

/// How long a rank scripted to die during an operation waits for the kill after it.
const VICTIM_WAITS_AT_MOST: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a victim waits, after the line-up, before it enters the faulty operation: far
/// longer than the survivors take to return from the line-up agreement and start it.
const VICTIMS_LAG: std::time::Duration = std::time::Duration::from_millis(10);

impl FaultOpRun<'_> {
    /// Reports `[the faulty operation, the later ones...]` in nanoseconds.
    pub(super) fn bench(&self, mut comm: Communicator) -> Result<(), CommError> {
        let mut data = hinted(self.input, self.base_pages);
        for _ in 0..self.warmup {
            self.call_once(&mut comm, &mut data)?;
        }
        // Line every rank up before the faulty operation (it counts as one operation, so the
        // victims die at the next): a rank still finishing the warm-up must not meet the
        // failure, or a peer's revoke, there.
        match comm.agree(u64::MAX) {
            Ok(_) | Err(CommError::UnacknowledgedFailure { .. }) => {}
            Err(error) => return Err(error),
        }
        // A survivor that started the operation after the launcher's notice of a death would
        // leave the dead rank out from the start, and time an operation without a fault.
        if self.victims_lag && comm.dies_at_next_op() {
            std::thread::sleep(VICTIMS_LAG);
        }
        self.reset(&mut data);
        let started = Instant::now();
        let victim = comm.dies_during_next_op();
        self.call(&mut comm, &mut data)?;
        if victim {
            // The kill comes some time into the operation; if the operation was quicker, wait
            // for it here rather than go on and report as a survivor.
            std::thread::sleep(VICTIM_WAITS_AT_MOST);
            return Err(CommError::Config(
                "the scripted kill during the operation never came".into(),
            ));
        }
        let mut nanos = Vec::with_capacity(self.ops as usize + 1);
        nanos.push(started.elapsed().as_nanos() as u64);
        for _ in 0..self.ops {
            self.reset(&mut data);
            let started = Instant::now();
            self.call(&mut comm, &mut data)?;
            nanos.push(started.elapsed().as_nanos() as u64);
        }
        comm.report_timings(nanos)?;
        comm.finish()
    }

    /// One call; with `recovery`, the way a ULFM application makes one: the collective, an
    /// agreement on whether it succeeded everywhere (a rank may hold its result while another
    /// failed, or a rank may die after it), and if not, revoke, acknowledge, shrink and the
    /// collective again on the survivors.
    fn call(&self, comm: &mut Communicator, data: &mut Values) -> Result<(), CommError> {
        let ran = match self.run_once(comm, data) {
            Ok(_) => true,
            // A rank sees the failure itself, or the revoke of a rank that saw it first.
            Err(CommError::PeerFailed { .. } | CommError::Revoked) if self.recovery => false,
            Err(other) => return Err(other),
        };
        if !self.recovery {
            return Ok(());
        }
        let everywhere = match comm.agree(u64::from(ran)) {
            Ok(flag) => flag == 1,
            Err(CommError::UnacknowledgedFailure { .. }) => false,
            Err(error) => return Err(error),
        };
        if !everywhere {
            comm.revoke()?;
            comm.ack_failed();
            let members = comm.shrink()?;
            tracing::debug!(members = members.len(), "shrunk; retrying");
            self.call_once(comm, data)?;
        }
        Ok(())
    }

    /// In place, writes the input into `data` again.
    fn reset(&self, data: &mut Values) {
        if !self.out_of_place {
            data.copy_from(self.input.as_ref());
        }
    }

    fn run_once(&self, comm: &mut Communicator, data: &mut Values) -> Result<(), CommError> {
        let from = self.out_of_place.then_some(self.input);
        self.collective
            .run_from(comm, from, data, self.op)
            .map(|_| ())
    }

    /// One operation from the input.
    fn call_once(&self, comm: &mut Communicator, data: &mut Values) -> Result<(), CommError> {
        self.reset(data);
        self.run_once(comm, data)
    }
}
