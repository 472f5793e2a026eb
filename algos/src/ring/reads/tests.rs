//! The read schedule on a model of N ranks whose reads take time: drawn interleavings must
//! count every rank's contribution exactly once at every rank, never read a block while its
//! owner writes it, and never read a vector its owner has handed back.

use proptest::prelude::*;

use super::*;
use crate::rng::SimRng;

/// A rank of the model: its schedule, its vector (per element, how many times each rank's
/// contribution is counted in it), and what it is doing.
struct ModelRank {
    ring: ReadRing,
    counts: Vec<Vec<u32>>,
    /// An outstanding read: the block, whether it combines, and the writes the source had
    /// seen when it started.
    reading: Option<(Range<usize>, bool, u64)>,
    /// Writes to this rank's vector so far, per element.
    writes: Vec<u64>,
    /// Handed back to the caller (who may overwrite it at once).
    returned: bool,
    /// The operation was abandoned here.
    stopped: bool,
}

enum Notice {
    Ready(u32),
    Released,
    Abandoned,
}

/// Runs N ranks to the end in an order drawn from `seed`; panics on any violation. With
/// `abandon`, one rank abandons the operation at a drawn turn and tells every peer, as a rank
/// that sees a mismatch or a failure does; an abandoning rank gives its vector back at once,
/// and a reader drops a block whose owner took it back before the read ended (the runtime's
/// lent word). Every rank that completes must count each contribution exactly once.
fn run_model(size: u32, len: usize, seed: u64, abandon: bool) {
    let mut rng = SimRng::new(seed);
    let n = size as usize;
    let mut ranks: Vec<ModelRank> = (0..size)
        .map(|r| ModelRank {
            ring: ReadRing::new(Rank(r), size, len),
            counts: (0..len)
                .map(|_| (0..n).map(|c| u32::from(c == r as usize)).collect())
                .collect(),
            reading: None,
            writes: vec![0; len],
            returned: false,
            stopped: false,
        })
        .collect();
    // Notices in flight: (to, notice); delivered in any order.
    let mut notices: Vec<(usize, Notice)> = Vec::new();
    let abandon_at =
        abandon.then(|| (rng.below(6 * n as u64 + 1), rng.below(size as u64) as usize));
    let written =
        |rank: &ModelRank, block: &Range<usize>| -> u64 { rank.writes[block.clone()].iter().sum() };
    for turn in 0..100_000u64 {
        if ranks.iter().all(|r| r.returned) {
            break;
        }
        if let Some((at, who)) = abandon_at {
            if turn == at && !ranks[who].returned && ranks[who].reading.is_none() {
                for to in (0..n).filter(|&to| to != who) {
                    notices.push((to, Notice::Abandoned));
                }
                stop(&mut ranks[who], &mut notices, len);
            }
        }
        // Draw among: deliver a notice, finish a read, or let a rank take its next action.
        let choice = rng.below(3);
        if choice == 0 && !notices.is_empty() {
            let pick = rng.below(notices.len() as u64) as usize;
            // A rank handles a notice between reads, never during one.
            if ranks[notices[pick].0].reading.is_some() {
                continue;
            }
            let (to, notice) = notices.swap_remove(pick);
            match notice {
                Notice::Ready(done) => ranks[to].ring.on_ready(done),
                Notice::Released => ranks[to].ring.on_released(),
                Notice::Abandoned => stop(&mut ranks[to], &mut notices, len),
            }
            continue;
        }
        let r = rng.below(size as u64) as usize;
        if ranks[r].returned {
            continue;
        }
        let left = (r + n - 1) % n;
        if choice == 1 {
            if let Some((block, combine, seen)) = ranks[r].reading.take() {
                if ranks[left].returned {
                    // Only an abandoning owner gives its vector back before its reader's
                    // Release; the reader drops the block and waits for the cause.
                    assert!(
                        abandon,
                        "rank {r} read the vector rank {left} had handed back"
                    );
                    continue;
                }
                assert_eq!(
                    written(&ranks[left], &block),
                    seen,
                    "rank {left} wrote block {block:?} while rank {r} read it"
                );
                for i in block {
                    let source = ranks[left].counts[i].clone();
                    let mine = &mut ranks[r].counts[i];
                    if combine {
                        mine.iter_mut().zip(&source).for_each(|(m, s)| *m += s);
                    } else {
                        *mine = source;
                    }
                    ranks[r].writes[i] += 1;
                }
                ranks[r].ring.read_done();
            }
            continue;
        }
        if ranks[r].reading.is_some() || ranks[r].stopped {
            continue;
        }
        match ranks[r].ring.next_action() {
            Some(ReadAction::Ready { to, done }) => {
                assert_eq!(to.0 as usize, (r + 1) % n);
                notices.push((to.0 as usize, Notice::Ready(done)));
            }
            Some(ReadAction::Release { to }) => {
                assert_eq!(to.0 as usize, left);
                notices.push((to.0 as usize, Notice::Released));
            }
            Some(ReadAction::Read {
                from,
                block,
                combine,
            }) => {
                assert_eq!(from.0 as usize, left);
                if ranks[left].returned {
                    assert!(abandon, "a read of a handed-back vector");
                    continue;
                }
                let seen = written(&ranks[left], &block);
                ranks[r].reading = Some((block, combine, seen));
            }
            None => {
                if ranks[r].ring.finished() {
                    for (i, element) in ranks[r].counts.iter().enumerate() {
                        assert!(
                            element.iter().all(|&c| c == 1),
                            "rank {r} completed with element {i} counting {element:?}"
                        );
                    }
                    give_back(&mut ranks[r], len);
                }
            }
        }
    }
    for (r, rank) in ranks.iter().enumerate() {
        assert!(rank.returned, "rank {r} never finished (deadlock)");
    }
}

