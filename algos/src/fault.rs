//! The fault vocabulary as typed values: what a fault plan, the console and a rank's own
//! fault injector share. Text never reaches this module: the launcher parses `KIND:KEY=VALUE`
//! specs into [`FaultSpec`]s, and ranks receive them in the binary form of [`FaultSpec::encode`],
//! which [`FaultSpec::decode`] checks like any other message from outside.
//!
//! [`fmt::Display`] writes a spec back in its notation (`kill:rank=3,at=100`), for logs and the
//! console.

use std::fmt;

use crate::protocol::StateVar;
use crate::rank::Rank;

mod codec;

pub use codec::FaultDecodeError;

/// A point in time as a fault spec gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultTime {
    /// Driver units (simulator steps).
    Steps(u64),
    /// Wall-clock nanoseconds since the job's start (real runs).
    Nanos(u64),
}

impl FaultTime {
    /// The time in driver units of the simulator, or an error for wall-clock times.
    pub fn steps(self) -> Result<u64, FaultError> {
        match self {
            FaultTime::Steps(steps) => Ok(steps),
            FaultTime::Nanos(_) => Err(FaultError::WallClockInSimulator),
        }
    }
}

/// Which messages a message flip hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageSelector {
    /// The K-th message the rank sends, from 0.
    Nth(u64),
    /// The first message the rank sends at or after this time.
    AtOrAfter(FaultTime),
}

/// Where in a message a bit flips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlipTarget {
    /// Bit `bit` of payload element `elem`.
    Payload {
        /// Element index.
        elem: u32,
        /// Bit within the element.
        bit: u32,
    },
    /// Bit `bit` of the encoded frame, counting from the first header byte.
    Raw {
        /// Bit offset in the frame.
        bit: u64,
    },
}

/// Distribution of start times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Spread {
    /// Uniform on `[0, width]`.
    Uniform(FaultTime),
    /// `|normal(0, sigma)|`.
    Normal(FaultTime),
}

/// One scripted fault.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultSpec {
    /// Crash a rank.
    Kill {
        /// The rank.
        rank: Rank,
        /// When.
        at: KillTime,
    },
    /// Crash a whole node.
    KillNode {
        /// The node index.
        node: u32,
        /// When.
        at: FaultTime,
    },
    /// Flip a bit of a sent message.
    FlipMessage {
        /// The sender.
        rank: Rank,
        /// Which message.
        which: MessageSelector,
        /// Which bit.
        target: FlipTarget,
    },
    /// Flip a bit of local state.
    FlipState {
        /// The rank.
        rank: Rank,
        /// The variable.
        var: StateVar,
        /// The bit.
        bit: u32,
        /// When.
        at: FaultTime,
    },
    /// Random silent corruption of flows (000 Sec. 4.4.5): after each message the rank sends,
    /// with probability `rate`, a random bit of a random element of one of its flow variables
    /// flips.
    FlipRate {
        /// The rank, or `None` for every rank.
        rank: Option<Rank>,
        /// Probability per sent message.
        rate: f64,
    },
    /// Random message loss.
    Drop {
        /// The sender, or `None` for every rank.
        rank: Option<Rank>,
        /// Loss probability per message.
        rate: f64,
    },
    /// A permanent link failure.
    Cut {
        /// One end.
        a: Rank,
        /// The other end.
        b: Rank,
        /// From when.
        at: FaultTime,
    },
    /// A slowed rank.
    Slow {
        /// The rank.
        rank: Rank,
        /// Cost multiplier (>= 1).
        factor: u32,
        /// From when.
        at: FaultTime,
    },
    /// A stopped (hung) rank.
    Stop {
        /// The rank.
        rank: Rank,
        /// When.
        at: FaultTime,
    },
    /// Start-time spread.
    Spread(Spread),
}

/// When a kill happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillTime {
    /// At a time.
    At(FaultTime),
    /// When operation K starts.
    Operation(u64),
    /// A time after operation K starts (real runs: a crash in the middle of an operation).
    DuringOperation {
        /// The operation.
        op: u64,
        /// How long after its start.
        after: FaultTime,
    },
}

