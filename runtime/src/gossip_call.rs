//! Gossip reductions (000, 003) on real ranks: [`Communicator::gossip`].
//!
//! Ranks push on a wall-clock period and stop by the local stopping rule
//! ([`ftcoll_algos::gossip::stop`]), the only way a real rank can tell it is accurate enough. A
//! rank that stops keeps answering the pushes of ranks still running for a while (its linger
//! time), so that they can finish too. Ranks the launcher reported dead are handed to the
//! algorithm as failure notices right after the start, so flows to them are dropped at once.
//!
//! A link fails without a transport error when it drops frames (a cut): a flow rule, which
//! tolerates link failures, then hears nothing from that neighbour. A link watch declares a
//! neighbour's link failed after a silence of many push gaps and fences it, as the launcher
//! fences a silent rank: no frame crosses it again, so the neighbour, no longer pushed to,
//! declares the same link failed too, and both ends drop the flow over it (003 Sec. II-C).
//! Until then the mass pushed over the cut is lost, and the rest of the network can settle
//! without it: a rank with a link silent while many frames came over its others holds its
//! stopping rule back ([`Gossip::hold_stop`]) and so, through the quiet age it sends, every
//! rank it reaches.

use std::time::Duration;

use ftcoll_algos::gossip::Gossip;
use ftcoll_algos::protocol::{Detail, Input, Outbox, Phase, Protocol, Wrapper};
use ftcoll_algos::topology::TopologyKind;
use ftcoll_algos::{Rank, ReduceOp, Time};

use crate::comm::{CommError, Communicator, Outcome};
use crate::job::{Algorithm, GossipOptions, JobSpec};

/// How to run one gossip reduction.
#[derive(Clone, Debug, PartialEq)]
pub struct GossipCall {
    /// Which gossip algorithm (`ps` .. `hpflc`).
    pub algo: Algorithm,
    /// The kind of topology, built on the communicator's size at each call; `None`: the job
    /// default (a hypercube for a power of two, else full).
    pub topology: Option<TopologyKind>,
    /// Accuracy target of the stopping rule.
    pub eps: Option<f64>,
    /// Bound on pushes.
    pub steps: Option<u32>,
    /// Time between pushes.
    pub period: Duration,
    /// Schedule, precision and checksum options.
    pub options: GossipOptions,
    /// Seed of partner draws and permutations (the same at every rank).
    pub seed: u64,
}

/// The engine in the chosen precision, plus the failures known before the start.
enum Engine {
    Single(Gossip<f32>),
    Double(Gossip<f64>),
}

struct GossipRun {
    engine: Engine,
    known_dead: Vec<Rank>,
    /// The neighbours' links, watched where the rule tolerates link failures.
    links: Option<LinkWatch>,
}

/// What a rank knows of one neighbour's link.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Link {
    /// No rank has been heard from yet: the neighbours may not have entered the operation
    /// (the previous one ended unevenly, or a start-skew fault holds them), so no silence
    /// counts.
    Waiting,
    /// Last heard from `at` (or, if never, when this rank first heard from any neighbour),
    /// when this rank had received `frames` frames in all.
    Heard {
        /// When.
        at: Time,
        /// The watch's frame count then.
        frames: u64,
    },
    /// Failed: its rank, or the link, declared so.
    Failed,
}

/// When each neighbour was last heard from; a link silent for `silence` is declared failed.
/// The silence is counted from the first frame this rank gets from any neighbour, which shows
/// that the job runs: a link cut from the start is still found, and a rank that started
/// before its neighbours were wired up does not take them for cut.
///
/// A link is *suspect* (this rank holds its stopping rule) once this rank has received
/// `suspect_frames` frames over its other links since it last heard over that one. Frames,
/// not time: on a loaded machine a neighbour's silences of 200-300 ms were common with a 2 ms
/// period (64 ranks on two busy cores), and a time limit that short held the whole network
/// until the push budget ran out; a rank that is itself descheduled receives nothing either.
#[derive(Clone)]
struct LinkWatch {
    heard: Vec<(Rank, Link)>,
    /// Frames received over live links so far.
    frames: u64,
    /// Frames over other links after which a silent link is suspect.
    suspect_frames: u64,
    /// Silence after which a link is declared failed.
    silence: ftcoll_algos::Duration,
}

