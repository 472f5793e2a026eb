//! The loop that runs any collective to its end through the operation shell, and the plan that
//! cuts its vector into segments the transport's frames hold.

use ftcoll_algos::protocol::{
    AbortReason, Assembled, Layout, SegmentPlan, SegmentProtocol, Segmented, ShellConfig,
};
use ftcoll_algos::values::{Dtype, Element};
use ftcoll_algos::wire::HEADER_BYTES;
use ftcoll_algos::{Algorithm, OpId, Rank, ReduceOp};

use super::collectives::Outcome;
use super::{CommError, Communicator};
use crate::env::DEFAULT_SEGMENT_WINDOW;
use crate::exec::OpEnd;
use crate::transport::TransportKind;

/// Smallest frame a segment is sized for (unless the transport's frames are smaller).
const MIN_SEGMENT_FRAME: usize = 8 << 10;

/// Largest segment payload of one frame over a network transport (TCP, UCX, libfabric), and
/// the segments a rank starts at once there, unless `FTCOLL_SEGMENT_BYTES` and
/// `FTCOLL_SEGMENT_WINDOW` say. Over TCP on the 2-core development VM (`bench allreduce
/// --transport tcp`), the copying ring allreduce of 16 MiB took 7.4 ms at n = 2 and 24.8-25.4
/// ms at n = 4 with frames of 512 KiB and a window of 2, against 17.7-18.0 and 46-52 ms with
/// frames as large as the wire allows (one 8 MiB frame per block: nothing overlaps), 8.9-9.3
/// and 31.6-33.4 ms with a window of 8. The ring over the caller's vector, which copies
/// nothing in or out, does better with a window of 1 (two runs each, same day): 16 MiB 4.96
/// against 7.6 ms at n = 2 and 27.0 against 33.0 ms at n = 4, 128 MiB at n = 4 201-209
/// against 218-219 ms; frames of 256 KiB or 1 MiB were no better. Ranks still overlap
/// segments: a segment a peer started is started on its first frame.
const NETWORK_SEGMENT_BYTES: usize = 512 << 10;
/// See [`NETWORK_SEGMENT_BYTES`].
const NETWORK_SEGMENT_WINDOW: u32 = 1;

/// Bytes a protocol's frame carries beyond its segment's values: rank trailers, the weight of
/// an average, piece headers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slack(pub usize);

impl Slack {
    /// Frames that carry values only.
    pub(crate) const NONE: Slack = Slack(0);
}

impl Communicator {
    /// The shell of the next operation of `algo`: segments as large as the transport's frames
    /// allow (less `slack`, capped by `FTCOLL_SEGMENT_BYTES`).
    pub(crate) fn shell_config(
        &self,
        algo: Algorithm,
        reduce: ReduceOp,
        dtype: Dtype,
        slack: Slack,
    ) -> Result<ShellConfig, CommError> {
        let elem = dtype.elem_bytes().max(1);
        let network = self.env.transport != TransportKind::Shm;
        let window = self.env.segment_window.unwrap_or(if network {
            NETWORK_SEGMENT_WINDOW
        } else {
            DEFAULT_SEGMENT_WINDOW
        });
        // A window of segments has a frame in flight to a peer per segment: frames of a
        // window's share of two frames fit a shared-memory lane together, and the sender never
        // queues.
        let frame = (self.max_frame * 2 / window.max(2) as usize)
            .max(MIN_SEGMENT_FRAME)
            .min(self.max_frame);
        let mut room = frame.saturating_sub(HEADER_BYTES + slack.0 + elem);
        match self.env.segment_bytes {
            Some(cap) => room = room.min(cap),
            // A network frame may hold 64 MiB, and one such frame per block leaves nothing to
            // pipeline.
            None if network => room = room.min(NETWORK_SEGMENT_BYTES),
            None => {}
        }
        if !reduce.applies_to(dtype) {
            return Err(CommError::Config(format!(
                "the operator {} does not apply to {} vectors",
                reduce.name(),
                dtype.name()
            )));
        }
        Ok(ShellConfig {
            rank: Rank(self.rank()),
            size: self.size(),
            algo,
            op: self.next_op_id(),
            reduce,
            plan: SegmentPlan {
                segment_elems: (room / elem).max(1),
                window,
            },
            layout: Layout::Contiguous,
            attempt: 0,
        })
    }

