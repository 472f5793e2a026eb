//! The built-in job, as one rank runs it: draw a reproducible input, run the collective `ops`
//! times, report each outcome to the launcher.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use ftcoll_algos::chain::ChainMode;
use ftcoll_algos::corrected::{Correction, FailureInfo};
use ftcoll_algos::ftco::{Collective as FtcoCollective, ServiceDistance};
use ftcoll_algos::topology::TreeShape;
use ftcoll_algos::values::{digest, Dtype, Element, Values, ValuesRef};
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{CommError, Communicator, CorrectedOptions, Outcome};
use ftcoll_runtime::control::{OpReport, REPORT_SAMPLE_ELEMS};
use ftcoll_runtime::ftco_call::FtcoCall;
use ftcoll_runtime::gossip_call::GossipCall;
use ftcoll_runtime::job::{Algorithm, GossipOptions, Kind};
use ftcoll_runtime::sim::{rank_inputs, InputKind};
use ftcoll_runtime::transport::huge_pages;
use ftcoll_runtime::transport::shm::shared_heap;

use super::hooks::BuiltinJobHooks;

mod bench;
use bench::{bench, bench_failure, FaultOpRun};

/// Flags of the hidden `__rank` subcommand the launcher starts.
#[derive(Debug, Args, Clone)]
pub struct RankArgs {
    /// Algorithm.
    #[arg(long, value_parser = ftcoll_launcher::text::options::parse_algorithm)]
    pub algo: Algorithm,
    /// Operator.
    #[arg(long, value_parser = ftcoll_launcher::text::options::parse_op)]
    pub op: ReduceOp,
    /// Inputs.
    #[arg(long, value_parser = ftcoll_launcher::text::options::parse_input)]
    pub input: InputKind,
    /// Elements per rank.
    #[arg(long)]
    pub len: usize,
    /// Element type of the vectors.
    #[arg(long, default_value = "f64", value_parser = ftcoll_launcher::text::options::parse_dtype)]
    pub dtype: Dtype,
    /// Seed.
    #[arg(long)]
    pub seed: u64,
    /// Operations.
    #[arg(long)]
    pub ops: u64,
    /// Failures the corrected-tree algorithms tolerate.
    #[arg(long, default_value_t = 1)]
    pub tolerate: u32,
    /// Failure information of corrected-reduce.
    #[arg(long, default_value = "count", value_parser = ftcoll_launcher::text::options::parse_failure_info)]
    pub failure_info: FailureInfo,
    /// Correction phase of the corrected broadcast.
    #[arg(long, default_value = "checked", value_parser = ftcoll_launcher::text::options::parse_correction)]
    pub correction: Correction,
    /// Benchmark mode: untimed warm-up operations, then `ops` timed ones whose times are sent
    /// once at the end.
    #[arg(long)]
    pub bench_warmup: Option<u64>,
    /// Benchmark mode of `era-agree` after 002 Fig. 3: the ranks the launcher's faults kill die
    /// at the first operation after the warm-up; the survivors time the detecting agreement,
    /// the stabilizing ones and `ops` post-failure ones.
    #[arg(long)]
    pub bench_failure: bool,
    /// Benchmark mode of a collective with a fault (004 Table 1, Fig. 6): the ranks the
    /// launcher's faults kill die at the first operation after the warm-up; the survivors time
    /// that operation (with `--bench-recovery`: the operation, an agreement on whether it
    /// succeeded everywhere and, if not, revoke, shrink and a retry, as a ULFM application
    /// recovers), then `ops` more.
    #[arg(long)]
    pub bench_fault_op: bool,
    /// See `--bench-fault-op`.
    #[arg(long)]
    pub bench_recovery: bool,
    /// With `--bench-fault-op`: the victims enter the faulty operation (and die at its start)
    /// a little after the survivors, so that no survivor knows of the deaths when it starts.
    #[arg(long)]
    pub bench_victims_lag: bool,
    /// Tree of the ftco-* algorithms.
    #[arg(long, default_value = "knomial:2", value_parser = ftcoll_launcher::text::parse_shape)]
    pub ftco_tree: TreeShape,
    /// Roots of the ftco-* tree.
    #[arg(long, default_value_t = 1)]
    pub ftco_roots: u32,
    /// Detection timeout of the ftco-* algorithms (a time with its unit).
    #[arg(long, default_value = "100ms", value_parser = ftcoll_launcher::text::options::parse_wall_time)]
    pub detect_timeout: std::time::Duration,
    /// Service-distance function of the ftco-* algorithms.
    #[arg(long, default_value = "rsd", value_parser = ftcoll_launcher::text::parse_service)]
    pub service_distance: ServiceDistance,
    /// The ftco-* algorithms also act on failure notices.
    #[arg(long)]
    pub ftco_notices: bool,
    /// The ftco-* algorithms use one fixed timeout for every message.
    #[arg(long)]
    pub ftco_fixed_timeout: bool,
    /// Gossip: time between pushes.
    #[arg(long, default_value = "1ms", value_parser = ftcoll_launcher::text::options::parse_wall_time)]
    pub gossip_period: std::time::Duration,
    /// Gossip: accuracy target of the stopping rule.
    #[arg(long)]
    pub eps: Option<f64>,
    /// Gossip: bound on pushes.
    #[arg(long)]
    pub steps: Option<u32>,
    /// Gossip: topology kind.
    #[arg(long, value_parser = ftcoll_algos::topology::TopologyKind::from_name)]
    pub topology: Option<ftcoll_algos::topology::TopologyKind>,
    /// Gossip: f32 or f64.
    #[arg(long = "precision", value_parser = ftcoll_launcher::text::options::parse_single_precision)]
    pub single_precision: Option<bool>,
    /// Gossip: checksum threshold.
    #[arg(long)]
    pub tau: Option<f64>,
    /// Gossip: round-synchronous pushes.
    #[arg(long)]
    pub gossip_sync: bool,
    /// pcf as printed.
    #[arg(long)]
    pub pcf_as_printed: bool,
    /// Run `Communicator::allreduce`, the library's pick by size, instead of `--algo`'s (the
    /// benchmark of the pick).
    #[arg(long)]
    pub library_pick: bool,
    /// The job's vectors in the kernel's base pages, without the huge-page hint (`bench
    /// --base-pages`).
    #[arg(long)]
    pub base_pages: bool,
    /// Ring, ft-ring and the library's pick reduce the input into a second vector, as
    /// `MPI_Allreduce(in, out)` does (the launcher's `--out-of-place`).
    #[arg(long)]
    pub out_of_place: bool,
    /// Console-paced: wait for the launcher's go before each operation, and draw fresh inputs
    /// for each (operation K from the seed of `live::op_seed`).
    #[arg(long)]
    pub paced: bool,
}

