//! FTCO collectives (004) on real ranks: [`Communicator::ftco`].
//!
//! The operation routes around failed ranks inside itself: a rank that does not acknowledge
//! within the detection timeout is taken as dead and skipped (its parent, or its children, take
//! its place). Ranks the launcher confirmed dead before the call are left out of the tree from
//! the start, so only the first operation after a failure pays a timeout.
//!
//! The paper detects failures by timeouts alone. The launcher's failure notices can speed that
//! up ([`FtcoCall::notices`]): a notice is never wrong, because the launcher kills a rank before
//! it reports it. Without notices, a rank that is only slow may time out and be left out of this
//! operation's result while it is alive. Definition 3.2 admits that only for ranks that failed,
//! so choose a timeout well above the machine's scheduling delays.

use ftcoll_algos::ftco::{Collective, Ftco, FtcoOptions};
use ftcoll_algos::protocol::{AbortReason, Assembled, Input, Outbox, Protocol, Segmented, Wrapper};
use ftcoll_algos::{Rank, ReduceOp, Time, ValuesRef};

use ftcoll_algos::values::Element;

use crate::comm::{CommError, Communicator, Outcome, Slack};

/// Message latency f_ETA assumes on real ranks over shared memory or TCP on one machine.
const REAL_ETA_LATENCY_NS: u64 = 50_000;
/// Per-message overhead f_ETA assumes on real ranks.
const REAL_ETA_OVERHEAD_NS: u64 = 5_000;
/// What one MiB of a message adds on real ranks: 10 ms, i.e. a rank that moves data at
/// 100 MiB/s or more is not taken for silent. A 24 MB allreduce over TCP at n = 4 on a 2-core
/// machine crosses a link at a few hundred MB/s; without this allowance three of its four live
/// ranks were taken for dead by 100 ms timeouts and fenced. The price: with vectors of
/// megabytes, detecting a death waits for the transfers the dead rank's peers expected.
const REAL_TRANSFER_PER_MIB_NS: u64 = 10_000_000;

/// The FTCO options of real ranks: times in nanoseconds, f_ETA's costs those of one machine.
pub fn real_time_options(
    shape: ftcoll_algos::topology::TreeShape,
    roots: u32,
    detect_timeout: std::time::Duration,
    service: ftcoll_algos::ftco::ServiceDistance,
    fixed_timeout: bool,
) -> FtcoOptions {
    use ftcoll_algos::time::Duration as Ticks;
    FtcoOptions {
        shape,
        roots: roots.max(1),
        detect_timeout: Ticks(u64::try_from(detect_timeout.as_nanos()).unwrap_or(u64::MAX)),
        fixed_timeout,
        costs: ftcoll_algos::ftco::LogP {
            latency: Ticks(REAL_ETA_LATENCY_NS),
            overhead: Ticks(REAL_ETA_OVERHEAD_NS),
            per_mib: Ticks(REAL_TRANSFER_PER_MIB_NS),
        },
        service,
        ..FtcoOptions::default()
    }
}

impl FtcoCall {
    /// An FTCO allreduce on real ranks the way a library caller wants it: a binary tree with
    /// one root, RSD, the launcher's failure notices acted on, and a rank silent for
    /// `detect_timeout` taken for dead.
    pub fn allreduce(detect_timeout: std::time::Duration) -> FtcoCall {
        FtcoCall {
            collective: Collective::Allreduce,
            options: real_time_options(
                ftcoll_algos::topology::TreeShape::BINARY,
                1,
                detect_timeout,
                FtcoOptions::default().service,
                false,
            ),
            notices: true,
            seed: 1,
        }
    }
}

/// One FTCO call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FtcoCall {
    /// Broadcast from rank 0, reduce to rank 0, or allreduce.
    pub collective: Collective,
    /// Tree, timeout (nanoseconds), service distance.
    pub options: FtcoOptions,
    /// Also act on the launcher's failure notices during the call, not only on timeouts.
    pub notices: bool,
    /// Seed of the randomized service distance.
    pub seed: u64,
}

/// FTCO that ignores the launcher's failure notices: failures are found by its own timeouts
/// only. It wraps the whole shell, so that a death one segment's timeout found still reaches
/// the other segments (the shell tells them) while notices from outside do not.
struct TimeoutsOnly(Segmented<Ftco>);

