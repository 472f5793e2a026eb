//! `ftcoll-launch check`: one swarm checker over every family of the registry. Each run's seed
//! draws a family and one of its algorithms, N, the family's options (tree, roots, tolerance,
//! network), the vector length and a fault mix from the whole vocabulary (crashes at any moment,
//! slow and hung ranks, message loss, cut links, bit flips in messages and state), and marks each
//! fault as inside or outside the algorithm's model. The run is a command line of the launcher,
//! so the command a failure prints replays it exactly. The simulator checks every protocol's
//! invariants after every step; after the last fault it runs until nothing is pending, so an
//! operation that cannot finish shows as a hang. Then the run is judged as a simulated run is
//! ([`crate::report::sim_verdict`]): inside the model nothing may be wrong, outside it the run
//! must be correct or loud (its outcome flagged, a non-zero exit), never silently wrong.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use ftcoll_algos::fault::{FaultSpec, FaultTime, FlipTarget, KillTime, MessageSelector};
use ftcoll_algos::ftco::Collective;
use ftcoll_algos::protocol::StateVar;
use ftcoll_algos::registry::{Algorithm, Kind};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::Rank;
use serde::Serialize;

/// Flags of `check`.
#[derive(Debug, Args, Clone)]
pub struct CheckArgs {
    /// First seed; run K uses seed + K.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs.
    #[arg(long, default_value_t = 1000)]
    pub runs: u64,
    /// Only this family: rdb, direct, ring, chain, ft-ring, gossip, corrected, ftco or era.
    #[arg(long)]
    pub family: Option<String>,
    /// Largest N drawn (gossip, which needs many rounds, stays at 64 or less).
    #[arg(long, default_value_t = 1024)]
    pub max_n: u32,
    /// Writes the counts per family as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Runs simulated side by side (default: the machine's cores). Counts and the violations
    /// printed do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: Option<u32>,
    /// Negative control: claims every drawn fault inside the model, so that the checker must
    /// find violations in every family (a test runs it).
    #[arg(long, hide = true)]
    pub plant_all_tolerated: bool,
}

/// The families: one per kind of state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// Recursive doubling, exact and approximate.
    Rdb,
    /// The direct exchange.
    Direct,
    /// The bandwidth allreduces: the ring, recursive halving and doubling.
    Ring,
    /// Pipelined chains.
    Chain,
    /// The fault-tolerant ring.
    FtRing,
    /// Every gossip rule.
    Gossip,
    /// 001's corrected trees.
    Corrected,
    /// 004's FTCO.
    Ftco,
    /// 002's agreement.
    Era,
}

impl Family {
    /// Every family, in order.
    pub const ALL: [Family; 9] = [
        Family::Rdb,
        Family::Direct,
        Family::Ring,
        Family::Chain,
        Family::FtRing,
        Family::Gossip,
        Family::Corrected,
        Family::Ftco,
        Family::Era,
    ];

    /// The family of an algorithm.
    pub fn of(algo: Algorithm) -> Family {
        match algo.kind() {
            Kind::RecursiveDoubling { .. } => Family::Rdb,
            Kind::Direct => Family::Direct,
            Kind::Ring | Kind::HalvingDoubling => Family::Ring,
            Kind::Chain(_) => Family::Chain,
            Kind::FtRing | Kind::FtCorrected => Family::FtRing,
            Kind::Gossip { .. } => Family::Gossip,
            Kind::Corrected(_) => Family::Corrected,
            Kind::Ftco(_) => Family::Ftco,
            Kind::Agreement => Family::Era,
        }
    }

    /// The name `--family` takes.
    pub fn name(self) -> &'static str {
        match self {
            Family::Rdb => "rdb",
            Family::Direct => "direct",
            Family::Ring => "ring",
            Family::Chain => "chain",
            Family::FtRing => "ft-ring",
            Family::Gossip => "gossip",
            Family::Corrected => "corrected",
            Family::Ftco => "ftco",
            Family::Era => "era",
        }
    }

    /// The family named `name`.
    pub fn parse(name: &str) -> Result<Family, String> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
                format!("unknown family '{name}'; use one of {}", names.join(", "))
            })
    }

    /// The simulated algorithms of the family.
    fn algorithms(self) -> Vec<Algorithm> {
        Algorithm::ALL
            .iter()
            .copied()
            .filter(|a| a.descriptor().runs.simulated && Family::of(*a) == self)
            // ARDB stops early with a sample average by design (000 Sec. 6.3): nothing to judge.
            .filter(|a| *a != Algorithm::Ardb)
            .collect()
    }
}

