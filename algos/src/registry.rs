//! The one registry of algorithms.
//!
//! Every algorithm ftcoll runs is one [`Algorithm`] variant with one [`Descriptor`]: its name,
//! the paper it comes from, its wire id (the variant's discriminant, carried in every frame's
//! `algo` byte), which [`Kind`] of state machine runs it, where it runs, which faults it tolerates
//! and which operators it computes. Everything that dispatches on algorithms — the simulator, the
//! executor, the `Communicator`, rank processes, the console, the experiments — matches
//! [`Algorithm::kind`] or the variants exhaustively, so a new algorithm is a compile error
//! wherever it must be handled.
//!
//! Adding an algorithm: a variant here with its descriptor, its state machine in its own module,
//! and the arms the compiler then asks for.

use std::fmt;

use crate::ftco::Collective;
use crate::gossip::Rule;
use crate::protocol::Outbox;
use crate::rank::Rank;
use crate::values::{Dtype, ReduceOp};
use crate::wire::FrameHeader;

/// A protocol family's answer to a frame of an operation the receiving rank has not started
/// yet: `me` is the receiver and `from` the sender, as the operation numbers them. Queues the
/// answer into the outbox and returns true if the frame called for one. The frame itself is
/// held by the driver until the operation starts, answered or not.
pub type AnswerBeforeStart =
    fn(me: Rank, from: Rank, header: &FrameHeader, out: &mut Outbox) -> bool;

/// Every algorithm ftcoll runs; the discriminant is the wire id of its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Algorithm {
    /// Recursive doubling allreduce (000 Alg. 1).
    Rdb = 1,
    /// Approximate recursive doubling (000 Sec. 6.3).
    Ardb = 2,
    /// Push-Sum (000 Alg. 2).
    Ps = 3,
    /// Push-Flow (000 Alg. 3).
    Pf = 4,
    /// Push-Flow with local correction (000 Alg. 4).
    Pflc = 5,
    /// Push-Flow with cooperative correction (000 Alg. 5).
    Pfcc = 6,
    /// Push-cancel-flow (003 Fig. 5).
    Pcf = 7,
    /// Round-based Push-Sum on random permutations (000 Sec. 6).
    Hps = 8,
    /// Round-based PFLC on permutation cycles (000 Sec. 6).
    Hpflc = 9,
    /// Corrected-tree reduce (001 Sec. 4).
    CorrectedReduce = 10,
    /// Corrected-tree broadcast (001, PPoPP 2019).
    CorrectedBcast = 11,
    /// Corrected-tree allreduce (001 Sec. 5).
    CorrectedAllreduce = 12,
    /// FTCO broadcast (004).
    FtcoBcast = 13,
    /// FTCO reduce (004).
    FtcoReduce = 14,
    /// FTCO allreduce (004).
    FtcoAllreduce = 15,
    /// Early Returning Agreement (002).
    EraAgree = 16,
    /// Direct-exchange allreduce.
    Direct = 17,
    /// Ring allreduce: reduce-scatter then allgather, the bandwidth-optimal one.
    Ring = 18,
    /// Pipelined chain broadcast.
    ChainBcast = 19,
    /// Pipelined chain reduce.
    ChainReduce = 20,
    /// Fault-tolerant ring allreduce: ring attempts over the survivors, each closed by an
    /// agreement.
    FtRing = 21,
    /// Fault-tolerant allreduce in segment-pipelined corrected trees: attempts over the
    /// survivors, each closed by an agreement.
    FtCorrected = 22,
    /// Recursive halving and doubling allreduce (Rabenseifner).
    Rhd = 23,
}

