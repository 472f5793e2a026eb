//! Telling a peer whose endpoint is gone from one that is slow to connect, where the provider
//! cannot tell them apart.
//!
//! `tcp;ofi_rxm` connects lazily: a send to a peer without a connection starts one and returns
//! `-FI_EAGAIN` until it is up. If the peer's endpoint is closed (its process finished its work
//! and left, or died before anyone reported it), the connection is refused, and rxm (libfabric
//! 1.17, `rxm_process_reject`) only logs that and frees the attempt; the next send starts
//! another. So the sends return `-FI_EAGAIN` forever, nothing completes with an error, and
//! frames to that peer would wait forever: a rank flushing its last frames to a neighbour that
//! had already finished and left never returned, and the job hung. A peer that is alive but
//! not progressing (busy or descheduled; the connection completes only when it accepts) gives
//! the same `-FI_EAGAIN` and must keep its frames.
//!
//! So when the provider has held back a peer's frames with `-FI_EAGAIN`, nothing in flight to
//! it, for [`FIRST_CHECK_AFTER`], the transport connects to the peer's listening address itself
//! (a TCP connect outside libfabric, closed at once). Refused means nothing listens there any
//! more: that endpoint is gone for good (a rank never reopens one) and the frames can never be
//! delivered, so the peer is lost as after a failed send. Accepted, or no answer, proves
//! nothing: the frames stay and the check repeats at growing intervals. Time alone never
//! discards a frame. Providers whose addresses are not TCP listeners (verbs, efa, shm, ...)
//! get no check: there such frames wait for [`Transport::peer_failed`].
//!
//! [`Transport::peer_failed`]: crate::Transport::peer_failed

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::{Duration, Instant};

use ftcoll_algos::Rank;

/// How long frames to a peer must be held back before its listener is first checked: far
/// longer than a connection to a live, progressing peer takes.
const FIRST_CHECK_AFTER: Duration = Duration::from_millis(200);
/// Longest interval between checks of a peer whose frames stay held back.
const MAX_CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// A check unanswered this long is given up as inconclusive (e.g. an unreachable host).
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// `sa_family` values of Linux's `sockaddr_in` and `sockaddr_in6`.
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// Where the endpoint named `name` accepts connections, if `provider` connects over TCP to
/// the socket address in its endpoint names (`tcp`, alone or under `ofi_rxm`).
pub(super) fn tcp_listener(provider: &str, name: &[u8]) -> Option<SocketAddr> {
    if provider.split(';').next() != Some("tcp") {
        return None;
    }
    let family = u16::from_ne_bytes(name.get(..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(name.get(2..4)?.try_into().ok()?);
    match family {
        AF_INET => {
            let ip: [u8; 4] = name.get(4..8)?.try_into().ok()?;
            Some(SocketAddrV4::new(Ipv4Addr::from(ip), port).into())
        }
        AF_INET6 => {
            let flow = u32::from_be_bytes(name.get(4..8)?.try_into().ok()?);
            let ip: [u8; 16] = name.get(8..24)?.try_into().ok()?;
            let scope = u32::from_ne_bytes(name.get(24..28)?.try_into().ok()?);
            Some(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope).into())
        }
        _ => None,
    }
}

/// A connect in progress to a peer's listener.
struct Check {
    stream: mio::net::TcpStream,
    started: Instant,
}

/// What a check found.
enum Found {
    /// No answer yet.
    Pending,
    /// Refused: nothing listens there.
    Refused(io::Error),
    /// Accepted, failed otherwise, or unanswered in time: proves nothing.
    Inconclusive,
}

impl Check {
    fn start(to: SocketAddr, now: Instant) -> Result<Check, io::Error> {
        Ok(Check {
            stream: mio::net::TcpStream::connect(to)?,
            started: now,
        })
    }

    /// mio's recipe for a non-blocking connect: an error, else connected iff there is a peer
    /// address.
    fn poll(&self, now: Instant) -> Found {
        match self.stream.take_error() {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                return Found::Refused(e)
            }
            Ok(Some(_)) | Err(_) => return Found::Inconclusive,
        }
        match self.stream.peer_addr() {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                if now.duration_since(self.started) < CHECK_TIMEOUT {
                    Found::Pending
                } else {
                    Found::Inconclusive
                }
            }
            Ok(_) | Err(_) => Found::Inconclusive,
        }
    }
}

/// A peer whose frames the provider holds back.
struct Held {
    /// Where it listens (`None`: the provider offers no check; it only waits).
    listener: Option<SocketAddr>,
    next_check: Instant,
    interval: Duration,
    check: Option<Check>,
}

