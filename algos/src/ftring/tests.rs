//! The fault-tolerant ring on an in-memory network that reorders frames and kills ranks: every
//! survivor returns the same vector, the exact reduction over a set of ranks that holds every
//! survivor (property tests over seeds), and the planted bug that returns before the agreement
//! is caught.

use super::*;
use crate::rng::SimRng;
use crate::values::Values;

const LEN: usize = 23;

fn config(rank: u32, size: u32, commit: CommitRule) -> FtRingConfig {
    FtRingConfig {
        rank: Rank(rank),
        size,
        op: ReduceOp::Sum,
        op_id: OpId(9),
        // Blocks of at most 2 elements: a vector of 23 is several segments at every size.
        frame_elems: 2,
        window: 3,
        era: EraConfig::default(),
        linger: Duration(1_000),
        commit,
    }
}

fn input(rank: u32) -> Values {
    // Distinct powers of two per rank: the sum names its contributors.
    Values::U64((0..LEN as u64).map(|i| (1u64 << rank) * (i + 1)).collect())
}

/// A live rank: its result and its contributors, where it returned.
type Survivor = (u32, Option<Vec<u64>>, Option<Vec<u32>>);

/// What one run left: the live ranks' results (`None`: no result) and who contributed.
struct Run {
    results: Vec<Survivor>,
    aborts: Vec<Option<AbortReason>>,
}

/// Runs `size` ranks to the end; `kills` ranks die after a number of deliveries drawn from the
/// seed, and each survivor hears of each death at its own later moment (the detector's delay).
fn run(size: u32, kills: u32, seed: u64, commit: CommitRule) -> Run {
    run_on(size, kills, seed, commit, input)
}

fn run_on(size: u32, kills: u32, seed: u64, commit: CommitRule, input: fn(u32) -> Values) -> Run {
    let make = |r| FtRing::new(config(r, size, commit));
    run_with(size, kills, seed, make, input)
}

/// [`run`] over attempts in corrected trees tolerating `tolerate` failures each.
fn run_corrected(size: u32, kills: u32, seed: u64, commit: CommitRule, tolerate: u32) -> Run {
    let make = |r| {
        let correction = crate::corrected::Correction::Checked;
        FtRing::corrected(config(r, size, commit), tolerate, correction)
    };
    run_with(size, kills, seed, make, input)
}

fn run_with<R: AttemptRing>(
    size: u32,
    kills: u32,
    seed: u64,
    make: impl Fn(u32) -> FtRing<R>,
    input: fn(u32) -> Values,
) -> Run {
    let mut rng = SimRng::new(seed);
    let mut ranks: Vec<FtRing<R>> = (0..size).map(make).collect();
    let mut alive = vec![true; size as usize];
    let mut queue: Vec<(Rank, Rank, Vec<u64>, usize)> = Vec::new();
    // (deliveries, event): a death, or a notice of one to a rank.
    let mut deaths: Vec<(u64, u32)> = Vec::new();
    while deaths.len() < kills as usize {
        let victim = rng.below(u64::from(size)) as u32;
        if !deaths.iter().any(|(_, r)| *r == victim) {
            deaths.push((rng.below(40 * u64::from(size)), victim));
        }
    }
    let mut notices: Vec<(u64, u32, u32)> = Vec::new();
    let mut out = Outbox::new();
    let collect = |from: Rank, out: &mut Outbox, queue: &mut Vec<(Rank, Rank, Vec<u64>, usize)>| {
        for i in 0..out.send_count() {
            let (to, words, len) = out.send_words_at(i).expect("a queued send");
            queue.push((from, to, words.to_vec(), len));
        }
        out.clear();
    };
    for r in 0..size {
        let data = input(r);
        ranks[r as usize].handle(
            Time(0),
            Input::Start {
                data: data.as_ref(),
            },
            &mut out,
        );
        collect(Rank(r), &mut out, &mut queue);
    }
    let mut step = 0u64;
    // Each pass delivers a frame, kills a rank or delivers a notice; all three run out.
    loop {
        step += 1;
        assert!(step < 2_000_000, "runaway run");
        if let Some(i) = deaths.iter().position(|(at, _)| *at <= step) {
            let (_, victim) = deaths.swap_remove(i);
            alive[victim as usize] = false;
            // Frames from the dead rank in flight may or may not arrive.
            queue.retain(|(from, _, _, _)| from.0 != victim || rng.chance(0.5));
            for r in 0..size {
                if r != victim {
                    notices.push((step + rng.below(30), r, victim));
                }
            }
            continue;
        }
        if let Some(i) = notices.iter().position(|(at, _, _)| *at <= step) {
            let (_, to, dead) = notices.swap_remove(i);
            if alive[to as usize] {
                let input = Input::PeerFailed { peer: Rank(dead) };
                ranks[to as usize].handle(Time(step), input, &mut out);
                collect(Rank(to), &mut out, &mut queue);
            }
            continue;
        }
        if queue.is_empty() {
            if deaths.is_empty() && notices.is_empty() {
                break;
            }
            continue;
        }
        let pick = rng.below(queue.len() as u64) as usize;
        let (from, to, words, len) = queue.swap_remove(pick);
        if !alive[to.index()] {
            continue;
        }
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let frame = Frame::decode(&bytes[..len]).expect("frames the protocols encoded decode");
        ranks[to.index()].handle(Time(step), Input::Message { from, frame }, &mut out);
        collect(to, &mut out, &mut queue);
    }
    let results = (0..size)
        .filter(|r| alive[*r as usize])
        .map(|r| {
            let rank = &ranks[r as usize];
            let result = rank.results().map(|pieces| {
                let mut whole = vec![0u64; LEN];
                for (at, piece) in pieces {
                    let ValuesRef::U64(piece) = piece else {
                        panic!("u64 in, u64 out")
                    };
                    whole[at..at + piece.len()].copy_from_slice(piece);
                }
                whole
            });
            (r, result, rank.contributors().map(<[u32]>::to_vec))
        })
        .collect();
    let aborts = ranks.iter().map(FtRing::abort_reason).collect();
    Run { results, aborts }
}

