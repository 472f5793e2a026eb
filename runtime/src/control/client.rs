//! The rank side of the control plane.
//!
//! One background thread per rank reads the launcher's messages (failure notices, resolved
//! addresses, shutdown) and sends heartbeats; the rank's main thread sends requests and reports.
//! When the launcher's connection closes the rank exits at once: a rank must not outlive its job.

use ftcoll_algos::fault::FaultSpec;
use std::io::{self, Read};
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::msg::{
    proof, ControlError, ControlMsg, FailureCause, OpReport, CONTROL_MAGIC, MAX_CONTROL_BYTES,
};
use super::telemetry::RankSample;
use crate::env::RankEnv;
use crate::transport::Waker;

/// Exit status of a rank whose launcher went away.
pub const EXIT_LAUNCHER_GONE: i32 = 70;
/// How long the handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on failure notices held for the rank (a job has at most `size` failures).
const MAX_PENDING_FAILURES: usize = 1 << 20;
/// Bound on injected faults waiting for the executor (a console sends a few per second).
const MAX_PENDING_INJECTIONS: usize = 256;
/// Timings per control message: 8 bytes each, well inside [`MAX_CONTROL_BYTES`].
const TIMINGS_PER_MESSAGE: usize = MAX_CONTROL_BYTES / 16;

#[derive(Debug, Default)]
struct State {
    failures: Vec<(u32, FailureCause)>,
    addresses: std::collections::BTreeMap<u32, String>,
    shutdown: bool,
    /// Fault specs the console injected, not yet applied.
    injected: Vec<FaultSpec>,
    /// The last operation the launcher allowed to start (console-paced jobs).
    go: Option<u64>,
    /// Every rank of the job registered or failed: operations may start.
    started: bool,
}

