//! A protocol's own table of timer deadlines: the source of [`super::Protocol::poll_timeout`].

use super::TimerId;
use crate::time::Time;

/// A small deadline table, for protocols with timers: arming replaces, disarming forgets, and a
/// timer is handed out at most once per arming, so a stale or repeated wakeup is harmless.
/// Bounded by the number of distinct timers a protocol uses (its degree, at most).
#[derive(Clone, Debug, Default)]
pub struct TimerTable {
    deadlines: Vec<(TimerId, Time)>,
}

impl TimerTable {
    /// Arms `timer` at `at`, replacing its earlier deadline.
    pub fn arm(&mut self, timer: TimerId, at: Time) {
        match self.deadlines.iter_mut().find(|(id, _)| *id == timer) {
            Some(entry) => entry.1 = at,
            None => self.deadlines.push((timer, at)),
        }
    }

    /// Disarms `timer` (nothing happens if it is not armed).
    pub fn disarm(&mut self, timer: TimerId) {
        self.deadlines.retain(|(id, _)| *id != timer);
    }

    /// Disarms and returns the armed timer with the earliest deadline at or before `now` (ties
    /// in [`TimerId`] order), or `None` when no timer is due. A protocol handling
    /// [`super::Input::Timeout`] takes the due timers one by one, so the order is deterministic.
    pub fn take_due(&mut self, now: Time) -> Option<TimerId> {
        let (i, _) = self
            .deadlines
            .iter()
            .enumerate()
            .filter(|(_, (_, at))| *at <= now)
            .min_by_key(|(_, (id, at))| (*at, *id))?;
        Some(self.deadlines.swap_remove(i).0)
    }

    /// The deadline of `timer`, if it is armed.
    pub fn deadline(&self, timer: TimerId) -> Option<Time> {
        self.deadlines
            .iter()
            .find(|(id, _)| *id == timer)
            .map(|(_, at)| *at)
    }

    /// The earliest armed deadline: what [`super::Protocol::poll_timeout`] reports.
    pub fn next_deadline(&self) -> Option<Time> {
        self.deadlines.iter().map(|(_, at)| *at).min()
    }

    /// Number of armed timers.
    pub fn len(&self) -> usize {
        self.deadlines.len()
    }

    /// True when no timer is armed.
    pub fn is_empty(&self) -> bool {
        self.deadlines.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rearmed_and_repeated_timers_fire_once_at_their_latest_deadline() {
        let mut table = TimerTable::default();
        let t = TimerId { kind: 1, index: 4 };
        table.arm(t, Time(10));
        table.arm(t, Time(20));
        assert_eq!(table.next_deadline(), Some(Time(20)));
        assert_eq!(table.take_due(Time(10)), None, "re-armed timer fired early");
        assert_eq!(table.take_due(Time(20)), Some(t));
        assert_eq!(table.take_due(Time(30)), None, "fired twice");
        assert_eq!(table.next_deadline(), None);
    }

    #[test]
    fn due_timers_come_out_by_deadline_then_id() {
        let mut table = TimerTable::default();
        let a = TimerId { kind: 2, index: 0 };
        let b = TimerId { kind: 1, index: 0 };
        let c = TimerId { kind: 1, index: 1 };
        table.arm(a, Time(5));
        table.arm(c, Time(7));
        table.arm(b, Time(5));
        table.arm(TimerId { kind: 3, index: 0 }, Time(9));
        table.disarm(TimerId { kind: 3, index: 0 });
        let due: Vec<_> = std::iter::from_fn(|| table.take_due(Time(8))).collect();
        assert_eq!(due, [b, a, c]);
        assert!(table.is_empty());
    }
}
