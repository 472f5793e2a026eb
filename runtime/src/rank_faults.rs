//! Scripted faults as one rank of a real job applies them to itself.
//!
//! The launcher applies faults that come from outside a process (kill at a time, kill a node,
//! SIGSTOP); a rank applies those that act on its own messages and state: message bit flips,
//! loss, cut links, slowness, state flips, a kill at the start of operation K, start spread.
//! Real runs count wall-clock time, so times need a unit (`at=50ms`); `at=0` means "from the
//! start".

use std::time::Duration;

use ftcoll_algos::protocol::{LocalFault, StateVar};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::Rank;

use crate::faults::{
    FaultError, FaultSpec, FaultTime, FlipTarget, KillTime, MessageSelector, Spread,
};

/// Wall-clock time of a real-run fault: a unit is required except for 0.
pub fn wall_time(at: FaultTime) -> Result<Duration, FaultError> {
    match at {
        FaultTime::Nanos(ns) => Ok(Duration::from_nanos(ns)),
        FaultTime::Steps(0) => Ok(Duration::ZERO),
        FaultTime::Steps(_) => Err(FaultError::StepsOnRealRanks { field: "at" }),
    }
}

/// A pending message flip.
#[derive(Clone, Copy, Debug)]
struct PendingFlip {
    which: MessageSelector,
    target: FlipTarget,
}

/// What one rank does to itself.
#[derive(Debug)]
pub struct RankFaults {
    me: u32,
    flips: Vec<PendingFlip>,
    sent: u64,
    drop_rate: f64,
    /// `flip-rate`: probability per sent message of corrupting one of this rank's flows.
    flip_rate: f64,
    /// Messages sent whose flip-rate draw is still to be made.
    undrawn: u64,
    /// Peers whose link to this rank is cut, from a time on.
    cut: Vec<(u32, Duration)>,
    /// Extra delay per handled input, and from when.
    slow: Option<(Duration, Duration)>,
    /// State flips and when.
    state_flips: Vec<(Duration, LocalFault)>,
    /// Operation at whose start this rank dies.
    /// The operation at whose start this rank dies, and how long after the start.
    kill_at_op: Option<(u64, Duration)>,
    /// Delay before the first operation.
    start_delay: Duration,
    rng: SimRng,
    /// Flips applied so far.
    pub flips_applied: u64,
    /// Messages dropped so far.
    pub dropped: u64,
}

/// Per-unit of slowness: each handled input takes this much longer per factor step.
const SLOW_UNIT: Duration = Duration::from_micros(100);

impl RankFaults {
    /// The faults of `specs` that concern rank `me`, for a job seeded by `seed`.
    pub fn for_rank(specs: &[FaultSpec], me: Rank, seed: u64) -> Result<RankFaults, FaultError> {
        let mut faults = RankFaults {
            me: me.0,
            flips: Vec::new(),
            sent: 0,
            drop_rate: 0.0,
            flip_rate: 0.0,
            undrawn: 0,
            cut: Vec::new(),
            slow: None,
            state_flips: Vec::new(),
            kill_at_op: None,
            start_delay: Duration::ZERO,
            rng: SimRng::for_stream(seed, 0xFA17_0000 ^ u64::from(me.0)),
            flips_applied: 0,
            dropped: 0,
        };
        for spec in specs {
            faults.add(spec, Duration::ZERO, 0)?;
        }
        Ok(faults)
    }

    /// Adds a fault that arrived while the job runs (from the console): its times count from
    /// `now` (the rank's time since it started) and a message selector `nth=K` counts from the
    /// next message. Faults on other ranks are ignored.
    pub fn inject(&mut self, spec: &FaultSpec, now: Duration) -> Result<(), FaultError> {
        self.add(spec, now, self.sent)
    }

