//! 000 Fig. 13: HPFLC's iteration overhead after one bit flip in a flow variable at round 2,
//! for each of the 32 bits of an f32 flow element, against the run of the same seed without it.

use anyhow::{anyhow, bail, Context};
use ftcoll_algos::gossip::permutation::cycle_partners;
use ftcoll_algos::rng::SimRng;
use ftcoll_runtime::job::Algorithm;

use super::{eps_label, iterations, run_job, Job, TAG_FIG13};
use crate::experiments::svg::{render, Chart, Kind, Series};
use crate::experiments::{fmt, size_label, Ctx};

/// Fig. 13's accuracy target.
const FIG13_EPS: f64 = 1e-3;
/// Fig. 13: the round (= step) at which the flow bit flips.
const FLIP_AT: u64 = 2;
/// Bits of an f32 flow element.
const F32_BITS: u32 = 32;

/// One run of Fig. 13: its seed, where the flip goes, and iterations without and with it.
#[derive(Clone, Debug)]
struct FlipRun {
    seed: u64,
    rank: u32,
    peer: u32,
    base: u32,
    /// Iterations with a flip at bit b, for b in 0..32.
    flipped: Vec<u32>,
}

/// The flipped variable of run `seed`: a rank drawn from the seed, and the flow towards the rank
/// it sent to in round 0 (set before the flip at round [`FLIP_AT`]).
fn flip_target(n: u32, seed: u64) -> (u32, u32) {
    let rank = SimRng::for_stream(seed, TAG_FIG13).below(u64::from(n)) as u32;
    let peer = cycle_partners(n, seed, 0, rank).send_to;
    (rank, peer)
}

/// The `--fault` spec of Fig. 13's flip.
fn flip_fault(rank: u32, peer: u32, bit: u32) -> String {
    format!("flip-state:rank={rank},bit={bit},var=flow:{peer},elem=0,at={FLIP_AT}")
}

/// Runs the no-flip run and the 32 flipped runs of every seed, checking that each flipped run
/// applied exactly one flip and the base run none.
fn flip_runs(ctx: &Ctx, n: u32, runs: u32) -> anyhow::Result<Vec<FlipRun>> {
    let job = Job::new(Algorithm::Hpflc, n, FIG13_EPS);
    let items: Vec<(u32, Option<u32>)> = (0..runs)
        .flat_map(|run| {
            std::iter::once(None)
                .chain((0..F32_BITS).map(Some))
                .map(move |b| (run, b))
        })
        .collect();
    let seeds: Vec<u64> = (0..runs)
        .map(|run| ctx.run_seed(&[TAG_FIG13, u64::from(n), u64::from(run)]))
        .collect();
    let results = ctx.par_map(&items, |&(run, bit)| -> anyhow::Result<u32> {
        let seed = seeds[run as usize];
        let (rank, peer) = flip_target(n, seed);
        let faults: Vec<String> = bit.map(|b| flip_fault(rank, peer, b)).into_iter().collect();
        if bit.is_none() {
            ctx.progress(&format!(
                "run {run}: N = {}, flips at rank {rank}",
                size_label(n)
            ));
        }
        let report = run_job(ctx, &job, seed, &faults)?;
        let expected = u64::from(bit.is_some());
        if report.state_flips != expected {
            bail!(
                "{} state flips applied, expected {expected}; replay: {}",
                report.state_flips,
                job.replay(seed, &faults)
            );
        }
        Ok(iterations(&report))
    });
    let mut done = Vec::new();
    let mut results = results.into_iter();
    for &seed in &seeds {
        let (rank, peer) = flip_target(n, seed);
        let mut next = || -> anyhow::Result<u32> {
            results
                .next()
                .context("a run result is missing")?
                .map_err(|e| anyhow!("{e:#}"))
        };
        let base = next()?;
        let flipped = (0..F32_BITS)
            .map(|_| next())
            .collect::<anyhow::Result<_>>()?;
        done.push(FlipRun {
            seed,
            rank,
            peer,
            base,
            flipped,
        });
    }
    Ok(done)
}

/// Per bit: mean extra iterations, largest extra iterations, mean overhead in percent.
#[derive(Clone, Copy, Debug)]
struct BitOverhead {
    bit: u32,
    mean_extra: f64,
    max_extra: i64,
    mean_percent: f64,
}

/// The overhead of a flip at each bit, over all runs.
fn overheads(runs: &[FlipRun]) -> Vec<BitOverhead> {
    let count = runs.len().max(1) as f64;
    (0..F32_BITS)
        .map(|bit| {
            let extra: Vec<i64> = runs
                .iter()
                .map(|r| i64::from(r.flipped[bit as usize]) - i64::from(r.base))
                .collect();
            let percent: f64 = runs
                .iter()
                .zip(&extra)
                .map(|(r, &e)| 100.0 * e as f64 / f64::from(r.base.max(1)))
                .sum();
            BitOverhead {
                bit,
                mean_extra: extra.iter().sum::<i64>() as f64 / count,
                max_extra: extra.iter().copied().max().unwrap_or(0),
                mean_percent: percent / count,
            }
        })
        .collect()
}

