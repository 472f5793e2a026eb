//! The data path on real ranks: vectors larger than a shared-memory lane and than a control
//! message, every element type, and ranks that pass different vectors (every rank gets the
//! typed error, none hangs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;

/// Runs a built-in job that must succeed with an exact result, under `env`; its JSON report.
fn exact_job(args: &[&str], env: &[(&str, &str)], name: &str) -> serde_json::Value {
    let _job = common::serialize();
    let path = common::scratch(name);
    let out = common::launcher()
        .args(args)
        .args(["--input", "int", "--no-tui", "--timeout-s", "120", "--json"])
        .arg(&path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(json["exact"], true, "{args:?}: {json}");
    assert_eq!(json["consistent"], true, "{args:?}: {json}");
    assert_eq!(json["ops_ok_all_ranks"], json["ops"], "{args:?}: {json}");
    json
}

#[test]
fn vectors_many_lanes_long_are_exact_with_every_allreduce_and_type() {
    // 64 KiB lanes hold frames of 32 KiB: 300 000 elements are dozens of segments per rank.
    let lanes = [("FTCOLL_SHM_LANE_BYTES", "65536")];
    for (algo, dtype) in [
        ("rdb", "f64"),
        ("ring", "i32"),
        ("ring", "u64"),
        ("direct", "f32"),
        ("rdb", "i64"),
        ("ring", "u32"),
        ("chain-bcast", "i64"),
        ("chain-reduce", "f32"),
        ("rhd", "i64"),
        ("rhd", "f32"),
    ] {
        let args = [
            "-n", "3", "--algo", algo, "--dtype", dtype, "--len", "300000", "--ops", "2",
        ];
        exact_job(&args, &lanes, &format!("lanes-{algo}-{dtype}.json"));
    }
}

#[test]
fn a_vector_larger_than_the_old_control_cap_is_exact_over_tcp() {
    // 1 MiB was the old cap on one control message; the result vector no longer travels there.
    for dtype in ["f64", "i32"] {
        let args = [
            "-n",
            "4",
            "--transport",
            "tcp",
            "--algo",
            "ring",
            "--dtype",
            dtype,
            "--len",
            "200000",
        ];
        exact_job(&args, &[], &format!("tcp-{dtype}.json"));
    }
}

/// The fault-tolerant collectives carry their vector in one frame; over TCP a frame of
/// megabytes outgrows the sockets' buffers and leaves only as the receiver reads it. A rank
/// that waited for its own sends to leave without reading deadlocked with a peer doing the
/// same (the corrected broadcast of 4 MB at n = 4 hung), and FTCO's 100 ms timeouts took
/// live ranks busy moving 24 MB for dead and had them fenced.
#[test]
fn fault_tolerant_collectives_move_vectors_larger_than_the_sockets_over_tcp() {
    // FTCO takes a rank silent past its timeout for dead and fences it (fail-stop by
    // construction). Beside the rest of the suite on two cores a 24 MB operation took 2-4 s,
    // slower than the 100 MiB/s its default timeout allows a transfer: a live rank was fenced
    // and the job, correct for its survivors, lost a rank. This test is about the size of the
    // vectors, so its timeout leaves room for that load.
    for (algo, len, timeout) in [
        ("corrected-bcast", "500000", None),
        ("corrected-allreduce", "1000000", None),
        ("ftco-allreduce", "3000000", Some("5s")),
    ] {
        let mut args = vec![
            "-n",
            "4",
            "--transport",
            "tcp",
            "--algo",
            algo,
            "--len",
            len,
            "--ops",
            "2",
        ];
        if let Some(timeout) = timeout {
            args.extend(["--detect-timeout", timeout]);
        }
        exact_job(&args, &[], &format!("tcp-ft-{algo}.json"));
    }
}

#[test]
fn a_long_vector_segments_under_rdb() {
    // Recursive doubling over more segments than the window.
    exact_job(
        &["-n", "2", "--algo", "rdb", "--len", "1000000"],
        &[],
        "rdb-long.json",
    );
}

/// A real run without `--algo` runs what an application's `Communicator::allreduce` runs.
#[test]
fn without_algo_a_real_run_is_the_library_pick() {
    let json = exact_job(&["-n", "2", "--len", "1000000"], &[], "default-long.json");
    assert_eq!(json["algo"], "allreduce (library pick)", "{json}");
}

/// `--library-pick` runs what `Communicator::allreduce` picks at each size: recursive doubling
/// at 8 bytes, the ring through the segment at 16 KiB, the single-copy ring from 1 MiB, and
/// the ring over TCP, in place and out of place.
#[test]
fn the_library_pick_is_exact_at_every_size() {
    for (len, extra) in [
        ("1", &[][..]),
        ("2048", &[][..]),
        ("262144", &[][..]),
        ("262144", &["--out-of-place"][..]),
        ("262144", &["--dtype", "u64", "--op", "bxor"][..]),
        ("131072", &["--transport", "tcp"][..]),
    ] {
        let mut args = vec!["-n", "3", "--library-pick", "--len", len, "--ops", "2"];
        args.extend_from_slice(extra);
        let json = exact_job(&args, &[], "library-pick.json");
        assert_eq!(json["algo"], "allreduce (library pick)");
        if len == "262144" && extra.is_empty() {
            // The single-copy ring: 2N - 1 notices per rank and operation, where recursive
            // doubling (the default) would send its vector in 12 segments per step.
            assert_eq!(json["messages"], 2 * 3 * 5, "{json}");
        }
    }
}

#[test]
fn ranks_that_pass_different_vectors_all_get_the_typed_error_and_go_on() {
    let _job = common::serialize();
    let program = common::example("shapes");
    for (n, len, odd, what, call) in [
        ("4", "1000", "3", "length", "pick"),
        // 8,191 doubles take recursive doubling, 8,192 the (single-copy) ring: ranks that
        // run different algorithms must still tell each other the shapes differ.
        ("3", "8191", "1", "length", "pick"),
        // The same across the single copy's threshold (1 MiB: 131,072 doubles), and two
        // types where every rank reads its neighbour's vector.
        ("3", "131071", "2", "length", "pick"),
        ("3", "300000", "0", "type", "pick"),
        ("3", "100000", "0", "type", "pick"),
        ("5", "10", "2", "length", "pick"),
        ("4", "300000", "1", "length", "ft"),
        // The fault-tolerant ring across the single copy's threshold, and with two types.
        ("3", "131071", "2", "length", "ft"),
        ("3", "300000", "0", "type", "ft"),
        ("3", "1000", "2", "type", "ft"),
        // Recursive halving and doubling: the odd rank folded into its neighbour (rank 0 of
        // 3), or one of the power-of-two schedule.
        ("3", "100000", "0", "length", "rhd"),
        ("5", "1000", "3", "type", "rhd"),
    ] {
        let out = common::launcher()
            .args(["-n", n, "--timeout-s", "60", "--"])
            .arg(&program)
            .args([len, odd, what, call])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "n={n} {what}: {}{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        let told = stdout
            .lines()
            .filter(|l| l.contains("pass the same type and length"))
            .count();
        assert_eq!(
            told.to_string(),
            n,
            "every rank got the typed error: {stdout}"
        );
    }
}

#[test]
fn a_dtype_an_algorithm_cannot_reduce_is_one_line_before_anything_starts() {
    let out = common::launcher()
        .args([
            "-n",
            "4",
            "--algo",
            "corrected-allreduce",
            "--dtype",
            "i32",
            "--no-tui",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reduces f64 vectors"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let out = common::launcher()
        .args(["-n", "2", "--dtype", "i32", "--op", "avg", "--no-tui"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("does not apply to i32"), "{stderr}");
    let out = common::launcher()
        .args([
            "-n",
            "4",
            "--algo",
            "corrected-allreduce",
            "--len",
            "10000000",
            "--no-tui",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("carries its vector in one frame"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let out = common::launcher()
        .args(["-n", "2", "--dtype", "f16", "--no-tui"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("use f64, f32, i32, i64, u32 or u64"));
}

#[test]
fn reduce_scatter_allgather_and_the_out_of_place_allreduce_are_exact() {
    let _job = common::serialize();
    let program = common::example("collectives");
    for (n, len, lanes) in [
        ("3", "50000", "65536"),
        ("4", "7", "65536"),
        // From 1 MiB: the single-copy ring, out of place (plain and fault-tolerant).
        ("2", "300000", ""),
        ("3", "300000", ""),
    ] {
        let mut command = common::launcher();
        if !lanes.is_empty() {
            command.env("FTCOLL_SHM_LANE_BYTES", lanes);
        }
        let out = command
            .args(["-n", n, "--timeout-s", "120", "--"])
            .arg(&program)
            .arg(len)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "n={n} len={len}: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("every collective exact"));
    }
}

#[test]
fn products_and_bitwise_operators_over_integer_vectors_are_exact() {
    // Judged against the aggregate built in the vector's type (a product wraps, and a bitwise
    // operator has no f64 form); long enough for the ring's segments and the sampled report.
    for (algo, op, dtype) in [
        ("ring", "bxor", "u64"),
        ("rdb", "prod", "i32"),
        ("ring", "band", "i64"),
    ] {
        let args = [
            "-n", "3", "--algo", algo, "--op", op, "--dtype", dtype, "--len", "300000",
        ];
        exact_job(&args, &[], &format!("typed-{algo}-{op}.json"));
    }
}

#[test]
fn a_rank_killed_during_recursive_halving_fails_the_job_and_no_result_is_wrong() {
    let _job = common::serialize();
    // Four ranks (one folded pair would hide nothing: every input reaches every result), TCP
    // and shared memory, the kill in the middle of a stream of operations.
    for transport in ["shm", "tcp"] {
        let victim = std::process::id() % 4;
        let (out, json) = common::run_job(
            &[
                "-n",
                "4",
                "--algo",
                "rhd",
                "--transport",
                transport,
                "--input",
                "int",
                "--len",
                "100000",
                "--ops",
                "100000",
                "--no-tui",
                "--fault",
                &format!("kill:rank={victim},at=300ms"),
            ],
            "rhd-kill.json",
            60,
        );
        assert!(!out.status.success(), "{transport}: a failed job must fail");
        assert_eq!(
            common::failed_ranks(&json),
            vec![u64::from(victim)],
            "{json}"
        );
        assert!(
            json["ops_ok_all_ranks"].as_u64().unwrap() < 100_000,
            "{json}"
        );
        assert_eq!(json["max_rel_error"], 0.0, "{transport}: {json}");
        assert_eq!(
            json["wrong"],
            serde_json::Value::Null,
            "{transport}: {json}"
        );
    }
}
