//! FTCO in 004's step model (Sec. 5: LogP with L = 10, o = 1, one action per rank per step, the
//! inbound queue served by Alg. 1's priorities): Table 2's fault-free row, a case small enough
//! to count by hand, and the service distance mattering under faults.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_algos::ftco::{FtcoOptions, ServiceDistance};
use ftcoll_algos::topology::TreeShape;
use ftcoll_algos::Rank;
use ftcoll_runtime::check::ftco::{simulate_watched, WatchedFtco};
use ftcoll_runtime::faults::{FaultSpec, FaultTime, KillTime};
use ftcoll_runtime::job::{simulate, Algorithm, JobSpec};
use ftcoll_runtime::sim::{InputKind, SimConfig, SimReport, Simulation};

fn step_spec(n: u32, shape: TreeShape, roots: u32, service: ServiceDistance) -> JobSpec {
    let mut spec = JobSpec::new(Algorithm::FtcoAllreduce, n);
    spec.input = InputKind::Ones;
    spec.ftco = FtcoOptions {
        shape,
        roots,
        service,
        step_model: true,
        ..FtcoOptions::default()
    };
    spec
}

/// What 004 Table 2 reports of one run.
#[derive(Debug, PartialEq)]
struct Row {
    latency: u64,
    /// Messages sent until each rank finished, summed over ranks.
    work: u64,
    output_spread: u64,
    max_queue: usize,
}

fn row(spec: &JobSpec, sim: &Simulation<WatchedFtco>, report: &SimReport) -> Row {
    let cost = spec.sim_config(SimConfig::default()).cost;
    let finish: Vec<u64> = sim
        .ranks()
        .iter()
        .map(|w| cost.finish_of(w.completed_at.expect("every rank completes").0))
        .collect();
    let last = *finish.iter().max().unwrap();
    assert_eq!(last, report.completion_steps);
    Row {
        latency: last,
        work: sim.ranks().iter().map(|w| w.sent_until_done).sum(),
        output_spread: last - finish.iter().min().unwrap(),
        max_queue: sim
            .ranks()
            .iter()
            .map(|w| w.ftco().queue_peak())
            .max()
            .unwrap(),
    }
}

/// 004 Table 2, input spread 0: 171 steps, 3 messages per node, output spread 43, longest queue
/// 9, at N = 65,536 on the multi-root k-nomial tree of radix 9 (9 fully connected roots), the
/// best radix of that shape at that size. The work is 3(N - R) messages: DATA up, the ACK of
/// each child's DATA, DATA down; the roots' exchange adds R(R - 1) DATA and the ACKs a root
/// sends before it finishes, and a rank's last ACK comes after it finished.
#[test]
fn table_2_fault_free_row_at_64k() {
    let n = 65_536;
    let spec = step_spec(
        n,
        TreeShape::KNomial { k: 9 },
        9,
        ServiceDistance::Rsd { ratio: 0.5 },
    );
    let (sim, report) = simulate_watched(&spec, SimConfig::default()).unwrap();
    assert_eq!(report.completed, n);
    assert_eq!(report.max_rel_error, 0.0);
    let row = row(&spec, &sim, &report);
    println!(
        "{row:?}, {:.4} messages per rank",
        row.work as f64 / f64::from(n)
    );
    assert_eq!(row.latency, 171);
    assert_eq!(row.output_spread, 43);
    assert_eq!(row.max_queue, 9);
    assert_eq!(format!("{:.2}", row.work as f64 / f64::from(n)), "3.00");
    let edges = u64::from(n - 9);
    assert!(
        (3 * edges..=3 * edges + 2 * 9 * 8).contains(&row.work),
        "{row:?}"
    );
}

/// Three ranks, a binary tree: the leaves send DATA in step 0, which the root handles in steps
/// 11 and 12 (o + L after the send); it sends the result in steps 13 and 14, and the leaves
/// handle it in 24 and 25. The last rank finishes at the end of step 25; the root, which
/// finished when it sent its last result, at the end of step 14. Before finishing the root sent
/// two messages and each leaf one: the ACKs of the leaves' DATA and the leaves' ACKs of the
/// result come after.
#[test]
fn three_ranks_take_the_steps_counted_by_hand() {
    let spec = step_spec(3, TreeShape::BINARY, 1, ServiceDistance::Disd);
    let (sim, report) = simulate_watched(&spec, SimConfig::default()).unwrap();
    assert_eq!(
        row(&spec, &sim, &report),
        Row {
            latency: 26,
            work: 4,
            output_spread: 11,
            max_queue: 2,
        }
    );
    assert_eq!(report.messages, 8);
}

/// The same tree without the step model finishes later: the runtime's engine sends its ACKs as
/// it handles each DATA and finishes only once its result is acknowledged.
#[test]
fn the_runtime_engine_is_slower_than_the_step_model() {
    let mut spec = step_spec(4096, TreeShape::KNomial { k: 7 }, 7, ServiceDistance::Disd);
    let steps = simulate(&spec, SimConfig::default()).unwrap();
    spec.ftco.step_model = false;
    let runtime = simulate(&spec, SimConfig::default()).unwrap();
    assert_eq!(steps.completed, 4096);
    assert_eq!(runtime.completed, 4096);
    println!(
        "step model {} steps, runtime engine {}",
        steps.completion_steps, runtime.completion_steps
    );
    assert!(steps.completion_steps < runtime.completion_steps);
}

/// In the step model a rank handles one message per step, picked by the service distance, so
/// RSD and DISD run differently once faults make ranks probe beyond distance 1 (in the
/// runtime's engine, which empties its queue at every input, they did not). 004 reports a
/// negligible difference in latency; both must end with every live rank holding the same
/// exact survivors' sum.
#[test]
fn rsd_and_disd_differ_under_faults_and_both_stay_exact() {
    let n = 1024;
    let faults: Vec<FaultSpec> = [(5, 0), (77, 0), (300, 0), (2, 40), (513, 60), (901, 90)]
        .iter()
        .map(|&(rank, at)| FaultSpec::Kill {
            rank: Rank(rank),
            at: KillTime::At(FaultTime::Steps(at)),
        })
        .collect();
    let mut runs = Vec::new();
    for service in [ServiceDistance::Rsd { ratio: 0.5 }, ServiceDistance::Disd] {
        let spec = step_spec(n, TreeShape::KNomial { k: 4 }, 4, service);
        let config = SimConfig {
            faults: faults.clone(),
            ..SimConfig::default()
        };
        let report = simulate(&spec, config).unwrap();
        assert_eq!(report.completed, n - 6, "{service:?}: {report:?}");
        assert_eq!(report.result_spread, Some(0.0), "{service:?}");
        assert_eq!(report.admissible_error, Some(0.0), "{service:?}");
        println!(
            "{service:?}: {} steps, {} messages",
            report.completion_steps, report.messages
        );
        runs.push(report);
    }
    assert_ne!(runs[0].trace_hash, runs[1].trace_hash);
}
