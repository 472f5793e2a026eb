//! `ftcoll-launch bench transport`: 8-byte one-way latency between two rank processes over each
//! network backend, measured through the `Transport` interface, beside the library's own tool on
//! the same transport in the same run: `ucx_perftest -t tag_lat` for UCX, `fi_pingpong` (tagged,
//! RDM) for libfabric. Both sides poll (two processes on a machine with at least two cores).
//!
//! Each case runs as two processes of this binary (`__pingpong`): the server prints its
//! address, the parent passes it to the client, the client prints its own, the parent passes it
//! back to the server. The client then times `iters` round trips after `warmup` untimed ones, in
//! blocks of [`BLOCK`] round trips with one clock read per block (as the tools do: a read per
//! round trip would add two clock reads to every one measured), and prints the median over
//! blocks and the overall mean of the half round trip. The ratio compares like with like: our
//! median with `ucx_perftest`'s median, our mean with `fi_pingpong`'s mean.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ftcoll_algos::Rank;
use ftcoll_runtime::transport::open::{open_network, NetworkOptions};
use ftcoll_runtime::transport::{Transport, TransportKind};
use serde::Serialize;

use super::BenchArgs;

/// Bytes per message, as in the figure.
const MESSAGE_BYTES: usize = 8;
/// A case that takes longer than this has hung.
const CASE_TIMEOUT: Duration = Duration::from_secs(120);
/// Round trips timed together.
const BLOCK: u32 = 100;
/// A reply slower than this means the peer is gone.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// One backend configuration and the library tool that measures the same transport.
struct Case {
    label: &'static str,
    kind: TransportKind,
    /// `UCX_TLS` or the libfabric provider.
    setting: &'static str,
}

const CASES: [Case; 3] = [
    Case {
        label: "ucx (UCX_TLS=tcp)",
        kind: TransportKind::Ucx,
        setting: "tcp",
    },
    Case {
        label: "ofi (provider tcp)",
        kind: TransportKind::Ofi,
        setting: "tcp",
    },
    Case {
        label: "ofi (provider shm)",
        kind: TransportKind::Ofi,
        setting: "shm",
    },
];

/// One row of the report.
#[derive(Debug, Serialize)]
struct Row {
    case: &'static str,
    ftcoll_median_us: Option<f64>,
    ftcoll_mean_us: Option<f64>,
    reference: &'static str,
    reference_us: Option<f64>,
    reference_stat: &'static str,
    /// ftcoll's figure of the same statistic (median or mean) over the reference's (the
    /// target is at most 1.2).
    ratio: Option<f64>,
    note: Option<String>,
}

/// Flags of the hidden `__pingpong` subcommand.
#[derive(Debug, clap::Args)]
pub struct PingPongArgs {
    /// ucx or ofi.
    #[arg(long)]
    pub transport: String,
    /// `UCX_TLS` value or libfabric provider.
    #[arg(long)]
    pub setting: String,
    /// Whether this process answers (server) or times (client).
    #[arg(long)]
    pub client: bool,
    /// Timed round trips.
    #[arg(long, default_value_t = 20000)]
    pub iters: u32,
    /// Untimed round trips first.
    #[arg(long, default_value_t = 2000)]
    pub warmup: u32,
}

