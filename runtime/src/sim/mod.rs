//! The deterministic discrete-event simulator.
//!
//! All ranks of a run live in one process as plain protocol state machines; virtual time advances
//! from event to event, so idle ranks cost nothing. One `u64` seed drives every random draw
//! (inputs, loss, start spread, detector jitter), and events at the same instant are processed in a
//! fixed order, so a seed replays the same trace ([`SimReport::trace_hash`]).
//!
//! Faults reach protocols only as the papers model them: a crash is silence followed by a
//! failure notice from the detector model (or silence only, with [`DetectorModel::Silent`]);
//! loss and cut links are missing messages; a bit flip is a changed bit in a message or an
//! [`ftcoll_algos::Input::Fault`].

pub mod cost;
mod engine;
pub mod inputs;
mod live;
pub mod oracle;
mod oracle_watch;
pub mod plan;
pub mod queue;
pub mod trace;

pub use cost::CostModel;
pub use engine::Simulation;
pub use inputs::{exact_aggregate, generate_inputs, rank_inputs, InputKind};
pub use live::Slice;
pub use oracle_watch::AllLiveOracle;

use ftcoll_algos::{Rank, Time};

use crate::faults::FaultSpec;

/// How failures are detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DetectorModel {
    /// Every survivor is told of a crash `delay_steps` after it (a perfect detector).
    Perfect {
        /// Detection delay.
        delay_steps: u64,
    },
    /// Heartbeats every `period_steps`; a rank silent for `timeout_steps` is suspected. A
    /// suspected rank that is still alive (stopped, or too slow to beat in time) is crashed first
    /// (fenced), then survivors are told: the papers assume fail-stop, so no live rank may ever be
    /// reported dead.
    Timeout {
        /// Heartbeat period.
        period_steps: u64,
        /// Silence before suspicion.
        timeout_steps: u64,
    },
    /// No detector: a crash is silence only and no rank is ever told. For protocols that detect
    /// failures by their own timeouts (FTCO, 004): a notice would tell them what the paper's
    /// model makes them find out. A stopped rank is never fenced.
    Silent,
}

impl Default for DetectorModel {
    fn default() -> Self {
        DetectorModel::Perfect { delay_steps: 0 }
    }
}

/// Whose accuracy the oracle watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OracleWatch {
    /// One rank, checked when it completes a round (ARDB: the root, 000 Fig. 12).
    Rank(Rank),
    /// Every live rank, checked after every input it handles (000 Sec. 4.4.1: "the local
    /// relative error of all processes was less than 10^-14"). After a crash the target becomes
    /// the survivors' aggregate, the result gossip reductions define.
    AllLive,
}

/// The oracle-driven stop of approximate algorithms: when the watched estimates reach a relative
/// error at or below `eps`, every rank is stopped; so is every rank once any rank completes
/// `max_round` rounds (000 Sec. 4.4.1: "once the first process has sent out 500 messages").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OracleStop {
    /// Target relative error.
    pub eps: f64,
    /// Whose estimate decides.
    pub watch: OracleWatch,
    /// Stop when any rank completes this many rounds, accurate or not.
    pub max_round: Option<u32>,
}

/// Everything that defines a simulated run besides the protocol instances.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The seed of every random draw.
    pub seed: u64,
    /// Communication costs.
    pub cost: CostModel,
    /// Failure detection.
    pub detector: DetectorModel,
    /// Scripted faults.
    pub faults: Vec<FaultSpec>,
    /// Ranks per node, for node failures.
    pub ranks_per_node: u32,
    /// Bound on processed events; a run that reaches it is reported as truncated.
    pub max_events: u64,
    /// Bound on virtual time.
    pub max_time: Time,
    /// Oracle stop for approximate algorithms.
    pub oracle_stop: Option<OracleStop>,
    /// With the all-live oracle: sample the live ranks' max and median error every this many
    /// steps into [`SimReport::history`] (convergence plots, 000 Fig. 1).
    pub history_every: Option<u64>,
    /// Every rank's start time in steps, one per rank: replaces a spread in `faults` (for
    /// experiments that draw their own start times, such as 004 Table 2).
    pub start_times: Option<Vec<u64>>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            cost: CostModel::default(),
            detector: DetectorModel::default(),
            faults: Vec::new(),
            ranks_per_node: 1,
            max_events: 10_000_000_000,
            max_time: Time(u64::MAX / 2),
            oracle_stop: None,
            history_every: None,
            start_times: None,
        }
    }
}

