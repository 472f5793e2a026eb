//! The shell over recursive doubling and the direct exchange, driven by a small in-memory
//! network that delivers frames in a seeded random order.

use super::*;
use crate::direct::{DirectAllreduce, DirectConfig};
use crate::rdb::{RdbConfig, RecursiveDoubling};
use crate::rng::SimRng as Rng;
use crate::wire::Frame;

fn shell_config(rank: u32, size: u32, algo: Algorithm, plan: SegmentPlan) -> ShellConfig {
    ShellConfig {
        rank: Rank(rank),
        size,
        algo,
        op: OpId(1),
        reduce: ReduceOp::Sum,
        plan,
        layout: Layout::Contiguous,
        attempt: 0,
    }
}

fn rdb_shell(rank: u32, size: u32, plan: SegmentPlan) -> Box<dyn Protocol> {
    Box::new(Segmented::new(
        shell_config(rank, size, Algorithm::Rdb, plan),
        Box::new(
            move |shell: &ShellConfig, _, spare: Option<RecursiveDoubling>| {
                let config = RdbConfig::exact(shell.rank, shell.size, shell.reduce, shell.op);
                match spare {
                    Some(mut p) => {
                        p.restart(config);
                        p
                    }
                    None => RecursiveDoubling::new(config),
                }
            },
        ),
    ))
}

fn direct_shell(rank: u32, size: u32, plan: SegmentPlan) -> Box<dyn Protocol> {
    let config = DirectConfig {
        rank: Rank(rank),
        size,
        op: ReduceOp::Sum,
        op_id: OpId(1),
    };
    Box::new(Segmented::new(
        shell_config(rank, size, Algorithm::Direct, plan),
        Box::new(move |_, _, _| DirectAllreduce::new(config)),
    ))
}

/// Runs every rank to the end, delivering queued frames in a random order drawn from `seed`;
/// returns the ranks and the largest payload seen.
fn drive(
    mut ranks: Vec<Box<dyn Protocol>>,
    inputs: &[Values],
    seed: u64,
) -> (Vec<Box<dyn Protocol>>, usize) {
    let traffic = crate::protocol::testing::drive(&mut ranks, inputs, seed);
    let largest = traffic.payloads.into_iter().max().unwrap_or(0);
    (ranks, largest)
}

/// A finished rank's result as f64 (the shell's multi-segment result is read segment by
/// segment; its estimate concatenates them).
fn as_f64(rank: &dyn Protocol) -> Vec<f64> {
    let mut out = Vec::new();
    rank.estimate(&mut out);
    out
}

fn int_inputs(size: u32, len: usize) -> Vec<Values> {
    (0..size)
        .map(|r| {
            Values::I64(
                (0..len)
                    .map(|i| (i as i64) * 7 - i64::from(r) * 3)
                    .collect(),
            )
        })
        .collect()
}

fn column_sums(inputs: &[Values]) -> Values {
    let mut acc = inputs[0].clone();
    for other in &inputs[1..] {
        acc.combine(ReduceOp::Sum, other.as_ref()).unwrap();
    }
    acc
}

#[test]
fn any_length_any_segment_size_any_order_is_exact() {
    let mut rng = Rng::new(25);
    for case in 0..60u64 {
        let size = 1 + rng.below(9) as u32;
        let len = rng.below(300) as usize;
        let plan = SegmentPlan {
            segment_elems: 1 + rng.below(40) as usize,
            window: 1 + rng.below(5) as u32,
        };
        let inputs = int_inputs(size, len);
        let want = column_sums(&inputs);
        let mut want_f64 = Vec::new();
        want.push_as_f64(&mut want_f64);
        let make = if case % 2 == 0 {
            rdb_shell
        } else {
            direct_shell
        };
        let ranks = (0..size).map(|r| make(r, size, plan)).collect();
        let (ranks, largest) = drive(ranks, &inputs, case);
        let bound = 8 * plan.segment_elems;
        assert!(largest <= bound, "case {case}: payload of {largest} bytes");
        for (r, rank) in ranks.iter().enumerate() {
            assert_eq!(rank.phase(), Phase::Done, "case {case} rank {r}");
            assert_eq!(as_f64(&**rank), want_f64, "case {case} rank {r}");
        }
    }
}

#[test]
fn a_rank_with_another_length_gives_every_rank_the_typed_error() {
    for (size, odd) in [(2u32, 1u32), (4, 3), (5, 0), (8, 6)] {
        let plan = SegmentPlan {
            segment_elems: 16,
            window: 2,
        };
        let mut inputs = int_inputs(size, 100);
        inputs[odd as usize] = Values::I64(vec![1; 101]);
        let ranks = (0..size).map(|r| rdb_shell(r, size, plan)).collect();
        let (ranks, _) = drive(ranks, &inputs, u64::from(size));
        for (r, rank) in ranks.iter().enumerate() {
            assert_eq!(rank.phase(), Phase::Aborted, "size {size} rank {r}");
            assert_eq!(rank.result(), None);
        }
    }
}

#[test]
fn a_rank_with_another_type_is_a_mismatch_not_a_garbage_sum() {
    let plan = SegmentPlan {
        segment_elems: 8,
        window: 1,
    };
    let mut inputs = int_inputs(4, 20);
    inputs[2] = Values::U64(vec![5; 20]);
    let ranks: Vec<Box<dyn Protocol>> = (0..4).map(|r| direct_shell(r, 4, plan)).collect();
    let (ranks, _) = drive(ranks, &inputs, 7);
    assert!(ranks.iter().all(|r| r.phase() == Phase::Aborted));
}

