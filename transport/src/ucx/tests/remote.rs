//! Remote reads: a peer's exposed memory read exactly, keys kept once per identity, a lost
//! owner as an error. (UCX's emulation over TCP takes a garbage key for a good one: keys reach
//! a reader only inside notices whose check word shows they arrived as sent.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::super::super::remote::{ExposedMemory, RemoteReadError, RemoteReads};
use super::*;

/// Bytes whose value says where they lie.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (k as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8)
        .collect()
}

/// Runs `owner`'s progress in a thread until `stop` (over TCP, UCX serves gets from the
/// owner's progress loop, as a waiting rank's would).
fn serve(mut owner: UcxTransport, stop: Arc<AtomicBool>) -> thread::JoinHandle<UcxTransport> {
    thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            owner.wait(Some(Duration::from_millis(2))).unwrap();
            owner.poll_recv(64, &mut |_, _| {}).unwrap();
        }
        owner
    })
}

#[test]
fn a_reader_gets_the_peers_exposed_bytes_exactly() {
    let directory = Directory::default();
    let mut reader_side = transport(0, 2, &directory, Some("tcp"), Duration::ZERO);
    let mut owner = transport(1, 2, &directory, Some("tcp"), Duration::ZERO);
    assert_eq!(owner.remote_reads(), RemoteReads::Emulated);
    let memory = pattern(3 * MAX_READ_BYTES + 12_345);
    let exposure = owner
        .expose(ExposedMemory::of(&memory), None)
        .unwrap()
        .expect("UCX exposes");
    assert!(exposure.is(ExposedMemory::of(&memory)));
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve(owner, Arc::clone(&stop));
    let mut reader = reader_side
        .remote_reader(Rank(1))
        .unwrap()
        .expect("a reader");
    assert_eq!(reader.peer(), Rank(1));
    let deadline = Instant::now() + TEST_DEADLINE;
    let mut copy = Vec::with_capacity(memory.len());
    for start in (0..memory.len()).step_by(reader.max_read_bytes()) {
        let len = reader.max_read_bytes().min(memory.len() - start);
        let got = reader
            .read(
                exposure.key(),
                exposure.addr() + start as u64,
                len,
                deadline,
            )
            .unwrap();
        copy.extend_from_slice(got);
    }
    assert!(
        copy == memory,
        "the bytes read differ from the exposed ones"
    );
    // An odd offset and length inside the region.
    let got = reader
        .read(exposure.key(), exposure.addr() + 7, 1001, deadline)
        .unwrap();
    assert_eq!(got, &memory[7..1008]);
    let too_long = reader.read(
        exposure.key(),
        exposure.addr(),
        MAX_READ_BYTES + 1,
        deadline,
    );
    assert!(matches!(too_long, Err(RemoteReadError::TooLong { .. })));
    drop(reader);
    stop.store(true, Ordering::Release);
    drop(server.join().unwrap());
}

#[test]
fn an_identity_registers_its_memory_once() {
    let directory = Directory::default();
    let mut t = transport(0, 1, &directory, Some("tcp"), Duration::ZERO);
    let memory = pattern(1 << 16);
    let first = t
        .expose(ExposedMemory::of(&memory), Some(42))
        .unwrap()
        .unwrap();
    let again = t
        .expose(ExposedMemory::of(&memory), Some(42))
        .unwrap()
        .unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(t.exposure_counts(), (1, 1));
    // Without an identity every call registers anew.
    let fresh = t.expose(ExposedMemory::of(&memory), None).unwrap().unwrap();
    assert!(!Arc::ptr_eq(&first, &fresh));
    assert_eq!(t.exposure_counts(), (1, 1));
    t.forget_exposures(&mut |id| id != 42);
    drop((first, again));
    let after = t
        .expose(ExposedMemory::of(&memory), Some(42))
        .unwrap()
        .unwrap();
    assert_eq!(t.exposure_counts(), (1, 2));
    drop(after);
}

#[test]
fn a_lost_owner_is_an_error_not_a_hang() {
    let directory = Directory::default();
    let mut reader_side = transport(0, 2, &directory, Some("tcp"), Duration::ZERO);
    let mut owner = transport(1, 2, &directory, Some("tcp"), Duration::ZERO);
    let memory = pattern(4096);
    let exposure = owner
        .expose(ExposedMemory::of(&memory), None)
        .unwrap()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve(owner, Arc::clone(&stop));
    let mut reader = reader_side.remote_reader(Rank(1)).unwrap().unwrap();
    let deadline = Instant::now() + TEST_DEADLINE;
    // A good read first, so that the endpoint is up when the owner goes.
    reader
        .read(exposure.key(), exposure.addr(), 64, deadline)
        .unwrap();
    stop.store(true, Ordering::Release);
    drop(server.join().unwrap());
    // The owner's worker is gone: the read fails or times out, within its deadline.
    let start = Instant::now();
    let short = Instant::now() + Duration::from_secs(3);
    let lost = reader.read(exposure.key(), exposure.addr(), 64, short);
    assert!(
        matches!(
            lost,
            Err(RemoteReadError::Failed { peer: 1, .. } | RemoteReadError::TimedOut { peer: 1 })
        ),
        "{:?}",
        lost.map(<[u8]>::len)
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(reader_side.remote_reader(Rank(0)).unwrap().is_none());
    assert!(reader_side.remote_reader(Rank(5)).is_err());
}
