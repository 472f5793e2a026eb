//! Reproducible per-rank inputs and the exact aggregate the oracle compares against.

use ftcoll_algos::rng::SimRng;
use ftcoll_algos::ReduceOp;

use super::oracle::CompensatedSum;

/// How each rank's input vector is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Uniform on (0, 1): the papers' "uniformly distributed random initial data".
    Uniform,
    /// Integers 0..=1000, so that sums are exact in double precision (for N·1000 < 2^53).
    Integers,
    /// Every element 1.
    Ones,
    /// Every element equals the rank id.
    RankId,
    /// Rank r's input is the unit vector e_r (element r is 1, the others 0; ranks at or past
    /// the length contribute zeros): with `--len N` and a sum, element i of a result counts how
    /// often rank i's value was reduced, so double counting and lost ranks show.
    OneHot,
}

impl InputKind {
    /// Parses the command-line name.
    pub fn parse(name: &str) -> Option<InputKind> {
        Some(match name {
            "uniform" => InputKind::Uniform,
            "int" | "integers" => InputKind::Integers,
            "ones" => InputKind::Ones,
            "rank" => InputKind::RankId,
            "onehot" => InputKind::OneHot,
            _ => return None,
        })
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            InputKind::Uniform => "uniform",
            InputKind::Integers => "int",
            InputKind::Ones => "ones",
            InputKind::RankId => "rank",
            InputKind::OneHot => "onehot",
        }
    }
}

/// Stream id for input draws, kept apart from fault and protocol streams of the same seed.
const INPUT_STREAM: u64 = 0x1A9B_0000_0000_0000;

/// The `len` input elements of one rank: a function of (seed, rank) only, so a real rank draws
/// its own input and the launcher reproduces all of them for the oracle.
pub fn rank_inputs(kind: InputKind, rank: u32, len: usize, seed: u64) -> Vec<f64> {
    let mut rng = SimRng::for_stream(seed, INPUT_STREAM ^ u64::from(rank));
    match kind {
        InputKind::Uniform => (0..len).map(|_| rng.next_open01()).collect(),
        InputKind::Integers => (0..len).map(|_| rng.below(1001) as f64).collect(),
        InputKind::Ones => vec![1.0; len],
        InputKind::RankId => vec![f64::from(rank); len],
        InputKind::OneHot => (0..len)
            .map(|i| if i == rank as usize { 1.0 } else { 0.0 })
            .collect(),
    }
}

/// The `len` input elements of every rank, rank-major: rank r owns `[r*len, (r+1)*len)`.
pub fn generate_inputs(kind: InputKind, n: u32, len: usize, seed: u64) -> Vec<f64> {
    let mut inputs = Vec::with_capacity(n as usize * len);
    for rank in 0..n {
        inputs.extend(rank_inputs(kind, rank, len, seed));
    }
    inputs
}

/// The exact aggregate of `inputs` (rank-major, `len` per rank) over the ranks for which
/// `included` is true: compensated sums for sum and average, exact for min and max, products
/// in rank order.
pub fn exact_aggregate(
    op: ReduceOp,
    inputs: &[f64],
    len: usize,
    included: impl Fn(usize) -> bool,
) -> Vec<f64> {
    let ranks = inputs.len().checked_div(len).unwrap_or(0);
    let members = || (0..ranks).filter(|&r| included(r));
    (0..len)
        .map(|e| {
            let column = members().map(|r| inputs[r * len + e]);
            match op {
                ReduceOp::Min => column.fold(f64::INFINITY, f64::min),
                ReduceOp::Max => column.fold(f64::NEG_INFINITY, f64::max),
                ReduceOp::Prod => column.product(),
                ReduceOp::Average => {
                    let mut acc = CompensatedSum::default();
                    let mut count = 0usize;
                    column.for_each(|x| {
                        acc.add(x);
                        count += 1;
                    });
                    acc.value() / count.max(1) as f64
                }
                _ => {
                    let mut acc = CompensatedSum::default();
                    column.for_each(|x| acc.add(x));
                    acc.value()
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_reproducible_per_rank() {
        let a = generate_inputs(InputKind::Uniform, 10, 3, 42);
        let b = generate_inputs(InputKind::Uniform, 20, 3, 42);
        assert_eq!(a[..], b[..30]);
        assert_ne!(a, generate_inputs(InputKind::Uniform, 10, 3, 43));
        assert!(a.iter().all(|&x| x > 0.0 && x < 1.0));
    }

    #[test]
    fn one_hot_inputs_are_unit_vectors() {
        let inputs = generate_inputs(InputKind::OneHot, 3, 3, 7);
        assert_eq!(inputs, [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(InputKind::parse("onehot"), Some(InputKind::OneHot));
        assert_eq!(InputKind::OneHot.name(), "onehot");
    }

    #[test]
    fn aggregates() {
        let inputs = [1.0, 10.0, 2.0, 20.0, 3.0, 30.0];
        assert_eq!(
            exact_aggregate(ReduceOp::Sum, &inputs, 2, |_| true),
            [6.0, 60.0]
        );
        assert_eq!(
            exact_aggregate(ReduceOp::Sum, &inputs, 2, |r| r != 1),
            [4.0, 40.0]
        );
        assert_eq!(
            exact_aggregate(ReduceOp::Average, &inputs, 2, |_| true),
            [2.0, 20.0]
        );
        assert_eq!(
            exact_aggregate(ReduceOp::Max, &inputs, 2, |_| true),
            [3.0, 30.0]
        );
    }
}
