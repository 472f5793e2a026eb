//! End-to-end runs of the `ftcoll-launch` binary.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

fn launch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ftcoll-launch"))
        .args(args)
        .env_remove("FTCOLL_LOG")
        .output()
        .expect("ftcoll-launch runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ftcoll-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs the launcher with `--json` into a scratch file; asserts success and returns the output
/// and the parsed report.
fn launch_json(args: &[&str], name: &str) -> (Output, serde_json::Value) {
    let path = scratch(name);
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--json", path.to_str().unwrap()]);
    let out = launch(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    (out, json)
}

#[test]
fn a_simulated_run_writes_the_json_schema() {
    let (out, json) = launch_json(
        &["--sim", "-n", "4096", "--algo", "rdb", "--seed", "9"],
        "rdb.json",
    );
    assert_eq!(json["n"], 4096);
    assert_eq!(json["algo"], "rdb");
    assert_eq!(json["rounds"], 12);
    assert_eq!(json["messages"], 12 * 4096);
    assert_eq!(json["sim_time_steps"], 12 * 12);
    assert_eq!(json["seed"], 9);
    assert!(json["max_rel_error"].as_f64().unwrap() < 1e-12);
    assert!(json["wall_s"].as_f64().unwrap() > 0.0);
    assert_eq!(json["transport"], "sim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("rounds            12"), "{stdout}");
}

#[test]
fn faults_and_failures_reach_the_report_and_a_run_outside_the_model_fails() {
    let path = scratch("faults.json");
    let out = launch(&[
        "--sim",
        "-n",
        "64",
        "--fault",
        "kill:rank=3,at=20",
        "--fault",
        "flip-msg:rank=9,bit=63",
        "--detector",
        "perfect:5",
        "--json",
        path.to_str().unwrap(),
    ]);
    // rdb tolerates no crash: the survivors abort, and the run says so with a failing exit.
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("outside what rdb tolerates"), "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(json["consistent"], true);
    assert!(json["wrong"].as_str().unwrap().contains("aborted"));
    assert_eq!(json["failures"][0]["rank"], 3);
    assert_eq!(json["failures"][0]["at_steps"], 20);
    assert_eq!(json["failures"][0]["noticed_at_steps"], 25);
    assert_eq!(json["bit_flips"], 1);
    assert!(json["ranks_aborted"].as_u64().unwrap() > 0);
}

#[test]
fn ardb_stops_early_at_low_accuracy() {
    let (_, json) = launch_json(
        &["--sim", "-n", "65536", "--algo", "ardb", "--eps", "1e-2"],
        "ardb.json",
    );
    let stop = json["oracle_stop_round"].as_u64().unwrap();
    assert!(stop < 16, "ARDB needed {stop} of 16 rounds for 1e-2");
}

#[test]
fn the_determinism_check_passes() {
    let out = launch(&[
        "--sim",
        "-n",
        "128",
        "--algo",
        "pf",
        "--fault",
        "drop:rank=all,rate=0.05",
        "--check-determinism",
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("determinism check passed"));
}

#[test]
fn bad_arguments_get_one_line_errors_and_a_failing_exit() {
    let cases: &[(&[&str], &str)] = &[
        (&["--sim", "--algo", "nosuch"], "unknown algorithm"),
        (
            &["--sim", "--algo", "rdb", "--op", "bxor"],
            "drop --sim and add --dtype",
        ),
        (
            &["--algo", "ring", "--op", "band", "--len", "10"],
            "does not apply to f64 vectors",
        ),
        (
            &["--algo", "corrected-allreduce", "--op", "prod"],
            "cannot compute 'prod'",
        ),
        (&["--sim", "-n", "0"], "at least one rank"),
        (
            &["--sim", "--algo", "pfcc", "--tau=-1"],
            "--tau must be a positive number",
        ),
        (
            &["--sim", "--algo", "pfcc", "--precision", "f16"],
            "unknown --precision",
        ),
        (
            &["--sim", "--algo", "pfcc", "--stop", "never"],
            "unknown --stop",
        ),
        (
            &["--sim", "--algo", "hps", "--topology", "ring"],
            "permutations of all ranks",
        ),
        (
            &["--algo", "pfcc", "--gossip-period", "5"],
            "real runs need a time with its unit",
        ),
        (
            &["--sim", "-n", "12", "--topology", "hypercube"],
            "power of two",
        ),
        (&["--sim", "--topology", "moebius"], "moebius"),
        (&["--sim", "--fault", "kill:rank=x"], "bad value"),
        (
            &["--sim", "--fault", "explode:rank=1"],
            "unknown fault kind",
        ),
        (
            &["--sim", "-n", "8", "--fault", "kill:rank=99"],
            "only 8 ranks",
        ),
        (&["--sim", "--op", "median"], "unknown reduction operator"),
        (&["--sim", "--detector", "psychic"], "--detector"),
        (&["--sim", "--algo", "ardb", "--eps", "3"], "--eps"),
        (&["-n", "4", "--transport", "pigeon"], "unknown transport"),
        (
            &["-n", "4", "--transport", "ucx"],
            "not compiled into this build",
        ),
        (&["-n", "4", "--algo", "ardb"], "pass --steps K"),
        (
            &["-n", "4", "--algo", "ardb", "--steps", "0"],
            "at least one exchange",
        ),
        (
            &["-n", "4", "--algo", "ftco-allreduce", "--ftco-step-model"],
            "a simulator model",
        ),
        (
            &[
                "--sim",
                "--algo",
                "pf",
                "--op",
                "avg",
                "--gossip-sum",
                "rank0-weight",
            ],
            "forms a sum",
        ),
        (
            &["-n", "4", "--algo", "pf", "--gossip-sum", "rank0-weight"],
            "for the simulator",
        ),
        (
            &[
                "--sim",
                "-n",
                "8",
                "--algo",
                "pf",
                "--gossip-sum",
                "rank0-weight",
                "--fault",
                "kill:rank=0,at=5",
            ],
            "cannot survive a crash",
        ),
        (
            &["--sim", "--algo", "pf", "--gossip-sum", "half"],
            "unknown --gossip-sum",
        ),
        (&["-n", "4", "--fault", "kill:rank=1,at=50"], "give a unit"),
        // A rank-side fault at a rank other than 0.
        (
            &["-n", "4", "--fault", "flip-msg:rank=2,bit=40,at=3"],
            "give a unit",
        ),
        (
            &["-n", "4", "--fault", "kill:rank=9,at=5ms"],
            "only 4 ranks",
        ),
        (&["-n", "0"], "at least one rank"),
        (
            &["-n", "2", "--", "/nonexistent/program"],
            "cannot start rank",
        ),
        (&["experiment", "fig99"], "unknown experiment"),
        (&["bench", "warp"], "unknown benchmark"),
        (
            &["bench", "allreduce", "--transport", "ucx", "--mpi", "none"],
            "--transport takes shm or tcp",
        ),
        (&["--sim", "-n", "abc"], "invalid value"),
        (&["--sim", "--warp-drive"], "unexpected argument"),
        (&["--sim", "--len", "0"], "--len"),
        (&["-n", "2", "--timeout-s", "0"], "--timeout-s"),
        (
            &["-n", "3", "--algo", "ring", "--tolerate", "2"],
            "--tolerate sets f of the corrected-tree algorithms",
        ),
        (&["experiment", "fig8", "--placements", "0"], "--placements"),
        (
            &["-n", "3", "--algo", "ft-corrected", "--failure-info", "bit"],
            "ft-corrected's segments always report failures as lists",
        ),
        (
            &["bench", "ft-allreduce", "--algo", "ring"],
            "bench ft-allreduce --algo takes ft-ring or ft-corrected, not 'ring'",
        ),
        // Each list of rank counts is named in its own error.
        (
            &["bench", "ftco", "--fig6-sizes", "1"],
            "--fig6-sizes must be at least 8",
        ),
        (
            &["bench", "console", "--console-sizes", "0"],
            "--console-sizes must be at least 1",
        ),
        // Terabytes a rank: refused before any rank starts, not an abort in each.
        (
            &["-n", "2", "--len", "99999999999", "--no-tui"],
            "GiB available",
        ),
        (
            &["--sim", "-n", "1048576", "--len", "100000"],
            "GiB available",
        ),
        (
            &[
                "bench",
                "allreduce",
                "--bytes",
                "1073741824",
                "--sizes",
                "4096",
            ],
            "GiB available",
        ),
        (
            &["-n", "2", "--algo", "rdb", "--out-of-place"],
            "--out-of-place applies to --algo ring and ft-ring",
        ),
        (
            &[
                "bench",
                "allreduce",
                "--sizes",
                "2",
                "--bytes",
                "8",
                "--mpi",
                "openmpi",
                "--mpi-prebuilt",
                "/tmp",
                "--ulfm-prefix",
                "/nonexistent-ulfm",
            ],
            "--mpi-prebuilt: no /nonexistent-ulfm/bin/mpirun; pass --ulfm-prefix",
        ),
        (
            &["-n", "2", "--library-pick", "--algo", "ring"],
            "--library-pick runs the allreduce the library picks; drop --algo",
        ),
        (
            &["--sim", "--library-pick"],
            "--library-pick applies to real runs only",
        ),
        (
            &["--sim", "--algo", "ft-ring", "--out-of-place"],
            "--out-of-place applies to real runs only",
        ),
        (
            &["bench", "corrected", "--out-of-place"],
            "--out-of-place applies to bench allreduce and ft-allreduce",
        ),
    ];
    for (args, needle) in cases {
        let out = launch(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?}: not one line: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn help_lists_the_algorithms_and_the_fault_syntax() {
    let out = launch(&["--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "rdb",
        "ardb",
        "era-agree",
        "ftco-allreduce",
        "flip-msg:rank=R",
        "FTCOLL_LOG",
    ] {
        assert!(text.contains(needle), "--help lacks {needle}");
    }
}

#[test]
fn bench_sim_reports_throughput_and_memory() {
    let (_, json) = launch_json(
        &["bench", "sim", "-n", "4096", "--repeat", "3"],
        "bench.json",
    );
    assert!(json["median_events_per_s"].as_f64().unwrap() > 0.0);
    assert!(json["peak_rss_bytes_per_rank"].as_f64().is_some());
}

/// An RDMA backend this build lacks is one line naming the cargo feature to build with.
#[test]
fn a_backend_not_compiled_in_names_its_feature() {
    for (name, compiled) in [
        ("ucx", cfg!(feature = "ucx")),
        ("ofi", cfg!(feature = "ofi")),
    ] {
        if compiled {
            continue;
        }
        let out = launch(&["-n", "2", "--transport", name, "--no-tui"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&format!("--features {name}")), "{stderr}");
    }
}

#[test]
fn a_user_program_that_outlives_the_time_limit_is_named_a_timeout() {
    let out = launch(&["-n", "2", "--timeout-s", "1", "--", "/bin/sleep", "30"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("did not finish within --timeout-s 1"),
        "{stderr}"
    );
}

/// A rank of a cluster job (whose launcher cannot see the node's memory) refuses vectors it
/// cannot allocate with its error, before joining, instead of aborting in the allocator.
#[test]
fn a_rank_that_cannot_hold_its_vectors_says_so_before_joining() {
    let out = launch(&[
        "__rank",
        "--algo",
        "rdb",
        "--op",
        "sum",
        "--input",
        "int",
        "--len",
        "99999999999",
        "--seed",
        "1",
        "--ops",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("cannot allocate"), "{stderr}");
    assert!(stderr.contains("lower --len"), "{stderr}");
    assert!(!stderr.contains("memory allocation of"), "{stderr}");
}
