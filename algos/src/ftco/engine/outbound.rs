//! DATA to a peer: the pieces it lacks, in one frame or, past the frame budget, in parts.

use crate::protocol::Outbox;
use crate::rank::Rank;
use crate::time::Time;
use crate::wire::FrameHeader;

use super::super::pieces::{append_values, empty_like, Piece};
use super::super::{Collective, FtcoKind, FLAG_DEAD_SET, FLAG_MORE, FLAG_RESULT};
use super::Ftco;

impl Ftco {
    /// Sends `x` what it lacks; false (and nothing sent) when there is nothing for it. A list
    /// of pieces larger than [`FtcoConfig::max_data_bytes`] goes in parts of whole pieces.
    pub(super) fn send_data(&mut self, x: u32, now: Time, out: &mut Outbox) -> bool {
        let (result, list) = match &self.result {
            Some(piece) => (true, vec![piece.clone()]),
            None if self.at_top => (false, self.pieces.for_peers(self.config.op)),
            None => (
                false,
                self.pieces.combined(self.config.op).into_iter().collect(),
            ),
        };
        if list.is_empty() {
            return false;
        }
        let limit = self.config.max_data_bytes;
        let mut part_start = 0;
        let mut part_bytes = 0u64;
        for (i, piece) in list.iter().enumerate() {
            let bytes = (piece.value.len() * piece.value.dtype().elem_bytes()) as u64;
            if limit > 0 && i > part_start && part_bytes + bytes > limit {
                self.send_data_frame(x, &list[part_start..i], result, true, now, out);
                part_start = i;
                part_bytes = 0;
            }
            part_bytes += bytes;
        }
        self.send_data_frame(x, &list[part_start..], result, false, now, out);
        true
    }

    /// One DATA frame of `pieces` to `x`; `more`: parts of the same DATA follow.
    fn send_data_frame(
        &mut self,
        x: u32,
        pieces: &[Piece],
        result: bool,
        more: bool,
        now: Time,
        out: &mut Outbox,
    ) {
        let Some(first) = pieces.first() else {
            return;
        };
        let mut values = empty_like(&first.value);
        let mut trailer = Vec::new();
        for piece in pieces {
            append_values(&mut values, &piece.value);
            piece.contributors.encode_into(&mut trailer);
        }
        let me = self.me;
        let peer = self.peer(x);
        peer.seq_sent += 1;
        peer.last_data_seq = peer.seq_sent;
        if result {
            peer.result_sent = true;
        } else {
            peer.known.add_sent(pieces.iter().map(|p| &p.contributors));
        }
        let seq = peer.seq_sent;
        let mut flags = if result {
            FLAG_RESULT
        } else if self.at_top && self.config.collective == Collective::Allreduce {
            // To peer roots: the deaths that shaped the root set it went to.
            self.dead_ranges.encode_into(&mut trailer);
            FLAG_DEAD_SET
        } else {
            0
        };
        if more {
            flags |= FLAG_MORE;
        }
        let header = FrameHeader::new(
            self.config.collective.algo(),
            FtcoKind::Data as u8,
            self.config.op_id,
            Rank(me),
            seq,
        )
        .with_aux(pieces.len() as u64)
        .with_flags(flags);
        out.send_with_ranks(Rank(x), header, values.as_ref(), &trailer);
        self.counters.messages_sent += 1;
        let departure = self.departure(now, out);
        self.peer(x).last_sent = Some(departure);
    }
}
