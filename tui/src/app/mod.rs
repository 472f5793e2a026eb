//! The console's model: the latest telemetry, bounded histories, the log, and what the user
//! has selected and set. Rendering reads it; keys change it through [`App::apply`].

mod apply;
mod stats;

use std::collections::{BTreeMap, VecDeque};

use crate::model::{JobInfo, LogEntry, RankDetail, RankState, Update};
use crate::rng::SplitMix64;

pub use apply::Command;
pub use stats::ErrorPoint;

/// Most points of error history kept (about 3.4 minutes at 10 frames per second).
pub const HISTORY_CAPACITY: usize = 2048;
/// Most message-rate samples kept; more than the widest sparkline.
pub const RATE_CAPACITY: usize = 256;
/// Most log lines kept.
pub const LOG_CAPACITY: usize = 500;
/// Most ranks whose drop rate or slow-down the console remembers; past it the oldest-numbered
/// entry is forgotten (the driver still applies the fault, only the next cycle step restarts).
pub const FAULT_SETTINGS_CAPACITY: usize = 4096;
/// Terminal size assumed for map navigation until the driver reports the real one.
pub const DEFAULT_VIEWPORT: (u16, u16) = (80, 24);

/// The console's state.
#[derive(Clone, Debug)]
pub struct App {
    info: JobInfo,
    latest: Option<Update>,
    /// Last detail the driver sent; kept across frames that carry none.
    detail: Option<RankDetail>,
    history: VecDeque<ErrorPoint>,
    rates: VecDeque<f64>,
    /// `(elapsed_s, messages_total)` of the frame the next rate is measured from.
    rate_base: Option<(f64, u64)>,
    log: VecDeque<LogEntry>,
    selected: u32,
    neighbour_index: usize,
    bit: u32,
    /// Position in the drop-rate cycle per rank; absent means off.
    drop_steps: BTreeMap<u32, usize>,
    /// Position in the slow-down cycle per rank; absent means normal speed.
    slow_steps: BTreeMap<u32, usize>,
    paused: bool,
    quit: bool,
    help: bool,
    rng: SplitMix64,
    viewport: (u16, u16),
}

impl App {
    /// A console for this job: rank 0 selected, not paused, bit position at the lowest exponent
    /// bit of the value type (52 for f64, 23 for f32), where a flip is plainly visible.
    pub fn new(info: JobInfo) -> App {
        let bit = match info.value_bits {
            64 => 52,
            32 => 23,
            other => other.saturating_sub(12),
        };
        App {
            rng: SplitMix64::new(info.seed),
            info,
            latest: None,
            detail: None,
            history: VecDeque::new(),
            rates: VecDeque::new(),
            rate_base: None,
            log: VecDeque::new(),
            selected: 0,
            neighbour_index: 0,
            bit,
            drop_steps: BTreeMap::new(),
            slow_steps: BTreeMap::new(),
            paused: false,
            quit: false,
            help: false,
            viewport: DEFAULT_VIEWPORT,
        }
    }

    /// Stores a telemetry frame and extends the error history and the message-rate series.
    pub fn update(&mut self, mut update: Update) {
        push_bounded(
            &mut self.history,
            stats::error_point(update.elapsed_s, &update.states, &update.errors),
            HISTORY_CAPACITY,
        );
        self.record_rate(update.elapsed_s, update.messages_total);
        if let Some(detail) = update.detail.take() {
            self.detail = Some(detail);
        }
        self.latest = Some(update);
    }

    /// The rate since the previous frame; the first frame only sets the base (a frame that
    /// arrives just after the start would otherwise make a spike that flattens the sparkline).
    fn record_rate(&mut self, elapsed_s: f64, messages_total: u64) {
        let Some((base_s, base_total)) = self.rate_base else {
            self.rate_base = Some((elapsed_s, messages_total));
            return;
        };
        let interval = elapsed_s - base_s;
        if interval > 0.0 && interval.is_finite() {
            let sent = messages_total.saturating_sub(base_total) as f64;
            push_bounded(&mut self.rates, sent / interval, RATE_CAPACITY);
            self.rate_base = Some((elapsed_s, messages_total));
        } else if interval != 0.0 {
            // Time went backwards or is not a number: measure from here on.
            self.rate_base = Some((elapsed_s, messages_total));
        }
        // The same instant again: wait, so the next rate covers these messages too.
    }

