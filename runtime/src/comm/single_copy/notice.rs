//! The Ready notice of the single-copy ring: where the sender's vectors lie, and a check word
//! that shows the notice arrived as sent.
//!
//! A vector is named twice: by address in the sender's memory (for a cross-memory read), and,
//! where it lives in the sender's shared heap, by memory file (for a mapping, see
//! [`crate::transport::shm::peer_map`]). A flipped bit in either would send a read to the
//! wrong memory, so the check word covers every field.

use ftcoll_algos::Rank;

use crate::transport::shm::cross_memory::PeerRegion;
use crate::transport::shm::shared_heap::SharedSpan;

/// Words of a Ready notice's payload.
pub(super) const READY_WORDS: usize = 14;

/// What a Ready notice says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ReadyNotice {
    /// The output (the vector itself when in place), by address.
    pub output: PeerRegion,
    /// The input's address (the output's when in place); same size and process as the output.
    pub input_addr: u64,
    /// The sender's lent word's address.
    pub lent_word: u64,
    /// The output's memory file, where it has one.
    pub output_span: Option<SharedSpan>,
    /// The input's memory file, where it has one.
    pub input_span: Option<SharedSpan>,
}

/// Serial 0 stands for "no memory file": the heap's serials are never 0.
fn span_words(span: Option<SharedSpan>) -> [u64; 4] {
    match span {
        Some(s) => [s.serial, s.fd as u32 as u64, s.file_bytes, s.offset],
        None => [0; 4],
    }
}

fn span_of(words: &[u64]) -> Option<SharedSpan> {
    match *words {
        [0, ..] => None,
        [serial, fd, file_bytes, offset] => Some(SharedSpan {
            serial,
            fd: i32::try_from(fd).ok()?,
            file_bytes,
            offset,
        }),
        _ => None,
    }
}

/// Mixes the notice's fields with what the receiver expects of it (the operation's token, the
/// sender, the step count): a notice of another attempt, sender or step fails the check.
pub(super) fn check_word(token: u64, from: Rank, done: u32, fields: &[u64]) -> u64 {
    let mut x = token ^ u64::from(from.0).rotate_left(32) ^ u64::from(done).rotate_left(16);
    for &word in fields {
        x = (x ^ word).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 29;
    }
    x
}

impl ReadyNotice {
    /// The payload, sent by `from` after `done` steps of the attempt `token` names.
    pub fn words(&self, token: u64, from: Rank, done: u32) -> [u64; READY_WORDS] {
        let mut words = [0u64; READY_WORDS];
        words[..5].copy_from_slice(&[
            u64::from(self.output.pid),
            self.output.addr,
            self.input_addr,
            self.output.bytes,
            self.lent_word,
        ]);
        words[5..9].copy_from_slice(&span_words(self.output_span));
        words[9..13].copy_from_slice(&span_words(self.input_span));
        words[13] = check_word(token, from, done, &words[..13]);
        words
    }

    /// The notice in `words`, if it is whole and its check word matches.
    pub fn parse(words: &[u64], token: u64, from: Rank, done: u32) -> Option<ReadyNotice> {
        let words: &[u64; READY_WORDS] = words.try_into().ok()?;
        if check_word(token, from, done, &words[..13]) != words[13] {
            return None;
        }
        Some(ReadyNotice {
            output: PeerRegion {
                pid: u32::try_from(words[0]).ok()?,
                addr: words[1],
                bytes: words[3],
            },
            input_addr: words[2],
            lent_word: words[4],
            output_span: span_of(&words[5..9]),
            input_span: span_of(&words[9..13]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flipped_bit_anywhere_in_a_notice_fails_its_check() {
        let span = |serial, offset| SharedSpan {
            serial,
            fd: 17,
            file_bytes: 1 << 24,
            offset,
        };
        let notice = ReadyNotice {
            output: PeerRegion {
                pid: 4242,
                addr: 0x7f00_0000_1000,
                bytes: 1 << 24,
            },
            input_addr: 0x7f00_2000_0000,
            lent_word: 0x5600_0000_0040,
            output_span: Some(span(0x1234_0000_0001, 0)),
            input_span: Some(span(0x1234_0000_0002, 4096)),
        };
        // Operation 17, attempt 3: the token a lent word holds.
        let (token, from, done) = ((17u64 << 24) | 3, Rank(3), 2u32);
        let words = notice.words(token, from, done);
        assert_eq!(ReadyNotice::parse(&words, token, from, done), Some(notice));
        for word in 0..READY_WORDS {
            for bit in 0..64 {
                let mut bad = words;
                bad[word] ^= 1 << bit;
                assert_eq!(
                    ReadyNotice::parse(&bad, token, from, done),
                    None,
                    "{word}:{bit}"
                );
            }
        }
        for bit in 0..32 {
            assert_eq!(
                ReadyNotice::parse(&words, token, from, done ^ (1 << bit)),
                None
            );
            assert_eq!(
                ReadyNotice::parse(&words, token, Rank(from.0 ^ (1 << bit)), done),
                None
            );
        }
        for bit in 0..64 {
            // A notice of another attempt (or operation) of the same vector.
            assert_eq!(
                ReadyNotice::parse(&words, token ^ (1 << bit), from, done),
                None
            );
        }
        assert_eq!(ReadyNotice::parse(&words[..13], token, from, done), None);
    }

    #[test]
    fn a_vector_outside_the_shared_heap_is_named_by_address_only() {
        let notice = ReadyNotice {
            output: PeerRegion {
                pid: 1,
                addr: 4096,
                bytes: 8,
            },
            input_addr: 4096,
            lent_word: 8192,
            output_span: None,
            input_span: None,
        };
        let words = notice.words(5, Rank(0), 0);
        assert_eq!(ReadyNotice::parse(&words, 5, Rank(0), 0), Some(notice));
    }
}