#[test]
fn the_window_bounds_what_one_rank_starts_alone() {
    let plan = SegmentPlan {
        segment_elems: 4,
        window: 3,
    };
    let mut shell = rdb_shell(0, 2, plan);
    let mut out = Outbox::new();
    let data = Values::F64(vec![1.0; 400]);
    shell.handle(
        Time::ZERO,
        Input::Start {
            data: data.as_ref(),
        },
        &mut out,
    );
    // Two ranks: one exchange per segment, so one frame per started segment.
    assert_eq!(out.send_count(), 3);
    for i in 0..3 {
        let (_, bytes) = out.send_at(i).unwrap();
        let frame = Frame::decode(bytes).unwrap();
        assert_eq!(frame.header.segment, i as u32);
        assert_eq!(frame.header.stamp().len, 400);
    }
}

#[test]
fn typed_results_come_back_segment_by_segment_without_a_copy_of_the_whole() {
    let plan = SegmentPlan {
        segment_elems: 7,
        window: 2,
    };
    let size = 3;
    let inputs = int_inputs(size, 50);
    let want = column_sums(&inputs);
    let shells: Vec<Box<dyn Protocol>> = (0..size).map(|r| rdb_shell(r, size, plan)).collect();
    let (shells, _) = drive(shells, &inputs, 9);
    assert!(shells.iter().all(|s| s.phase() == Phase::Done));
    // The typed view: a shell of our own, run beside the others' replay, is what callers read.
    let mut ours = Segmented::new(
        shell_config(0, 1, Algorithm::Rdb, plan),
        Box::new(|s: &ShellConfig, _, _: Option<RecursiveDoubling>| {
            RecursiveDoubling::new(RdbConfig::exact(s.rank, s.size, s.reduce, s.op))
        }),
    );
    let mut out = Outbox::new();
    ours.handle(
        Time::ZERO,
        Input::Start {
            data: want.as_ref(),
        },
        &mut out,
    );
    let mut joined = Values::I64(Vec::new());
    for (_, part) in ours
        .results()
        .expect("a one-rank allreduce is done at once")
    {
        joined.extend_from(part).unwrap();
    }
    assert_eq!(joined, want);
    assert_eq!(ours.segments(), 8);
}

#[test]
fn a_failure_mid_operation_aborts_every_segment_and_leaves_no_result() {
    let plan = SegmentPlan {
        segment_elems: 3,
        window: 2,
    };
    let mut shell = rdb_shell(0, 2, plan);
    let mut out = Outbox::new();
    let data = Values::F64(vec![1.0; 10]);
    shell.handle(
        Time::ZERO,
        Input::Start {
            data: data.as_ref(),
        },
        &mut out,
    );
    assert_eq!(shell.phase(), Phase::Running);
    out.clear();
    shell.handle(Time::ZERO, Input::PeerFailed { peer: Rank(1) }, &mut out);
    assert_eq!(shell.phase(), Phase::Aborted);
    assert_eq!(shell.result(), None);
    let aborts = out
        .events()
        .iter()
        .filter(|e| matches!(e, Event::Aborted(_)))
        .count();
    assert_eq!(
        aborts, 1,
        "one abort for the operation, not one per segment"
    );
    assert!(!out.events().iter().any(|e| matches!(e, Event::Completed)));
}

#[test]
fn a_value_flip_reaches_the_segment_that_holds_the_element() {
    let plan = SegmentPlan {
        segment_elems: 4,
        window: 8,
    };
    // Two ranks, so every segment waits for its partner and stays running.
    let mut shell = rdb_shell(0, 2, plan);
    let mut out = Outbox::new();
    let data = Values::F64(vec![0.0; 16]);
    shell.handle(
        Time::ZERO,
        Input::Start {
            data: data.as_ref(),
        },
        &mut out,
    );
    let flip = LocalFault::FlipBit {
        var: StateVar::Value { elem: 13 },
        bit: 62,
    };
    out.clear();
    shell.handle(Time::ZERO, Input::Fault(flip), &mut out);
    let applied = LocalFault::FlipBit {
        var: StateVar::Value { elem: 1 },
        bit: 62,
    };
    assert_eq!(out.events(), &[Event::FaultApplied(applied)]);
    let mut estimate = Vec::new();
    shell.estimate(&mut estimate);
    let hit: Vec<usize> = (0..16).filter(|&i| estimate[i] != 0.0).collect();
    assert_eq!(hit, [13], "{estimate:?}");
    // Past the vector: nothing changes.
    out.clear();
    let beyond = LocalFault::FlipBit {
        var: StateVar::Value { elem: 99 },
        bit: 1,
    };
    shell.handle(Time::ZERO, Input::Fault(beyond), &mut out);
    assert!(matches!(out.events(), [Event::FaultIgnored(_)]));
}

#[test]
fn a_shell_says_before_its_first_segment_whether_its_protocol_reads_the_clock() {
    let plan = SegmentPlan {
        segment_elems: 4,
        window: 2,
    };
    // Drivers ask before the start: recursive doubling and the direct exchange never read
    // the clock, so the latency path reads none for them.
    assert!(!rdb_shell(0, 4, plan).reads_clock());
    assert!(!direct_shell(0, 4, plan).reads_clock());
    // A protocol that does not say stays on the timed path.
    let corrected = Segmented::new(
        shell_config(0, 4, Algorithm::CorrectedAllreduce, SegmentPlan::WHOLE),
        Box::new(|_: &ShellConfig, _, _| {
            crate::corrected::CorrectedAllreduce::new(crate::corrected::AllreduceConfig::new(
                Rank(0),
                4,
                ReduceOp::Sum,
                OpId(1),
                1,
            ))
        }),
    );
    assert!(corrected.reads_clock());
}