/// The rank abandons the operation: it reads no more, releases its left neighbour, and gives
/// its vector back at once.
fn stop(rank: &mut ModelRank, notices: &mut Vec<(usize, Notice)>, len: usize) {
    if rank.returned || rank.stopped {
        return;
    }
    rank.stopped = true;
    rank.reading = None;
    if let Some(left) = rank.ring.stop() {
        notices.push((left.0 as usize, Notice::Released));
    }
    give_back(rank, len);
}

/// The caller takes its vector back and reuses it at once.
fn give_back(rank: &mut ModelRank, len: usize) {
    if rank.returned {
        return;
    }
    rank.returned = true;
    for i in 0..len {
        rank.counts[i].iter_mut().for_each(|c| *c = 99);
        rank.writes[i] += 1;
    }
}

/// Runs the model and reports each rank's final counts before the callers reuse them.
fn final_counts(size: u32, len: usize, seed: u64) -> Vec<Vec<Vec<u32>>> {
    // The same run without handing back: every rank's vector when its schedule finishes.
    let mut rng = SimRng::new(seed);
    let n = size as usize;
    let mut rings: Vec<ReadRing> = (0..size)
        .map(|r| ReadRing::new(Rank(r), size, len))
        .collect();
    let mut counts: Vec<Vec<Vec<u32>>> = (0..n)
        .map(|r| {
            (0..len)
                .map(|_| (0..n).map(|c| u32::from(c == r)).collect())
                .collect()
        })
        .collect();
    let mut notices: Vec<(usize, Notice)> = Vec::new();
    for _turn in 0..100_000 {
        if rings.iter().all(ReadRing::finished) && notices.is_empty() {
            break;
        }
        if !notices.is_empty() && rng.chance(0.5) {
            let (to, notice) = notices.swap_remove(rng.below(notices.len() as u64) as usize);
            match notice {
                Notice::Ready(done) => rings[to].on_ready(done),
                Notice::Released | Notice::Abandoned => rings[to].on_released(),
            }
            continue;
        }
        let r = rng.below(size as u64) as usize;
        match rings[r].next_action() {
            Some(ReadAction::Ready { to, done }) => {
                notices.push((to.0 as usize, Notice::Ready(done)))
            }
            Some(ReadAction::Release { to }) => notices.push((to.0 as usize, Notice::Released)),
            Some(ReadAction::Read { block, combine, .. }) => {
                let left = (r + n - 1) % n;
                for i in block {
                    let source = counts[left][i].clone();
                    let mine = &mut counts[r][i];
                    if combine {
                        mine.iter_mut().zip(&source).for_each(|(m, s)| *m += s);
                    } else {
                        *mine = source;
                    }
                }
                rings[r].read_done();
            }
            None => {}
        }
    }
    counts
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn reads_never_race_writes_or_a_returned_vector(size in 1u32..8, len in 0usize..24, seed: u64) {
        run_model(size, len, seed, false);
    }

    #[test]
    fn an_abandoned_operation_ends_everywhere_and_no_rank_completes_with_a_dropped_block(
        size in 1u32..8, len in 1usize..24, seed: u64
    ) {
        run_model(size, len, seed, true);
    }

    #[test]
    fn every_rank_counts_every_contribution_once(size in 1u32..8, len in 0usize..24, seed: u64) {
        let counts = final_counts(size, len, seed);
        for (r, vector) in counts.iter().enumerate() {
            for (i, element) in vector.iter().enumerate() {
                prop_assert!(
                    element.iter().all(|&c| c == 1),
                    "rank {} element {} counts {:?}", r, i, element
                );
            }
        }
    }
}

#[test]
fn two_ranks_read_one_half_each_way_and_release() {
    let mut ring = ReadRing::new(Rank(0), 2, 10);
    assert_eq!(
        ring.next_action(),
        Some(ReadAction::Ready {
            to: Rank(1),
            done: 0
        })
    );
    assert_eq!(
        ring.next_action(),
        None,
        "nothing to read before the peer is ready"
    );
    ring.on_ready(0);
    // Reduce-scatter: rank 0 combines block 0 (r − 2 mod 2), then gathers block 1.
    assert_eq!(
        ring.next_action(),
        Some(ReadAction::Read {
            from: Rank(1),
            block: 0..5,
            combine: true
        })
    );
    ring.read_done();
    assert_eq!(
        ring.next_action(),
        Some(ReadAction::Ready {
            to: Rank(1),
            done: 1
        })
    );
    assert_eq!(ring.next_action(), None);
    ring.on_ready(1);
    assert_eq!(
        ring.next_action(),
        Some(ReadAction::Read {
            from: Rank(1),
            block: 5..10,
            combine: false
        })
    );
    ring.read_done();
    assert_eq!(
        ring.next_action(),
        Some(ReadAction::Release { to: Rank(1) })
    );
    assert!(!ring.finished(), "the peer may still read this vector");
    ring.on_released();
    assert!(ring.finished());
}

#[test]
fn an_abandoning_rank_owes_its_left_neighbour_one_release_and_only_one() {
    let mut ring = ReadRing::new(Rank(2), 4, 40);
    assert!(matches!(ring.next_action(), Some(ReadAction::Ready { .. })));
    assert_eq!(
        ring.stop(),
        Some(Rank(1)),
        "the left neighbour may be waiting for it"
    );
    assert_eq!(ring.stop(), None);
    ring.on_ready(3);
    assert_eq!(ring.next_action(), None, "no read after the stop");
    // A rank that already released its left neighbour owes it nothing more.
    let mut single = ReadRing::new(Rank(0), 1, 8);
    assert_eq!(single.stop(), None);
    assert!(single.finished());
}
