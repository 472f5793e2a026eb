//! Ranks as threads of one process, each with its own transport on 127.0.0.1.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ftcoll_algos::wire::{encode, Frame, FrameHeader, OpId};
use ftcoll_algos::{Algorithm, Rank, ValuesRef};

use super::rx::RxBuf;
use super::*;

const TOKEN: [u8; 32] = [7; 32];
const TEST_DEADLINE: Duration = Duration::from_secs(20);

type Directory = Arc<Mutex<HashMap<Rank, SocketAddr>>>;

fn transport(rank: u32, size: u32, directory: &Directory) -> TcpTransport {
    let lookup = Arc::clone(directory);
    let resolver = Box::new(move |peer: Rank| {
        lookup
            .lock()
            .unwrap()
            .get(&peer)
            .copied()
            .ok_or(TransportError::Resolve {
                rank: peer.0,
                why: "not registered".into(),
            })
    });
    let transport = TcpTransport::bind(TcpConfig {
        rank: Rank(rank),
        size,
        bind_ip: Ipv4Addr::LOCALHOST.into(),
        job_token: TOKEN,
        resolver,
        spin: Duration::ZERO,
    })
    .unwrap();
    let addr = transport.local_address().parse().unwrap();
    directory.lock().unwrap().insert(Rank(rank), addr);
    transport
}

/// Waits until `count` reaches `n`, failing at the deadline instead of hanging.
fn rendezvous(count: &AtomicUsize, n: usize, deadline: Instant) {
    count.fetch_add(1, Ordering::SeqCst);
    while count.load(Ordering::SeqCst) < n {
        assert!(Instant::now() < deadline, "rendezvous timed out");
        thread::sleep(Duration::from_millis(1));
    }
}

fn payload(sender: u32, seq: u32, len: usize) -> Vec<f64> {
    (0..len)
        .map(|k| f64::from(sender) * 1e6 + f64::from(seq) + k as f64 * 0.25)
        .collect()
}

fn frame(sender: u32, to: u32, seq: u32, len: usize) -> Vec<u8> {
    let header = FrameHeader::new(Algorithm::Ps, 1, OpId(u64::from(to)), Rank(sender), seq);
    encode(header, ValuesRef::F64(&payload(sender, seq, len)))
}

/// Checks one received frame against what `frame` encoded and the per-sender order.
fn check_frame(me: u32, from: Rank, bytes: &[u8], next_seq: &mut [u32]) -> usize {
    let decoded = Frame::decode(bytes).unwrap();
    assert_eq!(decoded.source(), from, "transport and header disagree");
    assert_eq!(decoded.header.op_id, u64::from(me));
    let seq = decoded.header.step;
    assert_eq!(
        seq,
        next_seq[from.index()],
        "frame out of order from {from}"
    );
    next_seq[from.index()] += 1;
    let ValuesRef::F64(values) = decoded.values().expect("payload aligned in place") else {
        panic!("wrong payload type");
    };
    for (k, value) in values.iter().enumerate() {
        assert_eq!(
            *value,
            f64::from(from.0) * 1e6 + f64::from(seq) + k as f64 * 0.25
        );
    }
    values.len()
}

fn payload_len(seq: u32) -> usize {
    if seq % 400 == 399 {
        64 << 10
    } else {
        (seq as usize * 7919) % 600
    }
}

