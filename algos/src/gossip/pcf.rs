//! Push-cancel-flow (003 Fig. 5), as printed with its two fixes, and its bit-flip-tolerant form.
//!
//! Each neighbour pair keeps two flows: the *active* one does what PF's single flow does; the
//! *passive* one, once both ends agree on it (`f_ji = -f_ij`), is *cancelled*: its value moves
//! into a running sum and the flow restarts from zero. The roles then swap. Flows thus stay of
//! the size of current estimates instead of growing with all mass ever exchanged, which is where
//! PF loses accuracy (003 Sec. II-B).
//!
//! Fixes (see the papers' slips list): line 11 changes phi by the difference of the overwritten
//! local flow, computed before line 12 overwrites it; lines 18-19 zero (cancel) the old passive
//! flow first, then switch roles, where the printed order zeroes the new passive flow without
//! touching phi and loses its mass. A third fix is ours: line 7 adopts the neighbour's active
//! index only when it is the one the shared role-change count implies (r mod 2); as printed,
//! messages that cross in flight deadlock a pair (see `pcf_receive`).
//!
//! Two forms ([`super::Rule`]):
//! - **as printed** (`PushCancelFlow`): phi is the sum of all flows, kept incrementally; the
//!   estimate is `v - phi`. Not bit-flip tolerant (the text says so): a corrupted flow passes
//!   through phi and its round-off stays.
//! - **tolerant** (`PushCancelFlowTolerant`, the prose variant): phi holds only cancelled mass
//!   and changes only at cancellation; the estimate is `v - phi - sum(active + passive)`, so a
//!   corrupted flow is repaired by the next exchange, as in PF.
//!
//! Crashes: besides the two flows, each neighbour slot keeps the mass cancelled with that
//! neighbour, so that on a failure notice the rank can drop everything it ever exchanged with
//! the failed rank, not only the live flows. That keeps the result the survivors' aggregate, the
//! definition every flow rule shares (see [`super`]); it costs one subtraction of that mass from
//! phi, with the round-off of its magnitude, once per failure. A failed link drops only the live
//! flows (see `pcf_drop`).
//!
//! Wire: a push carries `f_ij1 ‖ f_ij2`; the header's flags hold the active index `c_ij` (0 or
//! 1 here, 1 or 2 in the paper) and `aux` the role-change count `r_ij`.

use crate::protocol::Outbox;
use crate::rank::Rank;
use crate::wire::FrameHeader;

use super::engine::Gossip;
use super::mass::{add_into, sub_into};
use super::real::Real;
use super::Rule;

impl<T: Real> Gossip<T> {
    fn tolerant(&self) -> bool {
        self.config.rule == Rule::PushCancelFlowTolerant
    }

    /// The estimate `v - phi` (as printed) or `v - phi - sum(active + passive)` (tolerant).
    pub(super) fn pcf_estimate(&self, dst: &mut Vec<T>) {
        let width = self.layout.width();
        dst.clear();
        dst.extend_from_slice(&self.own);
        sub_into(dst, &self.phi);
        if self.tolerant() {
            for (_, slot, _) in self.flows.iter() {
                sub_into(dst, &slot[..width]);
                sub_into(dst, &slot[width..2 * width]);
            }
        }
    }

    /// Fig. 5 lines 30-33.
    pub(super) fn pcf_push(&mut self, partner: Option<Rank>, out: &mut Outbox) {
        let Some(to) = partner else {
            return;
        };
        let width = self.layout.width();
        let tolerant = self.tolerant();
        let mut half = std::mem::take(&mut self.scratch);
        self.pcf_estimate(&mut half);
        for x in half.iter_mut() {
            *x = x.half();
        }
        if !tolerant {
            add_into(&mut self.phi, &half);
        }
        let header = self.header();
        let (slot, tag) = self.flows.entry(to);
        let active = usize::from(tag.active) * width;
        add_into(&mut slot[active..active + width], &half);
        let header = header
            .with_flags(u16::from(tag.active))
            .with_aux(u64::from(tag.round));
        self.counters.messages_sent += 1;
        out.send(to, header, T::payload(&slot[..2 * width]));
        self.scratch = half;
    }

