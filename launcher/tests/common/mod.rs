//! Helpers shared by the multi-process test files: start the real launcher, run a job to its
//! end, read its JSON report.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Jobs run one at a time: several jobs of many ranks at once on two cores would starve
/// heartbeat threads and test the scheduler instead of ftcoll.
static ONE_JOB_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the one-job-at-a-time lock for as long as the guard lives.
pub fn serialize() -> std::sync::MutexGuard<'static, ()> {
    ONE_JOB_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// The launcher binary, with the caller's log filter removed so stderr stays predictable.
pub fn launcher() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ftcoll-launch"));
    command.env_remove("FTCOLL_LOG");
    command
}

/// The example program `name` of this package (`cargo test` builds the examples next to the
/// binaries); fails the test if it was not built.
#[allow(dead_code)] // Only the files that run example programs use it.
pub fn example(name: &str) -> PathBuf {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_ftcoll-launch"))
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(path.exists(), "example not built at {}", path.display());
    path
}

/// A path for a test's report, in a directory of this test process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ftcoll-live-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs the launcher's `subcommand` with `args` and `--json` into a scratch file named `name`;
/// returns its output and the JSON it wrote.
#[allow(dead_code)] // Only the files that run `check` and `soak` use it.
pub fn subcommand_json(subcommand: &str, args: &[&str], name: &str) -> (Output, serde_json::Value) {
    let path = scratch(name);
    let out = launcher()
        .arg(subcommand)
        .args(args)
        .arg("--json")
        .arg(&path)
        .output()
        .expect("ftcoll-launch runs");
    let json = take_report(&path, &out);
    (out, json)
}

/// Runs a job to completion (bounded by `--timeout-s limit_s`) and returns its output and JSON
/// report. The caller holds [`serialize`].
pub fn run_job(args: &[&str], name: &str, limit_s: u32) -> (Output, serde_json::Value) {
    let path = scratch(name);
    let out = launcher()
        .args(args)
        .arg("--json")
        .arg(&path)
        .args(["--timeout-s", &limit_s.to_string()])
        .output()
        .unwrap();
    let report = take_report(&path, &out);
    (out, report)
}

/// Reads and removes the JSON report at `path` that the run `out` wrote; fails the test with
/// the run's stderr if there is none.
pub fn take_report(path: &std::path::Path, out: &Output) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "no report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    std::fs::remove_file(path).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The ranks a report lists as failed, increasing.
pub fn failed_ranks(json: &serde_json::Value) -> Vec<u64> {
    let mut failed: Vec<u64> = json["failures"]
        .as_array()
        .map(|list| list.iter().filter_map(|f| f["rank"].as_u64()).collect())
        .unwrap_or_default();
    failed.sort_unstable();
    failed
}
