//! One connection's state: an outgoing one this rank writes, or an incoming one it reads, and
//! why either is closed.

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ftcoll_algos::Rank;
use mio::net::TcpStream;

use super::hello::{self, HelloError, HELLO_BYTES};
use super::rx::RxBuf;
use super::tx::SendQueue;
use super::{max_frame_bytes, MAX_PENDING_HELLOS};

// Reads per connection per `poll_recv`, so one busy peer cannot starve the others.
const READS_PER_CONN_PER_POLL: usize = 8;
// Largest single read.
const MAX_READ_BYTES: usize = 1 << 20;
// Reads per outgoing connection per call when looking for end of stream.
const OUTGOING_READS_PER_CALL: usize = 4;

/// One connection, by the direction its bytes flow.
pub(super) enum Conn {
    Out(OutConn),
    In(InConn),
}

/// A connection this rank opened to send to `peer`.
pub(super) struct OutConn {
    pub(super) peer: Rank,
    pub(super) stream: TcpStream,
    /// The non-blocking connect has completed.
    pub(super) connected: bool,
    /// A writable (or error) edge arrived and no write has blocked since.
    pub(super) write_ready: bool,
    /// A readable edge arrived and no read has blocked since (only end of stream is expected).
    pub(super) read_ready: bool,
    pub(super) queue: SendQueue,
}

/// A connection a peer opened to send to this rank.
pub(super) struct InConn {
    pub(super) stream: TcpStream,
    pub(super) remote: SocketAddr,
    pub(super) read_ready: bool,
    pub(super) state: InState,
}

/// Where an incoming connection is in the protocol.
pub(super) enum InState {
    /// Reading the hello (`got` of its bytes so far).
    Hello {
        bytes: [u8; HELLO_BYTES],
        got: usize,
        accepted: Instant,
        deadline: Instant,
    },
    /// Hello accepted: frames from `peer`.
    Ready { peer: Rank, rx: RxBuf },
}

/// Why a connection is closed.
#[derive(Debug, thiserror::Error)]
pub(super) enum CloseReason {
    #[error("end of stream")]
    Eof,
    #[error("{0}")]
    Io(io::Error),
    #[error("rejected hello: {0}")]
    BadHello(HelloError),
    #[error("connection ended after {got} of {HELLO_BYTES} hello bytes")]
    TruncatedHello { got: usize },
    #[error("no complete hello after {0:?}")]
    HelloTimeout(Duration),
    #[error("length prefix {len} is outside 1..={max}")]
    BadPrefix { len: u32, max: usize },
    #[error("rank {0} was reported failed")]
    PeerFailed(Rank),
    #[error("more than {MAX_PENDING_HELLOS} connections are still in their hello")]
    TooManyHellos,
}

impl CloseReason {
    /// Whether the remote end broke the protocol (logged as a warning); the rest is a peer that
    /// went away or was declared failed, which the failure detector reports.
    pub(super) fn is_violation(&self) -> bool {
        match self {
            CloseReason::BadHello(_)
            | CloseReason::HelloTimeout(_)
            | CloseReason::BadPrefix { .. }
            | CloseReason::TooManyHellos => true,
            CloseReason::TruncatedHello { got } => *got > 0,
            CloseReason::Eof | CloseReason::Io(_) | CloseReason::PeerFailed(_) => false,
        }
    }
}

pub(super) fn would_block(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::WouldBlock
}

pub(super) fn interrupted(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::Interrupted
}

