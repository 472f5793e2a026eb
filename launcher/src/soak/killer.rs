//! The soak's watcher: SIGKILLs a random live rank when the job reaches each of its planned
//! operations, and calls the job hung when no rank has reported anything for too long.

use std::time::{Duration, Instant};

use ftcoll_algos::rng::SimRng;
use ftcoll_runtime::control::RankSample;

use crate::live::{Flow, JobHandle, Watcher};

/// Ranks the soak leaves alive in every job: a collective of one rank tests nothing.
const MIN_ALIVE: usize = 2;

/// Kills ranks of one job as planned.
pub struct Killer {
    n: u32,
    /// Operations, ascending, after whose first report a rank is killed; consumed.
    kill_after_op: std::collections::VecDeque<u64>,
    rng: SimRng,
    /// Operations reported by some rank so far (the highest index plus one).
    progressed: u64,
    last_progress: Instant,
    hang_after: Duration,
    /// Ranks killed, with the operation the job had reached.
    killed: Vec<(u32, u64)>,
    hung: bool,
}

impl Killer {
    /// A watcher that kills after each of `kill_after_op`, picking victims with `rng`.
    pub fn new(n: u32, kill_after_op: Vec<u64>, rng: SimRng, hang_after: Duration) -> Killer {
        Killer {
            n,
            kill_after_op: kill_after_op.into(),
            rng,
            progressed: 0,
            last_progress: Instant::now(),
            hang_after,
            killed: Vec::new(),
            hung: false,
        }
    }

    /// The ranks killed, each with the operation at whose start (or during which) it died.
    pub fn killed(&self) -> &[(u32, u64)] {
        &self.killed
    }

    /// Whether the job stopped reporting and was ended.
    pub fn hung(&self) -> bool {
        self.hung
    }

    fn heard(&mut self) {
        self.last_progress = Instant::now();
    }

    /// Kills one rank that is neither dead, dying nor already a victim, if more than
    /// [`MIN_ALIVE`] remain.
    fn kill_one(&mut self, job: &mut dyn JobHandle) {
        let alive: Vec<u32> = (0..self.n)
            .filter(|&r| !job.exited(r) && !job.suspected(r))
            .filter(|&r| !self.killed.iter().any(|&(victim, _)| victim == r))
            .collect();
        if alive.len() <= MIN_ALIVE {
            return;
        }
        let victim = alive[self.rng.below(alive.len() as u64) as usize];
        job.kill(victim);
        self.killed.push((victim, self.progressed));
    }
}

impl Watcher for Killer {
    fn telemetry(&self) -> bool {
        false
    }

    fn keeps_reports(&self) -> bool {
        true
    }

    fn registered(&mut self, _rank: u32, _job: &mut dyn JobHandle) {
        self.heard();
    }

    fn sample(&mut self, _rank: u32, _sample: RankSample) {}

    fn reported(&mut self, _rank: u32, op: u64) {
        self.progressed = self.progressed.max(op + 1);
        self.heard();
    }

    fn failed(&mut self, _rank: u32, _how: &str) {
        self.heard();
    }

    fn suspected(&mut self, _rank: u32, _why: &str) {}

    fn tick(&mut self, job: &mut dyn JobHandle) -> std::io::Result<Flow> {
        if self.last_progress.elapsed() > self.hang_after {
            self.hung = true;
            return Ok(Flow::Quit);
        }
        while self
            .kill_after_op
            .front()
            .is_some_and(|&op| self.progressed > op)
        {
            self.kill_after_op.pop_front();
            self.kill_one(job);
        }
        Ok(Flow::Continue)
    }
}
