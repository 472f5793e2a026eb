//! Waiting and waking, lost and failed peers, and shutting down.

use std::thread;
use std::time::{Duration, Instant};

use super::*;

#[test]
fn waker_wakes_a_blocked_wait() {
    let directory = Directory::default();
    let mut t = transport(0, 1, &directory, Some("tcp"), Duration::ZERO);
    let waker = t.waker();
    let waiter = thread::spawn(move || {
        let start = Instant::now();
        t.wait(Some(Duration::from_secs(20))).unwrap();
        start.elapsed()
    });
    thread::sleep(Duration::from_millis(200));
    waker.wake();
    let waited = waiter.join().unwrap();
    assert!(
        waited < Duration::from_secs(10),
        "wait ignored the waker: {waited:?}"
    );
}

#[test]
fn idle_wait_sleeps_until_its_timeout() {
    let directory = Directory::default();
    let mut t = transport(0, 1, &directory, Some("tcp"), Duration::from_millis(5));
    // Spurious returns are allowed; an idle transport must still sleep most of the time.
    let start = Instant::now();
    let mut calls = 0;
    while start.elapsed() < Duration::from_millis(300) {
        t.wait(Some(Duration::from_millis(100))).unwrap();
        calls += 1;
        assert!(calls < 100, "wait keeps returning at once");
    }
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_frame_wakes_a_waiting_rank_in_another_thread() {
    for tls in TLS_UNDER_TEST {
        let directory = Directory::default();
        let mut receiver = transport(0, 2, &directory, tls, Duration::ZERO);
        let mut sender = transport(1, 2, &directory, tls, Duration::ZERO);
        let rx = thread::spawn(move || {
            let deadline = Instant::now() + TEST_DEADLINE;
            let mut got = Vec::new();
            while got.is_empty() {
                assert!(Instant::now() < deadline, "frame never arrived");
                receiver.wait(Some(Duration::from_secs(5))).unwrap();
                receiver
                    .poll_recv(8, &mut |from, bytes| got.push((from, bytes.to_vec())))
                    .unwrap();
            }
            got
        });
        thread::sleep(Duration::from_millis(100));
        sender.send(Rank(0), &frame(1, 0, 100)).unwrap();
        let deadline = Instant::now() + TEST_DEADLINE;
        while !rx.is_finished() {
            assert!(Instant::now() < deadline);
            sender.progress().unwrap();
            sender.wait(Some(Duration::from_millis(10))).unwrap();
        }
        let got = rx.join().unwrap();
        assert_eq!(got, vec![(Rank(1), frame(1, 0, 100))], "{tls:?}");
    }
}

#[test]
fn peer_failed_discards_frames_both_ways() {
    let mut ts = job(2, Some("tcp"));
    ts[0].send(Rank(1), &frame(0, 0, 4 << 20)).unwrap();
    // Frames from rank 1, some of them received before rank 0 hears of the failure.
    ts[1].send(Rank(0), &frame(1, 0, 100)).unwrap();
    let mut log = Log::new();
    pump(&mut ts, &mut log, |log| !log.is_empty());
    for seq in 1..4 {
        ts[1].send(Rank(0), &frame(1, seq, 100)).unwrap();
        ts[1].send(Rank(0), &frame(1, seq, 2 << 20)).unwrap();
    }
    ts[0].peer_failed(Rank(1));
    assert_eq!(
        ts[0].progress().unwrap(),
        0,
        "sends to the failed peer still in flight"
    );
    ts[0].send(Rank(1), &frame(0, 1, 10)).unwrap();
    assert_eq!(
        ts[0].progress().unwrap(),
        0,
        "a frame to a failed peer was sent"
    );
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        pump(&mut ts, &mut log, |_| true);
    }
    assert_eq!(log.len(), 1, "frames from a failed peer were delivered");
    let mut out = Vec::new();
    ts[0].take_unreachable(&mut out);
    assert!(
        out.is_empty(),
        "a failure the launcher declared is not reported back"
    );
}

#[test]
fn a_dropped_peer_is_reported_unreachable_or_at_least_harmless() {
    for tls in TLS_UNDER_TEST {
        let mut ts = job(2, tls);
        ts[0].send(Rank(1), &frame(0, 0, 100)).unwrap();
        ts[1].send(Rank(0), &frame(1, 0, 100)).unwrap();
        let mut log = Log::new();
        pump(&mut ts, &mut log, |log| log.len() == 2);
        // Rank 1 "crashes": its worker and endpoints vanish.
        drop(ts.pop());
        let survivor = &mut ts[0];
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seq = 1;
        while out.is_empty() && Instant::now() < deadline {
            survivor.send(Rank(1), &frame(0, seq, 1000)).unwrap();
            seq += 1;
            survivor.progress().unwrap();
            survivor.wait(Some(Duration::from_millis(20))).unwrap();
            survivor.take_unreachable(&mut out);
        }
        if tls == Some("tcp") {
            assert_eq!(out, vec![Rank(1)], "tcp: the lost peer was not reported");
        }
        if !out.is_empty() {
            // Reported once; later frames are discarded.
            survivor.send(Rank(1), &frame(0, seq, 1000)).unwrap();
            assert_eq!(survivor.progress().unwrap(), 0);
            let mut again = Vec::new();
            survivor.take_unreachable(&mut again);
            assert!(again.is_empty());
        }
    }
}

#[test]
fn shared_memory_alone_cannot_reach_a_peer() {
    // UCX 1.13's shared-memory transports (posix, sysv, cma, self) have no peer failure
    // handling, which every endpoint asks for: connecting fails cleanly instead.
    let mut ts = job(2, Some("sm,self"));
    match ts[0].send(Rank(1), b"frame") {
        Err(TransportError::Library { call, .. }) => assert_eq!(call, "ucp_ep_create"),
        other => panic!("expected a connect failure, got {other:?}"),
    }
    // Frames to self still work.
    ts[0].send(Rank(0), b"frame").unwrap();
    let mut log = Log::new();
    pump(&mut ts[..1], &mut log, |log| log.len() == 1);
}

#[test]
fn dropping_a_transport_with_idle_peers_is_prompt() {
    let mut ts = job(3, Some("tcp"));
    for from in 0..3u32 {
        for to in 0..3u32 {
            ts[from as usize]
                .send(Rank(to), &frame(from, 0, 5000))
                .unwrap();
        }
    }
    let mut log = Log::new();
    pump(&mut ts, &mut log, |log| log.len() == 9);
    // The others neither progress nor wait while rank 0 closes its endpoints to them.
    let start = Instant::now();
    drop(ts.remove(0));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "drop took {:?}",
        start.elapsed()
    );
}
