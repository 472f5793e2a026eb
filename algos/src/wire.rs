//! The wire format every algorithm message uses.
//!
//! # Layout
//! A frame is a 56-byte header followed by the payload; all fields little-endian.
//!
//! | offset | size | field         | meaning                                                   |
//! |--------|------|---------------|-----------------------------------------------------------|
//! | 0      | 2    | `magic`       | [`FRAME_MAGIC`]                                           |
//! | 2      | 1    | `version`     | [`FRAME_VERSION`]                                         |
//! | 3      | 1    | `algo`        | [`Algorithm`] of the protocol that sent it                   |
//! | 4      | 1    | `kind`        | message kind within that protocol                         |
//! | 5      | 1    | `dtype`       | payload element type ([`Dtype`])                          |
//! | 6      | 2    | `flags`       | protocol-specific flags                                   |
//! | 8      | 4    | `source`      | sending rank                                              |
//! | 12     | 4    | `step`        | round, step or sequence number                            |
//! | 16     | 8    | `op_id`       | operation id: which collective instance this belongs to   |
//! | 24     | 8    | `aux`         | protocol-specific small field                             |
//! | 32     | 4    | `payload_len` | payload length in bytes, values and rank trailer          |
//! | 36     | 4    | `trailer_ranks` | number of `u32` rank ids after the values (usually 0)   |
//! | 40     | 4    | `segment`     | which segment of the operation's vector (see below)       |
//! | 44     | 1    | `shape_dtype` | [`Dtype`] of the operation's whole vector at the sender   |
//! | 45     | 3    | `attempt`     | attempt of an operation that restarts over its survivors  |
//! | 48     | 8    | `shape_len`   | elements of the operation's whole vector at the sender    |
//! | 56     | …    | values        | `dtype` elements                                          |
//! | …      | 4·t  | rank trailer  | `trailer_ranks` rank ids (`u32`)                           |
//!
//! The rank trailer carries a list of ranks beside the values in the same message (the failed
//! ranks a corrected-tree reduce reports up the tree). Every element type is a multiple of 4
//! bytes, so the trailer is always 4-byte aligned when the frame is 8-byte aligned.
//!
//! The shape fields let a receiver check that every rank passed a vector of the same type and
//! length before it combines anything (a mismatch is a typed error at every rank, never a hang or
//! a garbage result), and the segment field lets a vector larger than a transport's frame travel
//! as independent segments (see [`crate::protocol::Segmented`]). Protocols never set them: the
//! [`crate::protocol::Outbox`] stamps them from the operation it encodes for.
//!
//! The header is a `bytemuck::Pod` struct, so encoding and decoding are a copy, and a payload that
//! starts 8-byte aligned in its buffer is read in place as `&[f64]`. There is deliberately no
//! checksum: silent corruption must reach the algorithms, which is what the papers study.
//! Transports that want integrity add it below this layer.

use bytemuck::{Pod, Zeroable};

use crate::rank::Rank;
use crate::registry::Algorithm;
use crate::values::{Dtype, ValuesRef};

// The header is cast to and from bytes in native order; the wire is little-endian.
#[cfg(target_endian = "big")]
compile_error!("ftcoll's wire format is little-endian; big-endian hosts are not supported");

/// First two bytes of every frame.
pub const FRAME_MAGIC: u16 = 0xFC0C;
/// Current layout version.
pub const FRAME_VERSION: u8 = 2;
/// Header size in bytes.
pub const HEADER_BYTES: usize = std::mem::size_of::<FrameHeader>();
/// Largest payload a decoder accepts by default (64 MiB); larger frames are `Oversized`.
pub const MAX_PAYLOAD_BYTES: usize = 64 << 20;

/// Which collective instance a message belongs to; many may be in flight at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

/// The fixed 56-byte frame header.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct FrameHeader {
    /// [`FRAME_MAGIC`].
    pub magic: u16,
    /// [`FRAME_VERSION`].
    pub version: u8,
    /// [`Algorithm`] as a byte.
    pub algo: u8,
    /// Protocol-specific message kind.
    pub kind: u8,
    /// [`Dtype`] as a byte.
    pub dtype: u8,
    /// Protocol-specific flags.
    pub flags: u16,
    /// Sending rank.
    pub source: u32,
    /// Round, step or sequence number.
    pub step: u32,
    /// Operation id.
    pub op_id: u64,
    /// Protocol-specific small field.
    pub aux: u64,
    /// Payload length in bytes (values and rank trailer).
    pub payload_len: u32,
    /// Rank ids in the trailer after the values.
    pub trailer_ranks: u32,
    /// Segment of the operation's vector this frame belongs to.
    pub segment: u32,
    /// [`Dtype`] of the operation's whole vector at the sender.
    pub shape_dtype: u8,
    /// The attempt (24 bits, little-endian) of an operation that starts again over its
    /// survivors after a failure ([`crate::ftring`]); zero elsewhere. Frames of an abandoned
    /// attempt that arrive late are told apart by it.
    pub attempt: [u8; 3],
    /// Elements of the operation's whole vector at the sender.
    pub shape_len: u64,
}

