//! 000 Fig. 11: HPS iterations at 16K to 128K ranks for eps 1e-2 .. 1e-5, judged at the root as
//! 000 Sec. 6.3 does on Vulcan, as the mean and its standard error over the runs.

use ftcoll_runtime::job::Algorithm;

use super::{
    curve_rows, eps_label, print_curve_table, sizes, sweep, Curve, CURVE_HEADER, TAG_FIG11,
};
use crate::experiments::{size_label, Ctx};

/// Fig. 11's accuracy targets.
const FIG11_EPS: [f64; 4] = [1e-2, 1e-3, 1e-4, 1e-5];
/// Fig. 11's smallest N (16K).
const FIG11_SMALLEST: u32 = 1 << 14;

/// 000 Fig. 11: HPS iterations, mean ± standard error over the runs, at N = 16K and 32K (with
/// `--full` up to 128K and 50 runs a point, as the paper). Writes `fig11.csv`.
pub fn fig11(ctx: &Ctx) -> anyhow::Result<()> {
    let all = sizes(ctx, 15, 17);
    let mut sizes: Vec<u32> = all
        .iter()
        .copied()
        .filter(|&n| n >= FIG11_SMALLEST)
        .collect();
    if sizes.is_empty() {
        // `--max-ranks` below 16K: the largest size allowed.
        sizes.extend(all.last());
    }
    let runs = ctx.placements(10, 50);
    let targets: Vec<(Algorithm, f64)> = FIG11_EPS.iter().map(|&e| (Algorithm::Hps, e)).collect();
    println!(
        "HPS judged at the root (rank 0 within eps, as 000 Sec. 6.3; f32 for eps >= 1e-3, f64 \
         below), iterations mean ± standard error over {runs} runs; each run draws its own \
         inputs and permutations (000 keeps the inputs and varies the permutations)"
    );
    let curves = sweep(ctx, TAG_FIG11, &targets, &sizes, runs)?;
    print_curve_table(
        &curves,
        &sizes,
        14,
        |c| format!("{} {}", c.algo, eps_label(c.eps)),
        |s| format!("{:.2} ± {:.2}", s.mean, s.std_error),
    );
    ctx.write_csv("fig11.csv", &CURVE_HEADER, &curve_rows(&curves, runs))?;
    println!("{}", advantage_claim(&curves));
    Ok(())
}

/// Fig. 11's claim: at the largest N, the accuracies at which HPS needs fewer iterations than
/// recursive doubling's log2 N.
fn advantage_claim(curves: &[Curve]) -> String {
    let claim = "claim: at large N HPS needs fewer iterations than log2 N (recursive doubling), \
                 first at low accuracy";
    let Some(&(n, _)) = curves.first().and_then(|c| c.points.last()) else {
        return format!("{claim}; measured: no points");
    };
    let log2 = f64::from(n.ilog2());
    let cells: Vec<String> = curves
        .iter()
        .filter_map(|c| c.at(n).map(|s| (c, s)))
        .map(|(c, s)| {
            let side = if s.mean < log2 {
                "below"
            } else {
                "at or above"
            };
            format!("eps {} {:.2} ({side})", eps_label(c.eps), s.mean)
        })
        .collect();
    format!(
        "{claim}; measured at N = {} (log2 N = {}): {}",
        size_label(n),
        n.ilog2(),
        cells.join(", ")
    )
}
