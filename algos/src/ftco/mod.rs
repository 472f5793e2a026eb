//! FTCO: tree-based fault-tolerant collectives (paper 004, Margolin and Barak), as one sans-IO
//! state machine, [`Ftco`], for broadcast, reduce and allreduce over a [`crate::topology::Tree`]
//! with one or several roots.
//!
//! Data moves along the tree as DATA messages, each acknowledged by an ACK; a rank that waits
//! longer than the expected arrival time (f_ETA, per phase) probes the ranks it waits for with
//! KEEPALIVE. A DATA or KEEPALIVE that is not acknowledged within f_timeout(me, x) (a base
//! timeout times the tree distance times x's degree) marks x dead, and x is replaced in Up by
//! its nearest live ancestor or in Down by its children (Alg. 4). A dead root of an allreduce is
//! replaced by its children, which join the other roots as peer roots. Ranks known dead before
//! the operation ([`FtcoConfig::known_dead`]) are left out from the start. The main loop keeps
//! Alg. 1's order: tree progress, then the queue and the fault check restricted to the ranks at
//! the service distance (RSD or DISD, Appendix A), then the whole queue and the whole check;
//! DATA is handled before KEEPALIVE and ACK (Alg. 2).
//!
//! Fixes to the printed pseudocode, from the slip list of the papers index:
//! - Alg. 2, DATA: the sender is added to Arrived and to ToACK.
//! - Only a final result (DATA flagged [`FLAG_RESULT`], sent down the tree) overwrites the
//!   value; DATA from children and peer roots is combined.
//! - Sends up the tree also set LastSent, so a dead parent is detected by the ACK timeout.
//! - f_RSD draws Y uniformly from the open interval (0, 1) and returns at least 1.
//! - f_ETA depends on the phase: subtree data, the peer roots' exchange, or the final result.
//! - Every contribution is counted exactly once, for every operator: DATA carries, per value,
//!   its contributor set as disjoint rank ranges ([`Contributors`]; in k-nomial numbering a
//!   subtree is one range), and a receiver combines only what it does not hold yet
//!   ([`pieces`]). The final result carries its contributor set, so callers see which ranks
//!   were reduced (Definition 3.2).
//!
//! Further choices of this implementation:
//! - A rank that receives DATA or KEEPALIVE from a rank that skipped over some of its tree
//!   neighbours learns that those are dead (the sender detected them); this is sound in the
//!   paper's fail-stop model and speeds recovery.
//! - Peer roots send each other every piece they hold (their own subtree combined, peer pieces
//!   kept apart), so a root that joins late still learns the data of a root that died after
//!   sending it; a root that has its result answers a root that joins later with the result.
//! - Their DATA names the ranks the sender knows dead ([`FLAG_DEAD_SET`]). A receiver whose
//!   root set holds members the sender's does not (the children of a root the sender did not
//!   know dead) passes the sender's own piece on to them: the sender may die before it finds
//!   that its DATA went to a dead root.
//! - ACKs carry the sequence number of the DATA or KEEPALIVE they answer, so an old ACK never
//!   covers a newer message.
//! - Broadcast and reduce keep the paper's assumption that the root (rank 0) survives; with a
//!   multi-root tree the other roots hang under rank 0. If every ancestor of a rank is dead, the
//!   rank aborts with [`crate::protocol::AbortReason::PeerFailed`] of rank 0.
//! - Consistency of allreduce when peer roots fail relies on the synchronous timing of the model
//!   (a rank's sends for one input leave together; timeouts exceed message latency).
//!
//! Not done in this version: process imbalance (Appendix B, a rank that has not started yet
//! answers ACKs); messages that arrive before [`crate::Input::Start`] are queued (up to
//! [`FtcoConfig::max_queue`]) and handled after it, and a rank that starts late may be taken for
//! dead. Rank-id payloads (the union operator) are not supported: the contributor set already
//! names the ranks.

mod engine;
mod knowledge;
pub mod options;
pub mod pieces;
pub mod ranges;
mod view;

#[cfg(test)]
mod tests;

