//! Frames of every size, many frames, frames to self and from registered memory.

use std::time::Instant;

use super::*;

#[test]
fn frames_of_every_size_round_trip_aligned() {
    let max = crate::network_max_frame_bytes();
    let sizes = [
        1,
        7,
        8,
        9,
        40,
        41,
        255,
        1000,
        4097,
        65_537,
        (1 << 20) + 3,
        3 << 20,
        max,
    ];
    for tls in TLS_UNDER_TEST {
        let mut ts = job(2, tls);
        for (seq, &len) in sizes.iter().enumerate() {
            ts[0].send(Rank(1), &frame(0, seq as u32, len)).unwrap();
            ts[1].send(Rank(0), &frame(1, seq as u32, len)).unwrap();
        }
        let mut log = Log::new();
        pump(&mut ts, &mut log, |log| log.len() == 2 * sizes.len());
        for me in 0..2u32 {
            let got: Vec<_> = log.iter().filter(|(to, _, _)| *to == me).collect();
            for (seq, (&len, (_, from, bytes))) in sizes.iter().zip(got).enumerate() {
                assert_eq!(*from, Rank(1 - me), "{tls:?}");
                assert_eq!(bytes.len(), len, "{tls:?}");
                assert!(
                    *bytes == frame(1 - me, seq as u32, len),
                    "{tls:?}: frame {seq} corrupted"
                );
            }
        }
        for t in &mut ts {
            assert_eq!(t.progress().unwrap(), 0, "{tls:?}: sends left in flight");
        }
    }
}

#[test]
fn many_frames_arrive_once_in_order_through_backpressure() {
    const FRAMES: u32 = 1500;
    for tls in TLS_UNDER_TEST {
        let mut ts = job(3, tls);
        for t in &mut ts {
            t.set_max_queued_bytes(64 << 10);
        }
        let mut log = Log::new();
        let mut next = [[0u32; 3]; 3];
        let mut backpressured = 0;
        let deadline = Instant::now() + TEST_DEADLINE;
        while next.iter().flatten().filter(|&&n| n == FRAMES).count() < 9 {
            assert!(Instant::now() < deadline, "{tls:?}: stalled at {next:?}");
            for (from, row) in next.iter_mut().enumerate() {
                for (to, sent) in row.iter_mut().enumerate() {
                    // A burst per pair per turn, so queues fill faster than they drain.
                    for _ in 0..8 {
                        let seq = *sent;
                        if seq == FRAMES {
                            break;
                        }
                        let len = 1 + (seq as usize * 7919) % 9000;
                        match ts[from].send(Rank(to as u32), &frame(from as u32, seq, len)) {
                            Ok(()) => *sent += 1,
                            Err(TransportError::Backpressure { .. }) => {
                                backpressured += 1;
                                break;
                            }
                            Err(e) => panic!("{tls:?}: {e}"),
                        }
                    }
                }
            }
            pump(&mut ts, &mut log, |_| true);
            for (me, t) in ts.iter_mut().enumerate() {
                t.progress().unwrap();
                t.poll_recv(256, &mut |from, bytes| {
                    assert_eq!(bytes.as_ptr() as usize % 8, 0);
                    log.push((me as u32, from, bytes.to_vec()));
                })
                .unwrap();
            }
        }
        pump(&mut ts, &mut log, |log| log.len() == 9 * FRAMES as usize);
        let mut expect = [[0u32; 3]; 3];
        for (to, from, bytes) in &log {
            let seq = expect[from.index()][*to as usize];
            let len = 1 + (seq as usize * 7919) % 9000;
            assert!(
                *bytes == frame(from.0, seq, len),
                "{tls:?}: {from}->{to} frame {seq} wrong or out of order"
            );
            expect[from.index()][*to as usize] += 1;
        }
        assert!(backpressured > 0, "{tls:?}: the bound was never reached");
    }
}

#[test]
fn frames_to_self_arrive_in_poll_recv() {
    let mut ts = job(1, Some("tcp"));
    for seq in 0..10 {
        ts[0]
            .send(Rank(0), &frame(0, seq, 13 + seq as usize))
            .unwrap();
    }
    let mut log = Log::new();
    pump(&mut ts, &mut log, |log| log.len() == 10);
    for (seq, (_, from, bytes)) in log.iter().enumerate() {
        assert_eq!(*from, Rank(0));
        assert!(*bytes == frame(0, seq as u32, 13 + seq));
    }
}

#[test]
fn registered_buffer_is_pinned_until_its_send_completes() {
    for tls in TLS_UNDER_TEST {
        let mut ts = job(2, tls);
        let len = 3 << 20;
        let mut buffer = ts[0].register(len).unwrap();
        assert!(buffer.registration().is_some());
        buffer
            .bytes_mut()
            .unwrap()
            .copy_from_slice(&frame(0, 0, len));
        ts[0].send_registered(Rank(1), &buffer, len).unwrap();
        // A frame this large goes by rendezvous, so it is in flight until the receiver acts.
        assert_eq!(ts[0].progress().unwrap(), 1, "{tls:?}");
        assert!(
            buffer.words_mut().is_none(),
            "{tls:?}: writable while in flight"
        );
        let mut log = Log::new();
        pump(&mut ts, &mut log, |log| log.len() == 1);
        assert!(log[0].2 == frame(0, 0, len), "{tls:?}");
        let deadline = Instant::now() + TEST_DEADLINE;
        while ts[0].progress().unwrap() > 0 {
            assert!(Instant::now() < deadline);
        }
        assert!(
            buffer.words_mut().is_some(),
            "{tls:?}: still pinned after completion"
        );
        // A registered buffer also goes to self, and a prefix of it to a peer.
        ts[0].send_registered(Rank(0), &buffer, 16).unwrap();
        ts[0].send_registered(Rank(1), &buffer, 5).unwrap();
        pump(&mut ts, &mut log, |log| log.len() == 3);
        assert!(log[1..]
            .iter()
            .all(|(_, _, b)| b[..] == frame(0, 0, len)[..b.len()]));
    }
}

#[test]
fn invalid_sends_are_refused() {
    let mut ts = job(2, Some("tcp"));
    let too_big = vec![0u8; crate::network_max_frame_bytes() + 1];
    assert!(matches!(
        ts[0].send(Rank(1), &too_big),
        Err(TransportError::FrameTooLarge { .. })
    ));
    assert!(matches!(
        ts[0].send(Rank(2), b"x"),
        Err(TransportError::NoSuchRank { rank: 2, size: 2 })
    ));
    assert!(ts[0].send(Rank(1), b"").is_err());
    let buffer = ts[0].register(8).unwrap();
    assert!(matches!(
        ts[0].send_registered(Rank(1), &buffer, 9),
        Err(TransportError::FrameTooLarge { .. })
    ));
}