impl OutConn {
    /// Completes the connect, flushes the queue, and reads to notice end of stream.
    pub(super) fn service(&mut self) -> Result<(), CloseReason> {
        self.read_for_eof()?;
        if !self.connected {
            if !self.write_ready {
                return Ok(());
            }
            // mio's recipe for a non-blocking connect: an error, else connected iff there is a
            // peer address.
            match self.stream.take_error() {
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => return Err(CloseReason::Io(e)),
            }
            match self.stream.peer_addr() {
                Ok(_) => self.connected = true,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    self.write_ready = false;
                    return Ok(());
                }
                Err(e) => return Err(CloseReason::Io(e)),
            }
        }
        if self.write_ready && !self.queue.is_empty() {
            let written = self
                .queue
                .flush(&mut self.stream)
                .map_err(CloseReason::Io)?;
            if written.blocked {
                self.write_ready = false;
            }
        }
        Ok(())
    }

    pub(super) fn read_for_eof(&mut self) -> Result<(), CloseReason> {
        let mut scratch = [0u8; 256];
        for _ in 0..OUTGOING_READS_PER_CALL {
            if !self.read_ready {
                break;
            }
            match self.stream.read(&mut scratch) {
                Ok(0) => return Err(CloseReason::Eof),
                // The acceptor never writes; stray bytes carry nothing.
                Ok(_) => {}
                Err(e) if would_block(&e) => self.read_ready = false,
                Err(e) if interrupted(&e) => {}
                Err(e) => return Err(CloseReason::Io(e)),
            }
        }
        Ok(())
    }
}

impl InConn {
    /// Reads and checks the hello, or closes a connection whose hello is late.
    pub(super) fn advance_hello(
        &mut self,
        token: &[u8; 32],
        me: Rank,
        size: u32,
        failed: &BTreeSet<Rank>,
        now: Instant,
    ) -> Result<(), CloseReason> {
        let InState::Hello {
            bytes,
            got,
            accepted,
            deadline,
        } = &mut self.state
        else {
            return Ok(());
        };
        // The hello is read exactly, so no frame byte is consumed here.
        for _ in 0..HELLO_BYTES {
            if !self.read_ready || *got >= HELLO_BYTES {
                break;
            }
            match self.stream.read(bytes.get_mut(*got..).unwrap_or_default()) {
                Ok(0) => return Err(CloseReason::TruncatedHello { got: *got }),
                Ok(n) => *got += n,
                Err(e) if would_block(&e) => self.read_ready = false,
                Err(e) if interrupted(&e) => {}
                Err(e) => return Err(CloseReason::Io(e)),
            }
        }
        if *got < HELLO_BYTES {
            if now >= *deadline {
                return Err(CloseReason::HelloTimeout(
                    now.saturating_duration_since(*accepted),
                ));
            }
            return Ok(());
        }
        let peer = hello::check(bytes, token, me, size).map_err(CloseReason::BadHello)?;
        if failed.contains(&peer) {
            return Err(CloseReason::PeerFailed(peer));
        }
        tracing::debug!(rank = me.0, peer = peer.0, remote = %self.remote, "accepted connection");
        self.state = InState::Ready {
            peer,
            rx: RxBuf::new(),
        };
        Ok(())
    }

    /// Hands complete frames to `handler` and reads more, within the per-call bounds.
    pub(super) fn deliver(
        &mut self,
        budget: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> (usize, Result<(), CloseReason>) {
        let InState::Ready { peer, rx } = &mut self.state else {
            return (0, Ok(()));
        };
        let peer = *peer;
        let max_frame = max_frame_bytes();
        let mut delivered = 0;
        for round in 0..=READS_PER_CONN_PER_POLL {
            while delivered < budget {
                match rx.pop(max_frame) {
                    Ok(Some(frame)) => {
                        handler(peer, frame);
                        delivered += 1;
                    }
                    Ok(None) => break,
                    Err(len) => {
                        let reason = CloseReason::BadPrefix {
                            len,
                            max: max_frame,
                        };
                        return (delivered, Err(reason));
                    }
                }
            }
            if delivered >= budget || !self.read_ready || round == READS_PER_CONN_PER_POLL {
                break;
            }
            match rx.fill(&mut self.stream, max_frame, MAX_READ_BYTES) {
                Ok(0) => return (delivered, Err(CloseReason::Eof)),
                Ok(_) => {}
                Err(e) if would_block(&e) => self.read_ready = false,
                Err(e) if interrupted(&e) => {}
                Err(e) => return (delivered, Err(CloseReason::Io(e))),
            }
        }
        (delivered, Ok(()))
    }
}
