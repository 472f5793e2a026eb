//! The measuring window of `bench console`: the launcher's own CPU over a stretch of a job
//! the console watches (or paces unwatched), after wire-up and a warm-up.

use std::time::{Duration, Instant};

/// The measuring window of one run.
#[derive(Clone, Debug)]
pub struct BenchWindow {
    warmup: Duration,
    window: Duration,
    wired: Option<Instant>,
    start: Option<(Instant, f64, u64)>,
    /// Launcher cores used over the window, and samples taken in per second.
    pub result: Option<(f64, f64)>,
}

impl BenchWindow {
    /// Measures for `window` after `warmup` past wire-up.
    pub fn new(warmup: Duration, window: Duration) -> BenchWindow {
        BenchWindow {
            warmup,
            window,
            wired: None,
            start: None,
            result: None,
        }
    }

    /// Called every turn; true when the window is over (the job should stop).
    pub fn poll(&mut self, all_registered: bool, samples_in: u64) -> bool {
        let now = Instant::now();
        if !all_registered {
            return false;
        }
        let wired = *self.wired.get_or_insert(now);
        match self.start {
            None if now.duration_since(wired) >= self.warmup => {
                self.start = Some((now, process_cpu_s(), samples_in));
                false
            }
            Some((at, cpu, samples)) if now.duration_since(at) >= self.window => {
                let wall = now.duration_since(at).as_secs_f64();
                self.result = Some((
                    (process_cpu_s() - cpu) / wall,
                    (samples_in - samples) as f64 / wall,
                ));
                true
            }
            _ => false,
        }
    }
}

/// CPU seconds (user + system) this process used so far, all threads.
pub fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may contain spaces) start at the state, field 3.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the state.
    let total = ticks(11) + ticks(12);
    total as f64 / rustix::param::clock_ticks_per_second() as f64
}