/// Runs the benchmark.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if cores < 2 {
        bail!("bench transport needs two cores: both processes poll");
    }
    let mut rows = Vec::new();
    for case in &CASES {
        rows.push(measure_case(case, args));
    }
    println!(
        "bench transport: {MESSAGE_BYTES}-byte one-way latency (half round trip), {} round trips after {} warm-up, median of {} runs",
        args.iters, args.warmup, args.repeat
    );
    println!(
        "  {:<20} {:>14} {:>12}   {:<34} {:>10} {:>7}",
        "case", "ftcoll median", "ftcoll mean", "reference", "reference", "ratio"
    );
    for row in &rows {
        let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2} us"));
        println!(
            "  {:<20} {:>14} {:>12}   {:<34} {:>10} {:>7}{}",
            row.case,
            us(row.ftcoll_median_us),
            us(row.ftcoll_mean_us),
            format!("{} ({})", row.reference, row.reference_stat),
            us(row.reference_us),
            row.ratio.map_or("-".into(), |r| format!("{r:.2}")),
            row.note
                .as_ref()
                .map_or(String::new(), |n| format!("  [{n}]"))
        );
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn measure_case(case: &Case, args: &BenchArgs) -> Row {
    let (reference, reference_stat) = match case.kind {
        TransportKind::Ucx => ("ucx_perftest -t tag_lat", "median"),
        _ => ("fi_pingpong -e rdm -m tagged", "mean"),
    };
    let mut row = Row {
        case: case.label,
        ftcoll_median_us: None,
        ftcoll_mean_us: None,
        reference,
        reference_us: None,
        reference_stat,
        ratio: None,
        note: None,
    };
    if !case.kind.compiled_in() {
        row.note = Some(format!(
            "not compiled in: build with --features {}",
            case.kind.name()
        ));
        return row;
    }
    // Runs alternate between ftcoll and the reference, so that a noisy moment of this shared
    // machine hits both.
    let (mut ours, mut means, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.repeat.max(1) {
        match ftcoll_pingpong(case, args) {
            Ok((median, mean)) => {
                ours.push(median);
                means.push(mean);
            }
            Err(error) => row.note = Some(format!("ftcoll: {error:#}")),
        }
        match reference_pingpong(case, args) {
            Ok(us) => theirs.push(us),
            Err(error) => row.note = Some(format!("reference: {error:#}")),
        }
    }
    let mid = |v: &mut Vec<f64>| (!v.is_empty()).then(|| super::median(v));
    row.ftcoll_median_us = mid(&mut ours);
    row.ftcoll_mean_us = mid(&mut means);
    row.reference_us = mid(&mut theirs);
    let ours = match case.kind {
        TransportKind::Ucx => row.ftcoll_median_us,
        _ => row.ftcoll_mean_us,
    };
    if let (Some(a), Some(b)) = (ours, row.reference_us) {
        row.ratio = Some(a / b);
    }
    row
}

/// One ftcoll run: (median, mean) one-way microseconds.
fn ftcoll_pingpong(case: &Case, args: &BenchArgs) -> anyhow::Result<(f64, f64)> {
    let exe = std::env::current_exe()?;
    let start = |client: bool| -> anyhow::Result<Child> {
        let mut command = Command::new(&exe);
        command
            .args([
                "__pingpong",
                "--transport",
                case.kind.name(),
                "--setting",
                case.setting,
            ])
            .args([
                "--iters",
                &args.iters.to_string(),
                "--warmup",
                &args.warmup.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if client {
            command.arg("--client");
        }
        Ok(command.spawn()?)
    };
    let mut server = Killed(start(false)?);
    let mut client = Killed(start(true)?);
    let server_address = read_line(&mut server.0)?;
    let client_address = read_line(&mut client.0)?;
    writeln!(
        client.0.stdin.as_mut().context("client stdin")?,
        "{server_address}"
    )?;
    writeln!(
        server.0.stdin.as_mut().context("server stdin")?,
        "{client_address}"
    )?;
    let result = read_line(&mut client.0)?;
    let mut numbers = result.split_whitespace().map(str::parse::<f64>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(median)), Some(Ok(mean))) => Ok((median, mean)),
        _ => bail!("the client reported '{result}'"),
    }
}

/// Reaps its child on drop: a run that went well ends by itself (within a grace), one that
/// did not is killed, so a failed case leaves nothing running. What libfabric's shm provider
/// left in /dev/shm for it is removed either way.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        // Bounded by the deadline.
        while Instant::now() < deadline && matches!(self.0.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
        crate::leftovers::remove_provider_shm_files(self.0.id());
    }
}

fn read_line(child: &mut Child) -> anyhow::Result<String> {
    let stdout = child.stdout.as_mut().context("no stdout")?;
    let mut line = String::new();
    // The peer prints one line per step; a dead peer gives EOF.
    BufReader::new(stdout).read_line(&mut line)?;
    if line.trim().is_empty() {
        bail!("the pingpong process ended early (see its stderr)");
    }
    Ok(line.trim().to_string())
}

/// How to run a library's own latency tool: a server, then a client that prints the figure.
struct Tool {
    program: &'static str,
    server_args: Vec<String>,
    client_args: Vec<String>,
    env: Vec<(&'static str, &'static str)>,
}

