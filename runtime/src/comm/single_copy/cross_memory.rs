//! The single-copy ring's blocks on one node: read by cross-memory attach
//! ([`crate::transport::shm::cross_memory`]), or by plain loads where the left neighbour's
//! vector lives in its shared heap and is mapped here ([`crate::transport::shm::peer_map`]).

use std::ops::Range;

use ftcoll_algos::values::Element;
use ftcoll_algos::Rank;

use super::notice::ReadyNotice;
use super::{BlockSource, OwnVectors, ReadEnd, ReadTarget, SingleCopyFailure, COMBINE_CHUNK_BYTES};
use crate::transport::shm::cross_memory::{self, CrossMemoryError, PeerRegion};
use crate::transport::shm::peer_map::PeerMappings;
use crate::transport::shm::shared_heap::{self, SharedSpan};

/// Where the left neighbour's vectors and lent word lie, from its first notice.
#[derive(Clone, Copy, Debug)]
struct LeftRegions {
    /// Its input (the output itself when it reduces in place).
    input: PeerRegion,
    output: PeerRegion,
    lent_word: PeerRegion,
    /// The input's and output's memory files, where they are mapped here (read by plain
    /// loads; without one, by cross-memory attach).
    input_span: Option<SharedSpan>,
    output_span: Option<SharedSpan>,
}

/// What the single-copy ring keeps from call to call on one node: cache-sized staging for
/// combined cross-memory reads, and the mappings of peers' shared vectors.
#[derive(Debug, Default)]
pub(crate) struct ReadScratch {
    bounce: Vec<u64>,
    mappings: PeerMappings,
}

/// Blocks read out of the left neighbour's memory on this node.
pub(crate) struct CrossMemorySource<'a> {
    scratch: &'a mut ReadScratch,
    left: Option<LeftRegions>,
}

impl<'a> CrossMemorySource<'a> {
    pub(crate) fn new(scratch: &'a mut ReadScratch) -> Self {
        CrossMemorySource {
            scratch,
            left: None,
        }
    }

    /// The left neighbour's vectors from its notice, mapping those in its shared heap (once:
    /// the mappings are kept from call to call). A vector that cannot be mapped is read by
    /// cross-memory attach, which reports a refusal of its own.
    fn left_regions(&mut self, notice: &ReadyNotice) -> LeftRegions {
        let pid = notice.output.pid;
        let mut mapped = |span: Option<SharedSpan>| {
            let span = span?;
            match self.scratch.mappings.ensure(pid, &span) {
                Ok(()) => Some(span),
                Err(error) => {
                    tracing::debug!(%error, "reading the left neighbour by cross-memory attach");
                    None
                }
            }
        };
        let (output_span, input_span) = (mapped(notice.output_span), mapped(notice.input_span));
        let at = |addr, bytes| PeerRegion { pid, addr, bytes };
        LeftRegions {
            input: at(notice.input_addr, notice.output.bytes),
            output: notice.output,
            lent_word: at(notice.lent_word, 8),
            input_span,
            output_span,
        }
    }