    /// Appends a line to the log, forgetting the oldest past [`LOG_CAPACITY`].
    pub fn log(&mut self, entry: LogEntry) {
        push_bounded(&mut self.log, entry, LOG_CAPACITY);
    }

    /// The selected rank.
    pub fn selected(&self) -> u32 {
        self.selected
    }

    /// Whether the user paused the job.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Whether the user asked to quit.
    pub fn quit_requested(&self) -> bool {
        self.quit
    }

    /// The job's fixed facts.
    pub fn info(&self) -> &JobInfo {
        &self.info
    }

    /// Tells the console the terminal's size, so that up and down move by one row of the rank
    /// map as drawn. The driver calls it with [`crate::TerminalSession::size`] before handling
    /// keys; until then [`DEFAULT_VIEWPORT`] is assumed.
    pub fn set_viewport(&mut self, width: u16, height: u16) {
        self.viewport = (width, height);
    }

    /// The terminal size map navigation assumes.
    pub fn viewport(&self) -> (u16, u16) {
        self.viewport
    }

    /// The bit position flips target.
    pub fn bit(&self) -> u32 {
        self.bit
    }

    /// Whether the help overlay is shown.
    pub fn help_visible(&self) -> bool {
        self.help
    }

    /// The latest telemetry frame, if any arrived.
    pub fn latest(&self) -> Option<&Update> {
        self.latest.as_ref()
    }

    /// The detail of the selected rank, if the driver sent it since the selection changed.
    pub fn detail(&self) -> Option<&RankDetail> {
        self.detail
            .as_ref()
            .filter(|detail| detail.rank == self.selected)
    }

    /// Index of the current neighbour in the selected rank's neighbour list.
    pub fn neighbour_index(&self) -> usize {
        self.neighbour_index
    }

    /// The current neighbour of the selected rank, when its neighbours are known.
    pub fn neighbour(&self) -> Option<u32> {
        let neighbours = &self.detail()?.inspection.neighbours;
        if neighbours.is_empty() {
            return None;
        }
        neighbours
            .get(self.neighbour_index % neighbours.len())
            .copied()
    }

    /// The error history, oldest first.
    pub fn history(&self) -> &VecDeque<ErrorPoint> {
        &self.history
    }

    /// Messages per second between consecutive frames, oldest first.
    pub fn message_rates(&self) -> &VecDeque<f64> {
        &self.rates
    }

    /// The log, oldest first.
    pub fn log_entries(&self) -> &VecDeque<LogEntry> {
        &self.log
    }

    /// State of a rank in the latest frame (`Starting` before any frame says otherwise).
    pub fn rank_state(&self, rank: u32) -> RankState {
        self.latest
            .as_ref()
            .and_then(|update| update.states.get(rank as usize).copied())
            .unwrap_or(RankState::Starting)
    }

    /// Relative error of a rank in the latest frame; NaN when unknown.
    pub fn rank_error(&self, rank: u32) -> f32 {
        self.latest
            .as_ref()
            .and_then(|update| update.errors.get(rank as usize).copied())
            .unwrap_or(f32::NAN)
    }

    /// Seconds since the job started, as of the latest frame.
    pub fn now_s(&self) -> f64 {
        self.latest.as_ref().map_or(0.0, |update| update.elapsed_s)
    }

    /// The drop rate the user set on a rank (0 when off).
    pub fn drop_rate(&self, rank: u32) -> f64 {
        self.drop_steps
            .get(&rank)
            .and_then(|step| apply::DROP_RATES.get(*step))
            .map_or(0.0, |(rate, _)| *rate)
    }

    /// The slow-down factor the user set on a rank (1 when normal speed).
    pub fn slow_factor(&self, rank: u32) -> u32 {
        self.slow_steps
            .get(&rank)
            .and_then(|step| apply::SLOW_FACTORS.get(*step))
            .copied()
            .unwrap_or(1)
    }
}

/// Appends to a queue, dropping the oldest entries past `capacity`.
fn push_bounded<T>(queue: &mut VecDeque<T>, item: T, capacity: usize) {
    while queue.len() >= capacity.max(1) {
        queue.pop_front();
    }
    queue.push_back(item);
}
