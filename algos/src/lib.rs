//! ftcoll's algorithms, each a sans-IO state machine.
//!
//! Every protocol implements [`protocol::Protocol`]: it takes inputs (its local contribution, a
//! frame from a peer, a timer expiry, a failure notice, a fault) with the current [`time::Time`]
//! and appends sends, timer requests and events to a caller-owned [`protocol::Outbox`]. The same
//! code runs in the deterministic simulator of `ftcoll-runtime` and on real ranks.
//!
//! Shared building blocks: [`rank`] (ids, groups), [`values`] (Pod payloads, reduction
//! operators), [`wire`] (the frame layout), [`bits`] (bit-flip numbering), [`topology`] (graphs and
//! trees), [`rng`] (explicitly seeded randomness).

#![forbid(unsafe_code)]

pub mod bits;
pub mod chain;
pub mod corrected;
pub mod direct;
pub mod era;
pub mod fault;
pub mod ftco;
pub mod ftring;
pub mod gossip;
pub mod inspect;
pub mod protocol;
pub mod rank;
pub mod rdb;
pub mod registry;
pub mod rhd;
pub mod ring;
pub mod rng;
pub mod time;
pub mod topology;
pub mod values;
pub mod wire;

pub use protocol::{Event, Input, Outbox, Phase, Protocol, RankStatus};
pub use rank::Rank;
pub use registry::Algorithm;
pub use time::{Duration, Time};
pub use values::{ReduceOp, Values, ValuesRef};
pub use wire::{Frame, FrameError, FrameHeader, OpId};
