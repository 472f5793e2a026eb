//! Scenarios run on each provider (see the tests in the parent module).

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use super::*;

pub(super) fn sizes_round_trip(provider: &str) {
    let mut ts = job(provider, 2);
    let max = ts[0].max_frame_bytes();
    let sizes = [
        1,
        7,
        40,
        41,
        4096,
        65_535,
        65_536,
        65_537,
        (1 << 20) + 3,
        max,
    ];
    for (seq, &len) in sizes.iter().enumerate() {
        for (from, to) in [(0, 1), (1, 0), (0, 0)] {
            ts[from as usize]
                .send(Rank(to), &frame(from, seq as u64, len))
                .unwrap();
        }
    }
    let mut got = Vec::new();
    drive(&mut ts, &mut got, |got| got.len() == sizes.len() * 3);
    for (from, to) in [(0, 1), (1, 0), (0, 0)] {
        let frames: Vec<_> = got
            .iter()
            .filter(|(me, src, _)| *me == to && *src == Rank(from))
            .collect();
        assert_eq!(frames.len(), sizes.len());
        for (seq, (_, _, bytes)) in frames.iter().enumerate() {
            assert!(
                *bytes == frame(from, seq as u64, sizes[seq]),
                "{from}->{to} frame {seq} differs"
            );
        }
    }
    assert!(matches!(
        ts[0].send(Rank(1), &vec![0; max + 1]),
        Err(TransportError::FrameTooLarge { .. })
    ));
    assert!(matches!(
        ts[0].send(Rank(2), b"x"),
        Err(TransportError::NoSuchRank { .. })
    ));
}

/// Every rank sends `FRAMES` frames to every other, draining all transports after each `burst`
/// frames per link (queues build up in between).
pub(super) fn many_frames_in_order(provider: &str, burst: u64) {
    const SIZE: u32 = 3;
    const FRAMES: u64 = 1500;
    let mut ts = job(provider, SIZE);
    let len = |seq: u64| {
        if seq % 250 == 249 {
            200 << 10
        } else {
            12 + (seq as usize * 7919) % 600
        }
    };
    let mut got = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    for seq in 0..FRAMES {
        for from in 0..SIZE {
            for to in (0..SIZE).filter(|&to| to != from) {
                ts[from as usize]
                    .send(Rank(to), &frame(from, seq, len(seq)))
                    .unwrap();
            }
        }
        if seq % burst == burst - 1 {
            assert!(Instant::now() < deadline);
            drive(&mut ts, &mut got, |_| true);
        }
    }
    let expected = (FRAMES * u64::from(SIZE) * u64::from(SIZE - 1)) as usize;
    drive(&mut ts, &mut got, |got| got.len() >= expected);
    assert_eq!(got.len(), expected);
    let mut next_seq = BTreeMap::new();
    for (me, from, bytes) in &got {
        let next = next_seq.entry((*me, *from)).or_insert(0u64);
        assert_eq!(
            seq_of(bytes),
            *next,
            "frame from {from} to {me} out of order"
        );
        assert!(*bytes == frame(from.0, *next, len(*next)));
        *next += 1;
    }
    for t in &mut ts {
        assert_eq!(
            t.progress().unwrap(),
            0,
            "sends still pending after everything arrived"
        );
    }
}

pub(super) fn registered_send(provider: &str) {
    let mut ts = job(provider, 2);
    let mut buffer = ts[0].register(100_000).unwrap();
    assert!(buffer.registration().is_some());
    let words = buffer.words_mut().unwrap();
    for (k, word) in words.iter_mut().enumerate() {
        *word = k as u64 * 3;
    }
    ts[0].send_registered(Rank(1), &buffer, 99_999).unwrap();
    ts[0].send_registered(Rank(0), &buffer, 16).unwrap();
    let mut got = Vec::new();
    drive(&mut ts, &mut got, |got| got.len() == 2);
    let deadline = Instant::now() + DEADLINE;
    while ts[0].progress().unwrap() > 0 {
        assert!(Instant::now() < deadline, "registered send never completed");
    }
    assert!(
        buffer.words_mut().is_some(),
        "buffer still pinned after its send completed"
    );
    for (_, _, bytes) in &got {
        assert!(bytes[..] == buffer.bytes()[..bytes.len()]);
    }
    // Pinned while in flight: a large send to a peer that does not progress stays posted.
    let big = ts[0].register(1 << 20).unwrap();
    ts[0].send_registered(Rank(1), &big, 1 << 20).unwrap();
    let mut big = big;
    if ts[0].progress().unwrap() > 0 {
        assert!(
            big.words_mut().is_none(),
            "buffer writable while its send is in flight"
        );
    }
    drive(&mut ts, &mut got, |got| got.len() == 3);
    while ts[0].progress().unwrap() > 0 {
        assert!(
            Instant::now() < deadline,
            "large registered send never completed"
        );
    }
    assert!(big.words_mut().is_some());
    // The registration outlives the transport harmlessly.
    drop(ts);
    drop(big);
}

