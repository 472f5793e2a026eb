//! The all-live-ranks oracle: which live ranks are within eps of the target, kept up to date one
//! rank at a time, so that checking "every rank is accurate" after each input costs one estimate,
//! not N.

/// Per-rank relative errors and how many live ranks are still above eps.
#[derive(Clone, Debug)]
pub struct AllLiveOracle {
    eps: f64,
    errors: Vec<f64>,
    dead: Vec<bool>,
    above: u32,
}

impl AllLiveOracle {
    /// `n` ranks, none accurate yet.
    pub fn new(n: u32, eps: f64) -> AllLiveOracle {
        AllLiveOracle {
            eps,
            errors: vec![f64::INFINITY; n as usize],
            dead: vec![false; n as usize],
            above: n,
        }
    }

    fn is_above(&self, error: f64) -> bool {
        // A NaN error is never accurate.
        error.is_nan() || error > self.eps
    }

    /// Records rank `rank`'s current error.
    pub fn update(&mut self, rank: usize, error: f64) {
        if self.dead[rank] {
            return;
        }
        let was = self.is_above(self.errors[rank]);
        let is = self.is_above(error);
        self.errors[rank] = error;
        match (was, is) {
            (true, false) => self.above -= 1,
            (false, true) => self.above += 1,
            _ => {}
        }
    }

    /// Rank `rank` crashed or stopped: it no longer counts.
    pub fn remove(&mut self, rank: usize) {
        if !self.dead[rank] {
            if self.is_above(self.errors[rank]) {
                self.above -= 1;
            }
            self.dead[rank] = true;
        }
    }

    /// Whether every live rank is within eps.
    pub fn satisfied(&self) -> bool {
        self.above == 0 && self.dead.iter().any(|d| !d)
    }

    /// Whether rank `rank` still counts.
    pub fn is_live(&self, rank: usize) -> bool {
        !self.dead[rank]
    }

    /// The largest error over live ranks (infinite if any is NaN).
    pub fn worst(&self) -> f64 {
        self.errors
            .iter()
            .zip(&self.dead)
            .filter(|(_, dead)| !**dead)
            .map(|(e, _)| if e.is_nan() { f64::INFINITY } else { *e })
            .fold(0.0, f64::max)
    }

    /// The median error over live ranks.
    pub fn median(&self) -> f64 {
        let mut live: Vec<f64> = self
            .errors
            .iter()
            .zip(&self.dead)
            .filter(|(_, dead)| !**dead)
            .map(|(e, _)| if e.is_nan() { f64::INFINITY } else { *e })
            .collect();
        if live.is_empty() {
            return f64::INFINITY;
        }
        let mid = live.len() / 2;
        live.select_nth_unstable_by(mid, f64::total_cmp);
        live[mid]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_live_ranks_above_eps() {
        let mut oracle = AllLiveOracle::new(3, 1e-3);
        assert!(!oracle.satisfied());
        oracle.update(0, 1e-4);
        oracle.update(1, 1e-5);
        assert!(!oracle.satisfied());
        oracle.update(2, f64::NAN);
        assert!(!oracle.satisfied(), "NaN is not accurate");
        oracle.remove(2);
        assert!(oracle.satisfied());
        oracle.update(1, 0.5);
        assert!(!oracle.satisfied());
        assert_eq!(oracle.worst(), 0.5);
        oracle.update(1, 0.0);
        assert!(oracle.satisfied());
    }
}
