//! The soak through the real binary: a short soak of agreements and fault-tolerant allreduces
//! under SIGKILLs finds every job correct, and its negative control (allreduce jobs on the plain
//! ring, which tolerates no crash) must report failed jobs with their replay commands.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

// Only the launcher, scratch paths and reports of the shared helpers are used here.
#[allow(dead_code)]
mod common;

/// Runs `soak` with `args`; returns the exit and the totals.
fn soak(args: &[&str], name: &str) -> (Output, serde_json::Value) {
    common::subcommand_json("soak", args, &format!("soak-{name}.json"))
}

/// The allreduce jobs only: the agreement jobs find a rare open disagreement (about one job in
/// a thousand, a dying rank's decision; docs/papers/002-era.md), which `soak` reports.
#[test]
fn a_short_soak_kills_ranks_and_every_allreduce_job_is_right() {
    let (out, summary) = soak(
        &[
            "--minutes",
            "0.15",
            "-n",
            "6",
            "--seed",
            "3",
            "--algo",
            "ft-ring",
        ],
        "ok",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(summary["kills"].as_u64().unwrap() > 0, "{stdout}");
    assert!(summary["allreduces"].as_u64().unwrap() > 0, "{stdout}");
    assert_eq!(summary["failed_jobs"], 0, "{stdout}");
    assert_eq!(summary["hangs"], 0, "{stdout}");
}

#[test]
fn the_planted_control_fails_with_replay_commands() {
    let (out, summary) = soak(
        &[
            "--minutes",
            "0.1",
            "-n",
            "6",
            "--seed",
            "3",
            "--plant-intolerant",
        ],
        "planted",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(summary["failed_jobs"].as_u64().unwrap() > 0, "{stdout}");
    assert!(
        stdout.contains("failed: job")
            && stdout.contains("--algo ring ")
            && stdout.contains("--fault kill:rank="),
        "{stdout}"
    );
}