#[test]
fn all_to_all_frames_arrive_once_in_order_and_aligned() {
    const SIZE: u32 = 4;
    const FRAMES: u32 = 2_000;
    const SELF_FRAMES: u32 = 100;
    let directory: Directory = Arc::default();
    let bound = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + TEST_DEADLINE;
    let ranks: Vec<_> = (0..SIZE)
        .map(|me| {
            let (directory, bound, finished) = (directory.clone(), bound.clone(), finished.clone());
            thread::spawn(move || {
                let mut t = transport(me, SIZE, &directory);
                rendezvous(&bound, SIZE as usize, deadline);
                let mut plan = (0..FRAMES)
                    .flat_map(|seq| (0..SIZE).filter(move |&p| p != me).map(move |p| (p, seq)))
                    .chain((0..SELF_FRAMES).map(|seq| (me, seq)))
                    .peekable();
                let expected = u64::from(FRAMES) * u64::from(SIZE - 1) + u64::from(SELF_FRAMES);
                let mut received = 0u64;
                let mut next_seq = vec![0u32; SIZE as usize];
                loop {
                    assert!(Instant::now() < deadline, "rank {me} timed out");
                    for _ in 0..64 {
                        let Some(&(to, seq)) = plan.peek() else { break };
                        match t.send(Rank(to), &frame(me, to, seq, payload_len(seq))) {
                            Ok(()) => {
                                plan.next();
                            }
                            Err(TransportError::Backpressure { .. }) => break,
                            Err(e) => panic!("send: {e}"),
                        }
                    }
                    let got = t
                        .poll_recv(256, &mut |from, bytes| {
                            check_frame(me, from, bytes, &mut next_seq);
                            received += 1;
                        })
                        .unwrap();
                    let queued = t.progress().unwrap();
                    if plan.peek().is_none() && received == expected && queued == 0 {
                        break;
                    }
                    if got == 0 {
                        t.wait(Some(Duration::from_millis(5))).unwrap();
                    }
                }
                for (from, &seq) in next_seq.iter().enumerate() {
                    let want = if from == me as usize {
                        SELF_FRAMES
                    } else {
                        FRAMES
                    };
                    assert_eq!(seq, want, "rank {me} from {from}");
                }
                // Keep the sockets open until every rank has everything.
                rendezvous(&finished, SIZE as usize, deadline);
            })
        })
        .collect();
    for rank in ranks {
        rank.join().unwrap();
    }
}

#[test]
fn backpressure_holds_a_slow_receiver_without_loss_or_deadlock() {
    const LARGE_VALUES: usize = 128 << 10; // 1 MiB of f64
    const FRAMES: u32 = 42; // ~50 MB including one 8 MiB frame
    let directory: Directory = Arc::default();
    let deadline = Instant::now() + TEST_DEADLINE;
    let len_of = |seq: u32| {
        if seq == 20 {
            8 * LARGE_VALUES
        } else {
            LARGE_VALUES
        }
    };
    let mut receiver = transport(1, 2, &directory);
    let mut sender = transport(0, 2, &directory);
    sender.set_max_queued_bytes(8 << 20);
    let receiver_done = Arc::new(AtomicBool::new(false));
    let done = receiver_done.clone();
    let sending = thread::spawn(move || {
        let mut backpressured = 0;
        let mut seq = 0;
        while seq < FRAMES || sender.progress().unwrap() > 0 {
            assert!(Instant::now() < deadline, "sender timed out");
            if seq < FRAMES {
                match sender.send(Rank(1), &frame(0, 1, seq, len_of(seq))) {
                    Ok(()) => seq += 1,
                    Err(TransportError::Backpressure { .. }) => {
                        backpressured += 1;
                        sender.wait(Some(Duration::from_millis(10))).unwrap();
                    }
                    Err(e) => panic!("send: {e}"),
                }
            } else {
                sender.wait(Some(Duration::from_millis(10))).unwrap();
            }
        }
        while !done.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "receiver never finished");
            sender.wait(Some(Duration::from_millis(10))).unwrap();
        }
        backpressured
    });
    // Do not read at all for a while: the sender's queue must fill and push back.
    thread::sleep(Duration::from_millis(1500));
    let mut next_seq = vec![0u32; 2];
    let mut values = 0;
    while next_seq[0] < FRAMES {
        assert!(Instant::now() < deadline, "receiver timed out");
        let got = receiver
            .poll_recv(8, &mut |from, bytes| {
                values += check_frame(1, from, bytes, &mut next_seq);
            })
            .unwrap();
        if got == 0 {
            receiver.wait(Some(Duration::from_millis(10))).unwrap();
        }
    }
    receiver_done.store(true, Ordering::SeqCst);
    let backpressured = sending.join().unwrap();
    assert!(backpressured > 0, "the sender never felt back-pressure");
    assert_eq!(values, (0..FRAMES).map(len_of).sum::<usize>());
}

/// Records warnings emitted on the thread it is installed on.
struct WarnLog(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for WarnLog {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut fields = Fields(String::new());
            event.record(&mut fields);
            self.0.lock().unwrap().push(fields.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Waits until the acceptor closes `stream` (end of stream or reset).
fn assert_closed_by_peer(stream: &mut std::net::TcpStream, what: &str) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 16];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("{what}: connection not closed: {other:?}"),
    }
}

fn raw_hello(magic: u32, rank: u32, token: &[u8; 32]) -> Vec<u8> {
    let mut hello = magic.to_le_bytes().to_vec();
    hello.extend_from_slice(&rank.to_le_bytes());
    hello.extend_from_slice(token);
    hello
}

