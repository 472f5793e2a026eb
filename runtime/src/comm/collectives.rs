//! The collectives: allreduce (direct exchange, recursive doubling) and the corrected-tree
//! allreduce, reduce and broadcast, and the loop that runs any of them to its end.

use ftcoll_algos::corrected::{
    AllreduceConfig, BcastConfig, CorrectedAllreduce, CorrectedBcast, CorrectedReduce, Correction,
    FailureInfo, ReduceConfig,
};
use ftcoll_algos::direct::{prefer_direct, DirectAllreduce, DirectConfig, Placement};

use crate::env::SmallAllreduce;
use ftcoll_algos::rdb::{RdbConfig, RecursiveDoubling};
use ftcoll_algos::{OpId, Protocol, Rank, ReduceOp, ValuesRef};

use super::{CommError, Communicator};
use crate::exec::OpEnd;

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

impl Communicator {
    /// Allreduce of `data` in place: a direct exchange for small groups and vectors on an
    /// oversubscribed node (see [`ftcoll_algos::direct::prefer_direct`]; `FTCOLL_SMALL_ALLREDUCE`
    /// overrides), recursive doubling otherwise. Fails with
    /// [`CommError::PeerFailed`] when a rank fails during it: neither is fault tolerant; the
    /// fault-tolerant algorithms return the ranks they excluded instead.
    pub fn allreduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<Outcome, CommError> {
        let direct = match self.env.small_allreduce {
            SmallAllreduce::Auto => {
                prefer_direct(self.size(), std::mem::size_of_val(data), self.placement)
            }
            SmallAllreduce::Direct => prefer_direct(
                self.size(),
                std::mem::size_of_val(data),
                Placement::Oversubscribed,
            ),
            SmallAllreduce::Rdb => false,
        };
        if direct {
            self.allreduce_direct(data, op)
        } else {
            self.allreduce_rdb(data, op)
        }
    }

    /// Allreduce of `data` in place by recursive doubling (000 Alg. 1), whatever the size.
    pub fn allreduce_rdb(&mut self, data: &mut [f64], op: ReduceOp) -> Result<Outcome, CommError> {
        let op_id = OpId(self.ops + 1);
        let config = RdbConfig::exact(self.me(), self.size(), op, op_id);
        // One instance goes from one call to the next, restarted in place: a loop of calls
        // allocates nothing and moves no protocol state (this is the small-allreduce latency
        // path, where a copy of the state costs a few percent).
        let mut protocol = match self.rdb.take() {
            Some(mut protocol) => {
                protocol.restart(config);
                protocol
            }
            None => Box::new(RecursiveDoubling::new(config)),
        };
        let (outcome, owes_peers) = self.run_collective_in(&mut *protocol, data, |_, _| {})?;
        if owes_peers {
            self.endpoint().linger(self.ops, protocol);
        } else {
            self.rdb = Some(protocol);
        }
        Ok(outcome)
    }

    /// Allreduce of `data` in place by direct exchange: every rank sends its input to every
    /// other, whatever the size (N(N − 1) messages).
    pub fn allreduce_direct(
        &mut self,
        data: &mut [f64],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let config = DirectConfig {
            rank: self.me(),
            size: self.size(),
            op,
            op_id: OpId(self.ops + 1),
        };
        self.run_collective(DirectAllreduce::new(config), data)
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
        self.run_collective(CorrectedAllreduce::new(config), data)
    }

    /// Fault-tolerant reduce to `root` by up-correction (001 Sec. 4). At the root `data` becomes
    /// the result; elsewhere it is left unchanged. If the root fails, the call is a no-op.
    pub fn corrected_reduce(
        &mut self,
        data: &mut [f64],
        op: ReduceOp,
        root: u32,
        options: CorrectedOptions,
    ) -> Result<Outcome, CommError> {
        let mut config = ReduceConfig::new(
            self.me(),
            self.size(),
            op,
            OpId(self.ops + 1),
            options.tolerate,
            Rank(root),
        );
        config.info = options.info;
        self.check_tolerance(options.tolerate)?;
        self.run_collective(CorrectedReduce::new(config), data)
    }

