//! The console on a real job: rank samples in, frames and commands out.
//!
//! The launcher's event loop owns the job; it hands this console every sample, report and
//! failure, and calls [`LiveConsole::tick`] once per turn. The console turns key presses into
//! commands it carries out through [`JobHandle`] (kill and stop from the outside, everything
//! else injected into the ranks it concerns, in the `--fault` vocabulary), paces operations,
//! and draws at most [`super::FRAME_INTERVAL`] apart.

use std::time::{Duration, Instant};

use ftcoll_algos::{Phase, ReduceOp};
use ftcoll_runtime::control::{ControlMsg, RankSample};
use ftcoll_runtime::faults::FaultSpec;
use ftcoll_runtime::sim::InputKind;
use ftcoll_tui::{
    App, Command, JobInfo, LogEntry, LogKind, RankDetail, RankState, TerminalSession, Update,
};

use super::{Reference, FRAME_INTERVAL, HOLD};
use crate::live::{op_seed, Flow, JobHandle, LiveSpec, Watcher};

/// Longest wait before a key press is seen.
const KEY_POLL: Duration = Duration::from_millis(10);

/// How the job's inputs are drawn (for the reference answers).
#[derive(Clone, Copy, Debug)]
pub struct Inputs {
    /// Reduction operator.
    pub op: ReduceOp,
    /// Distribution.
    pub kind: InputKind,
    /// Elements per rank.
    pub len: usize,
    /// Job seed.
    pub seed: u64,
}

/// The console of a real job.
pub struct LiveConsole {
    app: App,
    session: Option<TerminalSession>,
    inputs: Inputs,
    started: Instant,
    last_frame: Option<Instant>,
    samples: Vec<Option<RankSample>>,
    /// Operations each rank reported (one past the last reported index).
    reported: Vec<u64>,
    /// Checksum detections seen per rank in its current operation.
    detections: Vec<u32>,
    dead: Vec<bool>,
    /// The last operation allowed to start.
    allowed: u64,
    reference: Reference,
    /// When the finished current operation gives way to the next.
    hold_until: Option<Instant>,
    /// `n` was pressed: start the next operation as soon as this one ends.
    skip_hold: bool,
    selected: u32,
    /// Whether ranks send samples (false: the benchmark's reference, a job nobody watches).
    telemetry: bool,
    /// Ranks registered so far.
    registered: u32,
    /// Samples taken in so far.
    samples_in: u64,
    /// Benchmark mode: the measuring window, after which the job stops.
    bench: Option<super::window::BenchWindow>,
    /// When the keyboard was last read.
    last_keys: Option<Instant>,
}

impl LiveConsole {
    /// A console for `info`'s job; `session` is the terminal (None: headless, for tests and
    /// benchmarks).
    pub fn new(info: JobInfo, inputs: Inputs, session: Option<TerminalSession>) -> LiveConsole {
        let n = info.n as usize;
        let alive = vec![true; n];
        LiveConsole {
            app: App::new(info),
            session,
            reference: Reference::new(inputs.op, inputs.kind, inputs.len, inputs.seed, &alive),
            inputs,
            started: Instant::now(),
            last_frame: None,
            samples: vec![None; n],
            reported: vec![0; n],
            detections: vec![0; n],
            dead: vec![false; n],
            allowed: 0,
            hold_until: None,
            skip_hold: false,
            selected: 0,
            telemetry: true,
            registered: 0,
            samples_in: 0,
            bench: None,
            last_keys: None,
        }
    }

    /// A console without a terminal for `bench console`: with `telemetry`, ranks sample and
    /// frames are rendered off-screen at the usual rate; without, neither happens. The job stops
    /// when `window` is over.
    pub fn headless(
        info: JobInfo,
        inputs: Inputs,
        telemetry: bool,
        window: super::window::BenchWindow,
    ) -> LiveConsole {
        let mut console = LiveConsole::new(info, inputs, None);
        console.telemetry = telemetry;
        console.bench = Some(window);
        console
    }

    /// Whether ranks should send status samples.
    pub fn telemetry(&self) -> bool {
        self.telemetry
    }

    /// The benchmark's figures: launcher cores, samples per second.
    pub fn bench_result(&self) -> Option<(f64, f64)> {
        self.bench.as_ref().and_then(|b| b.result)
    }

