//! The fault-tolerant collectives at any size: the ring allreduce in attempts over the
//! survivors ([`ftcoll_algos::ftring`]).

use ftcoll_algos::era::EraConfig;
use ftcoll_algos::ftring::{CommitRule, FtRing, FtRingConfig};
use ftcoll_algos::values::Element;
use ftcoll_algos::{Algorithm, Duration, Rank, ReduceOp};

use super::collectives::Outcome;
use super::run::Slack;
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
    pub fn ft_allreduce<T: Element>(
        &mut self,
        data: &mut [T],
        op: ReduceOp,
    ) -> Result<Outcome, CommError> {
        let shell = self.shell_config(Algorithm::FtRing, op, T::DTYPE, Slack::NONE)?;
        let config = FtRingConfig {
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
        };
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
            if let Some(contributors) = ring.contributors() {
                outcome.excluded = (0..members.len() as u32)
                    .filter(|r| contributors.binary_search(r).is_err())
                    .map(|r| Rank(members[r as usize]))
                    .collect();
            }
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
}
