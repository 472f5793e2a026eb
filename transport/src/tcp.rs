//! TCP transport: the fallback data plane, and the one that crosses machines.
//!
//! # Connections
//! Each ordered pair of ranks has its own connection: frames from A to B travel only over the
//! connection A opened to B, and B's frames to A over the one B opens. A connection carries bytes
//! one way (the acceptor never writes), so the two directions keep independent framing state and
//! either side can drop its half without coordination. A connection opens lazily on the first
//! [`Transport::send`] to a peer: the [`TcpConfig::resolver`] names the peer's address and the
//! connect is non-blocking. Every socket has `TCP_NODELAY` set, since frames are latency-bound
//! protocol messages.
//!
//! # Wire
//! A connecting rank first writes a hello of [`HELLO_BYTES`]: [`HELLO_MAGIC`] and its rank (both
//! `u32` little-endian), then the job token. The acceptor checks it (the token in constant time)
//! and closes, with one warning, a connection whose hello is wrong or incomplete after
//! [`DEFAULT_HELLO_TIMEOUT`]; nothing else in the job notices. After the hello each frame is a
//! `u32` little-endian length, then that many frame bytes. A length of 0 or above
//! [`Transport::max_frame_bytes`] closes the connection the same way. The transport reads only
//! the length; the executor decodes frames.
//!
//! # Readiness
//! mio reports edges, so each connection keeps "may be readable / writable" flags that events set
//! and only a `WouldBlock` clears. Work stopped by a per-call bound (reads per connection, frames
//! per [`Transport::poll_recv`]) leaves its flag set, and [`Transport::wait`] then returns at
//! once instead of sleeping on data that is already there. Outgoing sockets stay registered for
//! writability: an edge comes only after a write filled the socket, which is exactly when their
//! queue is non-empty, so this costs no wakeups and saves a re-registration per queue change.
//!
//! # Lost peers
//! End of stream or a reset drops that connection and whatever was queued or half-received on it
//! (logged at debug level); the failure detector, not the transport, reports the rank. A later
//! send to the same peer opens a new connection unless [`Transport::peer_failed`] was called for
//! it, after which frames to it are discarded, as a crashed process would discard them.

mod conn;
mod hello;
mod rx;
mod tx;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ftcoll_algos::Rank;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use super::{Transport, TransportError, TransportKind, Waker};
use conn::{interrupted, would_block, CloseReason, Conn, InConn, InState, OutConn};
pub use hello::{HELLO_BYTES, HELLO_MAGIC};
use rx::PREFIX_BYTES;
use tx::SendQueue;

/// Default bound on bytes queued for all peers together (including frames to self not yet
/// received); a send beyond it is [`TransportError::Backpressure`].
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 256 << 20;

/// Default time an accepted connection has to deliver its complete hello.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a waiting rank yields its core between polls before it sleeps in the kernel.
const YIELD_BUDGET: Duration = Duration::from_micros(100);
const WAKER_TOKEN: Token = Token(0);
const LISTENER_TOKEN: Token = Token(1);
const FIRST_CONN_TOKEN: usize = 2;
const EVENTS_CAPACITY: usize = 1024;
// Accepts per call, so a connection storm cannot hold a rank in its accept loop.
const MAX_ACCEPTS_PER_CALL: usize = 64;
// Connections still in their hello beyond this are refused: strays must not exhaust memory.
const MAX_PENDING_HELLOS: usize = 256;

/// How to set up the TCP transport of one rank.
pub struct TcpConfig {
    /// This rank.
    pub rank: Rank,
    /// Number of ranks in the job.
    pub size: u32,
    /// Address to listen on (port chosen by the system); peers must reach this address, so it
    /// should not be the unspecified address.
    pub bind_ip: IpAddr,
    /// Secret shared by the job's ranks; connections that do not present it are refused.
    pub job_token: [u8; 32],
    /// Looks up a peer's address (what its [`Transport::local_address`] returned) through the
    /// job's control plane; called once per connection opened, and may block briefly.
    pub resolver: Box<dyn FnMut(Rank) -> Result<SocketAddr, TransportError> + Send>,
    /// How long a waiting rank polls its sockets before it sleeps in the kernel (zero: sleeps
    /// at once). Worth it only where every rank has a core of its own.
    pub spin: Duration,
}