    /// Fig. 5 lines 6-29 for one received tuple `<f_ji1, f_ji2, c_ji, r_ji>`.
    pub(super) fn pcf_receive(&mut self, from: Rank, header: &FrameHeader, g: &[T]) {
        let width = self.layout.width();
        let tolerant = self.tolerant();
        let their_active = (header.flags & 1) as u8;
        let their_round = u32::try_from(header.aux).unwrap_or(u32::MAX);
        let Gossip {
            flows,
            phi,
            last_cancelled,
            ..
        } = self;
        let (slot, tag) = flows.entry(from);
        let (live, cancelled) = slot.split_at_mut(2 * width);
        // Line 7, restricted to the switch that completes a role change: after the change
        // numbered r the active index is r mod 2. As printed, two crossing messages make both
        // ends adopt each other's index, so the roles swap back and forth; once one end then
        // cancels, the pair waits forever on each other with different indices and counters
        // (found by a two-rank test with a latency).
        if tag.active != their_active
            && tag.round == their_round
            && u32::from(their_active) == their_round % 2
        {
            tag.active = their_active;
        }
        if tag.active != their_active {
            return;
        }
        let a = usize::from(tag.active) * width;
        // The passive flow is the other half: a is 0 or width.
        let p = width - a;
        // Lines 11-12: synchronise the active flow.
        let g_active = &g[a..a + width];
        for e in 0..width {
            let f = &mut live[a + e];
            if !tolerant {
                phi[e] = phi[e] - (*f + g_active[e]);
            }
            *f = -g_active[e];
        }
        let g_passive = &g[p..p + width];
        let f_passive = &live[p..p + width];
        let conserved = f_passive.iter().zip(g_passive).all(|(&f, &x)| x == -f);
        let they_cancelled = g_passive.iter().all(|&x| x == T::ZERO);
        if conserved && tag.round == their_round {
            // Lines 13-15: both ends agree; cancel.
            last_cancelled
                .entry(from)
                .0
                .copy_from_slice(&live[p..p + width]);
            cancel(&mut live[p..p + width], cancelled, phi, tolerant);
            tag.round += 1;
        } else if they_cancelled && tag.round.checked_add(1) == Some(their_round) {
            // Lines 17-20, fixed: cancel the old passive flow, then it becomes the active one.
            last_cancelled
                .entry(from)
                .0
                .copy_from_slice(&live[p..p + width]);
            cancel(&mut live[p..p + width], cancelled, phi, tolerant);
            tag.active ^= 1;
            tag.round += 1;
        } else if tag.round <= their_round {
            // Lines 22-24: passive flows differ; synchronise them like the active ones.
            for e in 0..width {
                let f = &mut live[p + e];
                if !tolerant {
                    phi[e] = phi[e] - (*f + g_passive[e]);
                }
                *f = -g_passive[e];
            }
        }
    }

    /// Stops exchanging with `peer`. After a crash everything ever exchanged with it goes (the
    /// flows and the mass cancelled with it), which leaves the survivors' aggregate. After a
    /// link failure both ends live and keep what they cancelled with each other: only the live
    /// flows go, which is why PCF does not fall back (003 Fig. 7). A cancellation in flight when
    /// the link fails is half done; the settlement (see `settle`) undoes it at the end ahead.
    pub(super) fn pcf_drop(&mut self, peer: Rank, crashed: bool) {
        let width = self.layout.width();
        let tolerant = self.tolerant();
        if let Some(slot) = self.flows.get(peer) {
            let mut drop = vec![T::ZERO; width];
            if crashed {
                add_into(&mut drop, &slot[2 * width..]);
            } else {
                add_into(&mut self.retired, &slot[2 * width..]);
                let (kept, _) = self.retired_by.entry(peer);
                add_into(kept, &slot[2 * width..]);
            }
            if !tolerant {
                add_into(&mut drop, &slot[..width]);
                add_into(&mut drop, &slot[width..2 * width]);
            }
            sub_into(&mut self.phi, &drop);
        }
        self.flows.remove(peer);
        self.last_cancelled.remove(peer);
    }

    /// A neighbour behind a failed link crashed: the mass cancelled with it, kept while both
    /// ends lived, goes as a crashed neighbour's does, which leaves the survivors' aggregate.
    pub(super) fn pcf_forget_retired(&mut self, peer: Rank) {
        let Some(kept) = self.retired_by.get(peer).map(<[T]>::to_vec) else {
            return;
        };
        sub_into(&mut self.retired, &kept);
        sub_into(&mut self.phi, &kept);
        self.retired_by.remove(peer);
    }

    /// PCF's phi equals what its form says it sums (all flows and cancelled mass as printed,
    /// cancelled mass when tolerant), up to round-off (see `local_invariants`).
    pub(super) fn pcf_phi_invariant(&self) -> Result<(), String> {
        let width = self.layout.width();
        let mut sum: Vec<f64> = self.retired.iter().map(|x| x.to_f64()).collect();
        let mut scale: Vec<f64> = sum.iter().map(|x| x.abs().max(1.0)).collect();
        // As printed phi sums all flows and cancelled mass; the tolerant phi only the
        // cancelled mass (the last third of a slot).
        let first = if self.config.rule == Rule::PushCancelFlow {
            0
        } else {
            2 * width
        };
        for (_, slot, _) in self.flows.iter() {
            for (i, x) in slot[first..].iter().enumerate() {
                sum[i % width] += x.to_f64();
                scale[i % width] = scale[i % width].max(x.to_f64().abs());
            }
        }
        let tolerance = 1e3 * f64::from(f32::EPSILON).min(if T::BITS == 64 { 1e-13 } else { 1.0 });
        for k in 0..width {
            let phi = self.phi[k].to_f64();
            if (phi - sum[k]).abs() > tolerance * scale[k] * (self.flows.len() as f64 + 1.0) {
                return Err(format!(
                    "rank {}: phi[{k}] = {phi:e} but its parts sum to {:e}",
                    self.config.rank, sum[k]
                ));
            }
        }
        Ok(())
    }
}

/// Moves a passive flow's value into the cancelled mass (and into phi for the tolerant form,
/// whose phi holds only cancelled mass) and zeroes it.
fn cancel<T: Real>(passive: &mut [T], cancelled: &mut [T], phi: &mut [T], tolerant: bool) {
    add_into(cancelled, passive);
    if tolerant {
        add_into(phi, passive);
    }
    passive.fill(T::ZERO);
}
