//! What a real job did, and how it is printed and written.

use ftcoll_algos::values::{digest, Dtype};
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::control::REPORT_SAMPLE_ELEMS;
use ftcoll_runtime::control::{FailureCause, OpReport};
use ftcoll_runtime::sim::oracle::max_relative_error;
use ftcoll_runtime::sim::{exact_aggregate, generate_inputs, rank_inputs, InputKind};
use ftcoll_runtime::transport::TransportKind;
use serde::Serialize;

mod limits;
mod typed;
mod verdict;

use limits::{max_streamed_failures, MAX_ENUMERATED_FAILURES};
use typed::{as_f64, digest_as, integer_aggregate};
use verdict::{exact_inputs, rounding_bound, unfinished_operations, verdict, Judged};

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
    /// It exited with a non-zero status of its own, not killed: it ended in an error it knew
    /// of, and its failed operations count like a survivor's.
    pub gave_up: bool,
}

/// Everything the launcher observed.
#[derive(Debug)]
pub struct LiveOutcome {
    /// Ranks.
    pub n: u32,
    /// Transport.
    pub transport: TransportKind,
    /// Who started the ranks: `local` (the launcher), `ssh` or `srun` (node agents).
    pub launch: &'static str,
    /// Hosts the ranks ran on.
    pub hosts: u32,
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
    launch: &'static str,
    hosts: u32,
    seed: u64,
    ops: u64,
    ops_ok_all_ranks: u64,
    ops_ok_all_survivors: u64,
    rounds: u32,
    messages: u64,
    max_rel_error: Option<f64>,
    admissible_error: Option<f64>,
    consistent: bool,
    /// Non-uniform jobs: operations at which ranks that failed after returning had returned
    /// another result than the survivors (allowed: see [`BuiltinJob::uniform`]).
    dying_differed: u64,
    exact: bool,
    /// Approximate algorithms: the accuracy asked for, and whether every result reached it.
    eps: Option<f64>,
    within_eps: Option<bool>,
    /// Why a result cannot be trusted (wrong, inconsistent or not within eps), if one cannot;
    /// the job then exits non-zero.
    wrong: Option<String>,
    /// Why operations did not complete at every survivor (an error there: the faults lay
    /// outside what the algorithm tolerates), if some did not; the job then exits non-zero.
    failed_ops: Option<String>,
    /// Why the results of a fault-tolerant job could not be judged against its admissible
    /// aggregates (more failures than the launcher enumerates), if they could not: they were
    /// compared with each other only.
    unjudged: Option<String>,
    median_op_us: Option<f64>,
    /// Per operation the slowest rank's time (the operation is done when its last rank is),
    /// median over operations.
    median_slowest_op_us: Option<f64>,
    wall_s: f64,
    spawn_s: f64,
    wireup_s: Option<f64>,
    peak_mem_total_kb: u64,
    failures: Vec<FailureJson>,
    timed_out: bool,
}

impl LiveJson {
    /// Why the job's result cannot be trusted, if it cannot.
    pub fn wrong(&self) -> Option<&str> {
        self.wrong.as_deref()
    }

    /// Why some operations did not complete at every survivor, if some did not.
    pub fn failed_ops(&self) -> Option<&str> {
        self.failed_ops.as_deref()
    }

    /// Operations completed at every survivor.
    pub fn ops_completed(&self) -> u64 {
        self.ops_ok_all_survivors
    }

    /// Whether every rank returned the same result for each operation, and no operation
    /// completed at some survivors and failed at others.
    pub fn consistent(&self) -> bool {
        self.consistent
    }

    /// Operations at which ranks that failed after returning had decided otherwise than the
    /// survivors (002's non-uniform agreement).
    pub fn dying_differed(&self) -> u64 {
        self.dying_differed
    }
}

/// What the built-in job's results are checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// The aggregate of every rank's input (a failure aborts the operation).
    Aggregate,
    /// Rank 0's input (a broadcast).
    RootInput,
    /// The survivors' aggregate plus the inputs of any subset of the failed ranks, the same at
    /// every rank (001's semantics of a fault-tolerant reduce and allreduce).
    SurvivorsAggregate,
    /// The survivors' aggregate, approximately (gossip: each rank's estimate, within eps),
    /// where a rank that died after some ranks finished may count at those ranks.
    Survivors,
}