impl LinkWatch {
    fn slot(&mut self, peer: Rank) -> Option<&mut Link> {
        self.heard
            .iter_mut()
            .find(|(rank, _)| *rank == peer)
            .map(|(_, link)| link)
    }

    /// Whether frames from `peer` are still taken (not over a link declared failed).
    fn open(&mut self, peer: Rank) -> bool {
        self.slot(peer).is_none_or(|link| *link != Link::Failed)
    }

    /// A frame from `peer` arrived at `now`: the first one starts every neighbour's clock. A
    /// link declared failed stays so (the algorithm has settled it).
    fn heard_from(&mut self, peer: Rank, now: Time) {
        let frames = self.frames;
        for (_, link) in &mut self.heard {
            if *link == Link::Waiting {
                *link = Link::Heard { at: now, frames };
            }
        }
        self.frames += 1;
        let frames = self.frames;
        if let Some(link) = self.slot(peer).filter(|link| **link != Link::Failed) {
            *link = Link::Heard { at: now, frames };
        }
    }

    fn failed(&mut self, peer: Rank) {
        if let Some(link) = self.slot(peer) {
            *link = Link::Failed;
        }
    }

    /// Whether some live link has been silent while `suspect_frames` came over the others.
    fn any_suspect(&self) -> bool {
        self.heard.iter().any(|(_, link)| {
            matches!(*link, Link::Heard { frames, .. } if self.frames - frames >= self.suspect_frames)
        })
    }

    /// The neighbours silent for longer than the limit at `now`, marked failed.
    fn expired(&mut self, now: Time, failed: &mut Vec<Rank>) {
        for (peer, link) in &mut self.heard {
            if matches!(*link, Link::Heard { at, .. } if now.since(at) > self.silence) {
                *link = Link::Failed;
                failed.push(*peer);
            }
        }
    }
}

/// Runs whole-vector (one segment): the shell's defaults.
impl ftcoll_algos::protocol::SegmentProtocol for GossipRun {}

impl Wrapper for GossipRun {
    type Inner = dyn Protocol + 'static;

    fn inner(&self) -> &Self::Inner {
        match &self.engine {
            Engine::Single(g) => g,
            Engine::Double(g) => g,
        }
    }

    fn inner_mut(&mut self) -> &mut Self::Inner {
        match &mut self.engine {
            Engine::Single(g) => g,
            Engine::Double(g) => g,
        }
    }

    fn wrap_handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        let starting = matches!(input, Input::Start { .. });
        if let Some(links) = self.links.as_mut() {
            match &input {
                // A fenced link delivers nothing, also what was in flight when it was declared.
                Input::Message { from, .. } if !links.open(*from) => return,
                Input::Message { from, .. } => links.heard_from(*from, now),
                Input::PeerFailed { peer } => links.failed(*peer),
                // A push is due: a suspect link keeps the stopping rule from holding at it.
                Input::Timeout if links.any_suspect() => match &mut self.engine {
                    Engine::Single(g) => g.hold_stop(),
                    Engine::Double(g) => g.hold_stop(),
                },
                _ => {}
            }
        }
        self.inner_mut().handle(now, input, out);
        if starting {
            for peer in std::mem::take(&mut self.known_dead) {
                if let Some(links) = self.links.as_mut() {
                    links.failed(peer);
                }
                self.inner_mut()
                    .handle(now, Input::PeerFailed { peer }, out);
            }
        }
        self.declare_silent_links(now, out);
    }
}