/// The FTCO options of real ranks (see [`ftcoll_runtime::ftco_call::real_time_options`]).
pub fn live_ftco_options(
    shape: ftcoll_algos::topology::TreeShape,
    roots: u32,
    detect_timeout: std::time::Duration,
    service: ftcoll_algos::ftco::ServiceDistance,
    fixed_timeout: bool,
) -> ftcoll_algos::ftco::FtcoOptions {
    ftcoll_runtime::ftco_call::real_time_options(
        shape,
        roots,
        detect_timeout,
        service,
        fixed_timeout,
    )
}

/// Runs one rank of the built-in job.
pub fn main(args: &RankArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("rank failed: {error}");
            ExitCode::from(3)
        }
    }
}

/// Runs `$call` with `$s` bound to the slice inside any numeric [`Values`].
macro_rules! on_slice {
    ($values:expr, $s:ident => $call:expr) => {
        match $values {
            Values::F64($s) => $call,
            Values::F32($s) => $call,
            Values::I32($s) => $call,
            Values::I64($s) => $call,
            Values::U32($s) => $call,
            Values::U64($s) => $call,
            Values::RankIds(_) => Err(CommError::Config("rank-id sets are not user data".into())),
        }
    };
}

/// Runs `$call` with `$i` and `$o` bound to the slices inside two numeric [`Values`] of one
/// type (the job's input and output).
macro_rules! on_pair {
    ($input:expr, $output:expr, $i:ident, $o:ident => $call:expr) => {
        match ($input, $output) {
            (Values::F64($i), Values::F64($o)) => $call,
            (Values::F32($i), Values::F32($o)) => $call,
            (Values::I32($i), Values::I32($o)) => $call,
            (Values::I64($i), Values::I64($o)) => $call,
            (Values::U32($i), Values::U32($o)) => $call,
            (Values::U64($i), Values::U64($o)) => $call,
            _ => Err(CommError::Config(
                "the job's input and output vectors differ in type".into(),
            )),
        }
    };
}