    /// The shell of an algorithm that must see the whole vector in one frame (the
    /// fault-tolerant ones: their segments could exclude different ranks); a longer vector is
    /// refused before anything is sent.
    pub(crate) fn whole_vector_shell(
        &self,
        algo: Algorithm,
        reduce: ReduceOp,
        len: usize,
    ) -> Result<ShellConfig, CommError> {
        let slack = whole_vector_trailer_bytes(self.size());
        let mut shell = self.shell_config(algo, reduce, Dtype::F64, Slack(slack))?;
        // One frame, as large as the transport sends.
        let most = self.max_frame.saturating_sub(HEADER_BYTES + slack + 8) / 8;
        if len > most {
            return Err(CommError::TooLong {
                algorithm: algo.descriptor().name,
                len,
                most,
            });
        }
        shell.plan = SegmentPlan::WHOLE;
        Ok(shell)
    }

    /// The operation id the next collective gets.
    pub(crate) fn next_op_id(&self) -> OpId {
        OpId(self.ops + 1)
    }

    /// Runs one collective to its end and writes its result into `data` where this rank has one.
    pub(crate) fn run_collective<T, P, M>(
        &mut self,
        shell: ShellConfig,
        make: M,
        data: &mut [T],
    ) -> Result<Outcome, CommError>
    where
        T: Element,
        P: SegmentProtocol + Send + 'static,
        M: FnMut(&ShellConfig, u32, Option<P>) -> P + Send + 'static,
    {
        self.run_collective_then(shell, make, data, |_, _| {})
    }

    /// [`Communicator::run_collective`], letting `inspect` read the finished shell and amend
    /// the outcome before the protocol lingers.
    pub(crate) fn run_collective_then<T, P, M>(
        &mut self,
        shell: ShellConfig,
        make: M,
        data: &mut [T],
        inspect: impl FnOnce(&Segmented<P>, &mut Outcome),
    ) -> Result<Outcome, CommError>
    where
        T: Element,
        P: SegmentProtocol + Send + 'static,
        M: FnMut(&ShellConfig, u32, Option<P>) -> P + Send + 'static,
    {
        self.run_assembled_then(Segmented::new(shell, Box::new(make)), data, inspect)
    }

    /// [`Communicator::run_collective_then`] on a shell built by the caller (a wrapper around
    /// [`Segmented`]).
    pub(crate) fn run_assembled_then<T, S>(
        &mut self,
        mut protocol: S,
        data: &mut [T],
        inspect: impl FnOnce(&S, &mut Outcome),
    ) -> Result<Outcome, CommError>
    where
        T: Element,
        S: Assembled + Send + 'static,
    {
        let ended = self.run_collective_in(&mut protocol, data, inspect);
        let owes_peers = match &ended {
            Ok((_, owes_peers)) => *owes_peers,
            // Every segment ended here, and peers may still wait for its answers (FTCO's
            // ACKs): the refusal to assemble them is this rank's alone.
            Err(CommError::MixedContributors { .. }) => {
                !(protocol.settled() && protocol.serve_until().is_none())
            }
            Err(_) => false,
        };
        if owes_peers {
            protocol.release_results();
            self.endpoint().linger(self.ops, Box::new(protocol));
        }
        ended.map(|(outcome, _)| outcome)
    }

    /// Runs one collective on a shell the caller keeps; also says whether it still owes peers
    /// answers (late corrections), in which case the caller must hand it over to linger
    /// (served during later calls).
    pub(crate) fn run_collective_in<T: Element, S: Assembled>(
        &mut self,
        protocol: &mut S,
        data: &mut [T],
        inspect: impl FnOnce(&S, &mut Outcome),
    ) -> Result<(Outcome, bool), CommError> {
        let ended = self.execute(protocol, T::view(data))?;
        self.conclude(protocol, ended, data, inspect)
    }

    /// [`Communicator::run_collective_in`] with the input and the output apart (their lengths
    /// may differ: a reduce-scatter's output is a block of its input).
    pub(crate) fn run_collective_out<T: Element, S: Assembled>(
        &mut self,
        protocol: &mut S,
        input: &[T],
        output: &mut [T],
    ) -> Result<(Outcome, bool), CommError> {
        let ended = self.execute(protocol, T::view(input))?;
        self.conclude(protocol, ended, output, |_, _| {})
    }

