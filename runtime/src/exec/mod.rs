//! The executor: drives a protocol state machine over a real transport with a real clock.
//!
//! The loop is the simulator's, with real time: feed failure notices and arrived frames to the
//! protocol, and [`Input::Timeout`] once the time reaches its `poll_timeout`; carry out its sends
//! (through this rank's scripted faults); sleep in the transport when nothing is ready, at most
//! until the next deadline. Frames are handed to the protocol in
//! place, straight from the transport's receive buffer. Frames of a later operation (a peer that
//! finished this one first) are copied aside, in a bounded buffer, until that operation starts.
//!
//! The executor knows no algorithm. Besides the operation it runs, it serves finished
//! operations that still owe peers answers ([`Endpoint::linger`]) and the per-communicator
//! [`Service`]s the library installs (agreement, revocation), which get the frames they claim
//! whatever operation runs. What a protocol family answers to frames of an operation not
//! started yet comes from the registry ([`ftcoll_algos::Algorithm::answer_before_start`]).
//!
//! One file per concern: `services` (per-communicator services), `operation` (the loop of one
//! operation), `receive` (routing arrived frames), `send` (carrying out the outbox), `held`
//! (frames of later operations), `lingering` and `between` (serving outside an operation),
//! `telemetry` (console samples).
//!
//! [`Input::Timeout`]: ftcoll_algos::Input::Timeout

use std::collections::BTreeSet;
use std::time::Instant;

use ftcoll_algos::protocol::Outbox;
use ftcoll_algos::wire::FrameError;
use ftcoll_algos::{Rank, Time};

mod between;
mod held;
mod lingering;
mod operation;
pub mod pinning;
mod receive;
mod send;
pub(crate) use send::SendStall;
mod services;
mod spares;
mod telemetry;

use self::held::HeldFrames;
use self::lingering::Lingering;
use self::services::Services;

pub use services::{Claim, Service};
pub use telemetry::is_final;

use crate::control::client::ControlClient;
use crate::control::RankSample;
use crate::rank_faults::RankFaults;
use crate::transport::{Transport, TransportError};

/// Frames handled per receive poll, so timers and notices are not starved.
const RECV_BATCH: usize = 256;
/// Bound on timeout suspicions kept between two telemetry samples.
const MAX_SUSPICIONS: usize = 64;

/// How an operation ended at this rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpEnd {
    /// The protocol completed.
    Completed,
    /// The protocol aborted (a failure it cannot tolerate, or a stop).
    Aborted,
    /// The operation exceeded its time limit.
    TimedOut,
    /// The launcher asked the job to stop.
    Shutdown,
    /// The communicator was revoked.
    Revoked,
}

/// Counters of one operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Frames sent.
    pub sent: u64,
    /// Frames received for this operation.
    pub received: u64,
    /// Frames rejected (malformed or refused by the protocol).
    pub rejected: u64,
    /// Why the protocol aborted, where it did.
    pub abort: Option<ftcoll_algos::protocol::AbortReason>,
}