/// One drawn run: the launcher's arguments and whether every fault lies inside the model.
#[derive(Clone, Debug, PartialEq)]
pub struct DrawnRun {
    /// The family.
    pub family: Family,
    /// The arguments after `ftcoll-launch`.
    pub argv: Vec<String>,
    /// Every fault is one the algorithm tolerates, where and when it strikes.
    pub inside_model: bool,
}

impl DrawnRun {
    /// The command that replays the run.
    pub fn command(&self) -> String {
        format!("ftcoll-launch {}", self.argv.join(" "))
    }
}

/// Stream of the swarm's draws.
const SWARM_STREAM: u64 = 0x5EA4_C0DE_0000_0027;

/// Draws run `seed`, of `only` if given.
pub fn draw(seed: u64, only: Option<Family>, max_n: u32) -> DrawnRun {
    let mut rng = SimRng::for_stream(seed, SWARM_STREAM);
    let family = only.unwrap_or(Family::ALL[rng.below(Family::ALL.len() as u64) as usize]);
    let algorithms = family.algorithms();
    let algo = algorithms[rng.below(algorithms.len() as u64) as usize];
    // Gossip needs thousands of pushes per rank, the direct exchange and the rings n^2
    // messages per operation: bigger runs check nothing new, slowly.
    let cap = match family {
        Family::Gossip => max_n.min(64),
        Family::Direct => max_n.min(128),
        // A ring moves n segments n times: n^2 messages per operation.
        Family::Ring | Family::FtRing => max_n.min(256),
        _ => max_n,
    };
    // The corrected tree tolerates f >= 1 crashes among n >= f + 2 ranks.
    let floor = if family == Family::Corrected { 3 } else { 1 };
    let n = match rng.below(4) {
        0 => 1 + rng.below(8) as u32,
        1 | 2 => 2 + rng.below(31) as u32,
        _ => 2 + rng.below(u64::from(cap.max(2) - 1)) as u32,
    }
    .clamp(floor, cap.max(floor));
    let mut argv: Vec<String> = ["--sim", "--no-tui", "--seed"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.push(seed.to_string());
    argv.extend([
        "--algo".into(),
        algo.name().into(),
        "-n".into(),
        n.to_string(),
    ]);
    let options = family_options(&mut rng, algo, n);
    argv.extend(options.argv);
    let horizon = 40 + 20 * u64::from(32 - n.leading_zeros());
    let mut inside = true;
    let mut removed = Removed::default();
    for _ in 0..rng.below(4) {
        let (spec, tolerated) =
            draw_fault(&mut rng, algo, n, horizon, &options.model, &mut removed);
        argv.push("--fault".into());
        argv.push(spec.to_string());
        inside &= tolerated;
    }
    DrawnRun {
        family,
        argv,
        inside_model: inside,
    }
}

/// What a family's model allows, as drawn for one run.
#[derive(Clone, Debug, Default)]
struct Model {
    /// Crashes the algorithm survives (0: none).
    crashes: u32,
    /// Ranks that may fail only before the operation (at time 0): 001's root candidates.
    pre_operational: Vec<u32>,
    /// Ranks that may not fail at all: the root of a broadcast or a reduce.
    immune: Vec<u32>,
    /// The gossip network, whose survivors must stay connected: a partition is outside every
    /// model.
    network: Network,
}

/// A gossip network, as far as its connectivity goes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Network {
    /// No network to partition (the other families address every rank).
    #[default]
    Unconstrained,
    /// Every rank a neighbour of every other.
    Full,
    /// A hypercube of this degree: connected after any degree - 1 crashes or cuts.
    Hypercube(u32),
    /// A torus, taken as 2-connected only (its shape depends on N).
    Torus,
}

