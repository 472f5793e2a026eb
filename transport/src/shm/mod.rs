//! The shared-memory transport: the default on one machine, needing no system library.
//!
//! Every rank owns an inbox in one shared segment ([`segment`]). An inbox has a few *lanes*,
//! each a single-producer ring ([`ring`]); a sender leases a free lane with one CAS, appends its
//! frames, publishes them with one release store, returns the lease and rings the receiver's
//! doorbell. The receiver reads frames in place and hands them to the protocol without copying.
//!
//! Why lanes rather than one multi-producer ring: a sender killed by SIGKILL in the middle of a
//! write must not wedge the receiver. In a lane the half-written record lies beyond the published
//! tail and is never read; the dead sender's lease is released when the failure notice arrives
//! ([`ShmTransport::peer_failed`]).
//!
//! Waiting: a rank with nothing to do spins for a short budget (only when the node has no more
//! ranks than cores: spinning against a descheduled peer only burns its core), then yields its
//! core for a short budget (so a descheduled peer runs at once), then sleeps on its doorbell with
//! a futex; senders wake it only when it has said it sleeps. An idle rank thus costs nothing
//! after about 100 µs.

pub mod cross_memory;
pub mod peer_map;
pub mod ring;
pub mod segment;
pub mod shared_heap;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ftcoll_algos::Rank;
use rustix::thread::futex;

use self::segment::Segment;
use super::{Transport, TransportError, TransportKind, Waker};

pub use self::segment::Geometry;

/// Default lanes per inbox.
pub const DEFAULT_LANES: u32 = 8;
/// Default ring bytes per lane.
pub const DEFAULT_LANE_BYTES: u32 = 64 * 1024;
/// Bytes of lane rings a job's segment holds at most by default (see [`default_lane_bytes`]).
const LANE_BUDGET_BYTES: u64 = 128 << 20;

/// The ring bytes per lane for a job of `ranks`: as large as a budget of 128 MiB of lanes
/// allows, up to 2 MiB (a frame is up to half a lane, and large frames move large vectors at
/// memory speed), never below 64 KiB up to 512 ranks, and 16 KiB beyond (4096 ranks' inboxes
/// then take 512 MiB of address space, touched only where lanes are used).
pub fn default_lane_bytes(ranks: u32) -> u32 {
    if ranks > 512 {
        return DEFAULT_LANE_BYTES / 4;
    }
    let per_lane = LANE_BUDGET_BYTES / (u64::from(ranks.max(1)) * u64::from(DEFAULT_LANES));
    let pow2 = 1u64 << (63 - per_lane.max(1).leading_zeros());
    pow2.clamp(u64::from(DEFAULT_LANE_BYTES), 2 << 20) as u32
}

/// Bound on bytes queued for receivers without room.
const MAX_QUEUED_BYTES: usize = 256 << 20;
/// How long a waiting rank yields its core before it sleeps on the futex.
const YIELD_BUDGET: Duration = Duration::from_micros(100);
/// Longest sleep when the sleep barrier is unavailable.
const UNBARRIERED_SLEEP: Duration = Duration::from_millis(1);
/// Arrival checks between two clock reads while spinning.
const SPIN_CHECKS_PER_CLOCK_READ: u32 = 64;
/// Yields between two clock reads while waiting.
const YIELDS_PER_CLOCK_READ: u32 = 8;
/// Longest sleep while sends are queued: receivers free room without ringing senders.
const QUEUED_SEND_RETRY: Duration = Duration::from_micros(200);