/// Sends one frame; 1 if it was taken, 0 on back-pressure.
fn try_send(t: &mut TcpTransport, to: u32, frame: Vec<u8>) -> u32 {
    match t.send(Rank(to), &frame) {
        Ok(()) => 1,
        Err(TransportError::Backpressure { .. }) => 0,
        Err(e) => panic!("send: {e}"),
    }
}

#[test]
fn bad_connections_are_closed_and_logged_without_disturbing_the_job() {
    const FRAMES: u32 = 1_000;
    let directory: Directory = Arc::default();
    let deadline = Instant::now() + TEST_DEADLINE;
    let mut a = transport(0, 2, &directory);
    let mut b = transport(1, 2, &directory);
    b.set_hello_timeout(Duration::from_millis(500));
    let b_addr: SocketAddr = b.local_address().parse().unwrap();
    let attacks_done = Arc::new(AtomicBool::new(false));
    let warnings = Arc::new(Mutex::new(Vec::new()));

    let attacks = {
        let attacks_done = attacks_done.clone();
        thread::spawn(move || {
            let connect = || std::net::TcpStream::connect(b_addr).unwrap();
            let mut wrong_token = connect();
            wrong_token
                .write_all(&raw_hello(HELLO_MAGIC, 0, &[8; 32]))
                .unwrap();
            assert_closed_by_peer(&mut wrong_token, "wrong token");
            let mut wrong_magic = connect();
            wrong_magic
                .write_all(&raw_hello(0xDEAD_BEEF, 0, &TOKEN))
                .unwrap();
            assert_closed_by_peer(&mut wrong_magic, "wrong magic");
            let mut no_such_rank = connect();
            no_such_rank
                .write_all(&raw_hello(HELLO_MAGIC, 9, &TOKEN))
                .unwrap();
            assert_closed_by_peer(&mut no_such_rank, "rank outside the job");
            for bogus in [u32::MAX, 0] {
                let mut bad_prefix = connect();
                let mut bytes = raw_hello(HELLO_MAGIC, 0, &TOKEN);
                bytes.extend_from_slice(&bogus.to_le_bytes());
                bad_prefix.write_all(&bytes).unwrap();
                assert_closed_by_peer(&mut bad_prefix, "bogus length prefix");
            }
            let mut truncated = connect();
            truncated
                .write_all(&raw_hello(HELLO_MAGIC, 0, &TOKEN)[..20])
                .unwrap();
            drop(truncated);
            let mut silent = connect();
            let started = Instant::now();
            assert_closed_by_peer(&mut silent, "silent connection");
            assert!(started.elapsed() >= Duration::from_millis(400));
            attacks_done.store(true, Ordering::SeqCst);
        })
    };

    let exchange_a = thread::spawn(move || {
        let mut next_seq = vec![0u32; 2];
        let mut sent = 0;
        while sent < FRAMES || next_seq[1] < FRAMES || a.progress().unwrap() > 0 {
            assert!(Instant::now() < deadline, "rank 0 timed out");
            if sent < FRAMES {
                sent += try_send(&mut a, 1, frame(0, 1, sent, 100));
            }
            let got = a
                .poll_recv(64, &mut |from, bytes| {
                    check_frame(0, from, bytes, &mut next_seq);
                })
                .unwrap();
            if got == 0 && sent == FRAMES {
                a.wait(Some(Duration::from_millis(5))).unwrap();
            }
        }
        a
    });

    let log = WarnLog(warnings.clone());
    let b_finished = tracing::subscriber::with_default(log, || {
        let mut next_seq = vec![0u32; 2];
        let mut sent = 0;
        while sent < FRAMES
            || next_seq[0] < FRAMES
            || b.progress().unwrap() > 0
            || !attacks_done.load(Ordering::SeqCst)
        {
            assert!(Instant::now() < deadline, "rank 1 timed out");
            if sent < FRAMES {
                sent += try_send(&mut b, 0, frame(1, 0, sent, 100));
            }
            let got = b
                .poll_recv(64, &mut |from, bytes| {
                    check_frame(1, from, bytes, &mut next_seq);
                })
                .unwrap();
            if got == 0 {
                b.wait(Some(Duration::from_millis(5))).unwrap();
            }
        }
        // Let rank 0 finish reading before this rank's sockets close.
        b
    });
    let a_finished = exchange_a.join().unwrap();
    attacks.join().unwrap();
    drop((a_finished, b_finished));
    let warnings = warnings.lock().unwrap();
    // One line per bad connection: token, magic, rank, two prefixes, truncated, silent.
    assert_eq!(warnings.len(), 7, "{warnings:#?}");
}

