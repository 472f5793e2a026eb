//! The collectives beyond the allreduce, over vectors of any element type and length: the
//! out-of-place allreduce, reduce-scatter, allgather, broadcast, reduce and barrier. The
//! reduce-scatter and allgather go around the ring ([`ftcoll_algos::ring`]), the broadcast
//! and reduce down and up a chain ([`ftcoll_algos::chain`]), cut into pipelined segments by the
//! operation shell; none is fault tolerant (a failure during the call is `CommError::PeerFailed` at every survivor).

use ftcoll_algos::chain::{Chain, ChainConfig, ChainMode};
use ftcoll_algos::protocol::{Layout, Segmented, ShellConfig};
use ftcoll_algos::ring::{RingAllreduce, RingConfig, RingMode};
use ftcoll_algos::values::Element;
use ftcoll_algos::{Algorithm, ReduceOp};

use super::collectives::{AllreducePick, Outcome};
use super::run::Slack;
use super::{CommError, Communicator};

impl Communicator {
    /// Allreduce of `input` into `output` (the same length), leaving `input` as it is: the
    /// algorithm [`Communicator::allreduce`] picks. Where that is the single-copy ring, it
    /// reads `input` and writes `output` in the same pass, at the cost of the in-place call;
    /// elsewhere `input` is copied into `output` first.
    pub fn allreduce_into<T: Element>(
        &mut self,
        input: &[T],
        output: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let ring = self.allreduce_pick(std::mem::size_of_val(input)) == AllreducePick::Ring;
        self.reduce_into(input, output, (op, ring), Self::allreduce)
    }

    /// [`Communicator::allreduce_ring`] of `input` into `output` (the same length), leaving
    /// `input` as it is: on shared memory from the single-copy threshold on, in the same pass
    /// as the in-place call; elsewhere `input` is copied into `output` first.
    pub fn allreduce_ring_into<T: Element>(
        &mut self,
        input: &[T],
        output: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        self.reduce_into(input, output, (op, true), Self::allreduce_ring)
    }

    /// An out-of-place allreduce: the single-copy ring reading `input` where the call runs the
    /// `ring` and the transport allows it; elsewhere `input` copied into `output` and
    /// `in_place` run over it.
    fn reduce_into<T: Element>(
        &mut self,
        input: &[T],
        output: &mut [T],
        (op, ring): (ReduceOp, bool),
        in_place: fn(&mut Self, &mut [T], ReduceOp) -> Result<Outcome, CommError>,
    ) -> Result<Outcome, CommError> {
        same_len(input, output)?;
        if ring && self.single_copy_for(std::mem::size_of_val(input)) {
            return self.allreduce_single_copy(Some(input), output, op);
        }
        output.copy_from_slice(input);
        in_place(self, output, op)
    }

    /// Reduce-scatter of equal blocks: `input` is N blocks of `output.len()` elements; rank r
    /// gets block r of the reduction in `output` (MPI's `MPI_Reduce_scatter_block`).
    pub fn reduce_scatter_block<T: Element>(
        &mut self,
        input: &[T],
        output: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let n = self.size() as usize;
        if input.len() != n * output.len() {
            return Err(CommError::Config(format!(
                "reduce_scatter_block takes {n} blocks of the output's {} elements, got {}; pass an input {n} times the output",
                output.len(),
                input.len()
            )));
        }
        self.ring_collective(RingMode::ReduceScatter, op, input, output)
    }

    /// Allgather: every rank's `input` (the same length everywhere) into `output`, N blocks in
    /// rank order.
    pub fn allgather<T: Element>(
        &mut self,
        input: &[T],
        output: &mut [T],
    ) -> Result<Outcome, CommError> {
        let n = self.size() as usize;
        if output.len() != n * input.len() {
            return Err(CommError::Config(format!(
                "allgather fills an output of {n} blocks of the input's {} elements, got {}; pass an output {n} times the input",
                input.len(),
                output.len()
            )));
        }
        self.ring_collective(RingMode::Allgather, ReduceOp::Sum, input, output)
    }