/// Frames of `frame_bytes` to a peer that does not progress, until the bound of `bound_bytes`
/// refuses one; then everything accepted arrives.
pub(super) fn backpressure(provider: &str, frame_bytes: usize, bound_bytes: usize) {
    let mut ts = job(provider, 2);
    ts[0].set_max_queued_bytes(bound_bytes);
    let mut accepted = 0u64;
    let mut refused = false;
    for seq in 0..64 {
        match ts[0].send(Rank(1), &frame(0, seq, frame_bytes)) {
            Ok(()) => accepted += 1,
            Err(TransportError::Backpressure { .. }) => {
                refused = true;
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        refused,
        "64 large frames to a silent peer never hit the bound"
    );
    let mut got = Vec::new();
    drive(&mut ts, &mut got, |got| got.len() as u64 == accepted);
}

pub(super) fn wait_and_wake(provider: &str) {
    let mut ts = job(provider, 2);
    let started = Instant::now();
    ts[0].wait(Some(Duration::from_millis(50))).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    // An idle rank waiting (spurious returns included) must not spin: many share few cores.
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    let (cpu_before, started) = (cpu(), Instant::now());
    let idle = Duration::from_millis(300);
    while started.elapsed() < idle {
        ts[0]
            .wait(Some(idle.saturating_sub(started.elapsed())))
            .unwrap();
    }
    let busy = cpu() - cpu_before;
    assert!(
        busy < idle / 3,
        "an idle wait used {busy:?} of CPU in {idle:?}"
    );
    let mut waiter = ts.remove(0);
    let waker = waiter.waker();
    let blocked = thread::spawn(move || {
        let started = Instant::now();
        waiter.wait(Some(Duration::from_secs(30))).unwrap();
        // Spurious returns are allowed; loop until the ring is seen, bounded by the deadline.
        (started.elapsed(), waiter)
    });
    thread::sleep(Duration::from_millis(100));
    waker.wake();
    let (elapsed, mut waiter) = blocked.join().unwrap();
    assert!(
        elapsed < Duration::from_secs(10),
        "waker did not wake wait ({elapsed:?})"
    );
    // A frame arriving wakes a blocked wait.
    let sender = thread::spawn({
        let mut peer = ts.remove(0);
        move || {
            thread::sleep(Duration::from_millis(100));
            peer.send(Rank(0), &frame(1, 0, 64)).unwrap();
            let deadline = Instant::now() + DEADLINE;
            while peer.progress().unwrap() > 0 && Instant::now() < deadline {
                peer.wait(Some(Duration::from_millis(10))).unwrap();
            }
            peer
        }
    });
    let started = Instant::now();
    let mut arrived = 0;
    while arrived == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "frame never woke the waiter"
        );
        waiter.wait(Some(Duration::from_secs(20))).unwrap();
        arrived = waiter.poll_recv(8, &mut |_, _| {}).unwrap();
    }
    drop(sender.join().unwrap());
}