    /// The console's model (tests).
    #[cfg(test)]
    pub fn app(&self) -> &App {
        &self.app
    }

    /// A rank registered: tell it which operations may run and whether it is watched.
    pub fn registered(&mut self, rank: u32, job: &mut dyn JobHandle) {
        self.registered += 1;
        job.send(rank, &ControlMsg::Go { op: self.allowed });
        if rank == self.selected {
            job.send(rank, &ControlMsg::Watch { detail: true });
        }
    }

    /// A status sample arrived.
    pub fn sample(&mut self, rank: u32, sample: RankSample) {
        let Some(slot) = self.samples.get(rank as usize) else {
            return;
        };
        self.samples_in += 1;
        let previous = slot
            .as_ref()
            .map_or((u64::MAX, 0), |s| (s.op, s.detections));
        let fresh = if previous.0 == sample.op {
            sample.detections.saturating_sub(previous.1)
        } else {
            sample.detections
        };
        if fresh > 0 {
            self.log(
                LogKind::Failure,
                format!(
                    "rank {rank} found corrupted state by checksum ({} in op {})",
                    sample.detections, sample.op
                ),
            );
        }
        for &peer in &sample.suspected {
            self.log(
                LogKind::Failure,
                format!("rank {rank} timed out waiting for rank {peer} and routes around it"),
            );
        }
        self.detections[rank as usize] = sample.detections;
        self.samples[rank as usize] = Some(sample);
    }

    /// A rank reported the outcome of operation `op`.
    pub fn reported(&mut self, rank: u32, op: u64) {
        if let Some(count) = self.reported.get_mut(rank as usize) {
            *count = (*count).max(op + 1);
        }
    }

    /// The launcher found `rank` dead (`how`: its exit, or the reason it was killed).
    pub fn failed(&mut self, rank: u32, how: &str) {
        if let Some(dead) = self.dead.get_mut(rank as usize) {
            *dead = true;
        }
        self.reference.update(&self.alive());
        self.log(
            LogKind::Failure,
            format!("launcher: rank {rank} failed ({how}); survivors notified"),
        );
    }

    /// The heartbeat detector suspects `rank` (it is being killed).
    pub fn suspected(&mut self, rank: u32, why: &str) {
        self.log(
            LogKind::Failure,
            format!("launcher: rank {rank} suspected ({why}); killing it before anyone is told"),
        );
    }

    fn alive(&self) -> Vec<bool> {
        self.dead.iter().map(|d| !d).collect()
    }

    fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn log(&mut self, kind: LogKind, text: String) {
        let at_s = self.elapsed_s();
        self.app.log(LogEntry { at_s, kind, text });
    }

    /// One turn: keys, pacing, and a frame if one is due.
    pub fn tick(&mut self, job: &mut dyn JobHandle) -> std::io::Result<Flow> {
        let due = self
            .last_frame
            .is_none_or(|t| t.elapsed() >= FRAME_INTERVAL);
        if due {
            self.last_frame = Some(Instant::now());
        }
        // A busy loop turns thousands of times a second: the keyboard is read at most every
        // KEY_POLL, which no one can tell from every turn.
        let keys_due = self.last_keys.is_none_or(|t| t.elapsed() >= KEY_POLL);
        let actions = match self.session.as_mut() {
            Some(session) if keys_due => {
                self.last_keys = Some(Instant::now());
                if due {
                    // Up and down move by a row of the map as drawn at this size.
                    let (width, height) = session.size()?;
                    self.app.set_viewport(width, height);
                }
                session.poll_actions(Duration::ZERO)?
            }
            _ => Vec::new(),
        };
        for action in actions {
            for command in self.app.apply(action) {
                if self.execute(command, job) == Flow::Quit {
                    return Ok(Flow::Quit);
                }
            }
        }
        let n = self.dead.len() as u32;
        if let Some(window) = self.bench.as_mut() {
            if window.poll(self.registered >= n, self.samples_in) {
                return Ok(Flow::Quit);
            }
        }
        if due {
            // Pacing looks at every rank: once a frame, not on every turn of the loop.
            self.pace(job);
        }
        if due && self.telemetry {
            let update = self.update(job);
            self.app.update(update);
            match self.session.as_mut() {
                Some(session) => session.draw(&self.app)?,
                // Benchmark mode: the same drawing, into a buffer.
                None if self.bench.is_some() => {
                    std::hint::black_box(ftcoll_tui::capture(&self.app, 120, 40));
                }
                None => {}
            }
        }
        Ok(Flow::Continue)
    }