#[derive(Debug, Default)]
struct Shared {
    /// Set whenever `state` gains a failure or the shutdown flag, so the executor's hot loop
    /// checks one atomic instead of taking the lock.
    news: std::sync::atomic::AtomicBool,
    state: Mutex<State>,
    resolved: Condvar,
    /// Woken on every notice: the rank's transport, and its agreement progress thread.
    wakers: Mutex<Vec<Waker>>,
    /// Set by the control thread every telemetry period; the executor takes a sample.
    sample_due: std::sync::atomic::AtomicBool,
    /// The console watches this rank: samples carry the protocol's detail view.
    watched: std::sync::atomic::AtomicBool,
    /// Signalled when the launcher allows another operation, starts the job or stops it.
    go_changed: Condvar,
    /// A sample went out since the last heartbeat: it proves liveness as well, so the next
    /// heartbeat is skipped.
    sampled: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means the control thread panicked; the state is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits on `changed` until `ready` gives a value or `timeout` passes (`None`). Each pass
    /// waits until the deadline at most, so the deadline bounds the loop.
    fn wait_for<T>(
        &self,
        changed: &Condvar,
        timeout: Duration,
        mut ready: impl FnMut(&State) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        loop {
            if let Some(value) = ready(&state) {
                return Some(value);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            state = changed
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn wake(&self) {
        let wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        for waker in wakers.iter() {
            waker.wake();
        }
    }
}

/// A rank's connection to its launcher.
#[derive(Debug)]
pub struct ControlClient {
    /// The one writer of the connection, shared with the control thread's heartbeats: a
    /// message longer than a socket buffer goes out in several writes, and another thread's
    /// write through a second handle would land between them and corrupt the stream.
    writer: Arc<Mutex<TcpStream>>,
    telemetry: bool,
    shared: Arc<Shared>,
    _reader: JoinHandle<()>,
}

impl ControlClient {
    /// Connects, proves the job secret, registers `address`, and starts the control thread.
    pub fn connect(env: &RankEnv, address: &str) -> Result<ControlClient, ControlError> {
        let mut stream = TcpStream::connect(&env.control_addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        let nonce = match ControlMsg::read_from(&mut stream)? {
            ControlMsg::Challenge { nonce } => nonce,
            _ => return Err(ControlError::BadField("expected a challenge")),
        };
        ControlMsg::Hello {
            magic: CONTROL_MAGIC,
            rank: env.rank,
            pid: std::process::id(),
            proof: proof(&env.secret, &nonce, env.rank),
            address: address.to_string(),
        }
        .write_to(&mut stream)?;
        match ControlMsg::read_from(&mut stream)? {
            ControlMsg::Welcome => {}
            _ => return Err(ControlError::BadField("launcher refused this rank")),
        }
        let reader = stream.try_clone()?;
        let writer = Arc::new(Mutex::new(stream));
        let heartbeat_writer = Arc::clone(&writer);
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let periods = Periods {
            heartbeat: env.heartbeat,
            telemetry: env.telemetry,
        };
        reader.set_read_timeout(Some(periods.tick()))?;
        let reader = std::thread::Builder::new()
            .name("ftcoll-control".into())
            .stack_size(64 * 1024)
            .spawn(move || control_thread(reader, heartbeat_writer, periods, &thread_shared))?;
        Ok(ControlClient {
            writer,
            telemetry: periods.telemetry.is_some(),
            shared,
            _reader: reader,
        })
    }

    /// The control thread calls `waker` whenever a notice arrives (besides those added
    /// before; a rank has at most two).
    pub fn add_waker(&self, waker: Waker) {
        let mut wakers = self.shared.wakers.lock().unwrap_or_else(|p| p.into_inner());
        wakers.push(waker);
    }

    fn send(&self, msg: &ControlMsg) -> Result<(), ControlError> {
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        msg.write_to(&mut *writer)
    }

    /// Whether failure notices or a shutdown arrived that the rank has not looked at.
    pub fn has_news(&self) -> bool {
        self.shared.news.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Failure notices received since the last call.
    pub fn take_failures(&self) -> Vec<(u32, FailureCause)> {
        let mut state = self.shared.lock();
        if !state.shutdown {
            self.shared
                .news
                .store(false, std::sync::atomic::Ordering::Release);
        }
        std::mem::take(&mut state.failures)
    }

    /// True once the launcher asked the job to stop.
    pub fn shutdown_requested(&self) -> bool {
        self.has_news() && self.shared.lock().shutdown
    }

    /// The data-plane address of `peer` (blocks until the launcher answers or `timeout`).
    pub fn resolve(&self, peer: u32, timeout: Duration) -> Result<String, ControlError> {
        if let Some(address) = self.shared.lock().addresses.get(&peer) {
            return Ok(address.clone());
        }
        self.send(&ControlMsg::Resolve { peer })?;
        let shared = &self.shared;
        shared
            .wait_for(&shared.resolved, timeout, |state| {
                state.addresses.get(&peer).cloned()
            })
            .ok_or_else(|| {
                ControlError::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no address for rank {peer}"),
                ))
            })
    }

    /// Reports the outcome of one operation.
    pub fn report(&self, report: OpReport) -> Result<(), ControlError> {
        self.send(&ControlMsg::Report(report))
    }

    /// Tells the launcher this rank's transport found `peer` unreachable.
    pub fn unreachable(&self, peer: u32) -> Result<(), ControlError> {
        self.send(&ControlMsg::Unreachable { peer })
    }

    /// Tells the launcher this rank's protocol took `peer` for dead by a timeout: the
    /// launcher fences it (kills it if it still runs) and then tells every rank.
    pub fn suspect(&self, peer: u32) -> Result<(), ControlError> {
        self.send(&ControlMsg::Suspect { peer })
    }

    /// Sends the per-operation times of a benchmark loop, in messages that fit the control
    /// plane's frame limit; the launcher appends them in order.
    pub fn timings(&self, nanos: Vec<u64>) -> Result<(), ControlError> {
        for chunk in nanos.chunks(TIMINGS_PER_MESSAGE) {
            self.send(&ControlMsg::Timings {
                nanos: chunk.to_vec(),
            })?;
        }
        Ok(())
    }

    /// Whether the launcher asked for status samples (`FTCOLL_TELEMETRY_MS`).
    pub fn telemetry_enabled(&self) -> bool {
        self.telemetry
    }

    /// True once per telemetry period: the caller should send a sample.
    pub fn sample_due(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.shared.sample_due.load(Ordering::Relaxed)
            && self.shared.sample_due.swap(false, Ordering::AcqRel)
    }

    /// Whether the console watches this rank (samples should carry the detail view).
    pub fn watched(&self) -> bool {
        self.shared
            .watched
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sends a status sample for the console.
    pub fn telemetry(&self, sample: RankSample) -> Result<(), ControlError> {
        self.send(&ControlMsg::Telemetry(sample))?;
        self.shared
            .sampled
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Fault specs injected since the last call. Call it after [`ControlClient::take_failures`]
    /// whenever there is news: that call clears the news flag.
    pub fn take_injected(&self) -> Vec<FaultSpec> {
        std::mem::take(&mut self.shared.lock().injected)
    }

    /// Waits until the launcher allows operation `op` to start, a shutdown, or `timeout`;
    /// true if allowed.
    pub fn wait_go(&self, op: u64, timeout: Duration) -> bool {
        let shared = &self.shared;
        let allowed = |state: &State| {
            let go = state.go.is_some_and(|g| g >= op);
            (go || state.shutdown).then_some(go)
        };
        shared
            .wait_for(&shared.go_changed, timeout, allowed)
            .unwrap_or(false)
    }

    /// Waits until every rank of the job has registered or failed (the launcher's start
    /// fence), or the job stops; an error after `timeout`.
    pub fn wait_started(&self, timeout: Duration) -> Result<(), ControlError> {
        let shared = &self.shared;
        shared
            .wait_for(&shared.go_changed, timeout, |state| {
                (state.started || state.shutdown).then_some(())
            })
            .ok_or_else(|| {
                ControlError::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the job did not start within {} s: some rank neither registered \
                         with the launcher nor failed",
                        timeout.as_secs()
                    ),
                ))
            })
    }

    /// Says this rank is done, with its memory footprint.
    pub fn finished(&self, pss_kb: u64) -> Result<(), ControlError> {
        self.send(&ControlMsg::Finished { pss_kb })
    }
}

/// The control thread's clocks.
#[derive(Clone, Copy, Debug)]
struct Periods {
    heartbeat: Duration,
    /// `None`: no console, no samples.
    telemetry: Option<Duration>,
}

impl Periods {
    /// How long one read may block: the shorter period.
    fn tick(self) -> Duration {
        self.telemetry
            .map_or(self.heartbeat, |t| t.min(self.heartbeat))
            .max(Duration::from_millis(1))
    }
}

/// Reads framed messages with a timeout so heartbeats (and telemetry ticks) go out between them.
fn control_thread(
    mut reader: TcpStream,
    writer: Arc<Mutex<TcpStream>>,
    periods: Periods,
    shared: &Shared,
) {
    let mut buffer: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let mut last_beat = Instant::now();
    let mut last_sample = Instant::now();
    loop {
        if last_beat.elapsed() >= periods.heartbeat {
            // A message being written proves this rank alive by itself: the heartbeat waits
            // for the next tick rather than for the writer, so this thread keeps reading (a
            // launcher blocked writing to us is drained) and never cuts into the message.
            let sampled = shared
                .sampled
                .swap(false, std::sync::atomic::Ordering::Relaxed);
            let sent = match writer.try_lock() {
                _ if sampled => Some(Ok(())),
                Ok(mut stream) => Some(ControlMsg::Heartbeat.write_to(&mut *stream)),
                Err(TryLockError::Poisoned(poisoned)) => {
                    Some(ControlMsg::Heartbeat.write_to(&mut *poisoned.into_inner()))
                }
                Err(TryLockError::WouldBlock) => None,
            };
            match sent {
                Some(Ok(())) => last_beat = Instant::now(),
                Some(Err(_)) => launcher_gone("heartbeat could not be sent"),
                None => {}
            }
        }
        if periods
            .telemetry
            .is_some_and(|t| last_sample.elapsed() >= t)
        {
            // The executor sends the sample: only it sees the protocol.
            shared
                .sample_due
                .store(true, std::sync::atomic::Ordering::Release);
            last_sample = Instant::now();
        }
        match reader.read(&mut chunk) {
            Ok(0) => launcher_gone("control connection closed"),
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) => launcher_gone("control connection failed"),
        }
        // Every complete message in the buffer; each pass removes one, so this ends.
        while buffer.len() >= 4 {
            let len = u32::from_le_bytes([buffer[0], buffer[1], buffer[2], buffer[3]]) as usize;
            if len == 0 || len > MAX_CONTROL_BYTES {
                launcher_gone("malformed control message from the launcher");
            }
            if buffer.len() < 4 + len {
                break;
            }
            let msg = ControlMsg::decode(&buffer[4..4 + len]);
            buffer.drain(..4 + len);
            match msg {
                Ok(ControlMsg::Failed { rank, cause }) => {
                    let mut state = shared.lock();
                    if state.failures.len() < MAX_PENDING_FAILURES {
                        state.failures.push((rank, cause));
                    }
                    shared
                        .news
                        .store(true, std::sync::atomic::Ordering::Release);
                    drop(state);
                    shared.wake();
                }
                Ok(ControlMsg::Address { peer, address }) => {
                    shared.lock().addresses.insert(peer, address);
                    shared.resolved.notify_all();
                }
                Ok(ControlMsg::Shutdown) => {
                    shared.lock().shutdown = true;
                    shared
                        .news
                        .store(true, std::sync::atomic::Ordering::Release);
                    shared.go_changed.notify_all();
                    shared.wake();
                }
                Ok(ControlMsg::Watch { detail }) => {
                    shared
                        .watched
                        .store(detail, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(ControlMsg::Inject { spec }) => {
                    let mut state = shared.lock();
                    if state.injected.len() < MAX_PENDING_INJECTIONS {
                        state.injected.push(spec);
                    } else {
                        tracing::warn!("too many injected faults pending; dropped one");
                    }
                    shared
                        .news
                        .store(true, std::sync::atomic::Ordering::Release);
                    drop(state);
                    shared.wake();
                }
                Ok(ControlMsg::Started) => {
                    shared.lock().started = true;
                    shared.go_changed.notify_all();
                }
                Ok(ControlMsg::Go { op }) => {
                    let mut state = shared.lock();
                    state.go = Some(state.go.map_or(op, |g| g.max(op)));
                    drop(state);
                    shared.go_changed.notify_all();
                }
                Ok(other) => tracing::warn!(?other, "unexpected control message from the launcher"),
                Err(error) => tracing::warn!(%error, "malformed control message from the launcher"),
            }
        }
    }
}

fn launcher_gone(why: &str) -> ! {
    tracing::error!("launcher gone ({why}); exiting");
    std::process::exit(EXIT_LAUNCHER_GONE)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::TcpListener;

    use super::*;
    use crate::env::RankEnv;

    /// Long messages and the control thread's heartbeats share one connection: a launcher that
    /// reads late, so that each long message goes out in several writes, still reads every
    /// message whole. Through a second handle, heartbeats landed inside them and the launcher
    /// read a length of 0 (`bench allreduce` under `perf`, one job in two).
    #[test]
    fn heartbeats_never_cut_into_a_long_message() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let vars = BTreeMap::from([
            ("FTCOLL_RANK", "0".to_string()),
            ("FTCOLL_SIZE", "1".to_string()),
            ("FTCOLL_JOB_ID", "00000000deadbeef".to_string()),
            (
                "FTCOLL_CONTROL_ADDR",
                listener.local_addr().unwrap().to_string(),
            ),
            (
                "FTCOLL_SECRET",
                "00112233445566778899aabbccddeeff".to_string(),
            ),
            ("FTCOLL_HEARTBEAT_MS", "1".to_string()),
        ]);
        let env = RankEnv::from_lookup(|k| vars.get(k).cloned()).unwrap();
        const MESSAGES: u64 = 48;
        const WORDS: u64 = 120_000;
        let launcher = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            ControlMsg::Challenge { nonce: [7; 16] }
                .write_to(&mut conn)
                .unwrap();
            assert!(matches!(
                ControlMsg::read_from(&mut conn).unwrap(),
                ControlMsg::Hello { .. }
            ));
            ControlMsg::Welcome.write_to(&mut conn).unwrap();
            // Late: the rank's writes fill the socket's buffers and block part-way.
            std::thread::sleep(Duration::from_millis(300));
            let mut got = Vec::new();
            while (got.len() as u64) < MESSAGES {
                match ControlMsg::read_from(&mut conn) {
                    Ok(ControlMsg::Timings { nanos }) => got.push(nanos),
                    Ok(ControlMsg::Heartbeat) => {}
                    other => panic!("the stream broke: {other:?}"),
                }
            }
            // The control thread exits the process when its connection closes: keep it open.
            std::mem::forget(conn);
            got
        });
        let client = ControlClient::connect(&env, "127.0.0.1:1").unwrap();
        for m in 0..MESSAGES {
            let nanos = (0..WORDS).map(|w| m * WORDS + w).collect();
            client.send(&ControlMsg::Timings { nanos }).unwrap();
        }
        let got = launcher.join().unwrap();
        for (m, nanos) in got.iter().enumerate() {
            let m = m as u64;
            assert!(nanos.iter().copied().eq((0..WORDS).map(|w| m * WORDS + w)));
        }
    }
}
