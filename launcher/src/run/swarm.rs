//! The driver of `ftcoll-launch check`: each drawn run goes through the same flag parsing and
//! job construction as a simulated run typed by hand, so its replay command is exact.

use std::fs;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context};
use ftcoll_runtime::job::simulate;

use super::job_from_args;

/// `ftcoll-launch check`: the swarm of [`crate::check`], run after run, with counts per family.
pub fn check(args: &crate::check::CheckArgs) -> anyhow::Result<()> {
    use crate::check::{
        after_late_run, draw, judge, late_run_flags, Family, RunOutcome, SwarmSummary,
    };
    let only = args
        .family
        .as_deref()
        .map(Family::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |j| j as usize,
    );
    let started = std::time::Instant::now();
    let mut summary = SwarmSummary::default();
    // A protocol invariant broken inside the simulator panics; the run reports it instead.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // Workers take run numbers from one counter and keep their outcomes; the summary adds
    // them in run order, so what it keeps does not depend on the number of workers.
    let next = AtomicU64::new(0);
    let mut judged: Vec<(u64, Family, bool, RunOutcome, String)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= args.runs {
                            break mine;
                        }
                        let mut run = draw(args.seed.wrapping_add(k), only, args.max_n);
                        let inside = run.inside_model || args.plant_all_tolerated;
                        let mut outcome = judge(inside, verdict_of(&run.argv));
                        if let RunOutcome::Unconverged(_) = outcome {
                            run.argv.extend(late_run_flags());
                            let late = judge(inside, verdict_of(&run.argv));
                            outcome = after_late_run(outcome, late);
                        }
                        // Only a violation prints its command.
                        let replay = match outcome {
                            RunOutcome::Violation(_) => run.command(),
                            _ => String::new(),
                        };
                        mine.push((k, run.family, inside, outcome, replay));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    std::panic::set_hook(quiet);
    judged.sort_unstable_by_key(|(k, ..)| *k);
    for (_, family, inside, outcome, replay) in &judged {
        summary.add(*family, *inside, outcome, replay);
    }
    summary.wall_s = started.elapsed().as_secs_f64();
    summary.runs_per_s = args.runs as f64 / summary.wall_s.max(1e-9);
    println!(
        "{:<10} {:>8} {:>8} {:>15} {:>13} {:>6} {:>12} {:>10}",
        "family",
        "runs",
        "inside",
        "outside:correct",
        "outside:loud",
        "late",
        "unconverged",
        "violations"
    );
    for (family, c) in &summary.families {
        println!(
            "{family:<10} {:>8} {:>8} {:>15} {:>13} {:>6} {:>12} {:>10}",
            c.runs,
            c.inside_model,
            c.outside_correct,
            c.outside_loud,
            c.converged_late,
            c.unconverged,
            c.violations
        );
    }
    println!(
        "{} runs in {:.1} s ({:.0} runs/s, {jobs} jobs), seeds {}..{}",
        args.runs,
        summary.wall_s,
        summary.runs_per_s,
        args.seed,
        args.seed.wrapping_add(args.runs)
    );
    for violation in &summary.first_violations {
        println!("violation: {violation}");
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&summary)?;
        fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    }
    let violations = summary.violations();
    if violations > 0 {
        bail!("{violations} runs violated their algorithm's model (replay commands above)");
    }
    Ok(())
}

/// The simulated run the arguments describe, judged; `Err` when it cannot be set up or a
/// protocol invariant broke.
fn verdict_of(argv: &[String]) -> Result<crate::check::Judged, String> {
    use clap::Parser;
    let words = std::iter::once("ftcoll-launch".to_string()).chain(argv.iter().cloned());
    let cli = crate::cli::Cli::try_parse_from(words).map_err(|e| format!("bad draw: {e}"))?;
    let (spec, config) = job_from_args(&cli.run).map_err(|e| format!("bad draw: {e:#}"))?;
    let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| simulate(&spec, config)))
        .map_err(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            format!("the simulator panicked: {what}")
        })?
        .map_err(|e| format!("bad draw: {e}"))?;
    Ok(crate::check::Judged {
        wrong: crate::report::sim_verdict(&spec, &report).wrong,
        out_of_budget: report.stopped_by_budget,
    })
}
