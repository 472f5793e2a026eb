//! A peer rank in a separate process, killed with SIGKILL: a real crash.

use std::time::{Duration, Instant};

use super::*;

/// Set (to a provider name) in the environment of the child process that plays rank 1 in
/// [`killed_peer_process`].
const PEER_ENV: &str = "FTCOLL_OFI_TEST_PEER";

/// Rank 1 of [`killed_peer_process`], in its own process: prints its address, reads rank 0's,
/// echoes one frame, then waits to be killed (at most a minute).
#[test]
#[ignore = "run by killed_peer_process as a child process"]
fn peer_process() {
    use std::io::BufRead;
    let Ok(provider) = std::env::var(PEER_ENV) else {
        return;
    };
    let directory = Directory::default();
    let mut t = transport(&provider, 1, 2, &directory);
    println!("FTCOLL_ADDR {}", t.local_address());
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    directory
        .lock()
        .unwrap()
        .insert(Rank(0), line.trim().to_string());
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut echoed = false;
    while Instant::now() < deadline {
        let mut got = Vec::new();
        t.poll_recv(8, &mut |_, bytes| got.push(bytes.to_vec()))
            .unwrap();
        if let Some(bytes) = got.first().filter(|_| !echoed) {
            t.send(Rank(0), bytes).unwrap();
            echoed = true;
        }
        t.progress().unwrap();
        t.wait(Some(Duration::from_millis(10))).unwrap();
    }
}

/// A peer process is killed (SIGKILL) after exchanging a frame: sends to it must neither abort
/// nor hang this rank, and are discarded once it is reported failed. Providers that notice
/// (`expect_unreachable`) report it through `take_unreachable`; shm stays silent.
pub(super) fn killed_peer_process(provider: &str, expect_unreachable: bool) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "ofi::tests::process::peer_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PEER_ENV, provider)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child_pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let address = lines
        // The harness may print "test ... " on the same line first.
        .find_map(|line| {
            line.unwrap()
                .split_once("FTCOLL_ADDR ")
                .map(|(_, a)| a.trim().to_string())
        })
        .expect("the peer process printed no address");
    let directory = Directory::default();
    directory.lock().unwrap().insert(Rank(1), address);
    let mut t = transport(provider, 0, 2, &directory);
    writeln!(child.stdin.take().unwrap(), "{}", t.local_address()).unwrap();
    t.send(Rank(1), &frame(0, 0, 100)).unwrap();
    let deadline = Instant::now() + DEADLINE;
    let mut echoed = 0;
    while echoed == 0 {
        assert!(Instant::now() < deadline, "the peer process never echoed");
        t.progress().unwrap();
        echoed = t
            .poll_recv(8, &mut |from, bytes| {
                assert!(from == Rank(1) && *bytes == frame(0, 0, 100))
            })
            .unwrap();
        t.wait(Some(Duration::from_millis(10))).unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // A killed process cannot remove its shared-memory region: whoever notices the death must.
    remove_shm_files_of(child_pid);
    for seq in 1..20 {
        t.send(
            Rank(1),
            &frame(0, seq, if seq % 2 == 0 { 100 } else { 100 << 10 }),
        )
        .unwrap();
    }
    let mut unreachable = Vec::new();
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until && unreachable.is_empty() {
        t.take_unreachable(&mut unreachable);
        t.progress().unwrap();
        t.wait(Some(Duration::from_millis(10))).unwrap();
    }
    assert!(unreachable.iter().all(|&r| r == Rank(1)));
    assert!(
        !expect_unreachable || unreachable == [Rank(1)],
        "the killed peer was not reported unreachable"
    );
    t.peer_failed(Rank(1));
    t.send(Rank(1), &frame(0, 99, 100)).unwrap();
    assert_eq!(
        t.progress().unwrap(),
        0,
        "frames to a failed peer are not discarded"
    );
}

/// Removes the shm provider's region files of process `pid` (named `<pid>:...`).
fn remove_shm_files_of(pid: u32) {
    let prefix = format!("{pid}:");
    for entry in std::fs::read_dir("/dev/shm").unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
}