impl Network {
    /// Whether the survivors stay connected after `crashes` crashed ranks and `cuts` cut links
    /// among `n` ranks, whichever they are.
    fn survives(self, n: u32, crashes: u32, cuts: u32) -> bool {
        match self {
            Network::Unconstrained => true,
            // K_n less k ranks is K_(n-k), whose edge connectivity is n - k - 1.
            Network::Full => cuts == 0 || cuts + 2 <= n.saturating_sub(crashes),
            Network::Hypercube(degree) => crashes + cuts < degree,
            Network::Torus => n >= 5 && crashes + cuts < 2,
        }
    }
}

/// Ranks killed and links cut so far in one run.
#[derive(Clone, Copy, Debug, Default)]
struct Removed {
    kills: u32,
    cuts: u32,
}

/// A family's drawn options.
struct Options {
    argv: Vec<String>,
    model: Model,
}

fn family_options(rng: &mut SimRng, algo: Algorithm, n: u32) -> Options {
    let mut argv = Vec::new();
    let mut model = Model::default();
    let tolerates = algo.descriptor().tolerates;
    let mut step_model = false;
    let mut arg = |flag: &str, value: String| {
        argv.push(flag.to_string());
        argv.push(value);
    };
    match algo.kind() {
        Kind::Gossip { round_based, .. } => {
            // The default accuracy of the precision (double, or single for round-based
            // gossip) and the default push budget.
            let topology = if round_based || n.is_power_of_two() && rng.chance(0.5) {
                "hypercube"
            } else {
                ["full", "torus"][rng.below(2) as usize]
            };
            if !round_based && n > 1 {
                arg("--topology", topology.into());
            }
            model.network = match topology {
                "full" => Network::Full,
                // A partial hypercube may hang a rank on one link.
                "hypercube" if n.is_power_of_two() => Network::Hypercube(n.trailing_zeros()),
                "hypercube" => Network::Hypercube(1),
                _ => Network::Torus,
            };
            arg("--op", "avg".into());
            model.crashes = n.saturating_sub(1);
        }
        Kind::RecursiveDoubling { approximate: true } => {
            unreachable!("ardb is not drawn: its result is an estimate with no accuracy bound")
        }
        Kind::Corrected(collective) => {
            let f = (1 + rng.below(3) as u32).min(n - 2);
            arg("--tolerate", f.to_string());
            arg("--input", "int".into());
            model.crashes = f;
            if collective != Collective::Reduce && rng.chance(1.0 / 3.0) {
                // Timed correction moves past silent ranks on its own, and past dead ones at
                // once when the detector tells: as tolerant as checked, with more messages.
                arg("--correction", format!("timed:{}", 5 + rng.below(76)));
            }
            match collective {
                // The value to broadcast, or the result, lives at the root: its death is
                // outside the model (the survivors must then all fail, loudly).
                Collective::Reduce | Collective::Bcast => model.immune = vec![0],
                // 001's allreduce hands the root role down f + 1 candidates, each of which may
                // fail before the operation.
                Collective::Allreduce => model.pre_operational = (0..=f).collect(),
            }
        }
        Kind::Ftco(collective) => {
            let k = 2 + rng.below(4);
            let shape = if rng.chance(0.5) { "knomial" } else { "kary" };
            arg("--ftco-tree", format!("{shape}:{k}"));
            let roots = 1 + rng.below(3) as u32;
            if collective == Collective::Allreduce {
                arg("--ftco-roots", roots.to_string());
            } else {
                model.immune = vec![0];
            }
            arg("--input", "int".into());
            model.crashes = n.saturating_sub(1);
            // Half the runs in 004's step model, which the experiments use.
            step_model = rng.chance(0.5);
        }
        Kind::Agreement | Kind::FtRing => {
            arg("--input", "int".into());
            model.crashes = n.saturating_sub(1);
        }
        Kind::FtCorrected => {
            // Any number of crashes: a segment's trees tolerate f, and an attempt that saw more
            // runs again over the survivors.
            arg("--tolerate", (1 + rng.below(3)).to_string());
            arg("--input", "int".into());
            model.crashes = n.saturating_sub(1);
        }
        Kind::RecursiveDoubling { approximate: false }
        | Kind::Direct
        | Kind::Ring
        | Kind::HalvingDoubling
        | Kind::Chain(_) => {
            arg("--input", "int".into());
            let len = [1, 2, 7, 64][rng.below(4) as usize];
            arg("--len", len.to_string());
        }
    }
    if step_model {
        argv.push("--ftco-step-model".into());
    }
    if !tolerates.crashes {
        model.crashes = 0;
    }
    Options { argv, model }
}