/// What the reports of a job showed, before the verdict.
struct Tally {
    worst: Option<f64>,
    worst_admissible: Option<f64>,
    micros: Vec<f64>,
    messages: u64,
    consistent: bool,
    /// The first two ranks that returned different results for one operation, in words.
    disagreement: Option<String>,
    /// Operations whose survivors decided otherwise than ranks that failed after returning.
    dying_differed: u64,
    completed_by_op: std::collections::BTreeMap<u64, u32>,
    /// Of those, the ranks that hold a result (every rank but a reduce's non-roots).
    valued_by_op: std::collections::BTreeMap<u64, u32>,
    aborted_by_op: std::collections::BTreeMap<u64, u32>,
    enumerated: bool,
}

/// The aggregate of a job's inputs, built one rank's input at a time (a job of long vectors:
/// the launcher never holds every input). Plain f64 arithmetic: exact on the integer inputs
/// the verdict judges.
fn streamed_aggregate(job: &BuiltinJob, n: u32) -> Vec<f64> {
    if job.expected == Expected::RootInput {
        return rank_inputs(job.input, 0, job.len, job.seed);
    }
    streamed_aggregate_of(job, (0..n).collect())
}

/// The aggregate over the inputs of `ranks` (at least one), built one input at a time.
fn streamed_aggregate_of(job: &BuiltinJob, ranks: Vec<u32>) -> Vec<f64> {
    let n = ranks.len() as u32;
    let mut acc = rank_inputs(job.input, ranks[0], job.len, job.seed);
    for &rank in &ranks[1..] {
        let x = rank_inputs(job.input, rank, job.len, job.seed);
        let pairs = acc.iter_mut().zip(x);
        match job.op {
            ReduceOp::Min => pairs.for_each(|(a, b)| *a = a.min(b)),
            ReduceOp::Max => pairs.for_each(|(a, b)| *a = a.max(b)),
            ReduceOp::Prod => pairs.for_each(|(a, b)| *a *= b),
            _ => pairs.for_each(|(a, b)| *a += b),
        }
    }
    if job.op == ReduceOp::Average {
        acc.iter_mut().for_each(|a| *a /= f64::from(n.max(1)));
    }
    acc
}

/// One result a fault-tolerant job may return.
enum Admissible {
    /// The whole vector.
    Whole(Vec<f64>),
    /// A long vector's digest in the job's type, and its first elements.
    Digest(u64, Vec<f64>),
}

/// Whether rank `r` contributes to the candidate `subset` of the `failed` ranks (every
/// survivor does).
fn included(failed: &[u32], subset: u32, r: u32) -> bool {
    match failed.binary_search(&r) {
        Ok(i) => subset & (1 << i) != 0,
        Err(_) => true,
    }
}

/// The failed ranks of a job, ascending, without repeats.
fn failed_ranks(failures: &[FailureRecord]) -> Vec<u32> {
    let mut failed: Vec<u32> = failures.iter().map(|f| f.rank).collect();
    failed.sort_unstable();
    failed.dedup();
    failed
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
    /// Element type.
    pub dtype: Dtype,
    /// Seed.
    pub seed: u64,
    /// Operations.
    pub ops: u64,
    /// Rounds of one operation.
    pub rounds: u32,
    /// What results are checked against.
    pub expected: Expected,
    /// Approximate algorithms: the accuracy every result must reach.
    pub eps: Option<f64>,
    /// Whether a rank that failed after returning must have returned what the survivors did.
    /// 002's agreement is non-uniform (its footnote 1): when every rank that returned a value
    /// then fails, the survivors may decide another. Such results are compared among the
    /// survivors only; every result, a dying rank's too, must still be admissible.
    pub uniform: bool,
}

impl LiveOutcome {
    /// Total PSS of the job's processes, KiB.
    pub fn total_pss_kb(&self) -> u64 {
        self.pss_kb.iter().sum::<u64>() + self.launcher_pss_kb
    }

