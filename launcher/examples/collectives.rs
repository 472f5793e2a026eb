//! Every typed collective once, checked at every rank:
//!
//! ```sh
//! ftcoll-launch -n 4 -- ./target/release/examples/collectives 100000
//! ```
//!
//! `allreduce_into` over `i64`, `ft_allreduce_into` over `f64`, `reduce_scatter_block` over `u32` and `f64`, `allgather` over
//! `i32` and `f32`, `bcast` over `u64`, `reduce` over `f32`, then a barrier; blocks of `len` elements. A rank exits non-zero if any
//! result differs from the one it computes itself from every rank's (deterministic) input.

use std::process::ExitCode;

use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{CommError, Communicator};

fn main() -> ExitCode {
    let len: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    match run(len) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("collectives example: {error}");
            ExitCode::FAILURE
        }
    }
}

fn wrong(what: &str, rank: u32) -> CommError {
    CommError::Config(format!("rank {rank}: {what} gave a wrong result"))
}

/// Rank `r`'s element `i`.
fn input(r: u32, i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761) ^ (r * 7 + 1)
}

fn run(len: usize) -> Result<(), CommError> {
    let mut comm = Communicator::from_env()?;
    let (rank, n) = (comm.rank(), comm.size());
    let ranks = 0..n;

    let mine: Vec<i64> = (0..len).map(|i| i64::from(input(rank, i))).collect();
    let mut sum = vec![0i64; len];
    comm.allreduce_into(&mine, &mut sum, ReduceOp::Sum)?;
    let want: Vec<i64> = (0..len)
        .map(|i| ranks.clone().map(|r| i64::from(input(r, i))).sum())
        .collect();
    if sum != want
        || mine
            .iter()
            .zip(0..)
            .any(|(&x, i)| x != i64::from(input(rank, i)))
    {
        return Err(wrong("allreduce_into", rank));
    }

    // The fault-tolerant allreduce out of place: the same sum, the input left as it was.
    let mine: Vec<f64> = (0..len).map(|i| f64::from(input(rank, i) % 4096)).collect();
    let mut sum = vec![0.0f64; len];
    comm.ft_allreduce_into(&mine, &mut sum, ReduceOp::Sum)?;
    let want: Vec<f64> = (0..len)
        .map(|i| ranks.clone().map(|r| f64::from(input(r, i) % 4096)).sum())
        .collect();
    if sum != want
        || mine
            .iter()
            .zip(0..)
            .any(|(&x, i)| x != f64::from(input(rank, i) % 4096))
    {
        return Err(wrong("ft_allreduce_into (f64)", rank));
    }
    match comm.ft_allreduce_into(&mine, &mut sum[..len / 2], ReduceOp::Sum) {
        Err(CommError::Shape { .. }) if len > 1 => {}
        _ if len <= 1 => {}
        _ => return Err(wrong("an ft_allreduce_into of mismatched buffers", rank)),
    }

    let blocks: Vec<u32> = (0..n as usize * len).map(|i| input(rank, i)).collect();
    let mut block = vec![0u32; len];
    comm.reduce_scatter_block(&blocks, &mut block, ReduceOp::BitXor)?;
    let start = rank as usize * len;
    let want: Vec<u32> = (start..start + len)
        .map(|i| ranks.clone().fold(0, |acc, r| acc ^ input(r, i)))
        .collect();
    if block != want {
        return Err(wrong("reduce_scatter_block (u32, bxor)", rank));
    }
    let floats: Vec<f64> = (0..n as usize * len)
        .map(|i| f64::from(input(rank, i) % 1000))
        .collect();
    let mut part = vec![0.0f64; len];
    comm.reduce_scatter_block(&floats, &mut part, ReduceOp::Max)?;
    let want: Vec<f64> = (start..start + len)
        .map(|i| {
            ranks
                .clone()
                .map(|r| f64::from(input(r, i) % 1000))
                .fold(0.0, f64::max)
        })
        .collect();
    if part != want {
        return Err(wrong("reduce_scatter_block (f64, max)", rank));
    }

    let own: Vec<i32> = (0..len).map(|i| input(rank, i) as i32).collect();
    let mut all = vec![0i32; n as usize * len];
    comm.allgather(&own, &mut all)?;
    let want: Vec<i32> = ranks
        .clone()
        .flat_map(|r| (0..len).map(move |i| input(r, i) as i32))
        .collect();
    if all != want {
        return Err(wrong("allgather (i32)", rank));
    }
    let own: Vec<f32> = (0..len).map(|i| (input(rank, i) % 4096) as f32).collect();
    let mut all = vec![0.0f32; n as usize * len];
    comm.allgather(&own, &mut all)?;
    if all.chunks(len.max(1)).zip(ranks.clone()).any(|(chunk, r)| {
        chunk
            .iter()
            .zip(0..)
            .any(|(&x, i)| x != (input(r, i) % 4096) as f32)
    }) {
        return Err(wrong("allgather (f32)", rank));
    }

    // Broadcast from the last rank, reduce (max) to rank 1 mod N.
    let root = n - 1;
    let mut vector: Vec<u64> = (0..len).map(|i| u64::from(input(rank, i))).collect();
    comm.bcast(&mut vector, root)?;
    if vector
        .iter()
        .zip(0..)
        .any(|(&x, i)| x != u64::from(input(root, i)))
    {
        return Err(wrong("bcast (u64)", rank));
    }
    let target = 1 % n;
    let mut vector: Vec<f32> = (0..len).map(|i| (input(rank, i) % 512) as f32).collect();
    comm.reduce(&mut vector, ReduceOp::Max, target)?;
    let want: Vec<f32> = (0..len)
        .map(|i| {
            ranks
                .clone()
                .map(|r| (input(r, i) % 512) as f32)
                .fold(0.0, f32::max)
        })
        .collect();
    let own: Vec<f32> = (0..len).map(|i| (input(rank, i) % 512) as f32).collect();
    if (rank == target && vector != want) || (rank != target && vector != own) {
        return Err(wrong("reduce (f32, max)", rank));
    }

    comm.barrier()?;
    // A wrong shape is a typed error, not a hang.
    let mut short = vec![0u32; len + 1];
    match comm.reduce_scatter_block(&blocks, &mut short, ReduceOp::Sum) {
        Err(CommError::Config(_)) => {}
        _ => return Err(wrong("a reduce-scatter of mismatched buffers", rank)),
    }
    if rank == 0 {
        println!("{n} ranks, blocks of {len}: every collective exact");
    }
    comm.finish()
}
