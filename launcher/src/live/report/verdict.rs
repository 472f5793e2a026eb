//! The verdict of a built-in job: which operations did not finish, and why a result is
//! wrong.

use ftcoll_algos::values::Dtype;
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
    super::typed::judged_in_its_type(job)
        || (!matches!(job.input, InputKind::Uniform)
            && matches!(job.op, ReduceOp::Sum | ReduceOp::Min | ReduceOp::Max))
}

/// The largest relative error a right result may show, from the expected aggregate the
/// launcher computes in f64 over `n` inputs: 0 where every admissible aggregate is exact
/// (sums, minima and maxima of integers; products and bitwise operators over integer vectors,
/// built in their type); an average of integers rounds where it divides and where it is stored
/// in the vector's type; a float product, and a sum of uniform inputs, all positive, round at
/// each of their n − 1 steps in whatever order an algorithm takes them (the bound is four
/// times the sum of those roundings, and a lost or doubled input, at least about 1/n of the
/// sum, is far above it at f64). Every result is judged against it: a bound of 0 asks for
/// the exact aggregate, the same at every rank.
pub(super) fn rounding_bound(job: &BuiltinJob, n: u32) -> f64 {
    if exact_inputs(job) {
        return 0.0;
    }
    let unit = match job.dtype {
        Dtype::F32 => f64::from(f32::EPSILON),
        _ => f64::EPSILON,
    };
    match (job.input, job.op) {
        (InputKind::Uniform, _) | (_, ReduceOp::Prod) => 4.0 * f64::from(n.max(1)) * unit,
        _ => 4.0 * unit,
    }
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

/// Why a built-in job's result is wrong: an approximate algorithm must be within eps of an
/// admissible aggregate; an exact one must return an admissible aggregate within the job's
/// [`rounding_bound`], identically at every rank where that bound is 0 (sums of uniform
/// inputs may round differently at different ranks, each within the bound).
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
    if !judged.enumerated || judged.admissible {
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
