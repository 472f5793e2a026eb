//! Ranks on other hosts: the launcher's side of the node agents.
//!
//! A remote rank has no child handle here: its agent starts, signals and reaps it and reports
//! its exit. An agent that goes silent or drops its connection takes its host with it: the
//! launcher cannot kill what it cannot reach, but the agent's ranks die with the agent (their
//! parent-death signal), or are unreachable to everyone with their host. Either way none of
//! them runs on as a member, and they are reported failed.

use std::time::{Duration, Instant};

use anyhow::bail;
use ftcoll_runtime::control::{ControlMsg, FailureCause};
use mio::net::TcpListener;
use mio::{Events, Poll};

use super::exits::RankExit;
use super::Loop;
use crate::cluster::hostfile::Placement;
use crate::cluster::starter::Agents;

/// Hosts have this long to connect back before the job is abandoned.
const AGENT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// What the launcher knows of one node agent.
pub(super) struct AgentSlot {
    pub(super) host: String,
    pub(super) first: u32,
    pub(super) count: u32,
    pub(super) conn: Option<usize>,
    pub(super) last_heartbeat: Option<Instant>,
    /// Its connection ended or it went silent: its ranks were reported.
    pub(super) lost: bool,
}

impl AgentSlot {
    fn holds(&self, rank: u32) -> bool {
        (self.first..self.first + self.count).contains(&rank)
    }
}

impl Loop {
    /// The agents of `placement`, none connected yet.
    pub(super) fn plan_agents(&mut self, placement: &Placement) {
        self.agents = placement
            .nodes
            .iter()
            .map(|node| AgentSlot {
                host: node.host.clone(),
                first: node.first,
                count: node.count,
                conn: None,
                last_heartbeat: None,
                lost: false,
            })
            .collect();
        for (node, plan) in placement.nodes.iter().enumerate() {
            for rank in plan.first..plan.first + plan.count {
                self.ranks[rank as usize].node_agent = Some(node as u32);
            }
        }
    }

    /// Serves the control plane until every agent has connected back. An agent whose ssh or
    /// srun failed, or a host that stays silent, ends the job before any rank starts.
    pub(super) fn await_agents(
        &mut self,
        poll: &mut Poll,
        listener: &mut TcpListener,
        events: &mut Events,
        agents: &mut Agents,
        n: u32,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + AGENT_CONNECT_TIMEOUT;
        // Bounded by the deadline.
        while self.agents.iter().any(|a| a.conn.is_none()) {
            if let Some(failure) = agents.failure() {
                bail!("{failure}");
            }
            if Instant::now() > deadline {
                let missing: Vec<&str> = self
                    .agents
                    .iter()
                    .filter(|a| a.conn.is_none())
                    .map(|a| a.host.as_str())
                    .collect();
                bail!(
                    "host(s) {} did not connect back within {} s; check that they reach this launcher's --bind address",
                    missing.join(", "),
                    AGENT_CONNECT_TIMEOUT.as_secs()
                );
            }
            self.serve(poll, listener, events, Duration::from_millis(50), n)?;
        }
        Ok(())
    }

    /// Orders every agent to start its ranks.
    pub(super) fn spawn_remote(&mut self, order: impl Fn(u32, u32) -> ControlMsg) {
        for node in 0..self.agents.len() {
            let (first, count) = (self.agents[node].first, self.agents[node].count);
            self.send_to_agent(node as u32, &order(first, count));
        }
    }

    pub(super) fn agent_registered(&mut self, conn: usize, node: u32, pid: u32, host: &str) {
        let Some(slot) = self.agents.get_mut(node as usize) else {
            return;
        };
        if slot.conn.is_some() {
            tracing::warn!(node, "a second agent claims node {node}; ignoring it");
            return;
        }
        tracing::info!(node, pid, host, "node agent connected");
        slot.conn = Some(conn);
        slot.last_heartbeat = Some(Instant::now());
    }

    pub(super) fn agent_heartbeat(&mut self, node: u32) {
        if let Some(slot) = self.agents.get_mut(node as usize) {
            slot.last_heartbeat = Some(Instant::now());
        }
    }

    /// A remote rank ended: recorded like a reaped child.
    pub(super) fn remote_exited(&mut self, node: u32, rank: u32, code: i32, signal: i32) {
        if !self
            .agents
            .get(node as usize)
            .is_some_and(|a| a.holds(rank))
        {
            tracing::warn!(node, rank, "node agent reported a rank it does not hold");
            return;
        }
        let exit = if signal != 0 {
            RankExit::killed(signal)
        } else {
            RankExit::exited(code)
        };
        let slot = &mut self.ranks[rank as usize];
        if slot.conn.is_some() {
            // Judged once its connection has delivered its last messages (see `remote_exit`).
            slot.remote_exit = Some(exit);
        } else {
            self.record_exit(rank, exit);
        }
    }

    /// An agent's connection ended. After its ranks all exited that is its normal end;
    /// before, its host is gone.
    pub(super) fn agent_closed(&mut self, node: u32) {
        let Some(slot) = self.agents.get_mut(node as usize) else {
            return;
        };
        slot.conn = None;
        self.agent_lost(node, "its node agent's connection ended");
    }

    /// Agents silent for longer than the suspicion timeout lose their hosts.
    pub(super) fn check_agents(&mut self, now: Instant) {
        for node in 0..self.agents.len() as u32 {
            let slot = &self.agents[node as usize];
            let silent = slot
                .last_heartbeat
                .is_some_and(|beat| now.duration_since(beat) > self.suspect);
            if silent && !slot.lost {
                self.agent_lost(node, "its node agent went silent");
            }
        }
    }

    fn agent_lost(&mut self, node: u32, why: &str) {
        let slot = &mut self.agents[node as usize];
        if slot.lost {
            return;
        }
        slot.lost = true;
        let (host, first, count) = (slot.host.clone(), slot.first, slot.count);
        // Exits the agent reported before it went are what they were: judged when the rank's
        // own connection has delivered its last messages (see `remote_exit`).
        let orphans: Vec<u32> = (first..first + count)
            .filter(|&r| {
                let slot = &self.ranks[r as usize];
                !slot.exited && slot.remote_exit.is_none()
            })
            .collect();
        if orphans.is_empty() {
            return;
        }
        tracing::warn!(node, %host, ranks = orphans.len(), "host lost: {why}");
        for rank in orphans {
            let slot = &mut self.ranks[rank as usize];
            slot.fenced.get_or_insert(FailureCause::NodeLost);
            self.record_exit(rank, RankExit::lost(format!("host {host} lost: {why}")));
        }
    }

    /// Sends `signal` to a remote rank through its agent.
    pub(super) fn signal_remote(&mut self, rank: u32, signal: i32) {
        if let Some(node) = self.ranks[rank as usize].node_agent {
            self.send_to_agent(node, &ControlMsg::Signal { rank, signal });
        }
    }

    fn send_to_agent(&mut self, node: u32, msg: &ControlMsg) {
        let Some(index) = self.agents.get(node as usize).and_then(|a| a.conn) else {
            return;
        };
        if let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) {
            self.dirty.push(index);
            if !conn.queue(msg) {
                tracing::warn!(node, "node agent does not read its control messages");
            }
        }
    }
}
