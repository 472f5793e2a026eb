//! The single-copy ring's blocks over a network: read out of the left neighbour's registered
//! vector by remote reads ([`crate::transport::remote`]), into the reader's buffer, and
//! combined or copied from there into the vector here. The owner's vector is never copied
//! into a send buffer.
//!
//! The Ready notice names the owner's vectors and lent word by address and by the keys of
//! their registrations; a check word covers every field, as on one node.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use ftcoll_algos::values::Element;
use ftcoll_algos::Rank;

use super::notice::check_word;
use super::{BlockSource, OwnVectors, ReadEnd, ReadTarget, SingleCopyFailure};
use crate::transport::remote::{Exposure, RemoteReadError, RemoteReader};

/// The longest key a notice carries (a packed UCX remote key is tens of bytes per memory
/// domain).
const MAX_KEY_BYTES: usize = 4096;
/// Words before the keys: output, input and lent word addresses, the vector's bytes, and the
/// three keys' lengths.
const HEAD_WORDS: usize = 5;

/// This rank's registered vectors and lent word, for its reader.
pub(crate) struct OwnExposures {
    /// The output (the vector itself when in place).
    pub(crate) output: Arc<Exposure>,
    /// The input of an out-of-place operation.
    pub(crate) input: Option<Arc<Exposure>>,
    /// The lent word.
    pub(crate) lent: Arc<Exposure>,
}

/// The left neighbour's vectors and lent word, from its first notice.
#[derive(Clone, Debug, PartialEq, Eq)]
struct LeftKeys {
    output_addr: u64,
    input_addr: u64,
    bytes: u64,
    lent_addr: u64,
    output_key: Box<[u8]>,
    /// `None` in place: the output's key.
    input_key: Option<Box<[u8]>>,
    lent_key: Box<[u8]>,
}

impl LeftKeys {
    fn words(&self, (token, from, done): (u64, Rank, u32)) -> Vec<u64> {
        let input_key: &[u8] = self.input_key.as_deref().unwrap_or(&[]);
        let lens = self.output_key.len() as u64
            | (input_key.len() as u64) << 16
            | (self.lent_key.len() as u64) << 32;
        let mut words = vec![
            self.output_addr,
            self.input_addr,
            self.bytes,
            self.lent_addr,
            lens,
        ];
        let keys = [&self.output_key[..], input_key, &self.lent_key[..]].concat();
        words.extend(keys.chunks(8).map(|c| {
            let mut word = [0u8; 8];
            word[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(word)
        }));
        words.push(check_word(token, from, done, &words));
        words
    }

    fn parse(words: &[u64], (token, from, done): (u64, Rank, u32)) -> Option<LeftKeys> {
        let (&check, fields) = words.split_last()?;
        if fields.len() < HEAD_WORDS || check_word(token, from, done, fields) != check {
            return None;
        }
        let lens = fields[4];
        let len = |shift: u32| ((lens >> shift) & 0xffff) as usize;
        let (output_len, input_len, lent_len) = (len(0), len(16), len(32));
        let too_long = [output_len, input_len, lent_len]
            .iter()
            .any(|&l| l > MAX_KEY_BYTES);
        let total = output_len + input_len + lent_len;
        if too_long || output_len == 0 || lent_len == 0 || lens >> 48 != 0 {
            return None;
        }
        if fields.len() != HEAD_WORDS + total.div_ceil(8) {
            return None;
        }
        let bytes: Vec<u8> = fields[HEAD_WORDS..]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let (output_key, rest) = bytes.split_at(output_len);
        let (input_key, rest) = rest.split_at(input_len);
        Some(LeftKeys {
            output_addr: fields[0],
            input_addr: fields[1],
            bytes: fields[2],
            lent_addr: fields[3],
            output_key: output_key.into(),
            input_key: (input_len > 0).then(|| input_key.into()),
            lent_key: rest[..lent_len].into(),
        })
    }
}

/// Blocks read out of the left neighbour's registered memory over the network.
pub(crate) struct RemoteSource {
    /// `None` when the left neighbour had already failed: the operation then aborts on the
    /// known failure before any read.
    reader: Option<Box<dyn RemoteReader>>,
    own: OwnExposures,
    left: Option<LeftKeys>,
    /// The operation's time limit: no read waits past it.
    deadline: Instant,
}

impl RemoteSource {
    pub(crate) fn new(
        reader: Option<Box<dyn RemoteReader>>,
        own: OwnExposures,
        deadline: Instant,
    ) -> RemoteSource {
        RemoteSource {
            reader,
            own,
            left: None,
            deadline,
        }
    }

