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

pub use killer::Killer;

pub use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use ftcoll_algos::rng::SimRng;
use serde::Serialize;

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
pub enum Collective {
    /// 002's agreement, one per operation, acknowledged and shrunk after failures.
    Agreement,
    /// The fault-tolerant ring allreduce of `len` integers (sum).
    Allreduce { len: usize },
}

/// One job as its seed draws it.
#[derive(Clone, Debug)]
pub struct JobPlan {
    /// Which collective.
    pub collective: Collective,
    /// The job's seed (its inputs).
    pub seed: u64,
    /// Operations.
    pub ops: u64,
    /// Operations, ascending, at whose first report a live rank is killed.
    pub kill_after_op: Vec<u64>,
}

/// Elements of the allreduce jobs' vectors: one element, a frame's worth, the largest vector
/// whose results the launcher compares whole, and multi-segment vectors (512 KiB, 8 MiB).
const ALLREDUCE_LENS: [usize; 5] = [1, 512, 4096, 1 << 16, 1 << 20];
/// Above this many elements a result is compared by digest, and the launcher enumerates the
/// admissible results of at least 3 failures (more only for short enough vectors).
const WHOLE_COMPARE_ELEMS: usize = 4096;
/// Most kills the launcher's verdict can judge in a job of whole-compared results.
pub const MAX_JUDGED_KILLS: u32 = 10;

impl JobPlan {
    /// Job `index` of a soak seeded by `seed`.
    pub fn draw(
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
    pub fn argv(&self, args: &SoakArgs, hang_s: u64) -> Vec<String> {
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
pub struct JobTally {
    pub agreements: u64,
    pub allreduces: u64,
    pub kills: u64,
    /// Live ranks the launcher suspected and fenced (not the soak's kills).
    pub fenced: u64,
    pub hung: bool,
    pub disagreed: bool,
    /// Agreements at which ranks that then died had decided otherwise than the survivors
    /// (002's non-uniform agreement allows it; not a disagreement).
    pub dying_differed: u64,
    /// Why the job failed its verdict (wrong, inconsistent, incomplete, timed out, hung).
    pub failure: Option<String>,
    /// Why no rank survived although the soak left two alive: the launcher fenced the last
    /// ones on suspicion, and every result that came back was admissible and consistent (see
    /// `run::soak`). Not a failure of the collective; counted apart.
    pub fenced_out: Option<String>,
}

/// The soak's totals (its `--json`).
#[derive(Debug, Default, Serialize)]
pub struct SoakSummary {
    pub ranks: u32,
    pub transport: String,
    pub seed: u64,
    pub jobs: u64,
    pub agreement_jobs: u64,
    pub allreduce_jobs: u64,
    /// Agreements completed at every survivor.
    pub agreements: u64,
    /// Allreduces completed at every survivor.
    pub allreduces: u64,
    /// Ranks the soak SIGKILLed.
    pub kills: u64,
    /// Live ranks the launcher suspected and fenced.
    pub fenced: u64,
    pub hangs: u64,
    pub disagreements: u64,
    /// Agreements at which ranks that then died had decided otherwise than the survivors:
    /// 002's agreement is non-uniform (its footnote 1), so these are not disagreements.
    pub dying_decisions_differed: u64,
    /// Jobs whose verdict failed (hangs and disagreements included).
    pub failed_jobs: u64,
    /// Jobs left with no rank because the launcher fenced the last live ones (a stalled
    /// machine), every returned result admissible: counted, not failed.
    pub fenced_out_jobs: u64,
    /// The first fenced-out jobs: how their ranks ended, and their replay commands.
    pub fenced_out: Vec<String>,
    pub wall_s: f64,
    pub agreements_per_s: f64,
    pub kills_per_s: f64,
    /// The first failing jobs' reasons and replay commands.
    pub failures: Vec<String>,
}

/// Failing jobs whose replays are kept.
const MAX_REPORTED_FAILURES: usize = 10;
/// Seconds between two progress lines.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(30);

impl SoakSummary {
    /// Adds one job.
    pub fn add(&mut self, plan: &JobPlan, tally: &JobTally, replay: String) {
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
        self.dying_decisions_differed += tally.dying_differed;
        if let Some(why) = &tally.fenced_out {
            self.fenced_out_jobs += 1;
            if self.fenced_out.len() < MAX_REPORTED_FAILURES {
                self.fenced_out
                    .push(format!("job {}: {why}: {replay}", self.jobs - 1));
            }
        }
        if let Some(why) = &tally.failure {
            self.failed_jobs += 1;
            if self.failures.len() < MAX_REPORTED_FAILURES {
                self.failures
                    .push(format!("job {}: {why}: {replay}", self.jobs - 1));
            }
        }
    }

    /// One line of totals.
    pub fn line(&self, wall_s: f64) -> String {
        format!(
            "soak {wall_s:.0} s: {} jobs of {} ranks, {} agreements, {} allreduces, {} kills, {} fenced ({} jobs fenced out), {} hangs, {} disagreements ({} decisions of dying ranks differed), {} failed jobs",
            self.jobs,
            self.ranks,
            self.agreements,
            self.allreduces,
            self.kills,
            self.fenced,
            self.fenced_out_jobs,
            self.hangs,
            self.disagreements,
            self.dying_decisions_differed,
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
