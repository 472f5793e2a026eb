//! 000 Figs. 2 and 3, which share their runs: one flip at each of the 64 bit positions (a flow
//! of PF, PFLC and PFCC, the value of PS, a message of RDB); Fig. 2 plots the max final error,
//! Fig. 3 the mean messages per rank against PS without a flip.

use anyhow::bail;
use ftcoll_runtime::job::{Algorithm, JobSpec};
use ftcoll_runtime::sim::SimReport;

use super::{
    error_of, flow_target, gossip_spec, max_of, mean, per_rank, run, run_flow_flip, sum, FAILED,
    FLIP_STEP, MISSED, N, STREAM_BITS, TAU_PFCC, TAU_PFLC,
};
use crate::experiments::svg::{render, Chart, Kind, Series};
use crate::experiments::{fmt, Ctx};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_grouped_into_ranges() {
        assert_eq!(bit_ranges(&[0, 1, 2, 5, 52, 53]), "0-2, 5, 52-53");
        assert_eq!(bit_ranges(&[]), "none");
    }
}
