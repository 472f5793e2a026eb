use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpListener, TcpStream as StdStream};

use super::*;

/// A connection of a registered rank 0, and the socket its rank writes into.
fn registered_pair() -> (Conn, StdStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the loopback");
    let writer = StdStream::connect(listener.local_addr().expect("address")).expect("connect");
    let (accepted, _) = listener.accept().expect("accept");
    accepted.set_nonblocking(true).expect("nonblocking");
    let mut conn = Conn::new(TcpStream::from_std(accepted), [0; 16]);
    conn.rank = Some(0);
    (conn, writer)
}

/// Reads until `want` requests came or the socket has nothing more for a while.
fn read_requests(conn: &mut Conn, want: usize) -> Vec<Request> {
    let shape = JobShape { ranks: 2, nodes: 0 };
    let mut requests = Vec::new();
    let mut idle = 0;
    // Bounded: each pass either gets requests or counts towards the idle limit.
    while requests.len() < want && idle < 200 {
        let (got, refusal, _) = conn.read(b"secret", shape, &BTreeMap::new());
        assert!(refusal.is_none(), "refused: {refusal:?}");
        idle = if got.is_empty() { idle + 1 } else { 0 };
        requests.extend(got);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    requests
}

#[test]
fn many_messages_in_one_read_each_become_a_request_and_a_partial_one_waits() {
    let (mut conn, mut writer) = registered_pair();
    let heartbeat = ControlMsg::Heartbeat.encode();
    let report = ControlMsg::Finished { pss_kb: 7 }.encode();
    // Far more messages than one read of the buffer takes, then half of one more.
    let count = 40_000;
    let mut bytes = heartbeat.repeat(count);
    bytes.extend_from_slice(&report[..report.len() / 2]);
    writer.write_all(&bytes).expect("write");
    let requests = read_requests(&mut conn, count);
    assert_eq!(requests.len(), count);
    assert!(requests.iter().all(|r| matches!(r, Request::Heartbeat(0))));
    assert_eq!(conn.inbound, report[..report.len() / 2]);
    writer
        .write_all(&report[report.len() / 2..])
        .expect("write");
    let rest = read_requests(&mut conn, 1);
    assert!(
        matches!(rest.as_slice(), [Request::Finished { rank: 0, pss_kb: 7 }]),
        "{rest:?}"
    );
    assert!(conn.inbound.is_empty());
}

#[test]
fn a_bad_length_after_good_messages_refuses_the_connection_and_keeps_the_good_ones() {
    let (mut conn, mut writer) = registered_pair();
    let mut bytes = ControlMsg::Heartbeat.encode().repeat(3);
    bytes.extend_from_slice(&0u32.to_le_bytes());
    writer.write_all(&bytes).expect("write");
    let shape = JobShape { ranks: 2, nodes: 0 };
    // Bounded: the bytes are on the loopback within a few passes.
    for _ in 0..1000 {
        let (got, refusal, _) = conn.read(b"secret", shape, &BTreeMap::new());
        if let Some(refusal) = refusal {
            assert_eq!(got.len(), 3);
            assert!(matches!(refusal, Refusal::Bad(ref why) if why.contains("length 0")));
            return;
        }
        assert!(got.is_empty(), "the requests come with the refusal");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("no refusal");
}
