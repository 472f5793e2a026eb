//! Per-communicator services: state machines the executor serves beside operations, whatever
//! operation runs and between operations (ULFM's agreement and revocation, which the library
//! installs for every communicator epoch). The executor routes frames to them by asking them,
//! never by naming an algorithm.

use std::any::Any;
use std::time::{Duration, Instant};

use ftcoll_algos::protocol::Outbox;
use ftcoll_algos::wire::{Frame, FrameError, FrameHeader};
use ftcoll_algos::Rank;

use super::held::{HeldFrame, MAX_EARLY_FRAMES};
use super::spares::Spares;
use super::{log_rejected, Endpoint, ExecError, OpEnd, OpStats};
use crate::transport::Transport;

/// Communicators whose services still answer peers (the newest and its ancestors).
const MAX_SERVICES: usize = 4;

/// A per-communicator service (an agreement service, say): it gets the frames it claims
/// whatever operation runs, even between operations, and every failure notice. It speaks world
/// ranks, in what it receives and in what it sends.
pub trait Service: Any + Send {
    /// The wire id (the header's `algo`) of the frames it may claim. The executor asks
    /// [`Service::claim`] only about frames that carry it, so that an operation's frames pay
    /// one comparison.
    fn wire_id(&self) -> u8;

    /// Whose a frame with the service's wire id is.
    fn claim(&self, header: &FrameHeader) -> Claim;

    /// Handles a frame it claimed as [`Claim::Mine`], from world rank `from`; queues what it
    /// sends into `out`.
    fn handle_frame(
        &mut self,
        from: Rank,
        frame: &Frame<'_>,
        out: &mut Outbox,
    ) -> Result<(), FrameError>;

    /// World rank `rank` failed.
    fn peer_failed(&mut self, rank: u32, out: &mut Outbox);

    /// Whether its communicator was revoked: operations that watch it fail with
    /// [`OpEnd::Revoked`].
    fn revoked(&self) -> bool;

    /// Frames it has sent so far (for per-operation counts).
    fn frames_sent(&self) -> u64;
}

/// How a service sees a frame that carries its wire id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Its own: handed to [`Service::handle_frame`].
    Mine,
    /// Of a later communicator than the service's (a faster peer created it first): held,
    /// bounded, until a service that claims it is installed, if every service installed with
    /// the wire id says so.
    Later,
    /// Of an earlier communicator: dropped unless another service claims it.
    Earlier,
}

/// The services installed, newest last, with what they queue and the frames held for services
/// not installed yet.
#[derive(Default)]
pub(super) struct Services {
    /// Services by communicator epoch, newest last; at most [`MAX_SERVICES`].
    installed: Vec<(u64, Box<dyn Service>)>,
    /// The wire ids of the installed services, as a bit set: the executor's test on every
    /// frame.
    wire_ids: [u64; 4],
    /// What the services queue, addressed by world rank.
    pub(super) outbox: Outbox,
    /// Frames no installed service claimed but every one of their wire id saw as
    /// [`Claim::Later`]; at most [`MAX_EARLY_FRAMES`].
    held: Vec<HeldFrame>,
    spare_words: Spares<Vec<u64>>,
    /// The epoch whose revocation fails operations in progress.
    watched: Option<u64>,
    /// Whether the watched service is revoked, brought up to date after every call that may
    /// change it: the operation loop reads it after every frame.
    watched_revoked: bool,
}

impl Services {
    /// Whether some installed service may claim frames with wire id `algo`.
    #[inline]
    pub(super) fn may_claim(&self, algo: u8) -> bool {
        self.wire_ids[usize::from(algo >> 6)] & (1 << (algo & 63)) != 0
    }

    /// Whether the watched communicator was revoked.
    #[inline]
    pub(super) fn watched_revoked(&self) -> bool {
        self.watched_revoked
    }

    /// Routes a frame that carries an installed service's wire id (see
    /// [`Services::may_claim`]): to the service that claims it, else aside if it is ahead of
    /// every service of its wire id, else nowhere. False if the service that claimed it
    /// rejected it.
    pub(super) fn receive(&mut self, from: Rank, frame: &Frame<'_>, bytes: &[u8]) -> bool {
        let mut ahead = true;
        for (_, service) in self.installed.iter_mut().rev() {
            if service.wire_id() != frame.header.algo {
                continue;
            }
            match service.claim(&frame.header) {
                Claim::Mine => {
                    let accepted = match service.handle_frame(from, frame, &mut self.outbox) {
                        Ok(()) => true,
                        Err(error) => {
                            log_rejected(from, error);
                            false
                        }
                    };
                    self.refresh_revoked();
                    return accepted;
                }
                Claim::Later => {}
                Claim::Earlier => ahead = false,
            }
        }
        if ahead && self.held.len() < MAX_EARLY_FRAMES {
            let words = self.spare_words.copy_of(bytes);
            self.held.push((from, words, bytes.len()));
        } else {
            tracing::debug!(from = from.0, "dropped a frame of a freed service");
        }
        true
    }