/// Why a rank crashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashCause {
    /// A scripted kill.
    Scripted,
    /// Suspected by the timeout detector while alive, and fenced.
    Fenced,
}

/// One crash of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashRecord {
    /// The rank.
    pub rank: Rank,
    /// When it crashed.
    pub at: Time,
    /// Why.
    pub cause: CrashCause,
    /// When survivors were told (None if the run ended first).
    pub noticed_at: Option<Time>,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimReport {
    /// Ranks.
    pub n: u32,
    /// The seed.
    pub seed: u64,
    /// Events processed.
    pub events: u64,
    /// Frames sent by protocols.
    pub messages: u64,
    /// Frames handed to protocols.
    pub delivered: u64,
    /// Frames lost to random loss.
    pub dropped_loss: u64,
    /// Frames lost on cut links.
    pub dropped_cut: u64,
    /// Frames addressed to crashed or stopped ranks.
    pub dropped_dead: u64,
    /// Frames that failed to decode, or that protocols rejected.
    pub rejected: u64,
    /// Message bit flips applied.
    pub message_flips: u64,
    /// State bit flips applied by protocols.
    pub state_flips: u64,
    /// Failure notices delivered.
    pub notices: u64,
    /// Virtual time of the last handled input.
    pub sim_time_steps: u64,
    /// Virtual time of the last completion ([`ftcoll_algos::Event::Completed`]): the
    /// operation's latency. Earlier than `sim_time_steps` when timers a protocol no longer
    /// needs still fire (drivers may deliver cancelled timers).
    pub completion_steps: u64,
    /// Most rounds any rank completed.
    pub rounds: u32,
    /// Max relative error over live ranks that completed (infinite if none did).
    pub max_rel_error: f64,
    /// With crashes: the same error against the nearest aggregate a fault-tolerant collective may
    /// return, the survivors' inputs plus those of any subset of the crashed ranks (001 4.1 and
    /// 5.1: a failed rank's value is counted or not). `None` without crashes, or with more than
    /// [`MAX_ADMISSIBLE_CRASHES`] of them.
    pub admissible_error: Option<f64>,
    /// Live ranks that completed.
    pub completed: u32,
    /// Ranks that aborted.
    pub aborted: u32,
    /// Live ranks that aborted (the operation ended in an error at a survivor).
    pub live_aborted: u32,
    /// Live ranks that neither completed nor aborted.
    pub incomplete: u32,
    /// Largest relative difference between the results of live ranks that completed (`None`
    /// when none did): consistency, whatever the expected value.
    pub result_spread: Option<f64>,
    /// Crashes, in order.
    pub crashes: Vec<CrashRecord>,
    /// The round at which the oracle stopped the run.
    pub oracle_stop_round: Option<u32>,
    /// The oracle's round budget ([`OracleStop::max_round`]) stopped the run before the
    /// accuracy was reached.
    pub stopped_by_budget: bool,
    /// Every round completed by each rank, summed (gossip: pushes, i.e. messages per rank).
    pub total_rounds: u64,
    /// The run hit `max_events` or `max_time`.
    pub truncated: bool,
    /// Hash of the event trace.
    pub trace_hash: u64,
    /// Wall-clock seconds of `run`.
    pub wall_s: f64,
    /// `(step, max error, median error)` over live ranks, every [`SimConfig::history_every`].
    pub history: Vec<(u64, f64, f64)>,
}

/// Most crashes for which [`SimReport::admissible_error`] enumerates the subsets.
pub const MAX_ADMISSIBLE_CRASHES: usize = 10;

/// A run that cannot be set up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The fault plan does not fit the run.
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    /// Protocol instances, inputs, start times and N disagree.
    #[error("simulation set-up: {0}")]
    Setup(&'static str),
}
