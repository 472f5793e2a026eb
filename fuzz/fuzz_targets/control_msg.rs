//! The control-plane codec on arbitrary bytes: as a message body (`ControlMsg::decode`) and as
//! a length-prefixed stream (`ControlMsg::read_from`). A message that decodes encodes to a
//! body that decodes to the same message, and that encoding is a fixed point.

#![no_main]

use ftcoll_runtime::control::ControlMsg;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = ControlMsg::decode(data) {
        round_trip(&msg);
    }
    let mut stream = data;
    if let Ok(msg) = ControlMsg::read_from(&mut stream) {
        round_trip(&msg);
    }
});

fn round_trip(msg: &ControlMsg) {
    let encoded = msg.encode();
    let (prefix, body) = encoded.split_at(4);
    let prefix: [u8; 4] = prefix.try_into().expect("a four-byte length prefix");
    assert_eq!(u32::from_le_bytes(prefix) as usize, body.len());
    let again = ControlMsg::decode(body).expect("an encoded message decodes");
    // Floats compare by bits (NaN estimates are legal): Debug prints them all, NaN included.
    if again != *msg {
        assert_eq!(format!("{again:?}"), format!("{msg:?}"));
    }
    assert_eq!(again.encode(), encoded);
    let mut stream = &encoded[..];
    assert_eq!(
        ControlMsg::read_from(&mut stream).map(|m| m.encode()).ok(),
        Some(encoded.clone())
    );
    assert!(stream.is_empty());
}
