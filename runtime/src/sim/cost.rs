//! The simulator's cost models.
//!
//! # LogP (default L = 10, o = 1, g = 1 steps, as paper 004)
//! A rank that handles an input at `now` spends `o` steps per send: its k-th send (from 0)
//! leaves at `now + (k+1)·max(o, g)` and arrives at the receiver `L` steps later. The receiver's
//! CPU is busy for `o` steps per received message: a message arriving at `t` is handled at
//! `max(t, busy_until) + o`. One pairwise exchange round thus costs `L + 2o` steps, and a
//! recursive-doubling allreduce of `R` rounds ends at `R·(L + 2o)` (240 steps for 2^20 ranks).
//!
//! # Protocol steps (004 Sec. 5)
//! With [`CostModel::protocol_steps`], a protocol takes one action per step itself (a send, or
//! the handling of one message it picks from its own queue): the simulator charges no receive
//! overhead and hands every frame over at its arrival, `o + L` after the step that sent it. A
//! step at `t` ends at `t + o`, which is when a rank that completes in it finishes.
//!
//! # Rounds
//! The synchronous-round mode is LogP with `L = 1, o = g = 0`: everything sent in round `t`
//! arrives at `t + 1`, before any round timer of `t + 1` fires (see `queue::EventClass`).

/// Costs of communication in virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostModel {
    /// Network latency L, in steps.
    pub latency_steps: u64,
    /// Send or receive CPU overhead o, in steps.
    pub overhead_steps: u64,
    /// Minimum gap g between consecutive sends of one rank, in steps.
    pub gap_steps: u64,
    /// LogGP's G: steps a sender spends per MiB of a message beyond the first byte (0: the
    /// size of a message costs nothing, plain LogP).
    pub gap_per_mib_steps: u64,
    /// The protocol paces itself, one action per step, and reads its own queue (see the
    /// module docs); FTCO's step model.
    pub protocol_steps: bool,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel::logp(10, 1, 1)
    }
}

impl CostModel {
    /// LogP with the given parameters.
    pub fn logp(latency_steps: u64, overhead_steps: u64, gap_steps: u64) -> CostModel {
        CostModel {
            latency_steps,
            overhead_steps,
            gap_steps,
            gap_per_mib_steps: 0,
            protocol_steps: false,
        }
    }

    /// Synchronous rounds: every message takes exactly one round.
    pub fn rounds() -> CostModel {
        CostModel::logp(1, 0, 0)
    }

    /// LogGP: LogP plus `gap_per_mib_steps` per MiB of each message.
    pub fn loggp(latency: u64, overhead: u64, gap: u64, gap_per_mib: u64) -> CostModel {
        CostModel {
            gap_per_mib_steps: gap_per_mib,
            ..CostModel::logp(latency, overhead, gap)
        }
    }

    /// When a rank that completed while handling an input at `now` finishes: at the end of its
    /// step in the step model, at `now` otherwise.
    pub fn finish_of(&self, now: u64) -> u64 {
        if self.protocol_steps {
            now + self.overhead_steps
        } else {
            now
        }
    }

    /// What handing a frame to a rank costs its CPU: a receive overhead, or nothing where the
    /// protocol's own step does the receiving.
    pub fn receive_steps(&self) -> u64 {
        if self.protocol_steps {
            0
        } else {
            self.overhead_steps
        }
    }

    /// Steps between consecutive sends of one rank.
    pub fn send_spacing(&self) -> u64 {
        self.overhead_steps.max(self.gap_steps)
    }

    /// Steps a sender spends on a message of `bytes` beyond [`CostModel::send_spacing`]
    /// (rounded up: a byte more never costs less).
    pub fn bytes_steps(&self, bytes: usize) -> u64 {
        (self.gap_per_mib_steps as u128 * bytes as u128).div_ceil(1 << 20) as u64
    }

    /// The cost of one pairwise exchange round: `L + 2o`.
    pub fn exchange_round_steps(&self) -> u64 {
        self.latency_steps + 2 * self.overhead_steps
    }
}