/// 000 Fig. 13: HPFLC (f32, eps = 1e-3, N = 2^12, with `--full` 2^20) with one flip of bit b of
/// one flow variable at round 2, for each b in 0..32: average iteration overhead against the run
/// of the same seed without the flip. Writes `fig13_runs.csv`, `fig13.csv` and `fig13.svg`.
pub fn fig13(ctx: &Ctx) -> anyhow::Result<()> {
    let paper: u32 = if ctx.full { 1 << 20 } else { 1 << 12 };
    let n = 1u32 << paper.min(ctx.max_ranks).max(16).ilog2();
    let runs = ctx.placements(3, 20);
    println!(
        "HPFLC, N = {}, eps = {}, f32: one flip of bit b of a flow element at round {FLIP_AT}, \
         {runs} runs per bit",
        size_label(n),
        eps_label(FIG13_EPS)
    );
    let done = flip_runs(ctx, n, runs)?;
    let mut run_rows = Vec::new();
    for r in &done {
        for (bit, &it) in r.flipped.iter().enumerate() {
            run_rows.push(vec![
                r.seed.to_string(),
                r.rank.to_string(),
                r.peer.to_string(),
                bit.to_string(),
                r.base.to_string(),
                it.to_string(),
            ]);
        }
    }
    ctx.write_csv(
        "fig13_runs.csv",
        &[
            "seed",
            "rank",
            "flow_peer",
            "bit",
            "base_iterations",
            "flip_iterations",
        ],
        &run_rows,
    )?;
    let per_bit = overheads(&done);
    println!("bit  mean extra  max extra  mean overhead %");
    for o in &per_bit {
        println!(
            "{:>3} {:>11.2} {:>10} {:>16.3}",
            o.bit, o.mean_extra, o.max_extra, o.mean_percent
        );
    }
    let rows: Vec<Vec<String>> = per_bit
        .iter()
        .map(|o| {
            vec![
                o.bit.to_string(),
                runs.to_string(),
                fmt(o.mean_extra),
                o.max_extra.to_string(),
                fmt(o.mean_percent),
            ]
        })
        .collect();
    ctx.write_csv(
        "fig13.csv",
        &[
            "bit",
            "runs",
            "mean_extra_iterations",
            "max_extra_iterations",
            "mean_overhead_percent",
        ],
        &rows,
    )?;
    let chart = Chart {
        title: format!(
            "000 Fig. 13: HPFLC overhead of one flow bit flip (N = {}, eps = 1e-3)",
            size_label(n)
        ),
        x_label: "flipped bit (0 = least significant mantissa bit, 31 = sign)".into(),
        y_label: "mean iteration overhead (%)".into(),
        x_ticks: per_bit.iter().map(|o| o.bit.to_string()).collect(),
        series: vec![Series {
            name: "HPFLC".into(),
            values: per_bit.iter().map(|o| Some(o.mean_percent)).collect(),
        }],
        kind: Kind::Bars,
        log_y: false,
    };
    ctx.write("fig13.svg", &render(&chart))?;
    println!("{}", flip_claim(&done, &per_bit));
    Ok(())
}

/// Fig. 13's claim against the measured overheads.
fn flip_claim(runs: &[FlipRun], per_bit: &[BitOverhead]) -> String {
    let worst_extra = per_bit.iter().max_by_key(|o| o.max_extra);
    let worst_mean = per_bit
        .iter()
        .max_by(|a, b| a.mean_percent.total_cmp(&b.mean_percent));
    let below = per_bit.iter().filter(|o| o.mean_percent < 1.0).count();
    let base: f64 = runs.iter().map(|r| f64::from(r.base)).sum::<f64>() / runs.len().max(1) as f64;
    let (Some(extra), Some(mean)) = (worst_extra, worst_mean) else {
        return "claim: at most one extra iteration; measured: no runs".into();
    };
    let extras = runs
        .iter()
        .flat_map(|r| r.flipped.iter().map(|&f| i64::from(f) - i64::from(r.base)));
    let (mut more, mut same, mut fewer) = (0, 0, 0);
    for e in extras {
        match e.signum() {
            1 => more += 1,
            0 => same += 1,
            _ => fewer += 1,
        }
    }
    format!(
        "claim: a flip costs at most one extra iteration, average overhead < 1% at every bit; \
         measured: at most {:+} iterations (bit {}), largest mean overhead {:.2}% (bit {}), {} of \
         {} bits below 1%; of {} flipped runs {more} took more iterations, {same} the same, \
         {fewer} fewer; base run {:.1} iterations on average",
        extra.max_extra,
        extra.bit,
        mean.mean_percent,
        mean.bit,
        below,
        per_bit.len(),
        more + same + fewer,
        base
    )
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn the_flip_targets_a_flow_the_rank_has() {
        let (rank, peer) = flip_target(64, 7);
        assert!(rank < 64 && peer < 64 && peer != rank);
        assert!(ftcoll_launcher::text::parse_fault(&flip_fault(rank, peer, 31)).is_ok());
    }
}
