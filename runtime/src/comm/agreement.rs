//! ULFM's recovery calls: agreements (002's ERA), acknowledging failures, shrink and revoke.

use std::sync::Arc;
use std::time::Duration;

use ftcoll_algos::era::{AgreedValue, Era, EraConfig};
use ftcoll_algos::protocol::Outbox;
use ftcoll_algos::rank::RankSet;
use ftcoll_algos::ReduceOp;

use super::era_service::{EraService, ERA_EPOCH_SHIFT};
use super::{CommError, Communicator};
use crate::exec::{ExecError, OpEnd};
use crate::progress::ProgressThread;

/// What an agreement decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreed {
    /// The agreed words.
    pub words: Vec<u64>,
    /// The failed ranks (world ranks) the participants agreed on.
    pub failed: Vec<u32>,
    /// Failed ranks not acknowledged by every participant (empty for a clean agreement).
    pub unacknowledged: Vec<u32>,
}

impl Agreed {
    fn from_value(value: &AgreedValue) -> Agreed {
        Agreed {
            words: value.words.clone(),
            failed: value.failed.as_slice().to_vec(),
            unacknowledged: value.unacknowledged(),
        }
    }
}

/// A non-blocking agreement in flight ([`Communicator::iagree`]).
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an agreement must be waited for"]
pub struct AgreeRequest {
    id: u64,
    epoch: u64,
}

impl Communicator {
    /// Starts the agreement progress thread once agreements are in use.
    fn ensure_progress_thread(&mut self) -> Result<(), CommError> {
        if self.progress.is_none() {
            let (thread, waker) =
                ProgressThread::start(Arc::clone(&self.endpoint)).map_err(|e| {
                    CommError::Config(format!("cannot start the agreement progress thread: {e}"))
                })?;
            self.control.add_waker(waker);
            self.progress = Some(thread);
        }
        Ok(())
    }

    /// Installs the agreement service of the current epoch over the members that remain when
    /// `excluded` (world ranks) are left out, and watches for its revocation.
    pub(super) fn install_era(&mut self, excluded: &[u32]) -> Result<(), CommError> {
        let config = EraConfig {
            topology: self.era_topology,
            ..EraConfig::default()
        };
        let era = Era::with_members(self.env.rank, self.env.size, excluded, config);
        let service = Box::new(EraService::new(self.epoch, era));
        self.endpoint().install_service(self.epoch, service)?;
        self.endpoint().watch_revoke(self.epoch);
        Ok(())
    }

    /// Acts on the agreement service of `epoch` and sends what it queued; `None` if the
    /// service is gone.
    fn with_era<R>(
        &self,
        epoch: u64,
        act: impl FnOnce(&mut Era, &mut Outbox) -> R,
    ) -> Result<Option<R>, ExecError> {
        self.endpoint()
            .with_service(epoch, |service: &mut EraService, out| {
                act(service.era_mut(), out)
            })
    }

    /// Serves the endpoint until `done` holds for the agreement service of `epoch` (or it is
    /// gone), `limit` passes, or the job shuts down.
    pub(super) fn wait_era(
        &self,
        epoch: u64,
        limit: Duration,
        mut done: impl FnMut(&Era) -> bool,
    ) -> Result<OpEnd, ExecError> {
        self.endpoint()
            .wait_service(epoch, limit, |service: &EraService| done(service.era()))
    }

    /// ULFM's `agree`: the bitwise AND of every participant's `flag`, the same at every
    /// survivor (002's ERA). Fails with [`CommError::UnacknowledgedFailure`], still carrying the
    /// agreed value, at every survivor when a rank failed that not all had acknowledged
    /// ([`Communicator::ack_failed`]).
    pub fn agree(&mut self, flag: u64) -> Result<u64, CommError> {
        let agreed = self.agree_with(&[flag], ReduceOp::BitAnd)?;
        let value = agreed.words.first().copied().unwrap_or(0);
        if !agreed.unacknowledged.is_empty() {
            return Err(CommError::UnacknowledgedFailure {
                agreed: value,
                unacknowledged: agreed.unacknowledged,
            });
        }
        Ok(value)
    }

    /// An agreement on `words` under any idempotent operator (`BitAnd`, `BitOr`, `Min`,
    /// `Max`), returning the agreed failed set too. A blocking agreement also rebalances the
    /// agreement tree of later agreements around the failed ranks it agrees on (002 Sec. 3).
    pub fn agree_with(&mut self, words: &[u64], op: ReduceOp) -> Result<Agreed, CommError> {
        let request = self.start_agreement(words, op, true)?;
        self.wait_agree(request)
    }

