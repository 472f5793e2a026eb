//! Recursive halving and doubling on its own and under the shell, delivered in random orders.

use super::*;
use crate::protocol::testing;
use crate::protocol::{SegmentPlan, Segmented, ShellConfig};
use crate::rng::SimRng;

fn config(rank: u32, size: u32, op: ReduceOp) -> RhdConfig {
    RhdConfig {
        rank: Rank(rank),
        size,
        op,
        op_id: OpId(5),
    }
}

fn ranks(size: u32, op: ReduceOp) -> Vec<Box<dyn Protocol>> {
    (0..size)
        .map(|r| Box::new(HalvingDoubling::new(config(r, size, op))) as Box<dyn Protocol>)
        .collect()
}

fn inputs(size: u32, len: usize) -> Vec<Values> {
    (0..size)
        .map(|r| {
            Values::U64(
                (0..len)
                    .map(|i| (i as u64 * 37) ^ u64::from(r * 11 + 3))
                    .collect(),
            )
        })
        .collect()
}

fn reduce(inputs: &[Values], op: ReduceOp) -> Values {
    crate::protocol::testing::reduce_all(inputs, op)
}

#[test]
fn every_size_and_length_reduces_exactly_in_any_order() {
    let mut rng = SimRng::new(23);
    for case in 0..200u64 {
        let size = 1 + rng.below(19) as u32;
        // Lengths below, at and above the power of two: some blocks are empty.
        let len = rng.below(3 * u64::from(size) + 50) as usize;
        let op = [ReduceOp::Sum, ReduceOp::Min, ReduceOp::BitOr][case as usize % 3];
        let data = inputs(size, len);
        let mut ranks = ranks(size, op);
        let traffic = testing::drive(&mut ranks, &data, case);
        assert!(!traffic.rejected, "case {case}: a frame was rejected");
        let want = reduce(&data, op);
        for (r, rank) in ranks.iter().enumerate() {
            assert_eq!(rank.phase(), Phase::Done, "case {case} rank {r}");
            assert_eq!(rank.result(), Some(want.as_ref()), "case {case} rank {r}");
        }
        // 2 log2 p frames per rank of the schedule, and two more per pair of the first 2r.
        let p = 1u32 << (31 - size.leading_zeros());
        let levels = p.trailing_zeros();
        let frames = p * 2 * levels + 2 * (size - p);
        assert_eq!(
            traffic.payloads.len() as u32,
            frames,
            "case {case} size {size}"
        );
    }
}

#[test]
fn floats_end_with_the_same_bits_at_every_rank() {
    for size in [3u32, 6, 7, 12] {
        let data: Vec<Values> = (0..size)
            .map(|r| {
                Values::F64(
                    (0..100)
                        .map(|i| 0.1 * f64::from(r + 1) + 1e-9 * i as f64)
                        .collect(),
                )
            })
            .collect();
        let mut ranks = ranks(size, ReduceOp::Sum);
        testing::drive(&mut ranks, &data, u64::from(size));
        let first = ranks[0].result().map(|v| v.to_owned_values());
        for rank in &ranks {
            assert_eq!(rank.result().map(|v| v.to_owned_values()), first);
        }
    }
}

#[test]
fn a_power_of_two_moves_two_p_minus_one_over_p_of_the_vector_per_rank() {
    let (size, len) = (8u32, 8 * 1000);
    let data = inputs(size, len);
    let mut ranks = ranks(size, ReduceOp::Sum);
    let traffic = testing::drive(&mut ranks, &data, 1);
    let values: usize = traffic.payloads.iter().sum();
    // Each rank sends 7/8 of the vector in each phase; 8 bytes per element, plus each frame's
    // small trailer (the difference is what the payload counts beyond the values).
    let floor = size as usize * 2 * 7 * 1000 * 8;
    assert!(values >= floor && values < floor + traffic.payloads.len() * 64);
}

