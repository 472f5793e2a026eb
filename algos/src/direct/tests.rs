use proptest::prelude::*;

use super::*;
use crate::rng::SimRng;

/// A minimal driver: messages are delivered in an order drawn from `seed`, and rank `late`
/// (if any) starts only after every message to it has arrived.
fn run(n: u32, inputs: &[Vec<f64>], seed: u64, late: Option<u32>) -> Vec<DirectAllreduce> {
    let mut ranks: Vec<DirectAllreduce> = (0..n)
        .map(|r| {
            DirectAllreduce::new(DirectConfig {
                rank: Rank(r),
                size: n,
                op: ReduceOp::Sum,
                op_id: OpId(3),
            })
        })
        .collect();
    let mut in_flight: Vec<(Rank, Rank, Vec<u8>)> = Vec::new();
    let mut out = Outbox::new();
    let start = |rank: &mut DirectAllreduce, r: u32, out: &mut Outbox, in_flight: &mut Vec<_>| {
        rank.handle(
            Time::ZERO,
            Input::Start {
                data: ValuesRef::F64(&inputs[r as usize]),
            },
            out,
        );
        for i in 0..out.send_count() {
            let (to, words, len) = out.send_words_at(i).unwrap();
            let bytes: &[u8] = bytemuck::cast_slice(words);
            in_flight.push((Rank(r), to, bytes[..len].to_vec()));
        }
        out.clear();
    };
    for r in (0..n).filter(|&r| Some(r) != late) {
        start(&mut ranks[r as usize], r, &mut out, &mut in_flight);
    }
    let mut rng = SimRng::new(seed);
    // Every message is delivered once; the late rank's own sends join when it starts.
    for _ in 0..2 * n * n {
        if in_flight.is_empty() {
            match late.filter(|&l| ranks[l as usize].phase() == Phase::Idle) {
                Some(l) => start(&mut ranks[l as usize], l, &mut out, &mut in_flight),
                None => break,
            }
            continue;
        }
        let (from, to, bytes) = in_flight.swap_remove(rng.below(in_flight.len() as u64) as usize);
        let frame = Frame::decode(&bytes).unwrap();
        ranks[to.index()].handle(Time::ZERO, Input::Message { from, frame }, &mut out);
        assert!(
            !out.events()
                .iter()
                .any(|e| matches!(e, Event::Rejected { .. })),
            "{:?}",
            out.events()
        );
        assert_eq!(out.send_count(), 0, "only Start sends");
        out.clear();
    }
    ranks
}

/// The rank-order fold every rank must reproduce bit for bit.
fn rank_order_sum(inputs: &[Vec<f64>]) -> Vec<f64> {
    let mut acc = inputs[0].clone();
    for input in &inputs[1..] {
        acc.iter_mut().zip(input).for_each(|(a, b)| *a += b);
    }
    acc
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Any delivery order, any start order: every rank ends with the same bits, the rank-order
    /// fold of all inputs, after exactly N(N − 1) messages.
    #[test]
    fn every_rank_holds_the_rank_order_fold(
        n in 1u32..=40,
        len in 1usize..=4,
        seed in any::<u64>(),
        late in proptest::option::of(0u32..40),
    ) {
        let mut rng = SimRng::new(seed ^ 0x5eed);
        let inputs: Vec<Vec<f64>> = (0..n)
            .map(|_| (0..len).map(|_| rng.next_f64() * 1e3 - 5e2).collect())
            .collect();
        let late = late.filter(|&l| l < n);
        let ranks = run(n, &inputs, seed, late);
        let want = Values::F64(rank_order_sum(&inputs));
        for (r, rank) in ranks.iter().enumerate() {
            prop_assert_eq!(rank.phase(), Phase::Done, "rank {}", r);
            prop_assert_eq!(rank.value(), Some(&want), "rank {}", r);
        }
        let sent: u64 = ranks.iter().map(|r| r.status().counters.messages_sent).sum();
        prop_assert_eq!(sent, DirectAllreduce::messages(n));
    }
}

fn started(rank: u32, size: u32, input: f64) -> (DirectAllreduce, Outbox) {
    let mut protocol = DirectAllreduce::new(DirectConfig {
        rank: Rank(rank),
        size,
        op: ReduceOp::Sum,
        op_id: OpId(1),
    });
    let mut out = Outbox::new();
    protocol.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::F64(&[input]),
        },
        &mut out,
    );
    out.clear();
    (protocol, out)
}

fn deliver(
    protocol: &mut DirectAllreduce,
    out: &mut Outbox,
    from: u32,
    header: FrameHeader,
    payload: &[f64],
) -> Vec<Event> {
    let bytes = crate::wire::encode(header, ValuesRef::F64(payload));
    let frame = Frame::decode(&bytes).unwrap();
    protocol.handle(
        Time::ZERO,
        Input::Message {
            from: Rank(from),
            frame,
        },
        out,
    );
    let events = out.events().to_vec();
    out.clear();
    events
}

fn input_header(from: u32, op: u64) -> FrameHeader {
    FrameHeader::new(Algorithm::Direct, KIND_INPUT, OpId(op), Rank(from), 0)
}

fn rejected(events: &[Event]) -> bool {
    events.iter().any(|e| matches!(e, Event::Rejected { .. }))
}