/// The built-in job's input of `rank` in the job's element type.
fn typed_inputs(args: &RankArgs, rank: u32, seed: u64) -> Values {
    fn cast<T: Element>(xs: Vec<f64>) -> Vec<T> {
        xs.into_iter().map(T::from_f64).collect()
    }
    let xs = rank_inputs(args.input, rank, args.len, seed);
    match args.dtype {
        Dtype::F32 => Values::F32(cast(xs)),
        Dtype::I32 => Values::I32(cast(xs)),
        Dtype::I64 => Values::I64(cast(xs)),
        Dtype::U32 => Values::U32(cast(xs)),
        Dtype::U64 => Values::U64(cast(xs)),
        Dtype::F64 | Dtype::Empty | Dtype::RankIds => Values::F64(xs),
    }
}

/// A copy of `values` where the neighbours can map it (the shared heap, on one node) or else
/// in huge pages (see [`huge_pages`]): the job's vectors are most of a rank's memory, and a
/// killed rank is reaped, and its death announced, only once that is freed.
fn hinted(values: &Values, base_pages: bool) -> Values {
    shared_heap::shared(|| hinted_here(values, base_pages))
}

fn hinted_here(values: &Values, base_pages: bool) -> Values {
    if base_pages {
        return values.clone();
    }
    match values {
        Values::F64(v) => Values::F64(huge_pages::copy_of(v)),
        Values::F32(v) => Values::F32(huge_pages::copy_of(v)),
        Values::I32(v) => Values::I32(huge_pages::copy_of(v)),
        Values::I64(v) => Values::I64(huge_pages::copy_of(v)),
        Values::U32(v) => Values::U32(huge_pages::copy_of(v)),
        Values::U64(v) => Values::U64(huge_pages::copy_of(v)),
        Values::RankIds(_) => values.clone(),
    }
}

/// What a rank reports of its result: a sample, the length and a digest, never the vector.
fn report_of(data: &Values) -> (Vec<f64>, u64, u64) {
    let head = data
        .as_ref()
        .slice(0..data.len().min(REPORT_SAMPLE_ELEMS))
        .unwrap_or(ftcoll_algos::ValuesRef::Empty);
    let mut sample = Vec::with_capacity(head.len());
    head.push_as_f64(&mut sample);
    (sample, data.len() as u64, digest(data.as_ref()))
}

/// The collective the built-in job runs, from the launcher's flags.
#[derive(Clone, Copy, Debug)]
enum Collective {
    Rdb,
    /// Approximate recursive doubling with its budget of exchanges (`--steps`).
    Ardb {
        exchanges: u32,
    },
    /// The direct-exchange allreduce.
    Direct,
    /// The ring allreduce.
    Ring,
    /// Recursive halving and doubling.
    Rhd,
    /// The fault-tolerant ring allreduce.
    FtRing,
    /// The fault-tolerant allreduce in segment-pipelined corrected trees.
    FtCorrected(CorrectedOptions),
    /// `Communicator::allreduce`: the library's pick by size.
    Pick,
    /// The pipelined chain broadcast from rank 0.
    ChainBcast,
    /// The pipelined chain reduce to rank 0.
    ChainReduce,
    CorrectedAllreduce(CorrectedOptions),
    CorrectedReduce(CorrectedOptions),
    CorrectedBcast(CorrectedOptions),
    /// One agreement per operation on the contributors' set; a failure the agreement reports
    /// is acknowledged and the communicator shrunk, as a ULFM application recovers.
    EraAgree,
    /// An FTCO collective (004).
    Ftco(FtcoCall),
    /// A gossip reduction (000, 003), with the options of [`gossip_call`].
    Gossip,
}

