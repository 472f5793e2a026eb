//! `ftcoll-launch experiment`: the list, and one small experiment end to end into a scratch
//! directory (CSV header and rows, SVG plot).

#![allow(clippy::unwrap_used, clippy::expect_used)]

// Shared with the multi-process tests; this file needs only some of it.
#[allow(dead_code)]
mod common;

fn launch(args: &[&str]) -> std::process::Output {
    common::launcher()
        .args(args)
        .output()
        .expect("ftcoll-launch runs")
}

/// Runs an experiment that must succeed; its stdout.
fn launch_ok(args: &[&str]) -> String {
    let out = launch(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_list_names_every_experiment() {
    let out = launch(&["experiment", "list"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    for name in ["fig7", "fig8", "fig9", "fig10", "table2", "000-fig7"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(name)),
            "{name}: {stdout}"
        );
    }
    let out = launch(&["experiment", "fig99"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("experiment list"));
}

#[test]
fn fig8_writes_its_csv_and_plot() {
    let _job = common::serialize();
    let dir = common::scratch("experiments-fig8");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = launch_ok(&[
        "experiment",
        "fig8",
        "--out",
        dir.to_str().unwrap(),
        "--placements",
        "2",
        "--max-ranks",
        "1024",
        "--seed",
        "5",
        "--threads",
        "1",
    ]);
    assert!(stdout.contains("base seed 5"), "{stdout}");
    let csv = std::fs::read_to_string(dir.join("fig8.csv")).unwrap();
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("n,knomial_k,roots,inactive,placements,"),
        "{header}"
    );
    let columns = header.split(',').count();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // 1K ranks (capped), with 1, 10 and 100 inactive ranks.
    assert_eq!(rows.len(), 3, "{csv}");
    for row in &rows {
        assert_eq!(row.len(), columns, "{csv}");
        let runs: u32 = row[4].parse().unwrap();
        let failed: u32 = row[5].parse().unwrap();
        assert_eq!(runs + failed, 2, "{csv}");
        let penalty: f64 = row[8].parse().unwrap();
        assert!(penalty.is_finite(), "{csv}");
    }
    let ns: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(ns, ["1024"; 3]);
    let inactive: Vec<&str> = rows.iter().map(|r| r[3]).collect();
    assert_eq!(inactive, ["1", "10", "100"]);
    let svg = std::fs::read_to_string(dir.join("fig8.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("100 inactive"),
        "{svg}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn push_sum_by_topology_writes_its_table_claims_and_plot() {
    let _job = common::serialize();
    let dir = common::scratch("experiments-000-fig7");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = launch_ok(&[
        "experiment",
        "000-fig7",
        "--out",
        dir.to_str().unwrap(),
        "--placements",
        "2",
        "--max-ranks",
        "64",
        "--threads",
        "1",
    ]);
    assert!(stdout.contains("measured at N = 64: torus"), "{stdout}");
    let csv = std::fs::read_to_string(dir.join("fig7.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "n,log2_n,topology,runs,median_iterations,min_iterations,max_iterations"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // Three topologies at N = 16, 32 and 64.
    assert_eq!(rows.len(), 9, "{csv}");
    for row in &rows {
        let log2: u32 = row[1].parse().unwrap();
        let (min, max): (u32, u32) = (row[5].parse().unwrap(), row[6].parse().unwrap());
        // Push-Sum to 1e-14 takes many times recursive doubling's log2 N steps.
        assert!(min > 5 * log2 && min <= max, "{csv}");
    }
    let svg = std::fs::read_to_string(dir.join("fig7.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("torus"), "{svg}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hps_at_the_root_writes_means_and_standard_errors() {
    let _job = common::serialize();
    let dir = common::scratch("experiments-000-fig11");
    let _ = std::fs::remove_dir_all(&dir);
    // Below 16K ranks the experiment runs the largest size allowed.
    let stdout = launch_ok(&[
        "experiment",
        "000-fig11",
        "--out",
        dir.to_str().unwrap(),
        "--placements",
        "3",
        "--max-ranks",
        "256",
        "--threads",
        "1",
    ]);
    assert!(
        stdout.contains("measured at N = 256 (log2 N = 8)"),
        "{stdout}"
    );
    let csv = std::fs::read_to_string(dir.join("fig11.csv")).unwrap();
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(header.ends_with(",mean_iterations,std_error"), "{header}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // One row per eps, 1e-2 to 1e-5.
    assert_eq!(rows.len(), 4, "{csv}");
    let mut previous = 0.0;
    for row in &rows {
        assert_eq!((row[0], row[2], row[5]), ("256", "hps", "3"), "{csv}");
        let (min, max): (f64, f64) = (row[7].parse().unwrap(), row[8].parse().unwrap());
        let (mean, se): (f64, f64) = (row[9].parse().unwrap(), row[10].parse().unwrap());
        assert!(min <= mean && mean <= max && se >= 0.0, "{csv}");
        // A tighter eps never takes fewer iterations on average.
        assert!(mean >= previous, "{csv}");
        previous = mean;
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
