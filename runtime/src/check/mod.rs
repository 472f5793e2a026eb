//! Semantics checkers: run a protocol in the simulator under a random fault schedule and verify
//! the properties its paper states, on every rank, with inputs chosen so that a violation shows.

pub mod corrected;
pub mod era;
pub mod ftco;
pub mod ftring;
pub mod segments;

use ftcoll_algos::protocol::{Event, Input, Outbox, Protocol, Wrapper};
use ftcoll_algos::{Time, ValuesRef};

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

impl<P: Protocol> Wrapper for CountDeliveries<P> {
    type Inner = P;

    fn inner(&self) -> &P {
        &self.inner
    }

    fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    fn wrap_handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        let before = out.events().len();
        self.inner.handle(now, input, out);
        let completed = out.events()[before..]
            .iter()
            .filter(|e| matches!(e, Event::Completed))
            .count();
        self.deliveries += completed as u32;
    }
}

/// A rank's whole `f64` result of `len` elements from the pieces a shell hands out (each at its
/// offset); `None` where a piece is of another type or out of range.
pub(crate) fn whole_f64<'a>(
    pieces: impl Iterator<Item = (usize, ValuesRef<'a>)>,
    len: usize,
) -> Option<Vec<f64>> {
    let mut whole = vec![f64::NAN; len];
    for (at, piece) in pieces {
        let ValuesRef::F64(piece) = piece else {
            return None;
        };
        whole.get_mut(at..at + piece.len())?.copy_from_slice(piece);
    }
    Some(whole)
}
