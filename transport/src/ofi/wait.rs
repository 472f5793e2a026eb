//! Blocking until there may be work: the completion queue's wait descriptor when the provider
//! has one, short sleeps when it has not, and an eventfd for the [`Waker`].
//!
//! [`Waker`]: crate::Waker

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};

use super::cq::CompletionQueue;
use super::OfiTransport;
use crate::TransportError;

/// First sleep of an idle rank whose provider has no wait descriptor.
pub(super) const MIN_IDLE_STEP: Duration = Duration::from_micros(50);
/// Longest such sleep: the latency an idle rank adds when a frame arrives.
const MAX_IDLE_STEP: Duration = Duration::from_millis(1);
/// Longest block while frames wait for the provider: it may free resources without signalling.
const BACKLOG_RETRY: Duration = Duration::from_millis(1);

/// The eventfd the [`Waker`](crate::Waker) rings, with a flag the spin phase reads
/// without a system call.
pub(super) struct Doorbell {
    fd: OwnedFd,
    rung: AtomicBool,
}

impl Doorbell {
    pub(super) fn new() -> Result<std::sync::Arc<Doorbell>, TransportError> {
        let fd = rustix::event::eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)
            .map_err(|e| TransportError::io("creating the libfabric waker's eventfd", e.into()))?;
        Ok(std::sync::Arc::new(Doorbell {
            fd,
            rung: AtomicBool::new(false),
        }))
    }

    /// Wakes the waiting rank (harmless if it is not waiting).
    pub(super) fn ring(&self) {
        self.rung.store(true, Ordering::Release);
        // A full counter (never, at 2^64 - 2) or a closed descriptor only delays the waiter.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// Whether it was rung since the last call; resets it.
    fn take(&self) -> bool {
        if !self.rung.swap(false, Ordering::AcqRel) {
            return false;
        }
        let mut counter = [0u8; 8];
        // Empty (EAGAIN) is fine: the flag already told.
        let _ = rustix::io::read(&self.fd, &mut counter);
        true
    }
}

fn poll(fds: &mut [PollFd<'_>], timeout: Option<Duration>) -> Result<(), TransportError> {
    let timeout = timeout.map(|t| {
        Timespec::try_from(t).unwrap_or(Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 0,
        })
    });
    match rustix::event::poll(fds, timeout.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(TransportError::io(
            "waiting for libfabric completions",
            e.into(),
        )),
    }
}

impl OfiTransport {
    /// Whether frames are ready for `poll_recv` without reading the queue.
    pub(super) fn has_work(&self) -> bool {
        !self.loopback.is_empty() || self.rx.has_ready()
    }

    /// [`Transport::wait`](crate::Transport::wait).
    pub(super) fn wait_for_work(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<(), TransportError> {
        let start = Instant::now();
        if self.pump()? > 0 || self.has_work() || self.doorbell.take() {
            return Ok(());
        }
        let spin = timeout.map_or(self.spin, |t| t.min(self.spin));
        while start.elapsed() < spin {
            if self.pump()? > 0 || self.has_work() || self.doorbell.take() {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        let mut block = timeout.map(|t| t.saturating_sub(start.elapsed()));
        if self.tx.has_backlog() {
            block = Some(block.map_or(BACKLOG_RETRY, |b| b.min(BACKLOG_RETRY)));
        }
        // The read side's queue too: a peer's read of this rank is served when it signals.
        let reads = self.reads.as_ref().map(super::rma::lock);
        let cq = self.ops.endpoint().cq();
        let read_cq = reads.as_ref().map(|side| side.cq());
        let queues: Vec<&CompletionQueue> = std::iter::once(cq).chain(read_cq).collect();
        let fds: Option<Vec<_>> = queues.iter().map(|q| q.wait_fd()).collect();
        match fds {
            Some(queue_fds) => {
                // fi_trywait refuses when completions are ready without the descriptors
                // signalling; the pump below then finds them.
                if CompletionQueue::try_wait_all(&queues) {
                    let mut fds: Vec<PollFd<'_>> = queue_fds
                        .into_iter()
                        .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
                        .collect();
                    fds.push(PollFd::new(&self.doorbell.fd, PollFlags::IN));
                    poll(&mut fds, block)?;
                }
            }
            None => {
                // No wait object (e.g. shm): sleep on the doorbell alone in steps that grow
                // while nothing arrives, so an idle rank costs ~1000 cheap wakeups a second
                // rather than a core, and a busy one reacts within the step.
                let step = block.map_or(self.idle_step, |b| b.min(self.idle_step));
                let mut fds = [PollFd::new(&self.doorbell.fd, PollFlags::IN)];
                poll(&mut fds, Some(step))?;
                self.idle_step = (self.idle_step * 2).min(MAX_IDLE_STEP);
            }
        }
        drop(reads);
        self.doorbell.take();
        self.pump()?;
        Ok(())
    }
}