impl Wrapper for TimeoutsOnly {
    type Inner = Segmented<Ftco>;

    fn inner(&self) -> &Segmented<Ftco> {
        &self.0
    }

    fn inner_mut(&mut self) -> &mut Segmented<Ftco> {
        &mut self.0
    }

    fn wrap_handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        if !matches!(input, Input::PeerFailed { .. }) {
            self.0.handle(now, input, out);
        }
    }
}

impl Assembled for TimeoutsOnly {
    fn results(&self) -> Option<impl Iterator<Item = (usize, ValuesRef<'_>)> + '_> {
        self.0.results()
    }

    fn output_len_total(&self) -> usize {
        self.0.output_len_total()
    }

    fn abort_reason(&self) -> Option<AbortReason> {
        self.0.abort_reason()
    }

    fn release_results(&mut self) {
        self.0.release_results();
    }
}

impl Communicator {
    /// An FTCO collective over this communicator's members, any type and length: `data` is
    /// this rank's input and, where the rank gets a result (every rank of an allreduce or
    /// broadcast, rank 0 of a reduce), becomes the result. The outcome's `excluded` lists the
    /// ranks (world ranks) whose input the result does not contain.
    ///
    /// A vector longer than a frame runs as one FTCO operation per segment, pipelined. Each
    /// segment keeps 004's guarantees; a rank that dies while they stream is counted in the
    /// segments it reached and not in the others, and then the call returns
    /// [`CommError::MixedContributors`] at every rank that would hold the result (identically
    /// at every rank of an allreduce: every segment's result and its contributor set are the
    /// same everywhere), never a vector that mixes them. The next call leaves the dead rank
    /// out from the start.
    pub fn ftco<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
        call: &FtcoCall,
    ) -> Result<Outcome, CommError> {
        let members = self.members();
        let failed = self.failed_ranks();
        let known_dead: Vec<Rank> = (0..members.len() as u32)
            .filter(|&i| failed.binary_search(&members[i as usize]).is_ok())
            .map(Rank)
            .collect();
        let mut config = call
            .options
            .config(
                Rank(self.rank()),
                self.size(),
                call.collective,
                op,
                self.next_op_id(),
                known_dead,
                call.seed,
            )
            .map_err(CommError::Config)?;
        // Segments as large as a frame holds beside the pieces' contributor ranges and the
        // dead set (and an average's weight).
        let trailer = crate::comm::whole_vector_trailer_bytes(self.size());
        let shell = self.shell_config(call.collective.algo(), op, T::DTYPE, Slack(trailer))?;
        // The whole vector's bytes, not a segment's: segments stream together, and a peer
        // busy moving the others is late on this one without being silent (with a segment's
        // allowance, a live rank of a 16 MiB allreduce at n = 5 on 2 cores was taken for dead
        // and fenced). An average carries its weight as one more element.
        let elements = data.len() as u64 + u64::from(op == ReduceOp::Average);
        config.payload_bytes = elements.saturating_mul(T::DTYPE.elem_bytes() as u64);
        // DATA to peer roots carries one vector per piece; past a frame it goes in parts.
        config.max_data_bytes =
            self.max_frame_bytes()
                .saturating_sub(ftcoll_algos::wire::HEADER_BYTES + trailer) as u64;
        let reduces = call.collective != Collective::Bcast;
        // Who the result leaves out, from its contributor set (member indices to world ranks):
        // every segment's set is the same, or the call ended with an error.
        let excluded = move |engine: &Ftco, outcome: &mut Outcome| {
            if let (true, Some(piece)) = (reduces, engine.result()) {
                outcome.excluded = members
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !piece.contributors.contains(*i as u32))
                    .map(|(_, &world)| Rank(world))
                    .collect();
            }
        };
        let make = move |_: &_, _, _| Ftco::new(config.clone());
        if call.notices {
            self.run_collective_then(shell, make, data, |shell, o| {
                if let Some(engine) = shell.any_instance() {
                    excluded(engine, o)
                }
            })
        } else {
            let shell = TimeoutsOnly(Segmented::new(shell, Box::new(make)));
            self.run_assembled_then(shell, data, |shell, o| {
                if let Some(engine) = shell.0.any_instance() {
                    excluded(engine, o)
                }
            })
        }
    }
}