    /// Reads elements `block` of the left neighbour's vector into the same elements here:
    /// plain loads where its vector is mapped here, cross-memory reads otherwise.
    fn read_block<T: Element>(
        &mut self,
        block: Range<usize>,
        (first, combine): (bool, bool),
        target: ReadTarget<'_, '_, T>,
    ) -> Result<(), CrossMemoryError> {
        let elem = std::mem::size_of::<T>();
        // The first step reads a block its owner has not reached: its input (see the module
        // docs of `single_copy`); every later step reads what the owner wrote into its output.
        let Some((left, span)) = self.left.map(|l| match first {
            true => (l.input, l.input_span),
            false => (l.output, l.output_span),
        }) else {
            return Err(CrossMemoryError::OutOfRegion {
                pid: 0,
                offset: 0,
                end: 0,
                bytes: 0,
            });
        };
        let offset = |i: usize| (i * elem) as u64;
        let out_of_region = || CrossMemoryError::OutOfRegion {
            pid: left.pid,
            offset: offset(block.start),
            end: offset(block.end),
            bytes: left.bytes,
        };
        let ReadTarget {
            data,
            input,
            mut saved,
            reduce,
        } = target;
        let Some(mine) = data.get_mut(block.clone()) else {
            return Err(out_of_region());
        };
        let ReadScratch { bounce, mappings } = &mut *self.scratch;
        let theirs: Option<&[T]> = match span {
            Some(span) => {
                let at = span.offset.saturating_add(offset(block.start));
                let bytes = mappings
                    .bytes(left.pid, span.serial, at, block.len() * elem)
                    .ok_or_else(out_of_region)?;
                Some(bytemuck::try_cast_slice(bytes).map_err(|_| out_of_region())?)
            }
            None => None,
        };
        let chunk = (COMBINE_CHUNK_BYTES / elem).max(1);
        if theirs.is_none() && combine {
            bounce.resize(COMBINE_CHUNK_BYTES.div_ceil(8), 0);
        }
        let staging: &mut [T] = bytemuck::cast_slice_mut(&mut bounce[..]);
        for (k, part) in mine.chunks_mut(chunk).enumerate() {
            let at = block.start + k * chunk;
            // A fault-tolerant attempt keeps the input of what it writes first, part by part
            // as the combine passes over it (see [`SavedInput`]), so that the read overwrites
            // lines the save just brought into the cache.
            if let Some(saved) = saved.as_mut() {
                saved.save(at, part);
            }
            let got: &[T] = match (theirs, combine) {
                (Some(theirs), _) => &theirs[k * chunk..k * chunk + part.len()],
                (None, false) => {
                    cross_memory::read(&left, offset(at), bytemuck::cast_slice_mut(part))?;
                    continue;
                }
                (None, true) => {
                    let got = &mut staging[..part.len()];
                    cross_memory::read(&left, offset(at), bytemuck::cast_slice_mut(got))?;
                    got
                }
            };
            if super::place(part, got, (at, input, combine, reduce)).is_err() {
                return Err(out_of_region());
            }
        }
        Ok(())
    }

    /// Whether a read counts: the left neighbour's lent word must still hold this operation
    /// after the read (a read that failed because the owner took its vector back counts as
    /// withdrawn, not as a corrupt notice).
    fn still_lent(&self, read: Result<(), CrossMemoryError>, token: u64) -> Result<(), ReadEnd> {
        let Some(LeftRegions {
            lent_word: word, ..
        }) = self.left
        else {
            return Err(ReadEnd::Withdrawn);
        };
        let mut lent = [0u8; 8];
        let failed = |error| match error {
            CrossMemoryError::Refused { .. } => ReadEnd::GiveUp(SingleCopyFailure::Refused),
            _ => ReadEnd::GiveUp(SingleCopyFailure::CorruptNotice),
        };
        match cross_memory::read(&word, 0, &mut lent) {
            Ok(()) if u64::from_le_bytes(lent) == token => read.map_err(failed),
            Ok(()) | Err(CrossMemoryError::Gone { .. }) => Err(ReadEnd::Withdrawn),
            Err(error) => Err(failed(read.err().unwrap_or(error))),
        }
    }
}

impl BlockSource for CrossMemorySource<'_> {
    fn ready_notice(&self, own: &OwnVectors, (token, from, done): (u64, Rank, u32)) -> Vec<u64> {
        let bytes = own.output_bytes as usize;
        let output_span = shared_heap::lookup(own.output_addr as *const u8, bytes);
        let input_span = match own.input_addr == own.output_addr {
            true => output_span,
            false => shared_heap::lookup(own.input_addr as *const u8, bytes),
        };
        let notice = ReadyNotice {
            output: PeerRegion {
                pid: std::process::id(),
                addr: own.output_addr,
                bytes: own.output_bytes,
            },
            input_addr: own.input_addr,
            lent_word: own.lent_word,
            output_span,
            input_span,
        };
        notice.words(token, from, done).to_vec()
    }

    fn take_notice(
        &mut self,
        words: &[u64],
        (token, from, done): (u64, Rank, u32),
        bytes: u64,
    ) -> bool {
        match ReadyNotice::parse(words, token, from, done).filter(|n| n.output.bytes == bytes) {
            Some(notice) => {
                self.left = Some(self.left_regions(&notice));
                true
            }
            None => false,
        }
    }

    fn read<T: Element>(
        &mut self,
        block: Range<usize>,
        (first, combine): (bool, bool),
        target: ReadTarget<'_, '_, T>,
        token: u64,
    ) -> Result<(), ReadEnd> {
        let read = self.read_block(block, (first, combine), target);
        self.still_lent(read, token)
    }

    fn left_failed(&mut self) {
        if let Some(regions) = self.left {
            // Its memory lives on while mapped here.
            self.scratch.mappings.forget(regions.output.pid);
        }
    }
}
