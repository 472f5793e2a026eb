//! `ftcoll-launch`: runs ftcoll collectives in the simulator (and, with the runtime, on real
//! ranks), reproduces the papers' experiments, and benchmarks.

#![forbid(unsafe_code)]

mod bench;
mod check;
mod cli;
mod cluster;
mod console;
mod experiments;
mod leftovers;
mod live;
mod memory;
mod report;
mod run;
mod soak;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use cli::{Cli, Command};
use ftcoll_runtime::transport::shm::shared_heap::SharedHeap;

/// Ranks on one node allocate their vectors where their peers can map them (from the moment
/// a rank joins with the single copy on; the launcher itself never turns it on).
#[global_allocator]
static HEAP: SharedHeap = SharedHeap;

fn main() -> ExitCode {
    let parsed = Cli::command()
        .after_help(cli::after_help())
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(error) => return usage_error(error),
    };
    // A soak kills ranks by the thousand: each death is expected, not worth a warning.
    init_logging(if matches!(cli.command, Some(Command::Soak(_))) {
        "error"
    } else {
        "warn"
    });
    let result = match cli.command {
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::Check(args)) => run::check(&args),
        Some(Command::Soak(args)) => run::soak(&args),
        Some(Command::Experiment(args)) => experiments::run(&args),
        Some(Command::Rank(args)) => return live::rank_main::main(&args),
        Some(Command::Agent(args)) => cluster::agent::main(&args),
        Some(Command::PingPong(args)) => bench::transport::pingpong_main(&args),
        None => run::run(&cli.run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ftcoll-launch: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Help and version go out as clap renders them; a usage error becomes one line.
fn usage_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => error.exit(),
        _ => {
            let text = error.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("ftcoll-launch: error: {first} (see --help)");
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr through one filter, `FTCOLL_LOG` (default: `level`).
fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FTCOLL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    use std::io::IsTerminal;
    // While the console owns the terminal, log lines would garble it: they are dropped.
    let writer = || -> Box<dyn std::io::Write> {
        if console::owns_terminal() {
            Box::new(std::io::sink())
        } else {
            Box::new(std::io::stderr())
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
