//! A small in-memory network for the protocols' unit tests: every rank starts on its input,
//! then queued frames are delivered one at a time in an order drawn from a seed (a transport
//! that reorders), until none is left. The simulator is the real driver; this one keeps unit
//! tests free of the runtime crate.

use super::{Event, Input, Outbox, Protocol};
use crate::rank::Rank;
use crate::rng::SimRng;
use crate::time::Time;
use crate::values::Values;
use crate::wire::Frame;

/// What a run saw: the payload bytes (values and rank trailer) of every frame sent, and whether
/// any frame was rejected.
pub(crate) struct Traffic {
    pub payloads: Vec<usize>,
    pub rejected: bool,
}

/// The reduction of `inputs` by `op`, in rank order: what an exact allreduce gives.
pub(crate) fn reduce_all(inputs: &[Values], op: crate::values::ReduceOp) -> Values {
    let mut acc = inputs[0].clone();
    for v in &inputs[1..] {
        acc.combine(op, v.as_ref()).expect("inputs of one shape");
    }
    acc
}

/// Runs `ranks` on `inputs` to the end, delivering in an order drawn from `seed`.
pub(crate) fn drive(ranks: &mut [Box<dyn Protocol>], inputs: &[Values], seed: u64) -> Traffic {
    let mut rng = SimRng::new(seed);
    let mut queue: Vec<(Rank, Rank, Vec<u64>, usize)> = Vec::new();
    let mut traffic = Traffic {
        payloads: Vec::new(),
        rejected: false,
    };
    let mut out = Outbox::new();
    let mut collect = |from: Rank, out: &mut Outbox, queue: &mut Vec<_>| {
        for i in 0..out.send_count() {
            let (to, words, len) = out.send_words_at(i).expect("a queued send");
            let bytes: &[u8] = bytemuck::cast_slice(words);
            traffic
                .payloads
                .push(len - crate::wire::header_len_of(bytes));
            queue.push((from, to, words.to_vec(), len));
        }
        traffic.rejected |= out
            .events()
            .iter()
            .any(|e| matches!(e, Event::Rejected { .. }));
        out.clear();
    };
    for (i, rank) in ranks.iter_mut().enumerate() {
        let data = inputs[i].as_ref();
        rank.handle(Time::ZERO, Input::Start { data }, &mut out);
        collect(Rank(i as u32), &mut out, &mut queue);
    }
    // Each pass delivers one queued frame; protocols that never stop sending trip the guard.
    let mut guard = 0;
    while !queue.is_empty() {
        guard += 1;
        assert!(guard < 1_000_000, "runaway delivery");
        let pick = rng.below(queue.len() as u64) as usize;
        let (from, to, words, len) = queue.swap_remove(pick);
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let frame = Frame::decode(&bytes[..len]).expect("frames the protocols encoded decode");
        ranks[to.index()].handle(Time::ZERO, Input::Message { from, frame }, &mut out);
        collect(to, &mut out, &mut queue);
    }
    traffic
}
