//! The oracles that stop a run and the report a run ends with: errors against the exact and
//! the admissible aggregates, completion counts, the error history.

use ftcoll_algos::protocol::Protocol;
use ftcoll_algos::protocol::{Input, Phase};
use ftcoll_algos::{Rank, Time};

use super::super::oracle::max_relative_error;
use super::super::{exact_aggregate, OracleWatch};
use super::Simulation;

impl<P: Protocol> Simulation<P> {
    /// Re-evaluates `rank` for the all-live oracle, and stops the run once every live rank is
    /// accurate.
    pub(super) fn update_all_live(&mut self, rank: u32) {
        let Some(oracle) = self.all_live.as_mut() else {
            return;
        };
        self.ranks[rank as usize].estimate(&mut self.scratch);
        oracle.update(
            rank as usize,
            max_relative_error(&self.scratch, &self.exact),
        );
        if oracle.satisfied() && self.report.oracle_stop_round.is_none() {
            self.report.oracle_stop_round = Some(self.max_round_seen);
            self.stop_requested = true;
        }
    }

    /// The all-live oracle after a crash: the rank no longer counts, and the target becomes the
    /// survivors' aggregate, against which every live rank is re-evaluated.
    pub(super) fn crash_for_oracle(&mut self, rank: u32) {
        let Some(oracle) = self.all_live.as_mut() else {
            return;
        };
        oracle.remove(rank as usize);
        if self.expected_is_aggregate {
            let slots = &self.slots;
            self.exact = exact_aggregate(self.op, &self.inputs, self.input_len, |r| slots[r].alive);
        }
        for r in 0..self.report.n {
            if self.slots[r as usize].alive {
                self.update_all_live(r);
            }
        }
    }

    /// Samples the live ranks' max and median error every `history_every` steps.
    pub(super) fn sample_history(&mut self, at: Time) {
        let (Some(every), Some(oracle)) = (self.config.history_every, self.all_live.as_ref())
        else {
            return;
        };
        while self.next_sample <= at.0 {
            self.report
                .history
                .push((self.next_sample, oracle.worst(), oracle.median()));
            self.next_sample += every.max(1);
        }
    }

    pub(super) fn check_oracle(&mut self, rank: u32, round: u32) {
        let Some(stop) = self.config.oracle_stop else {
            return;
        };
        if let Some(max_round) = stop.max_round {
            if round + 1 >= max_round && self.report.oracle_stop_round.is_none() {
                self.report.stopped_by_budget = true;
                self.report.oracle_stop_round = Some(round + 1);
                self.stop_requested = true;
                return;
            }
        }
        if stop.watch != OracleWatch::Rank(Rank(rank)) || self.report.oracle_stop_round.is_some() {
            return;
        }
        self.ranks[rank as usize].estimate(&mut self.scratch);
        if max_relative_error(&self.scratch, &self.exact) <= stop.eps {
            self.report.oracle_stop_round = Some(round + 1);
            self.stop_requested = true;
        }
    }

    pub(super) fn stop_all(&mut self, at: Time) {
        self.report.completion_steps = self.report.completion_steps.max(at.0);
        for rank in 0..self.report.n {
            let slot = self.slots[rank as usize];
            if slot.alive && !slot.stopped {
                self.ranks[rank as usize].handle(at, Input::Stop, &mut self.outbox);
                // Whatever a stopped rank still wants to send is moot: the run is over.
                self.outbox.clear();
            }
        }
    }

    pub(super) fn finish(&mut self) {
        let mut worst: f64 = 0.0;
        let mut any = false;
        // The first live result, against which every other one is compared.
        let mut first: Option<Vec<f64>> = None;
        let mut spread: Option<f64> = None;
        for (r, rank) in self.ranks.iter().enumerate() {
            let status = rank.status();
            self.report.rounds = self.report.rounds.max(status.iteration);
            let alive = self.slots[r].alive;
            match rank.phase() {
                Phase::Aborted => {
                    self.report.aborted += 1;
                    self.report.live_aborted += u32::from(alive);
                }
                _ if !alive => {}
                Phase::Done => {
                    self.report.completed += 1;
                    if rank.has_result() {
                        rank.estimate(&mut self.scratch);
                        worst = worst.max(max_relative_error(&self.scratch, &self.exact));
                        any = true;
                        match &first {
                            None => first = Some(self.scratch.clone()),
                            Some(first) => {
                                let d = max_relative_error(&self.scratch, first);
                                spread = Some(spread.map_or(d, |s: f64| s.max(d)));
                            }
                        }
                    }
                }
                Phase::Idle | Phase::Running => self.report.incomplete += 1,
            }
        }
        self.report.result_spread = first.is_some().then(|| spread.unwrap_or(0.0));
        self.report.max_rel_error = if any { worst } else { f64::INFINITY };
        self.report.admissible_error = self.admissible_error();
        self.report.trace_hash = self.trace.value();
    }

    /// The error against the nearest admissible aggregate: survivors plus a subset of the crashed.
    pub(super) fn admissible_error(&mut self) -> Option<f64> {
        let mut crashed: Vec<u32> = self.report.crashes.iter().map(|c| c.rank.0).collect();
        crashed.sort_unstable();
        crashed.dedup();
        if !self.expected_is_aggregate
            || crashed.is_empty()
            || crashed.len() > super::super::MAX_ADMISSIBLE_CRASHES
        {
            return None;
        }
        let mut results = Vec::new();
        for (r, rank) in self.ranks.iter().enumerate() {
            if self.slots[r].alive && rank.phase() == Phase::Done && rank.has_result() {
                let mut result = Vec::new();
                rank.estimate(&mut result);
                results.push(result);
            }
        }
        if results.is_empty() {
            return None;
        }
        let mut best = f64::INFINITY;
        for subset in 0u32..1 << crashed.len() {
            let included = |r: usize| match crashed.binary_search(&(r as u32)) {
                Ok(i) => subset & (1 << i) != 0,
                Err(_) => true,
            };
            let expected = exact_aggregate(self.op, &self.inputs, self.input_len, included);
            let worst = results
                .iter()
                .map(|result| max_relative_error(result, &expected))
                .fold(0.0, f64::max);
            best = best.min(worst);
        }
        Some(best)
    }
}
