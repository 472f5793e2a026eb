//! The swarm checker through the real binary: a short swarm over every family finds nothing, and
//! its negative control (every drawn fault claimed inside the model) must make every family fail,
//! or the checker could not tell a wrong run from a right one there.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

// Only the launcher, scratch paths and reports of the shared helpers are used here.
#[allow(dead_code)]
mod common;

const FAMILIES: [&str; 9] = [
    "rdb",
    "direct",
    "ring",
    "chain",
    "ft-ring",
    "gossip",
    "corrected",
    "ftco",
    "era",
];

/// Runs `check` with `args` and returns the exit and the per-family counts.
fn check(args: &[&str], name: &str) -> (Output, serde_json::Value) {
    common::subcommand_json("check", args, &format!("swarm-{name}.json"))
}

#[test]
fn a_short_swarm_over_every_family_finds_no_violation() {
    let (out, summary) = check(&["--runs", "300", "--max-n", "32", "--seed", "5"], "all");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for family in FAMILIES {
        let counts = &summary["families"][family];
        assert!(counts["runs"].as_u64().unwrap() > 0, "{family} not drawn");
        assert_eq!(counts["violations"], 0, "{family}: {stdout}");
    }
}

#[test]
fn the_planted_control_fails_every_family_with_a_replay_command() {
    for family in FAMILIES {
        let (out, summary) = check(
            &[
                "--family",
                family,
                "--runs",
                "100",
                "--max-n",
                "32",
                "--plant-all-tolerated",
            ],
            family,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{family}: the control passed: {stdout}"
        );
        assert!(
            stderr.contains("violated their algorithm's model"),
            "{stderr}"
        );
        assert!(
            summary["families"][family]["violations"].as_u64().unwrap() > 0,
            "{family}: {summary}"
        );
        assert!(stdout.contains("replay: ftcoll-launch --sim"), "{stdout}");
    }
}
