//! What a real job did, and how it is printed and written.

use ftcoll_algos::ReduceOp;
use ftcoll_runtime::control::{FailureCause, OpReport};
use ftcoll_runtime::sim::oracle::max_relative_error;
use ftcoll_runtime::sim::{exact_aggregate, generate_inputs, InputKind};
use ftcoll_runtime::transport::TransportKind;
use serde::Serialize;

/// One failure of a real job.
#[derive(Clone, Debug)]
pub struct FailureRecord {
    /// The rank.
    pub rank: u32,
    /// How the launcher learned it.
    pub cause: FailureCause,
    /// What happened, in words.
    pub how: String,
    /// Seconds since the launch.
    pub at_s: f64,
}

/// Everything the launcher observed.
#[derive(Debug)]
pub struct LiveOutcome {
    /// Ranks.
    pub n: u32,
    /// Transport.
    pub transport: TransportKind,
    /// Seconds from launch to the last exit.
    pub wall_s: f64,
    /// Seconds to start every process.
    pub spawn_s: f64,
    /// Seconds from launch until every rank registered (None if some never did).
    pub wireup_s: Option<f64>,
    /// Failures, in order.
    pub failures: Vec<FailureRecord>,
    /// Operation reports per rank.
    pub reports: Vec<Vec<OpReport>>,
    /// Benchmark timings per rank (ns per operation).
    pub timings: Vec<Vec<u64>>,
    /// PSS per rank at its end, KiB.
    pub pss_kb: Vec<u64>,
    /// The launcher's own PSS, KiB.
    pub launcher_pss_kb: u64,
    /// The job hit its time limit.
    pub timed_out: bool,
    /// Ranks that never said they finished.
    pub unfinished: u32,
}

/// A failure in the JSON report.
#[derive(Debug, Serialize)]
pub struct FailureJson {
    rank: u32,
    detected_by: &'static str,
    how: String,
    cause: &'static str,
    at_s: f64,
}

/// The `--json` report of a real run: the simulator's keys where they mean the same, plus the
/// runtime's.
#[derive(Debug, Serialize)]
pub struct LiveJson {
    schema_version: u32,
    n: u32,
    algo: String,
    op: String,
    transport: &'static str,
    seed: u64,
    ops: u64,
    ops_ok_all_ranks: u64,
    rounds: u32,
    messages: u64,
    max_rel_error: Option<f64>,
    exact: bool,
    median_op_us: Option<f64>,
    wall_s: f64,
    spawn_s: f64,
    wireup_s: Option<f64>,
    peak_mem_total_kb: u64,
    failures: Vec<FailureJson>,
    timed_out: bool,
}

/// The built-in job's parameters, for checking results.
pub struct BuiltinJob {
    /// Algorithm name.
    pub algo: String,
    /// Operator.
    pub op: ReduceOp,
    /// Inputs.
    pub input: InputKind,
    /// Elements per rank.
    pub len: usize,
    /// Seed.
    pub seed: u64,
    /// Operations.
    pub ops: u64,
    /// Rounds of one operation.
    pub rounds: u32,
}

impl LiveOutcome {
    /// Total PSS of the job's processes, KiB.
    pub fn total_pss_kb(&self) -> u64 {
        self.pss_kb.iter().sum::<u64>() + self.launcher_pss_kb
    }

    /// Checks the built-in job's results against the exact answer and builds the report.
    pub fn builtin_report(&self, job: &BuiltinJob) -> LiveJson {
        let inputs = generate_inputs(job.input, self.n, job.len, job.seed);
        let exact = exact_aggregate(job.op, &inputs, job.len, |_| true);
        let mut worst: Option<f64> = None;
        let mut micros = Vec::new();
        let mut messages = 0;
        // Ranks that completed each operation that anyone reported: work proportional to the
        // reports received, not to the operations requested (a loop may stop early).
        let mut completed_by_op: std::collections::BTreeMap<u64, u32> =
            std::collections::BTreeMap::new();
        for report in self.reports.iter().flatten() {
            messages += report.messages;
            if report.ok {
                *completed_by_op.entry(report.op).or_default() += 1;
                micros.push(report.nanos as f64 / 1e3);
                let err = max_relative_error(&report.value, &exact);
                worst = Some(worst.map_or(err, |w| w.max(err)));
            }
        }
        let ok_all = completed_by_op
            .values()
            .filter(|&&ranks| ranks == self.n)
            .count() as u64;
        micros.sort_by(f64::total_cmp);
        LiveJson {
            schema_version: 1,
            n: self.n,
            algo: job.algo.clone(),
            op: job.op.name().to_string(),
            transport: self.transport.name(),
            seed: job.seed,
            ops: job.ops,
            ops_ok_all_ranks: ok_all,
            rounds: job.rounds,
            messages,
            max_rel_error: worst,
            exact: worst == Some(0.0),
            median_op_us: micros.get(micros.len() / 2).copied(),
            wall_s: self.wall_s,
            spawn_s: self.spawn_s,
            wireup_s: self.wireup_s,
            peak_mem_total_kb: self.total_pss_kb(),
            failures: self.failures_json(),
            timed_out: self.timed_out,
        }
    }

    fn failures_json(&self) -> Vec<FailureJson> {
        self.failures
            .iter()
            .map(|f| FailureJson {
                rank: f.rank,
                detected_by: "launcher",
                how: f.how.clone(),
                cause: f.cause.name(),
                at_s: f.at_s,
            })
            .collect()
    }

    /// Prints the summary of a built-in job.
    pub fn print_builtin(&self, report: &LiveJson) {
        println!(
            "{} {} over {} ranks ({}, seed {})",
            report.algo, report.op, report.n, report.transport, report.seed
        );
        println!(
            "  operations        {} ({} completed at every rank)",
            report.ops, report.ops_ok_all_ranks
        );
        match report.max_rel_error {
            Some(0.0) => println!("  result            exact (max rel. error 0)"),
            Some(e) => println!("  max rel. error    {e:.3e}"),
            None => println!("  result            none (no rank completed an operation)"),
        }
        println!("  messages          {}", report.messages);
        if let Some(us) = report.median_op_us {
            println!("  median op         {us:.1} us");
        }
        println!(
            "  wall              {:.3} s (spawn {:.3} s, launch + wire-up {})",
            report.wall_s,
            report.spawn_s,
            report
                .wireup_s
                .map_or("incomplete".to_string(), |w| format!("{w:.3} s"))
        );
        println!(
            "  memory            {:.1} MiB total PSS",
            report.peak_mem_total_kb as f64 / 1024.0
        );
        self.print_failures();
        if self.unfinished > 0 {
            println!(
                "  unfinished        {} ranks never reported the end of the job",
                self.unfinished
            );
        }
        if self.timed_out {
            println!("  warning: the job hit --timeout-s and was killed");
        }
    }

    /// Prints the failure list.
    pub fn print_failures(&self) {
        if self.failures.is_empty() {
            println!("  failures          none");
        }
        for f in &self.failures {
            println!(
                "  failure           rank {} {} at {:.3} s ({}), survivors told",
                f.rank,
                f.how,
                f.at_s,
                f.cause.name()
            );
        }
    }
}
