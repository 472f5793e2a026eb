//! Deaths: children reaped, failures recorded and announced, suspects fenced, silence judged.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::Context;
use ftcoll_runtime::control::FailureCause;
use mio::unix::SourceFd;
use mio::Poll;

use super::{
    ConsoleEvent, Loop, FENCE_GRACE, LIVENESS_EVERY, MAX_EXIT_DRAIN_PASSES, REGISTER_TIMEOUT,
};

/// How long a rank that exited cleanly is given for its last control messages to arrive
/// before it is judged failed (they are in flight on the loopback, not lost: the connection's
/// end follows them).
const LAST_WORDS_WAIT: Duration = Duration::from_millis(500);
use crate::live::report::FailureRecord;
use crate::live::server::failure_notice;

impl Loop {
    /// A child exited: record it, and if it had not finished, tell every survivor.
    pub(super) fn reaped(&mut self, poll: &mut Poll, rank: u32) -> anyhow::Result<()> {
        // Its last messages may still sit in its control socket (the pidfd event can come
        // first): read them before judging whether it finished. A pass reads at most half a
        // control message; a dead rank's socket holds only what it wrote, so the passes end.
        for _ in 0..MAX_EXIT_DRAIN_PASSES {
            let Some(index) = self.ranks[rank as usize].conn else {
                break;
            };
            if self.conn_event(poll, index, true)? == 0 {
                break;
            }
        }
        let slot = &mut self.ranks[rank as usize];
        if slot.exited {
            return Ok(());
        }
        let Some(child) = slot.child.as_mut() else {
            return Ok(());
        };
        let status = match child.try_wait() {
            Ok(Some(status)) => status,
            Ok(None) => return Ok(()),
            Err(e) => return Err(e).context("waiting for a rank"),
        };
        if status.success() && !slot.finished {
            // A clean exit whose last messages have not arrived: on a loaded machine the
            // loopback can hand them (and the connection's end, which follows them) to this
            // socket after the exit is seen. Read until the end of the connection, or Finished,
            // for a bounded moment, before judging the rank failed.
            self.await_last_words(poll, rank)?;
        }
        let slot = &mut self.ranks[rank as usize];
        if slot.exited {
            return Ok(());
        }
        slot.exited = true;
        if self.sweep_provider_shm {
            crate::leftovers::remove_provider_shm_files(slot.pid);
        }
        if let Some(pidfd) = slot.pidfd.take() {
            let _ = poll
                .registry()
                .deregister(&mut SourceFd(&pidfd.as_raw_fd()));
        }
        self.record_exit(rank, RankExit::of_status(status));
        Ok(())
    }

