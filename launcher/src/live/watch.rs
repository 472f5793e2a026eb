//! What watches a running job from inside the launcher's loop (the console, or a benchmark's
//! headless stand-in), and what it may do to the job.
//!
//! The loop owns the job; each turn it hands the watcher what happened and calls
//! [`Watcher::tick`]. The watcher acts on the job only through [`JobHandle`].

use ftcoll_runtime::control::{ControlMsg, RankSample};

/// What the console needs of the launcher's job loop.
pub trait JobHandle {
    /// SIGKILLs `rank` (it is reported once reaped, like any death).
    fn kill(&mut self, rank: u32);
    /// SIGSTOPs `rank`: it hangs until the heartbeat detector fences it.
    fn stop(&mut self, rank: u32);
    /// Stops or continues every live rank (pause), suspending failure suspicion meanwhile.
    fn pause(&mut self, paused: bool);
    /// Queues a control message for `rank`.
    fn send(&mut self, rank: u32, msg: &ControlMsg);
    /// Whether `rank` has been reaped.
    fn exited(&self, rank: u32) -> bool;
    /// Whether `rank` is being killed on suspicion.
    fn suspected(&self, rank: u32) -> bool;
}

/// What the job loop should do after a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep going.
    Continue,
    /// The user quit: stop the job.
    Quit,
}

/// What the launcher's job loop tells a watcher, once per turn for what happened since the
/// last, then [`Watcher::tick`].
pub trait Watcher {
    /// Whether ranks should send status samples.
    fn telemetry(&self) -> bool;
    /// Whether the launcher keeps every operation's reports for the job's verdict (the
    /// console runs a job until quit and keeps no per-operation history).
    fn keeps_reports(&self) -> bool {
        false
    }
    /// `rank` registered with the launcher.
    fn registered(&mut self, rank: u32, job: &mut dyn JobHandle);
    /// A status sample of `rank` arrived.
    fn sample(&mut self, rank: u32, sample: RankSample);
    /// `rank` reported the outcome of operation `op`.
    fn reported(&mut self, rank: u32, op: u64);
    /// The launcher found `rank` dead (`how`: its exit, or why it was killed).
    fn failed(&mut self, rank: u32, how: &str);
    /// The launcher suspects `rank` and is killing it.
    fn suspected(&mut self, rank: u32, why: &str);
    /// One turn of the loop: the watcher's own work (keys, pacing, frames).
    fn tick(&mut self, job: &mut dyn JobHandle) -> std::io::Result<Flow>;
}