    /// Broadcast of `root`'s `data` to every rank, down a pipelined chain (every rank passes
    /// the same length; the non-roots' contents are overwritten).
    pub fn bcast<T: Element>(&mut self, data: &mut [T], root: u32) -> Result<Outcome, CommError> {
        self.chain_collective(ChainMode::Bcast, ReduceOp::Sum, data, root)
    }

    /// Reduce of every rank's `data` to `root`, up a pipelined chain: at the root `data`
    /// becomes the result, elsewhere it is left as it was.
    pub fn reduce<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
        root: u32,
    ) -> Result<Outcome, CommError> {
        self.chain_collective(ChainMode::Reduce, op, data, root)
    }

    fn chain_collective<T: Element>(
        &mut self,
        mode: ChainMode,
        op: ReduceOp,
        data: &mut [T],
        root: u32,
    ) -> Result<Outcome, CommError> {
        if root >= self.size() {
            return Err(CommError::Config(format!(
                "root {root} is not a rank of this communicator of {}",
                self.size()
            )));
        }
        let algo = match mode {
            ChainMode::Bcast => Algorithm::ChainBcast,
            ChainMode::Reduce => Algorithm::ChainReduce,
        };
        let shell = self.shell_config(algo, op, T::DTYPE, Slack::NONE)?;
        let make = move |shell: &ShellConfig, _, spare: Option<Chain>| {
            let config = ChainConfig {
                rank: shell.rank,
                size: shell.size,
                root: ftcoll_algos::Rank(root),
                op: shell.reduce,
                op_id: shell.op,
                mode,
            };
            match spare {
                Some(mut chain) => {
                    chain.restart(config);
                    chain
                }
                None => Chain::new(config),
            }
        };
        self.run_collective(shell, make, data)
    }

    /// Returns once every rank has called it: a recursive-doubling exchange of nothing.
    pub fn barrier(&mut self) -> Result<(), CommError> {
        let mut nothing: [u64; 0] = [];
        self.allreduce_rdb(&mut nothing, ReduceOp::BitOr)
            .map(|_| ())
    }

    fn ring_collective<T: Element>(
        &mut self,
        mode: RingMode,
        op: ReduceOp,
        input: &[T],
        output: &mut [T],
    ) -> Result<Outcome, CommError> {
        let mut shell = self.shell_config(Algorithm::Ring, op, T::DTYPE, Slack::NONE)?;
        let blocks = self.size();
        // Each frame carries one chunk of one block.
        shell.layout = match mode {
            RingMode::ReduceScatter => Layout::BlocksIn { blocks },
            RingMode::Allgather => Layout::BlocksOut { blocks },
            RingMode::Allreduce => Layout::Contiguous,
        };
        let make = move |shell: &ShellConfig, _, spare: Option<RingAllreduce>| {
            let config = RingConfig {
                rank: shell.rank,
                size: shell.size,
                op: shell.reduce,
                op_id: shell.op,
                mode,
            };
            match spare {
                Some(mut ring) => {
                    ring.restart(config);
                    ring
                }
                None => RingAllreduce::new(config),
            }
        };
        let mut protocol = Segmented::new(shell, Box::new(make));
        let (outcome, owes_peers) = self.run_collective_out(&mut protocol, input, output)?;
        if owes_peers {
            self.endpoint().linger(self.ops, Box::new(protocol));
        }
        Ok(outcome)
    }
}

/// An out-of-place call's buffers must have one length: the output's is the one expected.
pub(super) fn same_len<T>(input: &[T], output: &[T]) -> Result<(), CommError> {
    if input.len() == output.len() {
        Ok(())
    } else {
        Err(CommError::Shape {
            expected: output.len(),
            got: input.len(),
        })
    }
}
