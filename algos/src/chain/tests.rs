//! The chain alone and under the shell, from every root, delivered in random orders.

use super::*;
use crate::protocol::{Layout, SegmentPlan, Segmented, ShellConfig};

/// Runs the ranks to the end in an order drawn from `seed`; no frame may be rejected.
fn drive(
    mut ranks: Vec<Box<dyn Protocol>>,
    inputs: &[Values],
    seed: u64,
) -> Vec<Box<dyn Protocol>> {
    let traffic = crate::protocol::testing::drive(&mut ranks, inputs, seed);
    assert!(!traffic.rejected, "a frame was rejected");
    ranks
}

fn inputs(size: u32, len: usize) -> Vec<Values> {
    (0..size)
        .map(|r| Values::I64((0..len).map(|i| i as i64 * 3 - i64::from(r)).collect()))
        .collect()
}

fn config(rank: u32, size: u32, root: u32, mode: ChainMode) -> ChainConfig {
    ChainConfig {
        rank: Rank(rank),
        size,
        root: Rank(root),
        op: ReduceOp::Sum,
        op_id: OpId(5),
        mode,
    }
}

fn expected(data: &[Values], root: u32, mode: ChainMode) -> Vec<f64> {
    let value = match mode {
        ChainMode::Bcast => data[root as usize].clone(),
        ChainMode::Reduce => {
            let mut acc = data[0].clone();
            data[1..]
                .iter()
                .for_each(|d| acc.combine(ReduceOp::Sum, d.as_ref()).unwrap());
            acc
        }
    };
    let mut want = Vec::new();
    value.push_as_f64(&mut want);
    want
}

fn check(ranks: &[Box<dyn Protocol>], want: &[f64], root: u32, mode: ChainMode, what: &str) {
    for (r, rank) in ranks.iter().enumerate() {
        assert_eq!(rank.phase(), Phase::Done, "{what} rank {r}");
        let gets = mode == ChainMode::Bcast || r as u32 == root;
        assert_eq!(rank.has_result(), gets, "{what} rank {r}");
        if gets {
            let mut got = Vec::new();
            rank.estimate(&mut got);
            assert_eq!(got, want, "{what} rank {r}");
        }
    }
}

#[test]
fn every_root_every_size_in_any_order() {
    for mode in [ChainMode::Bcast, ChainMode::Reduce] {
        for size in 1..=9u32 {
            for root in 0..size {
                let data = inputs(size, 5);
                let ranks = (0..size)
                    .map(|r| Box::new(Chain::new(config(r, size, root, mode))) as Box<dyn Protocol>)
                    .collect();
                let ranks = drive(ranks, &data, u64::from(size * 31 + root));
                let what = format!("{mode:?} size {size} root {root}");
                check(&ranks, &expected(&data, root, mode), root, mode, &what);
            }
        }
    }
}

#[test]
fn under_the_shell_segments_pipeline_down_and_up_the_chain() {
    for mode in [ChainMode::Bcast, ChainMode::Reduce] {
        for (size, len, chunk, root) in [
            (4u32, 100usize, 7usize, 2u32),
            (3, 10, 1, 0),
            (6, 64, 64, 5),
        ] {
            let data = inputs(size, len);
            let ranks = (0..size)
                .map(|r| {
                    let shell = ShellConfig {
                        rank: Rank(r),
                        size,
                        algo: mode.algo(),
                        op: OpId(5),
                        reduce: ReduceOp::Sum,
                        plan: SegmentPlan {
                            segment_elems: chunk,
                            window: 3,
                        },
                        layout: Layout::Contiguous,
                        attempt: 0,
                    };
                    Box::new(Segmented::new(
                        shell,
                        Box::new(move |s: &ShellConfig, _, _: Option<Chain>| {
                            Chain::new(ChainConfig {
                                rank: s.rank,
                                size: s.size,
                                root: Rank(root),
                                op: s.reduce,
                                op_id: s.op,
                                mode,
                            })
                        }),
                    )) as Box<dyn Protocol>
                })
                .collect();
            let ranks = drive(ranks, &data, 3);
            let what = format!("{mode:?} size {size} len {len} chunk {chunk}");
            check(&ranks, &expected(&data, root, mode), root, mode, &what);
        }
    }
}

#[test]
fn a_failed_peer_aborts() {
    let mut chain = Chain::new(config(1, 3, 0, ChainMode::Bcast));
    let mut out = Outbox::new();
    chain.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::F64(&[1.0]),
        },
        &mut out,
    );
    chain.handle(Time::ZERO, Input::PeerFailed { peer: Rank(0) }, &mut out);
    assert_eq!(chain.phase(), Phase::Aborted);
}
