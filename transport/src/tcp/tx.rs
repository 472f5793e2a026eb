//! The send side of one connection: the bytes the socket has not taken yet, written with
//! vectored writes. The transport bounds the total across connections.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};

// Small frames are appended to the last chunk up to this size, so a burst of small frames costs
// one allocation per chunk rather than one per frame.
const COALESCE_BYTES: usize = 64 << 10;
// Slices per vectored write, well under any platform's IOV_MAX.
const SLICES_PER_WRITE: usize = 32;
// Writes per call: a socket that keeps accepting must not hold the caller forever.
const MAX_WRITES_PER_CALL: usize = 64;

/// What a write attempt achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Written {
    /// Bytes the socket took.
    pub bytes: usize,
    /// The socket said `WouldBlock`: wait for a writable event before trying again.
    pub blocked: bool,
}

/// Writes the concatenation of `parts` until the socket blocks, everything is written, or the
/// per-call bound is reached.
pub(super) fn write_parts(sink: &mut impl Write, parts: &[&[u8]]) -> io::Result<Written> {
    let total: usize = parts.iter().map(|part| part.len()).sum();
    let mut done = 0;
    for _ in 0..MAX_WRITES_PER_CALL {
        if done >= total {
            break;
        }
        let mut slices = [IoSlice::new(&[]); SLICES_PER_WRITE];
        let mut count = 0;
        let mut skip = done;
        for part in parts {
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            if count == SLICES_PER_WRITE {
                break;
            }
            slices[count] = IoSlice::new(part.get(skip..).unwrap_or_default());
            skip = 0;
            count += 1;
        }
        match sink.write_vectored(&slices[..count]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Ok(Written {
                    bytes: done,
                    blocked: true,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Written {
        bytes: done.min(total),
        blocked: false,
    })
}

/// Bytes queued for one connection, in order, with the frame boundaries needed to count frames.
#[derive(Debug, Default)]
pub(super) struct SendQueue {
    chunks: VecDeque<Vec<u8>>,
    /// Bytes of the front chunk already written.
    front_written: usize,
    /// Bytes queued and not yet written.
    bytes: usize,
    /// Stream offsets (bytes pushed since the queue was made) at which queued frames end.
    frame_ends: VecDeque<u64>,
    pushed_total: u64,
    written_total: u64,
}

impl SendQueue {
    /// Whether nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Bytes waiting.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Frames not yet completely written.
    pub(super) fn frames(&self) -> usize {
        self.frame_ends.len()
    }

    /// Queues a copy of the concatenation of `parts` minus its first `skip` bytes (what a direct
    /// write already sent); `ends_frame` marks that these bytes complete a frame.
    pub(super) fn push(&mut self, parts: &[&[u8]], skip: usize, ends_frame: bool) {
        let mut skip = skip;
        for part in parts {
            let rest = match part.get(skip..) {
                Some(rest) => {
                    skip = 0;
                    rest
                }
                None => {
                    skip -= part.len();
                    continue;
                }
            };
            if rest.is_empty() {
                continue;
            }
            match self.chunks.back_mut() {
                Some(last) if last.len() + rest.len() <= COALESCE_BYTES => {
                    last.extend_from_slice(rest)
                }
                _ => self.chunks.push_back(rest.to_vec()),
            }
            self.bytes += rest.len();
            self.pushed_total += rest.len() as u64;
        }
        if ends_frame {
            self.frame_ends.push_back(self.pushed_total);
        }
    }

    /// Writes queued bytes until the socket blocks, the queue empties, or the per-call bound is
    /// reached.
    pub(super) fn flush(&mut self, sink: &mut impl Write) -> io::Result<Written> {
        let mut total = 0;
        for _ in 0..MAX_WRITES_PER_CALL {
            if self.chunks.is_empty() {
                break;
            }
            let mut slices = [IoSlice::new(&[]); SLICES_PER_WRITE];
            let mut count = 0;
            for (index, chunk) in self.chunks.iter().take(SLICES_PER_WRITE).enumerate() {
                let from = if index == 0 { self.front_written } else { 0 };
                slices[count] = IoSlice::new(chunk.get(from..).unwrap_or_default());
                count += 1;
            }
            match sink.write_vectored(&slices[..count]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => total += self.consume(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(Written {
                        bytes: total,
                        blocked: true,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Written {
            bytes: total,
            blocked: false,
        })
    }

    /// Drops `n` written bytes from the front; returns how many were dropped.
    fn consume(&mut self, n: usize) -> usize {
        let mut left = n;
        while left > 0 {
            let Some(front) = self.chunks.front() else {
                break;
            };
            let unwritten = front.len().saturating_sub(self.front_written);
            if left >= unwritten {
                left -= unwritten;
                self.chunks.pop_front();
                self.front_written = 0;
            } else {
                self.front_written += left;
                left = 0;
            }
        }
        let taken = n - left;
        self.bytes = self.bytes.saturating_sub(taken);
        self.written_total += taken as u64;
        while self
            .frame_ends
            .front()
            .is_some_and(|&end| end <= self.written_total)
        {
            self.frame_ends.pop_front();
        }
        taken
    }
}