/// Which state machine runs an algorithm, with what it needs to be built. Drivers match on this
/// exhaustively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// [`crate::rdb::RecursiveDoubling`], exact or approximate (ARDB).
    RecursiveDoubling {
        /// ARDB: stops early with the sample average.
        approximate: bool,
    },
    /// [`crate::direct::DirectAllreduce`].
    Direct,
    /// [`crate::ring::RingAllreduce`].
    Ring,
    /// [`crate::rhd::HalvingDoubling`].
    HalvingDoubling,
    /// [`crate::ftring::FtRing`].
    FtRing,
    /// [`crate::ftring::FtRing`] over [`crate::ftring::CorrectedAttempt`].
    FtCorrected,
    /// [`crate::chain::Chain`] running this collective.
    Chain(crate::chain::ChainMode),
    /// [`crate::gossip::Gossip`] with this rule.
    Gossip {
        /// The update rule.
        rule: Rule,
        /// Round-based on shared permutations (000 Sec. 6) rather than on a graph.
        round_based: bool,
    },
    /// The corrected-tree collectives of [`crate::corrected`].
    Corrected(Collective),
    /// [`crate::ftco::Ftco`] running this collective.
    Ftco(Collective),
    /// [`crate::era::EraRun`], one agreement per operation.
    Agreement,
}

/// The paper an algorithm comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paper {
    /// Casas, Gansterer, Wimmer: resilient gossip-inspired all-reduce algorithms (000).
    Gossip000,
    /// Küttler, Härtig: fault-tolerant reduce and allreduce based on correction (001).
    Corrected001,
    /// Herault, Bouteiller, Bosilca et al.: practical scalable consensus (002).
    Era002,
    /// Niederbrucker, Straková, Gansterer: push-cancel-flow (003).
    Pcf003,
    /// Margolin, Barak: tree-based fault-tolerant collective operations (004).
    Ftco004,
    /// No paper of the five: a classic algorithm.
    Classic,
}

impl Paper {
    /// The short tag the docs use ("000" ... "004").
    pub fn tag(self) -> &'static str {
        match self {
            Paper::Gossip000 => "000",
            Paper::Corrected001 => "001",
            Paper::Era002 => "002",
            Paper::Pcf003 => "003",
            Paper::Ftco004 => "004",
            Paper::Classic => "-",
        }
    }
}

/// The faults an algorithm's result survives, by the paper's own model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tolerance {
    /// Fail-stop crashes of ranks (a detector or the algorithm's own timeouts tell the rest).
    pub crashes: bool,
    /// Bit flips in messages.
    pub message_flips: bool,
    /// Bit flips in local state.
    pub state_flips: bool,
    /// Permanent link failures (the ranks at both ends live on).
    pub link_failures: bool,
    /// Lost messages.
    pub message_loss: bool,
}

/// Which operators an algorithm computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operators {
    /// Every operator that applies to the vector's element type: sum, avg, prod, min, max,
    /// and band, bor, bxor over integers.
    Any,
    /// sum, avg, min, max over numbers.
    Arithmetic,
    /// sum and avg only (mass-conserving or sampling algorithms).
    SumOrAverage,
    /// None: a broadcast moves the root's value.
    Ignored,
    /// The agreement operators over bit words (band, bor, min, max).
    Agreement,
}

impl Operators {
    /// Whether `op` is one of them.
    pub fn admits(self, op: ReduceOp) -> bool {
        match self {
            Operators::Any => op != ReduceOp::RankUnion,
            Operators::Arithmetic => matches!(
                op,
                ReduceOp::Sum | ReduceOp::Average | ReduceOp::Min | ReduceOp::Max
            ),
            Operators::SumOrAverage => matches!(op, ReduceOp::Sum | ReduceOp::Average),
            Operators::Ignored => true,
            Operators::Agreement => crate::era::check_op(op).is_ok(),
        }
    }
}

/// Where an algorithm runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Runs {
    /// In the deterministic simulator.
    pub simulated: bool,
    /// On real ranks over a transport.
    pub real: bool,
}

