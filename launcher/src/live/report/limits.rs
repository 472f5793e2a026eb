//! How many failures the launcher enumerates the admissible results of.

/// Most failures for which the admissible aggregates are enumerated.
pub(super) const MAX_ENUMERATED_FAILURES: usize = 10;
/// Input elements the launcher generates to build the admissible aggregates of a long vector
/// (each candidate is a pass over the inputs it holds): about a second of work.
const STREAMED_BUDGET_ELEMS: u64 = 1 << 28;
/// Failures whose admissible aggregates of long vectors are built whatever the budget.
const MIN_STREAMED_FAILURES: usize = 3;

/// Most failures for which the admissible aggregates of a long vector of `len` elements over
/// `n` ranks are built: 2^k candidates of up to n inputs each within the budget, at least 3,
/// at most as for short vectors.
pub(super) fn max_streamed_failures(n: u32, len: usize) -> usize {
    let per_candidate = u64::from(n.max(1)).saturating_mul(len.max(1) as u64);
    let affordable = (STREAMED_BUDGET_ELEMS / per_candidate).max(1);
    let k = affordable.ilog2() as usize;
    k.clamp(MIN_STREAMED_FAILURES, MAX_ENUMERATED_FAILURES)
}