    /// Carries out one command (public for tests without a terminal).
    pub fn execute(&mut self, command: Command, job: &mut dyn JobHandle) -> Flow {
        match command {
            Command::Quit => return Flow::Quit,
            Command::Pause => job.pause(true),
            Command::Resume => job.pause(false),
            Command::NewOperation => {
                self.skip_hold = true;
                if self.hold_until.is_some() {
                    self.hold_until = Some(Instant::now());
                }
            }
            Command::Select(rank) => {
                job.send(self.selected, &ControlMsg::Watch { detail: false });
                self.selected = rank;
                job.send(rank, &ControlMsg::Watch { detail: true });
            }
            Command::Fault(spec) => self.inject(spec, job),
        }
        Flow::Continue
    }

    fn inject(&mut self, spec: FaultSpec, job: &mut dyn JobHandle) {
        let n = self.dead.len() as u32;
        let per_node = self.app.info().ranks_per_node.max(1);
        let inject =
            |rank: u32, job: &mut dyn JobHandle| job.send(rank, &ControlMsg::Inject { spec });
        match spec {
            FaultSpec::Kill { rank, .. } if rank.0 < n => job.kill(rank.0),
            FaultSpec::KillNode { node, .. } => {
                let first = node.saturating_mul(per_node);
                for rank in first..first.saturating_add(per_node).min(n) {
                    job.kill(rank);
                }
            }
            FaultSpec::Stop { rank, .. } if rank.0 < n => job.stop(rank.0),
            FaultSpec::Cut { a, b, .. } if a.0 < n && b.0 < n => {
                inject(a.0, job);
                inject(b.0, job);
            }
            FaultSpec::Drop { rank: None, .. } | FaultSpec::FlipRate { rank: None, .. } => {
                (0..n).for_each(|r| inject(r, job))
            }
            FaultSpec::FlipMessage { rank, .. }
            | FaultSpec::FlipState { rank, .. }
            | FaultSpec::Slow { rank, .. }
            | FaultSpec::Drop {
                rank: Some(rank), ..
            }
            | FaultSpec::FlipRate {
                rank: Some(rank), ..
            } if rank.0 < n => inject(rank.0, job),
            _ => self.log(LogKind::Info, format!("{spec}: not applicable to this job")),
        }
    }

    /// Starts the next operation when every live rank finished this one and the hold passed.
    fn pace(&mut self, job: &mut dyn JobHandle) {
        let all_done = (0..self.dead.len())
            .filter(|&r| !self.dead[r] && !job.exited(r as u32))
            .all(|r| self.reported[r] > self.allowed);
        if !all_done {
            return;
        }
        let now = Instant::now();
        let until = *self
            .hold_until
            .get_or_insert(if self.skip_hold { now } else { now + HOLD });
        if now < until {
            return;
        }
        self.allowed += 1;
        self.hold_until = None;
        self.skip_hold = false;
        let alive = self.alive();
        let inputs = self.inputs;
        self.reference = Reference::new(
            inputs.op,
            inputs.kind,
            inputs.len,
            op_seed(inputs.seed, self.allowed),
            &alive,
        );
        for rank in 0..self.dead.len() as u32 {
            if !self.dead[rank as usize] {
                job.send(rank, &ControlMsg::Go { op: self.allowed });
            }
        }
        self.log(
            LogKind::Info,
            format!("operation {} started with fresh inputs", self.allowed),
        );
    }

