//! `ftcoll-launch soak`: agreements and fault-tolerant allreduces on real processes under
//! random SIGKILLs, job after job, for a set time. 002 reports its agreement soaking this way
//! (969,739 agreements with 146,213 failures in 24 hours on 128 processes).
//!
//! Each job's seed draws its collective (era-agree, or ft-ring on a vector of 1 to 2^20
//! elements), its operations and the operations at whose report the soak SIGKILLs a random live
//! rank. Both collectives tolerate any number of failures while a rank lives, so every fault is
//! inside the model: every job must end with every operation completed at every survivor, the
//! survivors agreeing and their results admissible (the launcher's verdict of a real run), and
//! no job may hang. A job that fails prints the command that runs it again with its kills at
//! the operations where they landed (a real run's timing is not replayed exactly).

mod killer;

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use ftcoll_algos::rng::SimRng;
use serde::Serialize;

use killer::Killer;

/// Flags of `soak`.
#[derive(Debug, Args, Clone)]
pub struct SoakArgs {
    /// How long to soak; the job running at the end finishes first.
    #[arg(long, default_value_t = 5.0)]
    pub minutes: f64,
    /// Ranks of each job.
    #[arg(short = 'n', long = "ranks", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(3..=1024))]
    pub n: u32,
    /// Seed of the first job; job J draws from seed and J.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Data-plane transport (as for a run).
    #[arg(long, default_value = "shm")]
    pub transport: String,
    /// Most ranks killed in one job (default: N - 2, at most 10, so that the launcher can
    /// enumerate every admissible result).
    #[arg(long)]
    pub max_kills: Option<u32>,
    /// Only jobs of this collective: era-agree or ft-ring (default: both, drawn evenly).
    #[arg(long)]
    pub algo: Option<String>,
    /// Agreements per agreement job.
    #[arg(long, default_value_t = 400)]
    pub agreements_per_job: u64,
    /// A job in which no rank reports anything for this long counts as hung and is killed.
    #[arg(long, default_value_t = 60)]
    pub hang_s: u64,
    /// Writes the totals as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Negative control: the allreduce jobs run the plain ring, which tolerates no crash, so
    /// that the soak must report failed jobs (a test runs it).
    #[arg(long, hide = true)]
    pub plant_intolerant: bool,
}

/// The collective one job soaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Collective {
    /// 002's agreement, one per operation, acknowledged and shrunk after failures.
    Agreement,
    /// The fault-tolerant ring allreduce of `len` integers (sum).
    Allreduce { len: usize },
}

/// One job as its seed draws it.
#[derive(Clone, Debug)]
struct JobPlan {
    collective: Collective,
    /// The job's seed (its inputs).
    seed: u64,
    ops: u64,
    /// Operations, ascending, at whose first report a live rank is killed.
    kill_after_op: Vec<u64>,
}

/// Elements of the allreduce jobs' vectors: one element, a frame's worth, the largest vector
/// whose results the launcher compares whole, and multi-segment vectors (512 KiB, 8 MiB).
const ALLREDUCE_LENS: [usize; 5] = [1, 512, 4096, 1 << 16, 1 << 20];
/// Above this many elements a result is compared by digest, and the launcher enumerates the
/// admissible results of at most 3 failures.
const WHOLE_COMPARE_ELEMS: usize = 4096;
/// Most kills the launcher's verdict can judge in a job of whole-compared results.
const MAX_JUDGED_KILLS: u32 = 10;

impl JobPlan {
    /// Job `index` of a soak seeded by `seed`.
    fn draw(
        seed: u64,
        index: u64,
        n: u32,
        max_kills: u32,
        agreements: u64,
        only: Option<bool>,
    ) -> JobPlan {
        let mut rng = SimRng::for_stream(seed, index);
        let agreement = rng.chance(0.5);
        let collective = if only.unwrap_or(agreement) {
            Collective::Agreement
        } else {
            let len = ALLREDUCE_LENS[rng.below(ALLREDUCE_LENS.len() as u64) as usize];
            Collective::Allreduce { len }
        };
        let (ops, most) = match collective {
            Collective::Agreement => (agreements.max(2), max_kills),
            // About 64 MiB reduced per job, at least 4 operations.
            Collective::Allreduce { len } => (
                (8 << 20) / len as u64,
                if len > WHOLE_COMPARE_ELEMS {
                    max_kills.min(3)
                } else {
                    max_kills
                },
            ),
        };
        let ops = ops.clamp(4, 400);
        let kills = 1 + rng.below(u64::from(most.clamp(1, n - 2)));
        let mut kill_after_op: Vec<u64> = (0..kills).map(|_| rng.below(ops - 1)).collect();
        kill_after_op.sort_unstable();
        JobPlan {
            collective,
            seed: rng.next_u64() >> 12,
            ops,
            kill_after_op,
        }
    }

