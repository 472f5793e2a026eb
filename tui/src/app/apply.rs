//! What each user action does to the console and asks of the driver.

use super::{push_bounded, App, FAULT_SETTINGS_CAPACITY};
use crate::keys::Action;
use crate::model::{LogEntry, LogKind, RankState};
use std::collections::BTreeMap;

use ftcoll_algos::fault::{FaultSpec, FaultTime, FlipTarget, KillTime, MessageSelector};
use ftcoll_algos::protocol::StateVar;
use ftcoll_algos::Rank;

/// Faults from keys strike when they arrive: their own time is 0, and the driver adds now.
const NOW: FaultTime = FaultTime::Steps(0);

/// What the driver must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Inject this fault (its times count from its arrival).
    Fault(FaultSpec),
    /// Pause the job.
    Pause,
    /// Resume the paused job.
    Resume,
    /// Start a new operation.
    NewOperation,
    /// Send detail of this rank from now on.
    Select(u32),
    /// End the job and leave.
    Quit,
}

/// The drop-rate cycle: the rate, and how the fault spec spells it.
pub(super) const DROP_RATES: [(f64, &str); 4] =
    [(0.0, "0"), (0.01, "0.01"), (0.1, "0.1"), (0.5, "0.5")];
/// The slow-down cycle; 1 is normal speed.
pub(super) const SLOW_FACTORS: [u32; 3] = [1, 4, 16];

impl App {
    /// Carries out a user action and returns what the driver must do about it. Every fault is
    /// also logged as injected; pause, resume and new operations are logged as info.
    pub fn apply(&mut self, action: Action) -> Vec<Command> {
        match action {
            Action::Up | Action::Down | Action::Left | Action::Right => self.move_selection(action),
            Action::KillSelected => self.fault_on_selected(|_, rank| kill(rank)),
            Action::KillRandom => self.kill_random(),
            Action::KillNode => {
                let per_node = self.info.ranks_per_node.max(1);
                self.fault_on_selected(|_, rank| FaultSpec::KillNode {
                    node: rank / per_node,
                    at: NOW,
                })
            }
            Action::FlipFlow => {
                let var = match self.neighbour() {
                    Some(peer) => StateVar::Flow {
                        peer: Rank(peer),
                        elem: 0,
                    },
                    None => StateVar::Value { elem: 0 },
                };
                self.fault_on_selected(|app, rank| FaultSpec::FlipState {
                    rank: Rank(rank),
                    var,
                    bit: app.bit,
                    at: NOW,
                })
            }
            Action::FlipMessage => self.fault_on_selected(|app, rank| FaultSpec::FlipMessage {
                rank: Rank(rank),
                which: MessageSelector::Nth(0),
                target: FlipTarget::Payload {
                    elem: 0,
                    bit: app.bit,
                },
            }),
            Action::BitUp => {
                self.bit = if self.bit + 1 >= self.info.value_bits {
                    0
                } else {
                    self.bit + 1
                };
                Vec::new()
            }
            Action::BitDown => {
                self.bit = match self.bit.checked_sub(1) {
                    Some(lower) => lower,
                    None => self.info.value_bits.saturating_sub(1),
                };
                Vec::new()
            }
            Action::NextNeighbour => {
                let count = self.detail().map_or(0, |d| d.inspection.neighbours.len());
                self.neighbour_index = if count == 0 {
                    0
                } else {
                    (self.neighbour_index + 1) % count
                };
                Vec::new()
            }
            Action::CycleDrop => self.cycle_drop(),
            Action::CutLink => self.cut_link(),
            Action::SlowDown => self.cycle_slow(),
            Action::TogglePause => {
                self.paused = !self.paused;
                let (command, text) = if self.paused {
                    (Command::Pause, "paused")
                } else {
                    (Command::Resume, "resumed")
                };
                self.info_line(text.to_string());
                vec![command]
            }
            Action::NewOperation => {
                self.info_line("new operation requested".to_string());
                vec![Command::NewOperation]
            }
            Action::ToggleHelp => {
                self.help = !self.help;
                Vec::new()
            }
            Action::Quit => {
                self.quit = true;
                vec![Command::Quit]
            }
        }
    }

