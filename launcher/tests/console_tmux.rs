//! The console end to end, in a real pseudo-terminal: tmux runs `ftcoll-launch -n 16` (the
//! console opens because its output is a terminal), the test presses keys and reads the screen
//! as a user would.
//!
//! Needs tmux. Without it the test says so and passes, so that `cargo test` works on a machine
//! without it; CI sets `FTCOLL_REQUIRE_TMUX=1`, which turns a missing tmux into a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of this test alone (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "console"]).stdout)
            .into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "console"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    /// Polls the screen until `found` holds (panics with the last screen after `limit`).
    fn wait_for(&self, what: &str, limit: Duration, found: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen();
            if found(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn session_alive(&self) -> bool {
        self.run(&["has-session", "-t", "console"]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// Every descendant of `pid` (children, their children).
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    // Each pass replaces the frontier by its children; process trees are finite.
    while let Some(parent) = frontier.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found
}

fn alive(pid: u32) -> bool {
    // A zombie is dead for our purpose (its parent just has not reaped it yet).
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// The largest value after `label` on the screen (e.g. the chart title's `max 3.1e-13`).
fn value_after(screen: &str, label: &str) -> Option<f64> {
    let rest = &screen[screen.find(label)? + label.len()..];
    rest.split_whitespace()
        .next()?
        .trim_end_matches(',')
        .parse()
        .ok()
}

#[test]
fn console_kill_key_shows_the_failure_and_the_survivors_converge_then_q_cleans_up() {
    if !Tmux::available() {
        assert!(
            std::env::var_os("FTCOLL_REQUIRE_TMUX").is_none(),
            "tmux is required (FTCOLL_REQUIRE_TMUX is set); apt-get install tmux"
        );
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let _guard = common::serialize();
    let tmux = Tmux {
        socket: format!("ftcoll-console-test-{}", std::process::id()),
    };
    let launcher = env!("CARGO_BIN_EXE_ftcoll-launch");
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "console",
        "-x",
        "120",
        "-y",
        "40",
        "env",
        "-u",
        "FTCOLL_LOG",
        launcher,
        "-n",
        "16",
        "--seed",
        "3",
    ]);
    assert!(started.status.success(), "{started:?}");
    let pane_pid: u32 = String::from_utf8_lossy(
        &tmux
            .run(&["display-message", "-p", "-t", "console", "#{pane_pid}"])
            .stdout,
    )
    .trim()
    .parse()
    .unwrap();

    // The console is up and the first operation converged.
    tmux.wait_for(
        "the first operation to converge",
        Duration::from_secs(60),
        |s| s.contains("pfcc") && value_after(s, "max ").is_some_and(|e| e < 1e-9),
    );
    let ranks = descendants(pane_pid);
    assert!(ranks.len() >= 16, "launcher and 16 ranks: {ranks:?}");

    // Select rank 5 and kill it.
    for _ in 0..5 {
        tmux.keys(&["l"]);
    }
    tmux.wait_for("rank 5 selected", Duration::from_secs(10), |s| {
        s.contains("rank 5 (node")
    });
    tmux.keys(&["x"]);
    let screen = tmux.wait_for("the failure in the log", Duration::from_secs(20), |s| {
        s.contains("injected kill:rank=5") && s.contains("rank 5 failed")
    });
    assert!(screen.contains("survivors notified"), "{screen}");
    let killed_in = value_after(&screen, " op ").unwrap() as u64;

    // The next operation starts without rank 5 (n skips the hold) and converges.
    tmux.keys(&["n"]);
    let next = killed_in + 1;
    let screen = tmux.wait_for(
        "the next operation to converge without rank 5",
        Duration::from_secs(60),
        |s| {
            s.contains(&format!("operation {next} started"))
                && value_after(s, " op ") == Some(next as f64)
                && value_after(s, "round ").is_some_and(|r| r >= 20.0)
                && value_after(s, "max ").is_some_and(|e| e < 1e-9)
        },
    );
    assert!(
        screen.contains("15 live") && screen.contains("1 dead"),
        "{screen}"
    );

    // q stops the job: the pane's program exits and nothing of it is left.
    tmux.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while tmux.session_alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!tmux.session_alive(), "q did not end the console");
    for pid in ranks {
        assert!(!alive(pid), "process {pid} outlived the console");
    }
}
