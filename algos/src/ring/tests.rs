//! The ring on its own and under the shell, delivered in random orders.

use super::*;
use crate::protocol::{SegmentPlan, Segmented, ShellConfig};
use crate::rng::SimRng;
use crate::wire::Frame;

/// Runs the ranks to the end, delivering frames in an order drawn from `seed` (the ring must
/// cope with a transport that reorders); returns the ranks and every frame's length.
fn drive(
    mut ranks: Vec<Box<dyn Protocol>>,
    inputs: &[Values],
    seed: u64,
) -> (Vec<Box<dyn Protocol>>, Vec<usize>) {
    let mut rng = SimRng::new(seed);
    let mut queue: Vec<(Rank, Rank, Vec<u64>, usize)> = Vec::new();
    let mut lengths = Vec::new();
    let mut out = Outbox::new();
    let mut collect = |from: Rank, out: &mut Outbox, queue: &mut Vec<_>| {
        for i in 0..out.send_count() {
            let (to, words, len) = out.send_words_at(i).unwrap();
            lengths.push(len);
            queue.push((from, to, words.to_vec(), len));
        }
        assert!(
            !out.events()
                .iter()
                .any(|e| matches!(e, Event::Rejected { .. })),
            "{:?}",
            out.events()
        );
        out.clear();
    };
    for (i, rank) in ranks.iter_mut().enumerate() {
        rank.handle(
            Time::ZERO,
            Input::Start {
                data: inputs[i].as_ref(),
            },
            &mut out,
        );
        collect(Rank(i as u32), &mut out, &mut queue);
    }
    let mut guard = 0;
    while !queue.is_empty() {
        guard += 1;
        assert!(guard < 1_000_000, "runaway delivery");
        let (from, to, words, len) = queue.swap_remove(rng.below(queue.len() as u64) as usize);
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let frame = Frame::decode(&bytes[..len]).unwrap();
        ranks[to.index()].handle(Time::ZERO, Input::Message { from, frame }, &mut out);
        collect(to, &mut out, &mut queue);
    }
    (ranks, lengths)
}

fn config(rank: u32, size: u32, op: ReduceOp) -> RingConfig {
    RingConfig {
        rank: Rank(rank),
        size,
        op,
        op_id: OpId(3),
    }
}

fn inputs(size: u32, len: usize) -> Vec<Values> {
    (0..size)
        .map(|r| Values::U32((0..len).map(|i| (i as u32 * 31) ^ (r * 7 + 1)).collect()))
        .collect()
}

fn reduce(inputs: &[Values], op: ReduceOp) -> Values {
    let mut acc = inputs[0].clone();
    inputs[1..]
        .iter()
        .for_each(|v| acc.combine(op, v.as_ref()).unwrap());
    acc
}

#[test]
fn every_size_and_length_reduces_exactly_in_any_order() {
    let mut rng = SimRng::new(18);
    for case in 0..80u64 {
        let size = 1 + rng.below(12) as u32;
        // Lengths below, at and above N: some blocks are empty.
        let len = rng.below(3 * u64::from(size) + 40) as usize;
        let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::BitXor][case as usize % 3];
        let data = inputs(size, len);
        let ranks = (0..size)
            .map(|r| Box::new(RingAllreduce::new(config(r, size, op))) as Box<dyn Protocol>)
            .collect();
        let (ranks, lengths) = drive(ranks, &data, case);
        let want = reduce(&data, op);
        for (r, rank) in ranks.iter().enumerate() {
            assert_eq!(rank.result(), Some(want.as_ref()), "case {case} rank {r}");
        }
        // 2(N - 1) frames per rank, each at most one block.
        assert_eq!(lengths.len() as u32, 2 * size * size.saturating_sub(1));
        let block = len.div_ceil(size as usize);
        assert!(lengths
            .iter()
            .all(|&l| l <= crate::wire::HEADER_BYTES + 4 * block));
    }
}

#[test]
fn each_rank_moves_two_n_minus_one_over_n_of_the_vector() {
    let (size, len) = (8u32, 8 * 1000);
    let data = inputs(size, len);
    let ranks = (0..size)
        .map(|r| Box::new(RingAllreduce::new(config(r, size, ReduceOp::Sum))) as Box<dyn Protocol>)
        .collect();
    let (_, lengths) = drive(ranks, &data, 1);
    let payload: usize = lengths.iter().map(|l| l - crate::wire::HEADER_BYTES).sum();
    assert_eq!(payload, size as usize * 2 * 7 * 1000 * 4);
}

#[test]
fn under_the_shell_segments_pipeline_and_stay_exact() {
    for (size, len, seg) in [(2u32, 1000usize, 64usize), (5, 777, 50), (7, 3, 2)] {
        let data = inputs(size, len);
        let ranks = (0..size)
            .map(|r| {
                let shell = ShellConfig {
                    rank: Rank(r),
                    size,
                    algo: Algorithm::Ring,
                    op: OpId(3),
                    reduce: ReduceOp::Sum,
                    plan: SegmentPlan {
                        segment_elems: seg,
                        window: 4,
                    },
                };
                Box::new(Segmented::new(
                    shell,
                    Box::new(|s: &ShellConfig, _, spare: Option<RingAllreduce>| {
                        let c = RingConfig {
                            rank: s.rank,
                            size: s.size,
                            op: s.reduce,
                            op_id: s.op,
                        };
                        match spare {
                            Some(mut p) => {
                                p.restart(c);
                                p
                            }
                            None => RingAllreduce::new(c),
                        }
                    }),
                )) as Box<dyn Protocol>
            })
            .collect();
        let (ranks, _) = drive(ranks, &data, u64::from(size));
        let want = reduce(&data, ReduceOp::Sum);
        let mut want_f64 = Vec::new();
        want.push_as_f64(&mut want_f64);
        for rank in &ranks {
            let mut got = Vec::new();
            rank.estimate(&mut got);
            assert_eq!(got, want_f64, "size {size} len {len}");
        }
    }
}

#[test]
fn a_failed_peer_aborts() {
    let mut ring = RingAllreduce::new(config(0, 3, ReduceOp::Sum));
    let mut out = Outbox::new();
    ring.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::F64(&[1.0; 9]),
        },
        &mut out,
    );
    ring.handle(Time::ZERO, Input::PeerFailed { peer: Rank(2) }, &mut out);
    assert_eq!(ring.phase(), Phase::Aborted);
    assert_eq!(ring.result(), None);
}
