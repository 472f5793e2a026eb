//! The agreement service of one communicator epoch: 002's ERA, installed with the executor as
//! a [`Service`], so that a rank answers agreements whatever operation runs and after it
//! returned from them, and so that a revocation fails the communicator's operations.

use std::cmp::Ordering;

use ftcoll_algos::era::Era;
use ftcoll_algos::protocol::Outbox;
use ftcoll_algos::wire::{Frame, FrameError, FrameHeader};
use ftcoll_algos::{Algorithm, Rank};

use crate::exec::{Claim, Service};

/// Agreement ids carry their communicator's epoch above this bit, so that a shrunk
/// communicator's agreements never meet its parent's.
pub const ERA_EPOCH_SHIFT: u32 = 40;

/// ERA for the communicator of `epoch`, in world ranks.
pub(super) struct EraService {
    epoch: u64,
    era: Era,
}

impl EraService {
    /// The service of `epoch`: `era` numbers its agreements from `epoch << ERA_EPOCH_SHIFT`.
    pub(super) fn new(epoch: u64, era: Era) -> EraService {
        EraService {
            epoch,
            era: era.with_id_base(epoch << ERA_EPOCH_SHIFT),
        }
    }

    /// The agreement engine.
    pub(super) fn era(&self) -> &Era {
        &self.era
    }

    /// The agreement engine, to start, return from or revoke agreements.
    pub(super) fn era_mut(&mut self) -> &mut Era {
        &mut self.era
    }
}

impl Service for EraService {
    fn wire_id(&self) -> u8 {
        Algorithm::EraAgree.wire_id()
    }

    fn claim(&self, header: &FrameHeader) -> Claim {
        match (header.op_id >> ERA_EPOCH_SHIFT).cmp(&self.epoch) {
            Ordering::Equal => Claim::Mine,
            Ordering::Greater => Claim::Later,
            Ordering::Less => Claim::Earlier,
        }
    }

    fn handle_frame(
        &mut self,
        from: Rank,
        frame: &Frame<'_>,
        out: &mut Outbox,
    ) -> Result<(), FrameError> {
        self.era.handle_frame(from, frame, out)
    }

    fn peer_failed(&mut self, rank: u32, out: &mut Outbox) {
        self.era.peer_failed(rank, out);
    }

    fn revoked(&self) -> bool {
        self.era.is_revoked()
    }

    fn frames_sent(&self) -> u64 {
        self.era.counters().messages_sent
    }
}

#[cfg(test)]
mod tests {
    use ftcoll_algos::era::EraConfig;
    use ftcoll_algos::OpId;

    use super::*;

    fn agreement_frame(id: u64) -> FrameHeader {
        FrameHeader::new(Algorithm::EraAgree, 0, OpId(id), Rank(1), 0)
    }

    #[test]
    fn claims_its_epoch_and_tells_earlier_from_later() {
        let service = EraService::new(2, Era::new(0, 4, EraConfig::default()));
        assert_eq!(
            service.claim(&agreement_frame((2 << ERA_EPOCH_SHIFT) + 3)),
            Claim::Mine
        );
        assert_eq!(
            service.claim(&agreement_frame((3 << ERA_EPOCH_SHIFT) + 1)),
            Claim::Later
        );
        assert_eq!(service.claim(&agreement_frame(5)), Claim::Earlier);
        assert_eq!(service.wire_id(), agreement_frame(0).algo);
    }
}