    /// Whether the left neighbour still lends this operation's vector: its lent word, read
    /// after the block, must hold the token.
    fn still_lent(&mut self, token: u64) -> Result<(), ReadEnd> {
        let (Some(left), Some(reader)) = (self.left.as_ref(), self.reader.as_mut()) else {
            return Err(ReadEnd::Withdrawn);
        };
        match reader.read(&left.lent_key, left.lent_addr, 8, self.deadline) {
            Ok(word) if <[u8; 8]>::try_from(word).map(u64::from_le_bytes).ok() == Some(token) => {
                Ok(())
            }
            Err(RemoteReadError::BadKey { .. }) => {
                Err(ReadEnd::GiveUp(SingleCopyFailure::CorruptNotice))
            }
            // Taken back, or its owner is gone (the failure notice follows).
            Ok(_) | Err(_) => Err(ReadEnd::Withdrawn),
        }
    }

    /// A block's read failed: a corrupted key gives up; otherwise the owner either took its
    /// vector back (withdrawn) or still lends it and the read itself failed.
    fn after_failed_read(&mut self, error: RemoteReadError, token: u64) -> ReadEnd {
        tracing::debug!(%error, "remote read of a block failed");
        match error {
            RemoteReadError::BadKey { .. } | RemoteReadError::TooLong { .. } => {
                ReadEnd::GiveUp(SingleCopyFailure::CorruptNotice)
            }
            RemoteReadError::Failed { .. } | RemoteReadError::TimedOut { .. } => {
                match self.still_lent(token) {
                    Ok(()) => ReadEnd::GiveUp(SingleCopyFailure::RemoteRead),
                    Err(end) => end,
                }
            }
        }
    }
}

impl BlockSource for RemoteSource {
    fn ready_notice(&self, own: &OwnVectors, expects: (u64, Rank, u32)) -> Vec<u64> {
        let keys = LeftKeys {
            output_addr: own.output_addr,
            input_addr: own.input_addr,
            bytes: own.output_bytes,
            lent_addr: own.lent_word,
            output_key: self.own.output.key().into(),
            input_key: self.own.input.as_ref().map(|e| e.key().into()),
            lent_key: self.own.lent.key().into(),
        };
        keys.words(expects)
    }

    fn take_notice(&mut self, words: &[u64], expects: (u64, Rank, u32), bytes: u64) -> bool {
        match LeftKeys::parse(words, expects).filter(|k| k.bytes == bytes) {
            Some(keys) => {
                self.left = Some(keys);
                true
            }
            None => false,
        }
    }