impl fmt::Debug for TcpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token is a secret: never in logs.
        f.debug_struct("TcpConfig")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("bind_ip", &self.bind_ip)
            .finish_non_exhaustive()
    }
}

/// The TCP endpoint of one rank. See the [module documentation](self) for the protocol.
pub struct TcpTransport {
    rank: Rank,
    size: u32,
    job_token: [u8; 32],
    resolver: Box<dyn FnMut(Rank) -> Result<SocketAddr, TransportError> + Send>,
    poll: Poll,
    events: Events,
    listener: TcpListener,
    /// The listener may have connections to accept (edge seen, no `WouldBlock` since).
    listener_ready: bool,
    local_addr: SocketAddr,
    mio_waker: Arc<mio::Waker>,
    /// Set by the [`Waker`] before it rings: mio reports the ring as one edge, which any
    /// poll may take (a non-blocking one in `progress`, say), so `wait` also looks here and
    /// does not sleep through a ring that came after its caller last looked for news.
    woken: Arc<AtomicBool>,
    conns: BTreeMap<usize, Conn>,
    /// The connection this rank opened to each peer (its token in `conns`).
    outgoing: BTreeMap<Rank, usize>,
    next_token: usize,
    /// Frames sent to self, each in its own aligned buffer, with its length in bytes.
    loopback: VecDeque<(Vec<u64>, usize)>,
    loopback_bytes: usize,
    /// Peers reported failed; frames to them are discarded and their connections refused.
    failed: BTreeSet<Rank>,
    /// Bytes queued on all outgoing connections.
    queued_bytes: usize,
    /// Frames not completely written on all outgoing connections.
    queued_frames: usize,
    max_queued_bytes: usize,
    hello_timeout: Duration,
    /// Token after which the next `poll_recv` starts reading, for fairness across peers.
    cursor: usize,
    scratch_tokens: Vec<usize>,
    scratch_closes: Vec<(usize, CloseReason)>,
    spin: Duration,
}

impl fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("local_addr", &self.local_addr)
            .field("connections", &self.conns.len())
            .field("queued_bytes", &self.queued_bytes)
            .finish_non_exhaustive()
    }
}

fn max_frame_bytes() -> usize {
    super::network_max_frame_bytes()
}