impl Collective {
    fn from_args(args: &RankArgs) -> Collective {
        let options = CorrectedOptions {
            tolerate: args.tolerate,
            info: args.failure_info,
            correction: args.correction,
        };
        if args.library_pick {
            return Collective::Pick;
        }
        match args.algo.kind() {
            Kind::RecursiveDoubling { approximate: false } => Collective::Rdb,
            // The launcher refuses ardb on real ranks without a budget; a rank started by hand
            // without one runs every exchange (exact, reported as ARDB).
            Kind::RecursiveDoubling { approximate: true } => Collective::Ardb {
                exchanges: args.steps.unwrap_or(u32::MAX),
            },
            Kind::Direct => Collective::Direct,
            Kind::Ring => Collective::Ring,
            Kind::HalvingDoubling => Collective::Rhd,
            Kind::FtRing => Collective::FtRing,
            Kind::FtCorrected => Collective::FtCorrected(options),
            Kind::Chain(ChainMode::Bcast) => Collective::ChainBcast,
            Kind::Chain(ChainMode::Reduce) => Collective::ChainReduce,
            Kind::Corrected(FtcoCollective::Allreduce) => Collective::CorrectedAllreduce(options),
            Kind::Corrected(FtcoCollective::Reduce) => Collective::CorrectedReduce(options),
            Kind::Corrected(FtcoCollective::Bcast) => Collective::CorrectedBcast(options),
            Kind::Agreement => Collective::EraAgree,
            Kind::Ftco(collective) => {
                let options = live_ftco_options(
                    args.ftco_tree,
                    args.ftco_roots,
                    args.detect_timeout,
                    args.service_distance,
                    args.ftco_fixed_timeout,
                );
                Collective::Ftco(FtcoCall {
                    collective,
                    options,
                    notices: args.ftco_notices,
                    seed: args.seed,
                })
            }
            Kind::Gossip { .. } => Collective::Gossip,
        }
    }

