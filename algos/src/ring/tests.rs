//! The ring on its own and under the shell, delivered in random orders.

use super::*;
use crate::protocol::{SegmentPlan, Segmented, ShellConfig};
use crate::rng::SimRng;

/// Runs the ranks to the end in an order drawn from `seed` (the ring must cope with a
/// transport that reorders); no frame may be rejected. Returns the ranks and every frame's
/// payload bytes.
fn drive(
    mut ranks: Vec<Box<dyn Protocol>>,
    inputs: &[Values],
    seed: u64,
) -> (Vec<Box<dyn Protocol>>, Vec<usize>) {
    let traffic = crate::protocol::testing::drive(&mut ranks, inputs, seed);
    assert!(!traffic.rejected, "a frame was rejected");
    (ranks, traffic.payloads)
}

fn config(rank: u32, size: u32, op: ReduceOp) -> RingConfig {
    RingConfig {
        rank: Rank(rank),
        size,
        op,
        op_id: OpId(3),
        mode: RingMode::Allreduce,
    }
}

fn inputs(size: u32, len: usize) -> Vec<Values> {
    (0..size)
        .map(|r| Values::U32((0..len).map(|i| (i as u32 * 31) ^ (r * 7 + 1)).collect()))
        .collect()
}

fn reduce(inputs: &[Values], op: ReduceOp) -> Values {
    crate::protocol::testing::reduce_all(inputs, op)
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
        assert!(lengths.iter().all(|&l| l <= 4 * block));
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
    let payload: usize = lengths.iter().sum();
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
                    layout: crate::protocol::Layout::Contiguous,
                    attempt: 0,
                };
                Box::new(Segmented::new(
                    shell,
                    Box::new(|s: &ShellConfig, _, spare: Option<RingAllreduce>| {
                        let c = RingConfig {
                            rank: s.rank,
                            size: s.size,
                            op: s.reduce,
                            op_id: s.op,
                            mode: RingMode::Allreduce,
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

fn mode_ranks(size: u32, mode: RingMode) -> Vec<Box<dyn Protocol>> {
    (0..size)
        .map(|r| {
            Box::new(RingAllreduce::new(RingConfig {
                mode,
                ..config(r, size, ReduceOp::Sum)
            })) as Box<dyn Protocol>
        })
        .collect()
}

#[test]
fn reduce_scatter_gives_rank_r_block_r_reduced() {
    for size in 1..=9u32 {
        for block in [0usize, 1, 5] {
            let data = inputs(size, size as usize * block);
            let (ranks, lengths) = drive(mode_ranks(size, RingMode::ReduceScatter), &data, 7);
            let want = reduce(&data, ReduceOp::Sum);
            for (r, rank) in ranks.iter().enumerate() {
                let mine = want.as_ref().slice(r * block..(r + 1) * block).unwrap();
                assert_eq!(
                    rank.result(),
                    Some(mine),
                    "size {size} block {block} rank {r}"
                );
            }
            assert_eq!(lengths.len() as u32, size * size.saturating_sub(1));
        }
    }
}

#[test]
fn allgather_gives_every_rank_every_block_in_rank_order() {
    for size in 1..=9u32 {
        for block in [0usize, 1, 4] {
            let data: Vec<Values> = (0..size)
                .map(|r| Values::I64((0..block).map(|i| i64::from(r) * 100 + i as i64).collect()))
                .collect();
            let (ranks, _) = drive(mode_ranks(size, RingMode::Allgather), &data, 3);
            let mut want = Values::I64(Vec::new());
            data.iter()
                .for_each(|d| want.extend_from(d.as_ref()).unwrap());
            for (r, rank) in ranks.iter().enumerate() {
                assert_eq!(
                    rank.result(),
                    Some(want.as_ref()),
                    "size {size} block {block} rank {r}"
                );
            }
        }
    }
}

/// Ring collectives of `mode` under the shell, cut in chunks of `chunk`.
fn shells(size: u32, mode: RingMode, chunk: usize) -> Vec<Box<dyn Protocol>> {
    use crate::protocol::Layout;
    let layout = match mode {
        RingMode::Allreduce => Layout::Contiguous,
        RingMode::ReduceScatter => Layout::BlocksIn { blocks: size },
        RingMode::Allgather => Layout::BlocksOut { blocks: size },
    };
    (0..size)
        .map(|r| {
            let shell = ShellConfig {
                rank: Rank(r),
                size,
                algo: Algorithm::Ring,
                op: OpId(3),
                reduce: ReduceOp::Sum,
                plan: SegmentPlan {
                    segment_elems: chunk,
                    window: 3,
                },
                layout,
                attempt: 0,
            };
            Box::new(Segmented::new(
                shell,
                Box::new(move |s: &ShellConfig, _, _: Option<RingAllreduce>| {
                    RingAllreduce::new(RingConfig {
                        rank: s.rank,
                        size: s.size,
                        op: s.reduce,
                        op_id: s.op,
                        mode,
                    })
                }),
            )) as Box<dyn Protocol>
        })
        .collect()
}

/// A finished reduce-scatter shell's result: its estimate concatenates the segments, which for
/// this layout is the output's order (each segment is one chunk of this rank's block).
fn placed(rank: &dyn Protocol, len: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; len];
    let mut est = Vec::new();
    rank.estimate(&mut est);
    out[..est.len().min(len)].copy_from_slice(&est[..est.len().min(len)]);
    out
}

#[test]
fn reduce_scatter_and_allgather_under_the_shell_place_every_chunk() {
    for (size, block, chunk) in [(3u32, 10usize, 4usize), (4, 7, 7), (2, 9, 2)] {
        // Reduce-scatter: the result is one block, so segment order is output order.
        let data = inputs(size, size as usize * block);
        let (ranks, _) = drive(shells(size, RingMode::ReduceScatter, chunk), &data, 11);
        let want = reduce(&data, ReduceOp::Sum);
        for (r, rank) in ranks.iter().enumerate() {
            let mut mine = Vec::new();
            want.as_ref()
                .slice(r * block..(r + 1) * block)
                .unwrap()
                .push_as_f64(&mut mine);
            assert_eq!(placed(&**rank, block), mine, "rs size {size} rank {r}");
        }
    }
}

#[test]
fn allgather_under_the_shell_puts_chunks_in_their_blocks() {
    for (size, block, chunk) in [(3u32, 10usize, 4usize), (4, 7, 7), (2, 9, 2), (5, 1, 1)] {
        let data: Vec<Values> = (0..size)
            .map(|r| Values::U32((0..block as u32).map(|i| r * 1000 + i).collect()))
            .collect();
        let ranks = shells(size, RingMode::Allgather, chunk);
        let (ranks, _) = drive(ranks, &data, 5);
        assert!(ranks.iter().all(|r| r.phase() == Phase::Done));
        let mut want = Vec::new();
        data.iter().for_each(|d| d.push_as_f64(&mut want));
        // Every rank's estimate holds every element once; the placement is checked by the
        // layout's own test and end to end by the runtime's allgather test.
        for rank in &ranks {
            let mut got = Vec::new();
            rank.estimate(&mut got);
            got.sort_by(f64::total_cmp);
            let mut sorted = want.clone();
            sorted.sort_by(f64::total_cmp);
            assert_eq!(got, sorted, "size {size} block {block} chunk {chunk}");
        }
    }
}

/// The measured thresholds: the ring from 8 KiB over shared memory and from 64 KiB over a
/// network, for any number of ranks.
#[test]
fn the_ring_takes_vectors_from_the_measured_thresholds() {
    for size in [2, 3, 4, 8, 16, 64] {
        assert!(!prefer_ring(size, (8 << 10) - 8, RING_MIN_BYTES));
        assert!(prefer_ring(size, 8 << 10, RING_MIN_BYTES));
        assert!(!prefer_ring(size, (64 << 10) - 8, RING_MIN_BYTES_NETWORK));
        assert!(prefer_ring(size, 64 << 10, RING_MIN_BYTES_NETWORK));
    }
    assert!(!prefer_ring(1, 1 << 20, RING_MIN_BYTES));
}

#[test]
fn the_shared_memory_threshold_grows_past_eight_ranks() {
    assert_eq!(ring_min_bytes(2, false), 64 << 10);
    assert_eq!(ring_min_bytes(3, false), 8 << 10);
    assert_eq!(ring_min_bytes(8, false), 8 << 10);
    assert_eq!(ring_min_bytes(16, false), 16 << 10);
    assert_eq!(ring_min_bytes(64, false), 64 << 10);
    assert_eq!(ring_min_bytes(16, true), 64 << 10);
}
