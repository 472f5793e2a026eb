//! The control plane of a job: connections accepted, requests read and handled, answers
//! queued and flushed.

use std::time::{Duration, Instant};

use ftcoll_runtime::control::FailureCause;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};

use super::{
    ConsoleEvent, Loop, CONN_BASE, LISTENER, LIVENESS_EVERY, MAX_TIMINGS_PER_RANK, PIDFD_BASE,
    REGISTER_TIMEOUT,
};
use crate::live::server::{failure_notice, Conn, JobShape, Refusal, Request};
use crate::live::spawn::random_bytes;

impl Loop {
    /// What a control connection may claim to be.
    pub(super) fn shape(&self) -> JobShape {
        JobShape {
            ranks: self.ranks.len() as u32,
            nodes: self.agents.len() as u32,
        }
    }

    /// One round of the event loop: wait up to `timeout` and handle what happened.
    pub(super) fn serve(
        &mut self,
        poll: &mut Poll,
        listener: &mut TcpListener,
        events: &mut Events,
        timeout: Duration,
        n: u32,
    ) -> anyhow::Result<usize> {
        poll.poll(events, Some(timeout))?;
        let handled = events.iter().count();
        for event in events.iter() {
            match event.token() {
                LISTENER => self.accept(poll, listener)?,
                Token(t) if (PIDFD_BASE..PIDFD_BASE + n as usize).contains(&t) => {
                    self.reaped(poll, (t - PIDFD_BASE) as u32)?
                }
                Token(t) if t >= CONN_BASE => {
                    self.conn_event(poll, t - CONN_BASE, event.is_readable())?;
                }
                _ => {}
            }
        }
        self.flush_all(poll)?;
        Ok(handled)
    }