/// Everything ftcoll knows about one algorithm.
#[derive(Clone, Copy, Debug)]
pub struct Descriptor {
    /// The name users type (`rdb`, `ftco-allreduce`).
    pub name: &'static str,
    /// One line on what it is.
    pub summary: &'static str,
    /// Where it comes from.
    pub paper: Paper,
    /// Which state machine runs it.
    pub kind: Kind,
    /// Where it runs.
    pub runs: Runs,
    /// Which faults it tolerates.
    pub tolerates: Tolerance,
    /// Which operators it computes.
    pub operators: Operators,
    /// The user data it takes.
    pub payload: Payload,
}

/// The user data an algorithm takes: element types and how long a vector may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Payload {
    /// Element types of the user's vector it reduces.
    pub elements: &'static [Dtype],
    /// Whether a vector may have any length: the operation shell
    /// ([`crate::protocol::Segmented`]) runs it in segments. Without, a vector must fit in one
    /// frame of the transport (its frame limit less the header): the corrected allreduce stays
    /// there, since its segments could count different ranks and nothing would see it (FTCO's
    /// segments and a corrected reduce's root name their contributors, and the shell refuses
    /// to join segments whose sets differ).
    pub segmented: bool,
}

/// A vector of doubles in one frame.
const F64_ONE_FRAME: Payload = Payload {
    elements: &[Dtype::F64],
    segmented: false,
};

/// A vector of any numeric type and any length.
const ANY_NUMERIC_SEGMENTED: Payload = Payload {
    elements: &Dtype::NUMERIC,
    segmented: true,
};

const BOTH: Runs = Runs {
    simulated: true,
    real: true,
};
const NONE: Tolerance = Tolerance {
    crashes: false,
    message_flips: false,
    state_flips: false,
    link_failures: false,
    message_loss: false,
};
const CRASHES: Tolerance = Tolerance {
    crashes: true,
    ..NONE
};

/// A gossip algorithm's tolerance: the flow rules survive crashes, link failures and lost
/// messages (a flow is cumulative: the next one carries what a lost one did, and a lost
/// peer's flow is dropped); the checksummed and cancelling rules also survive bit flips.
/// Push-Sum survives none: mass in a lost message or at a crashed rank is gone, which is why
/// 000 builds Push-Flow.
const fn gossip_tolerance(rule: Rule, flips: bool) -> Tolerance {
    let flows = !matches!(rule, Rule::PushSum);
    Tolerance {
        crashes: flows,
        message_flips: flips,
        state_flips: flips,
        link_failures: flows,
        message_loss: flows,
    }
}

/// A gossip algorithm's descriptor.
const fn gossip(
    name: &'static str,
    summary: &'static str,
    paper: Paper,
    rule: Rule,
    round_based: bool,
    flips: bool,
) -> Descriptor {
    Descriptor {
        name,
        summary,
        paper,
        kind: Kind::Gossip { rule, round_based },
        runs: BOTH,
        tolerates: gossip_tolerance(rule, flips),
        operators: Operators::SumOrAverage,
        payload: F64_ONE_FRAME,
    }
}

// The descriptors, one per algorithm, in the order of the table.

const RDB: Descriptor = Descriptor {
    name: "rdb",
    summary: "recursive doubling allreduce, any N (000 Alg. 1)",
    paper: Paper::Gossip000,
    kind: Kind::RecursiveDoubling { approximate: false },
    runs: BOTH,
    tolerates: NONE,
    operators: Operators::Any,
    payload: ANY_NUMERIC_SEGMENTED,
};

const ARDB: Descriptor = Descriptor {
    name: "ardb",
    summary: "approximate recursive doubling: stops at the accuracy target or after a step budget (000 Sec. 6.3)",
    paper: Paper::Gossip000,
    kind: Kind::RecursiveDoubling { approximate: true },
    runs: BOTH,
    tolerates: NONE,
    operators: Operators::SumOrAverage,
    payload: F64_ONE_FRAME,
};

