//! The launcher's control server: accepts ranks, checks their proof of the job secret, answers
//! address lookups, relays failure notices, collects heartbeats and reports.
//!
//! A connection that does not prove the secret, or sends anything malformed, is logged and
//! closed; it never disturbs the job.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::time::Instant;

use ftcoll_runtime::control::msg::{
    agent_proof, constant_time_eq, proof, CONTROL_MAGIC, MAX_CONTROL_BYTES,
};
use ftcoll_runtime::control::{ControlMsg, FailureCause, OpReport};
use mio::net::TcpStream;

/// Bound on bytes buffered for one rank that does not read (notices are tiny; a rank this far
/// behind is stuck and the heartbeat detector will deal with it).
const MAX_OUTBOUND_BYTES: usize = 4 << 20;
/// Bound on bytes buffered from one connection before a message completes.
const MAX_INBOUND_BYTES: usize = MAX_CONTROL_BYTES + 4;

/// One control connection.
pub struct Conn {
    /// The socket.
    pub stream: TcpStream,
    /// The challenge sent to it.
    nonce: [u8; 16],
    /// The rank it proved to be, once it did.
    pub rank: Option<u32>,
    /// The node agent it proved to be, once it did.
    pub agent: Option<u32>,
    inbound: Vec<u8>,
    outbound: Vec<u8>,
    /// When it connected (for the hello deadline).
    pub opened: Instant,
}

/// What a connection asked of the launcher.
#[derive(Debug)]
pub enum Request {
    /// A rank proved itself: rank, pid, data address.
    Registered {
        /// The rank.
        rank: u32,
        /// Its process id.
        pid: u32,
        /// Its data-plane address.
        address: String,
    },
    /// A heartbeat of a registered rank.
    Heartbeat(u32),
    /// A node agent proved itself.
    AgentRegistered {
        /// Its node.
        node: u32,
        /// Its pid on its host.
        pid: u32,
        /// Its host name.
        host: String,
    },
    /// A heartbeat of a node agent.
    AgentHeartbeat(u32),
    /// A node agent reaped one of its ranks.
    RankExited {
        /// The agent's node.
        node: u32,
        /// The rank.
        rank: u32,
        /// Exit status (when `signal` is 0).
        code: i32,
        /// Killing signal, or 0.
        signal: i32,
    },
    /// A rank's transport found `peer` unreachable.
    Unreachable {
        /// Who reports.
        from: u32,
        /// The unreachable rank.
        peer: u32,
    },
    /// A rank's protocol took `peer` for dead by its own timeout.
    Suspect {
        /// Who reports.
        from: u32,
        /// The suspected rank.
        peer: u32,
    },
    /// An address lookup.
    Resolve {
        /// Who asks.
        from: u32,
        /// For whom.
        peer: u32,
    },
    /// An operation report.
    Report(u32, OpReport),
    /// Benchmark timings.
    Timings(u32, Vec<u64>),
    /// A status sample for the console.
    Telemetry(u32, ftcoll_runtime::control::RankSample),
    /// A rank is done.
    Finished {
        /// The rank.
        rank: u32,
        /// Its PSS in KiB.
        pss_kb: u64,
    },
}

/// What a connection may claim to be.
#[derive(Clone, Copy, Debug)]
pub struct JobShape {
    /// Ranks in the job.
    pub ranks: u32,
    /// Node agents in the job (0 when the launcher starts every rank itself).
    pub nodes: u32,
}

/// Why a connection was dropped.
#[derive(Debug)]
pub enum Refusal {
    /// The peer closed it.
    Closed,
    /// Anything else: logged.
    Bad(String),
}

impl Conn {
    /// A new connection; queues the challenge.
    pub fn new(stream: TcpStream, nonce: [u8; 16]) -> Conn {
        let mut conn = Conn {
            stream,
            nonce,
            rank: None,
            agent: None,
            inbound: Vec::new(),
            outbound: Vec::new(),
            opened: Instant::now(),
        };
        conn.queue(&ControlMsg::Challenge { nonce });
        conn
    }

    /// Queues a message; false if the connection is hopelessly behind.
    pub fn queue(&mut self, msg: &ControlMsg) -> bool {
        if self.outbound.len() > MAX_OUTBOUND_BYTES {
            return false;
        }
        self.outbound.extend_from_slice(&msg.encode());
        true
    }

    /// Whether bytes wait to be written.
    pub fn wants_write(&self) -> bool {
        !self.outbound.is_empty()
    }

