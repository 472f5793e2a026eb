//! Gossip reductions (000, 003) on real processes: 64 ranks over shared memory converge to the
//! requested accuracy by the local stopping rule, also when a rank is SIGKILLed mid-run and a
//! message bit flips; the same flip ruins Push-Flow, which shows the flip happened. Links cut
//! with no transport error are found by their silence and dropped at both ends. A push budget
//! spent before the stopping rule holds is an error, not a result. ARDB stops after its budget
//! of exchanges, exact with all of them, and an estimate outside eps fails the job; `bench
//! gossip` times all of them beside recursive doubling.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

fn run(algo: &str, faults: &[&str], name: &str) -> serde_json::Value {
    let mut args = vec![
        "-n",
        "64",
        "--algo",
        algo,
        "--no-tui",
        "--gossip-period",
        "2ms",
    ];
    for fault in faults {
        args.extend(["--fault", fault]);
    }
    let (out, json) = common::run_job(&args, name, 120);
    assert!(
        out.status.success(),
        "{algo}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json
}

#[test]
fn pfcc_converges_on_64_ranks_through_a_kill_and_a_flipped_message() {
    let _job = common::serialize();
    let clean = run("pfcc", &[], "gossip-clean.json");
    assert_eq!(clean["within_eps"], true, "{clean}");
    assert_eq!(clean["ops_ok_all_ranks"], 1, "{clean}");
    // Pushes every 2 ms for a few hundred rounds: the kill at 150 ms lands mid-run, before
    // any rank can have stopped.
    let faults = [
        "kill:rank=5,at=150ms",
        "flip-msg:rank=3,bit=62,elem=0,nth=50",
    ];
    let faulty = run("pfcc", &faults, "gossip-faulty.json");
    assert_eq!(common::failed_ranks(&faulty), [5], "{faulty}");
    // Fault times count from the wire-up. With no control traffic during the operation the
    // launcher used to apply them at its next tick, up to 250 ms late (it killed at about
    // 240 ms for 100 ms); 100 ms of slack absorbs a loaded machine.
    let landed =
        faulty["failures"][0]["at_s"].as_f64().unwrap() - faulty["wireup_s"].as_f64().unwrap();
    assert!(
        (0.15..0.25).contains(&landed),
        "the kill planned at 150 ms landed at {landed:.3} s"
    );
    assert_eq!(faulty["within_eps"], true, "{faulty}");
    assert_eq!(faulty["ops_ok_all_survivors"], 1, "{faulty}");
    // PF does not survive the flip, and the job says so: a non-zero exit, and why in the JSON.
    let mut args = vec![
        "-n",
        "64",
        "--algo",
        "pf",
        "--no-tui",
        "--gossip-period",
        "2ms",
    ];
    args.extend(["--fault", faults[1]]);
    let (out, control) = common::run_job(&args, "gossip-control.json", 120);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a result not within eps exited 0: {stderr}"
    );
    assert!(stderr.contains("result is wrong"), "{stderr}");
    assert_eq!(
        control["within_eps"], false,
        "PF should not survive the flip: {control}"
    );
    assert!(control["wrong"].is_string(), "{control}");
}

/// A kill as the ranks finish (these 16 ranks stop about 200 ms in): ranks that finished
/// before hearing of it return the sum with the dead rank's input, which is admissible; those
/// still running must not stop at a local average. Finished ranks told of the crash push
/// again for that (their lingering operation's timers), so every survivor is within eps of an
/// admissible sum whichever ranks had finished.
#[test]
fn pfcc_survives_a_kill_as_the_ranks_finish() {
    let _job = common::serialize();
    let mut late = 0;
    for at in ["180ms", "210ms", "240ms"] {
        let kill = format!("kill:rank=5,at={at}");
        let args = [
            "-n",
            "16",
            "--algo",
            "pfcc",
            "--input",
            "int",
            "--no-tui",
            "--gossip-period",
            "2ms",
            "--fault",
            &kill,
        ];
        let (out, json) = common::run_job(&args, "gossip-late-kill.json", 120);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(common::failed_ranks(&json), [5], "{json}");
        assert_eq!(json["ops_ok_all_survivors"], 1, "{json}");
        assert_eq!(json["within_eps"], true, "kill at {at}: {json}");
        // Some survivor kept the dead rank's input: it had finished first.
        if json["max_rel_error"].as_f64().unwrap() > 1e-9 {
            late += 1;
        }
    }
    eprintln!("{late} of 3 kills came after some rank finished");
}

#[test]
fn push_cancel_flow_finds_cut_links_by_their_silence_and_converges() {
    let _job = common::serialize();
    // Two hypercube edges drop every frame from the start; no transport error says so.
    let faults = ["cut:link=0-1,at=0", "cut:link=2-3,at=0"];
    let json = run("pcf", &faults, "gossip-cut.json");
    assert_eq!(json["within_eps"], true, "{json}");
    assert_eq!(json["ops_ok_all_ranks"], 1, "{json}");
    assert!(json["failures"].as_array().unwrap().is_empty(), "{json}");
}