    /// The frame for the console.
    fn update(&self, job: &dyn JobHandle) -> Update {
        let n = self.dead.len();
        let mut states = Vec::with_capacity(n);
        let mut errors = Vec::with_capacity(n);
        let mut round = 0;
        let mut messages_total = 0;
        for rank in 0..n {
            let sample = self.samples[rank].as_ref();
            messages_total += sample.map_or(0, |s| s.messages_sent);
            let current = sample.filter(|s| s.op == self.allowed);
            round = round.max(current.map_or(0, |s| s.iteration));
            states.push(self.state_of(rank, job));
            errors.push(current.map_or(f32::NAN, |s| self.reference.error(s.estimate) as f32));
        }
        let detail = self.samples[self.selected as usize]
            .as_ref()
            .map(|sample| RankDetail {
                rank: self.selected,
                state: states[self.selected as usize],
                phase: format!("{:?}", sample.phase),
                iteration: sample.iteration,
                estimate: sample.estimate,
                error: errors[self.selected as usize],
                inspection: sample.inspection.clone().unwrap_or_default(),
            });
        Update {
            elapsed_s: self.elapsed_s(),
            time_label: String::new(),
            op: self.allowed,
            round,
            states,
            errors,
            messages_total,
            detail,
        }
    }

    fn state_of(&self, rank: usize, job: &dyn JobHandle) -> RankState {
        if self.dead[rank] || job.exited(rank as u32) {
            return RankState::Dead;
        }
        if job.suspected(rank as u32) {
            return RankState::Suspected;
        }
        match self.samples[rank].as_ref() {
            Some(s) if s.op == self.allowed && s.phase == Phase::Running => RankState::Running,
            Some(s) if s.op == self.allowed && matches!(s.phase, Phase::Done | Phase::Aborted) => {
                RankState::Done
            }
            _ if self.reported[rank] > self.allowed => RankState::Done,
            _ => RankState::Starting,
        }
    }
}

/// The launcher's job loop drives the console through this.
impl Watcher for LiveConsole {
    fn telemetry(&self) -> bool {
        LiveConsole::telemetry(self)
    }

    fn registered(&mut self, rank: u32, job: &mut dyn JobHandle) {
        LiveConsole::registered(self, rank, job);
    }

    fn sample(&mut self, rank: u32, sample: RankSample) {
        LiveConsole::sample(self, rank, sample);
    }

    fn reported(&mut self, rank: u32, op: u64) {
        LiveConsole::reported(self, rank, op);
    }

    fn failed(&mut self, rank: u32, how: &str) {
        LiveConsole::failed(self, rank, how);
    }

    fn suspected(&mut self, rank: u32, why: &str) {
        LiveConsole::suspected(self, rank, why);
    }

    fn tick(&mut self, job: &mut dyn JobHandle) -> std::io::Result<Flow> {
        LiveConsole::tick(self, job)
    }
}

