//! The driver of `ftcoll-launch soak` ([`crate::soak`]): each drawn job goes through the same
//! flag parsing, set-up and verdict as a real run typed by hand.

use std::fs;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ftcoll_algos::rng::SimRng;
use ftcoll_runtime::control::FailureCause;

use crate::soak::{
    Collective, JobPlan, JobTally, Killer, SoakArgs, SoakSummary, MAX_JUDGED_KILLS, PROGRESS_EVERY,
};

/// `ftcoll-launch soak`.
pub fn soak(args: &SoakArgs) -> anyhow::Result<()> {
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
    for fenced_out in &summary.fenced_out {
        println!("fenced out: {fenced_out}");
    }
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
    let job = super::builtin_run(&cli.run)?;
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
        .filter(|f| f.cause != FailureCause::Exited)
        .filter(|f| !killed.iter().any(|&(rank, _)| rank == f.rank))
        .count() as u64;
    let completed = report.ops_completed();
    let mut tally = JobTally {
        kills: killed.len() as u64,
        fenced,
        hung: killer.hung(),
        disagreed: !report.consistent(),
        dying_differed: report.dying_differed(),
        ..JobTally::default()
    };
    match plan.collective {
        Collective::Agreement => tally.agreements = completed,
        Collective::Allreduce { .. } => tally.allreduces = completed,
    }
    let failure = if tally.hung {
        Some(format!(
            "no rank reported for {} s: the job hung",
            args.hang_s
        ))
    } else {
        super::builtin_failure(&outcome, &report).map(|why| {
            // How each rank ended, since a real run's timing does not replay exactly: a
            // rank fenced on suspicion and one that exited with its own error differ here.
            let ends: Vec<String> = outcome
                .failures
                .iter()
                .map(|f| format!("rank {} {} at {:.3} s", f.rank, f.how, f.at_s))
                .collect();
            format!("{why} (ranks that ended: {})", ends.join(", "))
        })
    };
    let returned_right = report.wrong().is_none() && report.consistent();
    if failure.is_some()
        && fenced_out(
            &outcome.failures,
            args.n,
            fenced,
            returned_right,
            tally.hung,
        )
    {
        tally.fenced_out = failure;
    } else {
        tally.failure = failure;
    }
    let replay = match tally.failure.as_ref().or(tally.fenced_out.as_ref()) {
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

/// Whether a job that could not finish was left with no rank by the launcher's fences alone.
/// The soak leaves two ranks alive; if the launcher then fenced the last ones on suspicion (a
/// machine that stalled them for the suspicion timeout) and everything that came back was
/// right (`returned_right`: admissible and consistent), the collective did no wrong: the job
/// is counted apart and printed, not failed. A hang or a rank's own error still fails it.
fn fenced_out(
    failures: &[crate::live::FailureRecord],
    n: u32,
    fenced: u64,
    returned_right: bool,
    hung: bool,
) -> bool {
    let nobody_left = failures.len() >= n as usize;
    let gave_up = failures.iter().any(|f| f.gave_up);
    nobody_left && fenced > 0 && returned_right && !hung && !gave_up
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::FailureRecord;

    fn ended(rank: u32, cause: FailureCause, gave_up: bool) -> FailureRecord {
        FailureRecord {
            rank,
            cause,
            how: String::new(),
            at_s: 1.0,
            gave_up,
        }
    }

    #[test]
    fn only_a_job_emptied_by_fences_with_right_results_is_fenced_out() {
        // Two ranks killed by the soak, the last two fenced on heartbeat timeouts.
        let mut failures: Vec<FailureRecord> = (0..2)
            .map(|r| ended(r, FailureCause::Exited, false))
            .collect();
        failures.extend((2..4).map(|r| ended(r, FailureCause::HeartbeatTimeout, false)));
        assert!(fenced_out(&failures, 4, 2, true, false));
        // Not when a result was wrong, the job hung, a rank is left, or nobody was fenced.
        assert!(!fenced_out(&failures, 4, 2, false, false));
        assert!(!fenced_out(&failures, 4, 2, true, true));
        assert!(!fenced_out(&failures[..3], 4, 1, true, false));
        assert!(!fenced_out(&failures, 4, 0, true, false));
        // Nor when a rank ended in an error of its own.
        failures[1].gave_up = true;
        assert!(!fenced_out(&failures, 4, 2, true, false));
    }
}