pub use engine::Ftco;
pub use options::FtcoOptions;
pub use pieces::Piece;
pub use ranges::{Contributors, ContributorsError};

use crate::protocol::Outbox;
use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::time::Duration;
use crate::topology::Tree;
use crate::values::ReduceOp;
use crate::wire::{FrameHeader, OpId};

/// Which collective one [`Ftco`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// Rank 0's input to every rank.
    Bcast,
    /// Every rank's input, reduced at rank 0.
    Reduce,
    /// Every rank's input, reduced at every rank.
    Allreduce,
}

impl Collective {
    /// The protocol id its frames carry.
    pub fn algo(self) -> Algorithm {
        match self {
            Collective::Bcast => Algorithm::FtcoBcast,
            Collective::Reduce => Algorithm::FtcoReduce,
            Collective::Allreduce => Algorithm::FtcoAllreduce,
        }
    }
}

/// Which service-distance function orders the work of a step (Appendix A).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ServiceDistance {
    /// Randomized: `max(1, ceil(log_r(Y)))`, Y uniform on (0, 1), `0 < r <= 1/2`.
    Rsd {
        /// The base r.
        ratio: f64,
    },
    /// Deterministic intervals: half of each interval serves distance 1, a quarter distance 2,
    /// and so on; an interval is four steps per rank at distance 1.
    Disd,
}

/// The LogP-like costs f_ETA assumes, in [`crate::Time`] units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogP {
    /// Message latency L.
    pub latency: Duration,
    /// Per-message overhead o (send or receive).
    pub overhead: Duration,
    /// What one MiB of payload adds to a message (LogGP's G): zero in 004's model, where a
    /// message's size costs nothing. On real ranks a vector of megabytes takes milliseconds
    /// to cross, and a rank busy moving one is not a silent rank.
    pub per_mib: Duration,
}

/// Message kinds of FTCO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FtcoKind {
    /// Values with their contributor sets (`aux` = number of pieces; the rank trailer holds
    /// each piece's ranges). Flag [`FLAG_RESULT`] marks the final result.
    Data = 1,
    /// A probe: "are you alive?". Answered by ACK.
    KeepAlive = 2,
    /// Acknowledges the DATA or KEEPALIVE whose sequence number is in `aux`.
    Ack = 3,
}

impl FtcoKind {
    /// Decodes the header's kind byte.
    pub fn from_u8(kind: u8) -> Option<FtcoKind> {
        match kind {
            1 => Some(FtcoKind::Data),
            2 => Some(FtcoKind::KeepAlive),
            3 => Some(FtcoKind::Ack),
            _ => None,
        }
    }
}

/// Header flag of DATA: the value is the final result (it overwrites; it is not combined).
pub const FLAG_RESULT: u16 = 1;
/// Header flag of DATA between peer roots: after the pieces' ranges, the trailer holds the ranks
/// the sender knows dead (a range count of 0 for none), from which a receiver derives the root
/// set the DATA went to.
pub const FLAG_DEAD_SET: u16 = 4;
/// Header flag of ACK: sent by a rank that has not started the operation yet (App. B). It
/// says the rank is alive; what it acknowledges is held, not taken.
pub const FLAG_PROVISIONAL: u16 = 2;
/// Header flag of DATA between peer roots: more parts of the same DATA follow (see
/// [`FtcoConfig::max_data_bytes`]). The receiver counts the sender as arrived only at the part
/// without it; the transports deliver a sender's frames in order.
pub const FLAG_MORE: u16 = 8;

