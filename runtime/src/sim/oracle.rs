//! The oracle: exact aggregates by compensated summation, and relative errors.

/// Neumaier's compensated sum: the error does not grow with the number of terms (it is about one
/// rounding of the result), which makes it a reference for every reduction order.
#[derive(Clone, Copy, Debug, Default)]
pub struct CompensatedSum {
    sum: f64,
    compensation: f64,
}

impl CompensatedSum {
    /// Adds a term.
    #[inline]
    pub fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.compensation += (self.sum - t) + x;
        } else {
            self.compensation += (x - t) + self.sum;
        }
        self.sum = t;
    }

    /// The compensated total.
    pub fn value(&self) -> f64 {
        self.sum + self.compensation
    }
}

/// Compensated sum of a slice.
pub fn compensated_sum(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut acc = CompensatedSum::default();
    values.into_iter().for_each(|x| acc.add(x));
    acc.value()
}

/// Relative error of `estimate` against `exact`, element-wise maximum; absolute where the exact
/// value is zero. A length mismatch or a NaN is an infinite error.
pub fn max_relative_error(estimate: &[f64], exact: &[f64]) -> f64 {
    if estimate.len() != exact.len() {
        return f64::INFINITY;
    }
    estimate
        .iter()
        .zip(exact)
        .map(|(&e, &x)| {
            let diff = (e - x).abs();
            let err = if x == 0.0 { diff } else { diff / x.abs() };
            if err.is_nan() {
                f64::INFINITY
            } else {
                err
            }
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compensated_sum_recovers_small_terms() {
        let terms = [1e16, 1.0, -1e16, 1.0];
        assert_eq!(compensated_sum(terms), 2.0);
        assert_ne!(terms.iter().sum::<f64>(), 2.0);
    }

    #[test]
    fn relative_error_cases() {
        assert_eq!(max_relative_error(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((max_relative_error(&[1.1], &[1.0]) - 0.1).abs() < 1e-12);
        assert_eq!(max_relative_error(&[0.5], &[0.0]), 0.5);
        assert_eq!(max_relative_error(&[f64::NAN], &[1.0]), f64::INFINITY);
        assert_eq!(max_relative_error(&[1.0], &[1.0, 2.0]), f64::INFINITY);
    }
}
