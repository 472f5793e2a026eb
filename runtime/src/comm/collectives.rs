//! The collectives: allreduce (direct exchange, recursive doubling) and the corrected-tree
//! allreduce, reduce and broadcast, and the loop that runs any of them to its end.

use ftcoll_algos::corrected::{
    AllreduceConfig, BcastConfig, CorrectedAllreduce, CorrectedBcast, CorrectedReduce, Correction,
    FailureInfo, ReduceConfig,
};
use ftcoll_algos::direct::{direct_applies, DirectAllreduce, DirectConfig};
use ftcoll_algos::protocol::{SegmentPlan, ShellConfig};
use ftcoll_algos::rdb::{RdbConfig, RecursiveDoubling};
use ftcoll_algos::rhd::prefer_rhd;
use ftcoll_algos::ring::{prefer_ring, ring_min_bytes};
use ftcoll_algos::values::Element;
use ftcoll_algos::{Algorithm, OpId, Rank, ReduceOp};

use super::in_place::{InPlace, RdbSteps, RhdSteps, RingSteps, StepSchedule};
use super::run::{whole_vector_trailer_bytes, Slack};
use super::{CommError, Communicator};
use crate::env::{LargeAllreduce, SmallAllreduce};
use crate::transport::TransportKind;

/// Options of the corrected-tree collectives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorrectedOptions {
    /// Failures tolerated, f (the job needs at least f + 2 ranks).
    pub tolerate: u32,
    /// How the reduce reports failures up its tree.
    pub info: FailureInfo,
    /// The broadcast's correction phase.
    pub correction: Correction,
}

impl Default for CorrectedOptions {
    fn default() -> Self {
        CorrectedOptions {
            tolerate: 1,
            info: FailureInfo::default(),
            correction: Correction::Checked,
        }
    }
}

/// What a successful collective reports besides its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Ranks known failed when the collective returned. Recursive doubling fails instead of
    /// returning with any; the corrected collectives exclude those that failed before the call
    /// and count those that failed during it either at every rank or at none.
    pub excluded: Vec<Rank>,
    /// Frames this rank sent.
    pub messages: u64,
}

/// The allreduce [`Communicator::allreduce`] picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AllreducePick {
    Direct,
    Ring,
    Rhd,
    Rdb,
}

