//! `ftcoll-launch bench ftco`: FTCO allreduce on real processes, measured as 004 Sec. 5.1
//! does.
//!
//! - **Table 1's shape**: the latency of an allreduce whose offline faults (ranks dead before
//!   the operation, unknown to the survivors) are found inside it by the detection timeout:
//!   no fault, one fault, two parallel faults (different subtrees), two serial faults (a parent
//!   and its child), three mixed faults. 004 reports one timeout for one fault or two parallel
//!   ones and two for serial ones.
//! - **Fig. 6**: one fault, FTCO against the ULFM way on this runtime (the allreduce fails,
//!   then revoke, shrink, and a retry on the survivors), as N grows.
//!
//! The faulty operation follows the warm-up and one agreement that lines every rank up; its
//! victims die when it starts. Where faults are to be found by timeout, the victims start it
//! 10 ms after the line-up, so that every survivor is inside it, unaware, before any death is
//! reported. Each figure is the slowest survivor's time for that operation, median over
//! `--repeat` runs.

use anyhow::{bail, Context};
use ftcoll_algos::topology::Tree;
use ftcoll_algos::Rank;
use serde::Serialize;

use super::allreduce::{ftcoll_timings, parse_sizes, FtcollCase};
use super::BenchArgs;

/// Warm-up operations before the faulty one (they also start every rank's transport).
const WARMUP: u32 = 20;
/// Operations after the faulty one (they show the survivors go on at full speed).
const AFTER: u32 = 20;

/// A fault pattern of Table 1.
#[derive(Debug, Clone, Serialize)]
pub struct Pattern {
    /// Table 1's column.
    pub name: String,
    /// The ranks killed.
    pub victims: Vec<u32>,
}

/// Table 1's patterns on `tree`: X and Y are grandchildren of the root in different subtrees,
/// Z a child of X.
pub fn patterns(tree: &Tree) -> anyhow::Result<Vec<Pattern>> {
    let first_child = |r: u32| tree.children(Rank(r)).map(|c| c.0).min();
    let mut root_children: Vec<u32> = tree.children(Rank(0)).map(|c| c.0).collect();
    root_children.sort_unstable();
    let (x, y) = match root_children.as_slice() {
        [a, b, ..] => (first_child(*a), first_child(*b)),
        _ => (None, None),
    };
    let (Some(x), Some(y)) = (x, y) else {
        bail!("the tree is too small for Table 1's faults; use more ranks");
    };
    let z = first_child(x).context("the tree is too small for serial faults; use more ranks")?;
    let pattern = |name: &str, victims: Vec<u32>| Pattern {
        name: name.into(),
        victims,
    };
    Ok(vec![
        pattern("no faults", vec![]),
        pattern("1 fault", vec![x]),
        pattern("2 parallel", vec![x, y]),
        pattern("2 serial", vec![x, z]),
        pattern("3 mixed", vec![x, z, y]),
    ])
}

/// One measured configuration.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRow {
    /// What ran.
    pub label: String,
    /// Ranks.
    pub n: u32,
    /// Who was killed.
    pub victims: Vec<u32>,
    /// The faulty operation: slowest survivor, median over runs (µs).
    pub fault_op_us: Option<f64>,
    /// The operations after it: median of the slowest survivor's (µs).
    pub after_us: Option<f64>,
    /// Runs that completed, of those tried.
    pub runs_ok: u32,
    /// Why a run failed (the last reason).
    pub note: Option<String>,
}

#[derive(Debug, Serialize)]
struct FtcoBenchJson {
    tree: String,
    detect_timeout: String,
    /// Every message waits `detect_timeout` (ULFM style), not App. A's scaled f_timeout.
    fixed_timeout: bool,
    table1: Vec<FaultRow>,
    fig6: Vec<FaultRow>,
}

/// How one configuration runs.
struct Config<'a> {
    label: &'a str,
    algo: &'static str,
    victims: Vec<u32>,
    ftco_args: Vec<String>,
    recovery: bool,
}

fn measure(args: &BenchArgs, n: u32, config: &Config<'_>) -> FaultRow {
    let mut rank_args = vec!["--bench-fault-op".to_string()];
    if config.recovery {
        rank_args.push("--bench-recovery".into());
    }
    // Faults found by timeout must be unknown to every survivor when the operation starts;
    // with notices (or the ULFM way's failed operation) they are meant to be seen at once.
    if !config.recovery && !config.ftco_args.iter().any(|a| a == "--ftco-notices") {
        rank_args.push("--bench-victims-lag".into());
    }
    rank_args.extend(config.ftco_args.iter().cloned());
    let case = FtcollCase {
        dead: config.victims.clone(),
        // The warm-up, one agreement that lines the ranks up, then the faulty operation.
        dies_at_op: u64::from(WARMUP) + 1,
        rank_args,
        ..FtcollCase::plain(config.label, config.algo)
    };
    let mut faulty = Vec::new();
    let mut after = Vec::new();
    let mut note = None;
    for run in 0..args.repeat {
        eprintln!(
            "n = {n}: {} {:?}, run {}/{}",
            config.label,
            config.victims,
            run + 1,
            args.repeat
        );
        match ftcoll_timings(&case, n, AFTER, WARMUP) {
            Ok(survivors) if survivors.iter().all(|t| t.len() == AFTER as usize + 1) => {
                let slowest =
                    |i: usize| survivors.iter().map(|t| t[i]).max().unwrap_or(0) as f64 / 1e3;
                faulty.push(slowest(0));
                let mut rest: Vec<f64> = (1..=AFTER as usize).map(slowest).collect();
                after.push(super::median(&mut rest));
            }
            Ok(_) => note = Some("a survivor reported too few timings".to_string()),
            Err(error) => {
                eprintln!("  run failed: {error}");
                note = Some(error.to_string());
            }
        }
    }
    let figure = |values: &mut Vec<f64>| (!values.is_empty()).then(|| super::median(values));
    FaultRow {
        label: config.label.into(),
        n,
        victims: config.victims.clone(),
        fault_op_us: figure(&mut faulty),
        after_us: figure(&mut after),
        runs_ok: faulty.len() as u32,
        note,
    }
}