const DIRECT: Descriptor = Descriptor {
    name: "direct",
    summary: "direct-exchange allreduce: every rank sends its input to every other",
    paper: Paper::Classic,
    kind: Kind::Direct,
    runs: BOTH,
    tolerates: NONE,
    operators: Operators::Any,
    payload: ANY_NUMERIC_SEGMENTED,
};

const CHAIN_BCAST: Descriptor = Descriptor {
    name: "chain-bcast",
    summary: "pipelined chain broadcast from rank 0: every rank receives and sends the vector once",
    paper: Paper::Classic,
    kind: Kind::Chain(crate::chain::ChainMode::Bcast),
    runs: BOTH,
    tolerates: NONE,
    operators: Operators::Ignored,
    payload: ANY_NUMERIC_SEGMENTED,
};

const CHAIN_REDUCE: Descriptor = Descriptor {
    name: "chain-reduce",
    summary: "pipelined chain reduce to rank 0: every rank receives and sends the vector once",
    paper: Paper::Classic,
    kind: Kind::Chain(crate::chain::ChainMode::Reduce),
    runs: BOTH,
    tolerates: NONE,
    operators: Operators::Any,
    payload: ANY_NUMERIC_SEGMENTED,
};

const RING: Descriptor = Descriptor {
    name: "ring",
    summary: "ring allreduce: reduce-scatter then allgather, 2(N-1)/N of the vector per rank",
    paper: Paper::Classic,
    kind: Kind::Ring,
    runs: BOTH,
    tolerates: NONE,
    operators: Operators::Any,
    payload: ANY_NUMERIC_SEGMENTED,
};

const RHD: Descriptor = Descriptor {
    name: "rhd",
    summary: "recursive halving and doubling allreduce (Rabenseifner): 2(N-1)/N of the vector per rank in 2 log2 N steps",
    paper: Paper::Classic,
    kind: Kind::HalvingDoubling,
    runs: BOTH,
    tolerates: NONE,
    operators: Operators::Any,
    payload: ANY_NUMERIC_SEGMENTED,
};

const FT_RING: Descriptor = Descriptor {
    name: "ft-ring",
    summary: "fault-tolerant ring allreduce: ring attempts over the survivors, each closed by an agreement (002)",
    paper: Paper::Era002,
    kind: Kind::FtRing,
    runs: BOTH,
    tolerates: CRASHES,
    operators: Operators::Arithmetic,
    payload: ANY_NUMERIC_SEGMENTED,
};

const FT_CORRECTED: Descriptor = Descriptor {
    name: "ft-corrected",
    summary: "fault-tolerant allreduce in segment-pipelined corrected trees, attempts closed by an agreement (002)",
    paper: Paper::Corrected001,
    kind: Kind::FtCorrected,
    runs: BOTH,
    tolerates: CRASHES,
    operators: Operators::Arithmetic,
    payload: ANY_NUMERIC_SEGMENTED,
};

const PS: Descriptor = gossip(
    "ps",
    "Push-Sum gossip (000 Alg. 2)",
    Paper::Gossip000,
    Rule::PushSum,
    false,
    false,
);

const PF: Descriptor = gossip(
    "pf",
    "Push-Flow gossip (000 Alg. 3)",
    Paper::Gossip000,
    Rule::PushFlow,
    false,
    false,
);

const PFLC: Descriptor = gossip(
    "pflc",
    "Push-Flow with local correction (000 Alg. 4)",
    Paper::Gossip000,
    Rule::LocalCorrection,
    false,
    true,
);

const PFCC: Descriptor = gossip(
    "pfcc",
    "Push-Flow with cooperative correction (000 Alg. 5)",
    Paper::Gossip000,
    Rule::CooperativeCorrection,
    false,
    true,
);

const PCF: Descriptor = gossip(
    "pcf",
    "push-cancel-flow (003 Fig. 5)",
    Paper::Pcf003,
    Rule::PushCancelFlowTolerant,
    false,
    true,
);

