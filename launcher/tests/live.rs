//! Real multi-process jobs: exact results over both transports, killed and stopped ranks, a
//! killed launcher, and hostile control connections. After every test no process of the job
//! remains.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{example, launcher, scratch, serialize};

/// Runs a job to completion (at most 60 s) and returns its output and JSON report.
fn run_job(args: &[&str], name: &str) -> (Output, serde_json::Value) {
    common::run_job(args, name, 60)
}

/// A job whose algorithm does not survive the failure it met: the survivors' operation fails,
/// and the launcher says so with a failing exit after writing its report.
fn assert_failed_loudly(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: exited 0 after a failure");
    assert!(stderr.contains("the job failed"), "{what}: {stderr}");
}

fn no_ftcoll_files_in_dev_shm() {
    let leftovers: Vec<_> = std::fs::read_dir("/dev/shm")
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !leftovers
            .iter()
            .any(|f| f.to_string_lossy().contains("ftcoll")),
        "{leftovers:?}"
    );
}

fn pid_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie has exited; only its parent's bookkeeping remains.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn sixty_four_ranks_sum_exactly_over_shared_memory_and_tcp() {
    let _job = serialize();
    for transport in ["shm", "tcp"] {
        let (out, json) = run_job(
            &[
                "-n",
                "64",
                "--input",
                "int",
                "--ops",
                "20",
                "--transport",
                transport,
                "--no-tui",
            ],
            &format!("exact-{transport}.json"),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(json["exact"], true, "{transport}: {json}");
        assert_eq!(json["ops_ok_all_ranks"], 20, "{transport}");
        assert_eq!(json["transport"], transport);
        assert_eq!(json["messages"], 20 * 64 * 6);
        assert!(json["failures"].as_array().unwrap().is_empty());
        assert!(json["wireup_s"].as_f64().unwrap() > 0.0);
        assert!(json["peak_mem_total_kb"].as_u64().unwrap() > 0);
    }
    no_ftcoll_files_in_dev_shm();
}

#[test]
fn a_rank_killed_mid_loop_is_reported_to_survivors_in_bounded_time() {
    let _job = serialize();
    // A different victim on every run of the suite; the report says which.
    let victim = std::process::id() % 16;
    for (algo, transport) in [("rdb", "shm"), ("rdb", "tcp"), ("direct", "shm")] {
        let started = Instant::now();
        let (out, json) = run_job(
            &[
                "-n",
                "16",
                "--algo",
                algo,
                "--input",
                "int",
                "--ops",
                "10000000",
                "--no-tui",
                "--transport",
                transport,
                "--fault",
                &format!("kill:rank={victim},at=150ms"),
            ],
            &format!("kill-{algo}-{transport}.json"),
        );
        assert!(started.elapsed() < Duration::from_secs(30), "{transport}");
        // Neither algorithm survives a crash: the operation in flight fails at the survivors.
        assert_failed_loudly(&out, transport);
        let failures = json["failures"].as_array().unwrap();
        assert_eq!(failures.len(), 1, "{transport}: {json}");
        assert_eq!(failures[0]["rank"], victim);
        assert_eq!(failures[0]["cause"], "exit");
        assert!(failures[0]["how"].as_str().unwrap().contains("signal 9"));
        let ok = json["ops_ok_all_ranks"].as_u64().unwrap();
        assert!(
            ok < 10_000_000,
            "{transport}: the loop did not stop at the failure"
        );
        // Every result returned before the failure is exact, and none is wrong.
        assert_eq!(json["max_rel_error"], 0.0, "{transport}: {json}");
        assert_eq!(
            json["wrong"],
            serde_json::Value::Null,
            "{transport}: {json}"
        );
        assert!(json["failed_ops"].is_string(), "{transport}: {json}");
    }
}

