//! Every algorithm family on real ranks over the RDMA backends compiled in (`--features ucx`,
//! `--features ofi`): UCX over its tcp transport, libfabric's tcp and shm providers. Each family
//! runs fault-free and, where the backend survives a dead process, with a rank SIGKILLed
//! mid-loop; the survivors' results must be what they are over shared memory. (UCX's
//! shared-memory transports offer no peer-failure handling in UCX 1.13, which ftcoll requires;
//! libfabric 1.17's shm provider hangs the peers of a rank killed while it holds a shared
//! region's lock: see docs/clusters.md.)

#![cfg(any(feature = "ucx", feature = "ofi"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;

/// A backend configuration: launcher flags and environment.
struct Backend {
    name: &'static str,
    flags: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    /// Whether ranks may be killed: the backend keeps working for the survivors.
    survives_kills: bool,
}

/// A family's job: its flags, operations, and whether its result is approximate (gossip).
struct Family {
    flags: &'static [&'static str],
    ops: u64,
    approximate: bool,
}

const FAMILIES: [Family; 5] = [
    Family {
        flags: &["--algo", "rdb"],
        ops: 20,
        approximate: false,
    },
    Family {
        flags: &["--algo", "corrected-allreduce", "--tolerate", "2"],
        ops: 200,
        approximate: false,
    },
    Family {
        flags: &["--algo", "era-agree"],
        ops: 300,
        approximate: false,
    },
    Family {
        // UCX and libfabric connect lazily: a first contact can take longer than FTCO's
        // usual 50 ms, and a live rank taken for dead breaks FTCO's sums. 300 ms was exceeded
        // once in CI with the backends' tests side by side (48 ranks on two cores), so they now
        // run one at a time (`.ci/run`) and FTCO waits 1 s: a kill costs one operation a few
        // seconds.
        flags: &["--algo", "ftco-allreduce", "--detect-timeout", "1s"],
        ops: 100,
        approximate: false,
    },
    Family {
        flags: &["--algo", "pfcc", "--gossip-period", "2ms"],
        ops: 1,
        approximate: true,
    },
];

fn run_families(backend: &Backend) {
    for family in &FAMILIES {
        // Recursive doubling cannot route around a failure (every survivor gets an error).
        let kills: &[bool] = if family.flags[1] == "rdb" || !backend.survives_kills {
            &[false]
        } else {
            &[false, true]
        };
        for &kill in kills {
            let ops = family.ops.to_string();
            let mut args = vec!["-n", "16", "--input", "int", "--ops", &ops, "--no-tui"];
            args.extend_from_slice(backend.flags);
            args.extend_from_slice(family.flags);
            if kill {
                // Early enough to land inside the (single, ~300 ms) gossip operation: a rank
                // killed just as the others finish is a separate, known gossip issue (docs/papers/000-gossip.md).
                args.extend(["--fault", "kill:rank=5,at=100ms"]);
            }
            let what = format!("{} {:?} kill={kill}", backend.name, family.flags);
            let json = run(&args, backend.env, &what);
            let failed = common::failed_ranks(&json);
            if kill {
                assert_eq!(failed, [5], "{what}: the kill must land mid-loop: {json}");
            } else {
                assert!(failed.is_empty(), "{what}: {json}");
            }
            assert_eq!(json["ops_ok_all_survivors"], family.ops, "{what}: {json}");
            if family.approximate {
                assert_eq!(json["within_eps"], true, "{what}: {json}");
            } else {
                assert_eq!(json["consistent"], true, "{what}: {json}");
                assert_eq!(json["exact"], true, "{what}: {json}");
            }
        }
    }
}

fn run(args: &[&str], env: &[(&str, &str)], what: &str) -> serde_json::Value {
    let path = common::scratch(&format!("rdma-{}.json", std::process::id()));
    let out = common::launcher()
        .args(args)
        .envs(env.iter().copied())
        .arg("--json")
        .arg(&path)
        .args(["--timeout-s", "120"])
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{what}: no report; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    std::fs::remove_file(&path).unwrap();
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["timed_out"], false, "{what}: {json}");
    json
}

