//! The hello a connecting rank writes before any frame: who it is, and proof that it belongs to
//! the job.

use ftcoll_algos::Rank;

/// First four bytes (little-endian) of the hello: ftcoll's TCP transport, hello version 1.
pub const HELLO_MAGIC: u32 = 0xFC7C_0001;

/// Size of the hello in bytes: magic (`u32`), sender rank (`u32`), job token (32 bytes).
pub const HELLO_BYTES: usize = 4 + 4 + 32;

/// Why an acceptor refused a hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum HelloError {
    /// The first bytes are not [`HELLO_MAGIC`]: not an ftcoll rank, or another version.
    #[error("not an ftcoll TCP hello (magic {0:#010x}, expected {HELLO_MAGIC:#010x})")]
    BadMagic(u32),
    /// The job token differs: a rank of another job, or a stray client.
    #[error("job token does not match (the connection claims rank {0})")]
    BadToken(u32),
    /// The claimed rank is not in the job.
    #[error("claimed rank {rank} is outside the job of {size} ranks")]
    NoSuchRank {
        /// The claimed rank.
        rank: u32,
        /// Job size.
        size: u32,
    },
    /// The claimed rank is the acceptor itself, which never connects to itself.
    #[error("claimed rank {0} is this rank itself")]
    OwnRank(u32),
}

/// The hello `rank` sends in a job identified by `token`.
pub(super) fn encode(rank: Rank, token: &[u8; 32]) -> [u8; HELLO_BYTES] {
    let mut hello = [0u8; HELLO_BYTES];
    hello[..4].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
    hello[4..8].copy_from_slice(&rank.0.to_le_bytes());
    hello[8..].copy_from_slice(token);
    hello
}

/// Checks a received hello; returns the sender's rank.
pub(super) fn check(
    hello: &[u8; HELLO_BYTES],
    token: &[u8; 32],
    me: Rank,
    size: u32,
) -> Result<Rank, HelloError> {
    let magic = u32::from_le_bytes([hello[0], hello[1], hello[2], hello[3]]);
    let rank = u32::from_le_bytes([hello[4], hello[5], hello[6], hello[7]]);
    if magic != HELLO_MAGIC {
        return Err(HelloError::BadMagic(magic));
    }
    if !tokens_equal(&hello[8..], token) {
        return Err(HelloError::BadToken(rank));
    }
    if rank >= size {
        return Err(HelloError::NoSuchRank { rank, size });
    }
    if rank == me.0 {
        return Err(HelloError::OwnRank(rank));
    }
    Ok(Rank(rank))
}

/// Compares in time independent of where the first difference is, so a stray client cannot
/// guess the token byte by byte from response times.
fn tokens_equal(received: &[u8], expected: &[u8; 32]) -> bool {
    if received.len() != expected.len() {
        return false;
    }
    let diff = received
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(diff) == 0
}