    /// Tells every service that world rank `rank` failed.
    pub(super) fn peer_failed(&mut self, rank: u32) {
        for (_, service) in &mut self.installed {
            service.peer_failed(rank, &mut self.outbox);
        }
        self.refresh_revoked();
    }

    /// Installs `service` for `epoch`, in place of one installed for it before, and hands it
    /// the frames held for it; the oldest service goes beyond [`MAX_SERVICES`].
    fn install(&mut self, epoch: u64, mut service: Box<dyn Service>, stats: &mut OpStats) {
        self.installed.retain(|(e, _)| *e != epoch);
        for (from, words, len) in std::mem::take(&mut self.held) {
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            let mine = Frame::decode(&bytes[..len])
                .is_ok_and(|frame| service.claim(&frame.header) == Claim::Mine);
            if !mine {
                self.held.push((from, words, len));
                continue;
            }
            if let Ok(frame) = Frame::decode(&bytes[..len]) {
                if let Err(error) = service.handle_frame(from, &frame, &mut self.outbox) {
                    stats.rejected += 1;
                    log_rejected(from, error);
                }
            }
            self.spare_words.recycle(words);
        }
        self.installed.push((epoch, service));
        if self.installed.len() > MAX_SERVICES {
            self.installed.remove(0);
        }
        self.wire_ids = [0; 4];
        for (_, service) in &self.installed {
            let algo = service.wire_id();
            self.wire_ids[usize::from(algo >> 6)] |= 1 << (algo & 63);
        }
        self.refresh_revoked();
    }

    fn find(&self, epoch: u64) -> Option<&dyn Service> {
        self.installed
            .iter()
            .find(|(e, _)| *e == epoch)
            .map(|(_, s)| &**s)
    }

    fn refresh_revoked(&mut self) {
        self.watched_revoked = self
            .watched
            .and_then(|epoch| self.find(epoch))
            .is_some_and(|s| s.revoked());
    }
}

impl<T: Transport> Endpoint<T> {
    /// Installs the service of communicator `epoch` (in place of one installed for it before);
    /// it learns every failure known so far and gets the frames that arrived for it before.
    pub fn install_service(
        &mut self,
        epoch: u64,
        mut service: Box<dyn Service>,
    ) -> Result<(), ExecError> {
        for &rank in &self.failed {
            service.peer_failed(rank, &mut self.services.outbox);
        }
        let mut stats = OpStats::default();
        self.services.install(epoch, service, &mut stats);
        self.after_handle(&mut stats)
    }

    /// The service of `epoch`, if it is installed and an `S`.
    pub fn service<S: Service>(&self, epoch: u64) -> Option<&S> {
        let any: &dyn Any = self.services.find(epoch)?;
        any.downcast_ref()
    }

    /// Acts on the service of `epoch` (start an agreement, revoke) and sends what it queued;
    /// `None` if no `S` is installed for `epoch`.
    pub fn with_service<S: Service, R>(
        &mut self,
        epoch: u64,
        act: impl FnOnce(&mut S, &mut Outbox) -> R,
    ) -> Result<Option<R>, ExecError> {
        let services = &mut self.services;
        let Some((_, service)) = services.installed.iter_mut().find(|(e, _)| *e == epoch) else {
            return Ok(None);
        };
        let any: &mut dyn Any = &mut **service;
        let Some(service) = any.downcast_mut::<S>() else {
            return Ok(None);
        };
        let result = act(service, &mut services.outbox);
        services.refresh_revoked();
        self.after_handle(&mut OpStats::default())?;
        Ok(Some(result))
    }

    /// Serves the transport until `done` holds for the service of `epoch` (or it is gone), the
    /// time limit passes, or the job shuts down. A service needs no operation of its own here:
    /// its frames reach it in every receive.
    pub fn wait_service<S: Service>(
        &mut self,
        epoch: u64,
        limit: Duration,
        mut done: impl FnMut(&S) -> bool,
    ) -> Result<OpEnd, ExecError> {
        let deadline = Instant::now() + limit;
        let mut stats = OpStats::default();
        // Each turn waits at most a few milliseconds when idle; the deadline bounds the loop.
        loop {
            if self.service::<S>(epoch).is_none_or(&mut done) {
                return Ok(OpEnd::Completed);
            }
            if Instant::now() >= deadline {
                return Ok(OpEnd::TimedOut);
            }
            if self.control.shutdown_requested() {
                return Ok(OpEnd::Shutdown);
            }
            let progressed = self.serve_once(&mut stats)?;
            if !progressed && !self.service::<S>(epoch).is_none_or(&mut done) {
                let left = deadline.saturating_duration_since(Instant::now());
                self.transport
                    .wait(Some(left.min(Duration::from_millis(5))))?;
            }
        }
    }

    /// Makes operations fail with [`OpEnd::Revoked`] once the service of `epoch` says its
    /// communicator is revoked.
    pub fn watch_revoke(&mut self, epoch: u64) {
        self.services.watched = Some(epoch);
        self.services.refresh_revoked();
    }

