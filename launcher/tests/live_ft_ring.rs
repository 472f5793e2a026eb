//! The fault-tolerant allreduces on real ranks, the ring (`ft-ring`) and the corrected trees in
//! segments (`ft-corrected`): 16 MiB per rank over shared memory and TCP, one or two ranks
//! SIGKILLed at points drawn within the first two operations; every survivor returns the same
//! exact vector, the aggregate over the survivors plus each killed rank at every survivor or at
//! none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;

use ftcoll_algos::rng::SimRng;

/// 16 MiB of 8-byte elements.
const LEN: &str = "2097152";

/// Runs the job with `kills` ranks killed at points drawn from `seed`; returns the report.
fn killed_job(transport: &str, dtype: &str, kills: u32, seed: u64) -> serde_json::Value {
    killed_job_with(
        transport,
        dtype,
        (kills, 0..15),
        seed,
        &["--algo", "ft-ring"],
    )
}

/// [`killed_job`] with the algorithm and more flags in `flags`, the kills drawn `within`
/// milliseconds into the operation.
fn killed_job_with(
    transport: &str,
    dtype: &str,
    (kills, within): (u32, std::ops::Range<u64>),
    seed: u64,
    flags: &[&str],
) -> serde_json::Value {
    let _job = common::serialize();
    let mut rng = SimRng::new(seed);
    let n = 5u32;
    let mut args: Vec<String> = [
        "-n",
        "5",
        "--transport",
        transport,
        "--dtype",
        dtype,
        "--len",
        LEN,
        "--ops",
        "3",
        "--input",
        "int",
        "--no-tui",
        "--timeout-s",
        "120",
    ]
    .map(String::from)
    .to_vec();
    args.extend(flags.iter().map(|f| f.to_string()));
    let mut victims: Vec<u32> = Vec::new();
    while victims.len() < kills as usize {
        let rank = rng.below(u64::from(n)) as u32;
        if !victims.contains(&rank) {
            victims.push(rank);
            // A point in the first or second operation (each takes longer than `within`
            // here), so that the job is never over before the kill: from its start to well
            // into its data.
            let at = within.start + rng.below(within.end - within.start);
            let op = rng.below(2);
            args.push("--fault".into());
            args.push(format!("kill:rank={rank},op={op},at={at}ms"));
        }
    }
    let path = common::scratch(&format!("ft-ring-{transport}-{kills}-{seed}.json"));
    let out = common::launcher()
        .args(&args)
        .arg("--json")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        json["failures"].as_array().map(Vec::len),
        Some(kills as usize),
        "{json}"
    );
    assert_eq!(json["exact"], true, "{args:?}: {json}");
    assert_eq!(json["consistent"], true, "{args:?}: {json}");
    assert_eq!(json["ops_ok_all_survivors"], 3, "{args:?}: {json}");
    json
}

#[test]
fn survivors_return_the_same_exact_vector_over_shared_memory() {
    for (kills, seed) in [(1, 1), (2, 2), (1, 3)] {
        killed_job("shm", "f64", kills, seed);
    }
}

/// Out of place (`ft_allreduce_into`): on shared memory every attempt reads the untouched
/// input and rewrites the whole output, with no copy of the input kept.
#[test]
fn survivors_return_the_same_exact_vector_out_of_place() {
    for (kills, seed) in [(1, 6), (2, 7), (1, 8)] {
        killed_job_with(
            "shm",
            "u64",
            (kills, 0..15),
            seed,
            &["--algo", "ft-ring", "--out-of-place"],
        );
    }
}

#[test]
fn survivors_return_the_same_exact_vector_over_tcp() {
    for (kills, seed) in [(1, 4), (2, 5)] {
        killed_job("tcp", "i64", kills, seed);
    }
}

/// The corrected trees in segments (each segment tolerating f = 1, then 2), over shared memory:
/// a death while the segments stream leaves the segments disagreeing on the rank, and the
/// survivors run the attempt again without it. An operation takes 60 ms or more here, over TCP
/// 110 ms or more, and the kills fall where some segments already hold the victim's input.
#[test]
fn corrected_survivors_return_the_same_exact_vector_over_shared_memory() {
    for (kills, seed, f) in [(1, 11, "1"), (2, 12, "1"), (2, 13, "2")] {
        let flags = ["--algo", "ft-corrected", "--tolerate", f];
        killed_job_with("shm", "f64", (kills, 0..60), seed, &flags);
    }
}

#[test]
fn corrected_survivors_return_the_same_exact_vector_over_tcp() {
    for (kills, seed) in [(1, 14), (2, 15)] {
        let flags = ["--algo", "ft-corrected"];
        killed_job_with("tcp", "i64", (kills, 20..90), seed, &flags);
    }
}

/// A rank killed at the first operation: the survivors complete every operation, none completes
/// at every rank, and the summary says both rather than "0 completed".
#[test]
fn the_summary_counts_operations_at_every_survivor() {
    let _job = common::serialize();
    let (out, json) = common::run_job(
        &[
            "-n",
            "4",
            "--algo",
            "ft-ring",
            "--input",
            "int",
            "--ops",
            "20",
            "--no-tui",
            "--fault",
            "kill:rank=2,op=0",
        ],
        "summary-survivors.json",
        60,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(json["ops_ok_all_survivors"], 20, "{json}");
    assert_eq!(json["ops_ok_all_ranks"], 0, "{json}");
    assert!(
        stdout.contains("20 (20 completed at every survivor, 0 at every rank)"),
        "{stdout}"
    );
}

/// `bench ft-allreduce` end to end (ftcoll's side; the ULFM prefix points nowhere, so Open
/// MPI's side is skipped): every figure of ftcoll's is there, the ULFM way on ftcoll included
/// (an agreement that reports the death rebuilds the agreement tree without the dead rank, and
/// the shrink after it must still leave it out).
#[test]
fn bench_ft_allreduce_measures_every_ftcoll_figure() {
    let _job = common::serialize();
    let path = common::scratch("bench-ft-allreduce.json");
    let out = common::launcher()
        .args([
            "bench",
            "ft-allreduce",
            "--sizes",
            "3",
            "--bytes",
            "1048576",
            "--repeat",
            "2",
            "--iters",
            "3",
            "--ulfm-prefix",
            "/nonexistent",
            "--json",
        ])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let row = &rows[0];
    for key in [
        "ring_us",
        "ft_ring_us",
        "price",
        "ft_ring_crash_us",
        "crash_over_free",
        "ftcoll_shrink_retry_us",
    ] {
        assert!(row[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {row}");
    }
    assert!(row["ulfm_crash_us"].is_null(), "{row}");
}

/// Pinned ranks (the launcher's default) take their cores again by their places among the
/// survivors: with three ranks on two cores, rank 2 shares core 0 with rank 0 until rank 1 dies,
/// then moves to the core rank 1 freed, so the retries run on both cores.
#[test]
fn survivors_move_to_the_cores_the_dead_freed() {
    let _job = common::serialize();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if cores < 2 || std::env::var_os("FTCOLL_BIND").is_some() {
        eprintln!("skipped: needs two cores and the launcher's own pinning");
        return;
    }
    let out = common::launcher()
        .env("FTCOLL_LOG", "info")
        .args([
            "-n", "3", "--algo", "ft-ring", "--input", "int", "--ops", "20",
        ])
        .args(["--no-tui", "--fault", "kill:rank=1,op=2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let moved: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("moved to another core"))
        .collect();
    assert_eq!(moved.len(), 1, "{stderr}");
    assert!(moved[0].contains("rank=2"), "{stderr}");
}
