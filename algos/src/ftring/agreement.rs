//! The agreements of one fault-tolerant ring operation: an ERA service (002) whose frames travel
//! as the operation's own (this algorithm's wire id, the operation's id, the agreement id in the
//! `segment` field), and the server a returned rank leaves behind to answer late requests.

use crate::era::{AgreeError, AgreementState, Era, EraConfig, EraKind};
use crate::protocol::{Counters, Event, Input, Outbox, Phase, Protocol, RankStatus};
use crate::rank::{Rank, RankSet};
use crate::registry::Algorithm;
use crate::time::Time;
use crate::values::{Dtype, ReduceOp};
use crate::wire::{Frame, FrameError, OpId, Stamp};

/// ERA inside one operation.
#[derive(Debug)]
pub(super) struct OpAgreement {
    op_id: OpId,
    era: Era,
    /// What ERA queued, re-encoded into the caller's outbox under the operation's ids.
    queued: Outbox,
    pub(super) counters: Counters,
}

impl OpAgreement {
    pub(super) fn new(rank: Rank, size: u32, op_id: OpId, config: EraConfig) -> OpAgreement {
        OpAgreement {
            op_id,
            era: Era::new(rank.0, size, config),
            queued: Outbox::new(),
            counters: Counters::default(),
        }
    }

    /// Contributes `words` (minimum everywhere) to agreement `id`.
    pub(super) fn start(
        &mut self,
        id: u64,
        words: Vec<u64>,
        out: &mut Outbox,
    ) -> Result<(), AgreeError> {
        let acked = self.era.dead().clone();
        let started = self
            .era
            .start(id, ReduceOp::Min, words, &acked, true, &mut self.queued);
        self.forward(out);
        started
    }

    /// Agreement `id`'s decision, if taken: its words and the failed ranks it agreed on. The
    /// decision is then marked consumed (for ERA's garbage collection).
    pub(super) fn decision(&mut self, id: u64) -> Option<(Vec<u64>, RankSet)> {
        let AgreementState::Decided(decision) = self.era.state(id) else {
            return None;
        };
        let taken = (decision.words.clone(), decision.failed.clone());
        self.era.returned(id);
        Some(taken)
    }

    /// Handles one of the operation's agreement frames.
    pub(super) fn on_frame(&mut self, from: Rank, frame: Frame<'_>, out: &mut Outbox) {
        if EraKind::Revoke as u8 == frame.header.kind {
            self.counters.frames_rejected += 1;
            out.emit(Event::Rejected {
                from,
                error: FrameError::Unexpected {
                    from: from.0,
                    what: "revoke inside an operation",
                },
            });
            return;
        }
        let mut header = frame.header;
        header.algo = Algorithm::EraAgree as u8;
        header.op_id = u64::from(header.segment);
        let frame = Frame { header, ..frame };
        match self.era.handle_frame(from, &frame, &mut self.queued) {
            Ok(()) => self.counters.messages_received += 1,
            Err(error) => {
                self.counters.frames_rejected += 1;
                out.emit(Event::Rejected { from, error });
            }
        }
        self.forward(out);
    }

    /// 002 Part 4: `peer` is known dead.
    pub(super) fn peer_failed(&mut self, peer: Rank, out: &mut Outbox) {
        self.era.peer_failed(peer.0, &mut self.queued);
        self.forward(out);
    }

    /// Sends what ERA queued, under this algorithm's id and the operation's.
    fn forward(&mut self, out: &mut Outbox) {
        let before = out.stamp();
        for i in 0..self.queued.send_count() {
            let Some((to, bytes)) = self.queued.send_at(i) else {
                continue;
            };
            let Ok(frame) = Frame::decode(bytes) else {
                continue;
            };
            let (Ok(values), Ok(ranks)) = (frame.values(), frame.trailer()) else {
                continue;
            };
            let mut header = frame.header;
            out.set_stamp(Stamp {
                segment: header.op_id as u32,
                dtype: Dtype::Empty,
                len: 0,
                attempt: 0,
            });
            header.algo = Algorithm::FtRing as u8;
            header.op_id = self.op_id.0;
            out.send_with_ranks(to, header, values, ranks);
            self.counters.messages_sent += 1;
        }
        self.queued.clear();
        out.set_stamp(before);
    }
}

/// What a rank that returned from a fault-tolerant ring leaves behind: its agreements, to answer
/// a peer whose parent in the tree died before passing the decision on, until `serve_until`.
/// The ring's buffers stay with the caller for the next operation.
#[derive(Debug)]
pub struct FtRingServer {
    pub(super) agreement: OpAgreement,
    pub(super) serve_until: Option<Time>,
}

impl Protocol for FtRingServer {
    fn handle(&mut self, _now: Time, input: Input<'_>, out: &mut Outbox) {
        match input {
            Input::Message { from, frame } if frame.header.algo == Algorithm::FtRing as u8 => {
                self.agreement.on_frame(from, frame, out)
            }
            // The ring's late frames: nothing to do with them any more.
            Input::Message { .. } => {}
            Input::PeerFailed { peer } => self.agreement.peer_failed(peer, out),
            Input::Fault(fault) => out.emit(Event::FaultIgnored(fault)),
            Input::Start { .. } | Input::Timeout | Input::LinkFailed { .. } | Input::Stop => {}
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
    }

    fn phase(&self) -> Phase {
        Phase::Done
    }

    fn reads_clock(&self) -> bool {
        false
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: Phase::Done,
            iteration: 0,
            counters: self.agreement.counters,
            detail: crate::protocol::Detail::None,
        }
    }

    fn serve_until(&self) -> Option<Time> {
        self.serve_until
    }
}