#[test]
fn foreign_duplicate_and_misshapen_frames_are_rejected() {
    let (mut rank, mut out) = started(0, 3, 1.0);
    // Another operation's input, a forged source, an input from ourselves, a wrong length.
    assert!(rejected(&deliver(
        &mut rank,
        &mut out,
        1,
        input_header(1, 2),
        &[2.0]
    )));
    assert!(rejected(&deliver(
        &mut rank,
        &mut out,
        1,
        input_header(2, 1),
        &[2.0]
    )));
    assert!(rejected(&deliver(
        &mut rank,
        &mut out,
        0,
        input_header(0, 1),
        &[2.0]
    )));
    assert!(rejected(&deliver(
        &mut rank,
        &mut out,
        1,
        input_header(1, 1),
        &[2.0, 3.0]
    )));
    let wrong_kind = FrameHeader::new(Algorithm::Direct, 9, OpId(1), Rank(1), 0);
    assert!(rejected(&deliver(
        &mut rank,
        &mut out,
        1,
        wrong_kind,
        &[2.0]
    )));
    // The real input is taken once; a second copy is a duplicate.
    assert!(!rejected(&deliver(
        &mut rank,
        &mut out,
        1,
        input_header(1, 1),
        &[2.0]
    )));
    assert!(rejected(&deliver(
        &mut rank,
        &mut out,
        1,
        input_header(1, 1),
        &[2.0]
    )));
    assert_eq!(rank.phase(), Phase::Running);
    assert!(!rejected(&deliver(
        &mut rank,
        &mut out,
        2,
        input_header(2, 1),
        &[4.0]
    )));
    assert_eq!(rank.phase(), Phase::Done);
    assert_eq!(rank.value(), Some(&Values::F64(vec![7.0])));
    assert_eq!(rank.status().counters.frames_rejected, 6);
}

#[test]
fn any_failure_aborts_a_running_operation() {
    let (mut rank, mut out) = started(1, 4, 1.0);
    deliver(&mut rank, &mut out, 0, input_header(0, 1), &[2.0]);
    rank.handle(Time::ZERO, Input::PeerFailed { peer: Rank(3) }, &mut out);
    assert_eq!(rank.phase(), Phase::Aborted);
    assert!(out
        .events()
        .contains(&Event::Aborted(AbortReason::PeerFailed(Rank(3)))));
}

#[test]
fn a_flip_of_the_unfolded_input_reaches_the_result() {
    // Rank 2 cannot fold its own input before rank 0's and 1's have come.
    let (mut rank, mut out) = started(2, 3, 1.0);
    let flip = LocalFault::FlipBit {
        var: StateVar::Value { elem: 0 },
        bit: 62,
    };
    rank.handle(Time::ZERO, Input::Fault(flip), &mut out);
    assert!(out.events().contains(&Event::FaultApplied(flip)));
    out.clear();
    deliver(&mut rank, &mut out, 0, input_header(0, 1), &[2.0]);
    deliver(&mut rank, &mut out, 1, input_header(1, 1), &[4.0]);
    assert_eq!(rank.phase(), Phase::Done);
    let flipped = crate::bits::flip_f64(1.0, 62);
    assert_eq!(rank.value(), Some(&Values::F64(vec![6.0 + flipped])));
}

#[test]
fn the_direct_exchange_applies_to_small_groups_and_vectors_only() {
    assert!(!direct_applies(2, 8));
    assert!(direct_applies(3, 8));
    assert!(direct_applies(DIRECT_MAX_RANKS, DIRECT_MAX_BYTES));
    assert!(!direct_applies(DIRECT_MAX_RANKS + 1, 8));
    assert!(!direct_applies(4, DIRECT_MAX_BYTES + 1));
    assert_eq!(Placement::of(16, 16), Placement::OwnCores);
    assert_eq!(Placement::of(4, 2), Placement::Oversubscribed);
}

#[test]
fn groups_beyond_one_word_of_arrivals_sum_exactly() {
    for n in [63u32, 64, 65, 130] {
        let inputs: Vec<Vec<f64>> = (0..n).map(|r| vec![f64::from(r) + 0.5]).collect();
        let ranks = run(n, &inputs, u64::from(n), Some(n - 1));
        let want = Values::F64(rank_order_sum(&inputs));
        for rank in &ranks {
            assert_eq!(rank.phase(), Phase::Done, "n={n}");
            assert_eq!(rank.value(), Some(&want), "n={n}");
        }
    }
}

#[test]
fn a_misshapen_input_held_before_start_is_rejected_at_start() {
    let mut rank = DirectAllreduce::new(DirectConfig {
        rank: Rank(0),
        size: 2,
        op: ReduceOp::Sum,
        op_id: OpId(1),
    });
    let mut out = Outbox::new();
    assert!(!rejected(&deliver(
        &mut rank,
        &mut out,
        1,
        input_header(1, 1),
        &[2.0, 3.0]
    )));
    rank.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::F64(&[1.0]),
        },
        &mut out,
    );
    assert!(rejected(out.events()));
    assert_eq!(
        rank.phase(),
        Phase::Running,
        "the input it needs never came"
    );
    assert_eq!(rank.status().counters.frames_rejected, 1);
}
