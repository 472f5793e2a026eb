//! Push-Flow (000 Alg. 3) and its corrected forms PFLC (Alg. 4) and PFCC (Alg. 5); HPFLC is
//! PFLC on a permutation-cycle schedule.
//!
//! Sign convention of 003 Fig. 1: `f_ij` is the mass rank i has sent to j, and the estimate is
//! `e_i = v_i - sum_j f_ij`. A push adds `e_i / 2` to `f_ij` and sends `f_ij`; j overwrites
//! `f_ji` with its negation. (000 writes the opposite sign; the printed `e_j/2` is the sender's
//! own `e_i`, see the papers' slips list.)
//!
//! PFCC is reproduced as printed: after it finds its estimate corrupted it sends the corrupted
//! flows to their neighbours, and then pushes with the estimate it computed before, without
//! recomputing it (PFLC recomputes, Alg. 4 line 9). The pushed flow is then corrupted as well, so
//! the partner answers with its own flow and the fault heals one exchange later. Line 6's
//! "send f_ij to k" sends f_ik. The estimate a rank reports is always recomputed from its
//! current flows (Alg. 3 line 10 would report the one of the last loop head).
//!
//! PFLC checks its initial mass before its flows when its estimate fails the checksum, and
//! undoes a flip there ([`super::mass::Layout::repair_initial`]; 000 Sec. 4.5 notes that initial
//! data can be repaired). Alg. 4 checks only the flows, which amplifies such a flip.

use crate::protocol::Outbox;
use crate::rank::Rank;

use super::engine::Gossip;
use super::mass::sub_into;
use super::real::Real;
use super::Rule;

impl<T: Real> Gossip<T> {
    /// `e_i = v_i - sum_j f_ij` into `dst`.
    pub(super) fn flow_estimate(&self, dst: &mut Vec<T>) {
        dst.clear();
        dst.extend_from_slice(&self.own);
        for (_, flow, _) in self.flows.iter() {
            sub_into(dst, flow);
        }
    }

    /// One push of PF, PFLC or PFCC.
    pub(super) fn pf_push(&mut self, partner: Option<Rank>, out: &mut Outbox) {
        let mut e = std::mem::take(&mut self.scratch);
        self.flow_estimate(&mut e);
        let layout = self.layout;
        let initial_weight = self.initial_weight();
        if layout.corrupted(&e, self.tau) {
            self.detections += 1;
            match self.config.rule {
                Rule::LocalCorrection => {
                    // The initial mass first: a flip there is no flow's fault. Alg. 4 would
                    // blame the flow the last push copied the defect into, reset it (and all
                    // mass exchanged with that neighbour), and copy the defect into the next
                    // pushed flow, which the neighbour drops: every push, for ever. A bit 30
                    // value flip (2^-22 relative) so cost 1.6e-2 where PF gave 1.9e-9.
                    layout.repair_initial(&mut self.own, initial_weight);
                    // Alg. 4 lines 4-9: reset every corrupted flow, then recompute.
                    for (_, flow, _) in self.flows.iter_mut() {
                        if layout.corrupted(flow, self.tau) {
                            flow.fill(T::ZERO);
                        }
                    }
                    self.flow_estimate(&mut e);
                }
                Rule::CooperativeCorrection => {
                    // Alg. 5 lines 4-8: show each corrupted flow to its neighbour.
                    let corrupted: Vec<Rank> = self
                        .flows
                        .iter()
                        .filter(|(_, flow, _)| layout.corrupted(flow, self.tau))
                        .map(|(peer, _, _)| peer)
                        .collect();
                    for peer in corrupted {
                        self.send_flow(peer, out);
                    }
                }
                _ => {}
            }
        }
        if let Some(to) = partner {
            let (flow, _) = self.flows.entry(to);
            for (f, &x) in flow.iter_mut().zip(e.iter()) {
                *f = *f + x.half();
            }
            self.send_flow(to, out);
        }
        self.scratch = e;
    }

    /// Sends the current flow towards `peer`.
    fn send_flow(&mut self, peer: Rank, out: &mut Outbox) {
        let header = self.header();
        let Some(flow) = self.flows.get(peer) else {
            return;
        };
        self.counters.messages_sent += 1;
        out.send(peer, header, T::payload(flow));
    }

    /// A flow `f_ji` arrived from `from`.
    pub(super) fn pf_receive(&mut self, from: Rank, values: &[T], out: &mut Outbox) {
        let layout = self.layout;
        let tau = self.tau;
        let received_ok = !layout.corrupted(values, tau);
        match self.config.rule {
            Rule::PushFlow => self.overwrite(from, values),
            Rule::LocalCorrection => {
                if received_ok {
                    self.overwrite(from, values);
                } else {
                    self.detections += 1;
                }
            }
            _ => {
                if received_ok {
                    self.overwrite(from, values);
                } else {
                    // Alg. 5 lines 17-20: reset only if the local flow is corrupted too, and
                    // answer with the local flow either way.
                    self.detections += 1;
                    let (flow, _) = self.flows.entry(from);
                    if layout.corrupted(flow, tau) {
                        flow.fill(T::ZERO);
                    }
                    self.send_flow(from, out);
                }
            }
        }
    }

    /// `f_ij <- -f_ji`.
    fn overwrite(&mut self, from: Rank, values: &[T]) {
        let (flow, _) = self.flows.entry(from);
        for (f, &x) in flow.iter_mut().zip(values) {
            *f = -x;
        }
    }
}
