//! `ftcoll-launch bench corrected`: the corrected-tree allreduce beside recursive doubling.

use anyhow::Context;

use super::allreduce::{ftcoll_run, parse_sizes, FtcollCase};
use super::BenchArgs;

/// `bench corrected`: the corrected-tree allreduce beside recursive doubling in the same run,
/// failure-free and with ranks dead before the measured operations.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    // Two dead ranks and f = 2 need at least four.
    let sizes = parse_sizes(args.sizes_or("4,8,16"), 4)?;
    let mut rows = Vec::new();
    for &n in &sizes {
        let cases = [
            FtcollCase::plain("ftcoll", "rdb"),
            FtcollCase {
                tolerate: 1,
                ..FtcollCase::plain("corrected f=1", "corrected-allreduce")
            },
            FtcollCase {
                tolerate: 2,
                dead: vec![n - 1, n / 2],
                ..FtcollCase::plain("corrected f=2, 2 dead", "corrected-allreduce")
            },
            FtcollCase {
                tolerate: 2,
                dead: vec![0, n / 2],
                ..FtcollCase::plain("corrected f=2, root 0 dead", "corrected-allreduce")
            },
        ];
        for case in &cases {
            eprintln!("n = {n}: {}", case.label);
            rows.push(ftcoll_run(case, n, args.iters, args.warmup)?);
        }
    }
    println!("8-byte allreduce, slowest surviving rank per operation (us); ratio = median / rdb's");
    println!(
        "{:>4}  {:>28}  {:>20}  {:>8}",
        "n", "configuration", "median / p99", "ratio"
    );
    for &n in &sizes {
        let reference = rows
            .iter()
            .find(|r| r.n == n && r.implementation == "ftcoll")
            .and_then(|r| r.median_us);
        for row in rows.iter().filter(|r| r.n == n) {
            let (Some(median), Some(p99)) = (row.median_us, row.p99_us) else {
                continue;
            };
            let ratio = reference.map_or("-".into(), |r| format!("{:.2}", median / r));
            let label = if row.implementation == "ftcoll" {
                "rdb (reference)"
            } else {
                &row.implementation
            };
            println!(
                "{n:>4}  {label:>28}  {:>20}  {ratio:>8}",
                format!("{median:.2} / {p99:.2}")
            );
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
