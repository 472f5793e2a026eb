//! 000 Figs. 4-5 and 6, which share the flip-rate runs (flip rate 1e-4): Figs. 4 and 5 plot
//! iterations against the checksum threshold tau (N = 32 and 64), Fig. 6 the iterations of
//! PFLC and PFCC grouped by the number of flips (N = 64).

use ftcoll_runtime::job::Algorithm;

use super::{
    error_of, gossip_spec, iterations, mean, run, summarize, Summary, FLIP_RATE, N, N_LARGE,
    STREAM_FIG6, STREAM_TAU, TAUS, TAU_PFCC, TAU_PFLC,
};
use crate::experiments::svg::{render, Chart, Kind, Series};
use crate::experiments::{fmt, Ctx};

/// The CSV columns of an iteration summary (`Summary::fields`), in order.
const SUMMARY_FIELDS: [&str; 6] = [
    "runs",
    "median_iterations",
    "q1",
    "q3",
    "whisker_low",
    "whisker_high",
];

/// 000 Figs. 4 and 5: iterations against the checksum threshold tau for PFLC and PFCC at flip
/// rate 1e-4, N = 32 (Fig. 4) and N = 64 (Fig. 5): median and 1.5 IQR whiskers over the runs.
pub fn fig4_5(ctx: &Ctx) -> anyhow::Result<()> {
    let runs = ctx.placements(10, 100);
    let algos = [Algorithm::Pflc, Algorithm::Pfcc];
    let mut points = Vec::new();
    for (figure, n) in [(4, N), (5, N_LARGE)] {
        for algo in algos {
            ctx.progress(&format!(
                "N = {n}, {algo}: {} taus x {runs} runs",
                TAUS.len()
            ));
            let items: Vec<(f64, u32)> = TAUS
                .iter()
                .flat_map(|&tau| (0..runs).map(move |r| (tau, r)))
                .collect();
            let reports = ctx.par_map(&items, |&(tau, r)| {
                let seed = ctx.run_seed(&[STREAM_TAU, u64::from(n), u64::from(r)]);
                rate_run(ctx, algo, n, tau, seed)
            });
            let reports: Vec<RateRun> = reports.into_iter().collect::<anyhow::Result<_>>()?;
            for tau in TAUS {
                let at: Vec<RateRun> = items
                    .iter()
                    .zip(&reports)
                    .filter(|((t, _), _)| *t == tau)
                    .map(|(_, run)| *run)
                    .collect();
                points.push(TauPoint {
                    figure,
                    n,
                    algo,
                    tau,
                    runs: at,
                });
            }
        }
    }
    print_tau_points(&points);
    println!("claim: for PFLC tau > 0.1 is beneficial, for PFCC tau should be very small;");
    for n in [N, N_LARGE] {
        let best: Vec<String> = algos
            .iter()
            .map(|&algo| {
                let mine: Vec<&TauPoint> = points
                    .iter()
                    .filter(|p| p.n == n && p.algo == algo)
                    .collect();
                let line: Vec<String> = mine
                    .iter()
                    .map(|p| format!("{:e}:{}", p.tau, p.summary().median))
                    .collect();
                let best = mine
                    .iter()
                    .min_by(|a, b| a.summary().median.total_cmp(&b.summary().median))
                    .map_or(f64::NAN, |p| p.tau);
                format!(
                    "{} best tau {best:e} (median by tau {})",
                    algo.name().to_uppercase(),
                    line.join(" ")
                )
            })
            .collect();
        println!("measured N = {n}: {}", best.join("; "));
    }
    write_tau_points(ctx, &points, runs)
}