/// The shape of an operation's vector and the segment a frame carries, stamped into every
/// header an [`crate::protocol::Outbox`] encodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Segment index.
    pub segment: u32,
    /// Element type of the whole vector.
    pub dtype: Dtype,
    /// Elements in the whole vector.
    pub len: u64,
    /// The attempt of an operation that restarts over its survivors (at most [`MAX_ATTEMPT`]).
    pub attempt: u32,
}

/// The largest attempt number the header's 24-bit field carries.
pub const MAX_ATTEMPT: u32 = (1 << 24) - 1;

impl FrameHeader {
    /// A header for a message of `kind` from `source` in operation `op`; the payload fields are
    /// filled in when the frame is encoded.
    pub fn new(algo: Algorithm, kind: u8, op: OpId, source: Rank, step: u32) -> FrameHeader {
        FrameHeader {
            magic: FRAME_MAGIC,
            version: FRAME_VERSION,
            algo: algo as u8,
            kind,
            dtype: Dtype::Empty as u8,
            flags: 0,
            source: source.0,
            step,
            op_id: op.0,
            aux: 0,
            payload_len: 0,
            trailer_ranks: 0,
            segment: 0,
            shape_dtype: 0,
            attempt: [0; 3],
            shape_len: 0,
        }
    }

    /// The shape and segment the sender stamped.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            segment: self.segment,
            dtype: Dtype::from_u8(self.shape_dtype).unwrap_or(Dtype::Empty),
            len: self.shape_len,
            attempt: u32::from_le_bytes([self.attempt[0], self.attempt[1], self.attempt[2], 0]),
        }
    }

    /// The header as the five words it occupies on the wire, assembled field by field. Casting
    /// the struct reads each word back from fields just stored one by one, which the CPU cannot
    /// forward from its store buffer and waits for.
    #[inline(always)]
    pub fn to_words(&self) -> [u64; HEADER_BYTES / 8] {
        [
            u64::from(self.magic)
                | u64::from(self.version) << 16
                | u64::from(self.algo) << 24
                | u64::from(self.kind) << 32
                | u64::from(self.dtype) << 40
                | u64::from(self.flags) << 48,
            u64::from(self.source) | u64::from(self.step) << 32,
            self.op_id,
            self.aux,
            u64::from(self.payload_len) | u64::from(self.trailer_ranks) << 32,
            u64::from(self.segment)
                | u64::from(self.shape_dtype) << 32
                | u64::from(self.attempt[0]) << 40
                | u64::from(self.attempt[1]) << 48
                | u64::from(self.attempt[2]) << 56,
            self.shape_len,
        ]
    }

    /// Sets the protocol-specific `aux` field.
    pub fn with_aux(mut self, aux: u64) -> FrameHeader {
        self.aux = aux;
        self
    }

    /// Sets the protocol-specific flags.
    pub fn with_flags(mut self, flags: u16) -> FrameHeader {
        self.flags = flags;
        self
    }
}