/// Runs `spec` (the built-in job, paced) under the console until the user quits; `info`
/// describes the job to the user, `inputs` how its ranks draw their inputs.
pub fn run(spec: &LiveSpec, info: JobInfo, inputs: Inputs) -> anyhow::Result<()> {
    let (n, algo) = (info.n, info.algo.clone());
    let session = TerminalSession::open().map_err(|e| {
        anyhow::anyhow!("cannot open the console ({e}); pass --no-tui to run headless")
    })?;
    super::set_owns_terminal(true);
    let mut console = LiveConsole::new(info, inputs, Some(session));
    let outcome = crate::live::run_with_console(spec, Some(&mut console));
    // Closing the session gives the terminal back before anything is printed.
    console.session = None;
    super::set_owns_terminal(false);
    let outcome = outcome?;
    println!(
        "{} ranks ({}), {}: {} operations in {:.1} s",
        n,
        spec.transport,
        algo,
        console.allowed + 1,
        outcome.wall_s
    );
    outcome.print_failures();
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A job loop stand-in that records what the console asked of it.
    #[derive(Default)]
    struct FakeJob {
        killed: Vec<u32>,
        stopped: Vec<u32>,
        paused: Option<bool>,
        sent: Vec<(u32, ControlMsg)>,
    }

    impl JobHandle for FakeJob {
        fn kill(&mut self, rank: u32) {
            self.killed.push(rank);
        }
        fn stop(&mut self, rank: u32) {
            self.stopped.push(rank);
        }
        fn pause(&mut self, paused: bool) {
            self.paused = Some(paused);
        }
        fn send(&mut self, rank: u32, msg: &ControlMsg) {
            self.sent.push((rank, msg.clone()));
        }
        fn exited(&self, rank: u32) -> bool {
            self.killed.contains(&rank)
        }
        fn suspected(&self, _rank: u32) -> bool {
            false
        }
    }

    fn console(n: u32) -> LiveConsole {
        let info = JobInfo {
            algo: "pfcc".into(),
            n,
            transport: "shm".into(),
            simulated: false,
            value_bits: 64,
            ranks_per_node: 2,
            seed: 1,
        };
        let inputs = Inputs {
            op: ReduceOp::Sum,
            kind: InputKind::RankId,
            len: 1,
            seed: 1,
        };
        LiveConsole::new(info, inputs, None)
    }

    fn log_text(console: &LiveConsole) -> String {
        console
            .app()
            .log_entries()
            .iter()
            .map(|e| e.text.clone())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn faults_go_to_the_launcher_or_to_the_ranks_they_concern() {
        let mut job = FakeJob::default();
        let mut console = console(4);
        let fault = |text: &str| {
            Command::Fault(ftcoll_launcher::text::parse_fault(text).expect("a valid spec"))
        };
        console.execute(fault("kill:rank=2"), &mut job);
        console.execute(fault("kill-node:node=0"), &mut job);
        console.execute(fault("stop:rank=3"), &mut job);
        assert_eq!(job.killed, [2, 0, 1]);
        assert_eq!(job.stopped, [3]);
        console.execute(fault("cut:link=1-3"), &mut job);
        console.execute(fault("flip-msg:rank=1,bit=52"), &mut job);
        let injected: Vec<u32> = job
            .sent
            .iter()
            .filter(|(_, m)| matches!(m, ControlMsg::Inject { .. }))
            .map(|(r, _)| *r)
            .collect();
        assert_eq!(injected, [1, 3, 1]);
        // Faults arrive typed, so nothing malformed reaches here; a rank outside the job can.
        console.execute(fault("kill:rank=99"), &mut job);
        assert_eq!(job.killed, [2, 0, 1], "out-of-range specs do nothing");
        let log = log_text(&console);
        assert!(log.contains("kill:rank=99: not applicable"), "{log}");
        assert_eq!(console.execute(Command::Pause, &mut job), Flow::Continue);
        assert_eq!(job.paused, Some(true));
        assert_eq!(console.execute(Command::Quit, &mut job), Flow::Quit);
    }

    #[test]
    fn operations_are_paced_and_errors_follow_the_survivors() {
        let mut job = FakeJob::default();
        let mut console = console(4);
        for rank in 0..4 {
            console.registered(rank, &mut job);
        }
        let gos = |job: &FakeJob, op: u64| {
            job.sent
                .iter()
                .filter(|(_, m)| *m == ControlMsg::Go { op })
                .count()
        };
        assert_eq!(gos(&job, 0), 4);
        assert!(job.sent.contains(&(0, ControlMsg::Watch { detail: true })));
        // Inputs are the ranks' ids: the sum is 6, or 3 once rank 3 is dead.
        let sample = |estimate: f64, detections: u32| RankSample {
            op: 0,
            iteration: 9,
            phase: Phase::Done,
            estimate,
            messages_sent: 10,
            detections,
            inspection: None,
            suspected: if detections > 0 { vec![3] } else { Vec::new() },
        };
        console.sample(0, sample(6.0, 0));
        console.sample(1, sample(3.0, 0));
        console.sample(2, sample(4.5, 1));
        assert!(log_text(&console).contains("rank 2 found corrupted state by checksum"));
        assert!(log_text(&console).contains("rank 2 timed out waiting for rank 3"));
        console.failed(3, "killed by signal 9");
        for rank in 0..3 {
            console.reported(rank, 0);
        }
        console.execute(Command::NewOperation, &mut job);
        console.tick(&mut job).unwrap();
        assert_eq!(gos(&job, 1), 3, "the next operation starts at once on n");
        let errors = &console.app().latest().unwrap().errors;
        assert!(
            errors[0..3].iter().all(|e| e.is_nan()),
            "op 1 has no samples yet"
        );
        let log = log_text(&console);
        assert!(log.contains("rank 3 failed"), "{log}");
        assert!(log.contains("operation 1 started"), "{log}");
    }
}