/// One rank's endpoint on a shared segment.
pub struct ShmTransport {
    segment: Arc<Segment>,
    me: u32,
    /// Frames waiting for room, per destination, in send order.
    queued: BTreeMap<u32, VecDeque<Vec<u8>>>,
    queued_bytes: usize,
    /// Lane to scan first on the next receive, for fairness between lanes.
    next_lane: u32,
    spin: Duration,
    /// Set by the [`Waker`] (another thread of this rank); checked by every phase of `wait`.
    woken: Arc<std::sync::atomic::AtomicBool>,
    /// Records skipped as corrupt.
    corrupt_lanes: u64,
    /// How this rank publishes records (see [`ring::Publish`]).
    publish: ring::Publish,
    /// Whether senders of this job may publish with plain stores, so that this rank must force
    /// a barrier on them (`membarrier`) before it sleeps; if that fails, its sleeps are capped
    /// and a missed wake-up costs at most [`UNBARRIERED_SLEEP`].
    sleep_barrier: bool,
}

impl ShmTransport {
    /// The endpoint of rank `me`; `spin` is the busy-wait budget before sleeping.
    pub fn new(
        segment: Arc<Segment>,
        me: Rank,
        spin: Duration,
    ) -> Result<ShmTransport, TransportError> {
        let ranks = segment.geometry().ranks;
        if me.0 >= ranks {
            return Err(TransportError::NoSuchRank {
                rank: me.0,
                size: ranks,
            });
        }
        let plain = segment.plain_publish();
        Ok(ShmTransport {
            segment,
            me: me.0,
            queued: BTreeMap::new(),
            queued_bytes: 0,
            next_lane: 0,
            spin,
            woken: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            corrupt_lanes: 0,
            // With plain publishes (the creator's choice for ranks that poll) a sender that
            // the kernel registered for membarrier leaves the ordering to sleeping receivers;
            // one it refused keeps the locked publish, which needs no one's help.
            publish: if plain && register_for_sleep_barriers() {
                ring::Publish::Plain
            } else {
                ring::Publish::Fenced
            },
            sleep_barrier: plain,
        })
    }

    /// Records skipped because shared memory held an impossible length.
    pub fn corrupt_lanes(&self) -> u64 {
        self.corrupt_lanes
    }

    fn lanes(&self) -> u32 {
        self.segment.geometry().lanes
    }

    /// Whether every rank has a lane of its own in every inbox (no more ranks than lanes): a
    /// sender then writes its lane without a lease, saving a locked instruction per send.
    fn dedicated_lanes(&self) -> bool {
        self.segment.geometry().ranks <= self.lanes()
    }

