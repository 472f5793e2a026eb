//! dmGS, the fully distributed QR factorization of 003 Sec. IV, as a user program under
//! `ftcoll-launch`: modified Gram-Schmidt where every vector norm and dot product is a gossip
//! reduction and everything else is local.
//!
//! ```sh
//! cargo build --release -p ftcoll-launcher --example dmgs
//! ftcoll-launch -n 16 -- ./target/release/examples/dmgs pcf
//! ```
//!
//! Arguments, all optional: `[ALGO] [SEED] [EPS]`. ALGO is the reduction: a gossip algorithm
//! (`pcf`, the default, `pf`, or any other of `ps` .. `pfcc`) or `exact` (the recursive-doubling
//! allreduce, for comparison); SEED (default 2024) draws the matrix and the gossip schedules;
//! EPS (default 1e-12) is each gossip reduction's accuracy target for the local stopping rule.
//! Each reduction pushes every millisecond, at most 2000 times (the default bound). With 16
//! ranks, 1e-12 stops in about 500 pushes a reduction; at 1e-13 the rule does not fire and every
//! reduction runs to the bound, where some rank can stop with a useless estimate (seen: -0 and
//! NaN), which the warning below reports.
//!
//! V is N x 16 with N the number of ranks (at least 16, 003 takes n >= m), one row per rank:
//! rank i draws its 16 entries uniform in (0, 1) from stream i of the seed. For each column k:
//! 1. `||v_k||^2` by a sum; each rank takes the root of its own estimate as r_kk and sets
//!    `q_ik = v_ik / r_kk`;
//! 2. `r_kj = sum_i q_ik v_ij` for every j > k as one vector sum (15 - k values);
//! 3. each rank updates its row, `v_ij -= q_ik r_kj`, with its own estimates.
//!
//! These are the steps of the simulator experiment `ftcoll-launch experiment dmgs`
//! (`launcher/src/experiments/gossip_003.rs`), which shares no code with this program; given
//! one of its matrix seeds (`dmgs_runs.csv`) and as many ranks, this program factorizes the same
//! V. A rank whose sum of `||v_k||^2` is not a positive number (a reduction that failed at that
//! rank) says so on stderr; its row then turns NaN, and the NaN spreads through later sums.
//!
//! Each rank keeps its own estimate R_j of R. At the end one exact allreduce gathers every
//! rank's rows of V and Q (each rank fills its own rows and zeros elsewhere, so the sum is
//! exact); each rank j computes `||V - Q R_j||_inf / ||V||_inf` with its own R_j, an exact max
//! allreduce gives the worst, and rank 0 prints its own (rank 0's R, as the experiment's figure),
//! the worst, and the orthogonality error `||I - Q^T Q||_inf`. (Row i against rank i's own R_i is
//! no measure: MGS makes `v_i = q_i R_i` hold row by row for whatever R_i the rank used.)

use std::error::Error;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ftcoll_algos::rng::SimRng;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::Communicator;
use ftcoll_runtime::gossip_call::GossipCall;
use ftcoll_runtime::job::{Algorithm, GossipOptions};

/// Columns of V (003 Sec. IV).
const COLUMNS: usize = 16;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("dmgs example: {error}");
            ExitCode::FAILURE
        }
    }
}

/// How the program sums over ranks.
enum Summation {
    /// A gossip reduction; each rank gets its own estimate.
    Gossip(GossipCall),
    /// The exact allreduce; every rank gets the same sum.
    Exact,
}

/// The command line: `[ALGO] [SEED] [EPS]`.
fn parse_args() -> Result<(Summation, &'static str, u64)> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map_or("pcf", String::as_str);
    let seed = match args.get(1) {
        Some(text) => text.parse().map_err(|e| format!("SEED '{text}': {e}"))?,
        None => 2024,
    };
    let eps = match args.get(2) {
        Some(text) => text.parse().map_err(|e| format!("EPS '{text}': {e}"))?,
        None => 1e-12,
    };
    if name == "exact" {
        return Ok((Summation::Exact, "exact", seed));
    }
    let algo = Algorithm::from_name(name).ok_or_else(|| format!("unknown algorithm '{name}'"))?;
    let call = GossipCall {
        algo,
        topology: None,
        eps: Some(eps),
        steps: None,
        period: Duration::from_millis(1),
        options: GossipOptions::default(),
        seed,
    };
    Ok((Summation::Gossip(call), algo.name(), seed))
}

/// This rank's state: its row of V (overwritten), of Q, and its own estimate of R.
struct Rows {
    v: [f64; COLUMNS],
    q: [f64; COLUMNS],
    r: [[f64; COLUMNS]; COLUMNS],
}

/// Sums over all ranks, counting the reductions and their messages.
struct Reducer<'a> {
    comm: &'a mut Communicator,
    summation: Summation,
    reductions: u64,
    messages: u64,
}

impl Reducer<'_> {
    /// Replaces `data` by this rank's estimate of its sum over all ranks.
    fn sum(&mut self, data: &mut [f64]) -> Result<()> {
        self.reductions += 1;
        let outcome = match &mut self.summation {
            Summation::Exact => self.comm.allreduce(data, ReduceOp::Sum)?,
            Summation::Gossip(call) => {
                // A fresh schedule for every reduction.
                let mut call = call.clone();
                call.seed = call.seed.wrapping_add(self.reductions);
                self.comm.gossip(data, ReduceOp::Sum, &call)?
            }
        };
        self.messages += outcome.messages;
        Ok(())
    }
}

