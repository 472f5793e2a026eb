//! The console driven by a synthetic job, to try keys without a cluster.
//!
//! `cargo run -p ftcoll-tui --example console_demo -- 4096` opens the console on 4096 fake
//! ranks; `-- 4096 --capture 100x30` prints one frame as text instead.

use ftcoll_algos::fault::FaultSpec;
use std::time::{Duration, Instant};

use ftcoll_algos::inspect::{InspectTable, Inspection};
use ftcoll_tui::{
    capture, App, Command, JobInfo, LogEntry, LogKind, RankDetail, RankState, TerminalSession,
    Update,
};

/// The fake job: every live rank's error shrinks tenfold every `1 + rank % 7` seconds.
struct FakeJob {
    states: Vec<RankState>,
    op: u64,
    op_start_s: f64,
    messages: u64,
}

impl FakeJob {
    fn update(&mut self, elapsed_s: f64, selected: u32) -> Update {
        let n = self.states.len() as u32;
        let age = elapsed_s - self.op_start_s;
        let errors: Vec<f32> = (0..n)
            .map(|rank| {
                10f32
                    .powf(-(age / f64::from(1 + rank % 7)) as f32)
                    .max(1e-17)
            })
            .collect();
        self.messages += u64::from(n) * 3;
        let neighbours: Vec<u32> = [1, n / 2, n.saturating_sub(1)]
            .iter()
            .map(|offset| (selected + offset) % n.max(1))
            .collect();
        let mut table = InspectTable::new(&["peer", "flow", "state"]);
        for peer in &neighbours {
            table.row(vec![
                peer.to_string(),
                format!("{:+.6}", 1.0 / f64::from(peer + 1)),
                "ok".into(),
            ]);
        }
        let mut inspection = Inspection {
            table: Some(table),
            neighbours,
            ..Inspection::default()
        };
        inspection.field("weight", format!("{:.6}", 1.0 / f64::from(n.max(1))));
        let error = errors.get(selected as usize).copied().unwrap_or(f32::NAN);
        Update {
            elapsed_s,
            time_label: String::new(),
            op: self.op,
            round: (age * 10.0) as u32,
            states: self.states.clone(),
            errors,
            messages_total: self.messages,
            detail: Some(RankDetail {
                rank: selected,
                state: self
                    .states
                    .get(selected as usize)
                    .copied()
                    .unwrap_or(RankState::Dead),
                phase: "push-sum".into(),
                iteration: (age * 10.0) as u32,
                estimate: 1.0 + f64::from(error),
                error,
                inspection,
            }),
        }
    }

    /// Carries out a command; returns a failure to log, if the command killed something.
    fn execute(&mut self, command: &Command, now_s: f64, per_node: u32) -> Option<String> {
        let Command::Fault(spec) = command else {
            if *command == Command::NewOperation {
                self.op += 1;
                self.op_start_s = now_s;
            }
            return None;
        };
        let victims: Vec<u32> = match *spec {
            FaultSpec::Kill { rank, .. } => vec![rank.0],
            FaultSpec::KillNode { node, .. } => (node * per_node..(node + 1) * per_node).collect(),
            _ => Vec::new(),
        };
        for victim in &victims {
            if let Some(state) = self.states.get_mut(*victim as usize) {
                *state = RankState::Dead;
            }
        }
        (!victims.is_empty()).then(|| format!("detected failure of {} rank(s)", victims.len()))
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n = args
        .get(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(256u32);
    let info = JobInfo {
        algo: "gossip-sum".into(),
        n,
        transport: "sim".into(),
        simulated: true,
        value_bits: 64,
        ranks_per_node: 16,
        seed: 7,
    };
    let per_node = info.ranks_per_node;
    let mut app = App::new(info);
    let mut job = FakeJob {
        states: vec![RankState::Running; n as usize],
        op: 0,
        op_start_s: 0.0,
        messages: 0,
    };

    if let Some(size) = args
        .iter()
        .position(|arg| arg == "--capture")
        .and_then(|i| args.get(i + 1))
    {
        let (width, height) = size.split_once('x').unwrap_or(("100", "30"));
        let (width, height) = (width.parse().unwrap_or(100), height.parse().unwrap_or(30));
        for step in 0..50 {
            app.update(job.update(f64::from(step) * 0.1, app.selected()));
        }
        println!("{}", capture(&app, width, height));
        return Ok(());
    }

    let mut session = TerminalSession::open()?;
    let start = Instant::now();
    let mut paused_s = 0.0;
    while !app.quit_requested() {
        let now_s = start.elapsed().as_secs_f64();
        if app.paused() {
            paused_s += 0.1;
        } else {
            app.update(job.update(now_s - paused_s, app.selected()));
        }
        let (width, height) = session.size()?;
        app.set_viewport(width, height);
        session.draw(&app)?;
        for action in session.poll_actions(Duration::from_millis(100))? {
            for command in app.apply(action) {
                if let Some(text) = job.execute(&command, now_s - paused_s, per_node) {
                    app.log(LogEntry {
                        at_s: app.now_s(),
                        kind: LogKind::Failure,
                        text,
                    });
                }
            }
        }
    }
    Ok(())
}
