//! Several transports in one process, on `tcp` (`tcp;ofi_rxm`) and `shm`, with resolvers
//! reading a shared directory of local addresses.

use std::time::{Duration, Instant};

use super::*;

mod process;
mod remote;
mod scenarios;

use process::killed_peer_process;
use scenarios::*;

use super::super::test_directory::{resolver as directory_resolver, Directory};

const DEADLINE: Duration = Duration::from_secs(60);
/// No drain until every frame is sent: thousands queue per link.
const FRAMES_UNBOUNDED: u64 = u64::MAX;
/// Frames per link between drains on shm: libfabric 1.17's shm provider loses tagged messages
/// that arrive unexpected (before a matching receive is posted) in much larger bursts; see
/// the module docs.
const SHM_BURST: u64 = 200;

fn transport(provider: &str, rank: u32, size: u32, directory: &Directory) -> OfiTransport {
    let resolver = directory_resolver(directory);
    let t = OfiTransport::new(OfiConfig {
        rank: Rank(rank),
        size,
        resolver,
        provider: Some(provider.into()),
        spin: Duration::ZERO,
    })
    .unwrap();
    directory
        .lock()
        .unwrap()
        .insert(Rank(rank), t.local_address());
    t
}

fn job(provider: &str, size: u32) -> Vec<OfiTransport> {
    let directory = Directory::default();
    (0..size)
        .map(|rank| transport(provider, rank, size, &directory))
        .collect()
}

/// A frame whose every byte depends on source, sequence number and position; from 12 bytes on
/// it starts with the source (`u32`) and the sequence number (`u64`).
fn frame(source: u32, seq: u64, len: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..len)
        .map(|i| (source as usize * 31 + seq as usize * 7 + i) as u8)
        .collect();
    if len >= 12 {
        bytes[..4].copy_from_slice(&source.to_le_bytes());
        bytes[4..12].copy_from_slice(&seq.to_le_bytes());
    }
    bytes
}

fn seq_of(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[4..12].try_into().unwrap())
}

/// Drives every transport (at least once) until `done` holds, collecting
/// `(receiver, source, bytes)`.
fn drive(
    ts: &mut [OfiTransport],
    got: &mut Vec<(u32, Rank, Vec<u8>)>,
    done: impl Fn(&[(u32, Rank, Vec<u8>)]) -> bool,
) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        for (me, t) in ts.iter_mut().enumerate() {
            t.progress().unwrap();
            t.poll_recv(64, &mut |from, bytes| {
                assert_eq!(bytes.as_ptr() as usize % 8, 0, "frame not 8-byte aligned");
                got.push((me as u32, from, bytes.to_vec()));
            })
            .unwrap();
        }
        if done(got) {
            return;
        }
        if Instant::now() > deadline {
            let state: Vec<_> = ts
                .iter()
                .map(|t| (t.rank.0, t.tx.frames(), t.ops.sends(), t.rx.links()))
                .collect();
            panic!("frames did not arrive in time ({} so far); (rank, queued, in flight, links): {state:?}", got.len());
        }
    }
}

#[test]
fn tcp_killed_peer_process_neither_aborts_nor_hangs() {
    killed_peer_process("tcp", true);
}

#[test]
fn tcp_sizes_round_trip_aligned_and_to_self() {
    sizes_round_trip("tcp");
}

#[test]
fn tcp_many_frames_arrive_once_in_order() {
    many_frames_in_order("tcp", FRAMES_UNBOUNDED);
}

#[test]
fn tcp_unpolled_receiver_loses_nothing() {
    unpolled_receiver_loses_nothing("tcp", 3, 400);
}

#[test]
fn tcp_overflow_arrives_or_is_reported() {
    overflow_arrives_or_is_reported("tcp");
}

#[test]
fn tcp_registered_send_pins_its_buffer() {
    registered_send("tcp");
}

#[test]
fn tcp_backpressure_bounds_queued_bytes() {
    backpressure("tcp", 200 << 10, 1 << 20);
}

#[test]
fn tcp_wait_times_out_and_wakes() {
    wait_and_wake("tcp");
}

#[test]
fn tcp_lost_peer_neither_aborts_nor_hangs() {
    lost_peer("tcp");
}

#[test]
fn tcp_departed_peer_settles_and_an_idle_one_keeps_its_frames() {
    departed_peer("tcp");
}

#[test]
fn tcp_failed_receive_uses_up_no_live_link() {
    failed_receive_names_no_link("tcp");
}

/// All shm scenarios in one test, so that afterwards no endpoint of this process is open and
/// none of the provider's files may remain in /dev/shm.
#[test]
fn shm_scenarios_and_no_files_left() {
    sizes_round_trip("shm");
    many_frames_in_order("shm", SHM_BURST);
    // 64 of them arrived with 32 receives posted.
    unpolled_receiver_loses_nothing("shm", 3, 400);
    overflow_arrives_or_is_reported("shm");
    registered_send("shm");
    // Two large frames at most: one more than the receiver has large buffers posted for would
    // arrive unexpected (see SHM_BURST).
    backpressure("shm", 100 << 10, 250 << 10);
    wait_and_wake("shm");
    // Not `lost_peer`: with shm, a peer endpoint closed inside the same process takes its
    // region with it while this process's mapping of it is still used (libfabric segfaults),
    // so the crash test runs the peer as a separate process.
    killed_peer_process("shm", false);
    let prefix = format!("{}:", std::process::id());
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "shm files left behind: {left:?}");
}

#[test]
fn probe_finds_no_rdma_provider_here() {
    assert_eq!(probe_rdma_provider().unwrap(), None);
    assert!(info::is_rdma_provider("verbs;ofi_rxm"));
    assert!(info::is_rdma_provider("efa"));
    assert!(!info::is_rdma_provider("tcp;ofi_rxm"));
    assert!(!info::is_rdma_provider("shm"));
    assert!(!info::is_rdma_provider("udp;ofi_rxd"));
}
