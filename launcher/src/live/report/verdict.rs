//! The verdict of a built-in job: which operations did not finish, and why a result is
//! wrong.

use ftcoll_algos::ReduceOp;
use ftcoll_runtime::sim::InputKind;

use super::{BuiltinJob, Expected};

/// Why operations did not complete at every survivor: how many, and how the first of them
/// ended (completed at some ranks, an error at others, no report from the rest).
pub(super) fn unfinished_operations(
    ops: u64,
    ok_survivors: u64,
    survivors: u32,
    completed_by_op: &std::collections::BTreeMap<u64, u32>,
    aborted_by_op: &std::collections::BTreeMap<u64, u32>,
) -> Option<String> {
    if ok_survivors >= ops {
        return None;
    }
    if survivors == 0 {
        // Every rank failed: past the last operation any rank completed, nobody was left.
        let first = (0..ops)
            .find(|op| !completed_by_op.contains_key(op) || aborted_by_op.contains_key(op))
            .unwrap_or(0);
        return Some(format!(
            "no rank survived: {} of {ops} operations did not complete (every rank had failed or ended in an error by operation {first})",
            ops - ok_survivors
        ));
    }
    let first = (0..ops)
        .find(|op| {
            completed_by_op.get(op).copied().unwrap_or(0) < survivors
                || aborted_by_op.contains_key(op)
        })
        .unwrap_or(0);
    let completed = completed_by_op.get(&first).copied().unwrap_or(0);
    let aborted = aborted_by_op.get(&first).copied().unwrap_or(0);
    let silent = survivors.saturating_sub(completed + aborted);
    Some(format!(
        "{} of {ops} operations did not complete at every survivor (operation {first}: {completed} completed, {aborted} ended in an error, {silent} never reported it)",
        ops - ok_survivors
    ))
}

/// Whether the job's inputs make every admissible aggregate exact in double precision (sums,
/// minima and maxima of integers), so that a result can be judged equal to one or not.
pub(super) fn exact_inputs(job: &BuiltinJob) -> bool {
    !matches!(job.input, InputKind::Uniform)
        && matches!(job.op, ReduceOp::Sum | ReduceOp::Min | ReduceOp::Max)
}

/// What the results showed, for [`verdict`].
pub(super) struct Judged {
    /// Largest relative error from the failure-free answer, if any result came back.
    pub(super) worst: Option<f64>,
    /// Every result that came back is an aggregate the algorithm may return, the same at
    /// every rank (whether every operation completed is judged apart).
    pub(super) admissible: bool,
    pub(super) consistent: bool,
    /// The first disagreement found, in words.
    pub(super) disagreement: Option<String>,
    /// Approximate algorithms: whether a result that came back is further than eps from
    /// every admissible aggregate (a missing result is a failed operation, not a wrong one).
    pub(super) beyond_eps: bool,
    /// Whether the admissible aggregates could be enumerated (few enough failures).
    pub(super) enumerated: bool,
}

/// Why a built-in job's result is wrong, where its inputs let that be decided: an approximate
/// algorithm must be within eps of an admissible aggregate; an exact one, on inputs whose sums,
/// minima and maxima are exact in double precision, must return an admissible aggregate,
/// identically at every rank. Sums of uniform inputs round differently by algorithm, so they
/// are reported, not judged.
pub(super) fn verdict(job: &BuiltinJob, judged: Judged) -> Option<String> {
    if job.expected == Expected::Survivors {
        return judged.beyond_eps.then(|| {
            format!(
                "a result is not within eps = {:e} of an admissible aggregate",
                job.eps.unwrap_or(0.0)
            )
        });
    }
    let worst = judged.worst?;
    if !exact_inputs(job) || !judged.enumerated || judged.admissible {
        return None;
    }
    Some(if judged.consistent {
        format!("a result differs from every admissible aggregate (max rel. error {worst:.3e})")
    } else {
        match judged.disagreement {
            Some(which) => format!("ranks returned different results for {which}"),
            None => "ranks returned different results for one operation".to_string(),
        }
    })
}
