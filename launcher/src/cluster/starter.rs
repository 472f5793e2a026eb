//! Starting the node agents: one `ssh` per host of a hostfile, or one `srun` step with a task
//! per allocated node. These are local child processes of the launcher; the agents they run
//! connect back to the control plane.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use ftcoll_runtime::env::to_hex;

use super::hostfile::Placement;
use super::slurm::Allocation;

/// Lines of a starter's stderr kept for the error message when it fails.
const KEPT_STDERR_LINES: usize = 4;
/// How long ssh/srun may take to end on their own once the job is over.
const STARTER_EXIT_GRACE: Duration = Duration::from_secs(5);

/// How agents reach their hosts.
pub enum Route {
    /// ssh to each host, with this command (`FTCOLL_SSH`, default `ssh`) and batch-mode options.
    Ssh(Vec<String>),
    /// One srun step inside this allocation.
    Srun(Allocation),
}

impl Route {
    /// `ssh` or `srun`.
    pub fn name(&self) -> &'static str {
        match self {
            Route::Ssh(_) => "ssh",
            Route::Srun(_) => "srun",
        }
    }
}

/// What every agent is told on its command line.
pub struct AgentCall<'a> {
    /// The launcher's control address.
    pub control_addr: &'a str,
    /// The job id.
    pub job_id: u64,
    /// The job secret (never on a command line).
    pub secret: &'a [u8],
    /// Heartbeat period in ms.
    pub heartbeat_ms: u64,
}

/// One running ssh or srun, with the tail of its stderr.
struct Starter {
    label: String,
    child: Child,
    stderr_tail: Arc<Mutex<Vec<String>>>,
}

/// The ssh or srun processes that carry the agents.
pub struct Agents {
    starters: Vec<Starter>,
}

impl Agents {
    /// Starts the agents of `placement` along `route`.
    pub fn start(
        route: &Route,
        placement: &Placement,
        call: &AgentCall<'_>,
    ) -> anyhow::Result<Agents> {
        let exe = std::env::current_exe()
            .context("cannot find this program's path for the node agents")?;
        let exe = exe.to_string_lossy().into_owned();
        let mut agents = Agents {
            starters: Vec::new(),
        };
        let base = |node: Option<usize>| {
            let mut words = vec![
                exe.clone(),
                "__agent".to_string(),
                "--control".into(),
                call.control_addr.to_string(),
                "--job".into(),
                format!("{:016x}", call.job_id),
                "--heartbeat-ms".into(),
                call.heartbeat_ms.to_string(),
            ];
            if let Some(node) = node {
                words.extend(["--node".to_string(), node.to_string()]);
            }
            words
        };
        match route {
            Route::Ssh(ssh) => {
                for (node, plan) in placement.nodes.iter().enumerate() {
                    let (program, options) = ssh.split_first().context("FTCOLL_SSH is empty")?;
                    let mut command = Command::new(program);
                    command
                        .args(options)
                        .args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"])
                        .arg(&plan.host)
                        .arg("--")
                        .arg(shell_words(&base(Some(node))));
                    let mut starter = agents.launch(format!("host {}", plan.host), command)?;
                    // The secret travels on the agent's stdin, never on a command line.
                    if let Some(mut stdin) = starter.child.stdin.take() {
                        let _ = writeln!(stdin, "{}", to_hex(call.secret));
                    }
                    starter.child.stdin = None;
                    agents.starters.push(starter);
                }
            }
            Route::Srun(allocation) => {
                let mut command = Command::new("srun");
                command
                    .args(allocation.srun_args(placement.nodes.len()))
                    .args(base(None))
                    .env("FTCOLL_SECRET", to_hex(call.secret));
                let starter =
                    agents.launch(format!("srun (Slurm job {})", allocation.job_id), command)?;
                agents.starters.push(starter);
            }
        }
        Ok(agents)
    }

    fn launch(&self, label: String, mut command: Command) -> anyhow::Result<Starter> {
        command.stdin(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().with_context(|| {
            format!(
                "cannot start {label}: is {:?} installed?",
                command.get_program()
            )
        })?;
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        if let Some(stderr) = child.stderr.take() {
            let tail = Arc::clone(&stderr_tail);
            // Forwards the agent's (and its ranks') stderr, keeping the last lines for errors.
            // Ends at EOF, when ssh or srun exits.
            std::thread::Builder::new()
                .name("ftcoll-starter-log".into())
                .spawn(move || {
                    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                        eprintln!("{line}");
                        let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                        if tail.len() == KEPT_STDERR_LINES {
                            tail.remove(0);
                        }
                        tail.push(line);
                    }
                })?;
        }
        Ok(Starter {
            label,
            child,
            stderr_tail,
        })
    }

    /// The first starter that already ended, as a one-line reason (ssh could not connect, the
    /// host refused, srun found no resources, the agent failed).
    pub fn failure(&mut self) -> Option<String> {
        for starter in &mut self.starters {
            if let Ok(Some(status)) = starter.child.try_wait() {
                // Give the log thread a moment to take the last lines.
                std::thread::sleep(Duration::from_millis(50));
                let tail = starter
                    .stderr_tail
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let why = tail
                    .iter()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .cloned()
                    .unwrap_or_else(|| format!("it exited with {status}"));
                return Some(format!(
                    "cannot start the node agent on {}: {}",
                    starter.label,
                    why.trim()
                ));
            }
        }
        None
    }
}

impl Drop for Agents {
    /// The agents end when the launcher's connections close; their ssh or srun end with them.
    /// Any that lingers is killed, so that nothing the launcher started outlives it.
    fn drop(&mut self) {
        let deadline = Instant::now() + STARTER_EXIT_GRACE;
        for starter in &mut self.starters {
            // Bounded by the deadline.
            while Instant::now() < deadline && matches!(starter.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = starter.child.kill();
            let _ = starter.child.wait();
        }
    }
}

/// `words` as one POSIX shell command line (ssh hands the remote shell one string).
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_quote_only_what_needs_it() {
        let words = vec![
            "/opt/ftcoll/bin/ftcoll-launch".to_string(),
            "a b".into(),
            "it's".into(),
            String::new(),
        ];
        assert_eq!(
            shell_words(&words),
            r"/opt/ftcoll/bin/ftcoll-launch 'a b' 'it'\''s' ''"
        );
    }
}
