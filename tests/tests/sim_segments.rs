//! Fault-tolerant collectives in segments in the simulator: FTCO (004) broadcast, reduce and
//! allreduce, and the corrected reduce (001), over vectors of four to eight segments, one
//! operation per segment, each on 10,000 random crash schedules, with the planted-bug control
//! that joins segments counting different ranks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_runtime::check::segments::{
    check_segments_case, check_segments_seeds, Drawn, SegmentsCase,
};

/// 10,000 FTCO schedules, N up to 24: every survivor ends; a result counts each rank once or
/// not at all, the same in every segment, and holds every survivor; the allreduce's survivors
/// end alike; segments that a crash left counting different ranks end in the typed error.
#[test]
fn ftco_segments_pass_ten_thousand_random_crash_schedules() {
    let summary =
        check_segments_seeds(Drawn::Ftco, (0, 10_000), 24, false).unwrap_or_else(|v| panic!("{v}"));
    eprintln!("{summary:?}");
    assert_eq!(summary.cases, 10_000);
    assert!(summary.crashed_during > 3_000, "{summary:?}");
    // Both endings of a crash during the stream happen: segments that disagree, refused, and
    // a crashed rank counted in every segment.
    assert!(summary.refused_mixed > 100, "{summary:?}");
    assert!(summary.dead_counted > 100, "{summary:?}");
}

/// 10,000 corrected-reduce schedules (f from 0 to 3, up to f crashes): the root's result
/// counts each rank once or not at all in every segment, or the root refuses the segments.
#[test]
fn corrected_reduce_segments_pass_ten_thousand_random_crash_schedules() {
    let summary = check_segments_seeds(Drawn::CorrectedReduce, (0, 10_000), 24, false)
        .unwrap_or_else(|v| panic!("{v}"));
    eprintln!("{summary:?}");
    assert_eq!(summary.cases, 10_000);
    assert!(summary.crashed_during > 1_000, "{summary:?}");
    assert!(summary.refused_mixed > 100, "{summary:?}");
    assert!(summary.dead_counted > 100, "{summary:?}");
}

/// The controls: a shell that joins segments whose contributor sets differ hands over a vector
/// that counts a rank in some elements and not in others, and the checker says so.
#[test]
fn checker_catches_a_shell_that_joins_mixed_segments() {
    for family in [Drawn::Ftco, Drawn::CorrectedReduce] {
        let caught = check_segments_seeds(family, (0, 2_000), 24, true);
        let violation = caught.expect_err("the planted bug went unnoticed");
        eprintln!("{family:?}: {violation}");
        assert!(violation.what.starts_with("Whole vector"), "{violation}");
    }
}

/// Seeds replay exactly.
#[test]
fn a_seed_replays_the_same_trace() {
    for case in [
        SegmentsCase::random_ftco(2626, 24),
        SegmentsCase::random_corrected_reduce(2626, 24),
    ] {
        let a = check_segments_case(&case).unwrap();
        let b = check_segments_case(&case).unwrap();
        assert_eq!(a.report.trace_hash, b.report.trace_hash);
    }
}