    /// Writes what the socket takes.
    pub fn flush(&mut self) -> Result<(), Refusal> {
        while !self.outbound.is_empty() {
            match self.stream.write(&self.outbound) {
                Ok(0) => return Err(Refusal::Closed),
                Ok(n) => {
                    self.outbound.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(Refusal::Closed),
            }
        }
        Ok(())
    }

    /// Reads what arrived and turns complete messages into requests. Messages that arrived
    /// before the peer closed are still returned, with the closure as the second value: a rank's
    /// last report and its exit travel together.
    pub fn read(
        &mut self,
        secret: &[u8],
        shape: JobShape,
        registered: &BTreeMap<u32, u32>,
    ) -> (Vec<Request>, Option<Refusal>, usize) {
        let mut requests = Vec::new();
        let before = self.inbound.len();
        let closed = self.fill();
        let read = self.inbound.len().saturating_sub(before);
        if let Err(refusal) = self.parse(secret, shape, registered, &mut requests) {
            return (requests, Some(refusal), read);
        }
        (requests, closed, read)
    }

    /// Reads what the socket holds, up to half a control message beyond what is buffered.
    fn fill(&mut self) -> Option<Refusal> {
        let mut chunk = [0u8; 8192];
        // Bounded: each read either fills the buffer towards its cap or ends the loop.
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Some(Refusal::Closed),
                Ok(n) => {
                    self.inbound.extend_from_slice(&chunk[..n]);
                    if self.inbound.len() > MAX_INBOUND_BYTES {
                        return Some(Refusal::Bad(
                            "sent more than a control message may hold".into(),
                        ));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Some(Refusal::Closed),
            }
            if self.inbound.len() >= 4 + MAX_CONTROL_BYTES / 2 {
                return None;
            }
        }
    }

    fn parse(
        &mut self,
        secret: &[u8],
        shape: JobShape,
        registered: &BTreeMap<u32, u32>,
        requests: &mut Vec<Request>,
    ) -> Result<(), Refusal> {
        // Messages are taken from a cursor and the buffer drained once: draining each one from
        // the front moved the rest of the buffer per message, quadratic in what one read holds
        // (a rank reporting every operation kept the launcher's core busy moving bytes).
        let mut at = 0;
        let parsed = loop {
            let rest = &self.inbound[at..];
            if rest.len() < 4 {
                break Ok(());
            }
            let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            if len == 0 || len > MAX_CONTROL_BYTES {
                break Err(Refusal::Bad(format!("message length {len} out of range")));
            }
            if rest.len() < 4 + len {
                break Ok(());
            }
            let msg = match ControlMsg::decode(&rest[4..4 + len]) {
                Ok(msg) => msg,
                Err(e) => break Err(Refusal::Bad(e.to_string())),
            };
            at += 4 + len;
            match self.interpret(msg, secret, shape, registered) {
                Ok(request) => requests.push(request),
                Err(refusal) => break Err(refusal),
            }
        };
        self.inbound.drain(..at);
        parsed
    }

    fn interpret(
        &mut self,
        msg: ControlMsg,
        secret: &[u8],
        shape: JobShape,
        registered: &BTreeMap<u32, u32>,
    ) -> Result<Request, Refusal> {
        let size = shape.ranks;
        if let Some(node) = self.agent {
            return match msg {
                ControlMsg::Heartbeat => Ok(Request::AgentHeartbeat(node)),
                ControlMsg::RankExited { rank, code, signal } if rank < size => {
                    Ok(Request::RankExited {
                        node,
                        rank,
                        code,
                        signal,
                    })
                }
                other => Err(Refusal::Bad(format!(
                    "node agent {node} sent unexpected {other:?}"
                ))),
            };
        }
        match (self.rank, msg) {
            (
                None,
                ControlMsg::AgentHello {
                    magic,
                    node,
                    pid,
                    proof: claimed,
                    host,
                },
            ) => {
                if magic != CONTROL_MAGIC {
                    return Err(Refusal::Bad("wrong protocol magic".into()));
                }
                if node >= shape.nodes {
                    return Err(Refusal::Bad(format!(
                        "claims node agent {node} of a job of {} nodes",
                        shape.nodes
                    )));
                }
                if !constant_time_eq(&claimed, &agent_proof(secret, &self.nonce, node)) {
                    return Err(Refusal::Bad(format!(
                        "claims node agent {node} without the job secret"
                    )));
                }
                self.agent = Some(node);
                self.queue(&ControlMsg::Welcome);
                Ok(Request::AgentRegistered { node, pid, host })
            }
            (
                None,
                ControlMsg::Hello {
                    magic,
                    rank,
                    pid,
                    proof: claimed,
                    address,
                },
            ) => {
                if magic != CONTROL_MAGIC {
                    return Err(Refusal::Bad("wrong protocol magic".into()));
                }
                if rank >= size {
                    return Err(Refusal::Bad(format!(
                        "claims rank {rank} of a job of {size}"
                    )));
                }
                if !constant_time_eq(&claimed, &proof(secret, &self.nonce, rank)) {
                    return Err(Refusal::Bad(format!(
                        "claims rank {rank} without the job secret"
                    )));
                }
                if registered.contains_key(&rank) {
                    return Err(Refusal::Bad(format!("rank {rank} registered twice")));
                }
                self.rank = Some(rank);
                self.queue(&ControlMsg::Welcome);
                Ok(Request::Registered { rank, pid, address })
            }
            (None, other) => Err(Refusal::Bad(format!("{other:?} before proving the secret"))),
            (Some(rank), ControlMsg::Heartbeat) => Ok(Request::Heartbeat(rank)),
            (Some(rank), ControlMsg::Resolve { peer }) if peer < size => {
                Ok(Request::Resolve { from: rank, peer })
            }
            (Some(rank), ControlMsg::Unreachable { peer }) if peer < size => {
                Ok(Request::Unreachable { from: rank, peer })
            }
            (Some(rank), ControlMsg::Suspect { peer }) if peer < size && peer != rank => {
                Ok(Request::Suspect { from: rank, peer })
            }
            (Some(rank), ControlMsg::Report(report)) => Ok(Request::Report(rank, report)),
            (Some(rank), ControlMsg::Finished { pss_kb }) => Ok(Request::Finished { rank, pss_kb }),
            (Some(rank), ControlMsg::Timings { nanos }) => Ok(Request::Timings(rank, nanos)),
            (Some(rank), ControlMsg::Telemetry(sample)) => Ok(Request::Telemetry(rank, sample)),
            (Some(rank), other) => Err(Refusal::Bad(format!(
                "rank {rank} sent unexpected {other:?}"
            ))),
        }
    }
}

/// The notice survivors get.
pub fn failure_notice(rank: u32, cause: FailureCause) -> ControlMsg {
    ControlMsg::Failed { rank, cause }
}

#[cfg(test)]
mod tests;
