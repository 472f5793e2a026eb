//! The binary form of a [`FaultSpec`], in which faults travel from the launcher to ranks (in
//! the environment at start, in control messages while a job runs).
//!
//! Each spec is a tag byte followed by fixed-width little-endian fields; a list is the specs one
//! after another. Decoding checks everything the text parser checks (a probability in [0, 1],
//! a slow-down of at least 1, a link between two ranks, a bit inside a 64-bit word), so a
//! corrupted message is an error, never a fault nobody asked for.

use super::{FaultSpec, FaultTime, FlipTarget, KillTime, MessageSelector, Spread};
use crate::protocol::StateVar;
use crate::rank::Rank;

/// Why bytes are not an encoded fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultDecodeError {
    /// The bytes end inside a spec.
    #[error("encoded fault truncated")]
    Truncated,
    /// A tag that names nothing.
    #[error("encoded fault has an unknown {what} tag {tag}")]
    UnknownTag {
        /// Which field.
        what: &'static str,
        /// The tag.
        tag: u8,
    },
    /// A field outside its range.
    #[error("encoded fault has an invalid {0}")]
    Invalid(&'static str),
}

impl FaultSpec {
    /// Appends the binary form to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        match *self {
            FaultSpec::Kill { rank, at } => {
                w.u8(1);
                w.rank(rank);
                match at {
                    KillTime::At(t) => {
                        w.u8(0);
                        w.time(t);
                    }
                    KillTime::Operation(op) => {
                        w.u8(1);
                        w.u64(op);
                    }
                    KillTime::DuringOperation { op, after } => {
                        w.u8(2);
                        w.u64(op);
                        w.time(after);
                    }
                }
            }
            FaultSpec::KillNode { node, at } => {
                w.u8(2);
                w.u32(node);
                w.time(at);
            }
            FaultSpec::FlipMessage {
                rank,
                which,
                target,
            } => {
                w.u8(3);
                w.rank(rank);
                match which {
                    MessageSelector::Nth(k) => {
                        w.u8(0);
                        w.u64(k);
                    }
                    MessageSelector::AtOrAfter(t) => {
                        w.u8(1);
                        w.time(t);
                    }
                }
                match target {
                    FlipTarget::Payload { elem, bit } => {
                        w.u8(0);
                        w.u32(elem);
                        w.u32(bit);
                    }
                    FlipTarget::Raw { bit } => {
                        w.u8(1);
                        w.u64(bit);
                    }
                }
            }
            FaultSpec::FlipState { rank, var, bit, at } => {
                w.u8(4);
                w.rank(rank);
                match var {
                    StateVar::Value { elem } => {
                        w.u8(0);
                        w.u32(elem);
                    }
                    StateVar::Weight => w.u8(1),
                    StateVar::Flow { peer, elem } => {
                        w.u8(2);
                        w.rank(peer);
                        w.u32(elem);
                    }
                    StateVar::AnyFlow { pick, elem } => {
                        w.u8(3);
                        w.u32(pick);
                        w.u32(elem);
                    }
                }
                w.u32(bit);
                w.time(at);
            }
            FaultSpec::FlipRate { rank, rate } => {
                w.u8(5);
                w.some_rank(rank);
                w.u64(rate.to_bits());
            }
            FaultSpec::Drop { rank, rate } => {
                w.u8(6);
                w.some_rank(rank);
                w.u64(rate.to_bits());
            }
            FaultSpec::Cut { a, b, at } => {
                w.u8(7);
                w.rank(a);
                w.rank(b);
                w.time(at);
            }
            FaultSpec::Slow { rank, factor, at } => {
                w.u8(8);
                w.rank(rank);
                w.u32(factor);
                w.time(at);
            }
            FaultSpec::Stop { rank, at } => {
                w.u8(9);
                w.rank(rank);
                w.time(at);
            }
            FaultSpec::Spread(spread) => {
                w.u8(10);
                match spread {
                    Spread::Uniform(t) => {
                        w.u8(0);
                        w.time(t);
                    }
                    Spread::Normal(t) => {
                        w.u8(1);
                        w.time(t);
                    }
                }
            }
        }
    }

    /// Decodes one spec from the front of `bytes`; returns it and the rest.
    pub fn decode(bytes: &[u8]) -> Result<(FaultSpec, &[u8]), FaultDecodeError> {
        let mut r = Reader(bytes);
        let spec = r.spec()?;
        Ok((spec, r.0))
    }

    /// Encodes a list of specs.
    pub fn encode_list(specs: &[FaultSpec]) -> Vec<u8> {
        let mut out = Vec::new();
        for spec in specs {
            spec.encode(&mut out);
        }
        out
    }

    /// Decodes a list of specs written by [`FaultSpec::encode_list`]; at most `limit` of them.
    pub fn decode_list(mut bytes: &[u8], limit: usize) -> Result<Vec<FaultSpec>, FaultDecodeError> {
        let mut specs = Vec::new();
        while !bytes.is_empty() {
            if specs.len() == limit {
                return Err(FaultDecodeError::Invalid("list length"));
            }
            let (spec, rest) = FaultSpec::decode(bytes)?;
            specs.push(spec);
            bytes = rest;
        }
        Ok(specs)
    }
}

struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn rank(&mut self, rank: Rank) {
        self.u32(rank.0);
    }
    fn some_rank(&mut self, rank: Option<Rank>) {
        match rank {
            None => self.u8(0),
            Some(rank) => {
                self.u8(1);
                self.rank(rank);
            }
        }
    }
    fn time(&mut self, t: FaultTime) {
        match t {
            FaultTime::Steps(s) => {
                self.u8(0);
                self.u64(s);
            }
            FaultTime::Nanos(ns) => {
                self.u8(1);
                self.u64(ns);
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], FaultDecodeError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or(FaultDecodeError::Truncated)?;
        self.0 = rest;
        Ok(*head)
    }
    fn u8(&mut self) -> Result<u8, FaultDecodeError> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, FaultDecodeError> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, FaultDecodeError> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn rank(&mut self) -> Result<Rank, FaultDecodeError> {
        Ok(Rank(self.u32()?))
    }
    fn some_rank(&mut self) -> Result<Option<Rank>, FaultDecodeError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.rank()?)),
            tag => Err(FaultDecodeError::UnknownTag { what: "rank", tag }),
        }
    }
    fn time(&mut self) -> Result<FaultTime, FaultDecodeError> {
        match self.u8()? {
            0 => Ok(FaultTime::Steps(self.u64()?)),
            1 => Ok(FaultTime::Nanos(self.u64()?)),
            tag => Err(FaultDecodeError::UnknownTag { what: "time", tag }),
        }
    }
    fn probability(&mut self) -> Result<f64, FaultDecodeError> {
        let rate = f64::from_bits(self.u64()?);
        if (0.0..=1.0).contains(&rate) {
            Ok(rate)
        } else {
            Err(FaultDecodeError::Invalid("probability"))
        }
    }
    fn bit(&mut self) -> Result<u32, FaultDecodeError> {
        let bit = self.u32()?;
        if bit < 64 {
            Ok(bit)
        } else {
            Err(FaultDecodeError::Invalid("bit"))
        }
    }

    fn spec(&mut self) -> Result<FaultSpec, FaultDecodeError> {
        Ok(match self.u8()? {
            1 => {
                let rank = self.rank()?;
                let at = match self.u8()? {
                    0 => KillTime::At(self.time()?),
                    1 => KillTime::Operation(self.u64()?),
                    2 => KillTime::DuringOperation {
                        op: self.u64()?,
                        after: self.time()?,
                    },
                    tag => {
                        return Err(FaultDecodeError::UnknownTag {
                            what: "kill time",
                            tag,
                        })
                    }
                };
                FaultSpec::Kill { rank, at }
            }
            2 => FaultSpec::KillNode {
                node: self.u32()?,
                at: self.time()?,
            },
            3 => {
                let rank = self.rank()?;
                let which = match self.u8()? {
                    0 => MessageSelector::Nth(self.u64()?),
                    1 => MessageSelector::AtOrAfter(self.time()?),
                    tag => {
                        return Err(FaultDecodeError::UnknownTag {
                            what: "selector",
                            tag,
                        })
                    }
                };
                let target = match self.u8()? {
                    0 => FlipTarget::Payload {
                        elem: self.u32()?,
                        bit: self.bit()?,
                    },
                    1 => FlipTarget::Raw { bit: self.u64()? },
                    tag => {
                        return Err(FaultDecodeError::UnknownTag {
                            what: "target",
                            tag,
                        })
                    }
                };
                FaultSpec::FlipMessage {
                    rank,
                    which,
                    target,
                }
            }
            4 => {
                let rank = self.rank()?;
                let var = match self.u8()? {
                    0 => StateVar::Value { elem: self.u32()? },
                    1 => StateVar::Weight,
                    2 => StateVar::Flow {
                        peer: self.rank()?,
                        elem: self.u32()?,
                    },
                    3 => StateVar::AnyFlow {
                        pick: self.u32()?,
                        elem: self.u32()?,
                    },
                    tag => {
                        return Err(FaultDecodeError::UnknownTag {
                            what: "variable",
                            tag,
                        })
                    }
                };
                FaultSpec::FlipState {
                    rank,
                    var,
                    bit: self.bit()?,
                    at: self.time()?,
                }
            }
            5 => FaultSpec::FlipRate {
                rank: self.some_rank()?,
                rate: self.probability()?,
            },
            6 => FaultSpec::Drop {
                rank: self.some_rank()?,
                rate: self.probability()?,
            },
            7 => {
                let (a, b, at) = (self.rank()?, self.rank()?, self.time()?);
                if a == b {
                    return Err(FaultDecodeError::Invalid("link"));
                }
                FaultSpec::Cut { a, b, at }
            }
            8 => {
                let (rank, factor, at) = (self.rank()?, self.u32()?, self.time()?);
                if factor == 0 {
                    return Err(FaultDecodeError::Invalid("slow-down factor"));
                }
                FaultSpec::Slow { rank, factor, at }
            }
            9 => FaultSpec::Stop {
                rank: self.rank()?,
                at: self.time()?,
            },
            10 => FaultSpec::Spread(match self.u8()? {
                0 => Spread::Uniform(self.time()?),
                1 => Spread::Normal(self.time()?),
                tag => {
                    return Err(FaultDecodeError::UnknownTag {
                        what: "spread",
                        tag,
                    })
                }
            }),
            tag => return Err(FaultDecodeError::UnknownTag { what: "fault", tag }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<FaultSpec> {
        vec![
            FaultSpec::Kill {
                rank: Rank(3),
                at: KillTime::At(FaultTime::Nanos(50_000_000)),
            },
            FaultSpec::Kill {
                rank: Rank(1),
                at: KillTime::Operation(7),
            },
            FaultSpec::Kill {
                rank: Rank(2),
                at: KillTime::DuringOperation {
                    op: 3,
                    after: FaultTime::Nanos(4_000_000),
                },
            },
            FaultSpec::KillNode {
                node: 2,
                at: FaultTime::Steps(9),
            },
            FaultSpec::FlipMessage {
                rank: Rank(0),
                which: MessageSelector::Nth(4),
                target: FlipTarget::Payload { elem: 2, bit: 63 },
            },
            FaultSpec::FlipMessage {
                rank: Rank(5),
                which: MessageSelector::AtOrAfter(FaultTime::Steps(30)),
                target: FlipTarget::Raw { bit: 29 },
            },
            FaultSpec::FlipState {
                rank: Rank(2),
                var: StateVar::Flow {
                    peer: Rank(3),
                    elem: 1,
                },
                bit: 60,
                at: FaultTime::Steps(100),
            },
            FaultSpec::FlipState {
                rank: Rank(2),
                var: StateVar::Weight,
                bit: 1,
                at: FaultTime::Steps(0),
            },
            FaultSpec::FlipRate {
                rank: None,
                rate: 1e-4,
            },
            FaultSpec::Drop {
                rank: Some(Rank(7)),
                rate: 0.5,
            },
            FaultSpec::Cut {
                a: Rank(0),
                b: Rank(1),
                at: FaultTime::Nanos(1),
            },
            FaultSpec::Slow {
                rank: Rank(4),
                factor: 1000,
                at: FaultTime::Steps(0),
            },
            FaultSpec::Stop {
                rank: Rank(6),
                at: FaultTime::Steps(20),
            },
            FaultSpec::Spread(Spread::Normal(FaultTime::Steps(40))),
        ]
    }

    #[test]
    fn every_kind_round_trips() {
        let specs = every_kind();
        let bytes = FaultSpec::encode_list(&specs);
        assert_eq!(FaultSpec::decode_list(&bytes, 100), Ok(specs.clone()));
        assert!(FaultSpec::decode_list(&bytes, specs.len() - 1).is_err());
    }

    #[test]
    fn every_truncation_and_corruption_is_an_error_not_a_panic() {
        for spec in every_kind() {
            let mut bytes = Vec::new();
            spec.encode(&mut bytes);
            for len in 0..bytes.len() {
                assert_eq!(
                    FaultSpec::decode(&bytes[..len]).map(|(s, _)| s),
                    Err(FaultDecodeError::Truncated),
                    "{spec} cut at {len}"
                );
            }
            for i in 0..bytes.len() {
                for bit in 0..8 {
                    let mut bad = bytes.clone();
                    bad[i] ^= 1 << bit;
                    // Any outcome but a panic; a decoded spec re-encodes to what was decoded.
                    if let Ok((decoded, _)) = FaultSpec::decode(&bad) {
                        let mut again = Vec::new();
                        decoded.encode(&mut again);
                        assert_eq!(FaultSpec::decode(&again).map(|(s, _)| s), Ok(decoded));
                    }
                }
            }
        }
        let bad_rate = FaultSpec::Drop {
            rank: None,
            rate: 2.0,
        };
        let mut bytes = Vec::new();
        bad_rate.encode(&mut bytes);
        assert_eq!(
            FaultSpec::decode(&bytes),
            Err(FaultDecodeError::Invalid("probability"))
        );
    }
}