/// One fault from the whole vocabulary, and whether the algorithm tolerates it there and then.
fn draw_fault(
    rng: &mut SimRng,
    algo: Algorithm,
    n: u32,
    horizon: u64,
    model: &Model,
    removed: &mut Removed,
) -> (FaultSpec, bool) {
    let tolerates = algo.descriptor().tolerates;
    let rank = Rank(rng.below(u64::from(n)) as u32);
    let at = if rng.chance(0.3) {
        0
    } else {
        rng.below(horizon * 3)
    };
    let time = FaultTime::Steps(at);
    match rng.below(9) {
        0..=2 => {
            removed.kills += 1;
            let kills = removed.kills;
            let inside = kills <= model.crashes
                && kills < n
                && model.network.survives(n, kills, removed.cuts)
                && !model.immune.contains(&rank.0)
                && (at == 0 || !model.pre_operational.contains(&rank.0));
            let spec = FaultSpec::Kill {
                rank,
                at: KillTime::At(time),
            };
            (spec, inside)
        }
        3 => {
            let factor = [2, 8, 60, 1000][rng.below(4) as usize];
            // Only FTCO times ranks out; a slow rank is live everywhere else.
            let inside = !matches!(algo.kind(), Kind::Ftco(_));
            (
                FaultSpec::Slow {
                    rank,
                    factor,
                    at: time,
                },
                inside,
            )
        }
        // A hung rank is not fail-stop: outside every model.
        4 => (FaultSpec::Stop { rank, at: time }, false),
        5 => {
            let rate = [0.001, 0.01, 0.1][rng.below(3) as usize];
            let rank = rng.chance(0.5).then_some(rank);
            (FaultSpec::Drop { rank, rate }, tolerates.message_loss)
        }
        6 if n >= 2 => {
            let b = Rank((rank.0 + 1 + rng.below(u64::from(n - 1)) as u32) % n);
            removed.cuts += 1;
            // A round-based schedule has no other path around a cut link.
            let round_based = matches!(
                algo.kind(),
                Kind::Gossip {
                    round_based: true,
                    ..
                }
            );
            let inside = tolerates.link_failures
                && !round_based
                && model.network.survives(n, removed.kills, removed.cuts);
            (
                FaultSpec::Cut {
                    a: rank,
                    b,
                    at: time,
                },
                inside,
            )
        }
        // One rank has no link to cut: it stops instead.
        6 => (FaultSpec::Stop { rank, at: time }, false),
        7 => {
            let which = if rng.chance(0.5) {
                MessageSelector::Nth(rng.below(8))
            } else {
                MessageSelector::AtOrAfter(time)
            };
            let (target, inside) = if rng.chance(0.8) {
                let bit = rng.below(64) as u32;
                (
                    FlipTarget::Payload { elem: 0, bit },
                    tolerates.message_flips,
                )
            } else {
                (
                    FlipTarget::Raw {
                        bit: rng.below(512),
                    },
                    false,
                )
            };
            (
                FaultSpec::FlipMessage {
                    rank,
                    which,
                    target,
                },
                inside,
            )
        }
        _ => {
            let bit = rng.below(64) as u32;
            let (var, inside) = if rng.chance(0.5) {
                // A neighbour on every network gossip uses here (a state that does not exist,
                // in other families, is left alone and reported so).
                let peer = if rank.0 ^ 1 < n {
                    rank.0 ^ 1
                } else {
                    (rank.0 + 1) % n
                };
                let flow = StateVar::Flow {
                    peer: Rank(peer),
                    elem: 0,
                };
                (flow, tolerates.state_flips)
            } else {
                (StateVar::Value { elem: 0 }, false)
            };
            (
                FaultSpec::FlipState {
                    rank,
                    var,
                    bit,
                    at: time,
                },
                inside,
            )
        }
    }
}