    fn read<T: Element>(
        &mut self,
        block: Range<usize>,
        (first, combine): (bool, bool),
        target: ReadTarget<'_, '_, T>,
        token: u64,
    ) -> Result<(), ReadEnd> {
        let elem = std::mem::size_of::<T>();
        let corrupt = || ReadEnd::GiveUp(SingleCopyFailure::CorruptNotice);
        let Some(left) = self.left.as_ref() else {
            return Err(ReadEnd::Withdrawn);
        };
        // The first step reads the owner's input (see `single_copy`), every later one its
        // output.
        let (addr, key) = match (first, &left.input_key) {
            (true, Some(key)) => (left.input_addr, key.clone()),
            (true, None) => (left.input_addr, left.output_key.clone()),
            (false, _) => (left.output_addr, left.output_key.clone()),
        };
        if (block.end * elem) as u64 > left.bytes {
            return Err(corrupt());
        }
        let ReadTarget {
            data,
            input,
            mut saved,
            reduce,
        } = target;
        let Some(mine) = data.get_mut(block.clone()) else {
            return Err(corrupt());
        };
        let Some(max_read) = self.reader.as_ref().map(|r| r.max_read_bytes()) else {
            return Err(ReadEnd::Withdrawn);
        };
        let chunk = (max_read / elem).max(1);
        for (k, part) in mine.chunks_mut(chunk).enumerate() {
            let at = block.start + k * chunk;
            if let Some(saved) = saved.as_mut() {
                saved.save(at, part);
            }
            let from = addr + (at * elem) as u64;
            let len = std::mem::size_of_val(part);
            let read = match self.reader.as_mut() {
                Some(reader) => reader.read(&key, from, len, self.deadline),
                None => return Err(ReadEnd::Withdrawn),
            };
            let got = match read {
                Ok(bytes) => bytes,
                Err(error) => return Err(self.after_failed_read(error, token)),
            };
            // The reader's buffer is word-aligned, so any element type casts.
            let got: &[T] = bytemuck::try_cast_slice(got).map_err(|_| corrupt())?;
            if super::place(part, got, (at, input, combine, reduce)).is_err() {
                return Err(corrupt());
            }
        }
        self.still_lent(token)
    }

    fn left_failed(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any keys round-trip; any words parse or are refused, never a panic.
        #[test]
        fn keys_round_trip_and_any_words_are_safe(
            (output_key, input_key, lent_key) in (
                prop::collection::vec(any::<u8>(), 1..300),
                prop::option::of(prop::collection::vec(any::<u8>(), 1..300)),
                prop::collection::vec(any::<u8>(), 1..40),
            ),
            addrs in any::<[u64; 4]>(),
            noise in prop::collection::vec(any::<u64>(), 0..80),
            expects in (any::<u64>(), any::<u32>(), any::<u32>()),
        ) {
            let expects = (expects.0, Rank(expects.1), expects.2);
            let left = LeftKeys {
                output_addr: addrs[0],
                input_addr: addrs[1],
                bytes: addrs[2],
                lent_addr: addrs[3],
                output_key: output_key.into(),
                input_key: input_key.map(Into::into),
                lent_key: lent_key.into(),
            };
            prop_assert_eq!(LeftKeys::parse(&left.words(expects), expects), Some(left));
            let _ = LeftKeys::parse(&noise, expects);
        }
    }

    fn keys(in_place: bool) -> LeftKeys {
        LeftKeys {
            output_addr: 0x7f00_0000_1000,
            input_addr: 0x7f00_4000_0000,
            bytes: 1 << 24,
            lent_addr: 0x5600_0000_0040,
            output_key: (0..37u8).collect::<Vec<_>>().into(),
            input_key: (!in_place).then(|| (100..161u8).collect::<Vec<_>>().into()),
            lent_key: vec![9u8; 11].into(),
        }
    }

    #[test]
    fn a_notice_round_trips_and_a_flipped_bit_anywhere_fails_it() {
        let expects = ((17u64 << 24) | 3, Rank(3), 2u32);
        for in_place in [true, false] {
            let left = keys(in_place);
            let words = left.words(expects);
            assert_eq!(LeftKeys::parse(&words, expects), Some(left.clone()));
            for word in 0..words.len() {
                for bit in 0..64 {
                    let mut bad = words.clone();
                    bad[word] ^= 1 << bit;
                    assert_eq!(LeftKeys::parse(&bad, expects), None, "{word}:{bit}");
                }
            }
            let (token, from, done) = expects;
            assert_eq!(LeftKeys::parse(&words, (token ^ 1, from, done)), None);
            assert_eq!(LeftKeys::parse(&words, (token, Rank(2), done)), None);
            assert_eq!(LeftKeys::parse(&words, (token, from, done + 1)), None);
            assert_eq!(LeftKeys::parse(&words[..words.len() - 1], expects), None);
            assert_eq!(LeftKeys::parse(&[], expects), None);
        }
    }
}
