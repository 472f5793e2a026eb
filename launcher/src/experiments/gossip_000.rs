//! Paper 000's resilience experiments (Sec. 4.4, Figs. 1-6) in the simulator.
//!
//! The setting of 000 Sec. 4.4.1: asynchronous gossip (each rank pushes on its own clock, on
//! average every L + 2o = 12 steps of the LogP model, L = 10, o = 1) on a hypercube of N = 32
//! ranks (64 for Figs. 5 and 6), the average of one uniform (0, 1) input per rank, and the
//! simulator's oracle stop: every rank stops once all are within eps = 1e-14 of the average, or
//! once the first rank has pushed 500 times. "Iterations" are the oracle's stopping round (the
//! most pushes any rank made).
//!
//! Seeds: one seed per run, derived from the base seed (`--seed`) and the run's index, drives the
//! inputs, the schedule, the flipped flow and the random flips. Every algorithm (and every bit
//! position) of a run gets the same seed, so the PF variants follow the same schedule until a
//! fault makes them differ (000: "All algorithms were run with the same sequence of random
//! numbers").
//!
//! - Fig. 1: one run. Bit 56 of the value element of one flow variable (a random rank's flow to a
//!   random hypercube neighbour) flips at step 1800, 150 mean push periods ("after the first
//!   process sent 150 messages"); tau = 1e-11 (Sec. 4.4.1). Max and median error every 12 steps.
//! - Figs. 2 and 3 (the same runs): that flip at each of the 64 bits, 5 runs per bit (`--full`:
//!   100); PS flips its value instead, RDB one of the log2 N messages a random rank sends.
//!   tau_PFLC = 0.5 and tau_PFCC = 1e-10 as Fig. 3's caption says (Sec. 4.4.1 says 1e-11).
//!   Fig. 2: the max over runs of the final max relative error; Fig. 3: the mean messages per rank
//!   against PS without a flip.
//! - Figs. 4 and 5: flip rate 1e-4 (`flip-rate`: after each message a rank sends, with this
//!   probability one random bit of a random element of one of its flows flips), tau from 1e-14 to
//!   1, N = 32 and 64, 10 runs a point (`--full`: 100): median and Tukey whiskers (the most
//!   extreme runs within 1.5 IQR of the quartiles) of the iterations.
//! - Fig. 6: flip rate 1e-4, N = 64, 60 runs (`--full`: 500) of PFLC (tau 0.5) and PFCC
//!   (tau 1e-10): the iterations grouped by the number of flips that hit a flow.
//!
//! PFCC runs as 000 Alg. 5 prints it (no recomputed estimate after a detected corruption, see
//! `ftcoll_algos::gossip`). Each experiment prints its table and a "claim / measured" line, and
//! writes CSV files and an SVG plot.

use std::sync::atomic::Ordering;

use anyhow::{anyhow, bail, Context};
use ftcoll_algos::rng::SimRng;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::faults::FaultSpec;
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{SimConfig, SimReport};

use super::svg::{render, Chart, Kind, Series};
use super::{fmt, Ctx};

/// Ranks of Figs. 1-4.
const N: u32 = 32;
/// Ranks of Figs. 5 and 6.
const N_LARGE: u32 = 64;
/// Accuracy target of the oracle stop.
const EPS: f64 = 1e-14;
/// Pushes after which the first rank to reach them stops the run.
const BUDGET: u32 = 500;
/// Mean steps between two pushes of a rank (L + 2o).
const PUSH_PERIOD: u64 = 12;
/// When the single flip of Figs. 1-3 happens: after about 150 pushes per rank.
const FLIP_STEP: u64 = 150 * PUSH_PERIOD;
/// The bit Fig. 1 flips.
const FIG1_BIT: u32 = 56;
/// Checksum threshold of Sec. 4.4.1 (Fig. 1).
const TAU_SEC_441: f64 = 1e-11;
/// Checksum thresholds of the captions of Figs. 3 and 6.
const TAU_PFLC: f64 = 0.5;
const TAU_PFCC: f64 = 1e-10;
/// Flips per sent message in Figs. 4-6.
const FLIP_RATE: f64 = 1e-4;
/// The thresholds of Figs. 4 and 5.
const TAUS: [f64; 10] = [1e-14, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 1e-1, 0.5, 1.0];
/// A final error above this counts as not recovered (Fig. 2's summary).
const FAILED: f64 = 1e-8;
/// A final error above this missed the target (10 eps): the run was stopped by the budget.
const MISSED: f64 = 10.0 * EPS;
/// Seed streams of the experiments, so that they draw different runs.
const STREAM_FIG1: u64 = 1;
const STREAM_BITS: u64 = 2;
const STREAM_TAU: u64 = 45;
const STREAM_FIG6: u64 = 6;

