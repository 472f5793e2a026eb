//! What each rank's estimate should be, for the console's per-rank error.
//!
//! The launcher draws every rank's input of an operation the way the rank does (same seed), and
//! keeps two aggregates of element 0: over the ranks alive when the operation started, and over
//! those still alive. A fault-tolerant collective may end anywhere between (a crashed rank's
//! input counted or not), so a rank's error is its distance to the nearer one.

use ftcoll_algos::ReduceOp;
use ftcoll_runtime::sim::{exact_aggregate, rank_inputs, InputKind};

/// The exact answers of one operation.
#[derive(Clone, Debug)]
pub struct Reference {
    op: ReduceOp,
    /// Element 0 of each rank's input.
    inputs: Vec<f64>,
    /// Ranks alive when the operation started.
    started: Vec<bool>,
    /// Aggregate over `started`.
    all: f64,
    /// Aggregate over the ranks of `started` still alive.
    survivors: f64,
    /// Ranks of `started` that died since.
    lost: usize,
}

impl Reference {
    /// The operation whose inputs come from `seed`, among the ranks `alive`.
    pub fn new(op: ReduceOp, input: InputKind, len: usize, seed: u64, alive: &[bool]) -> Reference {
        let inputs: Vec<f64> = (0..alive.len() as u32)
            .map(|r| {
                rank_inputs(input, r, len.max(1), seed)
                    .first()
                    .copied()
                    .unwrap_or(0.0)
            })
            .collect();
        let all = aggregate(op, &inputs, alive);
        Reference {
            op,
            inputs,
            started: alive.to_vec(),
            all,
            survivors: all,
            lost: 0,
        }
    }

    /// Takes note of who is alive now.
    pub fn update(&mut self, alive: &[bool]) {
        let members: Vec<bool> = self
            .started
            .iter()
            .zip(alive)
            .map(|(&s, &a)| s && a)
            .collect();
        let lost =
            self.started.iter().filter(|&&s| s).count() - members.iter().filter(|&&m| m).count();
        if lost != self.lost {
            self.lost = lost;
            self.survivors = aggregate(self.op, &self.inputs, &members);
        }
    }

    /// Relative error of `estimate` against the nearer admissible answer (NaN if unknown).
    pub fn error(&self, estimate: f64) -> f64 {
        if !estimate.is_finite() {
            return f64::NAN;
        }
        relative(estimate, self.all).min(relative(estimate, self.survivors))
    }

    /// The answer over the ranks that started the operation.
    #[cfg(test)]
    pub fn exact(&self) -> f64 {
        self.all
    }
}

fn aggregate(op: ReduceOp, inputs: &[f64], members: &[bool]) -> f64 {
    exact_aggregate(op, inputs, 1, |r| members.get(r).copied().unwrap_or(false))
        .first()
        .copied()
        .unwrap_or(f64::NAN)
}

fn relative(estimate: f64, exact: f64) -> f64 {
    let diff = (estimate - exact).abs();
    if exact == 0.0 {
        diff
    } else {
        diff / exact.abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_admits_both_answers() {
        let alive = vec![true; 4];
        let mut reference = Reference::new(ReduceOp::Sum, InputKind::RankId, 1, 1, &alive);
        assert_eq!(reference.exact(), 6.0);
        assert_eq!(reference.error(6.0), 0.0);
        assert!((reference.error(3.0) - 0.5).abs() < 1e-15);
        reference.update(&[true, true, true, false]);
        assert_eq!(reference.error(3.0), 0.0, "rank 3's input dropped");
        assert_eq!(reference.error(6.0), 0.0, "or counted");
        assert!(reference.error(f64::NAN).is_nan());
    }

    #[test]
    fn ranks_dead_before_the_start_never_count() {
        let mut reference =
            Reference::new(ReduceOp::Sum, InputKind::RankId, 1, 1, &[true, false, true]);
        assert_eq!(reference.exact(), 2.0);
        reference.update(&[true, false, true]);
        assert_eq!(reference.error(2.0), 0.0);
    }
}
