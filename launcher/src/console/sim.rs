//! The console on a simulated job (`ftcoll-launch --sim`): the simulator advances a slice of
//! virtual time per frame, faults typed at the keyboard are injected at the current virtual
//! time, and operations repeat with fresh inputs (ranks dead in an earlier operation are dead
//! from the start of the next). Same console, same keys as a real job.

use std::time::{Duration, Instant};

use ftcoll_algos::protocol::{Detail, Phase};
use ftcoll_algos::wire::OpId;
use ftcoll_algos::{Protocol, Rank, Time};
use ftcoll_runtime::faults::{FaultSpec, FaultTime, KillTime};
use ftcoll_runtime::job::{stepped_simulation, JobSpec};
use ftcoll_runtime::sim::{generate_inputs, SimConfig, Simulation, Slice};
use ftcoll_tui::{
    App, Command, JobInfo, LogEntry, LogKind, RankDetail, RankState, TerminalSession, Update,
};

use super::{Reference, FRAME_INTERVAL, HOLD};
use crate::live::op_seed;

type Stepped = Simulation<Box<dyn Protocol + Send>>;

/// The console's driver of a simulated job.
pub struct SimConsole {
    app: App,
    session: Option<TerminalSession>,
    spec: JobSpec,
    config: SimConfig,
    sim: Stepped,
    op: u64,
    /// Virtual time reached in the current operation.
    now: Time,
    /// Virtual time advanced per frame.
    steps_per_frame: u64,
    /// Dead in an earlier operation (they stay dead).
    dead_before: Vec<bool>,
    reference: Reference,
    started: Instant,
    hold_until: Option<Instant>,
    skip_hold: bool,
    paused: bool,
    /// Crash records of the current operation already logged.
    crashes_logged: usize,
    detections: Vec<u32>,
    /// Frames sent in finished operations.
    messages_before: u64,
    selected: u32,
    scratch: Vec<f64>,
}

impl SimConsole {
    /// A console over the job `spec` (ranks stop by their local rule, as on real ranks).
    pub fn new(
        info: JobInfo,
        mut spec: JobSpec,
        config: SimConfig,
        session: Option<TerminalSession>,
    ) -> anyhow::Result<SimConsole> {
        spec.gossip.stop_rule = true;
        let n = spec.n as usize;
        // About 30 gossip pushes (or exchanges) of virtual time per second of wall time.
        let steps_per_frame = 3 * config.cost.exchange_round_steps().max(1);
        let (sim, reference) = Self::operation(&spec, &config, 0, &vec![false; n])?;
        Ok(SimConsole {
            app: App::new(info),
            session,
            spec,
            config,
            sim,
            op: 0,
            now: Time(0),
            steps_per_frame,
            dead_before: vec![false; n],
            reference,
            started: Instant::now(),
            hold_until: None,
            skip_hold: false,
            paused: false,
            crashes_logged: 0,
            detections: vec![0; n],
            messages_before: 0,
            selected: 0,
            scratch: Vec::new(),
        })
    }

    /// Operation `op`'s simulation: fresh inputs, the earlier dead dead from time 0, and (for
    /// the first operation only) the command line's faults.
    fn operation(
        spec: &JobSpec,
        config: &SimConfig,
        op: u64,
        dead: &[bool],
    ) -> anyhow::Result<(Stepped, Reference)> {
        let mut config = config.clone();
        config.seed = op_seed(config.seed, op);
        if op > 0 {
            config.faults.clear();
        }
        for (rank, _) in dead.iter().enumerate().filter(|(_, &d)| d) {
            config.faults.push(FaultSpec::Kill {
                rank: Rank(rank as u32),
                at: KillTime::At(FaultTime::Steps(0)),
            });
        }
        let inputs = generate_inputs(spec.input, spec.n, spec.input_len, config.seed);
        let alive: Vec<bool> = dead.iter().map(|d| !d).collect();
        let reference = Reference::new(spec.op, spec.input, spec.input_len, config.seed, &alive);
        let sim = stepped_simulation(spec, config, inputs, OpId(1))?;
        Ok((sim, reference))
    }

    /// The console's model (tests).
    #[cfg(test)]
    pub fn app(&self) -> &App {
        &self.app
    }

    /// The operation running.
    #[cfg(test)]
    pub fn op(&self) -> u64 {
        self.op
    }

    fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn log(&mut self, kind: LogKind, text: String) {
        let at_s = self.elapsed_s();
        self.app.log(LogEntry { at_s, kind, text });
    }

    /// Carries out a command; false on quit.
    pub fn execute(&mut self, command: Command) -> anyhow::Result<bool> {
        match command {
            Command::Quit => return Ok(false),
            Command::Pause => self.paused = true,
            Command::Resume => self.paused = false,
            Command::NewOperation => {
                self.skip_hold = true;
                if self.hold_until.is_some() {
                    self.hold_until = Some(Instant::now());
                }
            }
            Command::Select(rank) => self.selected = rank,
            Command::Fault(spec) => {
                if let Err(error) = self.sim.inject(&spec, self.now) {
                    self.log(LogKind::Info, format!("refused {spec}: {error}"));
                }
            }
        }
        Ok(true)
    }

