//! A rank's UCX address as text: the worker address, hex-encoded after [`ADDRESS_PREFIX`].

use std::fmt::Write as _;

/// The prefix of a UCX address as
/// [`Transport::local_address`](super::super::Transport::local_address) prints it.
pub const ADDRESS_PREFIX: &str = "ucx:";

/// `address` as `ucx:` and lowercase hex.
pub(super) fn encode_address(address: &[u8]) -> String {
    let mut text = String::with_capacity(ADDRESS_PREFIX.len() + 2 * address.len());
    text.push_str(ADDRESS_PREFIX);
    for byte in address {
        // Writing to a String cannot fail.
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// The worker address in `text` (as [`encode_address`] wrote it).
pub(super) fn decode_address(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix(ADDRESS_PREFIX)?.as_bytes();
    if hex.is_empty() || hex.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16);
    hex.chunks_exact(2)
        .map(|pair| Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8))
        .collect()
}
