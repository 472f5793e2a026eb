//! What one peer holds of this rank's contributions, as far as this rank knows.
//!
//! The engine asks of every peer root at every step whether it still lacks something. Under
//! heavy loss a rank takes hundreds of thousands of steps, with hundreds of peer roots whose
//! sets each have hundreds of ranges once many ranks have died, so the answer is cached and
//! recomputed only when the peer's sets or the rank's pieces change.

use std::cell::Cell;

use super::pieces::PieceSet;
use super::ranges::Contributors;

/// The contributor sets exchanged with one peer, and the cached answer of [`Self::lacks`].
#[derive(Clone, Debug, Default)]
pub(crate) struct PeerKnowledge {
    /// Contributors this peer sent us.
    received: Contributors,
    /// Contributors we sent it.
    sent: Contributors,
    /// Contributions a peer root sent to a root set without this peer (which replaces a root
    /// the sender did not know dead): this rank passes them on.
    relay: Contributors,
    /// The last answer of `lacks`, with the pieces' generation and top flag it was for.
    lacks_cache: Cell<Option<(u64, bool, bool)>>,
}

impl PeerKnowledge {
    /// Whether we have sent this peer any contribution.
    pub fn sent_any(&self) -> bool {
        !self.sent.is_empty()
    }

    /// Records contributions sent to the peer.
    pub fn add_sent<'a>(&mut self, contributors: impl IntoIterator<Item = &'a Contributors>) {
        self.sent.union_with_all(contributors);
        self.lacks_cache.set(None);
    }

    /// Records contributions the peer sent us.
    pub fn add_received<'a>(&mut self, contributors: impl IntoIterator<Item = &'a Contributors>) {
        self.received.union_with_all(contributors);
        self.lacks_cache.set(None);
    }

    /// Records contributions to pass on to the peer.
    pub fn add_relay(&mut self, contributors: &Contributors) {
        self.relay.union_with(contributors);
        self.lacks_cache.set(None);
    }

    /// Whether the peer may lack some of the contributions in `pieces`. A peer root gets every
    /// piece we hold with our first DATA, later only what our own subtree adds and what we
    /// relay to it (`at_top`): the other peers send it their pieces themselves.
    pub fn lacks(&self, pieces: &PieceSet, at_top: bool) -> bool {
        let generation = pieces.generation();
        if let Some((g, top, answer)) = self.lacks_cache.get() {
            if g == generation && top == at_top {
                return answer;
            }
        }
        let answer = if self.sent.is_empty() {
            !pieces.cover().is_empty()
        } else {
            let known = |set: &Contributors| set.is_subset_of_union(&self.sent, &self.received);
            if at_top {
                !known(pieces.own_cover()) || !known(&self.relay)
            } else {
                !known(pieces.cover())
            }
        };
        self.lacks_cache.set(Some((generation, at_top, answer)));
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftco::pieces::Piece;
    use crate::values::Values;

    fn piece(ranks: &[u32]) -> Piece {
        Piece {
            contributors: ranks.iter().copied().collect(),
            value: Values::F64(vec![1.0]),
        }
    }

    #[test]
    fn the_cached_answer_follows_the_pieces_and_the_peers_sets() {
        for at_top in [false, true] {
            let mut pieces = PieceSet::default();
            let mut peer = PeerKnowledge::default();
            assert!(!peer.lacks(&pieces, at_top), "nothing held, nothing lacked");
            pieces.absorb(piece(&[0, 1]), false);
            assert!(
                peer.lacks(&pieces, at_top),
                "a new piece after a cached answer"
            );
            peer.add_sent([&piece(&[0, 1]).contributors]);
            assert!(!peer.lacks(&pieces, at_top), "all of it sent");
            pieces.absorb(piece(&[2]), false);
            assert!(
                peer.lacks(&pieces, at_top),
                "a second piece after a cached answer"
            );
            peer.add_received([&piece(&[2]).contributors]);
            assert!(!peer.lacks(&pieces, at_top), "the peer sent it to us");
            peer.add_relay(&piece(&[5]).contributors);
            assert_eq!(
                peer.lacks(&pieces, at_top),
                at_top,
                "a relay is owed at the top only"
            );
        }
    }
}
