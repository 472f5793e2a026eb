//! Routing arrived frames: to the services that claim them, to the operation running, aside for
//! a later operation (with the answer its family gives before it starts), or to a finished
//! operation still served.

use std::time::Duration;

use ftcoll_algos::protocol::{Input, Outbox, Protocol};
use ftcoll_algos::wire::Frame;
use ftcoll_algos::{Algorithm, Rank, Time};

use super::held::HeldFrames;
use super::lingering::Lingering;
use super::services::Services;
use super::{local, log_rejected, Endpoint, ExecError, OpStats, RECV_BATCH};
use crate::transport::Transport;

impl<T: Transport> Endpoint<T> {
    /// Hands arrived frames to the protocol; returns how many were handled. `running`: the
    /// protocol is operation `op_id`'s; otherwise no operation runs and `op_id` is the next one,
    /// whose frames are held with the later ones'. At most `BATCH` frames per call.
    pub(super) fn receive<P: Protocol, const BATCH: usize>(
        &mut self,
        protocol: &mut P,
        op_id: u64,
        running: bool,
        clock: bool,
        stats: &mut OpStats,
    ) -> Result<usize, ExecError> {
        // Without a protocol that reads the time, a lingering one or a planned slowdown, frames
        // are handled at the last time read.
        let clock = clock || !self.lingering.is_empty() || self.faults.has_slowdown();
        // Split borrows: the transport lends the bytes while the protocol and outbox take them.
        let Endpoint {
            transport,
            outbox,
            me,
            held,
            epoch,
            last_now,
            faults,
            lingering,
            services,
            group,
            ..
        } = self;
        let mut dispatch = Dispatch {
            protocol,
            op_id,
            running,
            me: *me,
            group,
            outbox,
            held,
            services,
            lingering,
            stats,
        };
        let mut handled = 0;
        // One timestamp per batch, taken when its first frame is handled: frames that arrived
        // together are handled "now", and an empty poll costs no clock read.
        let mut batch_time: Option<(Time, Option<Duration>)> = None;
        transport.poll_recv(BATCH, &mut |from, bytes| {
            handled += 1;
            let (now, slow) = *batch_time.get_or_insert_with(|| {
                if !clock {
                    return (last_now.get(), None);
                }
                let elapsed = epoch.elapsed();
                let now = Time(elapsed.as_nanos() as u64);
                last_now.set(now);
                (now, faults.slowdown(elapsed))
            });
            dispatch.frame(from, bytes, now, slow);
        })?;
        self.after_handle(stats)?;
        if !self.lingering.is_empty() {
            let now = self.now();
            self.lingering.retain(|l| l.still_needed(now));
        }
        Ok(handled)
    }

    /// [`Endpoint::receive`] frame by frame, carrying out what each frame made the protocol send
    /// before taking the next, up to [`RECV_BATCH`] frames. A batch handled whole holds back
    /// the sends of its first frames until its last is combined: in a ring with a core per rank
    /// the next rank then idles, and the stall goes round the ring (on the lent 16-core
    /// machine `ft-ring`, which runs this loop, took three times the plain ring at 8 ranks and
    /// 1 MiB).
    pub(super) fn receive_each<P: Protocol>(
        &mut self,
        protocol: &mut P,
        op_id: u64,
        clock: bool,
        stats: &mut OpStats,
    ) -> Result<usize, ExecError> {
        let mut handled = 0;
        while handled < RECV_BATCH {
            if self.receive::<P, 1>(protocol, op_id, true, clock, stats)? == 0 {
                break;
            }
            handled += 1;
        }
        Ok(handled)
    }

    /// Hands a frame held for operation `op_id` to its protocol once it runs.
    pub(super) fn deliver<P: Protocol>(
        &mut self,
        protocol: &mut P,
        from: Rank,
        bytes: &[u8],
        op_id: u64,
        stats: &mut OpStats,
    ) {
        match Frame::decode(bytes) {
            Ok(frame) if frame.header.op_id == op_id => {
                stats.received += 1;
                protocol.handle(self.now(), Input::Message { from, frame }, &mut self.outbox);
            }
            Ok(_) => {}
            Err(error) => {
                stats.rejected += 1;
                log_rejected(from, error);
            }
        }
    }
}

/// What routing one received frame needs, borrowed from the endpoint for one receive poll
/// while the transport lends the frame's bytes.
struct Dispatch<'a, P> {
    protocol: &'a mut P,
    /// The operation running, or the next one when none runs.
    op_id: u64,
    running: bool,
    me: Rank,
    group: &'a Option<Vec<u32>>,
    outbox: &'a mut Outbox,
    held: &'a mut HeldFrames,
    services: &'a mut Services,
    lingering: &'a mut Vec<Lingering>,
    stats: &'a mut OpStats,
}

impl<P: Protocol> Dispatch<'_, P> {
    /// Routes the frame `bytes` from world rank `from`, arrived at `now`; `slow` is a planned
    /// slowdown per frame of the operation.
    #[inline]
    fn frame(&mut self, from: Rank, bytes: &[u8], now: Time, slow: Option<Duration>) {
        let frame = match Frame::decode(bytes) {
            Ok(frame) => frame,
            Err(error) => {
                self.stats.rejected += 1;
                log_rejected(from, error);
                return;
            }
        };
        // Services first: their ids may equal an operation's.
        if self.services.may_claim(frame.header.algo) {
            if !self.services.receive(from, &frame, bytes) {
                self.stats.rejected += 1;
            }
            return;
        }
        let Some(member) = local(self.group, from.0) else {
            tracing::debug!(
                from = from.0,
                "dropped a frame from outside the communicator"
            );
            return;
        };
        let op = frame.header.op_id;
        if self.running && op == self.op_id {
            self.stats.received += 1;
            let input = Input::Message {
                from: Rank(member),
                frame,
            };
            self.protocol.handle(now, input, self.outbox);
            if let Some(delay) = slow {
                std::thread::sleep(delay);
            }
        } else if op >= self.op_id {
            self.hold(from, Rank(member), &frame, bytes);
        } else {
            self.serve_finished(Rank(member), frame, now);
        }
    }

    /// Holds a frame of an operation not started here yet, and sends the answer its family
    /// gives before the start, if any.
    fn hold(&mut self, from: Rank, local_from: Rank, frame: &Frame<'_>, bytes: &[u8]) {
        if !self.held.has_room() {
            tracing::debug!(from = from.0, "no room for a frame of a later operation");
            return;
        }
        let header = &frame.header;
        let answer = Algorithm::from_wire(header.algo).and_then(Algorithm::answer_before_start);
        if let Some(answer) = answer {
            let local_me = local(self.group, self.me.0);
            if let Some(local_me) = local_me {
                // Answered in the shape it was addressed in: this rank checks the shape itself
                // when it starts and takes the held frame.
                let before = self.outbox.stamp();
                self.outbox.set_stamp(header.stamp());
                answer(Rank(local_me), local_from, header, self.outbox);
                self.outbox.set_stamp(before);
            }
        }
        self.held.hold(header.op_id, from, bytes);
    }

    /// Hands a frame of a finished operation to it if it is still served.
    fn serve_finished(&mut self, from: Rank, frame: Frame<'_>, now: Time) {
        let op = frame.header.op_id;
        match self.lingering.iter_mut().find(|l| l.op_id == op) {
            Some(l) => {
                tracing::trace!(from = from.0, op, "served a finished operation");
                l.handle(now, Input::Message { from, frame }, self.outbox)
            }
            None => tracing::debug!(from = from.0, "dropped a frame of a finished operation"),
        }
    }
}