#[test]
fn a_push_budget_spent_before_the_stopping_rule_holds_fails_the_job_with_the_reason() {
    let _job = common::serialize();
    let args = [
        "-n",
        "4",
        "--algo",
        "pf",
        "--no-tui",
        "--gossip-period",
        "1ms",
        "--steps",
        "5",
    ];
    let (out, json) = common::run_job(&args, "gossip-budget.json", 60);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{json}");
    assert!(
        stderr.contains("stopping rule did not hold within its budget of 5 pushes"),
        "{stderr}"
    );
    // A rank whose neighbours all gave up has no one left and settles; the others' errors
    // still fail the job (they are not crashes the algorithm tolerates).
    assert!(stderr.contains("ended in an error"), "{stderr}");
}

#[test]
fn ardb_stops_after_its_budget_and_an_estimate_outside_eps_fails_the_job() {
    let _job = common::serialize();
    // Every exchange, also with ranks folding in (6 is not a power of two): exact.
    for n in ["8", "6"] {
        let args = [
            "-n", n, "--algo", "ardb", "--steps", "3", "--input", "int", "--ops", "3", "--no-tui",
        ];
        let (out, json) = common::run_job(&args, &format!("ardb-{n}.json"), 60);
        assert!(out.status.success(), "n = {n}: {json}");
        assert_eq!(json["max_rel_error"], 0.0, "n = {n}: {json}");
        assert_eq!(json["ops_ok_all_ranks"], 3, "n = {n}: {json}");
    }
    // One exchange of eight: each rank scales the sum of two inputs up to eight.
    let args = [
        "-n", "8", "--algo", "ardb", "--steps", "1", "--input", "uniform", "--eps", "1e-9",
        "--ops", "2", "--no-tui",
    ];
    let (out, json) = common::run_job(&args, "ardb-budget.json", 60);
    assert!(!out.status.success(), "{json}");
    assert_eq!(json["rounds"], 1, "{json}");
    assert_eq!(
        json["messages"],
        8 * 2,
        "one frame per rank per operation: {json}"
    );
    assert!(json["max_rel_error"].as_f64().unwrap() > 1e-3, "{json}");
    assert_eq!(json["within_eps"], false, "{json}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not within eps"), "{stderr}");
}

#[test]
fn bench_gossip_times_every_case_of_figs_8_and_11_and_judges_each() {
    let _job = common::serialize();
    let args = [
        "gossip",
        "--sizes",
        "2",
        "--repeat",
        "1",
        "--gossip-ops",
        "2",
        "--mpi",
        "none",
    ];
    let (out, json) = common::subcommand_json("bench", &args, "bench-gossip.json");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = json.as_array().unwrap();
    let named = |name: &'static str| rows.iter().filter(move |r| r["implementation"] == name);
    assert!(named("ps").count() >= 2, "{json}");
    assert_eq!(named("hps").count(), 4, "{json}");
    assert_eq!(named("hpflc").count(), 4, "{json}");
    for row in rows {
        assert_eq!(row["runs"], 1, "{row}");
        assert!(row["median_us"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["messages_per_rank"].as_f64().unwrap() >= 1.0, "{row}");
        let error = row["max_rel_error"].as_f64().unwrap();
        if row["eps"].is_null() {
            // The exchanges: exact, and judged so.
            assert_eq!(error, 0.0, "{row}");
            assert_eq!(row["runs_within_eps"], 1, "{row}");
        } else {
            // The stopping rule is local, and a miss is the job's error (tested above); here
            // the bench must report what the job saw, whichever way it went.
            let within = error <= row["eps"].as_f64().unwrap();
            assert_eq!(row["runs_within_eps"], u64::from(within), "{row}");
        }
    }
    // Two ranks: ARDB's one exchange is the whole of recursive doubling.
    let ardb: Vec<_> = named("ardb").collect();
    assert_eq!(ardb.len(), 1, "{json}");
    assert_eq!(ardb[0]["exchanges"], 1);
    assert_eq!(ardb[0]["messages_per_rank"], 1.0);
    // A gossip rank pushes at least once per operation. (How many more at 1e-5 than at 1e-2
    // depends on the scheduler: with the suite's other tests on the same two cores, HPS at
    // 1e-2 once pushed 46.5 times per operation and at 1e-5 11.75, so no order is asserted.)
    let hps: Vec<f64> = named("hps")
        .map(|r| r["messages_per_rank"].as_f64().unwrap())
        .collect();
    assert_eq!(hps.len(), 4, "{json}");
    assert!(hps.iter().all(|&m| m >= 1.0), "{hps:?}");
}

/// HPFLC's stopping rule waits for news from distinct ranks (min(log2 N + 1, N - 1)); after a
/// crash it waits only for those left. With four ranks and one killed, the three survivors
/// still stop by the rule and agree on the survivors' sum.
#[test]
fn hpflc_stops_by_its_rule_after_a_crash_among_four() {
    let _job = common::serialize();
    let args = [
        "-n",
        "4",
        "--algo",
        "hpflc",
        "--eps",
        "1e-3",
        "--ops",
        "3",
        "--gossip-period",
        "100us",
        "--no-tui",
        "--fault",
        "kill:rank=3,op=1",
    ];
    let (out, json) = common::run_job(&args, "hpflc-crash.json", 60);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(json["ops_ok_all_survivors"], 3, "{json}");
    assert_eq!(json["within_eps"], true, "{json}");
    assert_eq!(common::failed_ranks(&json), [3], "{json}");
}
