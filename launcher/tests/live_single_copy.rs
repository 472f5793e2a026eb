//! The single-copy ring on shared memory: blocks read straight out of the neighbour's vector
//! (only notices travel through the segment), exact at any length and type, the copying path
//! still there when switched off, and a killed rank a loud failure, never a result.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;

use std::time::{Duration, Instant};

/// Runs `args` as a ring allreduce job of `n` ranks and `ops` operations under `env`; returns
/// its report, which must be exact.
fn exact_ring(n: u32, len: &str, dtype: &str, ops: u32, env: &[(&str, &str)]) -> serde_json::Value {
    exact_ring_with(n, ("ring", len, dtype), ops, env, &[])
}

/// [`exact_ring`] with more launcher arguments.
fn exact_ring_with(
    n: u32,
    (algo, len, dtype): (&str, &str, &str),
    ops: u32,
    env: &[(&str, &str)],
    more: &[&str],
) -> serde_json::Value {
    let _job = common::serialize();
    let name = format!("single-copy-{algo}-{n}-{len}-{dtype}-{}.json", env.len());
    let path = common::scratch(&name);
    let (n_text, ops_text) = (n.to_string(), ops.to_string());
    let out = common::launcher()
        .args([
            "-n", &n_text, "--algo", algo, "--dtype", dtype, "--len", len,
        ])
        .args([
            "--ops",
            &ops_text,
            "--input",
            "int",
            "--no-tui",
            "--timeout-s",
            "120",
        ])
        .args(more)
        .arg("--json")
        .arg(&path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let json = common::take_report(&path, &out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json["exact"], true, "{json}");
    assert_eq!(json["ops_ok_all_ranks"], ops, "{json}");
    json
}

#[test]
fn the_ring_reads_each_block_from_the_neighbour_and_sends_only_notices() {
    // 2,000,003 doubles (16 MB, 256 lanes' worth) over 3 ranks: blocks of unequal length.
    let (n, ops) = (3u64, 3u64);
    let json = exact_ring(3, "2000003", "f64", 3, &[]);
    // Per rank and operation: 2N − 2 Ready notices and one Released, no data frame.
    assert_eq!(json["messages"], n * (2 * n - 1) * ops, "{json}");
    for dtype in ["f32", "i32", "u64"] {
        exact_ring(2, "1000001", dtype, 2, &[]);
    }
}

/// The library's pick takes the single copy from the threshold the user sets, below the
/// sizes where it would take recursive halving and doubling on an oversubscribed node.
#[test]
fn the_pick_takes_the_single_copy_from_a_lowered_threshold() {
    let _job = common::serialize();
    let path = common::scratch("single-copy-pick-threshold.json");
    // 32,768 doubles: 256 KiB, below the default threshold (1 MiB).
    let out = common::launcher()
        .args([
            "-n", "4", "--len", "32768", "--ops", "2", "--input", "int", "--no-tui",
        ])
        .args(["--timeout-s", "120", "--json"])
        .arg(&path)
        .env("FTCOLL_SINGLE_COPY_MIN_BYTES", "131072")
        .output()
        .unwrap();
    let json = common::take_report(&path, &out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json["exact"], true, "{json}");
    // Only the single copy's notices: 2N − 1 per rank and operation.
    assert_eq!(json["messages"], 4 * 7 * 2, "{json}");
}

#[test]
fn switched_off_the_ring_moves_blocks_through_the_segment_again() {
    let json = exact_ring(3, "2000003", "f64", 1, &[("FTCOLL_SINGLE_COPY", "off")]);
    // Data frames of at most a lane's half: hundreds of them.
    assert!(json["messages"].as_u64().unwrap() > 100, "{json}");
}

#[test]
fn shared_heap_vectors_are_mapped_private_ones_read_by_the_kernel_both_exact() {
    // The launcher's ranks allocate from the shared heap: with it on, the neighbour maps the
    // vectors (input and output apart out of place) and reads them with plain loads; off, the
    // same vectors are private and read by process_vm_readv. 1,500,001 i64 over 3 ranks:
    // unequal blocks, offsets inside the memory file that are not page multiples.
    for heap in ["auto", "off"] {
        for place in [&[][..], &["--out-of-place"][..]] {
            exact_ring_with(
                3,
                ("ring", "1500001", "i64"),
                2,
                &[("FTCOLL_SHARED_HEAP", heap)],
                place,
            );
        }
    }
    // The fault-tolerant ring keeps its input chunk by chunk as it combines mapped blocks.
    exact_ring_with(2, ("ft-ring", "1048577", "f32"), 2, &[], &[]);
}

#[test]
fn a_bad_switch_value_is_one_line_that_names_the_choices() {
    let _job = common::serialize();
    for (switch, choices) in [
        ("FTCOLL_SINGLE_COPY", "auto, on or off"),
        ("FTCOLL_SHARED_HEAP", "auto or off"),
    ] {
        let out = common::launcher()
            .args(["-n", "2", "--algo", "ring", "--len", "100000", "--no-tui"])
            .env(switch, "maybe")
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(switch), "{stderr}");
        assert!(stderr.contains(choices), "{stderr}");
    }
}

#[test]
fn a_rank_killed_during_single_copy_rings_fails_the_job_and_no_result_is_wrong() {
    let _job = common::serialize();
    let victim = std::process::id() % 4;
    let started = Instant::now();
    let (out, json) = common::run_job(
        &[
            "-n",
            "4",
            "--algo",
            "ring",
            "--input",
            "int",
            "--len",
            "1000000",
            "--ops",
            "100000",
            "--no-tui",
            "--fault",
            &format!("kill:rank={victim},at=300ms"),
        ],
        "single-copy-kill.json",
        60,
    );
    assert!(started.elapsed() < Duration::from_secs(50));
    assert!(!out.status.success(), "a job with a failed ring must fail");
    assert_eq!(
        common::failed_ranks(&json),
        vec![u64::from(victim)],
        "{json}"
    );
    assert!(
        json["ops_ok_all_ranks"].as_u64().unwrap() < 100_000,
        "{json}"
    );
    assert_eq!(json["max_rel_error"], 0.0, "{json}");
    assert_eq!(json["wrong"], serde_json::Value::Null, "{json}");
}

#[test]
fn an_average_over_the_single_copy_ring_is_the_mean_not_the_sum() {
    let _job = common::serialize();
    // 2 MiB of doubles a rank, in place and out of place, by the ring and the fault-tolerant
    // ring: the vector holds the sum when the last read ends, and only the path itself can
    // divide it.
    for (algo, place) in [
        ("ring", None),
        ("ring", Some("--out-of-place")),
        ("ft-ring", None),
    ] {
        let mut args = vec![
            "-n", "3", "--algo", algo, "--op", "avg", "--input", "int", "--len", "262144",
            "--no-tui",
        ];
        args.extend(place);
        let (out, json) = common::run_job(&args, "single-copy-avg.json", 60);
        assert!(out.status.success(), "{algo} {place:?}: {json}");
        let error = json["max_rel_error"].as_f64().unwrap();
        assert!(error < 1e-15, "{algo} {place:?}: {json}");
    }
}