#[test]
fn under_the_shell_segments_stay_exact() {
    for (size, len, seg) in [
        (2u32, 1000usize, 64usize),
        (5, 777, 50),
        (7, 3, 2),
        (12, 400, 33),
    ] {
        let data = inputs(size, len);
        let mut ranks: Vec<Box<dyn Protocol>> = (0..size)
            .map(|r| {
                let shell = ShellConfig {
                    rank: Rank(r),
                    size,
                    algo: Algorithm::Rhd,
                    op: OpId(5),
                    reduce: ReduceOp::Sum,
                    plan: SegmentPlan {
                        segment_elems: seg,
                        window: 3,
                    },
                    layout: crate::protocol::Layout::Contiguous,
                    attempt: 0,
                };
                Box::new(Segmented::new(shell, Box::new(allreduce_segment))) as Box<dyn Protocol>
            })
            .collect();
        let traffic = testing::drive(&mut ranks, &data, u64::from(size) + 9);
        assert!(!traffic.rejected);
        let mut want = Vec::new();
        reduce(&data, ReduceOp::Sum).push_as_f64(&mut want);
        for rank in &ranks {
            let mut got = Vec::new();
            rank.estimate(&mut got);
            assert_eq!(got, want, "size {size} len {len}");
        }
    }
}

#[test]
fn frames_from_the_wrong_partner_step_or_kind_are_rejected() {
    // Rank 1 of 4 (no extras): halving partner at step 1 is rank 3, at step 2 rank 0.
    let mut rank = HalvingDoubling::new(config(1, 4, ReduceOp::Sum));
    let mut out = Outbox::new();
    let data = [1u64; 8];
    rank.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::U64(&data),
        },
        &mut out,
    );
    out.clear();
    let deliver = |rank: &mut HalvingDoubling, from: u32, kind: u8, step: u32, n: usize| {
        let mut frames = Outbox::new();
        let header = FrameHeader::new(Algorithm::Rhd, kind, OpId(5), Rank(from), step);
        frames.send(Rank(1), header, ValuesRef::U64(&data[..n]));
        let (_, bytes) = frames.send_at(0).unwrap();
        let frame = Frame::decode(bytes).unwrap();
        let mut out = Outbox::new();
        rank.handle(
            Time::ZERO,
            Input::Message {
                from: Rank(from),
                frame,
            },
            &mut out,
        );
        out.events()
            .iter()
            .any(|e| matches!(e, Event::Rejected { .. }))
    };
    assert!(deliver(&mut rank, 2, KIND_HALVE, 1, 4), "wrong partner");
    assert!(deliver(&mut rank, 3, KIND_DOUBLE, 1, 4), "wrong kind");
    assert!(deliver(&mut rank, 3, KIND_HALVE, 9, 4), "step out of range");
    assert!(deliver(&mut rank, 3, KIND_HALVE, 1, 3), "short block");
    assert!(!deliver(&mut rank, 3, KIND_HALVE, 1, 4), "the right frame");
    assert!(deliver(&mut rank, 3, KIND_HALVE, 1, 4), "duplicate");
    assert_eq!(rank.next_step, 2);
}

#[test]
fn a_failed_peer_aborts() {
    let mut rank = HalvingDoubling::new(config(0, 3, ReduceOp::Sum));
    let mut out = Outbox::new();
    rank.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::F64(&[1.0; 9]),
        },
        &mut out,
    );
    rank.handle(Time::ZERO, Input::PeerFailed { peer: Rank(2) }, &mut out);
    assert_eq!(rank.phase(), Phase::Aborted);
    assert_eq!(rank.result(), None);
}

#[test]
fn the_pick_takes_it_only_at_powers_of_two_in_its_measured_windows() {
    use crate::direct::Placement::{Oversubscribed, OwnCores};
    assert!(prefer_rhd(4, 64 << 10, true, OwnCores));
    assert!(prefer_rhd(16, 16 << 20, true, OwnCores));
    assert!(!prefer_rhd(16, 32 << 20, true, OwnCores));
    assert!(
        !prefer_rhd(6, 64 << 10, true, OwnCores),
        "not a power of two"
    );
    assert!(
        !prefer_rhd(2, 64 << 10, true, OwnCores),
        "the ring's schedule at n = 2"
    );
    assert!(prefer_rhd(8, 8 << 10, false, Oversubscribed));
    assert!(prefer_rhd(8, (1 << 20) - 8, false, Oversubscribed));
    assert!(!prefer_rhd(8, 1 << 20, false, Oversubscribed));
    assert!(
        !prefer_rhd(8, 8 << 10, false, OwnCores),
        "not measured with a core per rank"
    );
}
