//! The wire format every algorithm message uses.
//!
//! # Layout
//! A frame is a header followed by the payload; all fields little-endian. The full header takes
//! 56 bytes:
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
//! **The compact header.** A frame whose header has no rank trailer, segment 0, attempt 0, a
//! payload under 16 MiB and a vector of at most 2^32 − 1 elements (every small collective's
//! frame) goes out with a 40-byte header instead, [`FRAME_VERSION_COMPACT`] in `version`: the
//! first 32 bytes as above, then one word of `payload_len` (24 bits), `shape_dtype` (8 bits)
//! and `shape_len` (32 bits); the fields it omits are zero. An 8-byte payload and its compact
//! header then fit one 64-byte cache line with a shared-memory record's 8-byte header, where the
//! full header needed two: on a 16-core machine a round trip of one line took 0.36–0.42 µs and
//! of two 0.59–0.67 µs. Every frame has exactly one encoding: a full header that could have
//! been compact is rejected ([`FrameError::NonCanonical`]).
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
/// Layout version of the full header.
pub const FRAME_VERSION: u8 = 2;
/// Layout version of the compact header (see the module docs).
pub const FRAME_VERSION_COMPACT: u8 = 3;
/// Bytes of the full header: the most any frame's header takes.
pub const HEADER_BYTES: usize = std::mem::size_of::<FrameHeader>();
/// Bytes of the compact header.
pub const COMPACT_HEADER_BYTES: usize = 40;
/// Largest payload the compact header's 24-bit length carries.
const COMPACT_MAX_PAYLOAD: u32 = (1 << 24) - 1;
/// Largest payload a decoder accepts by default (64 MiB); larger frames are `Oversized`.
pub const MAX_PAYLOAD_BYTES: usize = 64 << 20;

/// Which collective instance a message belongs to; many may be in flight at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

/// The frame header: 56 bytes in full, 40 in its compact form (see the module docs).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct FrameHeader {
    /// [`FRAME_MAGIC`].
    pub magic: u16,
    /// [`FRAME_VERSION`], or [`FRAME_VERSION_COMPACT`] in a header decoded from a compact one.
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

    /// The compact header's last word, where this header has a compact form (see the module
    /// docs).
    #[inline(always)]
    fn compact_word(&self) -> Option<u64> {
        let compact = self.trailer_ranks == 0
            && self.segment == 0
            && self.attempt == [0; 3]
            && self.payload_len <= COMPACT_MAX_PAYLOAD
            && self.shape_len <= u64::from(u32::MAX);
        compact.then(|| {
            u64::from(self.payload_len) | u64::from(self.shape_dtype) << 24 | self.shape_len << 32
        })
    }

    /// A header read from a compact header's five words; the fields it omits are zero.
    fn from_compact_words(words: [u64; COMPACT_HEADER_BYTES / 8]) -> FrameHeader {
        let mut full = [0u64; HEADER_BYTES / 8];
        full[..4].copy_from_slice(&words[..4]);
        let mut header: FrameHeader = bytemuck::cast(full);
        header.payload_len = (words[4] & u64::from(COMPACT_MAX_PAYLOAD)) as u32;
        header.shape_dtype = (words[4] >> 24) as u8;
        header.shape_len = words[4] >> 32;
        header
    }

    /// Bytes this header took on the wire, for a decoded header: [`COMPACT_HEADER_BYTES`] or
    /// [`HEADER_BYTES`], by its `version`.
    pub fn wire_len(&self) -> usize {
        if self.version == FRAME_VERSION_COMPACT {
            COMPACT_HEADER_BYTES
        } else {
            HEADER_BYTES
        }
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
    /// A full header whose frame has a compact form (see the module docs): every frame has one
    /// encoding.
    #[error("frame with a full header where the compact one is the encoding")]
    NonCanonical,
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
        let truncated = |need| FrameError::Truncated {
            got: bytes.len(),
            need,
        };
        let lead = bytes.get(..8).ok_or(truncated(COMPACT_HEADER_BYTES))?;
        let magic = u16::from_le_bytes([lead[0], lead[1]]);
        if magic != FRAME_MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        let header_len = match lead[2] {
            FRAME_VERSION => HEADER_BYTES,
            FRAME_VERSION_COMPACT => COMPACT_HEADER_BYTES,
            other => return Err(FrameError::BadVersion(other)),
        };
        let head = bytes.get(..header_len).ok_or(truncated(header_len))?;
        let header = if header_len == COMPACT_HEADER_BYTES {
            FrameHeader::from_compact_words(bytemuck::pod_read_unaligned(head))
        } else {
            let header: FrameHeader = bytemuck::pod_read_unaligned(head);
            if header.compact_word().is_some() {
                return Err(FrameError::NonCanonical);
            }
            header
        };
        Algorithm::from_wire(header.algo).ok_or(FrameError::UnknownAlgo(header.algo))?;
        let dtype = Dtype::from_u8(header.dtype).ok_or(FrameError::UnknownDtype(header.dtype))?;
        Dtype::from_u8(header.shape_dtype).ok_or(FrameError::UnknownDtype(header.shape_dtype))?;
        let len = header.payload_len as usize;
        if len > limit {
            return Err(FrameError::Oversized { got: len, limit });
        }
        let need = header_len + len;
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
        let (payload, trailer) = bytes[header_len..].split_at(values_len);
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

/// Number of 8-byte words a frame with `payload_bytes` of payload occupies at most (padded; a
/// compact header takes two words less).
pub fn frame_words(payload_bytes: usize) -> usize {
    (HEADER_BYTES + payload_bytes).div_ceil(8)
}

/// Bytes of the header of the encoded frame `bytes`, by its version byte (the full header's for
/// bytes too short to tell).
pub fn header_len_of(bytes: &[u8]) -> usize {
    match bytes.get(2) {
        Some(&FRAME_VERSION_COMPACT) => COMPACT_HEADER_BYTES,
        _ => HEADER_BYTES,
    }
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
    let header_len = match header.compact_word() {
        Some(last) => {
            header.version = FRAME_VERSION_COMPACT;
            let full = header.to_words();
            words.extend_from_slice(&[full[0], full[1], full[2], full[3], last]);
            COMPACT_HEADER_BYTES
        }
        None => {
            header.version = FRAME_VERSION;
            words.extend_from_slice(&header.to_words());
            HEADER_BYTES
        }
    };
    // Values of 8-byte elements without a trailer (most frames) go in as words: no byte copy,
    // no padding to clear.
    if let (ValuesRef::F64(_) | ValuesRef::U64(_) | ValuesRef::I64(_), true) =
        (payload, trailer.is_empty())
    {
        words.extend_from_slice(bytemuck::cast_slice(payload_bytes));
        return header_len + total;
    }
    let start = words.len();
    words.resize(start + (total).div_ceil(8), 0);
    let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut words[start..]);
    dst[..payload_bytes.len()].copy_from_slice(payload_bytes);
    dst[payload_bytes.len()..total].copy_from_slice(trailer_bytes);
    header_len + total
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
mod tests;
