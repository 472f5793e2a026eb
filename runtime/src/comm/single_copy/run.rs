//! The communicator's single-copy allreduce: the ring of [`SingleCopyRing`] over
//! cross-memory reads on one node, over remote reads across a network.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use ftcoll_algos::protocol::ShellConfig;
use ftcoll_algos::values::Element;
use ftcoll_algos::{Algorithm, Rank, ReduceOp, ValuesRef};

use super::{BlockSource, CrossMemorySource, OwnExposures, RemoteSource, SingleCopyRing};
use crate::comm::{CommError, Communicator, Outcome};
use crate::transport::remote::{ExposedMemory, Exposure};
use crate::transport::shm::shared_heap;
use crate::transport::{Transport, TransportError, TransportKind};

/// The registration cache's identity of the lent word: never a shared-heap serial (those are
/// never 0), and the word never moves (see `Communicator::lent`).
const LENT_WORD_IDENTITY: u64 = 0;

impl Communicator {
    /// Allreduce of `input` into `data`, or of `data` in place without an input, by the
    /// single-copy ring (see the module docs): called by
    /// [`Communicator::allreduce_ring`] and [`Communicator::allreduce_into`] where
    /// [`Communicator::single_copy_for`] allows it.
    pub(in crate::comm) fn allreduce_single_copy<T: Element>(
        &mut self,
        input: Option<&[T]>,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let shell = self.shell_config(Algorithm::Ring, op, T::DTYPE, crate::comm::Slack::NONE)?;
        if self.transport() == TransportKind::Shm {
            let mut scratch = std::mem::take(&mut self.read_scratch);
            let source = CrossMemorySource::new(&mut scratch);
            let ended = self.run_single_copy(&shell, (input, data), source, op);
            self.read_scratch = scratch;
            return ended;
        }
        let source = self.remote_source(input, data)?;
        self.run_single_copy(&shell, (input, data), source, op)
    }

    fn run_single_copy<T: Element, S: BlockSource>(
        &mut self,
        shell: &ShellConfig,
        (input, data): (Option<&[T]>, &mut [T]),
        source: S,
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let mut protocol = SingleCopyRing::new(
            (shell.rank, shell.size, shell.op, op),
            (input, data),
            (source, None),
            Arc::clone(&self.lent),
        );
        let ended = self.execute(&mut protocol, ValuesRef::Empty);
        // Before the vector goes back to the caller, however the operation ended.
        self.lent.store(0, Ordering::Release);
        let failure = protocol.failure();
        let concluded = ended.and_then(|ended| {
            // The result is in `data` already: nothing to write back.
            self.conclude(&mut protocol, ended, &mut [] as &mut [T], |_, _| {})
        });
        match (concluded, failure) {
            (Err(_), Some(reason)) => Err(CommError::SingleCopy { reason }),
            (concluded, _) => concluded.map(|(outcome, _)| outcome),
        }
    }

    /// This rank's vectors and lent word registered for its right neighbour's reads, and a
    /// reader of its left neighbour's. A vector in the shared heap keeps its registration
    /// from call to call under its allocation's serial (dropped once the allocation is
    /// freed); any other vector is registered for this call only, since nothing tells the
    /// transport when the application frees it.
    fn remote_source<T: Element>(
        &mut self,
        input: Option<&[T]>,
        data: &[T],
    ) -> Result<RemoteSource, CommError> {
        let size = self.size();
        let left = Rank((self.env.rank + size - 1) % size);
        let deadline = Instant::now() + self.op_timeout;
        let mut endpoint = self.endpoint();
        let transport = &mut endpoint.transport;
        transport.forget_exposures(&mut |identity| {
            identity == LENT_WORD_IDENTITY || shared_heap::is_live(identity)
        });
        let mut expose =
            |memory: ExposedMemory, identity: Option<u64>| -> Result<Arc<Exposure>, CommError> {
                transport
                    .expose(memory, identity)?
                    .ok_or_else(|| no_remote_reads(transport.kind()))
            };
        let heap_serial = |memory: ExposedMemory| {
            shared_heap::lookup(memory.addr as *const u8, memory.bytes as usize).map(|s| s.serial)
        };
        let vector = |values: &[T]| {
            let memory = ExposedMemory::of(values);
            (memory, heap_serial(memory))
        };
        let (memory, identity) = vector(data);
        let output = expose(memory, identity)?;
        let input = match input {
            Some(input) => {
                let (memory, identity) = vector(input);
                Some(expose(memory, identity)?)
            }
            None => None,
        };
        let lent = expose(ExposedMemory::word(&self.lent), Some(LENT_WORD_IDENTITY))?;
        let (hits, misses) = transport.exposure_counts();
        tracing::debug!(
            hits,
            misses,
            "remote-read registrations kept and made so far"
        );
        // None for a neighbour already failed: the ring aborts on that known failure.
        let reader = transport.remote_reader(left)?;
        let own = OwnExposures {
            output,
            input,
            lent,
        };
        Ok(RemoteSource::new(reader, own, deadline))
    }
}

/// The transport was taken for one with remote reads and has none.
fn no_remote_reads(kind: TransportKind) -> CommError {
    CommError::Transport(TransportError::Library {
        library: "ftcoll",
        call: "remote read",
        why: format!("the {kind} transport has no remote reads; set FTCOLL_SINGLE_COPY=off"),
    })
}
