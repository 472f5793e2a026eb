//! Registered send buffers kept for reuse: a send copies its frame into one, so registering
//! memory stays off the data path.

use std::sync::Arc;

use super::fabric::Domain;
use super::max_frame_bytes;
use super::mr::Buffer;
use super::tag::SMALL_FRAME_BYTES;
use crate::TransportError;

/// Idle small send buffers kept for reuse.
const POOL_SMALL_BUFFERS: usize = 64;
/// Idle large send buffers kept for reuse (each of a power-of-two size).
const POOL_LARGE_BUFFERS: usize = 4;

/// Idle registered send buffers.
#[derive(Default)]
pub(super) struct SendPool {
    small: Vec<Buffer>,
    large: Vec<Buffer>,
}

impl SendPool {
    /// A registered buffer for a frame of `len` bytes, from the pool if one fits.
    #[inline]
    pub(super) fn take(
        &mut self,
        domain: &Arc<Domain>,
        len: usize,
    ) -> Result<Buffer, TransportError> {
        if len <= SMALL_FRAME_BYTES {
            return match self.small.pop() {
                Some(buffer) => Ok(buffer),
                None => Buffer::new(domain, SMALL_FRAME_BYTES),
            };
        }
        if let Some(at) = self.large.iter().position(|b| b.capacity() >= len) {
            return Ok(self.large.swap_remove(at));
        }
        Buffer::new(
            domain,
            len.next_power_of_two()
                .min(max_frame_bytes().next_multiple_of(8)),
        )
    }

    /// Returns a buffer to the pool, or frees it if the pool is full.
    #[inline]
    pub(super) fn give_back(&mut self, buffer: Buffer) {
        if buffer.capacity() <= SMALL_FRAME_BYTES {
            if self.small.len() < POOL_SMALL_BUFFERS {
                self.small.push(buffer);
            }
        } else if self.large.len() < POOL_LARGE_BUFFERS {
            self.large.push(buffer);
        }
    }
}