/// One run of the library's own tool: microseconds one way.
fn reference_pingpong(case: &Case, args: &BenchArgs) -> anyhow::Result<f64> {
    let port = 20000 + (std::process::id() % 20000) as u16;
    let iters = args.iters.to_string();
    let words = |list: &[&str]| list.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let (port, size) = (port.to_string(), MESSAGE_BYTES.to_string());
    let tool = match case.kind {
        TransportKind::Ucx => Tool {
            program: "ucx_perftest",
            server_args: words(&["-p", &port]),
            client_args: words(&[
                "127.0.0.1",
                "-p",
                &port,
                "-t",
                "tag_lat",
                "-s",
                &size,
                "-n",
                &iters,
            ]),
            env: vec![("UCX_TLS", case.setting)],
        },
        _ => {
            let common = [
                "-p",
                case.setting,
                "-e",
                "rdm",
                "-m",
                "tagged",
                "-S",
                &size,
                "-I",
                &iters,
            ];
            Tool {
                program: "fi_pingpong",
                server_args: words(&[&common[..], &["-B", &port]].concat()),
                client_args: words(&[&common[..], &["-P", &port, "127.0.0.1"]].concat()),
                env: Vec::new(),
            }
        }
    };
    let Tool {
        program,
        server_args,
        client_args,
        env,
    } = tool;
    let mut server = Killed(
        Command::new(program)
            .args(&server_args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| {
                format!("{program} is not installed (Debian: ucx-utils / libfabric-bin)")
            })?,
    );
    // The server must listen before the client connects.
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let output = Command::new(program)
        .args(&client_args)
        .envs(env.iter().copied())
        .output()?;
    if started.elapsed() > CASE_TIMEOUT {
        bail!("{program} took longer than {} s", CASE_TIMEOUT.as_secs());
    }
    let _ = server.0.wait();
    let text = String::from_utf8_lossy(&output.stdout);
    let figure = match case.kind {
        // "Final:  iters  50%ile  average  overall ...": the median.
        TransportKind::Ucx => text
            .lines()
            .find(|l| l.trim_start().starts_with("Final:"))
            .and_then(|l| l.split_whitespace().nth(2))
            .and_then(|v| v.parse().ok()),
        // "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec": usec per one-way transfer.
        _ => text
            .lines()
            .find(|l| l.trim_start().starts_with(&MESSAGE_BYTES.to_string()))
            .and_then(|l| l.split_whitespace().nth(6))
            .and_then(|v| v.parse().ok()),
    };
    figure.with_context(|| format!("cannot read {program}'s output: {}", text.trim()))
}

/// The `__pingpong` process: one side of one case.
pub fn pingpong_main(args: &PingPongArgs) -> anyhow::Result<()> {
    let kind = TransportKind::parse(&args.transport)?;
    let me = Rank(u32::from(args.client));
    let peer = Rank(1 - me.0);
    let peer_address: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
    let lookup = std::sync::Arc::clone(&peer_address);
    let resolver = Box::new(move |rank: Rank| {
        lookup
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .filter(|_| rank == peer)
            .ok_or(ftcoll_runtime::transport::TransportError::Resolve {
                rank: rank.0,
                why: "not this benchmark's peer".into(),
            })
    });
    let options = NetworkOptions {
        bind_ip: std::net::Ipv4Addr::LOCALHOST.into(),
        job_token: [7; 32],
        spin: Duration::from_secs(1),
        ofi_provider: Some(args.setting.clone()),
        ucx_tls: Some(args.setting.clone()),
    };
    let mut transport = open_network(kind, me, 2, resolver, &options)?;
    println!("{}", transport.local_address());
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    *peer_address.lock().unwrap_or_else(|p| p.into_inner()) = Some(line.trim().to_string());
    let frame = [0x5au8; MESSAGE_BYTES];
    let blocks = args.iters.div_ceil(BLOCK);
    let total = args.warmup + blocks * BLOCK;
    let mut half_rtts_us = Vec::with_capacity(blocks as usize);
    let mut block_start = Instant::now();
    let mut timed = Duration::ZERO;
    for i in 0..total {
        if args.client {
            if i >= args.warmup && (i - args.warmup).is_multiple_of(BLOCK) {
                block_start = Instant::now();
            }
            transport.send(peer, &frame)?;
            await_frame(&mut transport)?;
            if i >= args.warmup && (i - args.warmup) % BLOCK == BLOCK - 1 {
                let block = block_start.elapsed();
                timed += block;
                half_rtts_us.push(block.as_secs_f64() * 1e6 / f64::from(2 * BLOCK));
            }
        } else {
            await_frame(&mut transport)?;
            transport.send(peer, &frame)?;
        }
    }
    // Let the last reply leave before this process (and its endpoint) goes.
    let drain_until = Instant::now() + Duration::from_millis(200);
    while transport.progress()? > 0 && Instant::now() < drain_until {}
    if args.client {
        let mean = timed.as_secs_f64() * 1e6 / f64::from(2 * BLOCK * blocks.max(1));
        println!("{:.3} {:.3}", super::median(&mut half_rtts_us), mean);
    } else {
        // The client may still be reading its last reply.
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Polls until one frame arrives (bounded by [`REPLY_TIMEOUT`]).
fn await_frame(transport: &mut impl Transport) -> anyhow::Result<()> {
    let deadline = Instant::now() + REPLY_TIMEOUT;
    // The clock is read once per 4096 polls: reading it on every poll would add its own cost
    // to the latency measured (the tools compared against do not).
    for polls in 0u64.. {
        transport.progress()?;
        if transport.poll_recv(1, &mut |_, _| {})? > 0 {
            return Ok(());
        }
        if polls % 4096 == 4095 && Instant::now() > deadline {
            break;
        }
    }
    bail!("no reply within {} s", REPLY_TIMEOUT.as_secs())
}
