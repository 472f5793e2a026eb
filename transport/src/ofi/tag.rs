//! The tag every frame carries: its source rank, its size class, and its sequence number on
//! the link from that source, in the low `bits` bits the provider matches.
//!
//! | bits            | field                                               |
//! |-----------------|-----------------------------------------------------|
//! | 0..32           | source rank                                         |
//! | 32              | size class: 1 for frames above [`SMALL_FRAME_BYTES`] |
//! | 33..bits        | sequence number, wrapping                           |
//!
//! Receives are posted per class (only the class bit is matched), so a small frame never takes
//! one of the few large buffers. The sequence number restores per-source order: a provider may
//! complete a large (rendezvous) message after a small one sent later.

use ftcoll_algos::Rank;

/// Largest frame of the small class.
pub(super) const SMALL_FRAME_BYTES: usize = 64 << 10;
/// Fewest tag bits the layout works with (16 bits of sequence number: far more than the frames
/// in flight on one link, which the bound on outstanding sends caps).
pub(super) const MIN_TAG_BITS: u32 = 49;

const CLASS_BIT: u64 = 1 << 32;
const SEQ_SHIFT: u32 = 33;

/// The tag layout for a provider matching `bits` tag bits.
#[derive(Debug, Clone, Copy)]
pub(super) struct TagLayout {
    seq_bits: u32,
}

/// A decoded tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tag {
    /// Sending rank.
    pub(super) source: Rank,
    /// Frame above [`SMALL_FRAME_BYTES`].
    pub(super) large: bool,
    /// Position on the link from `source`, modulo the layout's sequence space.
    pub(super) seq: u64,
}

impl TagLayout {
    /// `None` if `bits` is below [`MIN_TAG_BITS`].
    pub(super) fn new(bits: u32) -> Option<TagLayout> {
        (MIN_TAG_BITS..=64).contains(&bits).then_some(TagLayout {
            seq_bits: bits - SEQ_SHIFT,
        })
    }

    /// Size of the sequence space.
    fn seq_modulus(self) -> u64 {
        1u64 << self.seq_bits
    }

    /// Wraps a sequence counter into the space.
    pub(super) fn wrap(self, seq: u64) -> u64 {
        seq & (self.seq_modulus() - 1)
    }

    /// The tag of a frame.
    pub(super) fn encode(self, tag: Tag) -> u64 {
        u64::from(tag.source.0)
            | if tag.large { CLASS_BIT } else { 0 }
            | (self.wrap(tag.seq) << SEQ_SHIFT)
    }

    /// The fields of a tag.
    pub(super) fn decode(self, tag: u64) -> Tag {
        Tag {
            source: Rank(tag as u32),
            large: tag & CLASS_BIT != 0,
            seq: self.wrap(tag >> SEQ_SHIFT),
        }
    }

    /// `(tag, ignore)` for receives of one class: only the class bit is matched.
    pub(super) fn recv_match(self, large: bool) -> (u64, u64) {
        let tag = if large { CLASS_BIT } else { 0 };
        (tag, !CLASS_BIT)
    }

    /// How far `seq` is ahead of `expected` (wrapping); `None` if it is behind, i.e. more than
    /// half the space ahead.
    pub(super) fn ahead(self, seq: u64, expected: u64) -> Option<u64> {
        let distance = self.wrap(seq.wrapping_sub(expected));
        (distance < self.seq_modulus() / 2).then_some(distance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_wrap() {
        for bits in [MIN_TAG_BITS, 60, 64] {
            let layout = TagLayout::new(bits).unwrap();
            let max_seq = (1u64 << (bits - SEQ_SHIFT)) - 1;
            for (source, large, seq) in [(0, false, 0), (u32::MAX, true, max_seq), (7, true, 12345)]
            {
                let tag = Tag {
                    source: Rank(source),
                    large,
                    seq,
                };
                let raw = layout.encode(tag);
                assert!(
                    bits == 64 || raw >> bits == 0,
                    "tag uses bits the provider ignores"
                );
                assert_eq!(layout.decode(raw), tag);
            }
            assert_eq!(
                layout
                    .decode(layout.encode(Tag {
                        source: Rank(1),
                        large: false,
                        seq: max_seq + 1
                    }))
                    .seq,
                0
            );
            assert_eq!(layout.ahead(0, max_seq), Some(1));
            assert_eq!(layout.ahead(max_seq, 0), None);
        }
        assert!(TagLayout::new(MIN_TAG_BITS - 1).is_none());
    }

    #[test]
    fn receives_match_only_their_class() {
        let layout = TagLayout::new(64).unwrap();
        let (tag, ignore) = layout.recv_match(true);
        let large = layout.encode(Tag {
            source: Rank(3),
            large: true,
            seq: 9,
        });
        let small = layout.encode(Tag {
            source: Rank(3),
            large: false,
            seq: 9,
        });
        assert_eq!(large & !ignore, tag);
        assert_ne!(small & !ignore, tag);
    }
}
