//! The fault-tolerant collectives at any size: the ring allreduce, or the corrected-tree
//! allreduce in segments, in attempts over the survivors ([`ftcoll_algos::ftring`]).

use ftcoll_algos::era::EraConfig;
use ftcoll_algos::ftring::{CommitRule, FtRing, FtRingConfig};
use ftcoll_algos::values::Element;
use ftcoll_algos::{Algorithm, Duration, Rank, ReduceOp, ValuesRef};

use super::collectives::{CorrectedOptions, Outcome};
use super::run::{whole_vector_trailer_bytes, Slack};
use super::single_copy::{CrossMemorySource, SingleCopyRing};
use super::typed::same_len;
use super::{CommError, Communicator};

impl Communicator {
    /// Fault-tolerant allreduce of `data` in place, any type and any length, at the ring's
    /// bandwidth: it survives any number of ranks failing during the call while one lives.
    ///
    /// Every survivor returns the same vector: the reduction over the inputs of one set of
    /// ranks that holds every survivor, each input counted once; a rank that failed during the
    /// call is either in that set at every survivor or at none. [`Outcome::excluded`] names
    /// the ranks whose inputs the result leaves out. How: the ring runs in attempts, each
    /// closed by an agreement on whether it completed everywhere; a failure makes the
    /// survivors agree on who failed and run the ring again over themselves from their
    /// inputs (see [`ftcoll_algos::ftring`] for the argument).
    ///
    /// In place, each attempt after the first must start again from the input, so a large
    /// call on shared memory keeps a copy of it as it goes (a write of the whole vector);
    /// [`Communicator::ft_allreduce_into`] needs none.
    pub fn ft_allreduce<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let config = self.ft_ring_config::<T>(op, Algorithm::FtRing, Slack::NONE)?;
        if self.cross_memory_for(std::mem::size_of_val(data)) {
            return self.ft_allreduce_single_copy(None, data, config);
        }
        self.ft_allreduce_copying(data, config)
    }

    /// [`Communicator::ft_allreduce`] of `input` into `output` (the same length), leaving
    /// `input` as it is: the same result and guarantees. On shared memory from the
    /// single-copy threshold on, every attempt reads `input` and rewrites all of `output`, so
    /// tolerance costs no copy of the vector at all; elsewhere `input` is copied into
    /// `output` first.
    pub fn ft_allreduce_into<T: Element>(
        &mut self,
        input: &[T],
        output: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        same_len(input, output)?;
        let config = self.ft_ring_config::<T>(op, Algorithm::FtRing, Slack::NONE)?;
        if self.cross_memory_for(std::mem::size_of_val(input)) {
            return self.ft_allreduce_single_copy(Some(input), output, config);
        }
        output.copy_from_slice(input);
        self.ft_allreduce_copying(output, config)
    }

    /// Fault-tolerant allreduce of `data` in place, any type and any length, in corrected
    /// trees (001): the vector streams in segments, each a corrected allreduce that tolerates
    /// `options.tolerate` failures, and the segments run in attempts over the survivors like
    /// [`Communicator::ft_allreduce`]'s rings. The same result and guarantees: one set of
    /// contributors for the whole vector, identical at every survivor, each input counted once,
    /// [`Outcome::excluded`] naming the ranks left out. An attempt completes without a rerun when
    /// every segment counts every member, for instance when a rank dies after its input has
    /// reached every segment; a rank that dies while the segments stream makes the survivors
    /// run the attempt again without it (see [`ftcoll_algos::ftring::CorrectedAttempt`]).
    /// `options.info` is not used: the segments always report failures as lists, the one
    /// scheme that tells the root which inputs a segment lacks.
    pub fn ft_corrected_allreduce<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
        options: CorrectedOptions,
    ) -> Result<Outcome, CommError> {
        // A segment's frames carry 001's failure list after the values.
        let slack = Slack(whole_vector_trailer_bytes(self.size()));
        let config = self.ft_ring_config::<T>(op, Algorithm::FtCorrected, slack)?;
        let mut protocol = FtRing::corrected(config, options.tolerate, options.correction);
        // Its agreements are served until the flush at exit, as the ring's are.
        self.ft_rings += 1;
        let members = self.members();
        let (outcome, owes_peers) =
            self.run_collective_in(&mut protocol, data, |ft, outcome| {
                outcome.excluded = left_out(ft.contributors(), &members);
            })?;
        if owes_peers {
            let server = protocol.detach_server();
            self.endpoint().linger(self.ops, Box::new(server));
        }
        Ok(outcome)
    }

    fn ft_ring_config<T: Element>(
        &mut self,
        op: ReduceOp,
        algo: Algorithm,
        slack: Slack,
    ) -> Result<FtRingConfig, CommError> {
        let shell = self.shell_config(algo, op, T::DTYPE, slack)?;
        Ok(FtRingConfig {
            rank: self.me(),
            size: self.size(),
            op,
            op_id: shell.op,
            frame_elems: shell.plan.segment_elems,
            window: shell.plan.window,
            era: EraConfig::default(),
            // A peer whose parent in the agreement tree died asks the others for the decision:
            // answer for as long as an operation may take.
            linger: Duration(self.op_timeout.as_nanos().min(u128::from(u64::MAX)) as u64),
            commit: CommitRule::Agreed,
        })
    }

    /// The fault-tolerant ring over frames (any transport, any size), in place.
    fn ft_allreduce_copying<T: Element>(
        &mut self,
        data: &mut [T],
        config: FtRingConfig,
    ) -> Result<Outcome, CommError> {
        // Kept from call to call like the ring's shell: its buffers are reused, not faulted in
        // again.
        let mut protocol = match self.ft_ring.take() {
            Some(mut protocol) => {
                protocol.restart(config);
                protocol
            }
            None => Box::new(FtRing::new(config)),
        };
        self.ft_rings += 1;
        let members = self.members();
        let ran = self.run_collective_in(&mut *protocol, data, |ring, outcome| {
            outcome.excluded = left_out(ring.contributors(), &members);
        });
        let (outcome, owes_peers) = match ran {
            Ok(ran) => ran,
            Err(error) => {
                self.ft_ring = Some(protocol);
                return Err(error);
            }
        };
        if owes_peers {
            let server = protocol.detach_server();
            self.endpoint().linger(self.ops, Box::new(server));
        }
        self.ft_ring = Some(protocol);
        Ok(outcome)
    }

    /// [`Communicator::ft_allreduce`] with every attempt a single-copy ring over the caller's
    /// vectors (shared memory): the agreement between attempts is the same. In place, a copy
    /// of the input, kept from call to call, restarts each attempt after the first; out of
    /// place, `input` does.
    fn ft_allreduce_single_copy<T: Element>(
        &mut self,
        input: Option<&[T]>,
        data: &mut [T],
        config: FtRingConfig,
    ) -> Result<Outcome, CommError> {
        let mut scratch = std::mem::take(&mut self.read_scratch);
        let mut saved = std::mem::take(&mut self.ft_saved);
        let ring = SingleCopyRing::new(
            (config.rank, config.size, config.op_id, config.op),
            (input, data),
            (CrossMemorySource::new(&mut scratch), Some(&mut saved)),
            std::sync::Arc::clone(&self.lent),
        );
        let mut protocol = FtRing::with_ring(config, ring);
        self.ft_rings += 1;
        let members = self.members();
        let ended = self.execute(&mut protocol, ValuesRef::Empty);
        // Before the vector goes back to the caller, however the operation ended (an executor
        // error leaves the ring neither done nor aborted).
        self.lent.store(0, std::sync::atomic::Ordering::Release);
        let failure = protocol.ring().failure();
        let concluded = ended.and_then(|ended| {
            // The result is in `data` already: nothing to write back.
            self.conclude(
                &mut protocol,
                ended,
                &mut [] as &mut [T],
                |ring, outcome| {
                    outcome.excluded = left_out(ring.contributors(), &members);
                },
            )
        });
        if let Ok((_, true)) = concluded {
            let server = protocol.detach_server();
            self.endpoint().linger(self.ops, Box::new(server));
        }
        drop(protocol);
        self.read_scratch = scratch;
        self.ft_saved = saved;
        match (concluded, failure) {
            (Err(_), Some(reason)) => Err(CommError::SingleCopy { reason }),
            (concluded, _) => concluded.map(|(outcome, _)| outcome),
        }
    }
}

/// The members a returned fault-tolerant ring left out (world ranks), from its contributors
/// (positions among `members`).
fn left_out(contributors: Option<&[u32]>, members: &[u32]) -> Vec<Rank> {
    let Some(contributors) = contributors else {
        return Vec::new();
    };
    (0..members.len() as u32)
        .filter(|r| contributors.binary_search(r).is_err())
        .map(|r| Rank(members[r as usize]))
        .collect()
}