    /// The launcher's command line of this job, without its kills.
    fn argv(&self, args: &SoakArgs, hang_s: u64) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            "-n".into(),
            args.n.to_string(),
            "--transport".into(),
            args.transport.clone(),
            "--ops".into(),
            self.ops.to_string(),
            "--seed".into(),
            self.seed.to_string(),
            "--timeout-s".into(),
            hang_s.to_string(),
            "--no-tui".into(),
        ];
        match self.collective {
            Collective::Agreement => argv.extend(["--algo".into(), "era-agree".into()]),
            Collective::Allreduce { len } => argv.extend([
                "--algo".into(),
                if args.plant_intolerant {
                    "ring".into()
                } else {
                    "ft-ring".into()
                },
                "--input".into(),
                "int".into(),
                "--op".into(),
                "sum".into(),
                "--len".into(),
                len.to_string(),
            ]),
        }
        argv
    }
}

/// What one job showed.
#[derive(Debug, Default)]
struct JobTally {
    agreements: u64,
    allreduces: u64,
    kills: u64,
    /// Live ranks the launcher suspected and fenced (not the soak's kills).
    fenced: u64,
    hung: bool,
    disagreed: bool,
    /// Why the job failed its verdict (wrong, inconsistent, incomplete, timed out, hung).
    failure: Option<String>,
}

/// The soak's totals (its `--json`).
#[derive(Debug, Default, Serialize)]
pub struct SoakSummary {
    ranks: u32,
    transport: String,
    seed: u64,
    jobs: u64,
    agreement_jobs: u64,
    allreduce_jobs: u64,
    /// Agreements completed at every survivor.
    agreements: u64,
    /// Allreduces completed at every survivor.
    allreduces: u64,
    /// Ranks the soak SIGKILLed.
    kills: u64,
    /// Live ranks the launcher suspected and fenced.
    fenced: u64,
    hangs: u64,
    disagreements: u64,
    /// Jobs whose verdict failed (hangs and disagreements included).
    failed_jobs: u64,
    wall_s: f64,
    agreements_per_s: f64,
    kills_per_s: f64,
    /// The first failing jobs' reasons and replay commands.
    failures: Vec<String>,
}

/// Failing jobs whose replays are kept.
const MAX_REPORTED_FAILURES: usize = 10;
/// Seconds between two progress lines.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// `ftcoll-launch soak`.
pub fn run(args: &SoakArgs) -> anyhow::Result<()> {
    if !(args.minutes > 0.0 && args.minutes.is_finite()) {
        bail!("--minutes must be a positive number, e.g. 10");
    }
    if args.hang_s == 0 {
        bail!("--hang-s must be at least 1");
    }
    let max_kills = args
        .max_kills
        .unwrap_or(MAX_JUDGED_KILLS)
        .min(args.n - 2)
        .min(MAX_JUDGED_KILLS);
    if max_kills == 0 {
        bail!("--max-kills must be at least 1");
    }
    // Some(true): agreements only; Some(false): allreduces only.
    let only = match args.algo.as_deref() {
        None => None,
        Some("era-agree") => Some(true),
        Some("ft-ring") => Some(false),
        Some(other) => bail!("soak runs era-agree or ft-ring, not --algo {other}"),
    };
    let deadline = Duration::from_secs_f64(args.minutes * 60.0);
    let started = Instant::now();
    let mut last_progress = started;
    let mut summary = SoakSummary {
        ranks: args.n,
        transport: args.transport.clone(),
        seed: args.seed,
        ..SoakSummary::default()
    };
    for index in 0.. {
        let plan = JobPlan::draw(
            args.seed,
            index,
            args.n,
            max_kills,
            args.agreements_per_job,
            only,
        );
        let (tally, replay) = run_job(args, &plan, index)?;
        summary.add(&plan, &tally, replay);
        if started.elapsed() >= deadline {
            break;
        }
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            println!("{}", summary.line(started.elapsed().as_secs_f64()));
        }
    }
    summary.wall_s = started.elapsed().as_secs_f64();
    summary.agreements_per_s = summary.agreements as f64 / summary.wall_s.max(1e-9);
    summary.kills_per_s = summary.kills as f64 / summary.wall_s.max(1e-9);
    println!("{}", summary.line(summary.wall_s));
    for failure in &summary.failures {
        println!("failed: {failure}");
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&summary)?;
        fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    }
    if summary.failed_jobs > 0 {
        bail!(
            "{} of {} jobs failed ({} hung, {} disagreed); replay commands above",
            summary.failed_jobs,
            summary.jobs,
            summary.hangs,
            summary.disagreements
        );
    }
    Ok(())
}

