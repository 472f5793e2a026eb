//! A watched job: what the watcher (the console) hears of, and what it may do to the job.

use std::time::{Duration, Instant};

use super::Loop;
use crate::live::watch::{JobHandle, Watcher};

/// Status-sample period of each rank for a job of `n` ranks: 100 ms up to 400 ranks, then
/// longer so that the launcher takes in at most about 4,000 samples a second.
pub fn telemetry_period(n: u32) -> Duration {
    Duration::from_millis((u64::from(n) / 4).clamp(100, 1000))
}

/// Something the console hears of.
pub(super) enum ConsoleEvent {
    Registered(u32),
    Sample(u32, ftcoll_runtime::control::RankSample),
    Reported(u32, u64),
    Failed(u32, String),
    Suspected(u32, &'static str),
}

impl Loop {
    /// Hands the console what happened since the last turn.
    pub(super) fn feed_console(&mut self, console: &mut dyn Watcher) {
        let Some(events) = self.console_events.as_mut() else {
            return;
        };
        for event in std::mem::take(events) {
            match event {
                ConsoleEvent::Registered(rank) => console.registered(rank, self),
                ConsoleEvent::Sample(rank, sample) => console.sample(rank, sample),
                ConsoleEvent::Reported(rank, op) => console.reported(rank, op),
                ConsoleEvent::Failed(rank, how) => console.failed(rank, &how),
                ConsoleEvent::Suspected(rank, why) => console.suspected(rank, why),
            }
        }
    }

    pub(super) fn signal(&mut self, rank: u32, signal: rustix::process::Signal) {
        let slot = &self.ranks[rank as usize];
        if slot.exited {
            return;
        }
        if slot.node_agent.is_some() {
            self.signal_remote(rank, signal.as_raw());
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(slot.pid as i32) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }
}

impl JobHandle for Loop {
    fn kill(&mut self, rank: u32) {
        self.kill_rank(rank);
    }

    fn stop(&mut self, rank: u32) {
        self.signal(rank, rustix::process::Signal::STOP);
        self.ranks[rank as usize].stopped = true;
    }

    fn pause(&mut self, paused: bool) {
        if paused == self.paused {
            return;
        }
        self.paused = paused;
        let signal = if paused {
            rustix::process::Signal::STOP
        } else {
            rustix::process::Signal::CONT
        };
        for rank in 0..self.ranks.len() as u32 {
            // A rank the user hung on purpose stays hung.
            if !self.ranks[rank as usize].stopped {
                self.signal(rank, signal);
            }
        }
        if !paused {
            // The pause was nobody's silence.
            let now = Instant::now();
            for slot in &mut self.ranks {
                if slot.last_heartbeat.is_some() {
                    slot.last_heartbeat = Some(now);
                }
            }
        }
    }

    fn send(&mut self, rank: u32, msg: &ftcoll_runtime::control::ControlMsg) {
        if (rank as usize) < self.ranks.len() {
            self.send_to(rank, msg);
        }
    }

    fn exited(&self, rank: u32) -> bool {
        self.ranks.get(rank as usize).is_none_or(|r| r.exited)
    }

    fn suspected(&self, rank: u32) -> bool {
        self.ranks
            .get(rank as usize)
            .is_some_and(|r| r.fenced.is_some() && !r.exited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telemetry_intake_is_bounded() {
        for n in [1, 16, 400, 4096, 1 << 20] {
            let per_second = f64::from(n) / telemetry_period(n).as_secs_f64();
            assert!(per_second <= 4096.0 + 1.0 || n > 4096, "{n}: {per_second}");
        }
        assert_eq!(telemetry_period(16), Duration::from_millis(100));
        assert_eq!(telemetry_period(4096), Duration::from_millis(1000));
    }
}
