//! Gossip sums in Push-Sum's own form (weight 1 at rank 0 only, so x / w converges to the sum
//! itself, as 003 computes sums) beside ftcoll's default (the average times the live count).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ftcoll_algos::gossip::SumForm;
use ftcoll_algos::protocol::StateVar;
use ftcoll_algos::topology::Topology;
use ftcoll_algos::{Rank, ReduceOp};
use ftcoll_runtime::faults::{FaultSpec, FaultTime};
use ftcoll_runtime::job::{simulate, Algorithm, JobError, JobSpec};
use ftcoll_runtime::sim::{SimConfig, SimReport};

fn run(algo: Algorithm, form: SumForm, faults: Vec<FaultSpec>) -> SimReport {
    let mut spec = JobSpec::new(algo, 64);
    spec.op = ReduceOp::Sum;
    spec.eps = Some(1e-10);
    spec.topology = Some(Topology::hypercube(64).unwrap());
    spec.gossip.sum_form = form;
    let config = SimConfig {
        seed: 3,
        faults,
        ..SimConfig::default()
    };
    simulate(&spec, config).unwrap()
}

/// Both forms reach the sum, by different runs: the rank-zero form moves weight out from one
/// rank, so its pushes differ from the first one on.
#[test]
fn both_sum_forms_reach_the_sum_by_different_runs() {
    for algo in [Algorithm::Ps, Algorithm::Pf, Algorithm::Pcf] {
        let scaled = run(algo, SumForm::LiveCount, Vec::new());
        let own = run(algo, SumForm::RankZeroWeight, Vec::new());
        for report in [&scaled, &own] {
            assert_eq!(report.completed, 64, "{algo}: {report:?}");
            assert!(report.max_rel_error <= 1e-10, "{algo}: {report:?}");
            assert!(!report.stopped_by_budget, "{algo}: {report:?}");
        }
        assert_ne!(scaled.trace_hash, own.trace_hash, "{algo}");
        println!(
            "{algo}: live count {} pushes, rank-zero weight {}",
            scaled.rounds, own.rounds
        );
    }
}

/// PFLC repairs a flipped bit of a rank's initial mass from its known initial weight: 0 away
/// from rank 0 in the rank-zero form. Restoring the weight of every rank to 1 would add a
/// rank's worth of weight and divide the sum by about 2.
#[test]
fn a_flip_of_an_initial_value_is_repaired_with_the_ranks_own_weight() {
    let flip = FaultSpec::FlipState {
        rank: Rank(3),
        var: StateVar::Value { elem: 0 },
        bit: 52,
        at: FaultTime::Steps(100),
    };
    let report = run(Algorithm::Pflc, SumForm::RankZeroWeight, vec![flip]);
    assert_eq!(report.state_flips, 1);
    assert_eq!(report.completed, 64, "{report:?}");
    assert!(report.max_rel_error <= 1e-10, "{report:?}");
}

/// The rank-zero form is a sum's: an average asks for the typed error.
#[test]
fn the_rank_zero_form_of_an_average_is_refused() {
    let mut spec = JobSpec::new(Algorithm::Pf, 8);
    spec.op = ReduceOp::Average;
    spec.gossip.sum_form = SumForm::RankZeroWeight;
    assert_eq!(spec.validate(), Err(JobError::SumFormWithoutSum));
}