/// A rank's execution context: its transport, control connection, clock, and known failures.
pub struct Endpoint<T: Transport> {
    /// The data-plane transport.
    pub transport: T,
    control: std::sync::Arc<ControlClient>,
    me: Rank,
    epoch: Instant,
    /// The last time read from the clock, handed to protocols that ignore time.
    last_now: std::cell::Cell<Time>,
    failed: BTreeSet<u32>,
    /// Where this rank is pinned, when it is: a death on its node moves it (see [`pinning`]).
    pinning: Option<pinning::CorePinning>,
    faults: RankFaults,
    /// What the operation and the lingering ones queue, addressed by member index (services
    /// have their own, in world ranks).
    outbox: Outbox,
    /// Frames of operations not started yet, held until they start.
    held: HeldFrames,
    /// The id the next operation gets at the earliest (one above the last one run): between
    /// operations, frames from it on are held for their operation.
    next_op_id: u64,
    /// Finished operations still served (see [`Endpoint::linger`]), oldest first.
    lingering: Vec<Lingering>,
    /// An operation that must stay reachable until every live rank finished has lingered.
    keeps_finished_reachable: bool,
    /// The per-communicator services (agreement, revocation), in world ranks: their frames
    /// reach them whatever operation runs, so a rank answers agreements it already returned
    /// from.
    services: Services,
    /// World ranks of the communicator's members when it is a shrunk one (increasing):
    /// protocols speak member indices, the transport world ranks.
    group: Option<Vec<u32>>,
    scratch: Vec<u8>,
    /// Failures learned while a finished operation's last sends drained (bounded by the
    /// job's size): handed to that operation if it lingers. Over a transport whose sends
    /// take a while (libfabric's tcp connects lazily) a notice arriving then was lost to it: a
    /// finished gossip rank kept its flows with the dead rank and bent the survivors' sums.
    drained_notices: Vec<u32>,
    /// Frames sent since the rank started (console telemetry).
    sent_total: u64,
    /// Index of the operation running (or last run).
    op_index: u64,
    /// Whether the launcher wants status samples.
    telemetry_on: bool,
    /// The last finished operation's final state, for samples between operations.
    last_sample: Option<RankSample>,
    sample_scratch: Vec<f64>,
    /// Peers the protocol declared dead by its own timeouts since the last sample.
    suspicions: Vec<u32>,
    /// Peers the transport found unreachable, being forwarded to the launcher.
    unreachable: Vec<Rank>,
    /// Peers the protocol took for dead by its own timeouts (world ranks), to be fenced by
    /// the launcher.
    to_fence: Vec<u32>,
}

/// A failure of the executor itself (not of the collective).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
}

impl<T: Transport> Endpoint<T> {
    /// A context for rank `me`.
    pub fn new(
        transport: T,
        control: std::sync::Arc<ControlClient>,
        me: Rank,
        faults: RankFaults,
    ) -> Endpoint<T> {
        control.add_waker(transport.waker());
        let telemetry_on = control.telemetry_enabled();
        Endpoint {
            transport,
            control,
            me,
            epoch: Instant::now(),
            last_now: std::cell::Cell::new(Time::ZERO),
            failed: BTreeSet::new(),
            pinning: None,
            faults,
            outbox: Outbox::new(),
            held: HeldFrames::default(),
            next_op_id: 1,
            lingering: Vec::new(),
            keeps_finished_reachable: false,
            services: Services::default(),
            group: None,
            scratch: Vec::new(),
            drained_notices: Vec::new(),
            sent_total: 0,
            op_index: 0,
            telemetry_on,
            last_sample: None,
            sample_scratch: Vec::new(),
            suspicions: Vec::new(),
            to_fence: Vec::new(),
            unreachable: Vec::new(),
        }
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.me
    }

    /// The control connection.
    pub fn control(&self) -> &ControlClient {
        &self.control
    }

    /// Ranks known to have failed.
    pub fn failed(&self) -> &BTreeSet<u32> {
        &self.failed
    }

    /// This rank's scripted faults.
    pub fn faults(&self) -> &RankFaults {
        &self.faults
    }

    fn now(&self) -> Time {
        let now = Time(self.epoch.elapsed().as_nanos() as u64);
        self.last_now.set(now);
        now
    }

    /// Takes new failure notices; returns the newly failed ranks.
    fn absorb_failures(&mut self) -> Vec<u32> {
        self.forward_unreachable();
        let mut fresh = Vec::new();
        if !self.control.has_news() {
            return fresh;
        }
        for (rank, cause) in self.control.take_failures() {
            if self.learn_failed(rank) {
                tracing::debug!(me = self.me.0, rank, cause = cause.name(), "peer failed");
                fresh.push(rank);
            }
        }
        // After take_failures, which clears the news flag (see take_injected).
        for spec in self.control.take_injected() {
            match self.faults.inject(&spec, self.epoch.elapsed()) {
                Ok(()) => tracing::info!(rank = self.me.0, fault = %spec, "injected fault"),
                Err(error) => tracing::warn!(fault = %spec, %error, "injected fault refused"),
            }
        }
        fresh
    }