    /// Leases a lane of `to`'s inbox, starting at a lane that depends on the sender so that
    /// senders spread over lanes without contending. With dedicated lanes, the sender's own.
    fn lease(&self, to: u32) -> Option<u32> {
        let lanes = self.lanes();
        let start = self.me % lanes;
        if self.dedicated_lanes() {
            self.mark_active(to, start);
            return Some(start);
        }
        let lane = (0..lanes).map(|i| (start + i) % lanes).find(|&lane| {
            self.segment
                .lane(to, lane)
                .owner
                .compare_exchange(0, self.me + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })?;
        self.mark_active(to, lane);
        Some(lane)
    }

    /// Marks the lane active once; the check keeps the steady state free of writes to the
    /// receiver's header line.
    fn mark_active(&self, to: u32, lane: u32) {
        let active = self.segment.active_lanes(to);
        let bit = 1u64 << lane;
        if active.load(Ordering::Relaxed) & bit == 0 {
            active.fetch_or(bit, Ordering::SeqCst);
        }
    }

    fn release(&self, to: u32, lane: u32) {
        if self.dedicated_lanes() {
            return;
        }
        self.segment
            .lane(to, lane)
            .owner
            .store(0, Ordering::Release);
    }

    /// Tells `to` that it has mail, waking it if it sleeps.
    ///
    /// The doorbell is touched only when the receiver says it sleeps, so a polling receiver's
    /// doorbell line never crosses cores. No wake-up is lost: every publish is ordered before
    /// our read of `sleeping`, by its own SeqCst swap or by the barrier the receiver forces on
    /// every registered sender before it sleeps (see `ring::Publish`), and the receiver sets
    /// `sleeping` (SeqCst) before it checks for arrivals (SeqCst loads) and reads the doorbell
    /// value it waits on; either it sees our records, or we see it sleeping and bump the value
    /// it waits on.
    fn ring_doorbell(&self, to: u32) {
        if self.segment.sleeping(to).load(Ordering::SeqCst) != 0 {
            self.segment.doorbell(to).fetch_add(1, Ordering::SeqCst);
            let _ = futex::wake(self.segment.doorbell(to), futex::Flags::empty(), 1);
        }
    }

    /// Writes queued frames for `to`, then `extra`; returns whether `extra` went out.
    fn flush_to(&mut self, to: u32, extra: Option<&[u8]>) -> bool {
        let Some(lane_index) = self.lease(to) else {
            return false;
        };
        let lane = self.segment.lane(to, lane_index);
        let mut wrote = false;
        if let Some(queue) = self.queued.get_mut(&to) {
            while let Some(frame) = queue.front() {
                if !ring::push(&lane, self.me, frame, self.publish) {
                    break;
                }
                self.queued_bytes -= frame.len();
                queue.pop_front();
                wrote = true;
            }
            if queue.is_empty() {
                self.queued.remove(&to);
            }
        }
        let extra_sent = match extra {
            Some(frame) if !self.queued.contains_key(&to) => {
                ring::push(&lane, self.me, frame, self.publish)
            }
            _ => false,
        };
        self.release(to, lane_index);
        if wrote || extra_sent {
            self.ring_doorbell(to);
        }
        extra_sent
    }

    /// Whether the waker rang since the last wait (clearing it).
    fn take_woken(&self) -> bool {
        self.woken.load(Ordering::SeqCst) && self.woken.swap(false, Ordering::SeqCst)
    }

    fn has_arrivals(&self) -> bool {
        let mut active = self.segment.active_lanes(self.me).load(Ordering::Acquire);
        // One pass over the set bits: at most `lanes` iterations.
        while active != 0 {
            let lane = active.trailing_zeros();
            if ring::has_records(&self.segment.lane(self.me, lane)) {
                return true;
            }
            active &= active - 1;
        }
        false
    }

    /// Looks for arrivals without reading the clock: once, then (when this rank may spin) a few
    /// dozen times, which is how long an answer takes with a core per rank.
    fn quick_look(&self) -> bool {
        if self.has_arrivals() || self.take_woken() {
            return true;
        }
        if !self.spin.is_zero() {
            for _ in 0..SPIN_CHECKS_PER_CLOCK_READ {
                if self.has_arrivals() || self.take_woken() {
                    return true;
                }
                std::hint::spin_loop();
            }
        }
        false
    }

    /// Spins, yields, then sleeps on the doorbell, for at most `timeout` from now.
    fn wait_after_look(&mut self, timeout: Option<Duration>) -> Result<(), TransportError> {
        if timeout == Some(Duration::ZERO) {
            return Ok(());
        }
        let start = Instant::now();
        let timeout = match (timeout, self.queued.is_empty()) {
            (Some(t), false) => Some(t.min(QUEUED_SEND_RETRY)),
            (None, false) => Some(QUEUED_SEND_RETRY),
            (t, true) => t,
        };
        let budget = |phase: Duration| start + phase.min(timeout.unwrap_or(phase));
        // Spin briefly: with a core per rank this keeps latency that of polling. The clock is
        // read every few dozen checks; arrivals are checked every time.
        if !self.spin.is_zero() {
            let spin_until = budget(self.spin);
            let mut checks = 0u32;
            while !checks.is_multiple_of(SPIN_CHECKS_PER_CLOCK_READ) || Instant::now() < spin_until
            {
                if self.has_arrivals() || self.take_woken() {
                    return Ok(());
                }
                std::hint::spin_loop();
                checks = checks.wrapping_add(1);
            }
        }
        // Then yield for a while: with more ranks than cores the peer we wait for is likely
        // runnable but descheduled, and yielding hands it our core without the cost of a futex
        // sleep and wake-up (a wake-up across cores costs this machine ten times a yield). A
        // rank that stays idle past this budget sleeps. Most waits end within a few yields, so
        // the clock is read only every few.
        let yield_until = budget(self.spin + YIELD_BUDGET);
        let mut yields = 0u32;
        loop {
            if yields.is_multiple_of(YIELDS_PER_CLOCK_READ)
                && yields > 0
                && Instant::now() >= yield_until
            {
                break;
            }
            std::thread::yield_now();
            yields = yields.wrapping_add(1);
            if self.has_arrivals() || self.take_woken() {
                return Ok(());
            }
        }
        let doorbell = self.segment.doorbell(self.me);
        let sleeping = self.segment.sleeping(self.me);
        // The order matters: announce the sleep, read the value to sleep on, then look once
        // more. A sender that published before our look is seen by it; one after sees
        // `sleeping` and bumps the doorbell past `seen`. The waker sets `woken` before it bumps,
        // so a wake-up before `seen` was read is seen by the look, one after ends the sleep.
        sleeping.store(1, Ordering::SeqCst);
        // Senders that publish with plain stores rely on this barrier: after it, every publish
        // that their read of `sleeping` could have missed is visible to the look below.
        let unordered = self.sleep_barrier
            && rustix::thread::membarrier(rustix::thread::MembarrierCommand::GlobalExpedited)
                .is_err();
        let timeout = if unordered {
            Some(timeout.map_or(UNBARRIERED_SLEEP, |t| t.min(UNBARRIERED_SLEEP)))
        } else {
            timeout
        };
        let seen = doorbell.load(Ordering::SeqCst);
        if self.has_arrivals() || self.take_woken() {
            sleeping.store(0, Ordering::SeqCst);
            return Ok(());
        }
        let remaining = timeout.map(|t| t.saturating_sub(start.elapsed()));
        let timespec = remaining.map(|d| rustix::time::Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        if remaining != Some(Duration::ZERO) {
            // Returns at once if a sender rang after `seen` was read: no lost wake-up.
            match futex::wait(doorbell, futex::Flags::empty(), seen, timespec.as_ref()) {
                Ok(()) => {}
                Err(e)
                    if e == rustix::io::Errno::AGAIN
                        || e == rustix::io::Errno::TIMEDOUT
                        || e == rustix::io::Errno::INTR => {}
                Err(e) => {
                    sleeping.store(0, Ordering::SeqCst);
                    return Err(TransportError::io(
                        "waiting on the inbox doorbell",
                        e.into(),
                    ));
                }
            }
        }
        sleeping.store(0, Ordering::SeqCst);
        Ok(())
    }
}

/// Registers this process for global expedited memory barriers (once; later calls return the
/// first answer). True when the kernel took it.
fn register_for_sleep_barriers() -> bool {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *REGISTERED.get_or_init(|| {
        rustix::thread::membarrier(rustix::thread::MembarrierCommand::RegisterGlobalExpedited)
            .is_ok()
    })
}

impl Transport for ShmTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Shm
    }