    /// Runs the operation to its end; says how it ended, with the ranks known failed then.
    pub(super) fn execute<S: Assembled>(
        &mut self,
        protocol: &mut S,
        input: ftcoll_algos::ValuesRef<'_>,
    ) -> Result<(OpEnd, crate::exec::OpStats, Vec<Rank>), CommError> {
        let op_index = self.ops;
        self.ops += 1;
        // One lock for the operation and the failures it ends with.
        let mut endpoint = self.endpoint();
        let (end, stats) =
            endpoint.run(protocol, op_index, op_index + 1, input, self.op_timeout)?;
        let failed = endpoint.failed();
        // No iterator to build in a failure-free job (this is the small-collective latency path).
        let excluded: Vec<Rank> = if failed.is_empty() {
            Vec::new()
        } else {
            failed.iter().copied().map(Rank).collect()
        };
        Ok((end, stats, excluded))
    }

    /// What an ended operation gives the caller: its result written into `data`, its outcome,
    /// and whether it still owes peers answers.
    pub(super) fn conclude<T: Element, S: Assembled>(
        &mut self,
        protocol: &mut S,
        (end, stats, excluded): (OpEnd, crate::exec::OpStats, Vec<Rank>),
        data: &mut [T],
        inspect: impl FnOnce(&S, &mut Outcome),
    ) -> Result<(Outcome, bool), CommError> {
        match end {
            OpEnd::Completed => {
                if protocol.has_result() {
                    self.write_result(protocol, data)?;
                }
                let mut outcome = Outcome {
                    excluded,
                    messages: stats.sent,
                };
                inspect(protocol, &mut outcome);
                let owes_peers = !(protocol.settled() && protocol.serve_until().is_none());
                Ok((outcome, owes_peers))
            }
            OpEnd::Aborted => Err(match stats.abort.or(protocol.abort_reason()) {
                Some(AbortReason::ShapeMismatch {
                    peer,
                    local,
                    remote,
                }) => CommError::ShapeMismatch {
                    peer: self.members().get(peer.index()).copied().unwrap_or(peer.0),
                    local_dtype: local.0.name(),
                    local_len: local.1,
                    remote_dtype: remote.0.name(),
                    remote_len: remote.1,
                },
                Some(AbortReason::MixedContributors { segments }) => {
                    CommError::MixedContributors { segments }
                }
                _ => CommError::PeerFailed {
                    failed: self.failed_ranks(),
                },
            }),
            OpEnd::TimedOut => Err(CommError::TimedOut(self.op_timeout)),
            OpEnd::Shutdown => Err(CommError::Shutdown),
            OpEnd::Revoked => Err(CommError::Revoked),
        }
    }

    /// Copies a finished shell's result into the caller's vector, in its own type.
    fn write_result<T: Element, S: Assembled>(
        &mut self,
        protocol: &S,
        data: &mut [T],
    ) -> Result<(), CommError> {
        // Segment by segment, each straight from the buffer its protocol reduced in. Anything
        // that does not fit is an error, never a result placed some other way.
        let total = protocol.output_len_total();
        let Some(pieces) = protocol.results() else {
            return Err(CommError::Shape {
                expected: data.len(),
                got: 0,
            });
        };
        if total != data.len() {
            return Err(CommError::Shape {
                expected: data.len(),
                got: total,
            });
        }
        let mut written = 0;
        for (at, piece) in pieces {
            let slot = T::cast(piece).and_then(|piece| {
                let slot = data.get_mut(at..at + piece.len())?;
                slot.copy_from_slice(piece);
                Some(piece.len())
            });
            match slot {
                Some(len) => written += len,
                None => {
                    return Err(CommError::Shape {
                        expected: data.len(),
                        got: written,
                    })
                }
            }
        }
        if written != data.len() {
            return Err(CommError::Shape {
                expected: data.len(),
                got: written,
            });
        }
        Ok(())
    }
}

/// Bytes a frame of a fault-tolerant algorithm keeps beside one vector, over `size` ranks:
/// rank trailers (FTCO's contributor ranges of every piece and its dead set: at most about
/// 20 bytes per rank together) and a margin.
pub fn whole_vector_trailer_bytes(size: u32) -> usize {
    20 * size as usize + 64
}
