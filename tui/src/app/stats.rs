//! Summaries of one telemetry frame: the error spread the chart plots.

use crate::model::RankState;

/// Spread of the relative errors of the ranks that are not dead, at one moment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorPoint {
    /// When, in seconds since the job started.
    pub at_s: f64,
    /// Largest finite error; NaN when no rank had one.
    pub max: f32,
    /// Median finite error; NaN when no rank had one.
    pub median: f32,
    /// Smallest finite error; NaN when no rank had one.
    pub min: f32,
}

/// The spread of the finite errors of non-dead ranks. Ranks missing from `states` count as
/// alive, errors missing from `errors` as unknown.
pub(crate) fn error_point(at_s: f64, states: &[RankState], errors: &[f32]) -> ErrorPoint {
    let mut finite: Vec<f32> = errors
        .iter()
        .enumerate()
        .filter(|(rank, error)| {
            error.is_finite() && states.get(*rank).copied() != Some(RankState::Dead)
        })
        .map(|(_, error)| *error)
        .collect();
    if finite.is_empty() {
        return ErrorPoint {
            at_s,
            max: f32::NAN,
            median: f32::NAN,
            min: f32::NAN,
        };
    }
    let max = finite.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let min = finite.iter().copied().fold(f32::INFINITY, f32::min);
    // Selection instead of a sort: a frame of a million ranks arrives ten times a second.
    let count = finite.len();
    let middle = count / 2;
    let (below, upper_middle, _) = finite.select_nth_unstable_by(middle, f32::total_cmp);
    let upper_middle = *upper_middle;
    let median = if count.is_multiple_of(2) {
        let lower_middle = below.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        lower_middle / 2.0 + upper_middle / 2.0
    } else {
        upper_middle
    };
    ErrorPoint {
        at_s,
        max,
        median,
        min,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_skips_dead_and_unknown() {
        let states = [
            RankState::Running,
            RankState::Dead,
            RankState::Running,
            RankState::Done,
            RankState::Suspected,
        ];
        let errors = [1e-3, 10.0, f32::NAN, 1e-9, 1e-6];
        let point = error_point(2.0, &states, &errors);
        assert_eq!(point.max, 1e-3);
        assert_eq!(point.median, 1e-6);
        assert_eq!(point.min, 1e-9);
    }

    #[test]
    fn even_count_median_is_the_mean_of_the_middle_two() {
        let point = error_point(0.0, &[], &[4.0, 1.0, 2.0, 8.0]);
        assert_eq!(point.median, 3.0);
    }

    #[test]
    fn nothing_known_gives_nan() {
        let point = error_point(0.0, &[RankState::Dead], &[1.0]);
        assert!(point.max.is_nan() && point.median.is_nan() && point.min.is_nan());
        assert!(error_point(0.0, &[], &[]).min.is_nan());
    }
}