/// 000 Fig. 6: iterations of PFLC (tau 0.5) and PFCC (tau 1e-10) at flip rate 1e-4, N = 64,
/// grouped by the number of flips that occurred.
pub fn fig6(ctx: &Ctx) -> anyhow::Result<()> {
    let runs = ctx.placements(60, 500);
    let algos = [(Algorithm::Pflc, TAU_PFLC), (Algorithm::Pfcc, TAU_PFCC)];
    let mut by_algo: Vec<Vec<RateRun>> = Vec::new();
    for (algo, tau) in algos {
        ctx.progress(&format!("{algo}: {runs} runs"));
        let items: Vec<u32> = (0..runs).collect();
        let reports = ctx.par_map(&items, |&r| {
            let seed = ctx.run_seed(&[STREAM_FIG6, u64::from(r)]);
            rate_run(ctx, algo, N_LARGE, tau, seed)
        });
        by_algo.push(reports.into_iter().collect::<anyhow::Result<_>>()?);
    }
    let most = by_algo.iter().flatten().map(|r| r.flips).max().unwrap_or(0);
    let counts: Vec<u64> = (0..=most).collect();
    let group = |runs: &[RateRun], flips: u64| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.flips == flips)
            .map(|r| f64::from(r.iterations))
            .collect()
    };
    println!(
        "N = {N_LARGE}, flip rate {FLIP_RATE:e}, {runs} runs each; iterations by number of flips"
    );
    println!("flips  PFLC runs  median  q1-q3        PFCC runs  median  q1-q3");
    let mut rows = Vec::new();
    let mut medians: Vec<Vec<Option<f64>>> = vec![Vec::new(); algos.len()];
    for &flips in &counts {
        let mut row = vec![flips.to_string()];
        print!("{flips:>5}");
        for (a, runs) in by_algo.iter().enumerate() {
            let values = group(runs, flips);
            let s = summarize(&values);
            medians[a].push(s.map(|s| s.median));
            match s {
                Some(s) => {
                    print!(
                        "  {:>9} {:>7.1}  {:>5.1}-{:<5.1}",
                        values.len(),
                        s.median,
                        s.q1,
                        s.q3
                    );
                    row.extend([values.len().to_string()].into_iter().chain(s.fields()));
                }
                None => {
                    print!("  {:>9} {:>7} {:>12}", 0, "-", "");
                    row.extend(std::iter::once("0".to_string()).chain(vec![String::new(); 5]));
                }
            }
        }
        println!();
        rows.push(row);
    }
    let describe = |a: usize| -> String {
        counts
            .iter()
            .map(|&c| match medians[a][c as usize] {
                Some(m) => format!("{c}: {m:.0}"),
                None => format!("{c}: -"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "claim: PFLC and PFCC similar for one flip, PFLC's iterations grow strongly from two \
         flips, PFCC's stay flat;"
    );
    println!(
        "measured: median iterations by flips, PFLC {}; PFCC {}",
        describe(0),
        describe(1)
    );
    let mut header = vec!["flips".to_string()];
    for name in ["pflc", "pfcc"] {
        for field in SUMMARY_FIELDS {
            header.push(format!("{name}_{field}"));
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    ctx.write_csv("fig6.csv", &header, &rows)?;
    let mut raw = Vec::new();
    for ((algo, tau), runs) in algos.iter().zip(&by_algo) {
        for run in runs {
            raw.push(run.row(N_LARGE, *algo, *tau));
        }
    }
    ctx.write_csv("fig6_runs.csv", &RateRun::HEADER, &raw)?;
    let chart = Chart {
        title: format!("000 Fig. 6: median iterations by flips, rate {FLIP_RATE:e}, N = {N_LARGE}"),
        x_label: "flips in the run".into(),
        y_label: "median iterations".into(),
        x_ticks: counts.iter().map(u64::to_string).collect(),
        series: algos
            .iter()
            .zip(medians)
            .map(|((algo, tau), values)| Series {
                name: format!("{} (tau {tau:e})", algo.name().to_uppercase()),
                values,
            })
            .collect(),
        kind: Kind::Bars,
        log_y: false,
    };
    ctx.write("fig6.svg", &render(&chart))
}

/// One run at flip rate [`FLIP_RATE`] (Figs. 4-6).
#[derive(Clone, Copy, Debug)]
struct RateRun {
    seed: u64,
    iterations: u32,
    flips: u64,
    error: f64,
    budget: bool,
}

impl RateRun {
    const HEADER: [&'static str; 8] = [
        "n",
        "algo",
        "tau",
        "seed",
        "iterations",
        "flips",
        "max_rel_error",
        "stopped_by_budget",
    ];

    fn row(&self, n: u32, algo: Algorithm, tau: f64) -> Vec<String> {
        vec![
            n.to_string(),
            algo.name().into(),
            format!("{tau:e}"),
            self.seed.to_string(),
            self.iterations.to_string(),
            self.flips.to_string(),
            format!("{:e}", self.error),
            self.budget.to_string(),
        ]
    }
}

/// Runs `algo` with threshold `tau` on `n` ranks at flip rate [`FLIP_RATE`].
fn rate_run(ctx: &Ctx, algo: Algorithm, n: u32, tau: f64, seed: u64) -> anyhow::Result<RateRun> {
    let spec = gossip_spec(algo, n, Some(tau));
    let fault = format!("flip-rate:rank=all,rate={FLIP_RATE}");
    let report = run(ctx, &spec, seed, &[fault], false)?;
    Ok(RateRun {
        seed,
        iterations: iterations(&report)?,
        flips: report.state_flips,
        error: error_of(&report),
        budget: report.stopped_by_budget,
    })
}

/// The runs of one point of Figs. 4-5.
struct TauPoint {
    figure: u32,
    n: u32,
    algo: Algorithm,
    tau: f64,
    runs: Vec<RateRun>,
}

impl TauPoint {
    fn iterations(&self) -> Vec<f64> {
        self.runs.iter().map(|r| f64::from(r.iterations)).collect()
    }

    fn summary(&self) -> Summary {
        summarize(&self.iterations()).unwrap_or_default()
    }

    fn mean_flips(&self) -> f64 {
        let flips: Vec<f64> = self.runs.iter().map(|r| r.flips as f64).collect();
        mean(&flips)
    }

    fn budget_stops(&self) -> usize {
        self.runs.iter().filter(|r| r.budget).count()
    }
}

fn print_tau_points(points: &[TauPoint]) {
    println!(
        "fig  N   algo  tau      median  q1-q3          whiskers       flips/run  budget stops"
    );
    for p in points {
        let s = p.summary();
        println!(
            "{:>3} {:>3} {:<5} {:<8.0e} {:>6.1}  {:>6.1}-{:<6.1}  {:>5.0}-{:<5.0}  {:>9.2}  {}",
            p.figure,
            p.n,
            p.algo.name(),
            p.tau,
            s.median,
            s.q1,
            s.q3,
            s.low,
            s.high,
            p.mean_flips(),
            p.budget_stops()
        );
    }
}

/// Figs. 4-5: the summary CSV, the per-run CSV, and one SVG per figure.
fn write_tau_points(ctx: &Ctx, points: &[TauPoint], runs: u32) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            let mut row = vec![
                p.figure.to_string(),
                p.n.to_string(),
                p.algo.name().into(),
                format!("{:e}", p.tau),
                p.runs.len().to_string(),
            ];
            row.extend(p.summary().fields());
            row.push(fmt(p.mean_flips()));
            row.push(p.budget_stops().to_string());
            row
        })
        .collect();
    let mut header = vec!["figure", "n", "algo", "tau"];
    header.extend(SUMMARY_FIELDS);
    header.extend(["mean_flips", "budget_stops"]);
    ctx.write_csv("fig4_5.csv", &header, &rows)?;
    let raw: Vec<Vec<String>> = points
        .iter()
        .flat_map(|p| p.runs.iter().map(|r| r.row(p.n, p.algo, p.tau)))
        .collect();
    ctx.write_csv("fig4_5_runs.csv", &RateRun::HEADER, &raw)?;
    for (figure, n) in [(4, N), (5, N_LARGE)] {
        let mut series = Vec::new();
        for algo in [Algorithm::Pflc, Algorithm::Pfcc] {
            let mine: Vec<&TauPoint> = points
                .iter()
                .filter(|p| p.figure == figure && p.algo == algo)
                .collect();
            let name = algo.name().to_uppercase();
            for (label, pick) in [
                ("median", (|s: &Summary| s.median) as fn(&Summary) -> f64),
                ("whisker low", |s| s.low),
                ("whisker high", |s| s.high),
            ] {
                series.push(Series {
                    name: format!("{name} {label}"),
                    values: mine.iter().map(|p| Some(pick(&p.summary()))).collect(),
                });
            }
        }
        let chart = Chart {
            title: format!(
                "000 Fig. {figure}: iterations vs tau, flip rate {FLIP_RATE:e}, N = {n}, {runs} runs"
            ),
            x_label: "checksum threshold tau".into(),
            y_label: "iterations (median, 1.5 IQR whiskers)".into(),
            x_ticks: TAUS.iter().map(|t| format!("{t:e}")).collect(),
            series,
            kind: Kind::Lines,
            log_y: false,
        };
        ctx.write(&format!("fig{figure}.svg"), &render(&chart))?;
    }
    Ok(())
}