/// Why a frame was rejected. A peer's malformed frame is a value to count, never a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the header or than the header's `payload_len` announces.
    #[error("truncated frame: {got} bytes, expected at least {need}")]
    Truncated {
        /// Bytes present.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The payload is larger than the decoder's limit, or the buffer holds bytes past the frame.
    #[error("oversized frame: {got} bytes, limit {limit}")]
    Oversized {
        /// Bytes announced or present.
        got: usize,
        /// The limit.
        limit: usize,
    },
    /// The first two bytes are not [`FRAME_MAGIC`]: not an ftcoll frame.
    #[error("not an ftcoll frame (magic {0:#06x})")]
    BadMagic(u16),
    /// A layout version this build does not speak.
    #[error("unsupported frame version {0}; sender and receiver run different ftcoll versions")]
    BadVersion(u8),
    /// The `algo` byte names no protocol.
    #[error("unknown algorithm id {0}")]
    UnknownAlgo(u8),
    /// The `kind` byte names no message of the protocol.
    #[error("unknown message kind {kind} for {algo:?}")]
    UnknownKind {
        /// The protocol.
        algo: Algorithm,
        /// The kind byte.
        kind: u8,
    },
    /// The `dtype` byte names no element type.
    #[error("unknown payload type {0}")]
    UnknownDtype(u8),
    /// The payload length is not a multiple of the element size.
    #[error("payload of {len} bytes is not a whole number of {dtype:?} elements")]
    RaggedPayload {
        /// Payload bytes.
        len: usize,
        /// Element type.
        dtype: Dtype,
    },
    /// The payload does not start on its element alignment, so it cannot be read in place.
    #[error("payload is not aligned for in-place reading")]
    Misaligned,
    /// A frame of another protocol arrived at this one.
    #[error("frame of {got:?} delivered to {expected:?}")]
    WrongAlgorithm {
        /// The receiving protocol.
        expected: Algorithm,
        /// The frame's protocol.
        got: Algorithm,
    },
    /// A frame of another operation arrived at this one.
    #[error("frame of operation {got} delivered to operation {expected}")]
    WrongOperation {
        /// The receiving operation.
        expected: u64,
        /// The frame's operation.
        got: u64,
    },
    /// The frame is well-formed but makes no sense in the protocol's state (a step out of range,
    /// a sender that is not the expected partner, a duplicate).
    #[error("unexpected message from rank {from}: {what}")]
    Unexpected {
        /// The sender.
        from: u32,
        /// What was wrong.
        what: &'static str,
    },
}

/// A decoded frame: a copied header and the payload bytes, borrowed in place.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame<'a> {
    /// The header.
    pub header: FrameHeader,
    /// The value bytes (the payload without the rank trailer).
    pub payload: &'a [u8],
    /// The rank-trailer bytes (`4 * header.trailer_ranks`).
    pub trailer: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Decodes and validates `bytes`, which must hold exactly one frame.
    pub fn decode(bytes: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        Frame::decode_with_limit(bytes, MAX_PAYLOAD_BYTES)
    }

    /// [`Frame::decode`] with an explicit payload limit.
    pub fn decode_with_limit(bytes: &'a [u8], limit: usize) -> Result<Frame<'a>, FrameError> {
        let head = bytes.get(..HEADER_BYTES).ok_or(FrameError::Truncated {
            got: bytes.len(),
            need: HEADER_BYTES,
        })?;
        let header: FrameHeader = bytemuck::pod_read_unaligned(head);
        if header.magic != FRAME_MAGIC {
            return Err(FrameError::BadMagic(header.magic));
        }
        if header.version != FRAME_VERSION {
            return Err(FrameError::BadVersion(header.version));
        }
        Algorithm::from_wire(header.algo).ok_or(FrameError::UnknownAlgo(header.algo))?;
        let dtype = Dtype::from_u8(header.dtype).ok_or(FrameError::UnknownDtype(header.dtype))?;
        Dtype::from_u8(header.shape_dtype).ok_or(FrameError::UnknownDtype(header.shape_dtype))?;
        let len = header.payload_len as usize;
        if len > limit {
            return Err(FrameError::Oversized { got: len, limit });
        }
        let need = HEADER_BYTES + len;
        if bytes.len() < need {
            return Err(FrameError::Truncated {
                got: bytes.len(),
                need,
            });
        }
        if bytes.len() > need {
            return Err(FrameError::Oversized {
                got: bytes.len(),
                limit: need,
            });
        }
        let trailer_bytes = header.trailer_ranks as usize * 4;
        let Some(values_len) = len.checked_sub(trailer_bytes) else {
            return Err(FrameError::RaggedPayload { len, dtype });
        };
        let elem = dtype.elem_bytes();
        if (elem == 0 && values_len != 0) || (elem != 0 && !values_len.is_multiple_of(elem)) {
            return Err(FrameError::RaggedPayload {
                len: values_len,
                dtype,
            });
        }
        let (payload, trailer) = bytes[HEADER_BYTES..].split_at(values_len);
        Ok(Frame {
            header,
            payload,
            trailer,
        })
    }

    /// The protocol that sent the frame (validated by `decode`).
    pub fn algo(&self) -> Option<Algorithm> {
        Algorithm::from_wire(self.header.algo)
    }

    /// The sending rank as the header states it.
    pub fn source(&self) -> Rank {
        Rank(self.header.source)
    }

    /// Checks that the frame belongs to protocol `algo` and operation `op`.
    pub fn check(&self, algo: Algorithm, op: OpId) -> Result<(), FrameError> {
        let got = Algorithm::from_wire(self.header.algo)
            .ok_or(FrameError::UnknownAlgo(self.header.algo))?;
        if got != algo {
            return Err(FrameError::WrongAlgorithm {
                expected: algo,
                got,
            });
        }
        if self.header.op_id != op.0 {
            return Err(FrameError::WrongOperation {
                expected: op.0,
                got: self.header.op_id,
            });
        }
        Ok(())
    }

    /// The payload, read in place.
    pub fn values(&self) -> Result<ValuesRef<'a>, FrameError> {
        let dtype =
            Dtype::from_u8(self.header.dtype).ok_or(FrameError::UnknownDtype(self.header.dtype))?;
        let bytes = self.payload;
        let misaligned = |_| FrameError::Misaligned;
        Ok(match dtype {
            Dtype::Empty => ValuesRef::Empty,
            Dtype::F64 => ValuesRef::F64(bytemuck::try_cast_slice(bytes).map_err(misaligned)?),
            Dtype::F32 => ValuesRef::F32(bytemuck::try_cast_slice(bytes).map_err(misaligned)?),
            Dtype::U64 => ValuesRef::U64(bytemuck::try_cast_slice(bytes).map_err(misaligned)?),
            Dtype::I32 => ValuesRef::I32(bytemuck::try_cast_slice(bytes).map_err(misaligned)?),
            Dtype::I64 => ValuesRef::I64(bytemuck::try_cast_slice(bytes).map_err(misaligned)?),
            Dtype::U32 => ValuesRef::U32(bytemuck::try_cast_slice(bytes).map_err(misaligned)?),
            Dtype::RankIds => {
                ValuesRef::RankIds(bytemuck::try_cast_slice(bytes).map_err(misaligned)?)
            }
        })
    }

    /// The rank trailer, read in place (empty for most frames).
    pub fn trailer(&self) -> Result<&'a [u32], FrameError> {
        bytemuck::try_cast_slice(self.trailer).map_err(|_| FrameError::Misaligned)
    }
}

