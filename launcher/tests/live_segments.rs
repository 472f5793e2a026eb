//! FTCO (004) and the corrected reduce (001) in segments on real ranks: 16 MiB per rank, any
//! element type, over shared memory and TCP, with one or two ranks SIGKILLed at points drawn
//! within the first two operations.
//! Every operation either completes with the exact result at every survivor that holds one,
//! or ends in the typed error at every one of them (the crash left the segments counting
//! different ranks); never a wrong vector, never one that counts a rank in some elements only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;

use ftcoll_algos::rng::SimRng;

/// What the typed error says (`CommError::MixedContributors`).
const MIXED: &str = "segments count other ranks than the first";

/// Runs `algo` on `transport` with `len` elements of `dtype` per rank and `kills` ranks killed
/// at points drawn from `seed`, within `within_ms` of the start of the first or second
/// operation (never rank 0 of a broadcast or reduce: 004 assumes the root survives, and a
/// reduce without its root has no result); returns whether the job ended in the typed error.
fn killed_job(
    algo: &str,
    transport: &str,
    (dtype, len): (&str, &str),
    (kills, within_ms): (u32, u64),
    seed: u64,
) -> bool {
    let _job = common::serialize();
    let mut rng = SimRng::new(seed);
    let n = 5u64;
    let first = u64::from(algo != "ftco-allreduce");
    let mut args: Vec<String> = [
        "-n",
        "5",
        "--algo",
        algo,
        "--transport",
        transport,
        "--dtype",
        dtype,
        "--len",
        len,
        "--ops",
        "3",
        "--input",
        "int",
        "--no-tui",
    ]
    .map(String::from)
    .to_vec();
    let mut victims: Vec<u64> = Vec::new();
    while victims.len() < kills as usize {
        let rank = first + rng.below(n - first);
        if !victims.contains(&rank) {
            victims.push(rank);
            let (op, at) = (rng.below(2), rng.below(within_ms));
            args.push("--fault".into());
            args.push(format!("kill:rank={rank},op={op},at={at}ms"));
        }
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, json) = common::run_job(
        &refs,
        &format!("segments-{algo}-{transport}-{seed}.json"),
        120,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(json["wrong"], serde_json::Value::Null, "{args:?}: {json}");
    assert_eq!(json["consistent"], true, "{args:?}: {json}");
    assert_eq!(
        common::failed_ranks(&json).len(),
        kills as usize,
        "{args:?}: {json}"
    );
    if out.status.success() {
        assert_eq!(json["exact"], true, "{args:?}: {json}");
        assert_eq!(json["ops_ok_all_survivors"], 3, "{args:?}: {json}");
        return false;
    }
    // The only way this job may fail: the typed error, at every survivor that holds a result.
    assert!(stderr.contains(MIXED), "{args:?}: {stderr}");
    let failed_ops = json["failed_ops"].as_str().unwrap_or_default();
    assert!(failed_ops.contains("0 never reported"), "{args:?}: {json}");
    if algo == "ftco-allreduce" {
        assert!(failed_ops.contains(": 0 completed"), "{args:?}: {json}");
    }
    true
}

#[test]
fn allreduce_over_shared_memory_is_exact_or_the_typed_error() {
    let mut refused = 0;
    for (kills, seed) in [(1, 1), (2, 2), (1, 3), (1, 4)] {
        refused += u32::from(killed_job(
            "ftco-allreduce",
            "shm",
            ("i64", "2097152"),
            (kills, 150),
            seed,
        ));
    }
    eprintln!("{refused} of 4 jobs refused mixed segments");
}

#[test]
fn allreduce_over_tcp_is_exact_or_the_typed_error() {
    for (kills, seed) in [(1, 5), (2, 6)] {
        killed_job(
            "ftco-allreduce",
            "tcp",
            ("f32", "4194304"),
            (kills, 150),
            seed,
        );
    }
}

/// The corrected reduce, f = 1, over shared memory and TCP.
#[test]
fn corrected_reduce_is_exact_or_the_typed_error() {
    killed_job("corrected-reduce", "shm", ("i64", "2097152"), (1, 30), 10);
    killed_job("corrected-reduce", "tcp", ("u32", "4194304"), (1, 30), 11);
}

#[test]
fn reduce_and_broadcast_are_exact_or_the_typed_error() {
    killed_job("ftco-reduce", "shm", ("u32", "4194304"), (1, 150), 7);
    killed_job("ftco-bcast", "shm", ("u64", "2097152"), (2, 150), 8);
    killed_job("ftco-bcast", "tcp", ("i32", "4194304"), (1, 150), 9);
}
