//! Expected values in the vector's own type: a product of integers wraps, and a bitwise
//! operator has no f64 form, so the launcher builds those aggregates as the ranks do, each
//! rank's input converted to the job's type and combined with the operator.

use ftcoll_algos::values::{digest, Dtype, Element, Values};
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::sim::rank_inputs;

use super::{BuiltinJob, Expected};

/// `values` converted to `dtype` (integers truncate and saturate, as a rank converts its
/// input).
pub(super) fn typed(dtype: Dtype, values: &[f64]) -> Values {
    fn cast<T: Element>(xs: &[f64]) -> Vec<T> {
        xs.iter().map(|&x| T::from_f64(x)).collect()
    }
    match dtype {
        Dtype::F32 => Values::F32(cast(values)),
        Dtype::I32 => Values::I32(cast(values)),
        Dtype::I64 => Values::I64(cast(values)),
        Dtype::U32 => Values::U32(cast(values)),
        Dtype::U64 => Values::U64(cast(values)),
        Dtype::F64 | Dtype::Empty | Dtype::RankIds => Values::F64(values.to_vec()),
    }
}

/// The digest of `values` converted to `dtype`, as a rank digests its result.
pub(super) fn digest_as(dtype: Dtype, values: &[f64]) -> u64 {
    digest(typed(dtype, values).as_ref())
}

/// Whether the job's expected value is built in its own type ([`integer_aggregate`]): a
/// product or a bitwise operator over integer vectors. Every such aggregate is exact.
pub(super) fn judged_in_its_type(job: &BuiltinJob) -> bool {
    !job.dtype.is_float()
        && matches!(
            job.op,
            ReduceOp::Prod | ReduceOp::BitAnd | ReduceOp::BitOr | ReduceOp::BitXor
        )
        && job.expected == Expected::Aggregate
}

/// The failure-free aggregate of `n` ranks' inputs in the job's type, built one input at a
/// time, where [`judged_in_its_type`]; `None` elsewhere (judged in f64).
pub(super) fn integer_aggregate(job: &BuiltinJob, n: u32) -> Option<Values> {
    if !judged_in_its_type(job) {
        return None;
    }
    let mut acc = typed(job.dtype, &rank_inputs(job.input, 0, job.len, job.seed));
    for rank in 1..n {
        let x = typed(job.dtype, &rank_inputs(job.input, rank, job.len, job.seed));
        // Same type and length by construction.
        acc.combine(job.op, x.as_ref()).ok()?;
    }
    Some(acc)
}

/// The aggregate as f64, as a rank reports its sample.
pub(super) fn as_f64(values: &Values) -> Vec<f64> {
    let mut out = Vec::with_capacity(values.len());
    values.as_ref().push_as_f64(&mut out);
    out
}
