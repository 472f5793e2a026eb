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
use ftcoll_algos::protocol::{Input, Outbox, Protocol, Wrapper};
use ftcoll_algos::{Rank, ReduceOp, Time};

use crate::comm::{CommError, Communicator, Outcome};

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

/// FTCO that ignores failure notices: failures are found by its own timeouts only.
struct TimeoutsOnly(Ftco);

/// Runs whole-vector (one segment): the shell's defaults.
impl ftcoll_algos::protocol::SegmentProtocol for TimeoutsOnly {}

impl Wrapper for TimeoutsOnly {
    type Inner = Ftco;

    fn inner(&self) -> &Ftco {
        &self.0
    }

    fn inner_mut(&mut self) -> &mut Ftco {
        &mut self.0
    }

    fn wrap_handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        if !matches!(input, Input::PeerFailed { .. }) {
            self.0.handle(now, input, out);
        }
    }
}

impl Communicator {
    /// An FTCO collective over this communicator's members: `data` is this rank's input and,
    /// where the rank gets a result (every rank of an allreduce or broadcast, rank 0 of a
    /// reduce), becomes the result. The outcome's `excluded` lists the ranks (world ranks)
    /// whose input the result does not contain.
    pub fn ftco(
        &mut self,
        data: &mut [f64],
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
        // An average carries its weight as one more element.
        let elements = data.len() as u64 + u64::from(op == ReduceOp::Average);
        config.payload_bytes = elements.saturating_mul(8);
        // DATA to peer roots carries one vector per piece; past a frame it goes in parts.
        let trailer = crate::comm::whole_vector_trailer_bytes(self.size());
        config.max_data_bytes =
            self.max_frame_bytes()
                .saturating_sub(ftcoll_algos::wire::HEADER_BYTES + trailer) as u64;
        let shell = self.whole_vector_shell(call.collective.algo(), op, data.len())?;
        let reduces = call.collective != Collective::Bcast;
        // Who the result leaves out, from its contributor set (member indices to world ranks).
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
        if call.notices {
            let make = move |_: &_, _, _| Ftco::new(config.clone());
            self.run_collective_then(shell, make, data, |shell, o| {
                if let Some(engine) = shell.any_instance() {
                    excluded(engine, o)
                }
            })
        } else {
            let make = move |_: &_, _, _| TimeoutsOnly(Ftco::new(config.clone()));
            self.run_collective_then(shell, make, data, |shell, o| {
                if let Some(p) = shell.any_instance() {
                    excluded(&p.0, o)
                }
            })
        }
    }
}