impl TcpTransport {
    /// Binds a non-blocking listener on `config.bind_ip` with a system-chosen port.
    pub fn bind(config: TcpConfig) -> Result<TcpTransport, TransportError> {
        super::check_rank(config.rank, config.size)?;
        let poll = Poll::new().map_err(|e| TransportError::io("creating the TCP poller", e))?;
        let mut listener = TcpListener::bind(SocketAddr::new(config.bind_ip, 0))
            .map_err(|e| TransportError::io("binding the TCP listener", e))?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| TransportError::io("reading the TCP listener's address", e))?;
        poll.registry()
            .register(&mut listener, LISTENER_TOKEN, Interest::READABLE)
            .map_err(|e| TransportError::io("registering the TCP listener", e))?;
        let mio_waker = mio::Waker::new(poll.registry(), WAKER_TOKEN)
            .map_err(|e| TransportError::io("creating the TCP waker", e))?;
        Ok(TcpTransport {
            rank: config.rank,
            size: config.size,
            job_token: config.job_token,
            resolver: config.resolver,
            spin: config.spin,
            poll,
            events: Events::with_capacity(EVENTS_CAPACITY),
            listener,
            listener_ready: true,
            local_addr,
            mio_waker: Arc::new(mio_waker),
            woken: Arc::new(AtomicBool::new(false)),
            conns: BTreeMap::new(),
            outgoing: BTreeMap::new(),
            next_token: FIRST_CONN_TOKEN,
            loopback: VecDeque::new(),
            loopback_bytes: 0,
            failed: BTreeSet::new(),
            queued_bytes: 0,
            queued_frames: 0,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
            cursor: 0,
            scratch_tokens: Vec::new(),
            scratch_closes: Vec::new(),
        })
    }

    /// Changes the bound on queued bytes (default [`DEFAULT_MAX_QUEUED_BYTES`]). One frame is
    /// always accepted when nothing is queued, whatever the bound.
    pub fn set_max_queued_bytes(&mut self, bytes: usize) {
        self.max_queued_bytes = bytes;
    }

    /// Changes how long an accepted connection has for its hello (default
    /// [`DEFAULT_HELLO_TIMEOUT`]); applies to connections accepted afterwards.
    pub fn set_hello_timeout(&mut self, timeout: Duration) {
        self.hello_timeout = timeout;
    }

    /// Picks an unused connection token; the loop is bounded by the number of connections.
    fn alloc_token(&mut self) -> Option<usize> {
        for _ in 0..=self.conns.len() {
            let token = self.next_token;
            self.next_token = match self.next_token.wrapping_add(1) {
                t if t < FIRST_CONN_TOKEN => FIRST_CONN_TOKEN,
                t => t,
            };
            if !self.conns.contains_key(&token) {
                return Some(token);
            }
        }
        None
    }

    /// Opens the connection to `peer` and queues the hello.
    fn connect(&mut self, peer: Rank) -> Result<usize, TransportError> {
        let addr = (self.resolver)(peer)?;
        let mut stream =
            TcpStream::connect(addr).map_err(|e| TransportError::io("connecting to a peer", e))?;
        stream
            .set_nodelay(true)
            .map_err(|e| TransportError::io("setting TCP_NODELAY", e))?;
        let token = self.alloc_token().ok_or_else(|| {
            TransportError::io("allocating a connection token", io::ErrorKind::Other.into())
        })?;
        self.poll
            .registry()
            .register(
                &mut stream,
                Token(token),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| TransportError::io("registering a TCP connection", e))?;
        let mut queue = SendQueue::default();
        queue.push(&[&hello::encode(self.rank, &self.job_token)], 0, false);
        self.queued_bytes += queue.bytes();
        tracing::debug!(rank = self.rank.0, peer = peer.0, %addr, "connecting");
        self.conns.insert(
            token,
            Conn::Out(OutConn {
                peer,
                stream,
                connected: false,
                write_ready: false,
                read_ready: false,
                queue,
            }),
        );
        self.outgoing.insert(peer, token);
        Ok(token)
    }

    /// Closes a connection, releasing what was queued on it, and logs why.
    fn close(&mut self, token: usize, reason: CloseReason) {
        let Some(conn) = self.conns.remove(&token) else {
            return;
        };
        let me = self.rank.0;
        match conn {
            Conn::Out(mut out) => {
                if self.outgoing.get(&out.peer) == Some(&token) {
                    self.outgoing.remove(&out.peer);
                }
                // Deregistering can only fail if the socket is already gone; closing it does the
                // same.
                let _ = self.poll.registry().deregister(&mut out.stream);
                self.queued_bytes = self.queued_bytes.saturating_sub(out.queue.bytes());
                self.queued_frames = self.queued_frames.saturating_sub(out.queue.frames());
                tracing::debug!(
                    rank = me,
                    peer = out.peer.0,
                    discarded_bytes = out.queue.bytes(),
                    discarded_frames = out.queue.frames(),
                    "closed connection to peer: {reason}"
                );
            }
            Conn::In(mut inc) => {
                let _ = self.poll.registry().deregister(&mut inc.stream);
                let (peer, partial) = match &inc.state {
                    InState::Ready { peer, rx } => (Some(peer.0), rx.pending_bytes()),
                    InState::Hello { .. } => (None, 0),
                };
                if reason.is_violation() {
                    tracing::warn!(rank = me, remote = %inc.remote, peer = ?peer, "closed incoming connection: {reason}");
                } else {
                    tracing::debug!(rank = me, remote = %inc.remote, peer = ?peer, discarded_bytes = partial, "closed incoming connection: {reason}");
                }
            }
        }
    }

    fn close_scratch(&mut self) {
        let mut closes = std::mem::take(&mut self.scratch_closes);
        for (token, reason) in closes.drain(..) {
            self.close(token, reason);
        }
        self.scratch_closes = closes;
    }

    /// Polls the OS for readiness and records it in the connections' flags.
    fn harvest(&mut self, timeout: Option<Duration>) -> Result<(), TransportError> {
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if interrupted(&e) => return Ok(()),
            Err(e) => return Err(TransportError::io("waiting for socket events", e)),
        }
        for event in self.events.iter() {
            let readable = event.is_readable() || event.is_read_closed() || event.is_error();
            match event.token() {
                WAKER_TOKEN => {}
                LISTENER_TOKEN => self.listener_ready = true,
                Token(token) => match self.conns.get_mut(&token) {
                    Some(Conn::In(inc)) => inc.read_ready |= readable,
                    Some(Conn::Out(out)) => {
                        out.read_ready |= readable;
                        out.write_ready |=
                            event.is_writable() || event.is_write_closed() || event.is_error();
                    }
                    None => {}
                },
            }
        }
        Ok(())
    }

    /// Polls the sockets without sleeping, until there is work or a ring, for at most
    /// `timeout`: spinning for the spin budget (a rank with a core of its own), then yielding
    /// its core between polls for [`YIELD_BUDGET`] (with more ranks than cores, the peer it
    /// waits for is likely runnable and descheduled). Says whether it found work, and how long
    /// it polled. A rank that sleeps in `epoll_wait` takes tens of microseconds to wake on a
    /// VM: a 64 KiB allreduce over the loopback at n = 2 took 85 µs with ranks that slept at
    /// once, 25 µs with ranks that poll first, as MPI's TCP progress loops do.
    fn poll_for_work(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<(bool, Duration), TransportError> {
        let start = Instant::now();
        let budget = (self.spin + YIELD_BUDGET).min(timeout.unwrap_or(Duration::MAX));
        // Each turn is one non-blocking poll; the budget bounds the turns.
        while start.elapsed() < budget {
            self.harvest(Some(Duration::ZERO))?;
            if self.pending_work().0 || self.woken.load(Ordering::SeqCst) {
                return Ok((true, start.elapsed()));
            }
            if start.elapsed() < self.spin {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        Ok((false, start.elapsed()))
    }

    /// Everything but delivering frames: accept, advance hellos, expire slow hellos, flush queues
    /// and notice outgoing connections that ended.
    fn housekeeping(&mut self) {
        self.accept_pending();
        let now = Instant::now();
        let (me, size) = (self.rank, self.size);
        for (&token, conn) in self.conns.iter_mut() {
            match conn {
                Conn::In(inc) => {
                    if let Err(reason) =
                        inc.advance_hello(&self.job_token, me, size, &self.failed, now)
                    {
                        self.scratch_closes.push((token, reason));
                    }
                }
                Conn::Out(out) => {
                    let (bytes, frames) = (out.queue.bytes(), out.queue.frames());
                    let result = out.service();
                    let (sent_bytes, sent_frames) = (
                        bytes.saturating_sub(out.queue.bytes()),
                        frames.saturating_sub(out.queue.frames()),
                    );
                    self.queued_bytes = self.queued_bytes.saturating_sub(sent_bytes);
                    self.queued_frames = self.queued_frames.saturating_sub(sent_frames);
                    if let Err(reason) = result {
                        self.scratch_closes.push((token, reason));
                    }
                }
            }
        }
        self.close_scratch();
    }

    fn accept_pending(&mut self) {
        if !self.listener_ready {
            return;
        }
        let mut hellos = self
            .conns
            .values()
            .filter(|conn| {
                matches!(
                    conn,
                    Conn::In(InConn {
                        state: InState::Hello { .. },
                        ..
                    })
                )
            })
            .count();
        for _ in 0..MAX_ACCEPTS_PER_CALL {
            let (mut stream, remote) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if would_block(&e) => {
                    self.listener_ready = false;
                    return;
                }
                Err(e) if interrupted(&e) || e.kind() == io::ErrorKind::ConnectionAborted => {
                    continue
                }
                Err(e) => {
                    // Out of descriptors or similar: wait for the next edge rather than spin.
                    tracing::warn!(rank = self.rank.0, error = %e, "accepting a TCP connection failed");
                    self.listener_ready = false;
                    return;
                }
            };
            if hellos >= MAX_PENDING_HELLOS {
                tracing::warn!(rank = self.rank.0, %remote, "refused incoming connection: {}", CloseReason::TooManyHellos);
                continue;
            }
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(rank = self.rank.0, %remote, error = %e, "dropped incoming connection");
                continue;
            }
            let Some(token) = self.alloc_token() else {
                continue;
            };
            if let Err(e) =
                self.poll
                    .registry()
                    .register(&mut stream, Token(token), Interest::READABLE)
            {
                tracing::warn!(rank = self.rank.0, %remote, error = %e, "registering an incoming connection failed");
                continue;
            }
            hellos += 1;
            let now = Instant::now();
            self.conns.insert(
                token,
                Conn::In(InConn {
                    stream,
                    remote,
                    // Bytes may have arrived before registration; the first read finds out.
                    read_ready: true,
                    state: InState::Hello {
                        bytes: [0; HELLO_BYTES],
                        got: 0,
                        accepted: now,
                        deadline: now + self.hello_timeout,
                    },
                }),
            );
        }
    }

    /// Whether a call would find work without waiting, and the earliest hello deadline.
    fn pending_work(&self) -> (bool, Option<Instant>) {
        let mut ready = !self.loopback.is_empty() || self.listener_ready;
        let mut deadline: Option<Instant> = None;
        for conn in self.conns.values() {
            match conn {
                Conn::In(inc) => {
                    ready |= inc.read_ready;
                    match &inc.state {
                        InState::Ready { rx, .. } => ready |= rx.has_work(max_frame_bytes()),
                        InState::Hello { deadline: d, .. } => {
                            deadline = Some(deadline.map_or(*d, |e| e.min(*d)))
                        }
                    }
                }
                Conn::Out(out) => {
                    ready |= out.read_ready
                        || (out.write_ready && (!out.connected || !out.queue.is_empty()));
                }
            }
        }
        (ready, deadline)
    }

    /// Delivers up to `budget` frames from one incoming connection.
    fn deliver_from(
        &mut self,
        token: usize,
        budget: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> usize {
        let Some(Conn::In(inc)) = self.conns.get_mut(&token) else {
            return 0;
        };
        let (delivered, result) = inc.deliver(budget, handler);
        if let Err(reason) = result {
            self.close(token, reason);
        }
        delivered
    }
}

impl Transport for TcpTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Tcp
    }

    fn local_address(&self) -> String {
        self.local_addr.to_string()
    }

    fn max_frame_bytes(&self) -> usize {
        max_frame_bytes()
    }

    fn send(&mut self, to: Rank, frame: &[u8]) -> Result<(), TransportError> {
        let len = frame.len();
        super::check_network_frame(to, self.size, len)?;
        if len == 0 {
            // The receiver would take a zero length prefix for a protocol violation.
            return Err(TransportError::io(
                "sending over TCP",
                io::Error::new(io::ErrorKind::InvalidInput, "frames are never empty"),
            ));
        }
        if self.failed.contains(&to) {
            tracing::trace!(
                rank = self.rank.0,
                peer = to.0,
                "discarded frame to failed peer"
            );
            return Ok(());
        }
        let need = len + PREFIX_BYTES;
        let queued = |t: &TcpTransport| t.queued_bytes + t.loopback_bytes;
        if queued(self) > 0 && queued(self) + need > self.max_queued_bytes {
            self.harvest(Some(Duration::ZERO))?;
            self.housekeeping();
            if queued(self) > 0 && queued(self) + need > self.max_queued_bytes {
                return Err(TransportError::Backpressure {
                    queued_bytes: queued(self),
                });
            }
        }
        if to == self.rank {
            let mut words = vec![0u64; len.div_ceil(8)];
            bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..len].copy_from_slice(frame);
            self.loopback.push_back((words, len));
            self.loopback_bytes += len;
            return Ok(());
        }
        let token = match self.outgoing.get(&to) {
            Some(&token) => token,
            None => self.connect(to)?,
        };
        let Some(Conn::Out(out)) = self.conns.get_mut(&token) else {
            return Err(TransportError::io(
                "sending over TCP",
                io::Error::other("connection table out of step"),
            ));
        };
        let prefix = (len as u32).to_le_bytes();
        let parts: [&[u8]; 2] = [&prefix, frame];
        let mut written = 0;
        if out.connected && out.write_ready && out.queue.is_empty() {
            // Nothing queued ahead: write straight from the caller's buffer and copy only what
            // the socket does not take.
            match tx::write_parts(&mut out.stream, &parts) {
                Ok(w) => {
                    written = w.bytes;
                    out.write_ready &= !w.blocked;
                }
                Err(e) => {
                    // The peer is gone; the frame goes with it, as with any lost peer.
                    self.close(token, CloseReason::Io(e));
                    return Ok(());
                }
            }
        }
        if written < need {
            out.queue.push(&parts, written, true);
            self.queued_bytes += need - written;
            self.queued_frames += 1;
        }
        Ok(())
    }

    fn progress(&mut self) -> Result<usize, TransportError> {
        self.harvest(Some(Duration::ZERO))?;
        self.housekeeping();
        Ok(self.queued_frames)
    }

    fn poll_recv(
        &mut self,
        max_frames: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> Result<usize, TransportError> {
        self.harvest(Some(Duration::ZERO))?;
        self.housekeeping();
        let mut handled = 0;
        while handled < max_frames {
            let Some((words, len)) = self.loopback.pop_front() else {
                break;
            };
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            handler(self.rank, bytes.get(..len).unwrap_or_default());
            self.loopback_bytes = self.loopback_bytes.saturating_sub(len);
            handled += 1;
        }
        // Start after the connection served last, so a peer that fills the budget every call
        // cannot starve the ones behind it.
        let mut tokens = std::mem::take(&mut self.scratch_tokens);
        tokens.clear();
        let after = (Bound::Excluded(self.cursor), Bound::Unbounded);
        tokens.extend(self.conns.range(after).map(|(t, _)| *t));
        tokens.extend(self.conns.range(..=self.cursor).map(|(t, _)| *t));
        for &token in &tokens {
            if handled >= max_frames {
                break;
            }
            self.cursor = token;
            handled += self.deliver_from(token, max_frames - handled, handler);
        }
        self.scratch_tokens = tokens;
        Ok(handled)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> Result<(), TransportError> {
        self.housekeeping();
        let (ready, hello_deadline) = self.pending_work();
        // A ring since the last wait: its edge may have gone to an earlier poll.
        let woken = self.woken.swap(false, Ordering::SeqCst);
        let timeout = if ready || woken {
            Some(Duration::ZERO)
        } else {
            // Wake for the earliest hello deadline so a silent connection is closed on time.
            match hello_deadline {
                Some(deadline) => {
                    let until = deadline.saturating_duration_since(Instant::now());
                    Some(timeout.map_or(until, |t| t.min(until)))
                }
                None => timeout,
            }
        };
        let timeout = match timeout {
            Some(timeout) if timeout.is_zero() => Some(timeout),
            _ => match self.poll_for_work(timeout)? {
                (true, _) => Some(Duration::ZERO),
                (false, polled) => timeout.map(|t| t.saturating_sub(polled)),
            },
        };
        self.harvest(timeout)?;
        self.housekeeping();
        Ok(())
    }

    fn waker(&self) -> Waker {
        let mio_waker = Arc::clone(&self.mio_waker);
        let woken = Arc::clone(&self.woken);
        Waker::new(move || {
            woken.store(true, Ordering::SeqCst);
            // Failing to wake only delays the waiter until its timeout.
            let _ = mio_waker.wake();
        })
    }

    fn peer_failed(&mut self, peer: Rank) {
        if peer.0 >= self.size || peer == self.rank {
            return;
        }
        self.failed.insert(peer);
        let closes = self.conns.iter().filter_map(|(&token, conn)| match conn {
            Conn::Out(out) if out.peer == peer => Some(token),
            Conn::In(InConn {
                state: InState::Ready { peer: from, .. },
                ..
            }) if *from == peer => Some(token),
            _ => None,
        });
        let mut scratch = std::mem::take(&mut self.scratch_closes);
        scratch.extend(closes.map(|token| (token, CloseReason::PeerFailed(peer))));
        self.scratch_closes = scratch;
        self.close_scratch();
    }
}
