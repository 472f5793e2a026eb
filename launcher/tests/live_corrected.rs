//! The corrected-tree allreduce on real processes: exact survivor results while ranks are
//! SIGKILLed during the operations, and while the first root candidate is dead before them; the
//! broadcast at 16 MiB in segments with a rank killed while they stream.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;

mod common;

fn run_job(args: &[&str], name: &str) -> (Output, serde_json::Value) {
    let _job = common::serialize();
    common::run_job(args, name, 120)
}

fn assert_exact_at_every_survivor(out: &Output, json: &serde_json::Value, ops: u64, dead: &[u32]) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let failed = common::failed_ranks(json);
    let expected: Vec<u64> = dead.iter().map(|&r| u64::from(r)).collect();
    assert_eq!(failed, expected, "{json}");
    assert_eq!(json["ops_ok_all_survivors"], ops, "{json}");
    assert_eq!(json["consistent"], true, "ranks disagree: {json}");
    if !dead.is_empty() {
        assert_eq!(json["admissible_error"], 0.0, "{json}");
    }
    assert_eq!(json["exact"], true, "{json}");
    assert_eq!(json["timed_out"], false);
}

#[test]
fn two_non_candidates_killed_during_the_operations() {
    for transport in ["shm", "tcp"] {
        // Ranks 0..=2 are the root candidates of --tolerate 2; 21 and 42 are not. They die at a
        // wall-clock time, in the middle of whichever operation is running then.
        let (out, json) = run_job(
            &[
                "-n",
                "64",
                "--algo",
                "corrected-allreduce",
                "--tolerate",
                "2",
                "--input",
                "int",
                "--ops",
                "200",
                "--no-tui",
                "--transport",
                transport,
                "--fault",
                "kill:rank=21,at=30ms",
                "--fault",
                "kill:rank=42,at=31ms",
            ],
            &format!("during-{transport}.json"),
        );
        assert_exact_at_every_survivor(&out, &json, 200, &[21, 42]);
        let ok_everywhere = json["ops_ok_all_ranks"].as_u64().unwrap();
        assert!(ok_everywhere < 200, "the kills came after the job: {json}");
    }
}

#[test]
fn the_first_root_candidate_and_another_rank_dead_before_the_operation() {
    for info in ["list", "count", "bit"] {
        let (out, json) = run_job(
            &[
                "-n",
                "64",
                "--algo",
                "corrected-allreduce",
                "--tolerate",
                "2",
                "--failure-info",
                info,
                "--input",
                "int",
                "--ops",
                "20",
                "--no-tui",
                "--fault",
                "kill:rank=0,op=0",
                "--fault",
                "kill:rank=33,op=0",
            ],
            &format!("before-{info}.json"),
        );
        assert_exact_at_every_survivor(&out, &json, 20, &[0, 33]);
        assert_eq!(json["ops_ok_all_ranks"], 0);
    }
}

#[test]
fn corrected_reduce_and_broadcast_run_on_real_ranks() {
    for algo in ["corrected-reduce", "corrected-bcast"] {
        let (out, json) = run_job(
            &[
                "-n", "16", "--algo", algo, "--input", "int", "--ops", "50", "--no-tui",
            ],
            &format!("{algo}.json"),
        );
        assert_exact_at_every_survivor(&out, &json, 50, &[]);
        assert_eq!(json["max_rel_error"], 0.0, "{algo}: {json}");
    }
}

/// The broadcast of 16 MiB of integers in pipelined segments, over shared memory and TCP, a
/// non-root rank killed while they stream: every survivor ends with the root's whole vector.
#[test]
fn a_long_broadcast_reaches_every_survivor_whole() {
    for (transport, dtype) in [("shm", "u64"), ("tcp", "i32")] {
        let (out, json) = run_job(
            &[
                "-n",
                "5",
                "--algo",
                "corrected-bcast",
                "--dtype",
                dtype,
                "--len",
                "2097152",
                "--input",
                "int",
                "--ops",
                "3",
                "--no-tui",
                "--transport",
                transport,
                "--fault",
                "kill:rank=3,op=1,at=20ms",
            ],
            &format!("long-bcast-{transport}.json"),
        );
        // A broadcast's result is the root's input, not one of the admissible aggregates.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{transport}: {stderr}");
        assert_eq!(common::failed_ranks(&json), vec![3], "{json}");
        assert_eq!(json["ops_ok_all_survivors"], 3, "{json}");
        assert_eq!(json["consistent"], true, "{json}");
        assert_eq!(json["exact"], true, "{json}");
        assert_eq!(json["max_rel_error"], 0.0, "{transport}: {json}");
    }
}

#[test]
fn a_tolerance_the_job_cannot_have_is_refused_before_anything_starts() {
    let out = common::launcher()
        .args([
            "-n",
            "4",
            "--algo",
            "corrected-allreduce",
            "--tolerate",
            "3",
            "--no-tui",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("needs at least 5 ranks"), "{stderr}");
}
