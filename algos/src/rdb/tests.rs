use std::collections::VecDeque;

use super::*;

/// A minimal synchronous driver: FIFO delivery, no faults. The simulator is the real driver;
/// this one keeps the protocol's unit tests free of the runtime crate.
fn run(configs: Vec<RdbConfig>, inputs: &[f64]) -> Vec<RecursiveDoubling> {
    run_on(
        configs.into_iter().map(RecursiveDoubling::new).collect(),
        inputs,
    )
}

/// [`run`] on instances the caller made (fresh or restarted).
fn run_on(mut ranks: Vec<RecursiveDoubling>, inputs: &[f64]) -> Vec<RecursiveDoubling> {
    let mut queue: VecDeque<(Rank, Rank, Vec<u64>, usize)> = VecDeque::new();
    let mut out = Outbox::new();
    let collect = |from: Rank, out: &mut Outbox, queue: &mut VecDeque<_>| {
        for i in 0..out.send_count() {
            let (to, words, len) = out.send_words_at(i).unwrap();
            queue.push_back((from, to, words.to_vec(), len));
        }
        out.clear();
    };
    for (i, rank) in ranks.iter_mut().enumerate() {
        rank.handle(
            Time::ZERO,
            Input::Start {
                data: ValuesRef::F64(&inputs[i..i + 1]),
            },
            &mut out,
        );
        collect(Rank(i as u32), &mut out, &mut queue);
    }
    let mut guard = 0;
    while let Some((from, to, words, len)) = queue.pop_front() {
        guard += 1;
        assert!(guard < 1_000_000, "runaway delivery");
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let frame = Frame::decode(&bytes[..len]).unwrap();
        ranks[to.index()].handle(Time::ZERO, Input::Message { from, frame }, &mut out);
        assert!(
            !out.events()
                .iter()
                .any(|e| matches!(e, Event::Rejected { .. })),
            "{:?}",
            out.events()
        );
        collect(to, &mut out, &mut queue);
    }
    ranks
}

fn exact(n: u32) -> Vec<RdbConfig> {
    (0..n)
        .map(|r| RdbConfig::exact(Rank(r), n, ReduceOp::Sum, OpId(1)))
        .collect()
}

#[test]
fn every_size_up_to_70_sums_exactly() {
    for n in 1..=70u32 {
        let inputs: Vec<f64> = (0..n).map(|r| f64::from(r) + 1.0).collect();
        let ranks = run(exact(n), &inputs);
        let want: f64 = inputs.iter().sum();
        for (r, rank) in ranks.iter().enumerate() {
            assert_eq!(rank.phase(), Phase::Done, "n={n} rank={r}");
            assert_eq!(rank.value(), &Values::F64(vec![want]), "n={n} rank={r}");
            assert_eq!(rank.contributions(), u64::from(n));
        }
        let sent: u64 = ranks
            .iter()
            .map(|r| r.status().counters.messages_sent)
            .sum();
        assert_eq!(sent, RdbShape::new(n).messages(), "n={n}");
    }
}