    /// Moves the selection: left and right by one rank, up and down by one row of the map as
    /// drawn at the current viewport. Clamped to the ranks that exist.
    fn move_selection(&mut self, action: Action) -> Vec<Command> {
        let n = self.info.n;
        if n == 0 {
            return Vec::new();
        }
        let last = n - 1;
        let row = crate::ui::map_row_ranks(self).max(1);
        let current = self.selected.min(last);
        let next = match action {
            Action::Up => current.saturating_sub(row),
            Action::Down => current.saturating_add(row).min(last),
            Action::Left => current.saturating_sub(1),
            Action::Right => current.saturating_add(1).min(last),
            _ => current,
        };
        if next == self.selected {
            return Vec::new();
        }
        self.selected = next;
        self.neighbour_index = 0;
        vec![Command::Select(next)]
    }

    /// A fault on the selected rank, or nothing (with a log line) when the job has no ranks.
    /// `spec` may update the per-rank settings it reports; it only runs when there is a target.
    fn fault_on_selected(&mut self, spec: impl FnOnce(&mut App, u32) -> FaultSpec) -> Vec<Command> {
        if self.selected >= self.info.n {
            self.info_line("no rank to target".to_string());
            return Vec::new();
        }
        let spec = spec(self, self.selected);
        self.inject(spec)
    }

    fn kill_random(&mut self) -> Vec<Command> {
        let alive = (0..self.info.n)
            .filter(|rank| self.rank_state(*rank) != RankState::Dead)
            .count() as u64;
        if alive == 0 {
            self.info_line("no live rank to kill".to_string());
            return Vec::new();
        }
        let pick = self.rng.below(alive) as usize;
        let victim = (0..self.info.n)
            .filter(|rank| self.rank_state(*rank) != RankState::Dead)
            .nth(pick);
        match victim {
            Some(rank) => self.inject(kill(rank)),
            None => Vec::new(),
        }
    }

    fn cut_link(&mut self) -> Vec<Command> {
        match self.neighbour() {
            Some(peer) => self.fault_on_selected(|_, rank| FaultSpec::Cut {
                a: Rank(rank),
                b: Rank(peer),
                at: NOW,
            }),
            None => {
                self.info_line(format!("no neighbour known for rank {} yet", self.selected));
                Vec::new()
            }
        }
    }

    fn cycle_drop(&mut self) -> Vec<Command> {
        self.fault_on_selected(|app, rank| {
            let step = next_step(&mut app.drop_steps, rank, DROP_RATES.len());
            let (rate, _) = DROP_RATES[step % DROP_RATES.len()];
            FaultSpec::Drop {
                rank: Some(Rank(rank)),
                rate,
            }
        })
    }

    fn cycle_slow(&mut self) -> Vec<Command> {
        self.fault_on_selected(|app, rank| {
            let step = next_step(&mut app.slow_steps, rank, SLOW_FACTORS.len());
            let factor = SLOW_FACTORS[step % SLOW_FACTORS.len()];
            FaultSpec::Slow {
                rank: Rank(rank),
                factor,
                at: NOW,
            }
        })
    }

    /// Logs a fault as injected and hands it to the driver.
    fn inject(&mut self, spec: FaultSpec) -> Vec<Command> {
        self.stamp(LogKind::Injected, format!("injected {spec}"));
        vec![Command::Fault(spec)]
    }

    fn info_line(&mut self, text: String) {
        self.stamp(LogKind::Info, text);
    }

    fn stamp(&mut self, kind: LogKind, text: String) {
        let at_s = self.now_s();
        push_bounded(
            &mut self.log,
            LogEntry { at_s, kind, text },
            super::LOG_CAPACITY,
        );
    }
}

/// Advances a rank's position in a cycle of `len` steps and returns the new position; step 0
/// (off) is stored as absence, which keeps the map as small as the set of ranks with a fault.
fn next_step(steps: &mut BTreeMap<u32, usize>, rank: u32, len: usize) -> usize {
    let next = (steps.get(&rank).copied().unwrap_or(0) + 1) % len.max(1);
    if next == 0 {
        steps.remove(&rank);
    } else {
        if steps.len() >= FAULT_SETTINGS_CAPACITY && !steps.contains_key(&rank) {
            steps.pop_first();
        }
        steps.insert(rank, next);
    }
    next
}

/// A crash of `rank` now.
fn kill(rank: u32) -> FaultSpec {
    FaultSpec::Kill {
        rank: Rank(rank),
        at: KillTime::At(NOW),
    }
}
