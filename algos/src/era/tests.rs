//! ERA on a tiny in-test network: FIFO delivery, failures injected between deliveries.

use std::collections::VecDeque;

use super::*;
use crate::protocol::{Outbox, Protocol};
use crate::rank::Rank;
use crate::rng::SimRng;
use crate::time::Time;
use crate::values::{ReduceOp, ValuesRef};
use crate::wire::Frame;

struct Net {
    ranks: Vec<EraRun>,
    alive: Vec<bool>,
    queue: VecDeque<(u32, u32, Vec<u8>)>,
    sent: u64,
    out: Outbox,
}

impl Net {
    fn new(n: u32, topology: EraTopology, agreements: u32) -> Net {
        let ranks = (0..n)
            .map(|me| {
                EraRun::new(EraRunConfig {
                    me,
                    n,
                    era: EraConfig {
                        topology,
                        ..EraConfig::default()
                    },
                    agreements,
                    op: ReduceOp::BitOr,
                    words: vec![1u64 << (me % 64)],
                    rebalance: true,
                })
            })
            .collect();
        Net {
            ranks,
            alive: vec![true; n as usize],
            queue: VecDeque::new(),
            sent: 0,
            out: Outbox::new(),
        }
    }

    fn flush(&mut self, from: u32) {
        for (to, bytes) in self.out.sends() {
            self.queue.push_back((from, to.0, bytes.to_vec()));
            self.sent += 1;
        }
        for event in self.out.events() {
            assert!(
                !matches!(event, crate::Event::Rejected { .. }),
                "rank {from} rejected a frame: {event:?}"
            );
        }
        self.out.clear();
    }

    fn start_all(&mut self) {
        for r in 0..self.ranks.len() {
            if self.alive[r] {
                self.ranks[r].handle(
                    Time(0),
                    crate::Input::Start {
                        data: ValuesRef::Empty,
                    },
                    &mut self.out,
                );
                self.flush(r as u32);
            }
        }
    }

    fn kill(&mut self, victim: u32) {
        self.alive[victim as usize] = false;
        for r in 0..self.ranks.len() {
            if self.alive[r] {
                self.ranks[r].handle(
                    Time(0),
                    crate::Input::PeerFailed { peer: Rank(victim) },
                    &mut self.out,
                );
                self.flush(r as u32);
            }
        }
    }

    /// Delivers one message; false when none is left.
    fn step(&mut self) -> bool {
        let Some((from, to, bytes)) = self.queue.pop_front() else {
            return false;
        };
        if self.alive[to as usize] {
            let frame = Frame::decode(&bytes).unwrap();
            self.ranks[to as usize].handle(
                Time(0),
                crate::Input::Message {
                    from: Rank(from),
                    frame,
                },
                &mut self.out,
            );
            self.flush(to);
        }
        true
    }

    fn run(&mut self) {
        let mut budget = 10_000_000;
        while self.step() {
            budget -= 1;
            assert!(budget > 0, "no quiescence");
        }
    }
}

#[test]
fn failure_free_agreement_sends_two_messages_per_non_root() {
    for n in [1u32, 2, 3, 7, 8, 33, 100] {
        for topology in [
            EraTopology::Flat(Shape::Binary),
            EraTopology::Flat(Shape::Star),
            EraTopology::Flat(Shape::String),
            EraTopology::from_name("bin/bin", 4).unwrap(),
            EraTopology::from_name("bin/star", 3).unwrap(),
        ] {
            let mut net = Net::new(n, topology, 1);
            net.start_all();
            net.run();
            assert_eq!(net.sent, 2 * u64::from(n - 1), "n={n} {topology:?}");
            let all: u64 = if n == 64 {
                u64::MAX
            } else {
                (1u64 << n.min(63)) - 1
            };
            for rank in &net.ranks {
                assert_eq!(rank.phase(), crate::Phase::Done);
                if n <= 63 {
                    assert_eq!(rank.decisions()[0].words, vec![all]);
                }
                assert!(rank.decisions()[0].failed.is_empty());
            }
        }
    }
}

