//! Remote reads on `tcp;ofi_rxm`: a peer's exposed memory read exactly, reads kept inside the
//! region their key names, two ranks blocked in reads of each other both served, a read after
//! the owner deregistered or left as an error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use super::super::super::remote::testing::{
    an_identity_registers_once, lost, pattern, read_all, reads_exactly, serve,
};
use super::super::super::remote::{ExposedMemory, Exposure, RemoteReadError, RemoteReads};
use super::super::rma::MAX_READ_BYTES;
use super::*;

/// A reader's transport (rank 0) and an owner's (rank 1) on tcp, and `len` patterned bytes
/// the owner exposes.
fn reader_and_owner(len: usize, salt: u32) -> (OfiTransport, OfiTransport, Vec<u8>, Arc<Exposure>) {
    let directory = Directory::default();
    let reader_side = transport("tcp", 0, 2, &directory);
    let mut owner = transport("tcp", 1, 2, &directory);
    let memory = pattern(len, salt);
    let exposure = owner
        .expose(ExposedMemory::of(&memory), None)
        .unwrap()
        .expect("tcp exposes");
    (reader_side, owner, memory, exposure)
}

#[test]
fn tcp_a_reader_reads_the_peers_exposed_bytes_exactly() {
    let (mut reader_side, owner, memory, exposure) =
        reader_and_owner(3 * MAX_READ_BYTES + 12_345, 1);
    assert_eq!(owner.remote_reads(), RemoteReads::Emulated);
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve(owner, Arc::clone(&stop));
    let mut reader = reader_side
        .remote_reader(Rank(1))
        .unwrap()
        .expect("a reader");
    assert_eq!(reader.peer(), Rank(1));
    let deadline = Instant::now() + DEADLINE;
    reads_exactly(reader.as_mut(), &exposure, &memory, deadline);
    // One byte past the region, or before it: refused before anything is posted.
    for (addr, len) in [
        (exposure.addr() + memory.len() as u64 - 8, 9),
        (exposure.addr() - 1, 8),
    ] {
        let outside = reader.read(exposure.key(), addr, len, deadline);
        assert!(matches!(
            outside,
            Err(RemoteReadError::BadKey { peer: 1, .. })
        ));
    }
    let mut damaged = exposure.key().to_vec();
    damaged.truncate(damaged.len() - 1);
    let bad = reader.read(&damaged, exposure.addr(), 8, deadline);
    assert!(matches!(bad, Err(RemoteReadError::BadKey { peer: 1, .. })));
    // Once the owner deregistered the memory, its provider refuses the read.
    let stale = exposure.key().to_vec();
    drop(exposure);
    let refused = Instant::now() + Duration::from_secs(10);
    loop {
        match reader.read(&stale, memory.as_ptr() as u64, 8, refused) {
            Err(RemoteReadError::Failed { peer: 1, .. }) => break,
            // The owner closes a region on its next pump.
            Ok(_) => thread::sleep(Duration::from_millis(5)),
            other => panic!("{:?}", other.map(<[u8]>::len)),
        }
        assert!(
            Instant::now() < refused,
            "a deregistered region was still read"
        );
    }
    drop(reader);
    stop.store(true, Ordering::Release);
    drop(server.join().unwrap());
}

#[test]
fn tcp_two_ranks_blocked_in_reads_of_each_other_are_both_served() {
    let directory = Directory::default();
    let ranks: Vec<OfiTransport> = (0..2).map(|r| transport("tcp", r, 2, &directory)).collect();
    let memories: Vec<Vec<u8>> = (0..2).map(|r| pattern(4 * MAX_READ_BYTES, r)).collect();
    let mut ranks = ranks;
    let exposures: Vec<_> = ranks
        .iter_mut()
        .zip(&memories)
        .map(|(t, m)| t.expose(ExposedMemory::of(m), None).unwrap().unwrap())
        .collect();
    let keys: Vec<(Vec<u8>, u64)> = exposures
        .iter()
        .map(|e| (e.key().to_vec(), e.addr()))
        .collect();
    let len = memories[0].len();
    let both = Arc::new(Barrier::new(2));
    let finished = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = ranks
        .into_iter()
        .enumerate()
        .map(|(me, mut t)| {
            let (key, addr) = keys[1 - me].clone();
            let both = Arc::clone(&both);
            let finished = Arc::clone(&finished);
            thread::spawn(move || {
                let mut reader = t.remote_reader(Rank(1 - me as u32)).unwrap().unwrap();
                both.wait();
                // Nothing but reads: each rank serves the other's only from inside its own.
                let mut copies = Vec::new();
                for _ in 0..3 {
                    copies.push(read_all(
                        reader.as_mut(),
                        (&key, addr),
                        len,
                        Instant::now() + DEADLINE,
                    ));
                }
                // Serve the other's last reads (by progressing, as a waiting rank does) until
                // it has finished too: a rank that only waited here would leave them unserved.
                finished.fetch_add(1, Ordering::AcqRel);
                while finished.load(Ordering::Acquire) < 2 {
                    t.wait(Some(Duration::from_millis(1))).unwrap();
                }
                drop(reader);
                (t, copies)
            })
        })
        .collect();
    for (me, thread) in threads.into_iter().enumerate() {
        let (_t, copies) = thread.join().unwrap();
        for copy in copies {
            assert!(copy == memories[1 - me], "rank {me} read wrong bytes");
        }
    }
    drop(exposures);
}