    pub(super) fn accept(
        &mut self,
        poll: &mut Poll,
        listener: &mut TcpListener,
    ) -> anyhow::Result<()> {
        // Accept everything pending; the backlog bounds this loop.
        loop {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let nonce: [u8; 16] = random_bytes(16)?.try_into().unwrap_or_default();
                    let index = self.free_conns.pop().unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    poll.registry().register(
                        &mut stream,
                        Token(CONN_BASE + index),
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                    self.conns[index] = Some(Conn::new(stream, nonce));
                    self.dirty.push(index);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a control connection failed");
                    return Ok(());
                }
            }
        }
    }

    pub(super) fn close_conn(&mut self, poll: &mut Poll, index: usize, why: Option<String>) {
        // What a rank sent before its connection broke still counts: when a write to a rank
        // that just exited fails first, its last message (often Finished) is still unread.
        let shape = self.shape();
        let registered = &self.registered_pids;
        let pending = match self.conns.get_mut(index).and_then(Option::as_mut) {
            Some(conn) if conn.rank.is_some() => conn.read(&self.secret, shape, registered).0,
            _ => Vec::new(),
        };
        for request in pending {
            self.handle(index, request);
        }
        if let Some(mut conn) = self.conns.get_mut(index).and_then(Option::take) {
            let _ = poll.registry().deregister(&mut conn.stream);
            if let Some(why) = why {
                tracing::warn!(rank = ?conn.rank, "refused a control connection: {why}");
            }
            if let Some(rank) = conn.rank {
                self.ranks[rank as usize].conn = None;
                self.control_closed(poll, rank);
            }
            if let Some(node) = conn.agent {
                self.agent_closed(node);
            }
            self.free_conns.push(index);
        }
    }

    /// Serves connection `index`; returns how many bytes it read.
    pub(super) fn conn_event(
        &mut self,
        poll: &mut Poll,
        index: usize,
        readable: bool,
    ) -> anyhow::Result<usize> {
        let shape = self.shape();
        let registered = &self.registered_pids;
        let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) else {
            return Ok(0);
        };
        if let Err(refusal) = conn.flush() {
            self.close_conn(poll, index, refusal_reason(refusal));
            return Ok(0);
        }
        if !readable {
            return Ok(0);
        }
        let (requests, closed, read) = conn.read(&self.secret, shape, registered);
        if conn.wants_write() {
            // A welcome to a rank that just proved itself.
            self.dirty.push(index);
        }
        for request in requests {
            self.handle(index, request);
        }
        if let Some(refusal) = closed {
            self.close_conn(poll, index, refusal_reason(refusal));
        }
        Ok(read)
    }

    pub(super) fn handle(&mut self, conn: usize, request: Request) {
        match request {
            Request::Registered { rank, pid, address } => {
                let slot = &mut self.ranks[rank as usize];
                if slot.pid != pid {
                    tracing::debug!(
                        rank,
                        pid,
                        spawned = slot.pid,
                        "rank registered from another process than the one started"
                    );
                }
                slot.conn = Some(conn);
                slot.address = Some(address.clone());
                if let Some(events) = self.console_events.as_mut() {
                    events.push(ConsoleEvent::Registered(rank));
                }
                slot.last_heartbeat = Some(Instant::now());
                self.registered_pids.insert(rank, pid);
                // Ranks that failed before this one registered: tell it now.
                let known: Vec<(u32, FailureCause)> =
                    self.failures.iter().map(|f| (f.rank, f.cause)).collect();
                for (failed, cause) in known {
                    self.send_to(rank, &failure_notice(failed, cause));
                }
                for asker in self.pending_resolves.remove(&rank).unwrap_or_default() {
                    self.send_to(
                        asker,
                        &ftcoll_runtime::control::ControlMsg::Address {
                            peer: rank,
                            address: address.clone(),
                        },
                    );
                }
                self.start_when_all_joined();
            }
            Request::Heartbeat(rank) => {
                self.ranks[rank as usize].last_heartbeat = Some(Instant::now())
            }
            Request::AgentRegistered { node, pid, host } => {
                self.agent_registered(conn, node, pid, &host)
            }
            Request::AgentHeartbeat(node) => self.agent_heartbeat(node),
            Request::RankExited {
                node,
                rank,
                code,
                signal,
            } => self.remote_exited(node, rank, code, signal),
            Request::Unreachable { from, peer } => {
                let slot = &mut self.ranks[peer as usize];
                if !slot.exited && slot.pending_fence.is_none() {
                    tracing::info!(from, peer, "transport reports the peer unreachable");
                    slot.pending_fence = Some((Instant::now(), FailureCause::Unreachable));
                }
            }
            Request::Suspect { from, peer } => {
                // The papers assume fail-stop: a rank a protocol took for dead is killed at
                // once and reported only when reaped, so it cannot act after its exclusion
                // any longer than the kill takes.
                // A rank that finished its work may be exiting: its silence is its end.
                if !self.ranks[peer as usize].finished {
                    tracing::info!(from, peer, "a protocol took the peer for dead; fencing it");
                    self.fence(peer, FailureCause::Suspected);
                }
            }
            Request::Resolve { from, peer } => {
                let slot = &self.ranks[peer as usize];
                let answer = match (&slot.address, slot.exited) {
                    (Some(address), _) => Some(address.clone()),
                    (None, true) => Some(String::new()),
                    (None, false) => None,
                };
                match answer {
                    Some(address) => self.send_to(
                        from,
                        &ftcoll_runtime::control::ControlMsg::Address { peer, address },
                    ),
                    None => self.pending_resolves.entry(peer).or_default().push(from),
                }
            }
            Request::Report(rank, report) => {
                let slot = &mut self.ranks[rank as usize];
                slot.last_heartbeat = Some(Instant::now());
                if let Some(events) = self.console_events.as_mut() {
                    events.push(ConsoleEvent::Reported(rank, report.op));
                }
                if self.keep_reports && slot.reports.len() < 1 << 20 {
                    slot.reports.push(report);
                }
            }
            Request::Telemetry(rank, sample) => {
                self.ranks[rank as usize].last_heartbeat = Some(Instant::now());
                if let Some(events) = self.console_events.as_mut() {
                    events.push(ConsoleEvent::Sample(rank, sample));
                }
            }
            Request::Timings(rank, nanos) => {
                // A long loop's timings come in several messages, in order.
                let timings = &mut self.ranks[rank as usize].timings;
                let room = MAX_TIMINGS_PER_RANK.saturating_sub(timings.len());
                timings.extend(nanos.into_iter().take(room));
            }
            Request::Finished { rank, pss_kb } => {
                let slot = &mut self.ranks[rank as usize];
                slot.finished = true;
                slot.pss_kb = pss_kb;
            }
        }
    }

    /// The start fence: once every rank has registered or failed, tells the live ones that
    /// operations may start (their joining waits for it) and starts the clock of scripted
    /// faults. Called on every registration and failure; acts once.
    pub(super) fn start_when_all_joined(&mut self) {
        if self.wired_at.is_some() {
            return;
        }
        let joined = self
            .ranks
            .iter()
            .all(|slot| slot.address.is_some() || slot.exited);
        if !joined {
            return;
        }
        self.wired_at = Some(self.started.elapsed());
        tracing::info!(
            wireup_s = self.started.elapsed().as_secs_f64(),
            "every rank registered or failed: the job starts"
        );
        for rank in 0..self.ranks.len() as u32 {
            if !self.ranks[rank as usize].exited {
                self.send_to(rank, &ftcoll_runtime::control::ControlMsg::Started);
            }
        }
    }

    pub(super) fn send_to(&mut self, rank: u32, msg: &ftcoll_runtime::control::ControlMsg) {
        let Some(index) = self.ranks[rank as usize].conn else {
            return;
        };
        if let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) {
            self.dirty.push(index);
            if !conn.queue(msg) {
                tracing::warn!(
                    rank,
                    "rank does not read its control messages; dropping one"
                );
            }
        }
    }

    /// Writes what was queued since the last turn (a socket that is full is written again
    /// on its writable event), and now and then closes connections that never said hello.
    pub(super) fn flush_all(&mut self, poll: &mut Poll) -> anyhow::Result<()> {
        let mut broken = Vec::new();
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for index in dirty {
            if let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) {
                if let Err(refusal) = conn.flush() {
                    broken.push((index, refusal_reason(refusal)));
                }
            }
        }
        // Looking at every connection on every turn would cost O(N) per message at
        // thousands of ranks; the hello deadline is two minutes.
        if self.last_hello_scan.elapsed() >= LIVENESS_EVERY {
            self.last_hello_scan = Instant::now();
            for (index, conn) in self.conns.iter().enumerate() {
                if let Some(conn) = conn {
                    let anonymous = conn.rank.is_none() && conn.agent.is_none();
                    if anonymous && conn.opened.elapsed() > REGISTER_TIMEOUT {
                        broken.push((index, Some("no hello in time".into())));
                    }
                }
            }
        }
        for (index, why) in broken {
            self.close_conn(poll, index, why);
        }
        Ok(())
    }
}

fn refusal_reason(refusal: Refusal) -> Option<String> {
    match refusal {
        Refusal::Closed => None,
        Refusal::Bad(why) => Some(why),
    }
}
