//! 000 Fig. 12: HPFLC against approximate recursive doubling (ARDB), both judged at the root:
//! iterations (median, min, max) against N.

use ftcoll_runtime::job::Algorithm;

use super::{
    curve_rows, eps_label, iterations_chart, log2_series, median_series, print_curve_table, sizes,
    sweep, Curve, CURVE_HEADER, TAG_FIG12,
};
use crate::experiments::svg::render;
use crate::experiments::{size_label, Ctx};

/// 000 Fig. 12: HPFLC against ARDB, iterations (median, min, max) against N for eps 1e-2 ..
/// 1e-4 (with `--full` also 1e-5). Writes `fig12.csv` and `fig12.svg`.
pub fn fig12(ctx: &Ctx) -> anyhow::Result<()> {
    let sizes = sizes(ctx, 14, 20);
    let runs = ctx.placements(10, 100);
    let eps_set: &[f64] = if ctx.full {
        &[1e-2, 1e-3, 1e-4, 1e-5]
    } else {
        &[1e-2, 1e-3, 1e-4]
    };
    let mut targets = Vec::new();
    for &eps in eps_set {
        targets.push((Algorithm::Hpflc, eps));
        targets.push((Algorithm::Ardb, eps));
    }
    println!(
        "HPFLC vs ARDB, both judged at the root (rank 0 within eps, as 000 Sec. 6.3; f32 for \
         eps >= 1e-3, f64 below), iterations median [min, max] over {runs} runs"
    );
    let curves = sweep(ctx, TAG_FIG12, &targets, &sizes, runs)?;
    print_curve_table(
        &curves,
        &sizes,
        16,
        |c| format!("{} {}", c.algo, eps_label(c.eps)),
        |s| format!("{:.1} [{}, {}]", s.median, s.min, s.max),
    );
    ctx.write_csv("fig12.csv", &CURVE_HEADER, &curve_rows(&curves, runs))?;
    let all: Vec<&Curve> = curves.iter().collect();
    let mut series = median_series(&all, &sizes);
    series.push(log2_series(&sizes));
    let chart = iterations_chart(
        "000 Fig. 12: HPFLC vs ARDB (median iterations)",
        &sizes,
        series,
    );
    ctx.write("fig12.svg", &render(&chart))?;
    for pair in curves.chunks(2) {
        if let [hpflc, ardb] = pair {
            println!("{}", versus_claim(hpflc, ardb));
        }
    }
    Ok(())
}

/// Fig. 12's claim at one eps: where HPFLC's median is below ARDB's.
fn versus_claim(hpflc: &Curve, ardb: &Curve) -> String {
    let claim = format!(
        "claim (eps {}): HPFLC needs fewer iterations than ARDB at low accuracy",
        eps_label(hpflc.eps)
    );
    let mut wins = Vec::new();
    let mut last = None;
    for (n, h) in &hpflc.points {
        if let Some(a) = ardb.at(*n) {
            if h.median < a.median {
                wins.push(size_label(*n));
            }
            last = Some((*n, h.median, a.median));
        }
    }
    let Some((n, h, a)) = last else {
        return format!("{claim}; measured: no points");
    };
    let wins = if wins.is_empty() {
        "at no N".to_string()
    } else {
        format!("at N = {}", wins.join(", "))
    };
    format!(
        "{claim}; measured: at N = {} HPFLC median {h:.1} vs ARDB {a:.1} ({:+.1}); HPFLC below \
         ARDB {wins} of {}..{}",
        size_label(n),
        h - a,
        size_label(hpflc.points.first().map_or(n, |p| p.0)),
        size_label(n)
    )
}