    /// Passes the peers the transport found unreachable, and those the protocol took for dead
    /// by its timeouts, to the launcher. They are not failed yet: only the launcher declares
    /// failures, after making sure the rank is dead (it kills them first).
    fn forward_unreachable(&mut self) {
        self.transport.take_unreachable(&mut self.unreachable);
        for peer in self.unreachable.drain(..) {
            if self.failed.contains(&peer.0) {
                continue;
            }
            tracing::info!(peer = peer.0, "transport found the peer unreachable");
            if let Err(error) = self.control.unreachable(peer.0) {
                tracing::debug!(%error, "cannot report an unreachable peer");
            }
        }
        for peer in self.to_fence.drain(..) {
            if self.failed.contains(&peer) {
                continue;
            }
            if let Err(error) = self.control.suspect(peer) {
                tracing::debug!(%error, "cannot ask the launcher to fence a suspect");
            }
        }
    }

    /// Records that `rank` is dead; false if it was known. Besides the launcher's notices, an
    /// agreement's decided failed set is a source: only dead ranks ever enter one (fail-stop),
    /// and learning them from the decision means an `ack_failed` right after an agreement that
    /// reported them acknowledges them even if the launcher's notice is still on its way.
    fn learn_failed(&mut self, rank: u32) -> bool {
        if rank == self.me.0 || !self.failed.insert(rank) {
            return false;
        }
        self.transport.peer_failed(Rank(rank));
        self.services.peer_failed(rank);
        if let Some(pinning) = self.pinning.as_mut() {
            pinning.repin(self.me.0, &self.failed);
        }
        true
    }

    /// Pins this rank to its core (`FTCOLL_BIND=core`), and from now on moves it when ranks of
    /// its node die.
    pub fn pin_to_core(&mut self, ranks_per_node: u32) {
        self.pinning = pinning::CorePinning::bind(self.me.0, ranks_per_node);
    }

    /// Learns the ranks of an agreement's decided failed set (see `learn_failed`) between
    /// operations, and sends what the services say in return.
    pub fn learn_agreed_failures(&mut self, ranks: &[u32]) -> Result<(), ExecError> {
        let mut any = false;
        for &rank in ranks {
            any |= self.learn_failed(rank);
        }
        if any {
            self.after_handle(&mut OpStats::default())?;
        }
        Ok(())
    }

    /// SIGKILLs this process if a scripted fault kills it at the start of operation
    /// `op_index`: the same death the launcher's reaper and survivors see.
    pub fn die_if_scripted(&self, op_index: u64) {
        let Some(after) = self.faults.dies_during_op(op_index) else {
            return;
        };
        tracing::warn!(
            rank = self.me.0,
            op = op_index,
            after_us = after.as_micros() as u64,
            "scripted kill during an operation"
        );
        let die = || {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        };
        if after.is_zero() {
            die();
        } else {
            // The operation runs on this thread: the kill comes from a timer beside it.
            let spawned = std::thread::Builder::new()
                .name("scripted-kill".into())
                .spawn(move || {
                    std::thread::sleep(after);
                    die();
                });
            if spawned.is_err() {
                die();
            }
        }
    }

    /// Restricts later operations to `members` (world ranks, increasing): protocol rank i is
    /// world rank `members[i]`.
    pub fn set_group(&mut self, members: Vec<u32>) {
        self.group = Some(members);
    }
}

/// The member index of a world rank in `group` (itself without a group).
#[inline]
fn local(group: &Option<Vec<u32>>, world: u32) -> Option<u32> {
    match group {
        None => Some(world),
        Some(members) => members.binary_search(&world).ok().map(|i| i as u32),
    }
}

fn log_rejected(from: Rank, error: FrameError) {
    tracing::warn!(from = from.0, %error, "rejected a frame");
}