    /// Adds `spec` if it concerns this rank, its times shifted by `offset` and message indices
    /// by `first_message`.
    fn add(
        &mut self,
        spec: &FaultSpec,
        offset: Duration,
        first_message: u64,
    ) -> Result<(), FaultError> {
        let me = Rank(self.me);
        let at = |t: FaultTime| wall_time(t).map(|d| d + offset);
        match *spec {
            FaultSpec::Kill {
                rank,
                at: KillTime::Operation(op),
            } if rank == me => self.kill_at_op = Some((op, Duration::ZERO)),
            FaultSpec::Kill {
                rank,
                at: KillTime::DuringOperation { op, after },
            } if rank == me => self.kill_at_op = Some((op, wall_time(after)?)),
            FaultSpec::FlipMessage {
                rank,
                which,
                target,
            } if rank == me => {
                let which = match which {
                    MessageSelector::Nth(k) => MessageSelector::Nth(first_message + k),
                    MessageSelector::AtOrAfter(t) => {
                        MessageSelector::AtOrAfter(FaultTime::Nanos(at(t)?.as_nanos() as u64))
                    }
                };
                self.flips.push(PendingFlip { which, target });
            }
            FaultSpec::FlipState {
                rank,
                var,
                bit,
                at: t,
            } if rank == me => {
                self.state_flips
                    .push((at(t)?, LocalFault::FlipBit { var, bit }));
            }
            FaultSpec::FlipRate { rank, rate } if rank.is_none_or(|r| r == me) => {
                self.flip_rate = rate
            }
            FaultSpec::Drop { rank, rate } if rank.is_none_or(|r| r == me) => self.drop_rate = rate,
            FaultSpec::Cut { a, b, at: t } if a == me || b == me => {
                let peer = if a == me { b } else { a };
                self.cut.push((peer.0, at(t)?));
            }
            FaultSpec::Slow {
                rank,
                factor,
                at: t,
            } if rank == me => {
                self.slow = Some((SLOW_UNIT * factor.saturating_sub(1), at(t)?));
            }
            FaultSpec::Spread(spread) => {
                self.start_delay = match spread {
                    Spread::Uniform(width) => {
                        let width = wall_time(width)?;
                        Duration::from_nanos(self.rng.below(width.as_nanos() as u64 + 1))
                    }
                    Spread::Normal(sigma) => {
                        let sigma = wall_time(sigma)?.as_nanos() as f64;
                        Duration::from_nanos((self.rng.normal() * sigma).abs() as u64)
                    }
                }
            }
            // Validate the units of faults the launcher applies, so errors show up early.
            FaultSpec::Kill {
                at: KillTime::At(t),
                ..
            }
            | FaultSpec::KillNode { at: t, .. }
            | FaultSpec::Stop { at: t, .. } => {
                wall_time(t)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether this rank dies when operation `op` starts.
    pub fn dies_at_op(&self, op: u64) -> bool {
        self.kill_at_op == Some((op, Duration::ZERO))
    }

    /// How long after operation `op` starts this rank dies, if it dies during it.
    pub fn dies_during_op(&self, op: u64) -> Option<Duration> {
        self.kill_at_op
            .and_then(|(at, after)| (at == op).then_some(after))
    }

    /// How long to wait before the first operation.
    pub fn start_delay(&self) -> Duration {
        self.start_delay
    }

    /// Extra time each handled input takes at `elapsed` since the rank started.
    pub fn slowdown(&self, elapsed: Duration) -> Option<Duration> {
        self.slow
            .and_then(|(delay, from)| (elapsed >= from && !delay.is_zero()).then_some(delay))
    }

    /// Whether a slowdown is planned (it starts at a time).
    pub fn has_slowdown(&self) -> bool {
        self.slow.is_some()
    }

    /// Whether outgoing messages depend on the time (cuts or flips that start later).
    pub fn time_sensitive(&self) -> bool {
        self.cut.iter().any(|&(_, from)| !from.is_zero())
            || self
                .flips
                .iter()
                .any(|f| matches!(f.which, MessageSelector::AtOrAfter(_)))
    }

    /// Whether state flips remain planned.
    pub fn has_state_flips(&self) -> bool {
        !self.state_flips.is_empty() || self.flip_rate > 0.0
    }

    /// State flips due by `elapsed`, removed from the plan.
    pub fn due_state_flips(&mut self, elapsed: Duration) -> Vec<LocalFault> {
        let (due, later): (Vec<_>, Vec<_>) = self
            .state_flips
            .drain(..)
            .partition(|(at, _)| *at <= elapsed);
        self.state_flips = later;
        let mut due: Vec<LocalFault> = due.into_iter().map(|(_, f)| f).collect();
        // One draw per message sent since the last call (bounded by what was sent).
        for _ in 0..std::mem::take(&mut self.undrawn) {
            if self.rng.chance(self.flip_rate) {
                let var = StateVar::AnyFlow {
                    pick: self.rng.next_u64() as u32,
                    elem: self.rng.next_u64() as u32,
                };
                due.push(LocalFault::FlipBit {
                    var,
                    bit: self.rng.below(64) as u32,
                });
            }
        }
        due
    }

    /// Decides the fate of one outgoing frame: `None` to lose it; otherwise the frame, flipped in
    /// `scratch` if a flip applies.
    pub fn outgoing<'a>(
        &mut self,
        to: Rank,
        frame: &'a [u8],
        elapsed: Duration,
        scratch: &'a mut Vec<u8>,
    ) -> Option<&'a [u8]> {
        let index = self.sent;
        self.sent += 1;
        if self.flip_rate > 0.0 {
            self.undrawn += 1;
        }
        if self
            .cut
            .iter()
            .any(|&(peer, from)| peer == to.0 && elapsed >= from)
        {
            self.dropped += 1;
            return None;
        }
        if self.drop_rate > 0.0 && self.rng.chance(self.drop_rate) {
            self.dropped += 1;
            return None;
        }
        let pos = self.flips.iter().position(|f| match f.which {
            MessageSelector::Nth(nth) => nth == index,
            MessageSelector::AtOrAfter(at) => wall_time(at).is_ok_and(|t| elapsed >= t),
        });
        let Some(pos) = pos else {
            return Some(frame);
        };
        let flip = self.flips.remove(pos);
        scratch.clear();
        scratch.extend_from_slice(frame);
        let applied = flip.target.apply(scratch);
        if applied {
            self.flips_applied += 1;
            tracing::info!(
                rank = self.me,
                to = to.0,
                index,
                "flipped a bit of an outgoing message"
            );
        }
        Some(scratch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small frame whose only payload value is 2.0.
    fn rdb_frame() -> Vec<u8> {
        ftcoll_algos::wire::encode(
            ftcoll_algos::FrameHeader::new(
                ftcoll_algos::Algorithm::Rdb,
                2,
                ftcoll_algos::OpId(1),
                Rank(0),
                1,
            ),
            ftcoll_algos::ValuesRef::F64(&[2.0]),
        )
    }

    /// The first payload value of `frame`.
    fn first_value(frame: &[u8]) -> f64 {
        let at = ftcoll_algos::wire::header_len_of(frame);
        bytemuck::pod_read_unaligned(&frame[at..at + 8])
    }

    fn kill_at(rank: u32, at: FaultTime) -> Vec<FaultSpec> {
        vec![FaultSpec::Kill {
            rank: Rank(rank),
            at: KillTime::At(at),
        }]
    }

    fn flip_first_value(rank: u32, which: MessageSelector) -> FaultSpec {
        FaultSpec::FlipMessage {
            rank: Rank(rank),
            which,
            target: FlipTarget::Payload { elem: 0, bit: 63 },
        }
    }

    #[test]
    fn plain_times_are_refused_for_real_runs() {
        let at = |t| RankFaults::for_rank(&kill_at(1, t), Rank(0), 1);
        assert!(at(FaultTime::Steps(50)).is_err());
        assert!(at(FaultTime::Nanos(50_000_000)).is_ok());
        assert!(at(FaultTime::Steps(0)).is_ok());
    }

    #[test]
    fn message_faults_apply_to_their_rank_only() {
        let plan = [
            flip_first_value(0, MessageSelector::Nth(1)),
            FaultSpec::Cut {
                a: Rank(0),
                b: Rank(2),
                at: FaultTime::Steps(0),
            },
            FaultSpec::Kill {
                rank: Rank(0),
                at: KillTime::Operation(3),
            },
        ];
        let mut mine = RankFaults::for_rank(&plan, Rank(0), 1).unwrap();
        let other = RankFaults::for_rank(&plan, Rank(1), 1).unwrap();
        assert!(mine.dies_at_op(3) && !other.dies_at_op(3));
        let frame = rdb_frame();
        let mut scratch = Vec::new();
        assert_eq!(
            mine.outgoing(Rank(1), &frame, Duration::ZERO, &mut scratch),
            Some(&frame[..])
        );
        let flipped = mine
            .outgoing(Rank(1), &frame, Duration::ZERO, &mut scratch)
            .unwrap()
            .to_vec();
        assert_eq!(first_value(&flipped), -2.0);
        assert_eq!(
            mine.outgoing(Rank(2), &frame, Duration::ZERO, &mut scratch),
            None,
            "cut link"
        );
    }

    #[test]
    fn injected_faults_count_from_their_arrival() {
        let mut faults = RankFaults::for_rank(&[], Rank(0), 1).unwrap();
        let frame = rdb_frame();
        let mut scratch = Vec::new();
        for _ in 0..5 {
            assert!(faults
                .outgoing(Rank(1), &frame, Duration::ZERO, &mut scratch)
                .is_some());
        }
        // "The next message", though five went out before it arrived.
        let now = Duration::from_millis(40);
        faults
            .inject(&flip_first_value(0, MessageSelector::Nth(0)), now)
            .unwrap();
        faults
            .inject(
                &FaultSpec::Cut {
                    a: Rank(0),
                    b: Rank(2),
                    at: FaultTime::Nanos(10_000_000),
                },
                now,
            )
            .unwrap();
        faults
            .inject(
                &FaultSpec::Drop {
                    rank: Some(Rank(3)),
                    rate: 1.0,
                },
                now,
            )
            .unwrap();
        let flipped = faults
            .outgoing(Rank(1), &frame, now, &mut scratch)
            .unwrap()
            .to_vec();
        assert_eq!(first_value(&flipped), -2.0);
        assert!(
            faults
                .outgoing(Rank(2), &frame, now, &mut scratch)
                .is_some(),
            "the cut starts 10 ms after arrival"
        );
        assert!(faults
            .outgoing(
                Rank(2),
                &frame,
                now + Duration::from_millis(10),
                &mut scratch
            )
            .is_none());
        assert!(
            faults
                .outgoing(Rank(1), &frame, now, &mut scratch)
                .is_some(),
            "another rank's loss is not ours"
        );
    }
}