#[test]
fn a_rank_killing_itself_at_an_operation_stops_the_loop_there() {
    let _job = serialize();
    let (out, json) = run_job(
        &[
            "-n",
            "8",
            "--input",
            "int",
            "--ops",
            "50",
            "--no-tui",
            "--fault",
            "kill:rank=3,op=7",
        ],
        "opkill.json",
    );
    assert_failed_loudly(&out, "kill at operation 7");
    // Rank 3 finished operation 6 before dying, so every rank had started it and operations 0-5
    // completed everywhere. Operation 6 itself completes at every rank unless the notice reaches
    // a rank still waiting on a live peer inside it: recursive doubling then fails it there.
    let ok = json["ops_ok_all_ranks"].as_u64().unwrap();
    assert!((6..=7).contains(&ok), "{json}");
    assert_eq!(json["failures"][0]["rank"], 3);
}

#[test]
fn a_node_failure_takes_exactly_the_ranks_of_that_node() {
    let _job = serialize();
    let (out, json) = run_job(
        &[
            "-n",
            "16",
            "--ranks-per-node",
            "4",
            "--input",
            "int",
            "--ops",
            "10000000",
            "--no-tui",
            "--fault",
            "kill-node:node=2,at=100ms",
        ],
        "node.json",
    );
    assert_failed_loudly(&out, "node kill");
    assert_eq!(common::failed_ranks(&json), [8, 9, 10, 11], "{json}");
}

#[test]
fn a_stopped_rank_is_suspected_killed_and_then_reported() {
    let _job = serialize();
    let (out, json) = run_job(
        &[
            "-n",
            "8",
            "--input",
            "int",
            "--ops",
            "10000000",
            "--no-tui",
            // A 1 s suspicion keeps a loaded machine from delaying a healthy rank's heartbeat
            // into a false suspicion; the stopped rank is still caught within a second.
            "--heartbeat-ms",
            "50",
            "--suspect-ms",
            "1000",
            "--fault",
            "stop:rank=6,at=100ms",
        ],
        "stop.json",
    );
    assert_failed_loudly(&out, "stopped rank");
    let failures = json["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{json}");
    assert_eq!(failures[0]["rank"], 6);
    assert_eq!(failures[0]["cause"], "heartbeat-timeout");
}