    /// Per operation that some rank completed, the slowest such rank's time in microseconds;
    /// the median over operations.
    fn median_slowest_op_us(&self) -> Option<f64> {
        let mut slowest: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
        for report in self.reports.iter().flatten().filter(|r| r.ok) {
            let most = slowest.entry(report.op).or_default();
            *most = (*most).max(report.nanos);
        }
        let mut micros: Vec<f64> = slowest.values().map(|&ns| ns as f64 / 1e3).collect();
        micros.sort_by(f64::total_cmp);
        micros.get(micros.len() / 2).copied()
    }

    /// Checks the built-in job's results against the exact answer and builds the report.
    pub fn builtin_report(&self, job: &BuiltinJob) -> LiveJson {
        // Reports of longer vectors carry a sample and a digest: the expected vector is built
        // one rank's input at a time and compared by digest.
        let sampled = job.len > REPORT_SAMPLE_ELEMS;
        let inputs = if sampled {
            Vec::new()
        } else {
            generate_inputs(job.input, self.n, job.len, job.seed)
        };
        let integer = integer_aggregate(job, self.n);
        let exact = match &integer {
            Some(values) => as_f64(values),
            None if sampled => streamed_aggregate(job, self.n),
            None => self.small_expected(job, &inputs),
        };
        let expected_digest = sampled.then(|| match &integer {
            Some(values) => digest(values.as_ref()),
            None => digest_as(job.dtype, &exact),
        });
        let admissible = if sampled {
            self.admissible_streamed(job)
        } else {
            self.admissible_aggregates(job, &inputs)
        };
        let mut worst: Option<f64> = None;
        let mut worst_admissible: Option<f64> = None;
        let mut micros = Vec::new();
        let mut messages = 0;
        let mut consistent = true;
        // Ranks that completed each operation that anyone reported: work proportional to the
        // reports received, not to the operations requested (a loop may stop early).
        let mut completed_by_op: std::collections::BTreeMap<u64, u32> =
            std::collections::BTreeMap::new();
        let mut valued_by_op = completed_by_op.clone();
        let mut first_value: std::collections::BTreeMap<u64, (&[f64], u64, usize)> =
            std::collections::BTreeMap::new();
        // The first two ranks found to return different results for one operation.
        let mut disagreement: Option<String> = None;
        // Non-uniform jobs: the results of ranks that failed later, compared at the end.
        let mut dying_results: Vec<(u64, &[f64], u64)> = Vec::new();
        let failed = failed_ranks(&self.failures);
        let aborted_by_op = self.aborted_by_op(job, &failed);
        let numbered = self
            .reports
            .iter()
            .enumerate()
            .flat_map(|(rank, reports)| reports.iter().map(move |report| (rank, report)));
        for (rank, report) in numbered {
            messages += report.messages;
            if !report.ok {
                continue;
            }
            *completed_by_op.entry(report.op).or_default() += 1;
            micros.push(report.nanos as f64 / 1e3);
            if report.value.is_empty() {
                continue;
            }
            *valued_by_op.entry(report.op).or_default() += 1;
            let dying = failed.binary_search(&(rank as u32)).is_ok();
            if dying && !job.uniform {
                dying_results.push((report.op, &report.value, report.digest));
            }
            let (value, digest, first_rank) = if dying && !job.uniform {
                (report.value.as_slice(), report.digest, rank)
            } else {
                *first_value
                    .entry(report.op)
                    .or_insert((&report.value, report.digest, rank))
            };
            if (value, digest) != (report.value.as_slice(), report.digest) {
                consistent = false;
                disagreement.get_or_insert_with(|| {
                    let fate = |r: usize| {
                        if failed.binary_search(&(r as u32)).is_ok() {
                            " (failed later)"
                        } else {
                            ""
                        }
                    };
                    format!(
                        "operation {}: rank {first_rank}{} returned {:?}, rank {rank}{} {:?}",
                        report.op,
                        fate(first_rank),
                        &value[..value.len().min(4)],
                        fate(rank),
                        &report.value[..report.value.len().min(4)],
                    )
                });
            }
            let err = match expected_digest {
                Some(want) if report.digest == want && report.len == job.len as u64 => 0.0,
                Some(_) => {
                    let head = &exact[..report.value.len().min(exact.len())];
                    // A digest that differs where the sample agrees: wrong past the sample.
                    let e = max_relative_error(&report.value, head);
                    if e > 0.0 {
                        e
                    } else {
                        f64::MIN_POSITIVE
                    }
                }
                None => max_relative_error(&report.value, &exact),
            };
            worst = Some(worst.map_or(err, |w| w.max(err)));
            if let Some(candidates) = &admissible {
                let nearest = candidates
                    .iter()
                    .map(|c| match c {
                        // A long vector: equal digests, or how far the sample is off (at
                        // least a hair where only the rest differs).
                        Admissible::Digest(want, _) if *want == report.digest => 0.0,
                        Admissible::Digest(_, head) => {
                            max_relative_error(&report.value, head).max(f64::MIN_POSITIVE)
                        }
                        Admissible::Whole(c) => max_relative_error(&report.value, c),
                    })
                    .fold(f64::INFINITY, f64::min);
                worst_admissible = Some(worst_admissible.map_or(nearest, |w| w.max(nearest)));
            }
        }
        let mut dying_differed: Vec<u64> = dying_results
            .into_iter()
            .filter(|(op, value, digest)| {
                first_value
                    .get(op)
                    .is_some_and(|(v, d, _)| (*v, *d) != (*value, *digest))
            })
            .map(|(op, _, _)| op)
            .collect();
        dying_differed.dedup();
        self.finish_report(
            job,
            Tally {
                dying_differed: dying_differed.len() as u64,
                worst,
                worst_admissible,
                micros,
                messages,
                consistent,
                disagreement,
                completed_by_op,
                valued_by_op,
                aborted_by_op,
                enumerated: self.failures.is_empty() || admissible.is_some(),
            },
        )
    }