    fn local_address(&self) -> String {
        format!("shm:{}", self.me)
    }

    fn max_frame_bytes(&self) -> usize {
        ring::max_frame_bytes(self.segment.geometry().lane_bytes as usize)
    }

    fn send(&mut self, to: Rank, frame: &[u8]) -> Result<(), TransportError> {
        let ranks = self.segment.geometry().ranks;
        if to.0 >= ranks {
            return Err(TransportError::NoSuchRank {
                rank: to.0,
                size: ranks,
            });
        }
        if frame.len() > self.max_frame_bytes() {
            return Err(TransportError::FrameTooLarge {
                len: frame.len(),
                limit: self.max_frame_bytes(),
            });
        }
        if self.flush_to(to.0, Some(frame)) {
            return Ok(());
        }
        if self.queued_bytes + frame.len() > MAX_QUEUED_BYTES {
            return Err(TransportError::Backpressure {
                queued_bytes: self.queued_bytes,
            });
        }
        self.queued_bytes += frame.len();
        self.queued
            .entry(to.0)
            .or_default()
            .push_back(frame.to_vec());
        Ok(())
    }

    fn progress(&mut self) -> Result<usize, TransportError> {
        if self.queued.is_empty() {
            return Ok(0);
        }
        let destinations: Vec<u32> = self.queued.keys().copied().collect();
        for to in destinations {
            self.flush_to(to, None);
        }
        Ok(self.queued.values().map(VecDeque::len).sum())
    }