/// Number of 8-byte words a frame with `payload_bytes` of payload occupies (padded).
pub fn frame_words(payload_bytes: usize) -> usize {
    (HEADER_BYTES + payload_bytes).div_ceil(8)
}

/// Appends one encoded frame to `words` (8-byte aligned, zero-padded) and returns its length in
/// bytes. The header's `dtype` and `payload_len` are set from `payload`.
#[inline(always)]
pub fn encode_into(words: &mut Vec<u64>, header: FrameHeader, payload: ValuesRef<'_>) -> usize {
    encode_with_trailer(words, header, payload, &[])
}

/// [`encode_into`] with a rank trailer after the values.
#[inline(always)]
pub fn encode_with_trailer(
    words: &mut Vec<u64>,
    mut header: FrameHeader,
    payload: ValuesRef<'_>,
    trailer: &[u32],
) -> usize {
    let payload_bytes = payload.as_bytes();
    let trailer_bytes: &[u8] = bytemuck::cast_slice(trailer);
    let total = payload_bytes.len() + trailer_bytes.len();
    header.dtype = payload.dtype() as u8;
    header.payload_len = total as u32;
    header.trailer_ranks = trailer.len() as u32;
    words.reserve(frame_words(total));
    words.extend_from_slice(&header.to_words());
    // Values of 8-byte elements without a trailer (most frames) go in as words: no byte copy,
    // no padding to clear.
    if let (ValuesRef::F64(_) | ValuesRef::U64(_) | ValuesRef::I64(_), true) =
        (payload, trailer.is_empty())
    {
        words.extend_from_slice(bytemuck::cast_slice(payload_bytes));
        return HEADER_BYTES + total;
    }
    let start = words.len();
    words.resize(start + (total).div_ceil(8), 0);
    let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut words[start..]);
    dst[..payload_bytes.len()].copy_from_slice(payload_bytes);
    dst[payload_bytes.len()..total].copy_from_slice(trailer_bytes);
    HEADER_BYTES + total
}

/// Encodes one frame into a fresh byte vector (tests and tools; the data path uses
/// [`encode_into`]).
pub fn encode(header: FrameHeader, payload: ValuesRef<'_>) -> Vec<u8> {
    let mut words = Vec::new();
    let len = encode_into(&mut words, header, payload);
    let bytes: &[u8] = bytemuck::cast_slice(&words);
    bytes[..len].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let header = FrameHeader::new(Algorithm::Rdb, 1, OpId(7), Rank(3), 2).with_aux(9);
        encode(header, ValuesRef::F64(&[1.5, -2.0]))
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
        let bytes = sample();
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

    #[test]
    fn oversized_frames_are_rejected() {
        let mut bytes = sample();
        bytes.push(0);
        assert!(matches!(
            Frame::decode(&bytes),
            Err(FrameError::Oversized { .. })
        ));
        let mut huge = sample();
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
        let mut bytes = sample();
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
}
