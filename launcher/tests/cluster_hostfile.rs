//! Hostfile runs with a stand-in for ssh that runs the remote command on this machine: the
//! node agents, their spawn orders, remote kills, lost hosts and the checks before anything
//! starts, on any machine. (`tests/cluster/` runs the same over real sshd in network
//! namespaces, where root allows.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Writes the stand-in ssh: it skips ssh options, refuses host 127.0.0.99 the way ssh
/// reports a refused connection, and runs anything else here with `sh -c`.
fn fake_ssh() -> PathBuf {
    let path = common::scratch("fake-ssh");
    std::fs::write(
        &path,
        "#!/bin/sh\n\
         while [ $# -gt 0 ]; do case \"$1\" in -o) shift 2;; -*) shift;; *) break;; esac; done\n\
         host=\"$1\"; shift; [ \"$1\" = \"--\" ] && shift\n\
         case \"$host\" in 127.0.0.99) echo \"ssh: connect to host $host port 22: Connection refused\" >&2; exit 255;; esac\n\
         exec sh -c \"$*\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn hostfile(name: &str, text: &str) -> PathBuf {
    let path = common::scratch(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Node agents running on this machine (only this file's tests start any; they run one at a
/// time).
fn agents_running() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).starts_with(env!("CARGO_BIN_EXE_ftcoll-launch"))
                && String::from_utf8_lossy(&cmdline).contains("__agent")
        })
        .count()
}

/// Runs a job through the stand-in ssh.
fn run(args: &[&str], name: &str) -> (std::process::Output, Option<serde_json::Value>) {
    let json = common::scratch(name);
    let out = common::launcher()
        .env("FTCOLL_SSH", fake_ssh())
        .args(args)
        .arg("--json")
        .arg(&json)
        .args(["--timeout-s", "120", "--no-tui"])
        .output()
        .unwrap();
    let report = std::fs::read_to_string(&json)
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap());
    let _ = std::fs::remove_file(&json);
    (out, report)
}

#[test]
fn ranks_run_on_every_host_of_the_hostfile() {
    let _job = common::serialize();
    let hosts = hostfile(
        "hosts-two",
        "# two hosts\nlocalhost slots=4\n127.0.0.1 slots=4\n",
    );
    let (out, json) = run(
        &[
            "-n",
            "8",
            "--hostfile",
            hosts.to_str().unwrap(),
            "--algo",
            "rdb",
            "--ops",
            "5",
        ],
        "two_hosts",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let json = json.unwrap();
    assert_eq!(json["transport"], "tcp", "auto picks TCP across hosts");
    assert_eq!(json["exact"], true, "{json}");
    assert_eq!(json["ops_ok_all_survivors"], 5);
    assert_eq!(agents_running(), 0);
}

#[test]
fn a_killed_remote_rank_and_a_lost_host_are_reported_and_survivors_finish() {
    let _job = common::serialize();
    let hosts = hostfile(
        "hosts-three",
        "localhost slots=4\n127.0.0.1 slots=4\n127.0.0.2 slots=4\n",
    );
    let hostfile_arg = hosts.to_str().unwrap().to_string();
    let json = common::scratch("lost_host.json");
    let mut child = common::launcher()
        .env("FTCOLL_SSH", fake_ssh())
        .args([
            "-n",
            "12",
            "--hostfile",
            &hostfile_arg,
            "--algo",
            "ftco-allreduce",
        ])
        .args(["--detect-timeout", "1s", "--input", "int", "--ops", "400"])
        .args([
            "--fault",
            "kill:rank=1,at=100ms",
            "--no-tui",
            "--timeout-s",
            "120",
        ])
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Host 2 (ranks 8..12) dies whole once its agent is up: its agent is SIGKILLed, its ranks
    // die with it (their parent-death signal).
    let deadline = Instant::now() + Duration::from_secs(30);
    let agent = loop {
        assert!(Instant::now() < deadline, "agent of node 2 never started");
        if let Some(pid) = find_agent("--node 2") {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(agent).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the survivors' job succeeded");
    let text = std::fs::read_to_string(&json).unwrap();
    std::fs::remove_file(&json).unwrap();
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        common::failed_ranks(&report),
        vec![1, 8, 9, 10, 11],
        "{report}"
    );
    let causes: Vec<&str> = report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["cause"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        causes.iter().filter(|c| **c == "node-lost").count(),
        4,
        "{report}"
    );
    assert_eq!(report["consistent"], true, "{report}");
    assert_eq!(report["exact"], true, "{report}");
    assert_eq!(report["ops_ok_all_survivors"], 400, "{report}");
    assert_eq!(agents_running(), 0);
}

/// The pid of the agent process whose command line contains `needle` (the binary itself, not
/// the stand-in ssh's shell).
fn find_agent(needle: &str) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .find_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let is_agent = text.starts_with(env!("CARGO_BIN_EXE_ftcoll-launch"))
                && text.contains("__agent")
                && text.contains(needle);
            is_agent
                .then(|| e.file_name().to_string_lossy().parse().ok())
                .flatten()
        })
}

#[test]
fn bad_hosts_and_lines_fail_before_any_rank_starts() {
    let _job = common::serialize();
    let refused = hostfile("hosts-refused", "localhost slots=2\n127.0.0.99 slots=2\n");
    let (out, json) = run(
        &[
            "-n",
            "4",
            "--hostfile",
            refused.to_str().unwrap(),
            "--bind",
            "127.0.0.1",
        ],
        "refused",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(json.is_none(), "no job ran");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("cannot start the node agent on host 127.0.0.99")
            && last.contains("Connection refused"),
        "{stderr}"
    );
    let malformed = hostfile("hosts-malformed", "localhost slots=2\nlocalhost cpus=2\n");
    let (out, _) = run(
        &["-n", "2", "--hostfile", malformed.to_str().unwrap()],
        "malformed",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("line 2: unknown option 'cpus'"), "{stderr}");
    let remote = hostfile("hosts-remote", "node-a slots=2\n");
    let (out, _) = run(
        &["-n", "2", "--hostfile", remote.to_str().unwrap()],
        "no_bind",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs --bind ADDR"), "{stderr}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(agents_running(), 0);
}
