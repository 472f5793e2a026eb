//! 004 Fig. 9: extra messages per live rank per inactive rank, for the runs of Fig. 8 (same
//! seeds, trees and placements; see [`super::fig8`]). Both counts are given: all messages, and
//! those sent before the last live rank held the result (004 counts about 3 per rank in a
//! fault-free run, which matches the latter: the leaves' last ACKs come after the end).

use super::fig8::{bar_chart, print_points, sweep, write_points, Point};
use super::svg::render;
use super::Ctx;

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> anyhow::Result<()> {
    let points = sweep(ctx, false)?;
    print_points(&points);
    write_points(ctx, "fig9.csv", &points)?;
    let chart = bar_chart(
        &points,
        "004 Fig. 9: FTCO allreduce extra messages per rank per inactive rank",
        "extra messages per live rank per inactive rank",
        Point::extra_messages,
    );
    ctx.write("fig9.svg", &render(&chart))
}