    fn poll_recv(
        &mut self,
        max_frames: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> Result<usize, TransportError> {
        let lanes = self.lanes();
        let ranks = self.segment.geometry().ranks;
        let active = self.segment.active_lanes(self.me).load(Ordering::Acquire);
        let mut handled = 0;
        // The active lanes from `next_lane` up, then those below it: a bit scan, so a poll
        // costs nothing per idle lane.
        let from_next = !0u64 << self.next_lane;
        for mut pending in [active & from_next, active & !from_next] {
            while pending != 0 && handled < max_frames {
                let lane_index = pending.trailing_zeros();
                pending &= pending - 1;
                let lane = self.segment.lane(self.me, lane_index);
                let drained = ring::drain(&lane, max_frames - handled, &mut |from, bytes| {
                    // A sender id outside the job can only come from corrupted memory; the
                    // frame is still delivered as coming from "nobody" would be wrong, so drop
                    // it.
                    if from < ranks {
                        handler(Rank(from), bytes);
                    }
                });
                if drained.corrupt {
                    self.corrupt_lanes += 1;
                    tracing::warn!(
                        lane = lane_index,
                        "skipped a corrupt record in the shared-memory inbox"
                    );
                }
                handled += drained.frames;
            }
        }
        self.next_lane = if self.next_lane + 1 == lanes {
            0
        } else {
            self.next_lane + 1
        };
        Ok(handled)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> Result<(), TransportError> {
        if timeout == Some(Duration::ZERO) || self.quick_look() {
            return Ok(());
        }
        self.wait_after_look(timeout)
    }

    fn wait_until(&mut self, deadline: Instant) -> Result<(), TransportError> {
        if self.quick_look() {
            return Ok(());
        }
        self.wait_after_look(Some(deadline.saturating_duration_since(Instant::now())))
    }

    fn wait_within(
        &mut self,
        limit: Duration,
        deadline: &mut Option<Instant>,
    ) -> Result<(), TransportError> {
        if self.quick_look() {
            return Ok(());
        }
        let at = *deadline.get_or_insert_with(|| Instant::now() + limit);
        self.wait_after_look(Some(at.saturating_duration_since(Instant::now())))
    }

    fn waker(&self) -> Waker {
        let segment = Arc::clone(&self.segment);
        let woken = Arc::clone(&self.woken);
        let me = self.me;
        Waker::new(move || {
            woken.store(true, Ordering::SeqCst);
            segment.doorbell(me).fetch_add(1, Ordering::SeqCst);
            let _ = futex::wake(segment.doorbell(me), futex::Flags::empty(), 1);
        })
    }

    fn peer_failed(&mut self, peer: Rank) {
        if let Some(queue) = self.queued.remove(&peer.0) {
            self.queued_bytes -= queue.iter().map(Vec::len).sum::<usize>();
        }
        // A lease the dead rank held (it died writing) would block that lane forever. The rank
        // is dead (fail-stop by construction), so nobody writes the lane while it is repaired.
        // A dedicated lane needs no repair: nobody else writes it, and what the rank left
        // unpublished is never read.
        if self.dedicated_lanes() {
            return;
        }
        for lane_index in 0..self.lanes() {
            let lane = self.segment.lane(self.me, lane_index);
            if lane.owner.load(Ordering::Acquire) == peer.0 + 1 {
                // What it published before dying is still delivered, by the next poll; reclaim
                // leaves those records in place.
                ring::reclaim_after_published(&lane);
            }
        }
    }
}

#[cfg(test)]
mod tests;
