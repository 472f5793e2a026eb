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