    /// Advances one frame of virtual time (or the hold between operations) and refreshes the
    /// console's model.
    pub fn advance(&mut self) -> anyhow::Result<()> {
        if !self.paused {
            match self.hold_until {
                None => {
                    self.now = Time(self.now.0 + self.steps_per_frame);
                    if self.sim.run_until(self.now) == Slice::Finished {
                        let report = self.sim.finish_stepped();
                        self.log(
                            LogKind::Info,
                            format!(
                                "operation {} done at t={} steps: max error {:.1e}",
                                self.op, report.completion_steps, report.max_rel_error
                            ),
                        );
                        let now = Instant::now();
                        self.hold_until = Some(if self.skip_hold { now } else { now + HOLD });
                    }
                }
                Some(until) if Instant::now() >= until => self.next_operation()?,
                Some(_) => {}
            }
        }
        self.log_crashes();
        let update = self.update();
        self.app.update(update);
        Ok(())
    }

    fn next_operation(&mut self) -> anyhow::Result<()> {
        for rank in 0..self.spec.n {
            if !self.sim.is_alive(Rank(rank)) {
                self.dead_before[rank as usize] = true;
            }
        }
        self.messages_before += self.sim.report_so_far().messages;
        self.op += 1;
        let (sim, reference) =
            Self::operation(&self.spec, &self.config, self.op, &self.dead_before)?;
        self.sim = sim;
        self.reference = reference;
        self.now = Time(0);
        self.hold_until = None;
        self.skip_hold = false;
        self.crashes_logged = 0;
        self.detections.iter_mut().for_each(|d| *d = 0);
        self.log(
            LogKind::Info,
            format!("operation {} started with fresh inputs", self.op),
        );
        Ok(())
    }

    fn log_crashes(&mut self) {
        let crashes: Vec<_> = self.sim.report_so_far().crashes[self.crashes_logged..].to_vec();
        self.crashes_logged += crashes.len();
        for crash in crashes {
            if self.dead_before[crash.rank.index()] {
                continue;
            }
            self.log(
                LogKind::Failure,
                format!(
                    "rank {} crashed at t={} ({:?}); the detector tells its peers",
                    crash.rank.0, crash.at.0, crash.cause
                ),
            );
        }
        let alive: Vec<bool> = (0..self.spec.n)
            .map(|r| self.sim.is_alive(Rank(r)))
            .collect();
        self.reference.update(&alive);
        for rank in 0..self.spec.n as usize {
            let found = match self.sim.ranks()[rank].status().detail {
                Detail::Gossip { detections, .. } => detections,
                _ => 0,
            };
            if found > self.detections[rank] {
                self.detections[rank] = found;
                self.log(
                    LogKind::Failure,
                    format!(
                        "rank {rank} found corrupted state by checksum ({found} in op {})",
                        self.op
                    ),
                );
            }
        }
    }

    fn update(&mut self) -> Update {
        let n = self.spec.n as usize;
        let mut states = Vec::with_capacity(n);
        let mut errors = Vec::with_capacity(n);
        let mut round = 0;
        for rank in 0..n {
            let protocol = &self.sim.ranks()[rank];
            let status = protocol.status();
            round = round.max(status.iteration);
            let state = if self.dead_before[rank] || !self.sim.is_alive(Rank(rank as u32)) {
                RankState::Dead
            } else if self.sim.is_silent(Rank(rank as u32)) {
                RankState::Suspected
            } else {
                match protocol.phase() {
                    Phase::Idle => RankState::Starting,
                    Phase::Running => RankState::Running,
                    Phase::Done | Phase::Aborted => RankState::Done,
                }
            };
            protocol.estimate(&mut self.scratch);
            let estimate = self.scratch.first().copied().unwrap_or(f64::NAN);
            states.push(state);
            errors.push(if state == RankState::Dead {
                f32::NAN
            } else {
                self.reference.error(estimate) as f32
            });
        }
        let selected = (self.selected as usize).min(n.saturating_sub(1));
        let protocol = &self.sim.ranks()[selected];
        protocol.estimate(&mut self.scratch);
        let detail = RankDetail {
            rank: selected as u32,
            state: states[selected],
            phase: format!("{:?}", protocol.phase()),
            iteration: protocol.status().iteration,
            estimate: self.scratch.first().copied().unwrap_or(f64::NAN),
            error: errors[selected],
            inspection: protocol.inspect(),
        };
        Update {
            elapsed_s: self.elapsed_s(),
            time_label: format!("sim t={} steps", self.now.0),
            op: self.op,
            round,
            states,
            errors,
            messages_total: self.messages_before + self.sim.report_so_far().messages,
            detail: Some(detail),
        }
    }

