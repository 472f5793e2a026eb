//! The agreement progress thread: answers agreement requests while the application computes.
//!
//! ERA returns early (002): a rank leaves an agreement as soon as its decision is fixed, and a
//! peer whose parent died before passing the decision down then asks an elder for it. If that
//! elder is computing, outside every library call, the asker waits until the elder calls in
//! again. This thread serves the endpoint in the meantime.
//!
//! Such requests follow failures only, so the thread costs nothing in a failure-free job: it
//! sleeps until the control plane reports a failure. Then it serves whenever the application is
//! not inside a call (the endpoint's lock is free), with naps that grow from 100 µs to 5 ms while
//! nothing arrives, and goes back to sleep once nothing has arrived for [`SERVE_WINDOW`] after
//! the last notice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::exec::Endpoint;
use crate::transport::{Transport, Waker};

/// Shortest nap between passes while serving.
const MIN_NAP: Duration = Duration::from_micros(100);
/// Longest nap between passes while serving.
const MAX_NAP: Duration = Duration::from_millis(5);
/// How long the thread keeps serving after a failure notice or an arrival.
pub const SERVE_WINDOW: Duration = Duration::from_secs(2);

/// What the thread and its wakers share.
#[derive(Default)]
struct Signals {
    stop: AtomicBool,
    notice: AtomicBool,
}

/// The running thread; dropping it stops and joins the thread.
pub struct ProgressThread {
    signals: Arc<Signals>,
    handle: Option<JoinHandle<()>>,
}

impl ProgressThread {
    /// Starts serving `endpoint`; returns the thread and the waker the control plane calls on
    /// every notice.
    pub fn start<T>(endpoint: Arc<Mutex<Endpoint<T>>>) -> std::io::Result<(ProgressThread, Waker)>
    where
        T: Transport + Send + 'static,
    {
        let signals = Arc::new(Signals::default());
        let shared = Arc::clone(&signals);
        let handle = std::thread::Builder::new()
            .name("ftcoll-agree-progress".into())
            .spawn(move || serve(&endpoint, &shared))?;
        let thread = handle.thread().clone();
        let notify = Arc::clone(&signals);
        let waker = Waker::new(move || {
            notify.notice.store(true, Ordering::SeqCst);
            thread.unpark();
        });
        Ok((
            ProgressThread {
                signals,
                handle: Some(handle),
            },
            waker,
        ))
    }
}

impl Drop for ProgressThread {
    fn drop(&mut self) {
        self.signals.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

/// The thread's loop: asleep until a notice, then serving until [`SERVE_WINDOW`] passes quiet.
fn serve<T: Transport>(endpoint: &Mutex<Endpoint<T>>, signals: &Signals) {
    let mut serving_until: Option<Instant> = None;
    let mut nap = MIN_NAP;
    while !signals.stop.load(Ordering::SeqCst) {
        match serving_until {
            None => std::thread::park(),
            Some(_) => std::thread::park_timeout(nap),
        }
        if signals.stop.load(Ordering::SeqCst) {
            break;
        }
        let now = Instant::now();
        if signals.notice.swap(false, Ordering::SeqCst) {
            serving_until = Some(now + SERVE_WINDOW);
            nap = MIN_NAP;
        }
        let Some(until) = serving_until else {
            continue; // a spurious unpark
        };
        let served = match endpoint.try_lock() {
            Ok(mut endpoint) => endpoint.serve_between_operations(),
            // The application is inside a call and serves the endpoint itself.
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Poisoned(poisoned)) => {
                poisoned.into_inner().serve_between_operations()
            }
        };
        match served {
            Ok(true) => {
                serving_until = Some(now + SERVE_WINDOW);
                nap = MIN_NAP;
            }
            Ok(false) => nap = (nap * 2).min(MAX_NAP),
            Err(error) => {
                // The application's next call meets the same error and reports it.
                tracing::debug!(%error, "agreement progress thread stops");
                return;
            }
        }
        if now >= until {
            serving_until = None;
        }
    }
}