    /// Whether the communicator of `epoch` was revoked (its operations must fail).
    pub fn revoked(&self, epoch: u64) -> bool {
        self.services.find(epoch).is_some_and(|s| s.revoked())
    }

    /// Frames the services still installed have sent (for per-operation counts).
    pub fn services_frames_sent(&self) -> u64 {
        self.services
            .installed
            .iter()
            .map(|(_, s)| s.frames_sent())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use ftcoll_algos::protocol::Outbox;
    use ftcoll_algos::wire::encode;
    use ftcoll_algos::{Algorithm, OpId, ValuesRef};

    use super::*;

    /// A service of epoch `epoch` that claims ids with the epoch above bit 8 and records what
    /// it gets; a frame of kind 1 revokes it.
    struct Recorder {
        epoch: u64,
        frames: Vec<u64>,
        failed: Vec<u32>,
        revoked: bool,
    }

    impl Recorder {
        fn boxed(epoch: u64) -> Box<dyn Service> {
            Box::new(Recorder {
                epoch,
                frames: Vec::new(),
                failed: Vec::new(),
                revoked: false,
            })
        }
    }

    impl Service for Recorder {
        fn wire_id(&self) -> u8 {
            Algorithm::EraAgree.wire_id()
        }

        fn claim(&self, header: &FrameHeader) -> Claim {
            match (header.op_id >> 8).cmp(&self.epoch) {
                std::cmp::Ordering::Equal => Claim::Mine,
                std::cmp::Ordering::Greater => Claim::Later,
                std::cmp::Ordering::Less => Claim::Earlier,
            }
        }

        fn handle_frame(
            &mut self,
            _from: Rank,
            frame: &Frame<'_>,
            _out: &mut Outbox,
        ) -> Result<(), FrameError> {
            self.frames.push(frame.header.op_id);
            self.revoked |= frame.header.kind == 1;
            Ok(())
        }

        fn peer_failed(&mut self, rank: u32, _out: &mut Outbox) {
            self.failed.push(rank);
        }

        fn revoked(&self) -> bool {
            self.revoked
        }

        fn frames_sent(&self) -> u64 {
            0
        }
    }

    fn frame(id: u64, kind: u8) -> Vec<u8> {
        let header = FrameHeader::new(Algorithm::EraAgree, kind, OpId(id), Rank(1), 0);
        encode(header, ValuesRef::Empty)
    }

    fn offer(services: &mut Services, id: u64, kind: u8) {
        let bytes = frame(id, kind);
        let decoded = Frame::decode(&bytes).unwrap();
        assert!(services.may_claim(decoded.header.algo));
        services.receive(Rank(1), &decoded, &bytes);
    }

    fn frames_of(services: &Services, epoch: u64) -> Vec<u64> {
        let any: &dyn Any = services.find(epoch).unwrap();
        any.downcast_ref::<Recorder>().unwrap().frames.clone()
    }

    #[test]
    fn frames_go_to_their_epoch_or_wait_for_a_later_one() {
        let mut services = Services::default();
        let mut stats = OpStats::default();
        assert!(!services.may_claim(Algorithm::EraAgree.wire_id()));
        services.install(1, Recorder::boxed(1), &mut stats);
        assert!(!services.may_claim(Algorithm::Rdb.wire_id()));
        offer(&mut services, (1 << 8) + 1, 0);
        offer(&mut services, (2 << 8) + 1, 0);
        offer(&mut services, 5, 0);
        assert_eq!(frames_of(&services, 1), [(1 << 8) + 1]);
        assert_eq!(services.held.len(), 1, "the later epoch's frame waits");
        services.install(2, Recorder::boxed(2), &mut stats);
        assert_eq!(frames_of(&services, 2), [(2 << 8) + 1]);
        assert!(services.held.is_empty());
    }

    #[test]
    fn at_most_max_services_answer_and_the_oldest_goes() {
        let mut services = Services::default();
        let mut stats = OpStats::default();
        for epoch in 0..=MAX_SERVICES as u64 {
            services.install(epoch, Recorder::boxed(epoch), &mut stats);
        }
        assert_eq!(services.installed.len(), MAX_SERVICES);
        assert!(services.find(0).is_none());
        // A frame of the freed epoch is neither handled nor held.
        offer(&mut services, 3, 0);
        assert!(services.held.is_empty());
        services.peer_failed(7);
        let any: &dyn Any = services.find(1).unwrap();
        assert_eq!(any.downcast_ref::<Recorder>().unwrap().failed, [7]);
    }

    #[test]
    fn a_revoking_frame_marks_the_watched_communicator_revoked() {
        let mut services = Services::default();
        let mut stats = OpStats::default();
        services.install(0, Recorder::boxed(0), &mut stats);
        services.install(1, Recorder::boxed(1), &mut stats);
        services.watched = Some(1);
        services.refresh_revoked();
        offer(&mut services, 2, 1);
        assert!(
            !services.watched_revoked(),
            "epoch 0's revocation is not epoch 1's"
        );
        offer(&mut services, (1 << 8) + 2, 1);
        assert!(services.watched_revoked());
    }
}