/// What the simulator said of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    /// Why the outcome cannot be trusted, if it cannot ([`crate::report::SimVerdict::wrong`]).
    pub wrong: Option<String>,
    /// An approximate algorithm's push budget ended the run before its accuracy was reached.
    pub out_of_budget: bool,
}

/// How one run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RunOutcome {
    /// Correct (inside or outside the model).
    Correct,
    /// Inside the model, a gossip run the push budget stopped before it converged, which did
    /// converge when run again with [`LATE_BUDGET_FACTOR`] times the budget (in double
    /// precision, [`late_run_flags`]).
    ConvergedLate,
    /// Inside the model, a gossip run stopped by the push budget even with
    /// [`LATE_BUDGET_FACTOR`] times it: loud (not within eps, a non-zero exit), and no claim of
    /// the papers, which promise convergence, not a number of pushes under every fault.
    Unconverged(String),
    /// Outside the model, and flagged: the launcher exits non-zero with this reason.
    Loud(String),
    /// A violation: wrong inside the model, or the run could not be set up or panicked.
    Violation(String),
}

/// Counts of one family.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FamilyCounts {
    /// Runs.
    pub runs: u64,
    /// Runs whose faults all lay inside the model.
    pub inside_model: u64,
    /// Runs outside the model that ended correct anyway.
    pub outside_correct: u64,
    /// Runs outside the model that ended loud.
    pub outside_loud: u64,
    /// Gossip runs inside the model that the push budget stopped, converged with a larger one.
    pub converged_late: u64,
    /// Gossip runs inside the model that even the larger budget stopped (loud).
    pub unconverged: u64,
    /// Violations.
    pub violations: u64,
}

/// What a swarm found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SwarmSummary {
    /// Counts per family.
    pub families: BTreeMap<&'static str, FamilyCounts>,
    /// The first violations, each with the command that replays it.
    pub first_violations: Vec<String>,
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Runs per second.
    pub runs_per_s: f64,
}

/// Most violations a summary keeps.
const KEPT_VIOLATIONS: usize = 10;

impl SwarmSummary {
    /// Violations in all.
    pub fn violations(&self) -> u64 {
        self.families.values().map(|c| c.violations).sum()
    }

    /// Adds one run of `family`; `replay` is its command, needed for a violation only.
    pub fn add(&mut self, family: Family, inside: bool, outcome: &RunOutcome, replay: &str) {
        let counts = self.families.entry(family.name()).or_default();
        counts.runs += 1;
        counts.inside_model += u64::from(inside);
        match outcome {
            RunOutcome::Correct if !inside => counts.outside_correct += 1,
            RunOutcome::Correct => {}
            RunOutcome::ConvergedLate => counts.converged_late += 1,
            RunOutcome::Loud(_) => counts.outside_loud += 1,
            RunOutcome::Unconverged(_) => counts.unconverged += 1,
            RunOutcome::Violation(why) => {
                counts.violations += 1;
                if self.first_violations.len() < KEPT_VIOLATIONS {
                    self.first_violations
                        .push(format!("{why}\n  replay: {replay}"));
                }
            }
        }
    }
}

/// How many times the default push budget a gossip run the budget stopped gets when it runs
/// again: a bug that keeps gossip from converging would otherwise pass for a slow run.
pub const LATE_BUDGET_FACTOR: u32 = 4;

/// The flags of that second run: the larger budget, in double precision. Single precision
/// (hps and hpflc by default, as in 000) cannot run that long: its checksums drift past their
/// threshold of 1e-4 on round-off alone (hpflc, 61 ranks, 10% loss: a flow's defect reached
/// 1.007e-4 after 16,000 rounds), which is the precision's limit, not the protocol's. Four
/// times the budget: the runs that never converge cost all of it (at eight times, 10,000 draws
/// took 427 s instead of 37).
pub fn late_run_flags() -> [String; 4] {
    [
        "--steps".to_string(),
        (LATE_BUDGET_FACTOR * ftcoll_runtime::job::DEFAULT_GOSSIP_STEPS).to_string(),
        "--precision".to_string(),
        "f64".to_string(),
    ]
}