#[test]
fn waker_ends_wait_promptly() {
    let directory: Directory = Arc::default();
    let mut t = transport(0, 1, &directory);
    let waker = t.waker();
    let ringer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        waker.wake();
    });
    let started = Instant::now();
    // The first call may return at once (listener start-up); the waker must end a real block.
    for _ in 0..100 {
        t.wait(Some(Duration::from_secs(20))).unwrap();
        if started.elapsed() >= Duration::from_millis(150) {
            break;
        }
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(150),
        "no real block: {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "waker ignored: {waited:?}");
    ringer.join().unwrap();
}

/// A ring whose edge a non-blocking poll took (`progress`, between the caller's last look for
/// news and its sleep) still ends the next wait at once: the executor slept through a
/// failure notice this way, and an ft-ring job over TCP hung until its time limit.
#[test]
fn a_ring_taken_by_a_non_blocking_poll_still_ends_the_next_wait() {
    let directory: Directory = Arc::default();
    let mut t = transport(0, 1, &directory);
    // Let the listener's start-up edges pass.
    for _ in 0..10 {
        t.progress().unwrap();
    }
    t.waker().wake();
    t.progress().unwrap();
    let started = Instant::now();
    t.wait(Some(Duration::from_secs(5))).unwrap();
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(1),
        "slept through a ring: {waited:?}"
    );
}

#[test]
fn sends_to_self_loop_back_and_unknown_ranks_are_errors() {
    let directory: Directory = Arc::default();
    let mut t = transport(0, 2, &directory);
    assert!(matches!(
        t.send(Rank(2), &frame(0, 2, 0, 1)),
        Err(TransportError::NoSuchRank { rank: 2, size: 2 })
    ));
    assert!(t.send(Rank(0), &[]).is_err());
    let mut next_seq = vec![0u32; 2];
    for seq in 0..3 {
        t.send(Rank(0), &frame(0, 0, seq, 3)).unwrap();
    }
    let got = t
        .poll_recv(10, &mut |from, bytes| {
            check_frame(0, from, bytes, &mut next_seq);
        })
        .unwrap();
    assert_eq!(got, 3);
    assert_eq!(t.kind(), TransportKind::Tcp);
    // A failed peer's frames are discarded, not queued.
    t.peer_failed(Rank(1));
    t.send(Rank(1), &frame(0, 1, 0, 3)).unwrap();
    assert_eq!(t.progress().unwrap(), 0);
}

/// A reader that hands out a byte stream in awkward pieces, with `WouldBlock` in between.
struct Trickle {
    data: Vec<u8>,
    at: usize,
    step: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.step += 1;
        if self.step.is_multiple_of(3) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let piece = [1, 3, 7, 4096, 50_000, 13][self.step % 6];
        let n = piece.min(buf.len()).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[test]
fn receive_buffer_aligns_frames_split_anywhere() {
    let mut stream = Vec::new();
    let lens: Vec<usize> = (0..200).map(|i| (i * 37) % 300 + (i % 50) * 1000).collect();
    for (seq, &len) in lens.iter().enumerate() {
        let bytes = frame(3, 1, seq as u32, len);
        stream.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        stream.extend_from_slice(&bytes);
    }
    let total = stream.len();
    let mut source = Trickle {
        data: stream,
        at: 0,
        step: 0,
    };
    let mut rx = RxBuf::new();
    let mut next_seq = vec![0u32; 4];
    for _ in 0..1_000_000 {
        while let Some(bytes) = rx.pop(max_frame_bytes()).unwrap() {
            assert_eq!(bytes.as_ptr() as usize % 8, 0);
            check_frame(1, Rank(3), bytes, &mut next_seq);
        }
        if source.at == total {
            break;
        }
        match rx.fill(&mut source, max_frame_bytes(), 1 << 20) {
            Ok(n) => assert!(n > 0),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
        }
    }
    while let Some(bytes) = rx.pop(max_frame_bytes()).unwrap() {
        check_frame(1, Rank(3), bytes, &mut next_seq);
    }
    assert_eq!(next_seq[3], 200);
    assert_eq!(rx.pending_bytes(), 0);
}