    /// ULFM's `iagree`: starts an agreement and returns at once; [`Communicator::wait_agree`]
    /// completes it. Agreements complete in any order.
    pub fn iagree(&mut self, words: &[u64], op: ReduceOp) -> Result<AgreeRequest, CommError> {
        self.start_agreement(words, op, false)
    }

    /// Waits for an agreement started by [`Communicator::iagree`].
    pub fn wait_agree(&mut self, request: AgreeRequest) -> Result<Agreed, CommError> {
        let id = request.id;
        let end = self.wait_era(request.epoch, self.op_timeout, |era| {
            era.decision(id).is_some()
        })?;
        match end {
            OpEnd::Completed => {}
            OpEnd::TimedOut => return Err(CommError::TimedOut(self.op_timeout)),
            _ => return Err(CommError::Shutdown),
        }
        let agreed = self
            .with_era(request.epoch, |era, _| {
                let agreed = era.decision(id).map(Agreed::from_value);
                era.returned(id);
                agreed
            })?
            .flatten()
            .ok_or(CommError::Shutdown)?;
        self.endpoint().learn_agreed_failures(&agreed.failed)?;
        Ok(agreed)
    }

    fn start_agreement(
        &mut self,
        words: &[u64],
        op: ReduceOp,
        rebalance: bool,
    ) -> Result<AgreeRequest, CommError> {
        // Agreements are operations of the communicator: scripted kills count them too.
        self.endpoint().die_if_scripted(self.ops);
        self.ensure_progress_thread()?;
        self.ops += 1;
        self.agreements += 1;
        let id = (self.epoch << ERA_EPOCH_SHIFT) + self.agreements;
        let acked = self.acked.clone();
        let words = words.to_vec();
        self.with_era(self.epoch, |era, out| {
            era.start(id, op, words, &acked, rebalance, out)
        })?
        .ok_or(CommError::Shutdown)??;
        Ok(AgreeRequest {
            id,
            epoch: self.epoch,
        })
    }

    /// ULFM's `ack_failed`: acknowledges every failure known now; returns how many are
    /// acknowledged. Agreements stop reporting acknowledged failures as errors.
    pub fn ack_failed(&mut self) -> usize {
        let failed: Vec<u32> = self.endpoint().failed().iter().copied().collect();
        for rank in failed {
            self.acked.insert(rank);
        }
        self.acked.len()
    }

    /// Agreement frames this rank has sent so far in its live communicators (a frame count for
    /// reports; an agreement's own is the difference around it, within one communicator).
    pub fn agreement_messages(&self) -> u64 {
        self.endpoint().services_frames_sent()
    }

    /// The failures this rank acknowledged (world ranks).
    pub fn acked_failed(&self) -> Vec<u32> {
        self.acked.as_slice().to_vec()
    }

    /// ULFM's `shrink`: agrees on the failed ranks and continues as a communicator of the
    /// survivors, identical at all of them and without any rank a survivor had acknowledged
    /// as failed. Ranks are renumbered 0..size in world order; returns the members' world ranks.
    pub fn shrink(&mut self) -> Result<Vec<u32>, CommError> {
        let agreed = self.agree_with(&[], ReduceOp::BitOr)?;
        let mut failed = RankSet::from_unsorted(agreed.failed);
        // An earlier agreement of this communicator that decided failures rebuilt the tree
        // without them, and later decisions only name failures among the tree's members: the
        // ranks it left out are agreed dead too, identically at every survivor (each returned
        // from that agreement before this one).
        let left_out = self
            .with_era(self.epoch, |era, _| era.tree().excluded().to_vec())?
            .unwrap_or_default();
        for rank in left_out {
            failed.insert(rank);
        }
        let members: Vec<u32> = self
            .members()
            .into_iter()
            .filter(|r| !failed.contains(*r))
            .collect();
        let excluded: Vec<u32> = (0..self.env.size)
            .filter(|r| members.binary_search(r).is_err())
            .collect();
        self.epoch += 1;
        self.agreements = 0;
        self.install_era(&excluded)?;
        self.endpoint().set_group(members.clone());
        self.members = Some(members.clone());
        Ok(members)
    }

    /// ULFM's `revoke`: every pending and later operation on this communicator fails at every
    /// survivor with [`CommError::Revoked`]; agreements and shrink still work.
    pub fn revoke(&mut self) -> Result<(), CommError> {
        self.with_era(self.epoch, |era, out| era.revoke(out))?;
        Ok(())
    }

    /// Whether this communicator was revoked.
    pub fn is_revoked(&self) -> bool {
        self.endpoint().revoked(self.epoch)
    }
}