/// The outcome of a run the push budget stopped (`first`, [`RunOutcome::Unconverged`]) given
/// how it ran again with [`late_run_flags`]: correct then is [`RunOutcome::ConvergedLate`]; wrong
/// without the budget stopping it is a violation.
pub fn after_late_run(first: RunOutcome, late: RunOutcome) -> RunOutcome {
    match (first, late) {
        (RunOutcome::Unconverged(_), RunOutcome::Correct) => RunOutcome::ConvergedLate,
        (first, RunOutcome::Unconverged(_)) => first,
        (_, late) => late,
    }
}

/// Judges one run from what the simulator said (`Err`: the run could not be set up, or a
/// protocol invariant broke).
pub fn judge(inside: bool, judged: Result<Judged, String>) -> RunOutcome {
    match judged {
        Err(why) => RunOutcome::Violation(why),
        Ok(Judged { wrong: None, .. }) => RunOutcome::Correct,
        Ok(Judged {
            wrong: Some(why),
            out_of_budget: true,
        }) if inside => RunOutcome::Unconverged(why),
        Ok(Judged {
            wrong: Some(why), ..
        }) if inside => RunOutcome::Violation(format!("inside the model, yet {why}")),
        Ok(Judged {
            wrong: Some(why), ..
        }) => RunOutcome::Loud(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_a_function_of_the_seed_and_cover_every_family() {
        assert_eq!(draw(7, None, 1024), draw(7, None, 1024));
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..500 {
            let run = draw(seed, None, 1024);
            let algo = ftcoll_launcher::text::options::parse_algorithm(&run.argv[5]).unwrap();
            assert_eq!(Family::of(algo), run.family);
            seen.insert(run.family);
        }
        assert_eq!(seen.len(), Family::ALL.len());
    }

    #[test]
    fn a_crash_or_cut_that_could_partition_the_survivors_is_outside_the_model() {
        // The 4-cycle (a hypercube of degree 2) loses two opposite ranks: two islands.
        assert!(Network::Hypercube(2).survives(4, 1, 0));
        assert!(!Network::Hypercube(2).survives(4, 2, 0));
        assert!(!Network::Hypercube(2).survives(4, 1, 1));
        assert!(Network::Hypercube(4).survives(16, 2, 1));
        // A full graph survives any crashes; a cut only while three or more ranks live.
        assert!(Network::Full.survives(4, 3, 0));
        assert!(Network::Full.survives(4, 1, 1));
        assert!(!Network::Full.survives(4, 2, 1));
        assert!(!Network::Torus.survives(16, 1, 1));
        assert!(Network::Unconstrained.survives(2, 1, 9));
    }

    #[test]
    fn family_names_round_trip_and_a_bad_one_says_what_to_use() {
        for family in Family::ALL {
            assert_eq!(Family::parse(family.name()), Ok(family));
        }
        let error = Family::parse("mpi").unwrap_err();
        assert!(error.contains("rdb, direct"), "{error}");
    }

    #[test]
    fn inside_the_model_a_flagged_run_is_a_violation_outside_it_is_loud() {
        let said = |wrong: Option<&str>, out_of_budget| {
            Ok(Judged {
                wrong: wrong.map(String::from),
                out_of_budget,
            })
        };
        assert_eq!(judge(true, said(None, false)), RunOutcome::Correct);
        assert!(matches!(
            judge(true, said(Some("x"), false)),
            RunOutcome::Violation(_)
        ));
        assert_eq!(
            judge(false, said(Some("x"), false)),
            RunOutcome::Loud("x".into())
        );
        assert_eq!(
            judge(true, said(Some("x"), true)),
            RunOutcome::Unconverged("x".into())
        );
        assert!(matches!(
            judge(false, Err("panic".into())),
            RunOutcome::Violation(_)
        ));
    }

    #[test]
    fn a_run_the_budget_stopped_is_judged_again_by_its_longer_run() {
        let stopped = || RunOutcome::Unconverged("x".into());
        assert_eq!(
            after_late_run(stopped(), RunOutcome::Correct),
            RunOutcome::ConvergedLate
        );
        assert_eq!(
            after_late_run(stopped(), RunOutcome::Unconverged("y".into())),
            stopped()
        );
        // Wrong without the budget stopping it: not slow, wrong.
        let wrong = RunOutcome::Violation("inside the model, yet off".into());
        assert_eq!(after_late_run(stopped(), wrong.clone()), wrong);
    }
}