#[test]
fn killing_the_launcher_takes_every_rank_with_it() {
    let _job = serialize();
    let mut child = launcher()
        .args([
            "-n",
            "12",
            "--ops",
            "1000000000",
            "--no-tui",
            "--timeout-s",
            "120",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    let ranks = loop {
        let ranks = children_of(pid);
        if ranks.len() == 12 {
            break ranks;
        }
        assert!(Instant::now() < deadline, "ranks did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ranks.iter().all(|&r| pid_gone(r)) {
        assert!(
            Instant::now() < deadline,
            "ranks outlived their launcher: {ranks:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    no_ftcoll_files_in_dev_shm();
}

/// Reads the launcher's stderr until it logs its control address.
fn control_address(stderr: &mut BufReader<std::process::ChildStderr>) -> String {
    let mut line = String::new();
    for _ in 0..100 {
        line.clear();
        if stderr.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(at) = line.find("control_addr=") {
            let rest = &line[at + "control_addr=".len()..];
            return rest
                .split_whitespace()
                .next()
                .unwrap()
                .trim_matches('"')
                .to_string();
        }
    }
    panic!("the launcher did not log its control address");
}

fn read_some(stream: &mut TcpStream) -> usize {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 256];
    stream.read(&mut buf).unwrap_or(0)
}

#[test]
fn hostile_control_connections_are_refused_while_the_job_completes() {
    let _job = serialize();
    let path = scratch("hostile.json");
    let mut child = launcher()
        .args([
            "-n",
            "4",
            "--input",
            "int",
            "--ops",
            "30000",
            "--no-tui",
            // About a second on an idle machine; ranks that spin on an oversubscribed, busy
            // one may take a minute.
            "--timeout-s",
            "300",
            "--json",
        ])
        .arg(&path)
        .env("FTCOLL_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let address = control_address(&mut stderr);
    // 1. A hello for rank 1 with a proof made from the wrong secret.
    let mut wrong = TcpStream::connect(&address).unwrap();
    assert!(read_some(&mut wrong) > 0, "no challenge");
    let mut hello = vec![2u8];
    hello.extend_from_slice(&0xFC0C_C7A1u32.to_le_bytes());
    hello.extend_from_slice(&1u32.to_le_bytes());
    hello.extend_from_slice(&1u32.to_le_bytes());
    hello.extend_from_slice(&[0xAB; 32]);
    hello.extend_from_slice(&0u32.to_le_bytes());
    let mut framed = (hello.len() as u32).to_le_bytes().to_vec();
    framed.extend_from_slice(&hello);
    wrong.write_all(&framed).unwrap();
    assert_eq!(read_some(&mut wrong), 0, "a wrong secret was not refused");
    // 2. An oversized length prefix.
    let mut oversized = TcpStream::connect(&address).unwrap();
    read_some(&mut oversized);
    oversized.write_all(&u32::MAX.to_le_bytes()).unwrap();
    assert_eq!(read_some(&mut oversized), 0);
    // 3. An unknown message kind.
    let mut unknown = TcpStream::connect(&address).unwrap();
    read_some(&mut unknown);
    unknown.write_all(&[1, 0, 0, 0, 0xEE]).unwrap();
    assert_eq!(read_some(&mut unknown), 0);
    // 4. A truncated message, then the connection closes.
    let mut truncated = TcpStream::connect(&address).unwrap();
    read_some(&mut truncated);
    truncated.write_all(&[60, 0, 0, 0, 2, 1, 2]).unwrap();
    drop(truncated);
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{rest}");
    let refused = rest.matches("refused a control connection").count();
    assert!(refused >= 3, "expected logged refusals:\n{rest}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(json["ops_ok_all_ranks"], 30000, "the job was disturbed");
    assert!(json["failures"].as_array().unwrap().is_empty());
}

#[test]
fn a_user_program_runs_under_the_launcher_like_under_mpirun() {
    let _job = serialize();
    let example = example("allreduce");
    let out = launcher()
        .args(["-n", "6", "--timeout-s", "60", "--"])
        .arg(&example)
        .arg("50")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("rank 0 of 6: 50 allreduces, sum 15 each"),
        "{stdout}"
    );
    // The same program fails cleanly when a rank dies, and the launcher says so.
    let out = launcher()
        .args([
            "-n",
            "6",
            "--timeout-s",
            "60",
            "--fault",
            "kill:rank=4,op=10",
            "--",
        ])
        .arg(&example)
        .arg("50")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("rank 4 killed by signal 9"));
}

/// Runs the allreduce example under the launcher, each rank through `sh -c script`, with a
/// 1 s operation timeout; returns the launcher's output.
fn example_through_shell(script: &str) -> Output {
    launcher()
        .env("FTCOLL_OP_TIMEOUT_MS", "1000")
        .args([
            "-n",
            "4",
            "--timeout-s",
            "60",
            "--",
            "/bin/sh",
            "-c",
            script,
        ])
        .arg(example("allreduce"))
        .arg("20")
        .output()
        .unwrap()
}

#[test]
fn joining_waits_until_every_rank_registered_or_failed() {
    let _job = serialize();
    // Rank 3 starts 2 s late: without the start fence the others' first allreduce runs out
    // of its 1 s and every rank fails.
    let out = example_through_shell(r#"[ "$FTCOLL_RANK" = 3 ] && sleep 2; exec "$0" "$@""#);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("20 allreduces, sum 6 each"));
    // Rank 3 dies before registering: the fence opens at its death, and the others learn of
    // it (the example then stops with an error) instead of waiting for it.
    let started = Instant::now();
    let out = example_through_shell(r#"[ "$FTCOLL_RANK" = 3 ] && exit 7; exec "$0" "$@""#);
    assert!(!out.status.success());
    assert!(started.elapsed() < Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("rank 3 exited with status 7"), "{stdout}");
}