/// Least linger of a finished rank after the last push it answered, in periods.
const LINGER_PERIODS: u64 = 200;
/// A neighbour pushes to a given rank about once per `degree` periods, and answers its pushes:
/// a link silent for this many such gaps (within the bounds below) is taken for failed.
const SILENT_GAPS: u64 = 16;
/// Bounds of a link's silence limit, in periods: long enough for a few pushes each way on a
/// sparse graph, short enough that a finished rank lingers past it on a dense one.
const SILENT_PERIODS: (u64, u64) = (64, 160);
/// A link silent while this many gaps' worth of frames came over the others is suspect (see
/// [`LinkWatch`]).
const SUSPECT_GAPS: u64 = 24;
/// Least silence limit, however short the period: a rank descheduled for a while on a busy
/// node is not a failed link (100 ms was too short for 16 ranks over libfabric's TCP provider
/// on two busy cores).
const MIN_SILENCE_NS: u64 = 1_000_000_000;

impl GossipRun {
    /// Declares failed every link silent too long while this rank still runs (a finished rank
    /// only answers pushes, and its neighbours judge the silence).
    fn declare_silent_links(&mut self, now: Time, out: &mut Outbox) {
        if self.inner().phase() != Phase::Running {
            return;
        }
        let Some(links) = self.links.as_mut() else {
            return;
        };
        let mut failed = Vec::new();
        links.expired(now, &mut failed);
        for peer in failed {
            tracing::info!(
                peer = peer.0,
                "no frame over the link for its silence limit: declared failed"
            );
            self.inner_mut()
                .handle(now, Input::LinkFailed { peer }, out);
        }
    }
}