const HPS: Descriptor = gossip(
    "hps",
    "round-based Push-Sum on random permutations (000 Sec. 6)",
    Paper::Gossip000,
    Rule::PushSum,
    true,
    false,
);

const HPFLC: Descriptor = gossip(
    "hpflc",
    "round-based PFLC on permutation cycles (000 Sec. 6)",
    Paper::Gossip000,
    Rule::LocalCorrection,
    true,
    true,
);

const CORRECTED_REDUCE: Descriptor = Descriptor {
    name: "corrected-reduce",
    summary: "reduce with up-correction (001 Sec. 4)",
    paper: Paper::Corrected001,
    kind: Kind::Corrected(Collective::Reduce),
    runs: BOTH,
    tolerates: CRASHES,
    operators: Operators::Arithmetic,
    payload: ANY_NUMERIC_SEGMENTED,
};

const CORRECTED_BCAST: Descriptor = Descriptor {
    name: "corrected-bcast",
    summary: "corrected-tree broadcast (001, PPoPP'19)",
    paper: Paper::Corrected001,
    kind: Kind::Corrected(Collective::Bcast),
    runs: BOTH,
    tolerates: CRASHES,
    operators: Operators::Ignored,
    payload: ANY_NUMERIC_SEGMENTED,
};

const CORRECTED_ALLREDUCE: Descriptor = Descriptor {
    name: "corrected-allreduce",
    summary: "corrected reduce + corrected broadcast (001 Sec. 5)",
    paper: Paper::Corrected001,
    kind: Kind::Corrected(Collective::Allreduce),
    runs: BOTH,
    tolerates: CRASHES,
    operators: Operators::Arithmetic,
    payload: F64_ONE_FRAME,
};

const FTCO_BCAST: Descriptor = Descriptor {
    name: "ftco-bcast",
    summary: "tree broadcast routing around failures (004)",
    paper: Paper::Ftco004,
    kind: Kind::Ftco(Collective::Bcast),
    runs: BOTH,
    tolerates: CRASHES,
    operators: Operators::Ignored,
    payload: ANY_NUMERIC_SEGMENTED,
};

const FTCO_REDUCE: Descriptor = Descriptor {
    name: "ftco-reduce",
    summary: "tree reduce routing around failures (004)",
    paper: Paper::Ftco004,
    kind: Kind::Ftco(Collective::Reduce),
    runs: BOTH,
    tolerates: CRASHES,
    operators: Operators::Arithmetic,
    payload: ANY_NUMERIC_SEGMENTED,
};

const FTCO_ALLREDUCE: Descriptor = Descriptor {
    name: "ftco-allreduce",
    summary: "tree allreduce routing around failures (004)",
    paper: Paper::Ftco004,
    kind: Kind::Ftco(Collective::Allreduce),
    runs: BOTH,
    tolerates: CRASHES,
    operators: Operators::Arithmetic,
    payload: ANY_NUMERIC_SEGMENTED,
};

const ERA_AGREE: Descriptor = Descriptor {
    name: "era-agree",
    summary: "Early Returning Agreement (002)",
    paper: Paper::Era002,
    kind: Kind::Agreement,
    runs: BOTH,
    tolerates: CRASHES,
    operators: Operators::Agreement,
    payload: Payload {
        elements: &[Dtype::U64],
        segmented: false,
    },
};

impl Algorithm {
    /// All algorithms, in the order of the table.
    pub const ALL: [Algorithm; 23] = [
        Algorithm::Rdb,
        Algorithm::Ardb,
        Algorithm::Direct,
        Algorithm::Ring,
        Algorithm::Rhd,
        Algorithm::FtRing,
        Algorithm::FtCorrected,
        Algorithm::ChainBcast,
        Algorithm::ChainReduce,
        Algorithm::Ps,
        Algorithm::Pf,
        Algorithm::Pflc,
        Algorithm::Pfcc,
        Algorithm::Pcf,
        Algorithm::Hps,
        Algorithm::Hpflc,
        Algorithm::CorrectedReduce,
        Algorithm::CorrectedBcast,
        Algorithm::CorrectedAllreduce,
        Algorithm::FtcoBcast,
        Algorithm::FtcoReduce,
        Algorithm::FtcoAllreduce,
        Algorithm::EraAgree,
    ];