#[test]
fn root_crash_after_deciding_for_some_keeps_the_decision() {
    // Rank 0 decides and its DOWN reaches only its first child before it dies.
    let mut net = Net::new(7, EraTopology::Flat(Shape::Binary), 1);
    net.start_all();
    while let Some((from, to, _)) = net.queue.front() {
        if *from == 0 && *to == 2 {
            break;
        }
        net.step();
    }
    net.queue.retain(|(from, _, _)| *from != 0);
    net.kill(0);
    net.run();
    let decided: Vec<_> = (1..7)
        .map(|r| net.ranks[r].decisions()[0].clone())
        .collect();
    assert!(decided.windows(2).all(|w| w[0] == w[1]), "{decided:?}");
    assert_eq!(decided[0].words, vec![0b111_1111], "rank 0 had contributed");
}

#[test]
fn random_crashes_never_break_agreement_or_participation() {
    let mut rng = SimRng::for_stream(11, 3);
    for case in 0..300 {
        let n = 2 + rng.below(30) as u32;
        let topology = [
            EraTopology::Flat(Shape::Binary),
            EraTopology::Flat(Shape::Star),
            EraTopology::Flat(Shape::String),
            EraTopology::from_name("bin/bin", 3).unwrap(),
        ][rng.below(4) as usize];
        let agreements = 1 + rng.below(3) as u32;
        let mut net = Net::new(n, topology, agreements);
        net.start_all();
        let kills = rng.below(u64::from(n) / 2 + 1) as u32;
        let mut victims: Vec<u32> = (0..n).collect();
        for _ in 0..kills {
            let steps = rng.below(3 * u64::from(n));
            for _ in 0..steps {
                net.step();
            }
            let i = rng.below(victims.len() as u64) as usize;
            let victim = victims.swap_remove(i);
            net.kill(victim);
        }
        net.run();
        let live: Vec<usize> = (0..n as usize).filter(|&r| net.alive[r]).collect();
        for a in 0..agreements as usize {
            let first = &net.ranks[live[0]].decisions()[a];
            for &r in &live {
                let mine = &net.ranks[r].decisions();
                assert!(
                    mine.len() == agreements as usize,
                    "case {case}: rank {r} did not finish"
                );
                assert_eq!(&mine[a], first, "case {case}: agreement {a} differs at {r}");
                assert_ne!(
                    mine[a].words[0] & (1 << r),
                    0,
                    "case {case}: {r} not included"
                );
            }
            let agreed_before = |r: u32| {
                net.ranks[live[0]].decisions()[..a]
                    .iter()
                    .any(|d| d.failed.contains(r))
            };
            for r in 0..n {
                if first.words[0] & (1 << r) == 0 {
                    assert!(
                        first.failed.contains(r) || agreed_before(r),
                        "case {case}: {r} missing from agreement {a}, not failed"
                    );
                }
                if first.failed.contains(r) {
                    assert!(
                        !net.alive[r as usize],
                        "case {case}: live {r} declared failed"
                    );
                }
            }
        }
        for &r in &live {
            assert_eq!(net.ranks[r].changed_decisions(), 0);
        }
    }
}

#[test]
fn decided_results_are_collected_and_revoke_reaches_everyone() {
    let mut net = Net::new(9, EraTopology::Flat(Shape::Binary), 6);
    net.start_all();
    net.run();
    for rank in &net.ranks {
        // The last agreement carries the floor of the ones before it.
        assert!(
            rank.era().live_agreements() <= 2,
            "{}",
            rank.era().live_agreements()
        );
        assert!(rank.era().gc_floor() >= 4);
    }
    let mut net = Net::new(16, EraTopology::Flat(Shape::Binary), 1);
    net.kill(3);
    net.kill(5);
    let mut out = Outbox::new();
    let mut era = net.ranks[7].era().clone();
    era.revoke(&mut out);
    net.out = out;
    net.flush(7);
    // Deliver revokes to fresh services standing in for the ranks.
    let mut services: Vec<Era> = (0..16)
        .map(|r| {
            let mut e = Era::new(r, 16, EraConfig::default());
            let mut o = Outbox::new();
            e.peer_failed(3, &mut o);
            e.peer_failed(5, &mut o);
            e
        })
        .collect();
    services[7] = era;
    while let Some((from, to, bytes)) = net.queue.pop_front() {
        if !net.alive[to as usize] {
            continue;
        }
        let frame = Frame::decode(&bytes).unwrap();
        let mut o = Outbox::new();
        services[to as usize]
            .handle_frame(Rank(from), &frame, &mut o)
            .unwrap();
        for (t, b) in o.sends() {
            net.queue.push_back((to, t.0, b.to_vec()));
        }
    }
    for (r, service) in services.iter().enumerate() {
        if net.alive[r] {
            assert!(service.is_revoked(), "rank {r}");
        }
    }
}
