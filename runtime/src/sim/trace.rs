//! A hash of the delivered event trace, to check that one seed replays the same run.
//!
//! The hash is a fixed 64-bit mix (no per-process random keys), so it is stable across processes
//! and builds of the same code.

/// Running hash of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceHash(u64);

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash(0x243F_6A88_85A3_08D3)
    }
}

impl TraceHash {
    /// Mixes one word in.
    #[inline]
    pub fn mix(&mut self, word: u64) {
        let x = (self.0 ^ word).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 29);
    }

    /// Mixes a byte string in, 8 bytes at a time.
    pub fn mix_bytes(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let mut tail = [0u8; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.mix(u64::from_le_bytes(tail) ^ (bytes.len() as u64) << 56);
    }

    /// The hash so far.
    pub fn value(&self) -> u64 {
        self.0
    }
}