/// Configuration of one FTCO operation at one rank.
#[derive(Clone, Debug, PartialEq)]
pub struct FtcoConfig {
    /// This rank.
    pub rank: Rank,
    /// The tree (its size is the group size).
    pub tree: Tree,
    /// Which collective.
    pub collective: Collective,
    /// The operator (reduce and allreduce).
    pub op: ReduceOp,
    /// Operation id.
    pub op_id: OpId,
    /// Costs f_ETA assumes.
    pub costs: LogP,
    /// Multiplier on the fault-free f_ETA before a rank starts probing (at least 1).
    pub eta_slack: u32,
    /// Base of f_timeout: the timeout towards a neighbour of degree 1 at distance 1.
    pub detect_timeout: Duration,
    /// Every per-message timeout is `detect_timeout` itself, as with ULFM's fixed timeout
    /// (004's Table 1 ran so), instead of App. A's distance × degree scaling.
    pub fixed_timeout: bool,
    /// The service-distance function.
    pub service: ServiceDistance,
    /// Ranks known dead before the operation: left out of the tree from the start.
    pub known_dead: Vec<Rank>,
    /// The run's seed; the RSD draws use a generator seeded from it and this rank.
    pub seed: u64,
    /// Most frames held in the inbound queue; more are rejected and counted.
    pub max_queue: usize,
    /// Bytes of the vector one piece carries (0 where unknown): with `costs.per_mib`, the time
    /// each message takes to cross, added to f_ETA and to every timeout.
    pub payload_bytes: u64,
    /// Most bytes of values one DATA frame carries (0: no limit). A top rank's DATA to a peer
    /// root holds its own piece and every peer piece it has, one vector each; after a root
    /// dies that can outgrow a transport frame that one vector fits, so it goes in parts of
    /// whole pieces, each part a DATA of its own.
    pub max_data_bytes: u64,
    /// 004's step model (Sec. 5): one action per step, a send or the handling of one queued
    /// message, chosen by Alg. 1's loop from the whole inbound queue; a rank finishes when its
    /// traversal is complete (Alg. 3), not when its DATA is acknowledged. The runtime keeps the
    /// event-driven engine, which empties its queue at every input and finishes only once
    /// every DATA it sent is acknowledged.
    pub step_model: bool,
}

impl FtcoConfig {
    /// Defaults for the paper's LogP model (L = 10, o = 1 steps): sum, RSD with r = 1/2,
    /// a base timeout of 4L, slack 2.
    pub fn new(rank: Rank, tree: Tree, collective: Collective) -> FtcoConfig {
        FtcoConfig {
            rank,
            tree,
            collective,
            op: ReduceOp::Sum,
            op_id: OpId(0),
            costs: LogP {
                latency: Duration(10),
                overhead: Duration(1),
                per_mib: Duration(0),
            },
            eta_slack: 2,
            detect_timeout: Duration(40),
            fixed_timeout: false,
            service: ServiceDistance::Rsd { ratio: 0.5 },
            known_dead: Vec::new(),
            seed: 0,
            max_queue: 4096,
            payload_bytes: 0,
            max_data_bytes: 0,
            step_model: false,
        }
    }
}

/// 004 App. B: a rank that has not started an operation yet answers the DATA and KEEPALIVE
/// others send it for that operation (the DATA itself waits, held by the caller, until the rank
/// starts), so that a peer already in the operation does not take it for dead. Ranks reach an
/// operation at different times whenever the previous one ended unevenly, as one that routed
/// around a failure does. The answer is a provisional ACK ([`FLAG_PROVISIONAL`]): the sender
/// keeps its DATA unacknowledged until the rank has really taken it, so a rank that dies
/// before it starts is routed around instead of silently swallowing the data. `me` is the
/// receiver, `from` the sender, as the operation numbers them. Queues the ACK and returns true
/// for such a frame; false for any other.
pub fn ack_before_start(me: Rank, from: Rank, header: &FrameHeader, out: &mut Outbox) -> bool {
    let algo = match Algorithm::from_wire(header.algo) {
        Some(algo @ (Algorithm::FtcoBcast | Algorithm::FtcoReduce | Algorithm::FtcoAllreduce)) => {
            algo
        }
        _ => return false,
    };
    if !matches!(
        FtcoKind::from_u8(header.kind),
        Some(FtcoKind::Data | FtcoKind::KeepAlive)
    ) {
        return false;
    }
    // The engine's ACK: sequence 0, the acknowledged message's sequence in `aux`.
    let ack = FrameHeader::new(algo, FtcoKind::Ack as u8, OpId(header.op_id), me, 0)
        .with_aux(u64::from(header.step))
        .with_flags(FLAG_PROVISIONAL);
    out.send(from, ack, crate::values::ValuesRef::Empty);
    true
}