/// Checks the survivors' semantics; returns what went wrong.
fn violation(run: &Run) -> Option<String> {
    let mut first: Option<&Vec<u64>> = None;
    for (r, result, contributors) in &run.results {
        let (Some(result), Some(contributors)) = (result, contributors) else {
            return Some(format!("live rank {r} returned no result"));
        };
        if !contributors.contains(r) {
            return Some(format!("rank {r}'s own input is missing"));
        }
        let mask: u64 = contributors.iter().map(|c| 1u64 << c).sum();
        let want: Vec<u64> = (0..LEN as u64).map(|i| mask * (i + 1)).collect();
        if *result != want {
            return Some(format!("rank {r}: not the sum over {contributors:?}"));
        }
        match first {
            Some(first) if first != result => {
                return Some(format!("rank {r} returned another vector than a peer"))
            }
            _ => first = Some(result),
        }
    }
    None
}

#[test]
fn without_failures_every_rank_returns_the_whole_sum_in_one_attempt() {
    for size in 1..=9 {
        for seed in 0..4 {
            let run = run(size, 0, seed, CommitRule::Agreed);
            assert_eq!(violation(&run), None, "size {size} seed {seed}");
            for (_, _, contributors) in &run.results {
                assert_eq!(contributors.as_ref().map(Vec::len), Some(size as usize));
            }
        }
    }
}

#[test]
fn survivors_agree_on_an_exact_result_under_random_crashes() {
    let mut rng = SimRng::new(26);
    for seed in 0..1000 {
        let size = 2 + rng.below(9) as u32;
        let kills = 1 + rng.below(u64::from(size - 1)) as u32;
        let run = run(size, kills, seed, CommitRule::Agreed);
        assert_eq!(
            violation(&run),
            None,
            "size {size} kills {kills} seed {seed}"
        );
    }
}

#[test]
fn the_planted_early_return_is_caught() {
    // Returning when the local ring completes, before the agreement: some survivor then keeps
    // a result that counts a rank the others retried without.
    let mut rng = SimRng::new(27);
    let caught = (0..400).any(|seed| {
        let size = 3 + rng.below(6) as u32;
        let run = run(
            size,
            1 + rng.below(2) as u32,
            seed,
            CommitRule::LocalCompletion,
        );
        violation(&run).is_some()
    });
    assert!(caught, "the checker missed the planted bug");
}

#[test]
fn a_shape_mismatch_ends_everywhere_in_a_typed_error_naming_a_rank_of_the_other_shape() {
    fn uneven(rank: u32) -> Values {
        match rank {
            2 => Values::U64(vec![1; LEN + 1]),
            _ => input(rank),
        }
    }
    for seed in 0..20 {
        let run = run_on(4, 0, seed, CommitRule::Agreed, uneven);
        let reasons: Vec<_> = run
            .aborts
            .iter()
            .map(|a| match a {
                Some(AbortReason::ShapeMismatch { peer, .. }) => Some(*peer),
                _ => None,
            })
            .collect();
        // Every rank names a rank of the other shape: the odd one, or (at the odd one) another.
        for (r, named) in reasons.iter().enumerate() {
            let named = named.unwrap_or_else(|| panic!("seed {seed}: rank {r} has no error"));
            assert_eq!(
                named == Rank(2),
                r != 2,
                "seed {seed}: rank {r} named {named:?}"
            );
        }
    }
}

#[test]
fn corrected_attempts_return_the_whole_sum_without_failures() {
    for size in 1..=9 {
        for seed in 0..4 {
            let run = run_corrected(size, 0, seed, CommitRule::Agreed, 1 + (seed % 2) as u32);
            assert_eq!(violation(&run), None, "size {size} seed {seed}");
            for (_, _, contributors) in &run.results {
                assert_eq!(contributors.as_ref().map(Vec::len), Some(size as usize));
            }
        }
    }
}

#[test]
fn corrected_attempts_agree_on_an_exact_result_under_random_crashes() {
    let mut rng = SimRng::new(126);
    for seed in 0..1000 {
        let size = 2 + rng.below(9) as u32;
        let kills = 1 + rng.below(u64::from(size - 1)) as u32;
        let tolerate = 1 + rng.below(3) as u32;
        let run = run_corrected(size, kills, seed, CommitRule::Agreed, tolerate);
        assert_eq!(
            violation(&run),
            None,
            "size {size} kills {kills} tolerate {tolerate} seed {seed}"
        );
    }
}

#[test]
fn corrected_attempts_that_mix_segments_are_caught() {
    // Returning an attempt whose segments count a rank that died in some and not in others.
    let mut rng = SimRng::new(127);
    let caught = (0..400).any(|seed| {
        let size = 3 + rng.below(6) as u32;
        let run = run_corrected(size, 1, seed, CommitRule::MixedSegments, 1);
        violation(&run).is_some()
    });
    assert!(caught, "the checker missed the planted bug");
}
