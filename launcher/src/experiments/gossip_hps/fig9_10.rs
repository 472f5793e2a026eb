//! 000 Figs. 9 and 10 (the same sweep): median HPS iterations against N, at high accuracy
//! (Fig. 9, eps 1e-4 .. 1e-6, f64) and low accuracy (Fig. 10, eps 1e-1 .. 1e-3, f32), beside
//! log2 N.

use ftcoll_runtime::job::Algorithm;

use super::{
    curve_rows, eps_label, iterations_chart, log2_series, median_series, print_curve_table, sizes,
    sweep, Curve, CURVE_HEADER, TAG_FIG9_10,
};
use crate::experiments::svg::render;
use crate::experiments::{size_label, Ctx};

/// Fig. 10's accuracy targets (low accuracy).
const FIG10_EPS: [f64; 3] = [1e-1, 1e-2, 1e-3];
/// Fig. 9's accuracy targets (high accuracy).
const FIG9_EPS: [f64; 3] = [1e-4, 1e-5, 1e-6];

/// 000 Figs. 9-10: median HPS iterations against N, eps 1e-1 .. 1e-3 (Fig. 10, f32) and
/// 1e-4 .. 1e-6 (Fig. 9, f64), beside log2 N. Writes `fig9_10.csv`, `fig9.svg`, `fig10.svg`.
pub fn fig9_10(ctx: &Ctx) -> anyhow::Result<()> {
    let sizes = sizes(ctx, 14, 20);
    let runs = ctx.placements(10, 100);
    let targets: Vec<(Algorithm, f64)> = FIG10_EPS
        .iter()
        .chain(&FIG9_EPS)
        .map(|&eps| (Algorithm::Hps, eps))
        .collect();
    println!(
        "HPS, median iterations of {runs} runs (oracle: every rank within eps; eps >= 1e-3 in f32, \
         eps <= 1e-4 in f64)"
    );
    let curves = sweep(ctx, TAG_FIG9_10, &targets, &sizes, runs)?;
    print_curve_table(
        &curves,
        &sizes,
        11,
        |c| format!("{} {}", eps_label(c.eps), c.precision.label()),
        |s| format!("{:.1}", s.median),
    );
    ctx.write_csv("fig9_10.csv", &CURVE_HEADER, &curve_rows(&curves, runs))?;
    for (file, title, eps_set) in [
        (
            "fig9.svg",
            "000 Fig. 9: HPS, high accuracy (f64)",
            &FIG9_EPS,
        ),
        (
            "fig10.svg",
            "000 Fig. 10: HPS, low accuracy (f32)",
            &FIG10_EPS,
        ),
    ] {
        let chosen: Vec<&Curve> = curves.iter().filter(|c| eps_set.contains(&c.eps)).collect();
        let mut series = median_series(&chosen, &sizes);
        series.push(log2_series(&sizes));
        ctx.write(file, &render(&iterations_chart(title, &sizes, series)))?;
    }
    for curve in &curves {
        println!("{}", growth_claim(curve));
    }
    Ok(())
}

/// Figs. 9-10's claim against one HPS curve: the growth per doubling of N over the upper half of
/// the sizes, and where the median falls below log2 N.
fn growth_claim(curve: &Curve) -> String {
    let claim = format!(
        "claim (HPS, eps {}): iterations grow slower than log2 N (< 1 per doubling of N), fewer \
         than log2 N at low accuracy and large N",
        eps_label(curve.eps)
    );
    let (Some(&(n_mid, mid)), Some(&(n_top, top))) = (
        curve.points.get(curve.points.len() / 2),
        curve.points.last(),
    ) else {
        return format!("{claim}; measured: no points");
    };
    let doublings = f64::from(n_top.ilog2() - n_mid.ilog2());
    let slope = if doublings > 0.0 {
        format!(
            "{:+.2} iterations per doubling over N = {}..{}",
            (top.median - mid.median) / doublings,
            size_label(n_mid),
            size_label(n_top)
        )
    } else {
        "one size only, no growth measured".into()
    };
    let below = curve
        .points
        .iter()
        .find(|(n, s)| s.median < f64::from(n.ilog2()))
        .map_or(
            format!("median >= log2 N up to N = {}", size_label(n_top)),
            |(n, _)| format!("median < log2 N from N = {}", size_label(*n)),
        );
    format!(
        "{claim}; measured: {slope}; median {:.1} vs log2 N = {} at N = {}; {below}",
        top.median,
        n_top.ilog2(),
        size_label(n_top)
    )
}