fn no_provider_files_left() {
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(':'))
        .collect();
    assert!(
        left.is_empty(),
        "libfabric files left in /dev/shm: {left:?}"
    );
}

#[cfg(feature = "ucx")]
#[test]
fn every_family_over_ucx_tcp() {
    let _job = common::serialize();
    run_families(&Backend {
        name: "ucx/tcp",
        flags: &["--transport", "ucx"],
        env: &[("UCX_TLS", "tcp")],
        survives_kills: true,
    });
}

#[cfg(feature = "ofi")]
#[test]
fn every_family_over_libfabric_tcp() {
    let _job = common::serialize();
    run_families(&Backend {
        name: "ofi/tcp",
        flags: &["--transport", "ofi", "--ofi-provider", "tcp"],
        env: &[],
        survives_kills: true,
    });
    no_provider_files_left();
}

#[cfg(feature = "ofi")]
#[test]
fn every_family_over_libfabric_shm() {
    let _job = common::serialize();
    run_families(&Backend {
        name: "ofi/shm",
        flags: &["--transport", "ofi", "--ofi-provider", "shm"],
        env: &[],
        // A rank killed while it holds a shared region's spinlock leaves its peers spinning
        // inside libfabric 1.17 (about 1 job in 25 with corrected-allreduce); the kill runs
        // then test the provider, not ftcoll.
        survives_kills: false,
    });
    no_provider_files_left();
}

/// Long vectors of several types, in many segments, exact over `backend`.
fn run_long_vectors(backend: &Backend) {
    for (algo, dtype) in [("ring", "f64"), ("rdb", "i32"), ("ring", "u64")] {
        let mut args = vec![
            "-n", "4", "--input", "int", "--len", "600000", "--ops", "2", "--no-tui",
        ];
        args.extend_from_slice(backend.flags);
        args.extend(["--algo", algo, "--dtype", dtype]);
        let what = format!("{} {algo} {dtype} long", backend.name);
        let json = run(&args, backend.env, &what);
        assert_eq!(json["exact"], true, "{what}: {json}");
        assert_eq!(json["consistent"], true, "{what}: {json}");
        assert_eq!(json["ops_ok_all_ranks"], 2, "{what}: {json}");
    }
}

#[cfg(feature = "ucx")]
#[test]
fn long_vectors_over_ucx_tcp() {
    let _job = common::serialize();
    run_long_vectors(&Backend {
        name: "ucx/tcp",
        flags: &["--transport", "ucx"],
        env: &[("UCX_TLS", "tcp")],
        survives_kills: true,
    });
}

