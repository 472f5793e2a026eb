//! Remote reads: a peer's exposed memory read exactly, keys kept once per identity, a lost
//! owner as an error. (UCX's emulation over TCP takes a garbage key for a good one: keys reach
//! a reader only inside notices whose check word shows they arrived as sent.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::super::remote::testing::{
    an_identity_registers_once, lost, pattern, reads_exactly, serve,
};
use super::super::super::remote::{ExposedMemory, RemoteReads};
use super::*;

#[test]
fn a_reader_gets_the_peers_exposed_bytes_exactly() {
    let directory = Directory::default();
    let mut reader_side = transport(0, 2, &directory, Some("tcp"), Duration::ZERO);
    let mut owner = transport(1, 2, &directory, Some("tcp"), Duration::ZERO);
    assert_eq!(owner.remote_reads(), RemoteReads::Emulated);
    let memory = pattern(3 * MAX_READ_BYTES + 12_345, 0);
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
    reads_exactly(
        reader.as_mut(),
        &exposure,
        &memory,
        Instant::now() + TEST_DEADLINE,
    );
    drop(reader);
    stop.store(true, Ordering::Release);
    drop(server.join().unwrap());
}

#[test]
fn an_identity_registers_its_memory_once() {
    let directory = Directory::default();
    an_identity_registers_once(&mut transport(
        0,
        1,
        &directory,
        Some("tcp"),
        Duration::ZERO,
    ));
}

#[test]
fn a_lost_owner_is_an_error_not_a_hang() {
    let directory = Directory::default();
    let mut reader_side = transport(0, 2, &directory, Some("tcp"), Duration::ZERO);
    let mut owner = transport(1, 2, &directory, Some("tcp"), Duration::ZERO);
    let memory = pattern(4096, 0);
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
    let read = reader.read(exposure.key(), exposure.addr(), 64, short);
    lost(read, start, &mut reader_side);
}
