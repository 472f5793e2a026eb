//! Value parsers for the flags that name a value of the libraries' vocabulary, used by clap
//! both in the launcher and in the rank processes it starts, so that every flag reaches the
//! code below as a typed value.

use std::time::Duration;

use ftcoll_algos::corrected::{Correction, FailureInfo};
use ftcoll_algos::registry::Algorithm;
use ftcoll_algos::values::Dtype;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::sim::InputKind;

use super::fault::parse_time;
use ftcoll_algos::fault::FaultTime;

/// `--algo NAME`: the registry's algorithm of that name.
pub fn parse_algorithm(name: &str) -> Result<Algorithm, String> {
    Algorithm::from_name(name).ok_or_else(|| {
        format!("unknown algorithm '{name}'; see the table in --help (e.g. --algo rdb)")
    })
}

/// `--op`.
pub fn parse_op(text: &str) -> Result<ReduceOp, String> {
    ReduceOp::parse(text).map_err(|e| e.to_string())
}

/// `--input`.
pub fn parse_input(text: &str) -> Result<InputKind, String> {
    InputKind::parse(text)
        .ok_or_else(|| format!("unknown input '{text}'; use uniform, int, ones or rank"))
}

/// `--failure-info`: `list`, `count` or `bit`.
pub fn parse_failure_info(text: &str) -> Result<FailureInfo, String> {
    FailureInfo::parse(text)
        .ok_or_else(|| format!("unknown --failure-info '{text}'; use list, count or bit"))
}

/// Timed correction's default gap in the simulator, in steps (about three LogP round trips).
pub const TIMED_GAP_STEPS: u64 = 40;
/// Timed correction's default gap on real ranks.
pub const TIMED_GAP_LIVE: Duration = Duration::from_millis(1);

/// `--correction` on real ranks (see [`parse_correction_for`]).
pub fn parse_correction(text: &str) -> Result<Correction, String> {
    parse_correction_for(text, false)
}

/// `--correction`: `checked`, `opportunistic:D` (D >= 1) or `timed[:GAP]`, whose GAP is a
/// number of steps in the simulator (`sim`) and a time with its unit on real ranks.
pub fn parse_correction_for(text: &str, sim: bool) -> Result<Correction, String> {
    use ftcoll_algos::time::Duration as Ticks;
    let usage = || {
        format!(
            "unknown --correction '{text}'; use checked, opportunistic:D with D >= 1, or timed[:GAP]"
        )
    };
    if text == "checked" {
        return Ok(Correction::Checked);
    }
    if let Some(rest) = text.strip_prefix("timed") {
        let gap = match (rest.strip_prefix(':'), sim) {
            (None, _) if !rest.is_empty() => return Err(usage()),
            (None, true) => Ticks(TIMED_GAP_STEPS),
            (None, false) => Ticks(TIMED_GAP_LIVE.as_nanos() as u64),
            (Some(gap), _) => match (parse_time("correction gap", gap), sim) {
                (Ok(FaultTime::Steps(steps)), true) if steps > 0 => Ticks(steps),
                (Ok(FaultTime::Nanos(nanos)), false) if nanos > 0 => Ticks(nanos),
                (_, true) => {
                    return Err(format!(
                        "--correction '{text}': in the simulator the gap is a positive number of steps, e.g. timed:40"
                    ))
                }
                (_, false) => {
                    return Err(format!(
                        "--correction '{text}': on real ranks the gap is a positive time with its unit, e.g. timed:1ms"
                    ))
                }
            },
        };
        return Ok(Correction::Timed { gap });
    }
    text.strip_prefix("opportunistic:")
        .and_then(|d| d.parse::<u32>().ok())
        .filter(|&d| d >= 1)
        .map(|distance| Correction::Opportunistic { distance })
        .ok_or_else(usage)
}

/// A positive wall-clock time with its unit (`100ms`), as real runs take it.
pub fn parse_wall_time(text: &str) -> Result<Duration, String> {
    match parse_time("time", text) {
        Ok(FaultTime::Nanos(ns)) if ns > 0 => Ok(Duration::from_nanos(ns)),
        _ => Err(format!(
            "'{text}': real runs need a positive time with its unit, e.g. 1ms"
        )),
    }
}

/// `--dtype`: the element type of the built-in job's vectors.
pub fn parse_dtype(text: &str) -> Result<Dtype, String> {
    Dtype::NUMERIC
        .into_iter()
        .find(|d| d.name() == text)
        .ok_or_else(|| format!("unknown element type '{text}'; use f64, f32, i32, i64, u32 or u64"))
}

/// `--precision`: `f32` (true) or `f64` (false).
pub fn parse_single_precision(text: &str) -> Result<bool, String> {
    match text {
        "f32" => Ok(true),
        "f64" => Ok(false),
        other => Err(format!("unknown --precision '{other}'; use f32 or f64")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_bad_ones_say_what_to_use() {
        assert_eq!(parse_correction("checked"), Ok(Correction::Checked));
        assert_eq!(
            parse_correction("opportunistic:3"),
            Ok(Correction::Opportunistic { distance: 3 })
        );
        for bad in [
            "opportunistic:0",
            "opportunistic",
            "eager",
            "timedx",
            "timed:0ms",
        ] {
            assert!(parse_correction(bad).is_err(), "{bad}");
        }
        use ftcoll_algos::time::Duration as Ticks;
        let timed = |gap| Ok(Correction::Timed { gap: Ticks(gap) });
        assert_eq!(parse_correction("timed:250us"), timed(250_000));
        assert_eq!(parse_correction("timed"), timed(1_000_000));
        assert_eq!(parse_correction_for("timed:25", true), timed(25));
        assert_eq!(parse_correction_for("timed", true), timed(TIMED_GAP_STEPS));
        // Units where steps are meant, and steps where a time is, say which to use.
        let wrong_unit = parse_correction_for("timed:25us", true).unwrap_err();
        assert!(wrong_unit.contains("number of steps"), "{wrong_unit}");
        let no_unit = parse_correction("timed:25").unwrap_err();
        assert!(no_unit.contains("with its unit"), "{no_unit}");
        assert_eq!(parse_wall_time("5ms"), Ok(Duration::from_millis(5)));
        assert!(parse_wall_time("5").is_err());
        assert!(parse_wall_time("0ms").is_err());
        assert_eq!(parse_single_precision("f32"), Ok(true));
        assert!(parse_single_precision("f16").is_err());
        assert!(parse_input("ints").is_err());
        assert!(parse_failure_info("all").is_err());
        assert!(parse_op("median").is_err());
    }
}