/// Runs `bench ftco`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if args.repeat == 0 {
        bail!("bench ftco needs --repeat >= 1");
    }
    let shape = ftcoll_launcher::text::parse_shape(&args.ftco_tree).map_err(anyhow::Error::msg)?;
    let mut ftco_args = vec![
        "--ftco-tree".to_string(),
        args.ftco_tree.clone(),
        "--detect-timeout".into(),
        args.detect_timeout.clone(),
    ];
    if args.ftco_fixed_timeout {
        ftco_args.push("--ftco-fixed-timeout".into());
    }
    // Both lists are checked before anything runs.
    let table1_sizes = parse_sizes(args.sizes_or("8,16,32,64"), 8)?;
    let fig6_sizes = super::allreduce::parse_sizes_of("--fig6-sizes", &args.fig6_sizes, 8)?;
    let mut table1 = Vec::new();
    for n in table1_sizes {
        let tree = Tree::new(shape, n, 1)?;
        for pattern in patterns(&tree)? {
            table1.push(measure(
                args,
                n,
                &Config {
                    label: &pattern.name,
                    algo: "ftco-allreduce",
                    victims: pattern.victims,
                    ftco_args: ftco_args.clone(),
                    recovery: false,
                },
            ));
        }
    }
    let mut fig6 = Vec::new();
    for n in fig6_sizes {
        let tree = Tree::new(shape, n, 1)?;
        let victim = patterns(&tree)?[1].victims.clone();
        let mut with_notices = ftco_args.clone();
        with_notices.push("--ftco-notices".into());
        for config in [
            Config {
                label: "ftco (timeout)",
                algo: "ftco-allreduce",
                victims: victim.clone(),
                ftco_args: ftco_args.clone(),
                recovery: false,
            },
            Config {
                label: "ftco (notices)",
                algo: "ftco-allreduce",
                victims: victim.clone(),
                ftco_args: with_notices,
                recovery: false,
            },
            Config {
                label: "ulfm way (rdb)",
                algo: "rdb",
                victims: victim.clone(),
                ftco_args: Vec::new(),
                recovery: true,
            },
        ] {
            fig6.push(measure(args, n, &config));
        }
    }
    let result = FtcoBenchJson {
        tree: args.ftco_tree.clone(),
        detect_timeout: args.detect_timeout.clone(),
        fixed_timeout: args.ftco_fixed_timeout,
        table1,
        fig6,
    };
    print_tables(&result);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&result)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn print_tables(result: &FtcoBenchJson) {
    let show = |v: Option<f64>| v.map_or("failed".to_string(), |v| format!("{:.0}", v));
    println!(
        "004 Table 1 shape: FTCO allreduce with offline faults ({} tree, {} detection timeout {}); slowest survivor, median of runs, us",
        result.tree,
        if result.fixed_timeout { "fixed" } else { "scaled" },
        result.detect_timeout
    );
    println!(
        "{:>5}  {:>12}  {:>14}  {:>14}  {:>12}",
        "n", "faults", "victims", "faulty op", "later ops"
    );
    for row in &result.table1 {
        println!(
            "{:>5}  {:>12}  {:>14}  {:>14}  {:>12}",
            row.n,
            row.label,
            format!("{:?}", row.victims),
            show(row.fault_op_us),
            show(row.after_us)
        );
    }
    println!(
        "\n004 Fig. 6: one fault, FTCO against the ULFM way (fail, revoke, shrink, retry); us"
    );
    println!(
        "{:>5}  {:>16}  {:>14}  {:>12}",
        "n", "how", "faulty op", "later ops"
    );
    for row in &result.fig6 {
        println!(
            "{:>5}  {:>16}  {:>14}  {:>12}",
            row.n,
            row.label,
            show(row.fault_op_us),
            show(row.after_us)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ftcoll_algos::topology::TreeShape;

    #[test]
    fn patterns_on_a_binary_tree() {
        let tree = Tree::new(TreeShape::KAry { k: 2 }, 64, 1).unwrap();
        let victims: Vec<Vec<u32>> = patterns(&tree)
            .unwrap()
            .into_iter()
            .map(|p| p.victims)
            .collect();
        assert_eq!(
            victims,
            vec![vec![], vec![3], vec![3, 5], vec![3, 7], vec![3, 7, 5]]
        );
    }

    #[test]
    fn small_trees_are_refused() {
        let tree = Tree::new(TreeShape::KAry { k: 2 }, 3, 1).unwrap();
        assert!(patterns(&tree).is_err());
    }
}