/// The peers whose frames the provider holds back with `-FI_EAGAIN`, nothing in flight to
/// them, and the checks of their listeners (see the module docs).
#[derive(Default)]
pub(super) struct Liveness {
    held: BTreeMap<Rank, Held>,
}

impl Liveness {
    /// Whether no peer is held back (nothing to check).
    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The provider refused a frame to `peer` with nothing in flight to it; `listener` is where
    /// the peer accepts connections, if it can be checked.
    pub(super) fn held_back(&mut self, peer: Rank, listener: Option<SocketAddr>, now: Instant) {
        self.held.entry(peer).or_insert(Held {
            listener,
            next_check: now + FIRST_CHECK_AFTER,
            interval: FIRST_CHECK_AFTER,
            check: None,
        });
    }

    /// The provider took a frame to `peer`, or its frames were dropped: no longer held back.
    pub(super) fn released(&mut self, peer: Rank) {
        self.held.remove(&peer);
    }

    /// Advances the checks due at `now`; appends to `gone` each peer whose listener refused a
    /// connection, with why (those are no longer tracked).
    pub(super) fn check(&mut self, now: Instant, gone: &mut Vec<(Rank, String)>) {
        self.held.retain(|&peer, held| {
            let Some(listener) = held.listener else {
                return true;
            };
            let found = match &held.check {
                Some(check) => check.poll(now),
                None if now < held.next_check => return true,
                None => match Check::start(listener, now) {
                    Ok(check) => {
                        let found = check.poll(now);
                        held.check = Some(check);
                        found
                    }
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Found::Refused(e),
                    Err(e) => {
                        tracing::debug!(peer = peer.0, %listener, error = %e, "cannot check a held-back peer's listener");
                        Found::Inconclusive
                    }
                },
            };
            match found {
                Found::Pending => true,
                Found::Refused(e) => {
                    gone.push((
                        peer,
                        format!("its endpoint is closed: a connection to {listener} was refused ({e})"),
                    ));
                    false
                }
                Found::Inconclusive => {
                    tracing::debug!(peer = peer.0, %listener, "a held-back peer's listener answers; its frames wait");
                    held.check = None;
                    held.interval = (held.interval * 2).min(MAX_CHECK_INTERVAL);
                    held.next_check = now + held.interval;
                    true
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_are_read_from_tcp_names_only() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&AF_INET.to_ne_bytes());
        v4[2..4].copy_from_slice(&4242u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[127, 0, 0, 1]);
        let expected: SocketAddr = "127.0.0.1:4242".parse().unwrap();
        assert_eq!(tcp_listener("tcp;ofi_rxm", &v4), Some(expected));
        assert_eq!(tcp_listener("tcp", &v4), Some(expected));
        assert_eq!(tcp_listener("verbs;ofi_rxm", &v4), None);
        assert_eq!(tcp_listener("shm", &v4), None);
        assert_eq!(tcp_listener("tcp;ofi_rxm", &v4[..6]), None);
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&AF_INET6.to_ne_bytes());
        v6[2..4].copy_from_slice(&4243u16.to_be_bytes());
        v6[23] = 1;
        let expected: SocketAddr = "[::1]:4243".parse().unwrap();
        assert_eq!(tcp_listener("tcp;ofi_rxm", &v6), Some(expected));
    }

    #[test]
    fn a_refused_listener_is_gone_and_a_live_one_is_not() {
        let live = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let mut liveness = Liveness::default();
        let start = Instant::now();
        liveness.held_back(Rank(1), Some(closed), start);
        liveness.held_back(Rank(2), Some(live.local_addr().unwrap()), start);
        liveness.held_back(Rank(3), None, start);
        let mut gone = Vec::new();
        liveness.check(start, &mut gone);
        assert!(gone.is_empty(), "checked before FIRST_CHECK_AFTER");
        let mut now = start + FIRST_CHECK_AFTER;
        while gone.is_empty() {
            assert!(
                now < start + Duration::from_secs(30),
                "the refusal was not seen"
            );
            liveness.check(now, &mut gone);
            std::thread::sleep(Duration::from_millis(5));
            now = Instant::now().max(start + FIRST_CHECK_AFTER);
        }
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].0, Rank(1));
        for _ in 0..20 {
            liveness.check(Instant::now() + MAX_CHECK_INTERVAL * 4, &mut gone);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            gone.len(),
            1,
            "a live listener or an uncheckable peer was given up"
        );
        liveness.released(Rank(2));
        liveness.released(Rank(3));
        assert!(liveness.is_empty());
    }
}
