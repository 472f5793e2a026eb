//! What the driver (launcher or simulator) tells the console: the job's fixed facts, telemetry
//! frames, and log lines.

use ftcoll_algos::inspect::Inspection;

/// Fixed facts of the job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobInfo {
    /// Algorithm name, as the launcher spells it.
    pub algo: String,
    /// Number of ranks.
    pub n: u32,
    /// Transport: `"shm"`, `"tcp"` or `"sim"`.
    pub transport: String,
    /// Whether ranks run in the simulator rather than as processes.
    pub simulated: bool,
    /// Width of a value in bits (64 or 32): the range of bit positions a flip may target.
    pub value_bits: u32,
    /// Ranks per node; `kill-node` targets `rank / ranks_per_node`.
    pub ranks_per_node: u32,
    /// Seed of the job; the console's random choices (random kill) derive from it.
    pub seed: u64,
}

/// Where a rank is in its life, as the driver sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankState {
    /// Launched, not yet contributing.
    Starting,
    /// Taking part in the current operation.
    Running,
    /// Finished the current operation.
    Done,
    /// A failure detector suspects it; not confirmed dead.
    Suspected,
    /// Confirmed failed (killed or crashed).
    Dead,
}

/// One telemetry frame from the driver, at most about 10 per second.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Update {
    /// Wall time since the job started, in seconds (for the simulator too).
    pub elapsed_s: f64,
    /// Extra clock shown in the header when non-empty, e.g. `"sim t=1234 steps"`.
    pub time_label: String,
    /// Current operation index (0-based).
    pub op: u64,
    /// Highest iteration or round among the ranks in this operation.
    pub round: u32,
    /// State of each rank; `n` entries.
    pub states: Vec<RankState>,
    /// Relative error of each rank's estimate; `n` entries, NaN when unknown.
    pub errors: Vec<f32>,
    /// Frames sent by all ranks since the job started (the console derives the rate).
    pub messages_total: u64,
    /// Detail of the selected rank, when the driver has it.
    pub detail: Option<RankDetail>,
}

/// The driver's view of one rank, for the detail panel.
#[derive(Clone, Debug, PartialEq)]
pub struct RankDetail {
    /// Which rank this describes.
    pub rank: u32,
    /// Its state.
    pub state: RankState,
    /// Protocol phase, free text.
    pub phase: String,
    /// Iteration or round of this rank.
    pub iteration: u32,
    /// Its current estimate of the reduction.
    pub estimate: f64,
    /// Relative error of that estimate; NaN when unknown.
    pub error: f32,
    /// The algorithm's own view of the rank.
    pub inspection: Inspection,
}

/// What kind of event a log line reports; decides its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogKind {
    /// A detected failure.
    Failure,
    /// A fault the user injected.
    Injected,
    /// Anything else worth a line.
    Info,
}

/// One line of the failure log.
#[derive(Clone, Debug, PartialEq)]
pub struct LogEntry {
    /// When it happened, in seconds since the job started.
    pub at_s: f64,
    /// What kind of event it is.
    pub kind: LogKind,
    /// The text shown.
    pub text: String,
}