    /// Runs it once for the benchmark loop: the plain allreduces are called the way an
    /// application calls them (as the MPI side calls `MPI_Allreduce`), their outcome dropped
    /// where it lies rather than moved into a report.
    fn run_timed(
        self,
        comm: &mut Communicator,
        from: Option<&Values>,
        data: &mut Values,
        op: ReduceOp,
    ) -> Result<(), CommError> {
        let result = match (self, from) {
            (Collective::Rdb, None) => on_slice!(data, s => comm.allreduce_rdb(s, op)),
            (Collective::Direct, None) => on_slice!(data, s => comm.allreduce_direct(s, op)),
            (Collective::Ring, None) => on_slice!(data, s => comm.allreduce_ring(s, op)),
            (Collective::Rhd, None) => on_slice!(data, s => comm.allreduce_rhd(s, op)),
            (Collective::Pick, None) => on_slice!(data, s => comm.allreduce(s, op)),
            (other, from) => return other.run_from(comm, from, data, op).map(|_| ()),
        };
        // Not `result.map(..)`: that moves the outcome into the closure, the copy this avoids.
        match result {
            Ok(_) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// [`Collective::run`] into `data` from `from` where the job is out of place
    /// (`--out-of-place`): ring, ft-ring and the library's pick have an out-of-place form;
    /// any other collective gets the input copied into `data` first.
    fn run_from(
        self,
        comm: &mut Communicator,
        from: Option<&Values>,
        data: &mut Values,
        op: ReduceOp,
    ) -> Result<(Outcome, bool), CommError> {
        let Some(input) = from else {
            return self.run(comm, data, op, None);
        };
        let outcome = match self {
            Collective::Ring => on_pair!(input, data, i, o => comm.allreduce_ring_into(i, o, op)),
            Collective::FtRing => on_pair!(input, data, i, o => comm.ft_allreduce_into(i, o, op)),
            Collective::Pick => on_pair!(input, data, i, o => comm.allreduce_into(i, o, op)),
            other => {
                data.copy_from(input.as_ref());
                return other.run(comm, data, op, None);
            }
        };
        Ok((outcome?, true))
    }

    /// [`Collective::run`], and for an agreement also the digest of the agreed set in
    /// `agreed_set`, for the report, with the property the decision violates, if any.
    fn run_reporting(
        self,
        comm: &mut Communicator,
        data: &mut Values,
        op: ReduceOp,
        gossip: Option<&GossipCall>,
        agreed_set: &mut Option<(u64, Option<String>)>,
    ) -> Result<(Outcome, bool), CommError> {
        match (self, &mut *data) {
            (Collective::EraAgree, Values::F64(data)) => {
                let decided = agree_once(comm, data)?;
                *agreed_set = Some((decided.set_digest, decided.violation));
                Ok((decided.outcome, true))
            }
            _ => self.run(comm, data, op, gossip),
        }
    }

    /// Runs it once; `Ok(true)` when this rank holds a result to report.
    fn run(
        self,
        comm: &mut Communicator,
        data: &mut Values,
        op: ReduceOp,
        gossip: Option<&GossipCall>,
    ) -> Result<(Outcome, bool), CommError> {
        let root_only = comm.rank() == 0;
        let typed = match self {
            Collective::Rdb => Some(on_slice!(data, s => comm.allreduce_rdb(s, op))),
            Collective::Direct => Some(on_slice!(data, s => comm.allreduce_direct(s, op))),
            Collective::Ring => Some(on_slice!(data, s => comm.allreduce_ring(s, op))),
            Collective::Rhd => Some(on_slice!(data, s => comm.allreduce_rhd(s, op))),
            Collective::FtRing => Some(on_slice!(data, s => comm.ft_allreduce(s, op))),
            Collective::FtCorrected(o) => {
                Some(on_slice!(data, s => comm.ft_corrected_allreduce(s, op, o)))
            }
            Collective::CorrectedBcast(o) => {
                Some(on_slice!(data, s => comm.corrected_bcast(s, 0, o)))
            }
            Collective::Ftco(call) => {
                let outcome = on_slice!(data, s => comm.ftco(s, op, &call))?;
                let has_value = call.collective != FtcoCollective::Reduce || root_only;
                return Ok((outcome, has_value));
            }

            Collective::Pick => Some(on_slice!(data, s => comm.allreduce(s, op))),
            Collective::ChainBcast => Some(on_slice!(data, s => comm.bcast(s, 0))),
            Collective::ChainReduce => {
                let outcome = on_slice!(data, s => comm.reduce(s, op, 0))?;
                return Ok((outcome, root_only));
            }
            Collective::CorrectedReduce(o) => {
                let outcome = on_slice!(data, s => comm.corrected_reduce(s, op, 0, o))?;
                return Ok((outcome, root_only));
            }
            _ => None,
        };
        if let Some(result) = typed {
            return Ok((result?, true));
        }
        let Values::F64(data) = data else {
            // The launcher checks `--dtype` against the algorithm's payload; a rank started
            // by hand may not have.
            return Err(CommError::Config(
                "this algorithm reduces f64 vectors only".into(),
            ));
        };
        match self {
            Collective::Ardb { exchanges } => Ok((comm.allreduce_ardb(data, op, exchanges)?, true)),
            Collective::Gossip => match gossip {
                Some(call) => Ok((comm.gossip(data, op, call)?, true)),
                None => Err(CommError::Config("gossip job without its options".into())),
            },
            Collective::Rdb
            | Collective::Direct
            | Collective::Ring
            | Collective::Rhd
            | Collective::FtRing
            | Collective::FtCorrected(_)
            | Collective::CorrectedBcast(_)
            | Collective::Ftco(_)
            | Collective::CorrectedReduce(_)
            | Collective::Pick
            | Collective::ChainBcast
            | Collective::ChainReduce => {
                unreachable!("typed collectives returned above")
            }
            Collective::CorrectedAllreduce(o) => Ok((comm.corrected_allreduce(data, op, o)?, true)),

            Collective::EraAgree => {
                let decided = agree_once(comm, data)?;
                match decided.violation {
                    Some(violation) => Err(CommError::Config(violation)),
                    None => Ok((decided.outcome, true)),
                }
            }
        }
    }
}

/// What one agreement decided here, for the report.
struct Decided {
    outcome: Outcome,
    /// The digest of the agreed rank set.
    set_digest: u64,
    /// The property of 002 the decision violates, if any. The decision is then reported as
    /// −1 contributors, a count no admissible result has, so that the launcher calls the job
    /// wrong even when this rank is killed right after (a dying rank's decision is judged
    /// for admissibility, not compared: 002's agreement is non-uniform); then the rank fails.
    violation: Option<String>,
}

/// One agreement: contributes this rank's bit of the job's rank set, writes the number of
/// contributors the decision names into `data[0]`, and recovers from reported failures by
/// acknowledging them and shrinking. Also returns the digest of the agreed set, which the
/// report carries so that the launcher compares the sets ranks decided, not only their sizes.
fn agree_once(comm: &mut Communicator, data: &mut [f64]) -> Result<Decided, CommError> {
    let me = comm.world_rank();
    let mut words = vec![0u64; comm.members().last().map_or(1, |r| *r as usize / 64 + 1)];
    words[me as usize / 64] |= 1 << (me % 64);
    let sent_before = comm.agreement_messages();
    let members = comm.members();
    let agreed = comm.agree_with(&words, ReduceOp::BitOr)?;
    let messages = comm.agreement_messages().saturating_sub(sent_before);
    let contributors: u32 = agreed.words.iter().map(|w| w.count_ones()).sum();
    if let Some(first) = data.first_mut() {
        *first = f64::from(contributors);
    }
    // Trailing zero words (a rank set sized by the highest member) do not change the set.
    let used = agreed
        .words
        .iter()
        .rposition(|&w| w != 0)
        .map_or(0, |last| last + 1);
    let set_digest = digest(ValuesRef::U64(&agreed.words[..used]));
    // Validity: only members of the communicator the agreement ran on can have contributed;
    // participation: this rank, which contributed, is in the decision.
    let strangers: Vec<u32> = (0..agreed.words.len() as u32 * 64)
        .filter(|&r| agreed.words[r as usize / 64] & (1 << (r % 64)) != 0)
        .filter(|r| members.binary_search(r).is_err())
        .collect();
    let absent = agreed
        .words
        .get(me as usize / 64)
        .is_none_or(|w| w & (1 << (me % 64)) == 0);
    let violation = if !strangers.is_empty() {
        Some(format!(
            "validity violated: the decision names ranks {strangers:?} that are not members"
        ))
    } else if absent {
        Some(format!(
            "participation violated: rank {me} is missing from its own decision"
        ))
    } else {
        None
    };
    if violation.is_some() {
        if let Some(first) = data.first_mut() {
            *first = -1.0;
        }
    }
    if violation.is_none() && !agreed.unacknowledged.is_empty() {
        comm.ack_failed();
        let members = comm.shrink()?;
        tracing::info!(members = members.len(), "shrunk after a failure");
    }
    Ok(Decided {
        outcome: Outcome {
            excluded: comm
                .failed_ranks()
                .into_iter()
                .map(ftcoll_algos::Rank)
                .collect(),
            messages,
        },
        set_digest,
        violation,
    })
}

/// Refuses, with a typed error, vectors this rank could not allocate (a cluster job's launcher
/// cannot see the nodes' memory): an allocation that fails aborts the process.
fn check_vector_fits(args: &RankArgs) -> Result<(), CommError> {
    let copies = crate::memory::VECTOR_COPIES_PER_RANK as usize;
    let bytes = args
        .len
        .saturating_mul(args.dtype.elem_bytes())
        .saturating_mul(copies);
    let mut probe: Vec<u8> = Vec::new();
    probe.try_reserve_exact(bytes).map_err(|_| {
        CommError::Config(format!(
            "cannot allocate {bytes} bytes for this rank's vectors (--len {} of {}); lower --len",
            args.len,
            args.dtype.name()
        ))
    })
}

fn run(args: &RankArgs) -> Result<(), CommError> {
    // Before joining: a rank that cannot hold its vectors says so at the start.
    if args.algo != Algorithm::EraAgree {
        check_vector_fits(args)?;
    }
    let mut comm = Communicator::from_env()?;
    let op = args.op;
    let mine = if args.algo == Algorithm::EraAgree {
        Values::F64(vec![0.0])
    } else {
        hinted(&typed_inputs(args, comm.rank(), args.seed), args.base_pages)
    };
    let collective = Collective::from_args(args);
    let gossip = gossip_call(args)?;
    if let Some(warmup) = args.bench_warmup {
        if args.bench_failure {
            return bench_failure(comm, warmup, args.ops);
        }
        if args.bench_fault_op {
            if !matches!(mine, Values::F64(_)) {
                return Err(CommError::Config(
                    "fault benchmarks run on f64 vectors".into(),
                ));
            }
            let run = FaultOpRun {
                collective,
                input: &mine,
                op,
                warmup,
                ops: args.ops,
                recovery: args.bench_recovery,
                victims_lag: args.bench_victims_lag,
                base_pages: args.base_pages,
                out_of_place: args.out_of_place,
            };
            return run.bench(comm);
        }
        return bench(
            comm,
            collective,
            &mine,
            op,
            (warmup, args.ops),
            (args.base_pages, args.out_of_place),
        );
    }
    // One vector for every operation: in place, its input written in again before each; out
    // of place, the output of each (the input is `input`, fresh for each under the console).
    let mut data = hinted(&mine, args.base_pages);
    let mut input = mine;
    for index in 0..args.ops {
        if args.paced && !comm.wait_for_go(index)? {
            break;
        }
        let fresh = args.paced && index > 0 && args.algo != Algorithm::EraAgree;
        match (fresh, args.out_of_place) {
            (true, true) => {
                input = typed_inputs(args, comm.rank(), super::op_seed(args.seed, index))
            }
            (true, false) => {
                data = typed_inputs(args, comm.rank(), super::op_seed(args.seed, index))
            }
            (false, true) => {}
            (false, false) => data.copy_from(input.as_ref()),
        }
        let started = Instant::now();
        let mut agreed_set = None;
        let result = if args.out_of_place {
            collective.run_from(&mut comm, Some(&input), &mut data, op)
        } else {
            collective.run_reporting(&mut comm, &mut data, op, gossip.as_ref(), &mut agreed_set)
        };
        let nanos = started.elapsed().as_nanos() as u64;
        let (ok, messages, has_value) = match &result {
            Ok((outcome, has_value)) => (true, outcome.messages, *has_value),
            Err(_) => (false, 0, false),
        };
        let (set, violation) = agreed_set.unzip();
        let (value, len, digest) = match (has_value, set) {
            (true, Some(set)) => (report_of(&data).0, data.len() as u64, set),
            (true, None) => report_of(&data),
            (false, _) => (Vec::new(), 0, 0),
        };
        if has_value {
            comm.note_outcome(index, value.first().copied().unwrap_or(f64::NAN));
        }
        comm.report(OpReport {
            op: index,
            ok,
            value,
            len,
            digest,
            failed: comm.failed_ranks(),
            nanos,
            messages,
        })?;
        if let Some(violation) = violation.flatten() {
            return Err(CommError::Config(violation));
        }
        match result {
            Ok(_) => {}
            // The job's verdict is in the report; a failed collective ends this rank's loop.
            // This call alone failed (its segments counted different ranks); the next one
            // leaves the dead rank out from the start. Only the ranks that hold a result see
            // it (a reduce's root), so stopping here would leave the others waiting for it.
            Err(error @ CommError::MixedContributors { .. }) => {
                tracing::warn!(rank = comm.world_rank(), op = index, %error, "operation failed");
            }
            Err(error @ (CommError::PeerFailed { .. } | CommError::TimedOut(_))) => {
                tracing::warn!(rank = comm.world_rank(), op = index, %error, "operation failed; this rank stops");
                break;
            }
            Err(other) => return Err(other),
        }
    }
    comm.finish()
}

/// The gossip options of a rank, when the job is a gossip reduction.
fn gossip_call(args: &RankArgs) -> Result<Option<GossipCall>, CommError> {
    let algo = args.algo;
    if algo.gossip_rule().is_none() {
        return Ok(None);
    }
    Ok(Some(GossipCall {
        algo,
        topology: args.topology,
        eps: args.eps,
        steps: args.steps,
        period: args.gossip_period,
        options: GossipOptions {
            synchronous: args.gossip_sync,
            single: args.single_precision,
            tau: args.tau,
            period: None,
            pcf_as_printed: args.pcf_as_printed,
            stop_rule: true,
            sum_form: Default::default(),
        },
        seed: args.seed,
    }))
}