/// 000 Fig. 1: convergence of PF, PFLC and PFCC (and a run without the flip) when bit 56 of one
/// flow flips after about 150 pushes; one run, N = 32.
pub fn fig1(ctx: &Ctx) -> anyhow::Result<()> {
    let seed = ctx.run_seed(&[STREAM_FIG1]);
    let algos = [Algorithm::Pf, Algorithm::Pflc, Algorithm::Pfcc];
    let mut runs: Vec<(String, SimReport)> = Vec::new();
    let reference = run(ctx, &gossip_spec(Algorithm::Pf, N, None), seed, &[], true)?;
    runs.push(("no flip".into(), reference));
    let mut target = None;
    for algo in algos {
        let spec = gossip_spec(algo, N, Some(TAU_SEC_441));
        let (report, flow) = run_flow_flip(ctx, &spec, seed, FIG1_BIT, true)?;
        target = Some(flow);
        runs.push((algo.name().to_uppercase(), report));
    }
    let (rank, peer) = target.context("no flipped run")?;
    println!(
        "N = {N}, seed {seed}: bit {FIG1_BIT} of rank {rank}'s flow to rank {peer} flips at step \
         {FLIP_STEP}; tau = {TAU_SEC_441:e}"
    );
    println!("run        final max error  iterations  stopped by  flips");
    for (name, report) in &runs {
        println!(
            "{name:<10} {:>15.2e} {:>11} {:>11} {:>6}",
            error_of(report),
            iterations(report)?,
            if report.stopped_by_budget {
                "budget"
            } else {
                "accuracy"
            },
            report.state_flips
        );
    }
    print_history(&runs);
    let summary: Vec<String> = runs
        .iter()
        .map(|(name, r)| {
            Ok(format!(
                "{name} {:.1e} ({} it.)",
                error_of(r),
                iterations(r)?
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    println!(
        "claim: PF ends near 1e-11, PFLC and PFCC near 1e-14, PFCC with almost no slow-down; \
         measured: {}",
        summary.join(", ")
    );
    write_history(ctx, &runs)
}

/// 000 Fig. 2: the max (over runs) of the final max relative error after one flip at each of the
/// 64 bit positions, for PS (its value), PF, PFLC, PFCC (a flow) and RDB (a message).
pub fn fig2(ctx: &Ctx) -> anyhow::Result<()> {
    let algos = [
        Algorithm::Ps,
        Algorithm::Pf,
        Algorithm::Pflc,
        Algorithm::Pfcc,
        Algorithm::Rdb,
    ];
    let runs = ctx.placements(5, 100);
    let sweep = bit_sweep(ctx, &algos, runs)?;
    let worst: Vec<Vec<f64>> = algos
        .iter()
        .map(|&algo| per_bit(&sweep, algo, |r| r.error, max_of))
        .collect();
    println!("N = {N}, {runs} runs per bit; max over runs of the final max relative error");
    print!("bit");
    for algo in algos {
        print!(" {:>9}", algo.name());
    }
    println!();
    let mut rows = Vec::new();
    for bit in 0..64 {
        print!("{bit:>3}");
        let mut row = vec![bit.to_string()];
        for errors in &worst {
            print!(" {:>9.1e}", errors[bit]);
            row.push(format!("{:e}", errors[bit]));
        }
        println!();
        rows.push(row);
    }
    let above = |limit: f64| -> String {
        algos
            .iter()
            .zip(&worst)
            .map(|(algo, errors)| {
                let bits: Vec<u32> = (0..64u32).filter(|&b| errors[b as usize] > limit).collect();
                format!("{} {}", algo.name().to_uppercase(), bit_ranges(&bits))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    println!(
        "claim: PFLC and PFCC recover at every bit; PF fails for exponent bits (52-62); PS and RDB \
         survive only low mantissa bits;"
    );
    println!(
        "measured: bits with max error > {FAILED:e}: {}",
        above(FAILED)
    );
    println!(
        "          bits with max error > {MISSED:e} (10 eps): {}",
        above(MISSED)
    );
    let header: Vec<String> = std::iter::once("bit".to_string())
        .chain(algos.iter().map(|a| format!("{}_max_rel_error", a.name())))
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    ctx.write_csv("fig2.csv", &header, &rows)?;
    let chart = Chart {
        title: format!("000 Fig. 2: max error over {runs} runs, one flip, N = {N}"),
        x_label: "flipped bit (0 = lowest mantissa bit, 52-62 exponent, 63 sign)".into(),
        y_label: "max relative error (drawn within 1e-17 .. 10)".into(),
        x_ticks: (0..64).map(|b: u32| b.to_string()).collect(),
        series: algos
            .iter()
            .zip(&worst)
            .map(|(algo, errors)| Series {
                name: algo.name().to_uppercase(),
                values: errors.iter().map(|&e| Some(e.clamp(1e-17, 10.0))).collect(),
            })
            .collect(),
        kind: Kind::Lines,
        log_y: true,
    };
    ctx.write("fig2.svg", &render(&chart))
}

/// 000 Fig. 3: mean messages per rank of PF, PFLC and PFCC with one flip at each bit position
/// (the runs of Fig. 2), against PS without a flip (same seeds).
pub fn fig3(ctx: &Ctx) -> anyhow::Result<()> {
    let algos = [Algorithm::Pf, Algorithm::Pflc, Algorithm::Pfcc];
    let runs = ctx.placements(5, 100);
    let sweep = bit_sweep(ctx, &algos, runs)?;
    ctx.progress(&format!("ps without a flip: {runs} runs"));
    let ps_spec = gossip_spec(Algorithm::Ps, N, None);
    let ps_runs: Vec<u32> = (0..runs).collect();
    let ps: Vec<f64> = ctx
        .par_map(&ps_runs, |&r| {
            let seed = ctx.run_seed(&[STREAM_BITS, u64::from(r)]);
            run(ctx, &ps_spec, seed, &[], false).map(|report| per_rank(&report))
        })
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    let ps_mean = mean(&ps);
    let messages: Vec<Vec<f64>> = algos
        .iter()
        .map(|&algo| per_bit(&sweep, algo, |r| r.messages, mean))
        .collect();
    let budget: Vec<Vec<f64>> = algos
        .iter()
        .map(|&algo| per_bit(&sweep, algo, |r| f64::from(u8::from(r.budget)), sum))
        .collect();
    println!(
        "N = {N}, {runs} runs per bit; mean messages per rank (PS without a flip: {ps_mean:.1})"
    );
    println!("bit       PF     PFLC     PFCC   budget stops PF/PFLC/PFCC");
    let mut rows = Vec::new();
    for bit in 0..64 {
        println!(
            "{bit:>3} {:>8.1} {:>8.1} {:>8.1}   {}/{}/{}",
            messages[0][bit],
            messages[1][bit],
            messages[2][bit],
            budget[0][bit],
            budget[1][bit],
            budget[2][bit]
        );
        let mut row = vec![bit.to_string(), fmt(ps_mean)];
        row.extend(messages.iter().map(|m| fmt(m[bit])));
        row.extend(budget.iter().map(|b| b[bit].to_string()));
        rows.push(row);
    }
    let band = |m: &[f64], bits: std::ops::Range<usize>| mean(&m[bits]);
    let overhead = |m: &[f64]| 100.0 * (band(m, 0..30) / ps_mean - 1.0);
    let pfcc_min = messages[2].iter().copied().fold(f64::INFINITY, f64::min);
    let pfcc_max = messages[2].iter().copied().fold(0.0, f64::max);
    println!(
        "claim: PF variants ~50% more messages than PS (crossing messages); PFCC nearly constant \
         across bits; PF and PFLC grow for high bits;"
    );
    println!(
        "measured: PS {ps_mean:.1}/rank; bits 0-29 PF {:.1} ({:+.0}%), PFLC {:.1} ({:+.0}%), \
         PFCC {:.1} ({:+.0}%); bits 52-63 PF {:.1}, PFLC {:.1}, PFCC {:.1}; PFCC range over bits \
         {pfcc_min:.1}-{pfcc_max:.1}",
        band(&messages[0], 0..30),
        overhead(&messages[0]),
        band(&messages[1], 0..30),
        overhead(&messages[1]),
        band(&messages[2], 0..30),
        overhead(&messages[2]),
        band(&messages[0], 52..64),
        band(&messages[1], 52..64),
        band(&messages[2], 52..64),
    );
    ctx.write_csv(
        "fig3.csv",
        &[
            "bit",
            "ps_no_flip_messages_per_rank",
            "pf_messages_per_rank",
            "pflc_messages_per_rank",
            "pfcc_messages_per_rank",
            "pf_budget_stops",
            "pflc_budget_stops",
            "pfcc_budget_stops",
        ],
        &rows,
    )?;
    let mut series = vec![Series {
        name: "PS, no flip".into(),
        values: vec![Some(ps_mean); 64],
    }];
    for (algo, m) in algos.iter().zip(&messages) {
        series.push(Series {
            name: algo.name().to_uppercase(),
            values: m.iter().map(|&v| Some(v)).collect(),
        });
    }
    let chart = Chart {
        title: format!("000 Fig. 3: mean messages per rank, one flip, N = {N}"),
        x_label: "flipped bit (0 = lowest mantissa bit, 52-62 exponent, 63 sign)".into(),
        y_label: "messages per rank".into(),
        x_ticks: (0..64).map(|b: u32| b.to_string()).collect(),
        series,
        kind: Kind::Lines,
        log_y: false,
    };
    ctx.write("fig3.svg", &render(&chart))
}

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
        for field in [
            "runs",
            "median_iterations",
            "q1",
            "q3",
            "whisker_low",
            "whisker_high",
        ] {
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

// ---------------------------------------------------------------------------------------------
// Runs.

/// A gossip job of these experiments: the average, eps 1e-14, 500 pushes, threshold `tau`
/// (checked rules only). RDB is exact and takes neither.
fn gossip_spec(algo: Algorithm, n: u32, tau: Option<f64>) -> JobSpec {
    let mut spec = JobSpec::new(algo, n);
    spec.op = ReduceOp::Average;
    if algo != Algorithm::Rdb {
        spec.eps = Some(EPS);
        spec.steps = Some(BUDGET);
        spec.gossip.tau = tau;
    }
    spec
}

/// Runs `spec` with `seed` and the fault specs `faults`, recording the error history if asked.
fn run(
    ctx: &Ctx,
    spec: &JobSpec,
    seed: u64,
    faults: &[String],
    history: bool,
) -> anyhow::Result<SimReport> {
    let faults = faults
        .iter()
        .map(|f| FaultSpec::parse(f).map_err(|e| anyhow!("fault '{f}': {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let config = SimConfig {
        seed,
        faults,
        history_every: history.then_some(PUSH_PERIOD),
        ..SimConfig::default()
    };
    let report = simulate(spec, config)
        .map_err(|e| anyhow!("{} with N = {}, seed {seed}: {e}", spec.algo, spec.n))?;
    ctx.runs.fetch_add(1, Ordering::Relaxed);
    if report.truncated {
        bail!(
            "{} with N = {}, seed {seed} reached the simulator's bounds",
            spec.algo,
            spec.n
        );
    }
    Ok(report)
}

/// The flow variable a run corrupts: a random rank and a random hypercube dimension (its
/// neighbour across it), drawn from the run's seed.
fn flow_target(seed: u64, n: u32) -> (u32, u32) {
    let mut rng = SimRng::for_stream(seed, 0xF10F);
    let rank = rng.below(u64::from(n)) as u32;
    let dim = rng.below(u64::from(n.trailing_zeros().max(1))) as u32;
    (rank, dim)
}

/// Runs `spec` with bit `bit` of the value element of one flow variable flipped at
/// [`FLIP_STEP`] ([`flow_target`]); if that flow does not exist yet (the two never exchanged), the
/// flow across the next dimension. Returns the report and the (rank, peer) of the flipped flow.
fn run_flow_flip(
    ctx: &Ctx,
    spec: &JobSpec,
    seed: u64,
    bit: u32,
    history: bool,
) -> anyhow::Result<(SimReport, (u32, u32))> {
    let dims = spec.n.trailing_zeros().max(1);
    let (rank, dim) = flow_target(seed, spec.n);
    for k in 0..dims {
        let peer = rank ^ (1 << ((dim + k) % dims));
        let fault =
            format!("flip-state:rank={rank},bit={bit},var=flow:{peer},elem=0,at={FLIP_STEP}");
        let report = run(ctx, spec, seed, &[fault], history)?;
        if report.state_flips == 1 {
            return Ok((report, (rank, peer)));
        }
    }
    bail!(
        "{}: rank {rank} held no flow to flip at step {FLIP_STEP} (seed {seed})",
        spec.algo
    )
}

/// Runs `spec` (PS) with bit `bit` of a random rank's value flipped at [`FLIP_STEP`].
fn run_value_flip(ctx: &Ctx, spec: &JobSpec, seed: u64, bit: u32) -> anyhow::Result<SimReport> {
    let (rank, _) = flow_target(seed, spec.n);
    let fault = format!("flip-state:rank={rank},bit={bit},var=value,elem=0,at={FLIP_STEP}");
    let report = run(ctx, spec, seed, &[fault], false)?;
    if report.state_flips != 1 {
        bail!(
            "{}: the value flip at step {FLIP_STEP} did not happen (seed {seed})",
            spec.algo
        );
    }
    Ok(report)
}

/// Runs `spec` (RDB) with bit `bit` of one of the log2 N messages a random rank sends flipped.
fn run_message_flip(ctx: &Ctx, spec: &JobSpec, seed: u64, bit: u32) -> anyhow::Result<SimReport> {
    let (rank, nth) = flow_target(seed, spec.n);
    let fault = format!("flip-msg:rank={rank},bit={bit},elem=0,nth={nth}");
    let report = run(ctx, spec, seed, &[fault], false)?;
    if report.message_flips != 1 {
        bail!(
            "{}: message {nth} of rank {rank} was not flipped (seed {seed})",
            spec.algo
        );
    }
    Ok(report)
}

/// One run of the bit sweep of Figs. 2 and 3.
#[derive(Clone, Copy, Debug)]
struct BitRun {
    algo: Algorithm,
    bit: u32,
    /// Final max relative error (NaN counted as infinite).
    error: f64,
    /// Messages per rank.
    messages: f64,
    /// The push budget, not the accuracy, stopped the run.
    budget: bool,
}

/// Runs every algorithm of `algos` with one flip at each of the 64 bits, `runs` times each: the
/// runs of Figs. 2 and 3 (run r has the same seed for every algorithm and bit).
fn bit_sweep(ctx: &Ctx, algos: &[Algorithm], runs: u32) -> anyhow::Result<Vec<BitRun>> {
    let mut all = Vec::new();
    for &algo in algos {
        ctx.progress(&format!("{algo}: 64 bits x {runs} runs"));
        let tau = match algo {
            Algorithm::Pflc => Some(TAU_PFLC),
            Algorithm::Pfcc => Some(TAU_PFCC),
            _ => None,
        };
        let spec = gossip_spec(algo, N, tau);
        let items: Vec<(u32, u32)> = (0..64)
            .flat_map(|bit| (0..runs).map(move |r| (bit, r)))
            .collect();
        let results = ctx.par_map(&items, |&(bit, r)| {
            let seed = ctx.run_seed(&[STREAM_BITS, u64::from(r)]);
            let report = match algo {
                Algorithm::Ps => run_value_flip(ctx, &spec, seed, bit)?,
                Algorithm::Rdb => run_message_flip(ctx, &spec, seed, bit)?,
                _ => run_flow_flip(ctx, &spec, seed, bit, false)?.0,
            };
            Ok(BitRun {
                algo,
                bit,
                error: error_of(&report),
                messages: per_rank(&report),
                budget: report.stopped_by_budget,
            })
        });
        all.extend(results.into_iter().collect::<anyhow::Result<Vec<_>>>()?);
    }
    Ok(all)
}

/// `reduce` over the runs of `algo` at each bit of `value`: 64 numbers.
fn per_bit(
    sweep: &[BitRun],
    algo: Algorithm,
    value: fn(&BitRun) -> f64,
    reduce: fn(&[f64]) -> f64,
) -> Vec<f64> {
    (0..64)
        .map(|bit| {
            let values: Vec<f64> = sweep
                .iter()
                .filter(|r| r.algo == algo && r.bit == bit)
                .map(value)
                .collect();
            reduce(&values)
        })
        .collect()
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
    ctx.write_csv(
        "fig4_5.csv",
        &[
            "figure",
            "n",
            "algo",
            "tau",
            "runs",
            "median_iterations",
            "q1",
            "q3",
            "whisker_low",
            "whisker_high",
            "mean_flips",
            "budget_stops",
        ],
        &rows,
    )?;
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

// ---------------------------------------------------------------------------------------------
// Fig. 1's history.

/// Prints the max error of each run about every 300 steps.
fn print_history(runs: &[(String, SimReport)]) {
    let steps = history_steps(runs);
    print!("step  ");
    for (name, _) in runs {
        print!(" {name:>10}");
    }
    println!("   (max relative error over ranks)");
    for &step in steps.iter().step_by(25) {
        print!("{step:>5} ");
        for (_, report) in runs {
            match sample(report, step) {
                Some((max, _)) => print!(" {max:>10.2e}"),
                None => print!(" {:>10}", "-"),
            }
        }
        println!();
    }
}

/// Every sampled step of any run, in order.
fn history_steps(runs: &[(String, SimReport)]) -> Vec<u64> {
    let mut steps: Vec<u64> = runs
        .iter()
        .flat_map(|(_, r)| r.history.iter().map(|h| h.0))
        .collect();
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// A run's (max, median) error at `step`, if it was still running.
fn sample(report: &SimReport, step: u64) -> Option<(f64, f64)> {
    report
        .history
        .iter()
        .find(|h| h.0 == step)
        .map(|h| (h.1, h.2))
}

/// Fig. 1's CSV (max and median error of every run at every sampled step) and SVG.
fn write_history(ctx: &Ctx, runs: &[(String, SimReport)]) -> anyhow::Result<()> {
    let steps = history_steps(runs);
    let mut header = vec!["step".to_string()];
    for (name, _) in runs {
        let name = name.replace(' ', "_").to_lowercase();
        header.push(format!("{name}_max_rel_error"));
        header.push(format!("{name}_median_rel_error"));
    }
    let rows: Vec<Vec<String>> = steps
        .iter()
        .map(|&step| {
            let mut row = vec![step.to_string()];
            for (_, report) in runs {
                match sample(report, step) {
                    Some((max, median)) => row.extend([format!("{max:e}"), format!("{median:e}")]),
                    None => row.extend([String::new(), String::new()]),
                }
            }
            row
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    ctx.write_csv("fig1.csv", &header, &rows)?;
    let chart = Chart {
        title: format!("000 Fig. 1: bit {FIG1_BIT} of a flow flips at step {FLIP_STEP}, N = {N}"),
        x_label: "time (steps)".into(),
        y_label: "max relative error over ranks".into(),
        x_ticks: steps.iter().map(u64::to_string).collect(),
        series: runs
            .iter()
            .map(|(name, report)| Series {
                name: name.clone(),
                values: steps
                    .iter()
                    .map(|&s| sample(report, s).map(|(max, _)| max))
                    .collect(),
            })
            .collect(),
        kind: Kind::Lines,
        log_y: true,
    };
    ctx.write("fig1.svg", &render(&chart))
}

// ---------------------------------------------------------------------------------------------
// Numbers.

/// The final max relative error, a NaN counted as infinite.
fn error_of(report: &SimReport) -> f64 {
    if report.max_rel_error.is_nan() {
        f64::INFINITY
    } else {
        report.max_rel_error
    }
}

/// The oracle's stopping round: the iterations of the run.
fn iterations(report: &SimReport) -> anyhow::Result<u32> {
    report
        .oracle_stop_round
        .context("the gossip run ended without the oracle stopping it")
}

/// Messages sent per rank.
fn per_rank(report: &SimReport) -> f64 {
    report.messages as f64 / f64::from(report.n.max(1))
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    sum(values) / values.len() as f64
}

fn sum(values: &[f64]) -> f64 {
    values.iter().sum()
}

fn max_of(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// The bits as ranges: `0-3, 52-62`, or `none`.
fn bit_ranges(bits: &[u32]) -> String {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for &b in bits {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == b => *end = b,
            _ => ranges.push((b, b)),
        }
    }
    if ranges.is_empty() {
        return "none".into();
    }
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Median, quartiles and Tukey whiskers of a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Summary {
    median: f64,
    q1: f64,
    q3: f64,
    /// The smallest value at or above q1 - 1.5 IQR.
    low: f64,
    /// The largest value at or below q3 + 1.5 IQR.
    high: f64,
}

impl Summary {
    /// median, q1, q3, low, high for a CSV row.
    fn fields(&self) -> Vec<String> {
        [self.median, self.q1, self.q3, self.low, self.high]
            .iter()
            .map(|&v| fmt(v))
            .collect()
    }
}

/// The summary of `values`; none for an empty sample.
fn summarize(values: &[f64]) -> Option<Summary> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (first, last) = (*sorted.first()?, *sorted.last()?);
    let q1 = quantile(&sorted, 0.25);
    let q3 = quantile(&sorted, 0.75);
    let reach = 1.5 * (q3 - q1);
    Some(Summary {
        median: quantile(&sorted, 0.5),
        q1,
        q3,
        low: sorted
            .iter()
            .copied()
            .find(|&v| v >= q1 - reach)
            .unwrap_or(first),
        high: sorted
            .iter()
            .rev()
            .copied()
            .find(|&v| v <= q3 + reach)
            .unwrap_or(last),
    })
}

/// The `q` quantile of a sorted non-empty sample, interpolated linearly.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_use_tukey_whiskers() {
        let s = summarize(&[1.0, 2.0, 3.0, 4.0, 100.0]).unwrap_or_default();
        assert_eq!((s.median, s.q1, s.q3), (3.0, 2.0, 4.0));
        assert_eq!((s.low, s.high), (1.0, 4.0), "100 is an outlier");
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn bits_are_grouped_into_ranges() {
        assert_eq!(bit_ranges(&[0, 1, 2, 5, 52, 53]), "0-2, 5, 52-53");
        assert_eq!(bit_ranges(&[]), "none");
    }

    #[test]
    fn flow_targets_are_hypercube_neighbours() {
        for seed in 0..50 {
            let (rank, dim) = flow_target(seed, 32);
            assert!(rank < 32 && dim < 5);
        }
    }
}
