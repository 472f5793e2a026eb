//! Scripted faults the launcher applies from outside the ranks (kills, stops).

use std::time::Duration;

use anyhow::{bail, Context};
use ftcoll_runtime::faults::{FaultSpec, KillTime};
use ftcoll_runtime::rank_faults::wall_time;

use super::Loop;

/// A launcher-side scripted fault.
#[derive(Clone, Copy, Debug)]
pub(super) enum LauncherFault {
    Kill(u32),
    Stop(u32),
}

/// Faults the launcher applies (from outside the ranks), with their times after wire-up.
pub(super) fn launcher_faults(
    specs: &[FaultSpec],
    n: u32,
    per_node: u32,
) -> anyhow::Result<Vec<(Duration, LauncherFault)>> {
    let mut planned = Vec::new();
    let check = |rank: u32| -> anyhow::Result<u32> {
        if rank >= n {
            bail!("fault names rank {rank}, but the job has only {n} ranks (0..{n})");
        }
        Ok(rank)
    };
    for spec in specs {
        match *spec {
            FaultSpec::Kill {
                rank,
                at: KillTime::At(at),
            } => planned.push((wall_time(at)?, LauncherFault::Kill(check(rank.0)?))),
            FaultSpec::Kill {
                rank,
                at: KillTime::Operation(_) | KillTime::DuringOperation { .. },
            } => {
                check(rank.0)?;
            }
            FaultSpec::KillNode { node, at } => {
                let first = node.checked_mul(per_node).filter(|&f| f < n).with_context(|| {
                    format!("fault names node {node}, but {n} ranks at {per_node} per node make {} nodes", n.div_ceil(per_node))
                })?;
                for rank in first..(first + per_node).min(n) {
                    planned.push((wall_time(at)?, LauncherFault::Kill(rank)));
                }
            }
            FaultSpec::Stop { rank, at } => {
                planned.push((wall_time(at)?, LauncherFault::Stop(check(rank.0)?)))
            }
            FaultSpec::FlipMessage { rank, .. }
            | FaultSpec::FlipState { rank, .. }
            | FaultSpec::Slow { rank, .. } => {
                check(rank.0)?;
            }
            FaultSpec::Cut { a, b, .. } => {
                check(a.0)?;
                check(b.0)?;
            }
            FaultSpec::Drop {
                rank: Some(rank), ..
            }
            | FaultSpec::FlipRate {
                rank: Some(rank), ..
            } => {
                check(rank.0)?;
            }
            FaultSpec::Drop { rank: None, .. }
            | FaultSpec::FlipRate { rank: None, .. }
            | FaultSpec::Spread(_) => {}
        }
    }
    planned.sort_by_key(|(at, _)| *at);
    Ok(planned)
}

impl Loop {
    /// How long until the next scripted launcher fault is due; `None` when none is left or
    /// the ranks are not wired up yet (fault times count from then).
    pub(super) fn until_next_fault(&self) -> Option<Duration> {
        let wired = self.wired_at?;
        let &(at, _) = self.launcher_faults.first()?;
        let since = self.started.elapsed().saturating_sub(wired);
        Some(at.saturating_sub(since))
    }

    pub(super) fn apply_launcher_faults(&mut self) {
        let Some(wired) = self.wired_at else {
            return;
        };
        let since = self.started.elapsed().saturating_sub(wired);
        while let Some(&(at, fault)) = self.launcher_faults.first() {
            if at > since {
                break;
            }
            self.launcher_faults.remove(0);
            match fault {
                LauncherFault::Kill(rank) => {
                    tracing::warn!(rank, "scripted kill");
                    self.kill_rank(rank);
                }
                LauncherFault::Stop(rank) => {
                    tracing::warn!(rank, "scripted stop (SIGSTOP)");
                    self.signal(rank, rustix::process::Signal::STOP);
                    self.ranks[rank as usize].stopped = true;
                }
            }
        }
    }
}