    /// Its descriptor.
    pub const fn descriptor(self) -> Descriptor {
        match self {
            Algorithm::Rdb => RDB,
            Algorithm::Ardb => ARDB,
            Algorithm::Direct => DIRECT,
            Algorithm::Ring => RING,
            Algorithm::Rhd => RHD,
            Algorithm::FtRing => FT_RING,
            Algorithm::FtCorrected => FT_CORRECTED,
            Algorithm::ChainBcast => CHAIN_BCAST,
            Algorithm::ChainReduce => CHAIN_REDUCE,
            Algorithm::Ps => PS,
            Algorithm::Pf => PF,
            Algorithm::Pflc => PFLC,
            Algorithm::Pfcc => PFCC,
            Algorithm::Pcf => PCF,
            Algorithm::Hps => HPS,
            Algorithm::Hpflc => HPFLC,
            Algorithm::CorrectedReduce => CORRECTED_REDUCE,
            Algorithm::CorrectedBcast => CORRECTED_BCAST,
            Algorithm::CorrectedAllreduce => CORRECTED_ALLREDUCE,
            Algorithm::FtcoBcast => FTCO_BCAST,
            Algorithm::FtcoReduce => FTCO_REDUCE,
            Algorithm::FtcoAllreduce => FTCO_ALLREDUCE,
            Algorithm::EraAgree => ERA_AGREE,
        }
    }