    /// Reads rank `rank`'s control connection until it ends or the rank says it finished, for at
    /// most [`LAST_WORDS_WAIT`].
    fn await_last_words(&mut self, poll: &mut Poll, rank: u32) -> anyhow::Result<()> {
        let deadline = Instant::now() + LAST_WORDS_WAIT;
        // Each pass sleeps a millisecond or reads: bounded by the deadline.
        while Instant::now() < deadline {
            let slot = &self.ranks[rank as usize];
            let Some(index) = slot.conn.filter(|_| !slot.finished && !slot.exited) else {
                return Ok(());
            };
            if self.conn_event(poll, index, true)? == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// Rank `rank` is dead. Unless it finished its work and exited cleanly, it failed: record
    /// it and tell every survivor.
    pub(super) fn record_exit(&mut self, rank: u32, exit: RankExit) {
        let slot = &mut self.ranks[rank as usize];
        slot.exited = true;
        if slot.finished && exit.clean() {
            return;
        }
        let cause = slot.fenced.unwrap_or(FailureCause::Exited);
        // A rank the launcher killed may have exited on its own first; it still was fenced.
        let gave_up = exit.gave_up() && slot.fenced.is_none();
        let how = exit.how;
        let how = match cause {
            FailureCause::Exited | FailureCause::NodeLost => how,
            other => format!("{} (killed by the launcher)", other.name()),
        };
        let at_s = self.started.elapsed().as_secs_f64();
        tracing::warn!(rank, %how, at_s, "rank failed");
        if let Some(events) = self.console_events.as_mut() {
            events.push(ConsoleEvent::Failed(rank, how.clone()));
        }
        self.failures.push(FailureRecord {
            rank,
            cause,
            how,
            at_s,
            gave_up,
        });
        let notice = failure_notice(rank, cause);
        for other in 0..self.ranks.len() as u32 {
            if other != rank && !self.ranks[other as usize].exited {
                self.send_to(other, &notice);
            }
        }
        for asker in self.pending_resolves.remove(&rank).unwrap_or_default() {
            self.send_to(
                asker,
                &ftcoll_runtime::control::ControlMsg::Address {
                    peer: rank,
                    address: String::new(),
                },
            );
        }
        self.start_when_all_joined();
    }

    /// A registered rank's control connection closed. Usually the process died (its EOF tends to
    /// arrive before the pidfd event): reap it now so the cause is its exit. A rank that drops
    /// the connection while alive and unfinished cannot be told of failures any more: unless it
    /// exits within [`FENCE_GRACE`], it is killed first, then reported.
    pub(super) fn control_closed(&mut self, poll: &mut Poll, rank: u32) {
        let slot = &mut self.ranks[rank as usize];
        if let Some(exit) = slot.remote_exit.take() {
            self.record_exit(rank, exit);
            return;
        }
        if slot.exited || slot.finished || slot.fenced.is_some() {
            return;
        }
        if slot.node_agent.is_some() {
            // Its agent reports its exit if it died; if not, it is fenced after the grace.
            slot.pending_fence
                .get_or_insert((Instant::now(), FailureCause::ControlLost));
            return;
        }
        // The process may be exiting right now; give it a moment before calling it a hang.
        let mut exited = false;
        for _ in 0..50 {
            exited = slot
                .child
                .as_mut()
                .is_some_and(|c| !matches!(c.try_wait(), Ok(None)));
            if exited {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        if exited {
            // try_wait reaped it; `reaped` reads the stored status.
            let _ = self.reaped(poll, rank);
        } else {
            // A process tearing down its mappings on a loaded machine can take longer than
            // that to exit: fenced at once, a rank that ended in an error of its own would be
            // reported as a live rank the launcher killed. Its exit, if it comes within the
            // grace, is judged for what it is; otherwise it is fenced then.
            slot.pending_fence
                .get_or_insert((Instant::now(), FailureCause::ControlLost));
        }
    }

    /// Kills a suspected rank; it is reported once reaped (fail-stop by construction).
    pub(super) fn fence(&mut self, rank: u32, cause: FailureCause) {
        let slot = &mut self.ranks[rank as usize];
        if slot.exited || slot.fenced.is_some() {
            return;
        }
        slot.fenced = Some(cause);
        if let Some(events) = self.console_events.as_mut() {
            events.push(ConsoleEvent::Suspected(rank, cause.name()));
        }
        tracing::warn!(
            rank,
            cause = cause.name(),
            "suspected; killing before anyone is told"
        );
        self.kill_rank(rank);
    }

    /// SIGKILL to `rank`, wherever it runs.
    pub(super) fn kill_rank(&mut self, rank: u32) {
        let slot = &mut self.ranks[rank as usize];
        if slot.exited {
            return;
        }
        match slot.child.as_mut() {
            Some(child) => {
                let _ = child.kill();
            }
            None => self.signal_remote(rank, rustix::process::Signal::KILL.as_raw()),
        }
    }

    pub(super) fn check_liveness(&mut self, n: u32) {
        if self.paused {
            return;
        }
        let now = Instant::now();
        // A launcher that did not run for a good part of the suspicion timeout (a machine
        // with far more runnable ranks than cores starves it too) could not read anyone's
        // heartbeats meanwhile: its own stall is nobody's silence, so suspicion restarts.
        let gap = now.duration_since(self.last_liveness_check.unwrap_or(now));
        // Suspicion has a resolution of a fraction of its timeout: looking at every rank on
        // every turn of a busy loop (thousands of samples and beats a second) would cost more
        // than everything else the launcher does.
        if self.last_liveness_check.is_some() && gap < (self.suspect / 16).min(LIVENESS_EVERY) {
            return;
        }
        self.last_liveness_check = Some(now);
        if gap > self.suspect / 4 {
            tracing::warn!(
                stalled_ms = gap.as_millis() as u64,
                "the launcher itself stalled; restarting heartbeat suspicion"
            );
            for slot in &mut self.ranks {
                if slot.last_heartbeat.is_some() {
                    slot.last_heartbeat = Some(now);
                }
            }
            return;
        }
        self.check_agents(now);
        for rank in 0..n {
            let slot = &self.ranks[rank as usize];
            if slot.exited || slot.finished || slot.fenced.is_some() {
                continue;
            }
            let silent = match slot.last_heartbeat {
                Some(beat) => now.duration_since(beat) > self.suspect,
                None => self.started.elapsed() > REGISTER_TIMEOUT,
            };
            let graced = slot
                .pending_fence
                .filter(|(since, _)| now.duration_since(*since) > FENCE_GRACE);
            if silent {
                self.fence(rank, FailureCause::HeartbeatTimeout);
            } else if let Some((_, cause)) = graced {
                self.fence(rank, cause);
            }
        }
    }

    /// Drops every control connection without judging anyone (the job is over): agents and
    /// ranks still running see the end of their connection and exit.
    pub(super) fn close_all(&mut self, poll: &mut Poll) {
        for conn in self.conns.iter_mut().filter_map(Option::take) {
            let mut conn = conn;
            let _ = poll.registry().deregister(&mut conn.stream);
        }
    }

    pub(super) fn kill_all(&mut self) {
        for rank in 0..self.ranks.len() as u32 {
            self.kill_rank(rank);
        }
    }

    pub(super) fn reap_all_blocking(&mut self) {
        for slot in &mut self.ranks {
            if let Some(child) = slot.child.as_mut() {
                let _ = child.wait();
                if self.sweep_provider_shm {
                    crate::leftovers::remove_provider_shm_files(slot.pid);
                }
            }
            slot.exited = true;
        }
    }
}

/// How a rank's process ended, as the launcher saw it.
#[derive(Debug, Clone)]
pub(super) struct RankExit {
    /// Its exit status, if it exited (rather than died of a signal or with its host).
    pub(super) status: Option<i32>,
    /// What happened, in words.
    pub(super) how: String,
}

impl RankExit {
    /// A reaped child's end.
    pub(super) fn of_status(status: std::process::ExitStatus) -> RankExit {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => RankExit::exited(code),
            (None, Some(signal)) => RankExit::killed(signal),
            _ => RankExit::lost("ended".to_string()),
        }
    }

    /// It exited with status `code`.
    pub(super) fn exited(code: i32) -> RankExit {
        RankExit {
            status: Some(code),
            how: format!("exited with status {code}"),
        }
    }

    /// It died of signal `signal`.
    pub(super) fn killed(signal: i32) -> RankExit {
        RankExit {
            status: None,
            how: format!("killed by signal {signal}"),
        }
    }

    /// It ended out of sight (`how`: why it counts as ended).
    pub(super) fn lost(how: String) -> RankExit {
        RankExit { status: None, how }
    }

    /// Exited with status 0.
    fn clean(&self) -> bool {
        self.status == Some(0)
    }

    /// Exited with a non-zero status of its own: it ended in an error it knew of (a rank of
    /// the built-in job returns one after reporting its failed operation), unlike a crash.
    fn gave_up(&self) -> bool {
        self.status.is_some_and(|code| code != 0)
    }
}