/// The single copy over a network: each rank's ring reads its blocks out of its left
/// neighbour's registered vector, so only the ring's notices travel as messages. UCX and
/// libfabric emulate the reads over TCP here, slower than their messages, so the test asks
/// for them.
fn ring_reads_the_neighbours_vectors(backend: &Backend) {
    // 3 MiB blocks of f64 (1.5 of i32) at n = 4: several reads of the reader's 1 MiB.
    let mut ring = vec![
        "-n", "4", "--input", "int", "--len", "3145728", "--no-tui", "--algo", "ring",
    ];
    ring.extend_from_slice(backend.flags);
    for (dtype, out_of_place) in [("f64", false), ("i32", false), ("u64", true)] {
        let mut args = ring.clone();
        args.extend(["--ops", "2", "--dtype", dtype]);
        if out_of_place {
            args.push("--out-of-place");
        }
        let what = format!(
            "{} single-copy ring {dtype}, out of place {out_of_place}",
            backend.name
        );
        let json = run(&args, backend.env, &what);
        assert_eq!(json["exact"], true, "{what}: {json}");
        assert_eq!(json["consistent"], true, "{what}: {json}");
        assert_eq!(json["ops_ok_all_ranks"], 2, "{what}: {json}");
        // 2N - 1 notices per rank and operation: no block moved in a message.
        assert_eq!(json["messages"], 2 * 4 * 7, "{what}: {json}");
    }
    // A rank killed inside the operation: the ring is not fault tolerant, so every survivor
    // ends with an error, never a result read out of a vector taken back.
    let mut args = ring.clone();
    args.extend(["--ops", "3", "--fault", "kill:rank=2,op=1,at=2ms"]);
    let out = common::launcher()
        .args(args)
        .envs(backend.env.iter().copied())
        .args(["--timeout-s", "120"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{}: a killed rank's job succeeded: {stderr}",
        backend.name
    );
    assert!(stderr.contains("ranks [2] failed"), "{stderr}");
    assert!(stderr.contains("the job failed"), "{stderr}");
    assert!(!stderr.contains("result is wrong"), "{stderr}");
}

/// The registration cache: a vector in the shared heap (the job's, here) is registered once
/// and kept for later calls; with the heap off nothing vouches for the memory between calls,
/// so each call registers it for itself, outside the cache. The lent word is kept either way.
fn a_reused_vector_is_registered_once(backend: &Backend) {
    for (heap, kept, made) in [("auto", 4, 2), ("off", 2, 1)] {
        let out = common::launcher()
            .args([
                "-n", "2", "--input", "int", "--len", "1048576", "--ops", "3",
            ])
            .args(["--no-tui", "--algo", "ring", "--timeout-s", "120"])
            .args(backend.flags)
            .envs(backend.env.iter().copied())
            .env("FTCOLL_SHARED_HEAP", heap)
            .env("FTCOLL_LOG", "ftcoll_runtime::comm::single_copy=debug")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{} heap {heap}: {stderr}",
            backend.name
        );
        // Each rank logs its counts before each call: the third call's show the first two.
        let third = format!("hits={kept} misses={made}");
        let lines = stderr.lines().filter(|l| l.contains("registrations"));
        assert_eq!(
            lines.filter(|l| l.ends_with(&third)).count(),
            2,
            "{} heap {heap}: expected both ranks at {third}: {stderr}",
            backend.name
        );
    }
}

#[cfg(feature = "ucx")]
const UCX_READS: Backend = Backend {
    name: "ucx/tcp",
    flags: &["--transport", "ucx"],
    env: &[("UCX_TLS", "tcp"), ("FTCOLL_SINGLE_COPY", "on")],
    survives_kills: true,
};

#[cfg(feature = "ofi")]
const OFI_READS: Backend = Backend {
    name: "ofi/tcp",
    flags: &["--transport", "ofi", "--ofi-provider", "tcp"],
    env: &[("FTCOLL_SINGLE_COPY", "on")],
    survives_kills: true,
};

#[cfg(feature = "ucx")]
#[test]
fn the_ring_reads_the_neighbours_vectors_over_ucx() {
    let _job = common::serialize();
    ring_reads_the_neighbours_vectors(&UCX_READS);
}

#[cfg(feature = "ucx")]
#[test]
fn a_vector_reused_across_calls_is_registered_once_over_ucx() {
    let _job = common::serialize();
    a_reused_vector_is_registered_once(&UCX_READS);
}

#[cfg(feature = "ofi")]
#[test]
fn the_ring_reads_the_neighbours_vectors_over_libfabric() {
    let _job = common::serialize();
    ring_reads_the_neighbours_vectors(&OFI_READS);
    no_provider_files_left();
}

#[cfg(feature = "ofi")]
#[test]
fn a_vector_reused_across_calls_is_registered_once_over_libfabric() {
    let _job = common::serialize();
    a_reused_vector_is_registered_once(&OFI_READS);
}

#[cfg(feature = "ofi")]
#[test]
fn long_vectors_over_libfabric_tcp() {
    let _job = common::serialize();
    run_long_vectors(&Backend {
        name: "ofi/tcp",
        flags: &["--transport", "ofi", "--ofi-provider", "tcp"],
        env: &[],
        survives_kills: true,
    });
    no_provider_files_left();
}

/// A backend named but not usable is one line naming what to install or enable.
#[test]
fn auto_is_shared_memory_here_and_bad_names_are_one_line() {
    let _job = common::serialize();
    let out = common::launcher()
        .args(["-n", "2", "--transport", "verbs", "--no-tui"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("use auto, shm, tcp, ucx or ofi"),
        "{stderr}"
    );
    let json = run(&["-n", "4", "--algo", "rdb", "--no-tui"], &[], "auto");
    assert_eq!(json["transport"], "shm", "no RDMA device here: {json}");
}
