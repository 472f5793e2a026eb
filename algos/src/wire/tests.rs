//! The wire format's encoder and decoder.

use super::*;

/// A frame with the compact header.
fn sample() -> Vec<u8> {
    let header = FrameHeader::new(Algorithm::Rdb, 1, OpId(7), Rank(3), 2).with_aux(9);
    encode(header, ValuesRef::F64(&[1.5, -2.0]))
}

/// A frame with the full header (a later segment).
fn sample_full() -> Vec<u8> {
    let header = FrameHeader {
        segment: 1,
        ..FrameHeader::new(Algorithm::Rdb, 1, OpId(7), Rank(3), 2).with_aux(9)
    };
    encode(header, ValuesRef::F64(&[1.5, -2.0]))
}

#[test]
fn small_frames_take_the_compact_header() {
    // An 8-byte allreduce's frame and a shared-memory record's 8-byte header: one cache line.
    let header = FrameHeader::new(Algorithm::Rdb, 1, OpId(7), Rank(3), 2).with_aux(1);
    let frame = encode(header, ValuesRef::F64(&[1.5]));
    assert_eq!(frame.len(), COMPACT_HEADER_BYTES + 8);
    assert_eq!(frame[2], FRAME_VERSION_COMPACT);
    assert_eq!(header_len_of(&frame), COMPACT_HEADER_BYTES);
    assert_eq!(sample_full().len(), HEADER_BYTES + 16);
    assert_eq!(header_len_of(&sample_full()), HEADER_BYTES);
}

#[test]
fn every_field_survives_either_header() {
    let base = FrameHeader {
        flags: 0xA55A,
        shape_dtype: Dtype::I64 as u8,
        ..FrameHeader::new(
            Algorithm::EraAgree,
            7,
            OpId(u64::MAX - 3),
            Rank(u32::MAX),
            9,
        )
        .with_aux(u64::MAX - 1)
    };
    let payload = [3i64, -4];
    let compact_largest = FrameHeader {
        shape_len: u64::from(u32::MAX),
        ..base
    };
    let beyond = [
        FrameHeader {
            segment: u32::MAX,
            ..base
        },
        FrameHeader {
            attempt: [0, 0, 1],
            ..base
        },
        FrameHeader {
            shape_len: u64::from(u32::MAX) + 1,
            ..base
        },
    ];
    for (header, compact) in
        std::iter::once((compact_largest, true)).chain(beyond.map(|h| (h, false)))
    {
        let mut words = Vec::new();
        let len = encode_into(&mut words, header, ValuesRef::I64(&payload));
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let frame = Frame::decode(&bytes[..len]).unwrap();
        let want_len = if compact {
            COMPACT_HEADER_BYTES
        } else {
            HEADER_BYTES
        };
        assert_eq!(frame.header.wire_len(), want_len, "{header:?}");
        assert_eq!(len, want_len + 16);
        let version = if compact {
            FRAME_VERSION_COMPACT
        } else {
            FRAME_VERSION
        };
        assert_eq!(
            frame.header,
            FrameHeader {
                version,
                dtype: Dtype::I64 as u8,
                payload_len: 16,
                ..header
            }
        );
        assert_eq!(frame.values().unwrap(), ValuesRef::I64(&payload));
    }
}

#[test]
fn a_full_header_where_the_compact_one_would_do_is_rejected() {
    let header = FrameHeader {
        dtype: Dtype::F64 as u8,
        payload_len: 8,
        ..FrameHeader::new(Algorithm::Rdb, 1, OpId(7), Rank(3), 2)
    };
    let mut words = header.to_words().to_vec();
    words.push(1.5f64.to_bits());
    let bytes: &[u8] = bytemuck::cast_slice(&words);
    assert_eq!(Frame::decode(bytes), Err(FrameError::NonCanonical));
}

#[test]
fn header_is_fifty_six_bytes() {
    assert_eq!(HEADER_BYTES, 56);
    let header = FrameHeader {
        dtype: 4,
        flags: 0xA55A,
        payload_len: 0x0102_0304,
        trailer_ranks: 0x0506_0708,
        ..FrameHeader::new(
            Algorithm::EraAgree,
            7,
            OpId(u64::MAX - 3),
            Rank(0xDEAD_BEEF),
            0x1234_5678,
        )
    }
    .with_aux(0x1122_3344_5566_7788);
    let header = FrameHeader {
        segment: 0x9ABC_DEF0,
        shape_dtype: 6,
        attempt: [1, 2, 3],
        shape_len: 0x0F0E_0D0C_0B0A_0908,
        ..header
    };
    assert_eq!(
        header.to_words(),
        bytemuck::cast::<FrameHeader, [u64; 7]>(header)
    );
}