impl FlipTarget {
    /// Flips the targeted bit of an encoded frame; false when the frame has no such bit (an
    /// element past the payload, a bit past the element type's width).
    pub fn apply(self, frame: &mut [u8]) -> bool {
        use crate::bits::flip_in_bytes;
        use crate::values::Dtype;
        use crate::wire::header_len_of;
        match self {
            FlipTarget::Raw { bit } => {
                flip_in_bytes(frame, 1, (bit / 8) as usize, (bit % 8) as u32)
            }
            FlipTarget::Payload { elem, bit } => {
                // Byte 5 of the header is the payload's element type.
                let elem_bytes = frame
                    .get(5)
                    .and_then(|&code| Dtype::from_u8(code))
                    .map_or(0, Dtype::elem_bytes);
                let payload = frame.get_mut(header_len_of(frame)..).unwrap_or_default();
                flip_in_bytes(payload, elem_bytes, elem as usize, bit)
            }
        }
    }
}

impl fmt::Display for FaultTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultTime::Steps(s) => write!(f, "{s}"),
            FaultTime::Nanos(ns) => write!(f, "{ns}ns"),
        }
    }
}

/// A fault that cannot be applied where it was asked for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultError {
    /// A wall-clock time given to the simulator.
    #[error("the simulator counts steps: give times as plain step counts, without ns/us/ms/s")]
    WallClockInSimulator,
    /// A step count given to real ranks, which count wall-clock time.
    #[error("real runs count wall-clock time: give a unit to {field}, e.g. {field}=50ms")]
    StepsOnRealRanks {
        /// Which field.
        field: &'static str,
    },
}

/// `,at=T` unless T is the default 0.
struct At(FaultTime);

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            FaultTime::Steps(0) => Ok(()),
            t => write!(f, ",at={t}"),
        }
    }
}

/// `,elem=E` unless E is the default 0.
struct Elem(u32);

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            e => write!(f, ",elem={e}"),
        }
    }
}

/// The spec in its notation, defaults left out (`kill:rank=3`, `cut:link=0-1,at=50ms`).
impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = |rank: Option<Rank>| rank.map_or("all".to_string(), |r| r.0.to_string());
        match *self {
            FaultSpec::Kill { rank, at } => match at {
                KillTime::At(t) => write!(f, "kill:rank={}{}", rank.0, At(t)),
                KillTime::Operation(op) => write!(f, "kill:rank={},op={op}", rank.0),
                // `at=` always: without it the text reads back as a kill when the operation
                // starts (`KillTime::Operation`), a different fault.
                KillTime::DuringOperation { op, after } => {
                    write!(f, "kill:rank={},op={op},at={after}", rank.0)
                }
            },
            FaultSpec::KillNode { node, at } => write!(f, "kill-node:node={node}{}", At(at)),
            FaultSpec::FlipMessage {
                rank,
                which,
                target,
            } => {
                write!(f, "flip-msg:rank={}", rank.0)?;
                match target {
                    FlipTarget::Payload { elem, bit } => write!(f, ",bit={bit}{}", Elem(elem))?,
                    FlipTarget::Raw { bit } => write!(f, ",raw={bit}")?,
                }
                match which {
                    MessageSelector::Nth(0) => Ok(()),
                    MessageSelector::Nth(k) => write!(f, ",nth={k}"),
                    MessageSelector::AtOrAfter(t) => write!(f, ",at={t}"),
                }
            }
            FaultSpec::FlipState { rank, var, bit, at } => {
                write!(f, "flip-state:rank={},", rank.0)?;
                let elem = match var {
                    StateVar::Value { elem } => {
                        write!(f, "var=value")?;
                        elem
                    }
                    StateVar::Weight => {
                        write!(f, "var=weight")?;
                        0
                    }
                    StateVar::Flow { peer, elem } => {
                        write!(f, "var=flow:{}", peer.0)?;
                        elem
                    }
                    // Drawn by a driver, never typed: shown for logs only.
                    StateVar::AnyFlow { pick, elem } => {
                        write!(f, "var=any-flow:{pick}")?;
                        elem
                    }
                };
                write!(f, ",bit={bit}{}{}", Elem(elem), At(at))
            }
            FaultSpec::FlipRate { rank, rate } => {
                write!(f, "flip-rate:rank={},rate={rate}", who(rank))
            }
            FaultSpec::Drop { rank, rate } => write!(f, "drop:rank={},rate={rate}", who(rank)),
            FaultSpec::Cut { a, b, at } => write!(f, "cut:link={}-{}{}", a.0, b.0, At(at)),
            FaultSpec::Slow { rank, factor, at } => {
                write!(f, "slow:rank={},factor={factor}{}", rank.0, At(at))
            }
            FaultSpec::Stop { rank, at } => write!(f, "stop:rank={}{}", rank.0, At(at)),
            FaultSpec::Spread(Spread::Uniform(w)) => write!(f, "spread:uniform={w}"),
            FaultSpec::Spread(Spread::Normal(s)) => write!(f, "spread:normal={s}"),
        }
    }
}