/// Runs one job under its kills; returns its tally and, if it failed, its replay command.
fn run_job(args: &SoakArgs, plan: &JobPlan, index: u64) -> anyhow::Result<(JobTally, String)> {
    use clap::Parser;
    let argv = plan.argv(args, args.hang_s);
    let words = std::iter::once("ftcoll-launch".to_string()).chain(argv.iter().cloned());
    let cli = crate::cli::Cli::try_parse_from(words).context("the soak drew a bad job")?;
    let job = crate::run::builtin_run(&cli.run)?;
    let mut killer = Killer::new(
        args.n,
        plan.kill_after_op.clone(),
        SimRng::for_stream(plan.seed, index),
        Duration::from_secs(args.hang_s),
    );
    let outcome = crate::live::run_with_console(&job.spec, Some(&mut killer))?;
    let report = outcome.builtin_report(&job.job);
    let killed = killer.killed();
    let fenced = outcome
        .failures
        .iter()
        .filter(|f| !killed.iter().any(|&(rank, _)| rank == f.rank))
        .count() as u64;
    let completed = report.ops_completed();
    let mut tally = JobTally {
        kills: killed.len() as u64,
        fenced,
        hung: killer.hung(),
        disagreed: !report.consistent(),
        ..JobTally::default()
    };
    match plan.collective {
        Collective::Agreement => tally.agreements = completed,
        Collective::Allreduce { .. } => tally.allreduces = completed,
    }
    tally.failure = if tally.hung {
        Some(format!(
            "no rank reported for {} s: the job hung",
            args.hang_s
        ))
    } else {
        crate::run::builtin_failure(&outcome, &report)
    };
    let replay = match &tally.failure {
        None => String::new(),
        Some(_) => {
            let kills = killed
                .iter()
                .map(|(rank, op)| format!(" --fault kill:rank={rank},op={op}"));
            format!(
                "ftcoll-launch {}{}",
                argv.join(" "),
                kills.collect::<String>()
            )
        }
    };
    Ok((tally, replay))
}

impl SoakSummary {
    fn add(&mut self, plan: &JobPlan, tally: &JobTally, replay: String) {
        self.jobs += 1;
        match plan.collective {
            Collective::Agreement => self.agreement_jobs += 1,
            Collective::Allreduce { .. } => self.allreduce_jobs += 1,
        }
        self.agreements += tally.agreements;
        self.allreduces += tally.allreduces;
        self.kills += tally.kills;
        self.fenced += tally.fenced;
        self.hangs += u64::from(tally.hung);
        self.disagreements += u64::from(tally.disagreed);
        if let Some(why) = &tally.failure {
            self.failed_jobs += 1;
            if self.failures.len() < MAX_REPORTED_FAILURES {
                self.failures
                    .push(format!("job {}: {why}: {replay}", self.jobs - 1));
            }
        }
    }

    /// One line of totals.
    fn line(&self, wall_s: f64) -> String {
        format!(
            "soak {wall_s:.0} s: {} jobs of {} ranks, {} agreements, {} allreduces, {} kills, {} fenced, {} hangs, {} disagreements, {} failed jobs",
            self.jobs,
            self.ranks,
            self.agreements,
            self.allreduces,
            self.kills,
            self.fenced,
            self.hangs,
            self.disagreements,
            self.failed_jobs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_fixed_by_the_seed_and_kill_inside_the_job() {
        for index in 0..500 {
            let plan = JobPlan::draw(7, index, 8, 6, 400, None);
            let again = JobPlan::draw(7, index, 8, 6, 400, None);
            assert_eq!(plan.kill_after_op, again.kill_after_op);
            assert_eq!((plan.seed, plan.ops), (again.seed, again.ops));
            assert!(!plan.kill_after_op.is_empty() && plan.kill_after_op.len() <= 6);
            assert!(plan.kill_after_op.iter().all(|&op| op + 1 < plan.ops));
            if let Collective::Allreduce { len } = plan.collective {
                assert!(len <= WHOLE_COMPARE_ELEMS || plan.kill_after_op.len() <= 3);
            }
        }
    }
}