#[test]
fn roundtrip() {
    let mut words = Vec::new();
    let header = FrameHeader::new(Algorithm::Rdb, 1, OpId(7), Rank(3), 2).with_aux(9);
    let len = encode_into(&mut words, header, ValuesRef::F64(&[1.5, -2.0]));
    let bytes: &[u8] = bytemuck::cast_slice(&words);
    let frame = Frame::decode(&bytes[..len]).unwrap();
    assert_eq!(frame.header.aux, 9);
    assert_eq!(frame.source(), Rank(3));
    assert_eq!(frame.values().unwrap(), ValuesRef::F64(&[1.5, -2.0]));
    frame.check(Algorithm::Rdb, OpId(7)).unwrap();
}

#[test]
fn truncated_frames_are_rejected() {
    for bytes in [sample(), sample_full()] {
        for cut in 0..bytes.len() {
            assert!(
                matches!(
                    Frame::decode(&bytes[..cut]),
                    Err(FrameError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
    }
}

#[test]
fn oversized_frames_are_rejected() {
    let mut bytes = sample();
    bytes.push(0);
    assert!(matches!(
        Frame::decode(&bytes),
        Err(FrameError::Oversized { .. })
    ));
    let mut huge = sample_full();
    huge[32..36].copy_from_slice(&(u32::MAX - 7).to_le_bytes());
    assert!(matches!(
        Frame::decode(&huge),
        Err(FrameError::Oversized { .. })
    ));
    let bytes = sample();
    let small_limit = Frame::decode_with_limit(&bytes, 8);
    assert!(matches!(small_limit, Err(FrameError::Oversized { .. })));
}

#[test]
fn unknown_fields_are_rejected() {
    let mut bad_algo = sample();
    bad_algo[3] = 200;
    assert_eq!(Frame::decode(&bad_algo), Err(FrameError::UnknownAlgo(200)));
    let mut bad_dtype = sample();
    bad_dtype[5] = 77;
    assert_eq!(Frame::decode(&bad_dtype), Err(FrameError::UnknownDtype(77)));
    let mut bad_magic = sample();
    bad_magic[0] ^= 1;
    assert!(matches!(
        Frame::decode(&bad_magic),
        Err(FrameError::BadMagic(_))
    ));
    let mut bad_version = sample();
    bad_version[2] = 9;
    assert_eq!(Frame::decode(&bad_version), Err(FrameError::BadVersion(9)));
}

#[test]
fn ragged_payload_is_rejected() {
    let mut bytes = sample_full();
    bytes[5] = Dtype::F64 as u8;
    bytes[32..36].copy_from_slice(&12u32.to_le_bytes());
    bytes.truncate(HEADER_BYTES + 12);
    assert!(matches!(
        Frame::decode(&bytes),
        Err(FrameError::RaggedPayload { .. })
    ));
}

#[test]
fn rank_trailer_roundtrips_and_a_lying_count_is_rejected() {
    let mut words = Vec::new();
    let header = FrameHeader::new(Algorithm::CorrectedReduce, 2, OpId(1), Rank(3), 0);
    let len = encode_with_trailer(&mut words, header, ValuesRef::F64(&[2.5]), &[4, 9, 11]);
    let bytes: &[u8] = bytemuck::cast_slice(&words);
    let frame = Frame::decode(&bytes[..len]).unwrap();
    assert_eq!(frame.values().unwrap(), ValuesRef::F64(&[2.5]));
    assert_eq!(frame.trailer().unwrap(), &[4, 9, 11]);
    let mut lying = bytes[..len].to_vec();
    lying[36..40].copy_from_slice(&100u32.to_le_bytes());
    assert!(matches!(
        Frame::decode(&lying),
        Err(FrameError::RaggedPayload { .. })
    ));
    let mut odd = bytes[..len].to_vec();
    odd[36..40].copy_from_slice(&2u32.to_le_bytes());
    assert!(matches!(
        Frame::decode(&odd),
        Err(FrameError::RaggedPayload { .. })
    ));
}

#[test]
fn wrong_operation_and_algorithm_are_errors() {
    let bytes = sample();
    let frame = Frame::decode(&bytes).unwrap();
    assert_eq!(
        frame.check(Algorithm::Rdb, OpId(8)),
        Err(FrameError::WrongOperation {
            expected: 8,
            got: 7
        })
    );
    assert!(matches!(
        frame.check(Algorithm::EraAgree, OpId(7)),
        Err(FrameError::WrongAlgorithm { .. })
    ));
}

#[test]
fn misaligned_payload_is_an_error_not_a_panic() {
    let bytes = sample();
    let mut shifted = vec![0u8; bytes.len() + 1];
    shifted[1..].copy_from_slice(&bytes);
    let frame = Frame::decode(&shifted[1..]).unwrap();
    // The payload may or may not be aligned depending on the allocation; either way no panic.
    match frame.values() {
        Ok(values) => assert_eq!(values.len(), 2),
        Err(error) => assert_eq!(error, FrameError::Misaligned),
    }
}
