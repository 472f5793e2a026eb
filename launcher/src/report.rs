//! The JSON report of a run. Keys are stable: later versions add keys, never rename them. Units
//! are last in every name. Non-finite numbers (an error with no completed rank) are `null`.

use ftcoll_runtime::sim::{CrashCause, SimReport};
use serde::Serialize;

/// One failure of the run.
#[derive(Debug, Serialize)]
pub struct FailureJson {
    /// The failed rank.
    pub rank: u32,
    /// Who detected it: `detector` (the simulator's failure-detector model).
    pub detected_by: &'static str,
    /// How: `scripted` kill, or `fenced` after a timeout suspicion.
    pub how: &'static str,
    /// When it crashed, in simulator steps.
    pub at_steps: u64,
    /// When survivors were told, in steps (null if the run ended first).
    pub noticed_at_steps: Option<u64>,
}

/// The report written by `--json`.
#[derive(Debug, Serialize)]
pub struct RunJson {
    /// Schema version of this layout.
    pub schema_version: u32,
    /// Ranks.
    pub n: u32,
    /// Algorithm name.
    pub algo: String,
    /// Reduction operator.
    pub op: String,
    /// `sim` for simulated runs.
    pub transport: &'static str,
    /// The seed.
    pub seed: u64,
    /// Most rounds any rank completed.
    pub rounds: u32,
    /// Frames sent.
    pub messages: u64,
    /// Frames delivered to protocols.
    pub messages_delivered: u64,
    /// Frames lost to random loss, cut links, and dead receivers.
    pub messages_dropped: u64,
    /// Frames rejected as malformed or unexpected.
    pub messages_rejected: u64,
    /// Bit flips applied to messages and to state.
    pub bit_flips: u64,
    /// Virtual time at the end, in steps.
    pub sim_time_steps: u64,
    /// Max relative error over live ranks that completed.
    pub max_rel_error: Option<f64>,
    /// Error against survivors plus any subset of crashed ranks (runs with crashes).
    pub admissible_error: Option<f64>,
    /// Live ranks that completed.
    pub ranks_completed: u32,
    /// Ranks that aborted.
    pub ranks_aborted: u32,
    /// Live ranks that neither completed nor aborted.
    pub ranks_incomplete: u32,
    /// Round at which the oracle stopped an approximate algorithm.
    pub oracle_stop_round: Option<u32>,
    /// The run hit the simulator's event or time bound.
    pub truncated: bool,
    /// Simulator events processed.
    pub events: u64,
    /// Simulator events per wall-clock second.
    pub events_per_s: f64,
    /// Trace hash, hex.
    pub trace_hash: String,
    /// Failures.
    pub failures: Vec<FailureJson>,
    /// Wall-clock seconds of the run.
    pub wall_s: f64,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl RunJson {
    /// The report of a simulated run.
    pub fn from_sim(report: &SimReport, algo: &str, op: &str) -> RunJson {
        RunJson {
            schema_version: 1,
            n: report.n,
            algo: algo.to_string(),
            op: op.to_string(),
            transport: "sim",
            seed: report.seed,
            rounds: report.rounds,
            messages: report.messages,
            messages_delivered: report.delivered,
            messages_dropped: report.dropped_loss + report.dropped_cut + report.dropped_dead,
            messages_rejected: report.rejected,
            bit_flips: report.message_flips + report.state_flips,
            sim_time_steps: report.sim_time_steps,
            max_rel_error: finite(report.max_rel_error),
            admissible_error: report.admissible_error.and_then(finite),
            ranks_completed: report.completed,
            ranks_aborted: report.aborted,
            ranks_incomplete: report.incomplete,
            oracle_stop_round: report.oracle_stop_round,
            truncated: report.truncated,
            events: report.events,
            events_per_s: report.events as f64 / report.wall_s.max(1e-9),
            trace_hash: format!("{:016x}", report.trace_hash),
            failures: report
                .crashes
                .iter()
                .map(|c| FailureJson {
                    rank: c.rank.0,
                    detected_by: "detector",
                    how: match c.cause {
                        CrashCause::Scripted => "scripted",
                        CrashCause::Fenced => "fenced",
                    },
                    at_steps: c.at.0,
                    noticed_at_steps: c.noticed_at.map(|t| t.0),
                })
                .collect(),
            wall_s: report.wall_s,
        }
    }
}