    /// The name users type.
    pub const fn name(self) -> &'static str {
        self.descriptor().name
    }

    /// Which state machine runs it.
    pub const fn kind(self) -> Kind {
        self.descriptor().kind
    }

    /// The algorithm of a name, if any.
    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The wire id of its frames.
    pub const fn wire_id(self) -> u8 {
        self as u8
    }

    /// Decodes a frame's `algo` byte. A match, not a search: every received frame is decoded
    /// with it, some more than once.
    pub const fn from_wire(code: u8) -> Option<Algorithm> {
        use Algorithm::*;
        Some(match code {
            1 => Rdb,
            2 => Ardb,
            3 => Ps,
            4 => Pf,
            5 => Pflc,
            6 => Pfcc,
            7 => Pcf,
            8 => Hps,
            9 => Hpflc,
            10 => CorrectedReduce,
            11 => CorrectedBcast,
            12 => CorrectedAllreduce,
            13 => FtcoBcast,
            14 => FtcoReduce,
            15 => FtcoAllreduce,
            16 => EraAgree,
            17 => Direct,
            18 => Ring,
            19 => ChainBcast,
            20 => ChainReduce,
            21 => FtRing,
            22 => FtCorrected,
            23 => Rhd,
            _ => return None,
        })
    }

    /// The FTCO collective of an `ftco-*` algorithm.
    pub const fn ftco_collective(self) -> Option<Collective> {
        match self.kind() {
            Kind::Ftco(collective) => Some(collective),
            Kind::RecursiveDoubling { .. }
            | Kind::Direct
            | Kind::Ring
            | Kind::HalvingDoubling
            | Kind::FtRing
            | Kind::FtCorrected
            | Kind::Chain(_)
            | Kind::Gossip { .. }
            | Kind::Corrected(_)
            | Kind::Agreement => None,
        }
    }

    /// The update rule of a gossip algorithm.
    pub const fn gossip_rule(self) -> Option<Rule> {
        match self.kind() {
            Kind::Gossip { rule, .. } => Some(rule),
            Kind::RecursiveDoubling { .. }
            | Kind::Direct
            | Kind::Ring
            | Kind::HalvingDoubling
            | Kind::FtRing
            | Kind::FtCorrected
            | Kind::Chain(_)
            | Kind::Corrected(_)
            | Kind::Ftco(_)
            | Kind::Agreement => None,
        }
    }

    /// Whether it is a round-based gossip of 000 Sec. 6 (single precision by default there).
    pub const fn is_round_based_gossip(self) -> bool {
        matches!(
            self.kind(),
            Kind::Gossip {
                round_based: true,
                ..
            }
        )
    }

    /// What its ranks answer frames of an operation they have not started yet, if anything:
    /// FTCO acknowledges DATA and KEEPALIVE at once (004 App. B), so that a peer already in
    /// the operation does not take a late rank for dead. Drivers call it for every frame they
    /// hold for a later operation.
    pub fn answer_before_start(self) -> Option<AnswerBeforeStart> {
        match self.kind() {
            Kind::Ftco(_) => Some(crate::ftco::ack_before_start),
            Kind::RecursiveDoubling { .. }
            | Kind::Direct
            | Kind::Ring
            | Kind::HalvingDoubling
            | Kind::FtRing
            | Kind::FtCorrected
            | Kind::Chain(_)
            | Kind::Gossip { .. }
            | Kind::Corrected(_)
            | Kind::Agreement => None,
        }
    }

    /// Whether it is a broadcast from rank 0: every rank should end with rank 0's input.
    pub const fn is_bcast(self) -> bool {
        matches!(
            self.kind(),
            Kind::Corrected(Collective::Bcast) | Kind::Ftco(Collective::Bcast)
        )
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_wire_ids_round_trip_and_are_unique() {
        let mut names = std::collections::BTreeSet::new();
        for algo in Algorithm::ALL {
            assert_eq!(Algorithm::from_name(algo.name()), Some(algo));
            assert_eq!(Algorithm::from_wire(algo.wire_id()), Some(algo));
            assert!(names.insert(algo.name()), "{algo} twice");
        }
        for code in 0..=u8::MAX {
            if let Some(algo) = Algorithm::from_wire(code) {
                assert_eq!(algo.wire_id(), code);
            }
        }
        assert_eq!(Algorithm::from_name("allreduce"), None);
    }

    #[test]
    fn kinds_agree_with_their_helpers() {
        for algo in Algorithm::ALL {
            let d = algo.descriptor();
            assert!(d.runs.simulated, "{algo}: everything runs in the simulator");
            match d.kind {
                Kind::Gossip { .. } => assert_eq!(d.operators, Operators::SumOrAverage),
                Kind::Ftco(c) => assert_eq!(algo.ftco_collective(), Some(c)),
                Kind::RecursiveDoubling { approximate } => {
                    assert_eq!(d.payload.segmented, !approximate, "{algo}")
                }
                Kind::Direct
                | Kind::Ring
                | Kind::HalvingDoubling
                | Kind::FtRing
                | Kind::FtCorrected
                | Kind::Chain(_) => {
                    assert!(d.payload.segmented, "{algo}: takes any length")
                }
                Kind::Corrected(_) | Kind::Agreement => {}
            }
        }
    }

    #[test]
    fn only_ftco_answers_frames_of_operations_not_started() {
        for algo in Algorithm::ALL {
            let answers = algo.answer_before_start().is_some();
            assert_eq!(answers, algo.ftco_collective().is_some(), "{algo}");
        }
        let data = crate::ftco::FtcoKind::Data as u8;
        let header = FrameHeader::new(Algorithm::FtcoReduce, data, crate::OpId(7), Rank(1), 3);
        let answer = Algorithm::FtcoReduce.answer_before_start().unwrap();
        let mut out = Outbox::new();
        assert!(answer(Rank(0), Rank(1), &header, &mut out));
        let (to, bytes) = out.send_at(0).unwrap();
        assert_eq!(to, Rank(1));
        assert_eq!(crate::Frame::decode(bytes).unwrap().header.aux, 3);
    }
}