    /// The interactive loop: keys, a frame of virtual time, a draw, until `q`.
    fn run_loop(&mut self) -> anyhow::Result<()> {
        // Each pass waits for keys up to one frame interval; quitting ends the loop.
        loop {
            let frame_start = Instant::now();
            let actions = match self.session.as_mut() {
                Some(session) => {
                    // Up and down move by a row of the map as drawn at this size.
                    let (width, height) = session.size()?;
                    self.app.set_viewport(width, height);
                    session.poll_actions(Duration::ZERO)?
                }
                None => Vec::new(),
            };
            for action in actions {
                for command in self.app.apply(action) {
                    if !self.execute(command)? {
                        return Ok(());
                    }
                }
            }
            self.advance()?;
            if let Some(session) = self.session.as_mut() {
                session.draw(&self.app)?;
                let left = FRAME_INTERVAL.saturating_sub(frame_start.elapsed());
                let actions = session.poll_actions(left)?;
                for action in actions {
                    for command in self.app.apply(action) {
                        if !self.execute(command)? {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}

/// Runs the simulated job `spec` under the console until the user quits; `value_bits`: the
/// bits a flip may target in its values.
pub fn run(spec: JobSpec, config: SimConfig, value_bits: u32) -> anyhow::Result<()> {
    let info = JobInfo {
        algo: spec.algo.name().to_string(),
        n: spec.n,
        transport: "sim".into(),
        simulated: true,
        value_bits,
        ranks_per_node: config.ranks_per_node,
        seed: config.seed,
    };
    // Validate before taking the terminal, so errors print normally.
    let mut console = SimConsole::new(info, spec, config, None)?;
    console.session = Some(TerminalSession::open().map_err(|e| {
        anyhow::anyhow!("cannot open the console ({e}); pass --no-tui to run headless")
    })?);
    super::set_owns_terminal(true);
    let result = console.run_loop();
    console.session = None;
    super::set_owns_terminal(false);
    result?;
    println!(
        "{} over {} simulated ranks: {} operations in {:.1} s",
        console.spec.algo,
        console.spec.n,
        console.op + 1,
        console.elapsed_s()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ftcoll_launcher::text::parse_fault;
    use ftcoll_runtime::job::Algorithm;

    fn console(algo: Algorithm, n: u32) -> SimConsole {
        let info = JobInfo {
            algo: algo.name().into(),
            n,
            transport: "sim".into(),
            simulated: true,
            value_bits: 64,
            ranks_per_node: 1,
            seed: 4,
        };
        let config = SimConfig {
            seed: 4,
            ..SimConfig::default()
        };
        SimConsole::new(info, JobSpec::new(algo, n), config, None).unwrap()
    }

    fn frames_until(console: &mut SimConsole, limit: u32, done: impl Fn(&SimConsole) -> bool) {
        for _ in 0..limit {
            if done(console) {
                return;
            }
            console.advance().unwrap();
        }
        panic!("not reached in {limit} frames");
    }

    #[test]
    fn a_killed_rank_is_logged_and_the_next_operations_converge_without_it() {
        let mut console = console(Algorithm::Pfcc, 16);
        for _ in 0..5 {
            console.advance().unwrap();
        }
        console
            .execute(Command::Fault(parse_fault("kill:rank=3").unwrap()))
            .unwrap();
        console
            .execute(Command::Fault(
                parse_fault("flip-state:rank=6,var=flow:7,bit=60").unwrap(),
            ))
            .unwrap();
        console.execute(Command::NewOperation).unwrap();
        frames_until(&mut console, 20_000, |c| c.op() >= 1);
        console.execute(Command::NewOperation).unwrap();
        frames_until(&mut console, 20_000, |c| c.op() >= 2);
        let log: Vec<String> = console
            .app()
            .log_entries()
            .iter()
            .map(|e| e.text.clone())
            .collect();
        assert!(log.iter().any(|l| l.contains("rank 3 crashed")), "{log:?}");
        assert!(
            log.iter()
                .any(|l| l.contains("operation 1 done") && l.contains("max error")),
            "{log:?}"
        );
        let update = console.app().latest().unwrap();
        assert_eq!(
            update.states[3],
            RankState::Dead,
            "dead in later operations too"
        );
        assert!(console.app().detail().is_some());
    }

    #[test]
    fn every_stepped_algorithm_runs_an_operation() {
        for algo in [
            Algorithm::Rdb,
            Algorithm::CorrectedAllreduce,
            Algorithm::FtcoAllreduce,
            Algorithm::Pcf,
            Algorithm::Hpflc,
        ] {
            let mut console = console(algo, 8);
            console.execute(Command::NewOperation).unwrap();
            frames_until(&mut console, 50_000, |c| c.op() >= 1);
        }
    }
}
