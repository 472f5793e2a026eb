//! What an agreement decides: the user's words under an idempotent operator, the set of failed
//! ranks the contributors knew of, the intersection of their acknowledged sets (ULFM's error
//! rule), and the garbage-collection floor (the smallest "all agreements up to here returned"
//! among contributors, 002 Sec. 3).

use crate::rank::RankSet;
use crate::values::ReduceOp;
use crate::wire::FrameError;

/// Why an agreement cannot be started.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgreeError {
    /// ERA combines a contribution any number of times; only idempotent operators keep the
    /// result right.
    #[error("agreement operator '{0}' is not idempotent: use band, bor, min or max")]
    NotIdempotent(&'static str),
    /// The agreement id was already used or garbage-collected at this rank.
    #[error("agreement {0} was already started here")]
    AlreadyStarted(u64),
    /// Too many agreements are in flight at once.
    #[error("more than {0} agreements in flight; wait for some before starting more")]
    TooManyInFlight(usize),
}

/// The operators ERA accepts: associative, commutative and idempotent.
pub fn check_op(op: ReduceOp) -> Result<(), AgreeError> {
    match op {
        ReduceOp::BitAnd | ReduceOp::BitOr | ReduceOp::Min | ReduceOp::Max => Ok(()),
        other => Err(AgreeError::NotIdempotent(other.name())),
    }
}

pub(crate) fn op_code(op: ReduceOp) -> u16 {
    match op {
        ReduceOp::BitAnd => 1,
        ReduceOp::BitOr => 2,
        ReduceOp::Min => 3,
        _ => 4,
    }
}

pub(crate) fn op_from_code(code: u16) -> Option<ReduceOp> {
    Some(match code {
        1 => ReduceOp::BitAnd,
        2 => ReduceOp::BitOr,
        3 => ReduceOp::Min,
        4 => ReduceOp::Max,
        _ => return None,
    })
}

fn combine_word(op: ReduceOp, a: &mut u64, b: u64) {
    *a = match op {
        ReduceOp::BitAnd => *a & b,
        ReduceOp::BitOr => *a | b,
        ReduceOp::Min => (*a).min(b),
        _ => (*a).max(b),
    };
}

/// A value of the agreement monoid; `None` in an `Option<AgreedValue>` is 002's ⊥.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgreedValue {
    /// The user's words, combined element-wise.
    pub words: Vec<u64>,
    /// Ranks some contributor knew as failed (union).
    pub failed: RankSet,
    /// Ranks every contributor had acknowledged as failed (intersection); `None` until a
    /// contributor states its set.
    pub acked: Option<RankSet>,
    /// Every agreement with an id up to this one had returned at every contributor (minimum).
    pub returned_floor: u64,
}

impl AgreedValue {
    /// One contribution.
    pub fn contribution(words: Vec<u64>, failed: &RankSet, acked: &RankSet, floor: u64) -> Self {
        AgreedValue {
            words,
            failed: failed.clone(),
            acked: Some(acked.clone()),
            returned_floor: floor,
        }
    }

    /// Combines `other` in (002's F); the words must be as long as ours.
    pub fn combine(&mut self, op: ReduceOp, other: &AgreedValue) -> Result<(), &'static str> {
        if other.words.len() != self.words.len() {
            return Err("agreement value of another length");
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            combine_word(op, a, *b);
        }
        self.failed.union_with(other.failed.as_slice());
        match (&mut self.acked, &other.acked) {
            (Some(mine), Some(theirs)) => mine.intersect_with(theirs.as_slice()),
            (mine @ None, Some(theirs)) => *mine = Some(theirs.clone()),
            (_, None) => {}
        }
        self.returned_floor = self.returned_floor.min(other.returned_floor);
        Ok(())
    }

    /// Failed ranks not acknowledged by every contributor: ULFM's agree reports an error at every
    /// survivor when this is not empty.
    pub fn unacknowledged(&self) -> Vec<u32> {
        let acked = self.acked.as_ref();
        self.failed
            .as_slice()
            .iter()
            .copied()
            .filter(|r| !acked.is_some_and(|a| a.contains(*r)))
            .collect()
    }

    /// The rank trailer: failed count, failed ranks, then acknowledged ranks.
    pub(crate) fn trailer(&self, dst: &mut Vec<u32>) {
        dst.clear();
        dst.push(self.failed.len() as u32);
        dst.extend_from_slice(self.failed.as_slice());
        if let Some(acked) = &self.acked {
            dst.extend_from_slice(acked.as_slice());
        }
    }

    /// Decodes a value from a frame's words, trailer and header fields.
    pub(crate) fn decode(
        words: &[u64],
        trailer: &[u32],
        acked_present: bool,
        floor: u64,
        from: u32,
    ) -> Result<AgreedValue, FrameError> {
        let bad = |what| FrameError::Unexpected { from, what };
        let (&count, rest) = trailer
            .split_first()
            .ok_or(bad("agreement value without its rank trailer"))?;
        let count = count as usize;
        if count > rest.len() {
            return Err(bad("failed-rank count exceeds the trailer"));
        }
        let (failed, acked) = rest.split_at(count);
        let sorted = |s: &[u32]| s.windows(2).all(|w| w[0] < w[1]);
        if !sorted(failed) || !sorted(acked) {
            return Err(bad("rank sets must be strictly increasing"));
        }
        if !acked_present && !acked.is_empty() {
            return Err(bad("acknowledged ranks without the flag"));
        }
        Ok(AgreedValue {
            words: words.to_vec(),
            failed: RankSet::from_unsorted(failed.to_vec()),
            acked: acked_present.then(|| RankSet::from_unsorted(acked.to_vec())),
            returned_floor: floor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_is_idempotent_commutative_and_associative() {
        let set = |v: &[u32]| RankSet::from_unsorted(v.to_vec());
        let a = AgreedValue::contribution(vec![0b1100, 9], &set(&[3]), &set(&[3, 5]), 4);
        let b = AgreedValue::contribution(vec![0b1010, 2], &set(&[5]), &set(&[5]), 7);
        let c = AgreedValue {
            acked: None,
            ..AgreedValue::contribution(vec![0b1111, 5], &set(&[]), &set(&[]), 9)
        };
        for op in [
            ReduceOp::BitAnd,
            ReduceOp::BitOr,
            ReduceOp::Min,
            ReduceOp::Max,
        ] {
            let mut ab = a.clone();
            ab.combine(op, &b).unwrap();
            let mut ba = b.clone();
            ba.combine(op, &a).unwrap();
            assert_eq!(ab, ba);
            let mut twice = ab.clone();
            twice.combine(op, &b).unwrap();
            twice.combine(op, &a).unwrap();
            assert_eq!(twice, ab, "{op:?} not idempotent");
            let mut ab_c = ab.clone();
            ab_c.combine(op, &c).unwrap();
            let mut bc = b.clone();
            bc.combine(op, &c).unwrap();
            let mut a_bc = a.clone();
            a_bc.combine(op, &bc).unwrap();
            assert_eq!(ab_c, a_bc);
        }
        let mut ab = a.clone();
        ab.combine(ReduceOp::BitAnd, &b).unwrap();
        assert_eq!(ab.words, vec![0b1000, 9 & 2]);
        assert_eq!(ab.failed.as_slice(), &[3, 5]);
        assert_eq!(ab.unacknowledged(), vec![3]);
        assert_eq!(ab.returned_floor, 4);
    }

    #[test]
    fn sum_is_refused() {
        assert_eq!(
            check_op(ReduceOp::Sum),
            Err(AgreeError::NotIdempotent("sum"))
        );
    }
}
