//! The ring and recursive halving and doubling over callers' vectors, driven in process in
//! random delivery orders: the same result as a plain reduction at every size, length, segment
//! plan and order, and a vector of another length ends in the typed error at every rank.

use super::*;
use ftcoll_algos::rng::SimRng;

/// A frame in flight, copied into words so that its payload is read in place, aligned.
struct InFlight {
    from: Rank,
    to: Rank,
    words: Vec<u64>,
    len: usize,
}

/// Moves every queued send of `out` (from `from`) into `flight`, and keeps its events.
fn collect(from: Rank, out: &mut Outbox, flight: &mut Vec<InFlight>, events: &mut Vec<Event>) {
    for i in 0..out.send_count() {
        let (to, bytes) = out.send_at(i).unwrap();
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        flight.push(InFlight {
            from,
            to,
            words,
            len: bytes.len(),
        });
    }
    events.extend_from_slice(out.events());
    out.clear();
}

/// Runs the ranks over `vectors` to the end, delivering frames in an order drawn from `seed`
/// (any frame in flight next, so even one link reorders); returns every rank's events.
fn run<S: StepSchedule>(
    vectors: &mut [Vec<u32>],
    op: ReduceOp,
    plan: SegmentPlan,
    seed: u64,
) -> Vec<Vec<Event>> {
    let size = vectors.len() as u32;
    let mut ranks: Vec<InPlace<'_, u32, S>> = vectors
        .iter_mut()
        .enumerate()
        .map(|(r, v)| InPlace::new((Rank(r as u32), size, OpId(5), op), plan, v))
        .collect();
    let mut out = Outbox::new();
    let mut flight = Vec::new();
    let mut events = vec![Vec::new(); ranks.len()];
    let mut rng = SimRng::new(seed);
    for (r, rank) in ranks.iter_mut().enumerate() {
        let start = Input::Start {
            data: ValuesRef::Empty,
        };
        rank.handle(Time::ZERO, start, &mut out);
        collect(Rank(r as u32), &mut out, &mut flight, &mut events[r]);
    }
    // Every delivery consumes a frame, and the frames of a run are bounded by its segments.
    for _ in 0..1_000_000 {
        if flight.is_empty() {
            break;
        }
        let pick = rng.below(flight.len() as u64) as usize;
        let InFlight {
            from,
            to,
            words,
            len,
        } = flight.swap_remove(pick);
        let bytes = &bytemuck::cast_slice::<u64, u8>(&words)[..len];
        let frame = Frame::decode(bytes).unwrap();
        let to_index = to.index();
        ranks[to_index].handle(Time::ZERO, Input::Message { from, frame }, &mut out);
        collect(to, &mut out, &mut flight, &mut events[to_index]);
    }
    assert!(flight.is_empty(), "frames still in flight");
    events
}

fn completed(events: &[Event]) -> bool {
    events.iter().any(|e| matches!(e, Event::Completed))
}

fn rejected(events: &[Event]) -> bool {
    events.iter().any(|e| matches!(e, Event::Rejected { .. }))
}

/// Random sizes, lengths, plans, operators and delivery orders, each against a plain reduction.
fn reduces_in_place_exactly<S: StepSchedule>(seed: u64) {
    let mut rng = SimRng::new(seed);
    for case in 0..150u64 {
        let size = 1 + rng.below(9) as u32;
        // Lengths below, at and above N; segments from one element to the whole vector.
        let len = rng.below(4 * u64::from(size) + 60) as usize;
        let plan = SegmentPlan {
            segment_elems: 1 + rng.below(len as u64 + 2) as usize,
            window: 1 + rng.below(4) as u32,
        };
        let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::BitXor][case as usize % 3];
        let mut vectors: Vec<Vec<u32>> = (0..size)
            .map(|r| (0..len).map(|i| (i as u32 * 31) ^ (r * 7 + 1)).collect())
            .collect();
        let mut want = vectors[0].clone();
        for v in &vectors[1..] {
            u32::combine(&mut want, v, op).unwrap();
        }
        let events = run::<S>(&mut vectors, op, plan, case);
        for (r, (v, e)) in vectors.iter().zip(&events).enumerate() {
            assert!(completed(e) && !rejected(e), "case {case} rank {r}: {e:?}");
            assert_eq!(
                v, &want,
                "case {case} rank {r} ({size} ranks, {len}, {plan:?})"
            );
        }
    }
}

#[test]
fn the_ring_reduces_in_place_exactly_at_every_size_length_plan_and_order() {
    reduces_in_place_exactly::<RingSteps>(77);
}

#[test]
fn rhd_reduces_in_place_exactly_at_every_size_length_plan_and_order() {
    reduces_in_place_exactly::<RhdSteps>(78);
}

#[test]
fn rdb_reduces_in_place_exactly_at_every_size_length_plan_and_order() {
    reduces_in_place_exactly::<RdbSteps>(79);
}

#[test]
fn a_rank_with_another_length_gives_every_rank_the_typed_error() {
    a_mismatch_is_typed_everywhere::<RingSteps>(3);
    a_mismatch_is_typed_everywhere::<RhdSteps>(3);
    a_mismatch_is_typed_everywhere::<RhdSteps>(4);
    a_mismatch_is_typed_everywhere::<RdbSteps>(5);
}

fn a_mismatch_is_typed_everywhere<S: StepSchedule>(size: u32) {
    for odd in 0..size {
        let mut vectors: Vec<Vec<u32>> = (0..size)
            .map(|r| vec![1; if r == odd { 999 } else { 1000 }])
            .collect();
        let plan = SegmentPlan {
            segment_elems: 96,
            window: 2,
        };
        let events = run::<S>(&mut vectors, ReduceOp::Sum, plan, u64::from(odd));
        for (r, e) in events.iter().enumerate() {
            let typed = e.iter().any(|e| {
                matches!(
                    e,
                    Event::Aborted(AbortReason::ShapeMismatch { local, remote, .. })
                        if local.1 != remote.1
                )
            });
            assert!(typed && !completed(e), "odd {odd} rank {r}: {e:?}");
        }
    }
}

#[test]
fn a_failed_peer_aborts_and_a_flip_reaches_the_callers_vector() {
    let mut data = vec![1.0f64; 10];
    let plan = SegmentPlan {
        segment_elems: 4,
        window: 1,
    };
    let mut ring =
        InPlace::<f64, RingSteps>::new((Rank(0), 3, OpId(1), ReduceOp::Sum), plan, &mut data);
    let mut out = Outbox::new();
    let flip = LocalFault::FlipBit {
        var: StateVar::Value { elem: 7 },
        bit: 63,
    };
    ring.handle(Time::ZERO, Input::Fault(flip), &mut out);
    assert!(out.events().contains(&Event::FaultApplied(flip)));
    ring.handle(
        Time::ZERO,
        Input::Start {
            data: ValuesRef::Empty,
        },
        &mut out,
    );
    ring.handle(Time::ZERO, Input::PeerFailed { peer: Rank(2) }, &mut out);
    assert_eq!(ring.abort_reason(), Some(AbortReason::TooManyFailures));
    drop(ring);
    assert_eq!(data[7], -1.0);
}