    /// How many ranks ended each operation in an error: with completions elsewhere, the ranks
    /// disagree on the operation's outcome. A survivor's error counts, and so does that of a
    /// rank that gave up (exited with an error of its own rather than being killed): it
    /// counts at the first operation it did not complete, whether or not it reported it. Only
    /// a killed rank's silence is a crash the algorithm may tolerate.
    fn aborted_by_op(
        &self,
        job: &BuiltinJob,
        failed: &[u32],
    ) -> std::collections::BTreeMap<u64, u32> {
        let mut aborted_by_op: std::collections::BTreeMap<u64, u32> =
            std::collections::BTreeMap::new();
        for (rank, reports) in self.reports.iter().enumerate() {
            let survivor = failed.binary_search(&(rank as u32)).is_err();
            for report in reports.iter().filter(|r| !r.ok && survivor) {
                *aborted_by_op.entry(report.op).or_default() += 1;
            }
        }
        let mut gave_up: Vec<u32> = self
            .failures
            .iter()
            .filter(|f| f.gave_up)
            .map(|f| f.rank)
            .collect();
        gave_up.sort_unstable();
        gave_up.dedup();
        for rank in gave_up {
            let reports = self
                .reports
                .get(rank as usize)
                .map_or(&[][..], Vec::as_slice);
            let completed: std::collections::BTreeSet<u64> =
                reports.iter().filter(|r| r.ok).map(|r| r.op).collect();
            // At most one more step than it completed operations.
            let first_unfinished = (0..job.ops).find(|op| !completed.contains(op));
            if let Some(op) = first_unfinished {
                *aborted_by_op.entry(op).or_default() += 1;
            }
        }
        aborted_by_op
    }

    /// The expected result of a job whose every input is at hand.
    fn small_expected(&self, job: &BuiltinJob, inputs: &[f64]) -> Vec<f64> {
        match job.expected {
            Expected::RootInput => inputs[..job.len].to_vec(),
            Expected::Aggregate | Expected::SurvivorsAggregate => {
                exact_aggregate(job.op, inputs, job.len, |_| true)
            }
            Expected::Survivors => exact_aggregate(job.op, inputs, job.len, |r| {
                !self.failures.iter().any(|f| f.rank == r as u32)
            }),
        }
    }

