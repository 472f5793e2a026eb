//! The Early Returning Agreement on real processes: a loop of agreements in which ranks are
//! SIGKILLed (the root among them), each failure acknowledged and the communicator shrunk, with
//! every survivor deciding the same contributor set every time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[test]
fn agreement_loop_survives_kills_and_shrinks_without_disagreement() {
    let _job = common::serialize();
    let (out, json) = common::run_job(
        &[
            "-n",
            "12",
            "--algo",
            "era-agree",
            "--ops",
            "1500",
            "--fault",
            "kill:rank=0,op=200",
            "--fault",
            "kill:rank=5,op=600",
            "--fault",
            "kill:rank=1,op=601",
            "--fault",
            "kill:rank=11,op=1200",
        ],
        "era_loop",
        120,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let failed = common::failed_ranks(&json);
    assert_eq!(failed, vec![0, 1, 5, 11], "{json}");
    // Every agreement completed at every survivor, all decided alike, and each decision names
    // the survivors plus some of the ranks that died during it.
    assert_eq!(json["ops_ok_all_survivors"], 1500, "{json}");
    assert_eq!(json["consistent"], true, "{json}");
    assert_eq!(json["admissible_error"], 0.0, "{json}");
    assert_eq!(json["exact"], true, "{json}");
}

#[test]
fn failure_free_agreements_name_every_rank() {
    let _job = common::serialize();
    let (out, json) = common::run_job(
        &[
            "-n",
            "6",
            "--algo",
            "era-agree",
            "--ops",
            "300",
            "--era-tree",
            "bin/star",
            "--ranks-per-node",
            "3",
        ],
        "era_clean",
        60,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json["ops_ok_all_ranks"], 300, "{json}");
    assert_eq!(json["max_rel_error"], 0.0, "{json}");
}

/// `bench era` end to end (ftcoll's side; the ULFM prefix points nowhere, so that side is
/// skipped with a note): every role's failure run completes, the detecting agreement reports
/// the failure and a single acknowledge-and-agree round settles it, at every survivor.
#[test]
fn bench_era_measures_every_failure_role() {
    let _job = common::serialize();
    let path = common::scratch("bench_era.json");
    let out = common::launcher()
        .args([
            "bench", "era", "--sizes", "4", "--iters", "50", "--warmup", "10",
        ])
        .args(["--repeat", "1", "--failure-n", "8", "--ranks-per-node", "2"])
        .args(["--ulfm-prefix", "/nonexistent/ulfm", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("ULFM not installed"), "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let latency = json["latency"].as_array().unwrap();
    let implementations: Vec<&str> = latency
        .iter()
        .map(|r| r["implementation"].as_str().unwrap())
        .collect();
    assert_eq!(implementations, ["era", "rdb"], "{json}");
    assert!(latency
        .iter()
        .all(|r| r["median_us"].as_f64().unwrap() > 0.0));
    let failure = json["failure"].as_array().unwrap();
    let roles: Vec<&str> = failure
        .iter()
        .map(|r| r["role"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "root",
            "child of root",
            "node master",
            "child of master",
            "whole node"
        ]
    );
    for row in failure {
        assert_eq!(row["runs_ok"], 1, "{row}");
        let figures = &row["figures"];
        assert_eq!(figures["stabilize_count"], 1.0, "{row}");
        assert!(figures["detect_us"].as_f64().unwrap() > 0.0, "{row}");
        assert!(figures["post_median_us"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert_eq!(failure[4]["role"]["victims"], serde_json::json!([2, 3]));
}
