//! Colours and number formats shared by the panels.

use ratatui::style::Color;

/// Colour of a relative error by decade: red for no agreement, green near machine precision,
/// dark grey when unknown.
pub fn error_colour(error: f32) -> Color {
    if error.is_nan() {
        return Color::DarkGray;
    }
    let error = error.abs();
    if error >= 1e-1 {
        Color::Red
    } else if error >= 1e-4 {
        Color::Yellow
    } else if error >= 1e-8 {
        Color::Cyan
    } else if error >= 1e-12 {
        Color::LightGreen
    } else {
        Color::Green
    }
}

/// The decades [`error_colour`] distinguishes, for legends: lower bound and label.
pub const ERROR_DECADES: [(f32, &str); 5] = [
    (1e-1, "≥1e-1"),
    (1e-4, "≥1e-4"),
    (1e-8, "≥1e-8"),
    (1e-12, "≥1e-12"),
    (0.0, "<1e-12"),
];

/// Seconds as a short clock: `12.3s`, `4m05s`, `2h07m`.
pub fn format_seconds(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "?".to_string();
    }
    let negative = seconds < 0.0;
    let seconds = seconds.abs();
    let text = if seconds < 60.0 {
        format!("{seconds:.1}s")
    } else if seconds < 3600.0 {
        let whole = seconds as u64;
        format!("{}m{:02}s", whole / 60, whole % 60)
    } else {
        let whole = seconds.min(1e15) as u64;
        format!("{}h{:02}m", whole / 3600, (whole % 3600) / 60)
    };
    if negative {
        format!("-{text}")
    } else {
        text
    }
}

/// A rate with a metric suffix: `950`, `12.3k`, `4.1M`.
pub fn format_rate(rate: f64) -> String {
    if !rate.is_finite() {
        return "?".to_string();
    }
    if rate < 1e3 {
        format!("{rate:.0}")
    } else if rate < 1e6 {
        format!("{:.1}k", rate / 1e3)
    } else if rate < 1e9 {
        format!("{:.1}M", rate / 1e6)
    } else {
        format!("{:.1}G", rate / 1e9)
    }
}

/// A relative error in scientific notation, `?` when unknown.
pub fn format_error(error: f32) -> String {
    if error.is_nan() {
        "?".to_string()
    } else {
        format!("{error:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(format_seconds(12.34), "12.3s");
        assert_eq!(format_seconds(245.0), "4m05s");
        assert_eq!(format_seconds(7620.0), "2h07m");
        assert_eq!(format_seconds(f64::NAN), "?");
        assert_eq!(format_rate(950.0), "950");
        assert_eq!(format_rate(12_345.0), "12.3k");
        assert_eq!(format_error(f32::NAN), "?");
        assert_eq!(format_error(3.2e-9), "3.20e-9");
    }

    #[test]
    fn decades() {
        assert_eq!(error_colour(0.5), Color::Red);
        assert_eq!(error_colour(f32::INFINITY), Color::Red);
        assert_eq!(error_colour(1e-3), Color::Yellow);
        assert_eq!(error_colour(1e-5), Color::Cyan);
        assert_eq!(error_colour(1e-9), Color::LightGreen);
        assert_eq!(error_colour(0.0), Color::Green);
        assert_eq!(error_colour(f32::NAN), Color::DarkGray);
    }
}