impl Communicator {
    /// Allreduce of `data` in place by what measured fastest for its size, rank count,
    /// placement and transport: recursive doubling for short vectors; from the ring's
    /// threshold the ring, or recursive halving and doubling for 4, 8, 16, ... ranks where it
    /// won (see [`ftcoll_algos::rhd::prefer_rhd`]); on shared memory from 1 MiB the
    /// single-copy ring. `FTCOLL_SMALL_ALLREDUCE=direct` and `FTCOLL_LARGE_ALLREDUCE` override.
    /// Fails with [`CommError::PeerFailed`] when a rank fails during it: none of these is
    /// fault tolerant; the fault-tolerant algorithms return the ranks they excluded instead.
    ///
    /// `T` is any [`Element`]: `f64, f32, i32, i64, u32, u64`; the vector may have any length
    /// (it travels in segments that fit the transport's frames). Every rank must pass the same
    /// type and length: a rank that does not gets [`CommError::ShapeMismatch`], and so does
    /// every other rank.
    pub fn allreduce<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        match self.allreduce_pick(std::mem::size_of_val(data)) {
            AllreducePick::Direct => self.allreduce_direct(data, op),
            AllreducePick::Ring => self.allreduce_ring(data, op),
            AllreducePick::Rhd => self.allreduce_rhd(data, op),
            AllreducePick::Rdb => self.allreduce_rdb(data, op),
        }
    }

    /// What [`Communicator::allreduce`] runs for vectors of `bytes`.
    pub(super) fn allreduce_pick(&self, bytes: usize) -> AllreducePick {
        let direct = match self.env.small_allreduce {
            // Recursive doubling measured at or below it everywhere (see `direct_applies`).
            SmallAllreduce::Auto => false,
            SmallAllreduce::Direct => direct_applies(self.size(), bytes),
            SmallAllreduce::Rdb => false,
        };
        let network = self.transport() != TransportKind::Shm;
        let large = prefer_ring(
            self.size(),
            bytes,
            self.env
                .ring_min_bytes
                .unwrap_or(ring_min_bytes(self.size(), network)),
        );
        let rhd = match self.env.large_allreduce {
            // Where the single copy applies (from `FTCOLL_SINGLE_COPY_MIN_BYTES`, however low
            // the user set it), the ring reads the neighbours' vectors, which rhd cannot.
            LargeAllreduce::Auto => {
                prefer_rhd(self.size(), bytes, network, self.placement)
                    && !self.single_copy_for(bytes)
            }
            LargeAllreduce::Ring => false,
            LargeAllreduce::Rhd => true,
        };
        match (direct, large, rhd) {
            (true, _, _) => AllreducePick::Direct,
            (false, true, true) => AllreducePick::Rhd,
            (false, true, false) => AllreducePick::Ring,
            (false, false, _) => AllreducePick::Rdb,
        }
    }

    /// Allreduce of `data` in place by recursive doubling (000 Alg. 1), whatever the size.
    pub fn allreduce_rdb<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let shell = self.shell_config(Algorithm::Rdb, op, T::DTYPE, Slack::NONE)?;
        // A frame carries a whole segment. Over the caller's vector (see `in_place`): the
        // shell's copies in and out, its segment buffers and its per-call bookkeeping cost
        // 0.57-0.61 us of an 8-byte allreduce at n = 2 on the 2-core VM; this takes 0.41-0.43
        // (Open MPI 0.48-0.51 in the same runs).
        self.run_in_place::<T, RdbSteps>(&shell, shell.plan, data, op)
    }

    /// Approximate recursive doubling (000 Sec. 6.3, ARDB) of `data` in place: the first
    /// `exchanges` steps of recursive doubling, after which each rank holds the reduction of
    /// 2^`exchanges` ranks' inputs, scaled to an estimate of the whole sum (or their average).
    /// With every step (log2 of the largest power of two <= N) it is exact. A real rank cannot
    /// tell when its estimate is accurate enough, so the caller sets the budget, as 000 does;
    /// its accuracy depends on how evenly the inputs are spread. Not fault tolerant: a failure
    /// fails it at every rank, as [`Communicator::allreduce_rdb`].
    pub fn allreduce_ardb(
        &mut self,
        data: &mut [f64],
        op: ReduceOp,
        exchanges: u32,
    ) -> Result<Outcome, CommError> {
        if exchanges == 0 {
            return Err(CommError::Config(
                "ardb needs a budget of at least one exchange".into(),
            ));
        }
        let shell = self.whole_vector_shell(Algorithm::Ardb, op, data.len())?;
        let config = RdbConfig::approximate(
            self.me(),
            self.size(),
            op,
            self.next_op_id(),
            Some(exchanges),
        );
        self.run_collective(shell, move |_, _, _| RecursiveDoubling::new(config), data)
    }

    /// Allreduce of `data` in place around a ring (reduce-scatter, then allgather), whatever
    /// the size: each rank sends 2(N − 1)/N of the vector, the least an allreduce can.
    pub fn allreduce_ring<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        if self.single_copy_for(std::mem::size_of_val(data)) {
            return self.allreduce_single_copy(None, data, op);
        }
        let shell = self.shell_config(Algorithm::Ring, op, T::DTYPE, Slack::NONE)?;
        // A frame carries one block of a segment, 1/N of it.
        let size = self.size().max(1) as usize;
        let plan = SegmentPlan {
            segment_elems: shell.plan.segment_elems.saturating_mul(size),
            ..shell.plan
        };
        // The blocks go out of and come into the caller's vector itself: no copy of it in
        // or out (see `in_place`).
        self.run_in_place::<T, RingSteps>(&shell, plan, data, op)
    }

    /// Allreduce of `data` in place by recursive halving and doubling (Rabenseifner), whatever
    /// the size: as little data per rank as the ring, 2(N − 1)/N of the vector, in 2 log2 N
    /// steps instead of 2(N − 1) (two more where N is not a power of two).
    pub fn allreduce_rhd<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let shell = self.shell_config(Algorithm::Rhd, op, T::DTYPE, Slack::NONE)?;
        // The largest frame is half a segment (the first halving step), or the whole of it
        // where N is not a power of two (the fold and the unfold).
        let factor = if shell.size.is_power_of_two() { 2 } else { 1 };
        let plan = SegmentPlan {
            segment_elems: shell.plan.segment_elems.saturating_mul(factor),
            ..shell.plan
        };
        // Blocks go out of and come into the caller's vector itself (see `in_place`).
        self.run_in_place::<T, RhdSteps>(&shell, plan, data, op)
    }

    /// Runs schedule `S` over the caller's `data` in segments of `plan` (see `in_place`).
    fn run_in_place<T: Element, S: StepSchedule>(
        &mut self,
        shell: &ShellConfig,
        plan: SegmentPlan,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let mut protocol = InPlace::<T, S>::new((shell.rank, shell.size, shell.op, op), plan, data);
        let ended = self.execute(&mut protocol, ftcoll_algos::ValuesRef::Empty)?;
        let (outcome, _) = self.conclude(&mut protocol, ended, &mut [] as &mut [T], |_, _| {})?;
        Ok(outcome)
    }

    /// Allreduce of `data` in place by direct exchange: every rank sends its input to every
    /// other, whatever the size (N(N − 1) messages).
    pub fn allreduce_direct<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let shell = self.shell_config(Algorithm::Direct, op, T::DTYPE, Slack::NONE)?;
        let make = |shell: &ShellConfig, _, _| {
            DirectAllreduce::new(DirectConfig {
                rank: shell.rank,
                size: shell.size,
                op: shell.reduce,
                op_id: shell.op,
            })
        };
        self.run_collective(shell, make, data)
    }

    /// Fault-tolerant allreduce by correction (001 Sec. 5): survives up to `options.tolerate`
    /// failed ranks, of which root candidates (ranks `0..=f`) may fail only before the call.
    /// Every surviving rank gets the same result: the survivors' values, plus the values of
    /// ranks that failed during the call either at every rank or at none.
    pub fn corrected_allreduce(
        &mut self,
        data: &mut [f64],
        op: ReduceOp,
        options: CorrectedOptions,
    ) -> Result<Outcome, CommError> {
        let mut config = AllreduceConfig::new(
            self.me(),
            self.size(),
            op,
            OpId(self.ops + 1),
            options.tolerate,
        );
        config.info = options.info;
        config.correction = options.correction;
        self.check_tolerance(options.tolerate)?;
        let shell = self.whole_vector_shell(Algorithm::CorrectedAllreduce, op, data.len())?;
        self.run_collective(shell, move |_, _, _| CorrectedAllreduce::new(config), data)
    }

    /// Fault-tolerant reduce to `root` by up-correction (001 Sec. 4), any type and length. At
    /// the root `data` becomes the result; elsewhere it is left unchanged. If the root fails,
    /// the call is a no-op.
    ///
    /// A vector longer than a frame runs as one corrected reduce per segment, each reporting
    /// the ranks it lacks (001's failure list, used whatever `options.info` says), and the root
    /// refuses segments that lack different ranks (a rank died while they streamed): it gets
    /// `CommError::MixedContributors` and its buffer is left as it was, while the other ranks,
    /// which hold no result, return. The next call leaves the dead rank out.
    pub fn corrected_reduce<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
        root: u32,
        options: CorrectedOptions,
    ) -> Result<Outcome, CommError> {
        self.check_tolerance(options.tolerate)?;
        let trailer = whole_vector_trailer_bytes(self.size());
        let shell = self.shell_config(Algorithm::CorrectedReduce, op, T::DTYPE, Slack(trailer))?;
        let segmented = shell.plan.segments(data.len()) > 1;
        let make = move |shell: &ShellConfig, _, _| {
            let mut config = ReduceConfig::new(
                shell.rank,
                shell.size,
                shell.reduce,
                shell.op,
                options.tolerate,
                Rank(root),
            );
            config.info = if segmented {
                FailureInfo::List
            } else {
                options.info
            };
            CorrectedReduce::new(config)
        };
        self.run_collective(shell, make, data)
    }

    /// Corrected-tree broadcast of the root's `data` to every rank, any type and any length in
    /// pipelined segments: a rank returns only once every segment came, all from the root.
    pub fn corrected_bcast<T: Element>(
        &mut self,
        data: &mut [T],
        root: u32,
        options: CorrectedOptions,
    ) -> Result<Outcome, CommError> {
        let shell = self.shell_config(
            Algorithm::CorrectedBcast,
            ReduceOp::Sum,
            T::DTYPE,
            Slack::NONE,
        )?;
        let make = move |shell: &ShellConfig, _, _| {
            let mut config = BcastConfig::new(
                shell.rank,
                shell.size,
                shell.op,
                Rank(root),
                options.tolerate,
            );
            config.correction = options.correction;
            CorrectedBcast::new(config)
        };
        self.run_collective(shell, make, data)
    }

    /// Whether a ring over `bytes` per rank reads its neighbour's vector directly, from the
    /// threshold on: by cross-memory attach on shared memory, by remote reads over a network
    /// that has them (see [`crate::env::SingleCopy`]). After a shrink the ring's neighbours
    /// are members, not the transport's ranks; the copying path maps them.
    pub(crate) fn single_copy_for(&self, bytes: usize) -> bool {
        let from = self
            .env
            .single_copy_min_bytes
            .unwrap_or(ftcoll_algos::ring::reads::SINGLE_COPY_MIN_BYTES);
        // An empty vector has nothing to lend (and nothing to register).
        let lends = bytes > 0 && bytes >= from;
        (self.single_copy || self.remote_reads) && self.members.is_none() && lends
    }

    /// [`Communicator::single_copy_for`] by cross-memory attach (shared memory): the only
    /// single copy the fault-tolerant ring's attempts take.
    pub(crate) fn cross_memory_for(&self, bytes: usize) -> bool {
        self.single_copy && self.single_copy_for(bytes)
    }

    /// This rank as the collectives number it: its index among the members (after a shrink,
    /// the executor maps member indices to world ranks).
    pub(crate) fn me(&self) -> Rank {
        Rank(self.rank())
    }

    pub(crate) fn check_tolerance(&self, tolerate: u32) -> Result<(), CommError> {
        if self.size() < tolerate.saturating_add(2) {
            return Err(CommError::Tolerance {
                tolerate,
                size: self.size(),
            });
        }
        Ok(())
    }
}
