//! The simulator's own bounds.

use ftcoll_algos::protocol::{Counters, Detail, Input, Outbox, Phase, Protocol, RankStatus};
use ftcoll_algos::{ReduceOp, Time};

use crate::sim::{SimConfig, Simulation};

/// A protocol with the bug the idle-timeout bound is for: once started, its deadline stays at
/// step 5 whatever it is handed, so every `Timeout` leaves it due at the same instant.
#[derive(Default)]
struct StuckTimer {
    started: bool,
}

impl Protocol for StuckTimer {
    fn handle(&mut self, _now: Time, input: Input<'_>, _out: &mut Outbox) {
        self.started |= matches!(input, Input::Start { .. });
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.started.then_some(Time(5))
    }

    fn estimate(&self, dst: &mut Vec<f64>) {
        dst.clear();
    }

    fn phase(&self) -> Phase {
        Phase::Running
    }

    fn status(&self) -> RankStatus {
        RankStatus {
            phase: Phase::Running,
            iteration: 0,
            counters: Counters::default(),
            detail: Detail::None,
        }
    }
}

#[test]
fn a_timer_that_stays_in_the_past_ends_the_run_as_truncated() {
    let config = SimConfig {
        max_events: u64::MAX,
        ..SimConfig::default()
    };
    let mut sim = Simulation::new(
        config,
        vec![StuckTimer::default(), StuckTimer::default()],
        vec![1.0, 2.0],
        1,
        ReduceOp::Sum,
    )
    .expect("two ranks");
    let report = sim.run();
    assert!(report.truncated, "{report:?}");
    // Ended by the bound on idle timeouts, not by the (unbounded) event count.
    assert!(
        report.events <= 2 * u64::from(super::MAX_IDLE_TIMEOUTS),
        "{}",
        report.events
    );
}