#[test]
fn tcp_an_identity_registers_its_memory_once() {
    let directory = Directory::default();
    an_identity_registers_once(&mut transport("tcp", 0, 1, &directory));
}

#[test]
fn tcp_a_lost_owner_is_an_error_not_a_hang() {
    let (mut reader_side, owner, memory, exposure) = reader_and_owner(4096, 4);
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve(owner, Arc::clone(&stop));
    let mut reader = reader_side.remote_reader(Rank(1)).unwrap().unwrap();
    reader
        .read(
            exposure.key(),
            exposure.addr(),
            64,
            Instant::now() + DEADLINE,
        )
        .unwrap();
    let key = exposure.key().to_vec();
    drop(exposure);
    stop.store(true, Ordering::Release);
    drop(server.join().unwrap());
    let start = Instant::now();
    let read = reader.read(
        &key,
        memory.as_ptr() as u64,
        64,
        start + Duration::from_secs(3),
    );
    lost(read, start, &mut reader_side);
}

#[test]
fn tcp_reads_abandoned_at_their_deadline_give_their_slots_back() {
    // An owner that stops progressing: over tcp none of its reads is served meanwhile.
    let (mut reader_side, owner, memory, exposure) = reader_and_owner(4096, 5);
    let mut reader = reader_side.remote_reader(Rank(1)).unwrap().unwrap();
    // One read served, so that the connection is up and later reads are posted.
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve(owner, Arc::clone(&stop));
    reader
        .read(
            exposure.key(),
            exposure.addr(),
            64,
            Instant::now() + DEADLINE,
        )
        .unwrap();
    stop.store(true, Ordering::Release);
    let owner = server.join().unwrap();
    // rxm cancels no read: each abandoned read keeps its slot until its completion comes.
    // Once every slot is held, a read fails at once instead of at its deadline.
    for _ in 0..16 {
        let short = Instant::now() + Duration::from_millis(10);
        let read = reader.read(exposure.key(), exposure.addr(), 64, short);
        assert!(
            matches!(read, Err(RemoteReadError::TimedOut { peer: 1 })),
            "{:?}",
            read.map(<[u8]>::len)
        );
    }
    let started = Instant::now();
    let read = reader.read(exposure.key(), exposure.addr(), 64, started + DEADLINE);
    assert!(
        matches!(read, Err(RemoteReadError::Failed { peer: 1, .. })),
        "{:?}",
        read.map(<[u8]>::len)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "failed only at the deadline"
    );
    // The owner progresses again: the abandoned reads complete and give their slots back.
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve(owner, Arc::clone(&stop));
    let deadline = Instant::now() + DEADLINE;
    let got = loop {
        match reader.read(exposure.key(), exposure.addr() + 8, 64, deadline) {
            Ok(got) => break got.to_vec(),
            Err(RemoteReadError::Failed { .. }) => thread::sleep(Duration::from_millis(2)),
            Err(other) => panic!("{other}"),
        }
        assert!(Instant::now() < deadline, "the slots never came back");
    };
    assert_eq!(got, &memory[8..72]);
    drop(reader);
    stop.store(true, Ordering::Release);
    drop(server.join().unwrap());
}

#[test]
fn tcp_an_owner_gone_before_the_first_read_is_an_error_not_a_wait() {
    let (mut reader_side, owner, memory, exposure) = reader_and_owner(4096, 6);
    let key = exposure.key().to_vec();
    drop(exposure);
    // Its endpoints close with it: no connection to its read endpoint was ever made, and
    // rxm answers every read with -FI_EAGAIN from then on.
    drop(owner);
    let mut reader = reader_side.remote_reader(Rank(1)).unwrap().unwrap();
    let start = Instant::now();
    let read = reader.read(&key, memory.as_ptr() as u64, 64, start + DEADLINE);
    assert!(
        matches!(read, Err(RemoteReadError::Failed { peer: 1, .. })),
        "{:?}",
        read.map(<[u8]>::len)
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "found only at the deadline"
    );
}
