//! The wire decoder on arbitrary bytes: a frame that decodes re-encodes to the same bytes, its
//! values and rank trailer read in place, and the payload limit is exact.

#![no_main]

use ftcoll_algos::wire::{encode_with_trailer, Frame, FrameError};
use ftcoll_algos::{Algorithm, OpId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Frames arrive 8-byte aligned from every transport, so the payload reads in place.
    let mut words = vec![0u64; data.len().div_ceil(8)];
    let aligned = &mut word_bytes(&mut words)[..data.len()];
    aligned.copy_from_slice(data);
    let bytes: &[u8] = aligned;

    let frame = match Frame::decode(bytes) {
        Ok(frame) => frame,
        Err(_) => return,
    };
    let payload_len = frame.header.payload_len as usize;
    assert_eq!(frame.header.wire_len() + payload_len, bytes.len());
    assert_eq!(frame.payload.len() + frame.trailer.len(), payload_len);
    assert_eq!(frame.trailer.len(), 4 * frame.header.trailer_ranks as usize);

    // The limit admits exactly the payloads up to it.
    assert!(Frame::decode_with_limit(bytes, payload_len).is_ok());
    if let Some(below) = payload_len.checked_sub(1) {
        assert!(matches!(
            Frame::decode_with_limit(bytes, below),
            Err(FrameError::Oversized { .. })
        ));
    }

    let algo = frame.algo().expect("decode validated the algorithm");
    assert_eq!(frame.check(algo, OpId(frame.header.op_id)), Ok(()));
    assert_eq!(Algorithm::from_wire(algo as u8), Some(algo));
    let _ = frame.header.stamp();

    let values = frame
        .values()
        .expect("an aligned frame's values read in place");
    let trailer = frame
        .trailer()
        .expect("an aligned frame's trailer reads in place");
    assert_eq!(values.as_bytes().len(), frame.payload.len());

    // What decoded re-encodes to the very same bytes.
    let mut out = Vec::new();
    let len = encode_with_trailer(&mut out, frame.header, values, trailer);
    assert_eq!(len, bytes.len());
    assert_eq!(&word_bytes(&mut out)[..len], bytes);
});

/// The bytes of a word buffer, 8-byte aligned.
fn word_bytes(words: &mut [u64]) -> &mut [u8] {
    bytemuck::cast_slice_mut(words)
}
