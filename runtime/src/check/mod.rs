//! Semantics checkers: run a protocol in the simulator under a random fault schedule and verify
//! the properties its paper states, on every rank, with inputs chosen so that a violation shows.

pub mod corrected;
pub mod era;
pub mod ftco;

use ftcoll_algos::protocol::{Event, Input, Outbox, Phase, Protocol, RankStatus};
use ftcoll_algos::Time;

/// A protocol wrapper that counts how often the inner protocol reported completion, so that
/// "delivers at most once" is checked on what the protocol said, not on its final phase.
#[derive(Clone, Debug)]
pub struct CountDeliveries<P> {
    /// The wrapped protocol.
    pub inner: P,
    /// [`Event::Completed`] reports so far.
    pub deliveries: u32,
}

impl<P> CountDeliveries<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> Self {
        CountDeliveries {
            inner,
            deliveries: 0,
        }
    }
}

impl<P: Protocol> Protocol for CountDeliveries<P> {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        let before = out.events().len();
        self.inner.handle(now, input, out);
        let completed = out.events()[before..]
            .iter()
            .filter(|e| matches!(e, Event::Completed))
            .count();
        self.deliveries += completed as u32;
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.inner.poll_timeout()
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        self.inner.estimate(dst);
    }

    fn phase(&self) -> Phase {
        self.inner.phase()
    }

    fn has_result(&self) -> bool {
        self.inner.has_result()
    }

    fn settled(&self) -> bool {
        self.inner.settled()
    }

    fn status(&self) -> RankStatus {
        self.inner.status()
    }
}