    /// The JSON report from what the reports showed.
    fn finish_report(&self, job: &BuiltinJob, tally: Tally) -> LiveJson {
        let Tally {
            worst,
            worst_admissible,
            mut micros,
            messages,
            consistent,
            disagreement,
            dying_differed,
            completed_by_op,
            valued_by_op,
            aborted_by_op,
            enumerated,
        } = tally;
        // An operation that some survivors completed with a result and others ended in an
        // error: the ranks disagree on its outcome (a fault outside the algorithm's model,
        // such as a root that died during its broadcast). A reduce's non-roots hold none:
        // their completion says nothing of the root's.
        let mixed = aborted_by_op
            .iter()
            .find(|(op, _)| valued_by_op.get(op).is_some_and(|&c| c > 0));
        let consistent = consistent && mixed.is_none();
        let admissible = enumerated && (self.failures.is_empty() || worst_admissible.is_some());
        let ok_all = completed_by_op
            .values()
            .filter(|&&ranks| ranks == self.n)
            .count() as u64;
        let survivors = self.n.saturating_sub(self.failures.len() as u32);
        let ok_survivors = completed_by_op
            .iter()
            .filter(|&(op, &ranks)| ranks >= survivors && !aborted_by_op.contains_key(op))
            .count() as u64;
        micros.sort_by(f64::total_cmp);
        // Whether every result that came back is an answer the algorithm may give. The job is
        // exact only if, besides, every operation asked for completed at every survivor: a
        // job that stopped early returned no result for the rest (a failed job, not a wrong
        // result: see `failed_ops`).
        let admissible_within = |bound: f64| {
            let within = |w: Option<f64>| w.is_some_and(|w| w <= bound);
            if self.failures.is_empty() || !admissible {
                within(worst)
            } else {
                within(worst_admissible) && (consistent || job.input == InputKind::Uniform)
            }
        };
        let results_admissible = admissible_within(0.0);
        let exact_result = ok_survivors == job.ops && results_admissible;
        let failed_ops = unfinished_operations(
            job.ops,
            ok_survivors,
            survivors,
            &completed_by_op,
            &aborted_by_op,
        );
        let within_eps = job.eps.map(|eps| {
            worst_admissible.or(worst).is_some_and(|w| w <= eps) && ok_survivors == job.ops
        });
        let unjudged = (!enumerated
            && !self.failures.is_empty()
            && job.expected == Expected::SurvivorsAggregate
            && exact_inputs(job))
        .then(|| {
            let most = if job.len > REPORT_SAMPLE_ELEMS {
                max_streamed_failures(self.n, job.len)
            } else {
                MAX_ENUMERATED_FAILURES
            };
            format!(
                "{} ranks failed, more than the {most} whose admissible aggregates the launcher builds for vectors of {} elements; the survivors' results were compared with each other only",
                self.failures.len(),
                job.len
            )
        });
        let wrong = verdict(
            job,
            Judged {
                worst,
                admissible: admissible_within(rounding_bound(job, self.n)),
                consistent,
                disagreement,
                beyond_eps: job
                    .eps
                    .is_some_and(|eps| worst_admissible.or(worst).is_some_and(|w| w > eps)),
                enumerated,
            },
        );
        LiveJson {
            schema_version: 1,
            n: self.n,
            algo: job.algo.clone(),
            op: job.op.name().to_string(),
            transport: self.transport.name(),
            launch: self.launch,
            hosts: self.hosts,
            seed: job.seed,
            ops: job.ops,
            ops_ok_all_ranks: ok_all,
            ops_ok_all_survivors: ok_survivors,
            rounds: job.rounds,
            messages,
            max_rel_error: worst,
            admissible_error: worst_admissible,
            consistent,
            dying_differed,
            exact: exact_result,
            eps: job.eps,
            // With failures a rank may have finished before a rank died (its result then counts
            // that rank) or after (it does not): each result must be within eps of one of the
            // admissible aggregates.
            within_eps,
            wrong,
            failed_ops,
            unjudged,
            median_op_us: micros.get(micros.len() / 2).copied(),
            median_slowest_op_us: self.median_slowest_op_us(),
            wall_s: self.wall_s,
            spawn_s: self.spawn_s,
            wireup_s: self.wireup_s,
            peak_mem_total_kb: self.total_pss_kb(),
            failures: self.failures_json(),
            timed_out: self.timed_out,
        }
    }