impl Communicator {
    /// Reduces `data` with a gossip algorithm: on return `data` holds this rank's estimate of
    /// the survivors' sum or average, accurate to the call's eps by the stopping rule. Fails
    /// with [`CommError::Unsettled`] when the push budget ran out first; `data` then holds the
    /// best estimate reached.
    pub fn gossip(
        &mut self,
        data: &mut [f64],
        op: ReduceOp,
        call: &GossipCall,
    ) -> Result<Outcome, CommError> {
        let size = self.size();
        let mut spec = JobSpec::new(call.algo, size);
        spec.op = op;
        spec.eps = call.eps;
        spec.steps = call.steps;
        spec.input_len = data.len();
        spec.gossip = call.options;
        spec.gossip.stop_rule = true;
        spec.topology = match call.topology {
            Some(kind) => Some(
                kind.build(size)
                    .map_err(|e| CommError::Config(e.to_string()))?,
            ),
            None => None,
        };
        spec.validate()
            .map_err(|e| CommError::Config(e.to_string()))?;
        let period = u64::try_from(call.period.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut config = spec
            .gossip_config(Rank(self.rank()), self.next_op_id(), call.seed, period)
            .map_err(|e| CommError::Config(e.to_string()))?;
        // A rank still running pushes to a given neighbour about once per `degree` periods; a
        // finished rank stays several such gaps after the last push it answered.
        let degree = u64::from(config.topology.degree(Rank(self.rank())));
        let silence = period
            .saturating_mul((SILENT_GAPS * degree).clamp(SILENT_PERIODS.0, SILENT_PERIODS.1))
            .max(MIN_SILENCE_NS);
        // Between two frames of one live neighbour come about `degree - 1` frames of the
        // others; many times that is rare on a live link (below 1e-11 on a hypercube), and a
        // hold holds the whole network back, so it must be.
        let suspect_frames = SUSPECT_GAPS * degree.max(2);
        // A finished rank outlasts its running neighbours' silence limit, so that a rank still
        // pushing to it never takes its departure for a failed link.
        let linger = period
            .saturating_mul(LINGER_PERIODS.max(4 * degree))
            .max(2 * silence);
        config.linger = ftcoll_algos::Duration(linger);
        let links = call
            .algo
            .descriptor()
            .tolerates
            .link_failures
            .then(|| LinkWatch {
                heard: config
                    .topology
                    .neighbours(Rank(self.rank()))
                    .map(|peer| (peer, Link::Waiting))
                    .collect(),
                frames: 0,
                suspect_frames,
                silence: ftcoll_algos::Duration(silence),
            });
        let members = self.members();
        let failed = self.failed_ranks();
        let known_dead: Vec<Rank> = (0..size)
            .filter(|&i| failed.binary_search(&members[i as usize]).is_ok())
            .map(Rank)
            .collect();
        let single = spec.gossip_single();
        let make = move |_: &_, _, _| {
            let engine = if single {
                Engine::Single(Gossip::new(config))
            } else {
                Engine::Double(Gossip::new(config))
            };
            GossipRun {
                engine,
                known_dead: known_dead.clone(),
                links: links.clone(),
            }
        };
        let me = self.world_rank();
        let shell = self.whole_vector_shell(call.algo, op, data.len())?;
        let mut unsettled = None;
        let outcome = self.run_collective_then(shell, make, data, |run, _| {
            let status = run.status();
            let mut estimate = Vec::new();
            run.estimate(&mut estimate);
            tracing::debug!(rank = me, pushes = status.iteration, ?estimate, detail = ?status.detail, "gossip finished");
            if let Detail::Gossip { settled: false, .. } = status.detail {
                unsettled = Some(status.iteration);
            }
        })?;
        match unsettled {
            Some(pushes) => Err(CommError::Unsettled {
                pushes,
                eps: spec.gossip_eps(),
            }),
            None => Ok(outcome),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Link, LinkWatch};
    use ftcoll_algos::{Duration, Rank, Time};

    fn watch() -> LinkWatch {
        LinkWatch {
            heard: [1, 2, 3].map(|p| (Rank(p), Link::Waiting)).to_vec(),
            frames: 0,
            suspect_frames: 11,
            silence: Duration(100),
        }
    }

    fn expired(links: &mut LinkWatch, now: u64) -> Vec<u32> {
        let mut failed = Vec::new();
        links.expired(Time(now), &mut failed);
        failed.into_iter().map(|r| r.0).collect()
    }

    #[test]
    fn no_silence_counts_before_the_first_frame_from_any_neighbour() {
        let mut links = watch();
        assert!(expired(&mut links, 10_000).is_empty());
        links.heard_from(Rank(2), Time(10_000));
        assert!(expired(&mut links, 10_100).is_empty());
        // Neighbours 1 and 3 stay silent: their clocks started at the first frame of 2.
        links.heard_from(Rank(2), Time(10_090));
        assert_eq!(expired(&mut links, 10_101), [1, 3]);
        assert!(!links.open(Rank(1)) && links.open(Rank(2)));
        // A failed link stays failed, and is reported once.
        links.heard_from(Rank(1), Time(10_150));
        assert!(!links.open(Rank(1)));
        assert_eq!(expired(&mut links, 10_191), [2]);
        assert!(expired(&mut links, 20_000).is_empty());
    }

    #[test]
    fn a_link_is_suspect_once_the_others_brought_many_frames_and_a_stall_is_not() {
        let mut links = watch();
        assert!(!links.any_suspect());
        // Rank 3 is never heard; 1 and 2 bring a frame each per step.
        for t in 0..5 {
            links.heard_from(Rank(1), Time(10_000 + t));
            links.heard_from(Rank(2), Time(10_000 + t));
        }
        assert!(!links.any_suspect(), "ten frames over the others");
        links.heard_from(Rank(1), Time(10_005));
        assert!(links.any_suspect(), "eleven frames over the others");
        assert!(expired(&mut links, 10_006).is_empty(), "and not failed yet");
        links.heard_from(Rank(3), Time(10_007));
        assert!(!links.any_suspect());
        // A long stall with nothing received suspects nobody, but the silence limit still holds.
        assert!(!links.any_suspect());
        assert_eq!(expired(&mut links, 10_106), [1, 2]);
        // A failed link is settled: it no longer holds the stop.
        for t in 0..20 {
            links.heard_from(Rank(2), Time(10_110 + t));
            links.heard_from(Rank(3), Time(10_110 + t));
        }
        assert!(!links.any_suspect());
    }
}