pub(super) fn lost_peer(provider: &str) {
    let mut ts = job(provider, 3);
    ts[0].send(Rank(1), &frame(0, 0, 100)).unwrap();
    let mut got = Vec::new();
    drive(&mut ts, &mut got, |got| got.len() == 1);
    // Rank 1 crashes (its endpoint closes).
    drop(ts.remove(1));
    for seq in 1..20 {
        ts[0].send(Rank(1), &frame(0, seq, 100 << 10)).unwrap();
    }
    let mut unreachable = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && unreachable.is_empty() {
        ts[0].take_unreachable(&mut unreachable);
        if ts[0].progress().unwrap() == 0 {
            break;
        }
        ts[0].wait(Some(Duration::from_millis(10))).unwrap();
    }
    ts[0].take_unreachable(&mut unreachable);
    assert!(unreachable.iter().all(|&r| r == Rank(1)));
    ts[0].peer_failed(Rank(1));
    ts[0].send(Rank(1), &frame(0, 99, 100)).unwrap();
    assert_eq!(
        ts[0].progress().unwrap(),
        0,
        "frames to a failed peer are not discarded"
    );
    // The others still talk.
    ts[0].send(Rank(2), &frame(0, 0, 100)).unwrap();
    got.clear();
    drive(&mut ts, &mut got, |got| got.len() == 1);
}

/// Rank 1 finishes and closes its endpoint (no failure notice follows: it left cleanly) after
/// rank 0's provider has seen their connection end, so every later send to it starts a new
/// connection, which is refused, and the provider only ever says -FI_EAGAIN. Frames to it must
/// settle (reported unreachable, discarded) instead of waiting forever. Rank 2 is alive but
/// does not progress, so its connection cannot complete either: its frame must wait, and
/// arrive once rank 2 runs.
pub(super) fn departed_peer(provider: &str) {
    let mut ts = job(provider, 3);
    ts[0].send(Rank(1), &frame(0, 0, 100)).unwrap();
    let mut got = Vec::new();
    drive(&mut ts, &mut got, |got| got.len() == 1);
    drop(ts.remove(1));
    let (departed, idle) = (Rank(1), Rank(2));
    let settle = |t: &mut OfiTransport, for_: Duration| {
        let until = Instant::now() + for_;
        while Instant::now() < until {
            t.progress().unwrap();
            t.wait(Some(Duration::from_millis(5))).unwrap();
        }
    };
    settle(&mut ts[0], Duration::from_millis(200));
    ts[0].send(departed, &frame(0, 1, 100)).unwrap();
    ts[0].send(idle, &frame(0, 0, 100)).unwrap();
    let mut unreachable = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while unreachable.is_empty() {
        assert!(
            Instant::now() < deadline,
            "a frame to a peer that left waits forever: {} pending",
            ts[0].progress().unwrap()
        );
        ts[0].progress().unwrap();
        ts[0].take_unreachable(&mut unreachable);
        ts[0].wait(Some(Duration::from_millis(5))).unwrap();
    }
    assert_eq!(unreachable, [departed]);
    // Several checks of the idle peer's listener find it there: its frame stays.
    settle(&mut ts[0], Duration::from_millis(1500));
    assert_eq!(
        ts[0].progress().unwrap(),
        1,
        "the frame to a live, idle peer was dropped"
    );
    got.clear();
    drive(&mut ts, &mut got, |got| got.len() == 1);
    assert!(got[0].1 == Rank(0) && got[0].2 == frame(0, 0, 100));
    let until = Instant::now() + DEADLINE;
    while ts[0].progress().unwrap() > 0 {
        assert!(
            Instant::now() < until,
            "the idle peer's frame never completed"
        );
        ts[0].wait(Some(Duration::from_millis(5))).unwrap();
    }
    unreachable.clear();
    ts[0].take_unreachable(&mut unreachable);
    assert!(unreachable.is_empty(), "the idle peer was reported");
}

/// A failed receive as rxm reports it: tag 0 (not the frame's tag), no bytes. It must not use
/// up sequence number 0 of rank 0's link, whose real first frame would then be discarded as a
/// duplicate.
pub(super) fn failed_receive_names_no_link(provider: &str) {
    let mut ts = job(provider, 2);
    let buffer = mr::Buffer::new(&ts[1].domain, tag::SMALL_FRAME_BYTES).unwrap();
    ts[1].on_recv_done(
        buffer,
        0,
        0,
        ops::Status::Failed(104, "Connection reset by peer".into()),
    );
    ts[0].send(Rank(1), &frame(0, 0, 100)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(
            Instant::now() < deadline,
            "rank 0's first frame was lost: {:?}",
            ts[1].rx.links()
        );
        ts[0].progress().unwrap();
        ts[1]
            .poll_recv(8, &mut |from, bytes| got.push((from, bytes.to_vec())))
            .unwrap();
        ts[1].wait(Some(Duration::from_millis(5))).unwrap();
    }
    assert_eq!(got, [(Rank(0), frame(0, 0, 100))]);
}