    /// For fault-tolerant jobs with failures: every aggregate a correct result may equal.
    fn admissible_aggregates(&self, job: &BuiltinJob, inputs: &[f64]) -> Option<Vec<Admissible>> {
        let failed = self.enumerable_failures(job, MAX_ENUMERATED_FAILURES)?;
        let subsets = (0u32..1 << failed.len()).map(|subset| {
            Admissible::Whole(exact_aggregate(job.op, inputs, job.len, |r| {
                included(&failed, subset, r as u32)
            }))
        });
        Some(subsets.collect())
    }

    /// [`LiveOutcome::admissible_aggregates`] for long vectors: each candidate built one input
    /// at a time, kept as its digest and its first elements.
    fn admissible_streamed(&self, job: &BuiltinJob) -> Option<Vec<Admissible>> {
        let failed = self.enumerable_failures(job, max_streamed_failures(self.n, job.len))?;
        let subsets = (0u32..1 << failed.len()).filter_map(|subset| {
            let ranks: Vec<u32> = (0..self.n)
                .filter(|&r| included(&failed, subset, r))
                .collect();
            if ranks.is_empty() {
                return None;
            }
            let aggregate = streamed_aggregate_of(job, ranks);
            let head = aggregate[..aggregate.len().min(REPORT_SAMPLE_ELEMS)].to_vec();
            Some(Admissible::Digest(digest_as(job.dtype, &aggregate), head))
        });
        Some(subsets.collect())
    }

    /// The failed ranks whose inputs a fault-tolerant result may hold or not, where there are
    /// any and at most `most`.
    fn enumerable_failures(&self, job: &BuiltinJob, most: usize) -> Option<Vec<u32>> {
        let failed = failed_ranks(&self.failures);
        let tolerant = matches!(
            job.expected,
            Expected::SurvivorsAggregate | Expected::Survivors
        );
        (tolerant && !failed.is_empty() && failed.len() <= most).then_some(failed)
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
        // With failures, what counts is completion at every survivor; a rank that died before
        // the first operation ended makes "at every rank" zero whatever the survivors did.
        if report.ops_ok_all_survivors == report.ops_ok_all_ranks {
            println!(
                "  operations        {} ({} completed at every rank)",
                report.ops, report.ops_ok_all_ranks
            );
        } else {
            println!(
                "  operations        {} ({} completed at every survivor, {} at every rank)",
                report.ops, report.ops_ok_all_survivors, report.ops_ok_all_ranks
            );
        }
        match (report.admissible_error, report.consistent) {
            (Some(0.0), true) => println!(
                "  result            exact: the survivors' aggregate, failed ranks counted at every rank or at none"
            ),
            (Some(e), consistent) => println!(
                "  result            {e:.3e} from the nearest admissible aggregate{}",
                if consistent { "" } else { "; ranks disagree" }
            ),
            (None, _) => {
                if let Some(why) = &report.unjudged {
                    println!("  result            not judged: {why}");
                }
            }
        }
        match report.max_rel_error {
            _ if report.admissible_error.is_some() => {}
            Some(0.0) => println!("  result            exact (max rel. error 0)"),
            Some(e) => println!("  max rel. error    {e:.3e}"),
            None => println!("  result            none (no rank completed an operation)"),
        }
        if let (Some(eps), Some(within)) = (report.eps, report.within_eps) {
            println!(
                "  accuracy          {} eps = {eps:.0e} at every survivor (the survivors' aggregate)",
                if within { "within" } else { "NOT within" }
            );
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

#[cfg(test)]
mod tests;
