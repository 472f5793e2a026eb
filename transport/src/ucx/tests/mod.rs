//! Ranks as transports of one process: one thread drives them all, or each has its own.

mod frames;
mod lifecycle;
mod remote;

use std::time::{Duration, Instant};

use super::address::{decode_address, encode_address};
use super::*;

/// Transports each test runs over: TCP, and whatever UCX picks by itself (TCP again on a
/// machine without RDMA devices, since UCX 1.13's shared-memory transports cannot handle peer
/// failure; see `shared_memory_alone_cannot_reach_a_peer`).
const TLS_UNDER_TEST: [Option<&str>; 2] = [Some("tcp"), None];
const TEST_DEADLINE: Duration = Duration::from_secs(30);

use super::super::test_directory::{resolver as directory_resolver, Directory};

fn transport(
    rank: u32,
    size: u32,
    directory: &Directory,
    tls: Option<&str>,
    spin: Duration,
) -> UcxTransport {
    let resolver = directory_resolver(directory);
    let t = UcxTransport::new(UcxConfig {
        rank: Rank(rank),
        size,
        resolver,
        tls: tls.map(str::to_string),
        spin,
    })
    .unwrap();
    directory
        .lock()
        .unwrap()
        .insert(Rank(rank), t.local_address());
    t
}

fn job(size: u32, tls: Option<&str>) -> Vec<UcxTransport> {
    let directory = Directory::default();
    (0..size)
        .map(|rank| transport(rank, size, &directory, tls, Duration::ZERO))
        .collect()
}

/// A frame whose bytes say who sent it, its sequence number and its length.
fn frame(from: u32, seq: u32, len: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..len)
        .map(|k| (k as u32).wrapping_mul(31).wrapping_add(seq ^ from) as u8)
        .collect();
    let head = [from.to_le_bytes(), seq.to_le_bytes()].concat();
    let n = head.len().min(len);
    bytes[..n].copy_from_slice(&head[..n]);
    bytes
}

/// Received frames: (receiver, source, bytes).
type Log = Vec<(u32, Rank, Vec<u8>)>;

/// Progresses and receives on every transport until `done(log)` or the deadline.
fn pump(ts: &mut [UcxTransport], log: &mut Log, done: impl Fn(&Log) -> bool) {
    let deadline = Instant::now() + TEST_DEADLINE;
    while !done(log) {
        assert!(
            Instant::now() < deadline,
            "pump timed out with {} frames",
            log.len()
        );
        for (me, t) in ts.iter_mut().enumerate() {
            t.progress().unwrap();
            t.poll_recv(64, &mut |from, bytes| {
                assert_eq!(bytes.as_ptr() as usize % 8, 0, "frame not 8-byte aligned");
                log.push((me as u32, from, bytes.to_vec()));
            })
            .unwrap();
        }
    }
}

#[test]
fn addresses_round_trip_through_hex() {
    let raw = [0u8, 1, 0x7f, 0x80, 0xff];
    let text = encode_address(&raw);
    assert_eq!(text, "ucx:00017f80ff");
    assert_eq!(decode_address(&text).unwrap(), raw);
    assert!(decode_address("ucx:0g").is_none());
    assert!(decode_address("ucx:123").is_none());
    assert!(decode_address("127.0.0.1:9").is_none());
}

#[test]
fn probe_sees_no_rdma_device_without_infiniband_hardware() {
    let found = probe_rdma_device().expect("UCX initialises");
    let has_ib = std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some());
    if has_ib {
        if let Some(name) = found {
            assert!(name.contains('/'), "{name}");
        }
    } else {
        assert_eq!(found, None);
    }
}