/// Several ranks each send `per_sender` small frames to rank 0 while it does not poll at all
/// (a rank descheduled or busy computing); once it polls again every frame arrives, in order.
pub(super) fn unpolled_receiver_loses_nothing(provider: &str, senders: u32, per_sender: u64) {
    let mut ts = job(provider, senders + 1);
    let len = |seq: u64| 12 + (seq as usize * 7919) % 600;
    for seq in 0..per_sender {
        for from in 1..=senders {
            let t = &mut ts[from as usize];
            t.send(Rank(0), &frame(from, seq, len(seq))).unwrap();
            t.progress().unwrap();
        }
    }
    // The senders push what the provider takes (it may hold some back until the receiver
    // polls) for a while before the receiver looks.
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        for t in &mut ts[1..] {
            t.progress().unwrap();
        }
    }
    let expected = (u64::from(senders) * per_sender) as usize;
    let mut got = Vec::new();
    drive(&mut ts, &mut got, |got| got.len() >= expected);
    let mut next_seq = BTreeMap::new();
    for (me, from, bytes) in &got {
        assert_eq!(*me, 0);
        let next = next_seq.entry(*from).or_insert(0u64);
        assert!(
            *bytes == frame(from.0, *next, len(*next)),
            "frame {next} from {from} differs"
        );
        *next += 1;
    }
}

/// A burst far beyond what the provider can hold for a rank that does not poll, then traffic
/// for a while as it polls: every frame arrives in order, or the receiver reports the first one
/// lost; it never waits silently for a frame that cannot come.
pub(super) fn overflow_arrives_or_is_reported(provider: &str) {
    const SENDERS: u32 = 3;
    const BURST: u64 = 1500;
    // Longer than a gap must last to count as a loss.
    const TRAFFIC_AFTER: Duration = Duration::from_millis(1500);
    let mut ts = job(provider, SENDERS + 1);
    let frame_of = |from: u32, seq: u64| frame(from, seq, 40);
    for seq in 0..BURST {
        for from in 1..=SENDERS {
            ts[from as usize]
                .send(Rank(0), &frame_of(from, seq))
                .unwrap();
        }
    }
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        for t in &mut ts[1..] {
            t.progress().unwrap();
        }
    }
    let mut next_seq = BTreeMap::new();
    let mut received = 0;
    let mut sent = BURST;
    let start = Instant::now();
    let lost = loop {
        assert!(
            start.elapsed() < DEADLINE,
            "{received} frames arrived, none reported lost"
        );
        if start.elapsed() < TRAFFIC_AFTER {
            for from in 1..=SENDERS {
                ts[from as usize]
                    .send(Rank(0), &frame_of(from, sent))
                    .unwrap();
            }
            sent += 1;
            thread::sleep(Duration::from_micros(200));
        }
        for t in &mut ts[1..] {
            t.progress().unwrap();
        }
        let mut check = |from: Rank, bytes: &[u8]| {
            let next = next_seq.entry(from).or_insert(0u64);
            assert!(
                *bytes == frame_of(from.0, *next),
                "frame {next} from {from} differs"
            );
            *next += 1;
            received += 1;
        };
        if let Err(e) = ts[0].poll_recv(64, &mut check) {
            break e;
        }
        if received == (u64::from(SENDERS) * sent) as usize && start.elapsed() >= TRAFFIC_AFTER {
            return;
        }
    };
    let TransportError::FramesLost {
        from, seq, ahead, ..
    } = lost
    else {
        panic!("unexpected error: {lost}");
    };
    assert_eq!(seq, next_seq.get(&Rank(from)).copied().unwrap_or(0));
    assert!(ahead > 0);
}