#[test]
fn a_restarted_instance_is_a_fresh_one() {
    // Used instances of every kind: finished, approximate, and one holding an early message.
    let mut used = run(exact(6), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let mut early = RecursiveDoubling::new(RdbConfig::exact(Rank(0), 4, ReduceOp::Max, OpId(3)));
    let mut out = Outbox::new();
    let header = FrameHeader::new(Algorithm::Rdb, RdbKind::Exchange as u8, OpId(3), Rank(2), 2);
    let words = crate::wire::encode(header.with_aux(1), ValuesRef::F64(&[9.0]));
    let frame = Frame::decode(&words).unwrap();
    early.handle(
        Time::ZERO,
        Input::Message {
            from: Rank(2),
            frame,
        },
        &mut out,
    );
    assert_eq!(early.early.len(), 1, "the frame is held for a later step");
    used.push(early);
    used.push(RecursiveDoubling::new(RdbConfig::approximate(
        Rank(1),
        8,
        ReduceOp::Sum,
        OpId(9),
        Some(1),
    )));
    // Restarted for a 5-rank operation, each equals a new instance field for field...
    let configs: Vec<RdbConfig> = (0..5)
        .map(|r| RdbConfig::exact(Rank(r), 5, ReduceOp::Sum, OpId(42)))
        .collect();
    let restarted: Vec<RecursiveDoubling> = used
        .into_iter()
        .take(5)
        .zip(&configs)
        .map(|(mut rank, &config)| {
            rank.restart(config);
            assert_eq!(
                format!("{rank:?}"),
                format!("{:?}", RecursiveDoubling::new(config))
            );
            rank
        })
        .collect();
    // ...and runs the same operation to the same end.
    let inputs = [1.0, 2.0, 4.0, 8.0, 16.0];
    let ranks = run_on(restarted, &inputs);
    let fresh = run(configs, &inputs);
    for (rank, want) in ranks.iter().zip(&fresh) {
        assert_eq!(rank.phase(), Phase::Done);
        assert_eq!(rank.value(), &Values::F64(vec![31.0]));
        assert_eq!(rank.status(), want.status());
    }
}

#[test]
fn shape_formulas() {
    let s = RdbShape::new(1 << 20);
    assert_eq!((s.exchanges, s.remainder, s.rounds()), (20, 0, 20));
    assert_eq!(s.messages(), 20 * (1 << 20));
    let s = RdbShape::new(12);
    assert_eq!((s.pow2, s.remainder, s.rounds()), (8, 4, 5));
    assert_eq!(s.root(), Rank(1));
    assert_eq!(RdbShape::new(1).rounds(), 0);
}

#[test]
fn approximate_stops_after_k_exchanges_with_scaled_estimate() {
    let n = 16;
    let configs = (0..n)
        .map(|r| RdbConfig::approximate(Rank(r), n, ReduceOp::Sum, OpId(1), Some(2)))
        .collect();
    let inputs = vec![1.0; n as usize];
    let ranks = run(configs, &inputs);
    let mut est = Vec::new();
    for rank in &ranks {
        assert_eq!(rank.phase(), Phase::Done);
        assert_eq!(rank.contributions(), 4);
        rank.estimate(&mut est);
        assert_eq!(est, vec![16.0]);
    }
}

#[test]
fn wrong_partner_duplicate_and_foreign_frames_are_rejected() {
    let mut rank = RecursiveDoubling::new(RdbConfig::exact(Rank(0), 4, ReduceOp::Sum, OpId(1)));
    let mut out = Outbox::new();
    rank.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::F64(&[1.0]),
        },
        &mut out,
    );
    out.clear();
    let deliver =
        |rank: &mut RecursiveDoubling, out: &mut Outbox, from: u32, header: FrameHeader| {
            let bytes = crate::wire::encode(header, ValuesRef::F64(&[2.0]));
            let frame = Frame::decode(&bytes).unwrap();
            rank.handle(
                Time::ZERO,
                Input::Message {
                    from: Rank(from),
                    frame,
                },
                out,
            );
            let rejected = out
                .events()
                .iter()
                .any(|e| matches!(e, Event::Rejected { .. }));
            out.clear();
            rejected
        };
    let exchange = |from: u32, step: u32| {
        FrameHeader::new(
            Algorithm::Rdb,
            RdbKind::Exchange as u8,
            OpId(1),
            Rank(from),
            step,
        )
        .with_aux(1)
    };
    // Step 1's partner of rank 0 is rank 1; rank 2 is the partner of step 2.
    assert!(
        deliver(&mut rank, &mut out, 2, exchange(2, 1)),
        "wrong partner accepted"
    );
    assert!(
        deliver(&mut rank, &mut out, 3, exchange(3, 2)),
        "wrong partner accepted"
    );
    assert!(
        !deliver(&mut rank, &mut out, 2, exchange(2, 2)),
        "early message refused"
    );
    assert!(
        deliver(&mut rank, &mut out, 2, exchange(2, 2)),
        "duplicate accepted"
    );
    let mut other_op = exchange(1, 1);
    other_op.op_id = 9;
    assert!(
        deliver(&mut rank, &mut out, 1, other_op),
        "foreign operation accepted"
    );
    let mut bad_kind = exchange(1, 1);
    bad_kind.kind = 42;
    assert!(
        deliver(&mut rank, &mut out, 1, bad_kind),
        "unknown kind accepted"
    );
    assert_eq!(rank.status().counters.frames_rejected, 5);
    assert!(!deliver(&mut rank, &mut out, 1, exchange(1, 1)));
    assert_eq!(rank.phase(), Phase::Done);
    assert_eq!(rank.value(), &Values::F64(vec![5.0]));
}

#[test]
fn any_failure_while_running_aborts_and_after_completion_does_not() {
    let mut rank = RecursiveDoubling::new(RdbConfig::exact(Rank(0), 2, ReduceOp::Sum, OpId(1)));
    let mut out = Outbox::new();
    rank.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::F64(&[1.0]),
        },
        &mut out,
    );
    let bytes = crate::wire::encode(
        FrameHeader::new(Algorithm::Rdb, RdbKind::Exchange as u8, OpId(1), Rank(1), 1).with_aux(1),
        ValuesRef::F64(&[1.0]),
    );
    let frame = Frame::decode(&bytes).unwrap();
    rank.handle(
        Time::ZERO,
        Input::Message {
            from: Rank(1),
            frame,
        },
        &mut out,
    );
    assert_eq!(rank.phase(), Phase::Done);
    out.clear();
    rank.handle(Time::ZERO, Input::PeerFailed { peer: Rank(1) }, &mut out);
    assert_eq!(
        rank.phase(),
        Phase::Done,
        "a failure after completion changed the result"
    );

    let mut running = RecursiveDoubling::new(RdbConfig::exact(Rank(0), 8, ReduceOp::Sum, OpId(1)));
    running.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::F64(&[1.0]),
        },
        &mut out,
    );
    out.clear();
    running.handle(Time::ZERO, Input::PeerFailed { peer: Rank(7) }, &mut out);
    assert_eq!(running.phase(), Phase::Aborted);
    assert_eq!(
        out.events(),
        &[Event::Aborted(AbortReason::PeerFailed(Rank(7)))]
    );
}

#[test]
fn state_bit_flip_changes_the_local_value() {
    let mut rank = RecursiveDoubling::new(RdbConfig::exact(Rank(0), 2, ReduceOp::Sum, OpId(1)));
    let mut out = Outbox::new();
    rank.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::F64(&[3.0]),
        },
        &mut out,
    );
    let fault = LocalFault::FlipBit {
        var: StateVar::Value { elem: 0 },
        bit: 63,
    };
    rank.handle(Time::ZERO, Input::Fault(fault), &mut out);
    assert_eq!(rank.value(), &Values::F64(vec![-3.0]));
    let absent = LocalFault::FlipBit {
        var: StateVar::Weight,
        bit: 1,
    };
    out.clear();
    rank.handle(Time::ZERO, Input::Fault(absent), &mut out);
    assert_eq!(out.events(), &[Event::FaultIgnored(absent)]);
}