/// Rank `rank`'s row of V: 16 draws uniform in (0, 1) from stream `rank` of `seed`.
fn matrix_row(seed: u64, rank: u32) -> [f64; COLUMNS] {
    let mut rng = SimRng::for_stream(seed, u64::from(rank));
    std::array::from_fn(|_| rng.next_open01())
}

/// Modified Gram-Schmidt over the ranks (steps 1-3 of the module docs).
fn factorize(rows: &mut Rows, reducer: &mut Reducer<'_>) -> Result<()> {
    for k in 0..COLUMNS {
        let mut norm_sq = [rows.v[k] * rows.v[k]];
        reducer.sum(&mut norm_sq)?;
        if !(norm_sq[0] > 0.0 && norm_sq[0].is_finite()) {
            eprintln!(
                "dmgs: rank {}: reduction {} (||v_{k}||^2) returned {:e}",
                reducer.comm.rank(),
                reducer.reductions,
                norm_sq[0]
            );
        }
        let norm = norm_sq[0].sqrt();
        rows.r[k][k] = norm;
        rows.q[k] = rows.v[k] / norm;
        if k + 1 == COLUMNS {
            break;
        }
        let mut dots: Vec<f64> = (k + 1..COLUMNS).map(|j| rows.q[k] * rows.v[j]).collect();
        reducer.sum(&mut dots)?;
        for (j, r_kj) in (k + 1..COLUMNS).zip(dots) {
            rows.r[k][j] = r_kj;
            rows.v[j] -= rows.q[k] * r_kj;
        }
    }
    Ok(())
}

/// Every rank's rows of V and Q, gathered by one exact allreduce.
fn gather(
    comm: &mut Communicator,
    v: &[f64; COLUMNS],
    q: &[f64; COLUMNS],
) -> Result<(Vec<f64>, Vec<f64>)> {
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    let mut all = vec![0.0; 2 * size * COLUMNS];
    all[rank * COLUMNS..(rank + 1) * COLUMNS].copy_from_slice(v);
    all[(size + rank) * COLUMNS..(size + rank + 1) * COLUMNS].copy_from_slice(q);
    comm.allreduce(&mut all, ReduceOp::Sum)?;
    let q_all = all.split_off(size * COLUMNS);
    Ok((all, q_all))
}

/// `||V - Q R||_inf / ||V||_inf` for V and Q row-major with 16 columns.
fn factorization_error(v: &[f64], q: &[f64], r: &[[f64; COLUMNS]; COLUMNS]) -> f64 {
    let mut residual: f64 = 0.0;
    let mut norm: f64 = 0.0;
    for (v_row, q_row) in v.chunks(COLUMNS).zip(q.chunks(COLUMNS)) {
        let row_residual: f64 = (0..COLUMNS)
            .map(|c| {
                let qr: f64 = (0..=c).map(|k| q_row[k] * r[k][c]).sum();
                (v_row[c] - qr).abs()
            })
            .sum();
        residual = worse(residual, row_residual);
        norm = norm.max(v_row.iter().map(|x| x.abs()).sum());
    }
    residual / norm
}

/// `||I - Q^T Q||_inf` for Q row-major with 16 columns.
fn orthogonality_error(q: &[f64]) -> f64 {
    (0..COLUMNS)
        .map(|k| {
            (0..COLUMNS)
                .map(|l| {
                    let dot: f64 = q.chunks(COLUMNS).map(|row| row[k] * row[l]).sum();
                    (f64::from(u8::from(k == l)) - dot).abs()
                })
                .sum::<f64>()
        })
        .fold(0.0, worse)
}

/// The larger of two errors, NaN counting as infinite (`f64::max` would drop it, and a failed
/// reduction would look accurate).
fn worse(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::INFINITY
    } else {
        a.max(b)
    }
}

fn run() -> Result<()> {
    let (summation, name, seed) = parse_args()?;
    let mut comm = Communicator::from_env()?;
    let (rank, size) = (comm.rank(), comm.size());
    if (size as usize) < COLUMNS {
        return Err(
            format!("dmGS needs at least {COLUMNS} ranks (one row each), got {size}").into(),
        );
    }
    let original = matrix_row(seed, rank);
    let mut rows = Rows {
        v: original,
        q: [0.0; COLUMNS],
        r: [[0.0; COLUMNS]; COLUMNS],
    };
    let started = Instant::now();
    let mut reducer = Reducer {
        comm: &mut comm,
        summation,
        reductions: 0,
        messages: 0,
    };
    factorize(&mut rows, &mut reducer)?;
    let (reductions, messages) = (reducer.reductions, reducer.messages);
    let elapsed = started.elapsed();

    // The errors, from every rank's rows gathered exactly.
    let (v_all, q_all) = gather(&mut comm, &original, &rows.q)?;
    let own = factorization_error(&v_all, &q_all, &rows.r);
    // Already infinite, not NaN, after a failed reduction: the max would skip NaN.
    let mut worst = [own];
    comm.allreduce(&mut worst, ReduceOp::Max)?;
    if rank == 0 {
        println!(
            "dmGS({name}) of a {size} x {COLUMNS} matrix over {size} ranks (seed {seed}): \
             ||V - Q R_0||/||V|| = {own:.3e}, worst rank's R {:.3e}, ||I - Q^T Q|| = {:.3e}; \
             {reductions} reductions in {elapsed:.2?}, {messages} messages at rank 0",
            worst[0],
            orthogonality_error(&q_all)
        );
    }
    comm.finish()?;
    Ok(())
}
