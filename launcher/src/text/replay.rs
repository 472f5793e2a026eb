//! Command lines that replay a checked case: the checkers return typed cases, and only the
//! launcher knows how its own command line spells them.

use ftcoll_algos::ftco::ServiceDistance;
use ftcoll_algos::topology::TreeShape;
use ftcoll_runtime::check::ftco::{FtcoCase, FtcoViolation};

/// The `ftcoll-launch` command that runs `case` (same seed, inputs and faults, hence the same
/// message schedule).
pub fn ftco_command(case: &FtcoCase) -> String {
    let tree = match case.shape {
        TreeShape::KAry { k } => format!("kary:{k}"),
        TreeShape::KNomial { k } => format!("knomial:{k}"),
    };
    let service = match case.service {
        ServiceDistance::Rsd { ratio: 0.5 } => "rsd".to_string(),
        ServiceDistance::Rsd { ratio } => format!("rsd:{ratio}"),
        ServiceDistance::Disd => "disd".to_string(),
    };
    let mut command = format!(
        "ftcoll-launch --sim --no-tui --seed {} --algo {} -n {} --ftco-tree {tree} \
         --ftco-roots {} --service-distance {service} --detect-timeout {} --op sum \
         --input onehot --len {}",
        case.seed,
        case.algorithm(),
        case.n,
        case.roots,
        case.detect_timeout,
        case.n
    );
    if case.step_model {
        command.push_str(" --ftco-step-model");
    }
    for f in &case.failures {
        command.push_str(&format!(" --fault kill:rank={},at={}", f.rank, f.at));
    }
    for spec in &case.laggards {
        command.push_str(&format!(" --fault {spec}"));
    }
    command
}

/// A violation with the command that replays it.
pub fn ftco_report(violation: &FtcoViolation) -> String {
    format!("{violation}\n  replay: {}", ftco_command(&violation.case))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ftcoll_algos::fault::{FaultSpec, FaultTime};
    use ftcoll_algos::ftco::Collective;
    use ftcoll_algos::Rank;
    use ftcoll_runtime::check::corrected::ScheduledFailure;

    #[test]
    fn the_replay_command_names_the_whole_case() {
        let case = FtcoCase {
            collective: Collective::Allreduce,
            n: 9,
            shape: TreeShape::KNomial { k: 3 },
            roots: 2,
            service: ServiceDistance::Rsd { ratio: 0.25 },
            detect_timeout: 60,
            failures: vec![ScheduledFailure { rank: 4, at: 0 }],
            laggards: vec![
                FaultSpec::Slow {
                    rank: Rank(2),
                    factor: 60,
                    at: FaultTime::Steps(30),
                },
                FaultSpec::Stop {
                    rank: Rank(5),
                    at: FaultTime::Steps(7),
                },
            ],
            step_model: true,
            seed: 17,
        };
        assert_eq!(
            ftco_command(&case),
            "ftcoll-launch --sim --no-tui --seed 17 --algo ftco-allreduce -n 9 \
             --ftco-tree knomial:3 --ftco-roots 2 --service-distance rsd:0.25 \
             --detect-timeout 60 --op sum --input onehot --len 9 --ftco-step-model \
             --fault kill:rank=4,at=0 \
             --fault slow:rank=2,factor=60,at=30 --fault stop:rank=5,at=7"
        );
        // The command parses back to the same faults.
        for spec in &case.laggards {
            assert_eq!(
                crate::text::parse_fault(&spec.to_string()).as_ref(),
                Ok(spec)
            );
        }
    }
}
