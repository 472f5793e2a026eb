//! The receive side of one connection: an 8-byte aligned buffer that turns the byte stream of
//! length-prefixed frames into frames borrowed in place, each starting 8-byte aligned so that an
//! `f64` payload after the header (40 or 56 bytes) is read in place.
//!
//! The prefix is 4 bytes, so in a stream of frames the bodies are rarely aligned where they land.
//! Two rules make them aligned without copying large frames:
//! - a frame still arriving is parked with its prefix at byte 4 of the buffer (body at byte 8),
//!   and the buffer grows to hold it whole, so the rest of it is read straight into place;
//! - a frame that arrived whole inside one read (at most one read's worth of bytes) is moved back
//!   by up to 7 bytes, over its own consumed prefix, before it is handed out.

use std::io::{self, Read};

/// Bytes of the length prefix before every frame.
pub(super) const PREFIX_BYTES: usize = 4;

// Where a partial frame's prefix is parked: prefix at 4..8, body from 8.
const PREFIX_AT: usize = 4;
// Usual buffer size; a frame larger than this grows the buffer to fit it.
const BASE_BYTES: usize = 64 << 10;
// An empty buffer larger than this (grown for a large frame) is shrunk back to the usual size,
// so a connection that once carried a large frame does not keep the memory.
const SHRINK_ABOVE_BYTES: usize = 4 << 20;

/// A connection's receive buffer.
#[derive(Debug)]
pub(super) struct RxBuf {
    /// Backing store; `u64` so that byte offsets that are multiples of 8 are 8-byte aligned.
    words: Vec<u64>,
    /// Byte offset of the first unconsumed byte (a length prefix).
    head: usize,
    /// Byte offset one past the last received byte.
    tail: usize,
}

impl RxBuf {
    /// An empty buffer; memory is allocated on the first read.
    pub(super) fn new() -> RxBuf {
        RxBuf {
            words: Vec::new(),
            head: PREFIX_AT,
            tail: PREFIX_AT,
        }
    }

    /// Bytes received and not yet handed out.
    pub(super) fn pending_bytes(&self) -> usize {
        self.tail - self.head
    }

    /// The length prefix at the head, if all four bytes are here.
    fn prefix(&self) -> Option<u32> {
        let bytes: &[u8] = bytemuck::cast_slice(&self.words);
        let prefix = bytes.get(self.head..self.head + PREFIX_BYTES)?;
        let prefix = (self.pending_bytes() >= PREFIX_BYTES).then_some(prefix)?;
        Some(u32::from_le_bytes([
            prefix[0], prefix[1], prefix[2], prefix[3],
        ]))
    }

    /// Whether [`RxBuf::pop`] would return something other than `Ok(None)`.
    pub(super) fn has_work(&self, max_frame: usize) -> bool {
        match self.prefix() {
            None => false,
            Some(len) if len == 0 || len as usize > max_frame => true,
            Some(len) => self.pending_bytes() - PREFIX_BYTES >= len as usize,
        }
    }

    /// The next complete frame, 8-byte aligned; `Ok(None)` if it has not fully arrived;
    /// `Err(len)` if its length prefix is 0 or above `max_frame` (the stream is then unusable).
    pub(super) fn pop(&mut self, max_frame: usize) -> Result<Option<&[u8]>, u32> {
        let Some(prefix) = self.prefix() else {
            return Ok(None);
        };
        let len = prefix as usize;
        if len == 0 || len > max_frame {
            return Err(prefix);
        }
        if self.pending_bytes() - PREFIX_BYTES < len {
            return Ok(None);
        }
        let body = self.head + PREFIX_BYTES;
        // Rounding down moves the body back over its own prefix (and at most 3 bytes of the
        // previous, already handed out, frame).
        let start = body & !7;
        self.head = body + len;
        if self.head == self.tail {
            // The bytes stay where they are until the next read; only the offsets reset.
            self.head = PREFIX_AT;
            self.tail = PREFIX_AT;
        }
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
        if start != body {
            bytes.copy_within(body..body + len, start);
        }
        Ok(bytes.get(start..start + len))
    }

    /// Reads once from `source` (at most `max_read` bytes), first parking a partial frame at the
    /// aligned position and growing the buffer to hold it whole. Call only after [`RxBuf::pop`]
    /// returned `Ok(None)`. `Ok(0)` is end of stream.
    pub(super) fn fill(
        &mut self,
        source: &mut impl Read,
        max_frame: usize,
        max_read: usize,
    ) -> io::Result<usize> {
        let pending = self.pending_bytes();
        if pending == 0 {
            self.head = PREFIX_AT;
            self.tail = PREFIX_AT;
            if self.words.len() * 8 > SHRINK_ABOVE_BYTES {
                self.words.truncate(BASE_BYTES / 8);
                self.words.shrink_to_fit();
            }
        } else if self.head != PREFIX_AT {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
            bytes.copy_within(self.head..self.tail, PREFIX_AT);
            self.head = PREFIX_AT;
            self.tail = PREFIX_AT + pending;
        }
        let frame_len = match self.prefix() {
            None => 0,
            Some(len) if len == 0 || len as usize > max_frame => {
                // `pop` reports this; never allocate what a bogus prefix asks for.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("length prefix {len} is outside 1..={max_frame}"),
                ));
            }
            Some(len) => len as usize,
        };
        let need_bytes = PREFIX_AT + PREFIX_BYTES + frame_len;
        let want_words = need_bytes.max(BASE_BYTES).div_ceil(8);
        if self.words.len() < want_words {
            self.words.resize(want_words, 0);
        }
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
        let end = bytes.len().min(self.tail.saturating_add(max_read.max(1)));
        let spare = bytes.get_mut(self.tail..end).unwrap_or_default();
        let room = spare.len();
        let n = source.read(spare)?.min(room);
        self.tail += n;
        Ok(n)
    }
}
