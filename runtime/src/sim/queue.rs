//! The simulator's event queue: events ordered by (time, class), FIFO within one key.
//!
//! Virtual times in a LogP run take few distinct values at any moment (all ranks of a round
//! act at nearly the same step), so events are bucketed by key in a B-tree of FIFO deques: a push
//! costs O(log K) for K distinct pending keys, not O(log E) for E pending events, and a whole
//! round of a million ranks sits in one bucket. FIFO order within a bucket, plus the fixed class
//! order, makes the run a pure function of the seed.

use std::collections::{BTreeMap, VecDeque};

use ftcoll_algos::Time;

/// Order of event classes at the same instant: faults strike first (a crash at t = 0 is
/// pre-operational), then starts, deliveries, failure notices, timers (so that a round timer at
/// t sees every message that arrived at t), and control events last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventClass {
    /// Crashes, stops, state flips, link cuts, detector verdicts.
    Fault = 0,
    /// A rank begins the operation.
    Start = 1,
    /// A message arrives.
    Deliver = 2,
    /// A failure notice arrives.
    Notice = 3,
    /// A timer expires.
    Timer = 4,
}

/// A bucketed, deterministic event queue.
#[derive(Debug)]
pub struct EventQueue<E> {
    buckets: BTreeMap<(Time, EventClass), VecDeque<E>>,
    /// Emptied deques kept for reuse, so steady-state pushes do not allocate.
    spare: Vec<VecDeque<E>>,
    len: usize,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            buckets: BTreeMap::new(),
            spare: Vec::new(),
            len: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `at` in `class`.
    pub fn push(&mut self, at: Time, class: EventClass, event: E) {
        let spare = &mut self.spare;
        self.buckets
            .entry((at, class))
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .push_back(event);
        self.len += 1;
    }

    /// Removes the earliest event.
    pub fn pop(&mut self) -> Option<(Time, EventClass, E)> {
        let mut entry = self.buckets.first_entry()?;
        let (at, class) = *entry.key();
        let event = entry.get_mut().pop_front();
        if entry.get().is_empty() {
            let deque = entry.remove();
            // Keep a bounded number of spare deques: enough for the keys of a few rounds.
            if self.spare.len() < 64 {
                self.spare.push(deque);
            }
        }
        let event = event?;
        self.len -= 1;
        Some((at, class, event))
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Time> {
        self.buckets.keys().next().map(|(at, _)| *at)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_time_then_class_then_fifo() {
        let mut q = EventQueue::default();
        q.push(Time(5), EventClass::Timer, "t5-timer");
        q.push(Time(5), EventClass::Deliver, "t5-a");
        q.push(Time(1), EventClass::Deliver, "t1");
        q.push(Time(5), EventClass::Deliver, "t5-b");
        q.push(Time(5), EventClass::Fault, "t5-crash");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, _, e)| e)).collect();
        assert_eq!(order, ["t1", "t5-crash", "t5-a", "t5-b", "t5-timer"]);
        assert!(q.is_empty());
    }
}