    /// Corrected-tree broadcast of the root's `data` to every rank.
    pub fn corrected_bcast(
        &mut self,
        data: &mut [f64],
        root: u32,
        options: CorrectedOptions,
    ) -> Result<Outcome, CommError> {
        let mut config = BcastConfig::new(
            self.me(),
            self.size(),
            OpId(self.ops + 1),
            Rank(root),
            options.tolerate,
        );
        config.correction = options.correction;
        self.run_collective(CorrectedBcast::new(config), data)
    }

    /// This rank as the collectives number it: its index among the members (after a shrink,
    /// the executor maps member indices to world ranks).
    fn me(&self) -> Rank {
        Rank(self.rank())
    }

    fn check_tolerance(&self, tolerate: u32) -> Result<(), CommError> {
        if self.size() < tolerate.saturating_add(2) {
            return Err(CommError::Tolerance {
                tolerate,
                size: self.size(),
            });
        }
        Ok(())
    }

    /// The operation id the next collective gets.
    pub(crate) fn next_op_id(&self) -> OpId {
        OpId(self.ops + 1)
    }

    /// Runs one collective to its end and writes its result into `data` where this rank has one.
    fn run_collective<P: Protocol + Send + 'static>(
        &mut self,
        protocol: P,
        data: &mut [f64],
    ) -> Result<Outcome, CommError> {
        self.run_collective_then(protocol, data, |_, _| {})
    }

    /// [`Communicator::run_collective`], letting `inspect` read the finished protocol and amend
    /// the outcome before the protocol lingers.
    pub(crate) fn run_collective_then<P: Protocol + Send + 'static>(
        &mut self,
        mut protocol: P,
        data: &mut [f64],
        inspect: impl FnOnce(&P, &mut Outcome),
    ) -> Result<Outcome, CommError> {
        let (outcome, owes_peers) = self.run_collective_in(&mut protocol, data, inspect)?;
        if owes_peers {
            self.endpoint().linger(self.ops, Box::new(protocol));
        }
        Ok(outcome)
    }

    /// Runs one collective on a protocol the caller keeps; also says whether it still owes
    /// peers answers (late corrections), in which case the caller must hand it over to linger
    /// (served during later calls).
    fn run_collective_in<P: Protocol>(
        &mut self,
        protocol: &mut P,
        data: &mut [f64],
        inspect: impl FnOnce(&P, &mut Outcome),
    ) -> Result<(Outcome, bool), CommError> {
        let op_index = self.ops;
        self.ops += 1;
        // One lock for the operation and the failures it ends with.
        let mut endpoint = self.endpoint();
        let (end, stats) = endpoint.run(
            protocol,
            op_index,
            op_index + 1,
            ValuesRef::F64(data),
            self.op_timeout,
        )?;
        let failed = endpoint.failed();
        // No iterator to build in a failure-free job (this is the small-collective latency path).
        let excluded: Vec<Rank> = if failed.is_empty() {
            Vec::new()
        } else {
            failed.iter().copied().map(Rank).collect()
        };
        drop(endpoint);
        match end {
            OpEnd::Completed => {
                if protocol.has_result() {
                    let result = &mut self.result_scratch;
                    protocol.estimate(result);
                    if result.len() != data.len() {
                        return Err(CommError::Shape {
                            expected: data.len(),
                            got: result.len(),
                        });
                    }
                    data.copy_from_slice(result);
                }
                let mut outcome = Outcome {
                    excluded,
                    messages: stats.sent,
                };
                inspect(protocol, &mut outcome);
                let owes_peers = !(protocol.settled() && protocol.serve_until().is_none());
                Ok((outcome, owes_peers))
            }
            OpEnd::Aborted => Err(CommError::PeerFailed {
                failed: self.failed_ranks(),
            }),
            OpEnd::TimedOut => Err(CommError::TimedOut(self.op_timeout)),
            OpEnd::Shutdown => Err(CommError::Shutdown),
            OpEnd::Revoked => Err(CommError::Revoked),
        }
    }
}
