//! Protocol wrappers (counting, watching, filtering) that forward every method by construction.
//!
//! A wrapper implements [`Wrapper`], not [`Protocol`]: the blanket implementation forwards every
//! [`Protocol`] method to [`Wrapper::inner`], and only [`Wrapper::wrap_handle`] may add
//! behaviour. A wrapper written by hand could forget a method with a default (the checkers'
//! wrappers dropped `check_invariants` and `serve_until`); this one cannot.

use super::{Input, Outbox, Phase, Protocol, RankStatus};
use crate::time::Time;

/// A protocol around an inner one; [`Protocol`] comes with it (see the module docs).
pub trait Wrapper {
    /// The wrapped protocol.
    type Inner: Protocol + ?Sized;

    /// The wrapped protocol.
    fn inner(&self) -> &Self::Inner;

    /// The wrapped protocol, mutably.
    fn inner_mut(&mut self) -> &mut Self::Inner;

    /// Handles one input (what [`Protocol::handle`] does for the wrapper). By default it hands
    /// the input to the inner protocol; a wrapper that watches, filters or adds inputs overrides
    /// this and calls `self.inner_mut().handle(..)` itself.
    fn wrap_handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        self.inner_mut().handle(now, input, out);
    }
}

impl<W: Wrapper> Protocol for W {
    fn handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
        self.wrap_handle(now, input, out);
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.inner().poll_timeout()
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        self.inner().estimate(dst);
    }

    fn phase(&self) -> Phase {
        self.inner().phase()
    }

    fn has_result(&self) -> bool {
        self.inner().has_result()
    }

    fn result(&self) -> Option<crate::values::ValuesRef<'_>> {
        self.inner().result()
    }

    fn reads_clock(&self) -> bool {
        self.inner().reads_clock()
    }

    fn status(&self) -> RankStatus {
        self.inner().status()
    }

    fn settled(&self) -> bool {
        self.inner().settled()
    }

    fn serve_until(&self) -> Option<Time> {
        self.inner().serve_until()
    }

    fn serves_until_all_finish(&self) -> bool {
        self.inner().serves_until_all_finish()
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.inner().check_invariants()
    }

    fn inspect(&self) -> crate::inspect::Inspection {
        self.inner().inspect()
    }
}

/// A boxed protocol is the simplest wrapper.
impl<P: Protocol + ?Sized> Wrapper for Box<P> {
    type Inner = P;

    fn inner(&self) -> &P {
        self
    }

    fn inner_mut(&mut self) -> &mut P {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A protocol whose every method says something other than the trait's default.
    struct Broken;

    impl Protocol for Broken {
        fn handle(&mut self, _now: Time, _input: Input<'_>, _out: &mut Outbox) {}

        fn poll_timeout(&self) -> Option<Time> {
            Some(Time(7))
        }

        fn estimate(&self, dst: &mut Vec<f64>) {
            dst.clear();
        }

        fn phase(&self) -> Phase {
            Phase::Running
        }

        fn status(&self) -> RankStatus {
            RankStatus::default()
        }

        fn settled(&self) -> bool {
            false
        }

        fn serve_until(&self) -> Option<Time> {
            Some(Time(9))
        }

        fn serves_until_all_finish(&self) -> bool {
            true
        }

        fn check_invariants(&self) -> Result<(), String> {
            Err("mass is not conserved".into())
        }
    }

    /// A wrapper that counts inputs, as the checkers' wrappers do.
    struct Counting<P> {
        inner: P,
        inputs: u32,
    }

    impl<P: Protocol> Wrapper for Counting<P> {
        type Inner = P;

        fn inner(&self) -> &P {
            &self.inner
        }

        fn inner_mut(&mut self) -> &mut P {
            &mut self.inner
        }

        fn wrap_handle(&mut self, now: Time, input: Input<'_>, out: &mut Outbox) {
            self.inputs += 1;
            self.inner.handle(now, input, out);
        }
    }

    fn assert_forwards(protocol: &dyn Protocol) {
        assert_eq!(
            protocol.check_invariants(),
            Err("mass is not conserved".to_string()),
            "an inner invariant failure must be visible through the wrapper"
        );
        assert_eq!(protocol.poll_timeout(), Some(Time(7)));
        assert_eq!(protocol.serve_until(), Some(Time(9)));
        assert!(protocol.serves_until_all_finish());
        assert!(!protocol.settled());
    }

    #[test]
    fn wrappers_forward_invariant_failures_and_timers() {
        let mut counting = Counting {
            inner: Broken,
            inputs: 0,
        };
        counting.handle(Time(0), Input::Stop, &mut Outbox::new());
        assert_eq!(counting.inputs, 1);
        assert_forwards(&counting);
        let boxed: Box<dyn Protocol> = Box::new(Broken);
        assert_forwards(&boxed);
        assert_forwards(&Counting {
            inner: boxed,
            inputs: 0,
        });
    }
}
