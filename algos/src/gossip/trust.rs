//! Which estimate a rank reports: its current ratio while its weight is clearly positive, else
//! the last ratio that was.
//!
//! Push-Sum's weights stay positive; the flow rules' do not. When two neighbours push to each
//! other at once, each overwrites its flow with the negation of the other's, so both keep the
//! mass they sent (000 Sec. 4.4.3 counts such a crossing as a lost message). The next exchange
//! between them restores flow conservation by taking that surplus back from whichever end
//! receives it, and that end may have passed the surplus on meanwhile: its weight falls to zero
//! or below. In a PF run on a 64-rank hypercube, a rank whose push of b crossed a neighbour's
//! push of a, and which pushed twice more since, held a/4 + b/2 when that neighbour's next flow
//! took back exactly a/4 + b/2: its mass was round-off, x / w was -0.25 where the average was
//! 0.46, and PCF's exact zero gave NaN. Such a mass says nothing about the average, whatever its
//! sign, and a rank stopped at that instant (by its push budget, the stopping rule or the
//! oracle) returned it.
//!
//! A rank therefore trusts its mass only while at least half of its weight's significant digits
//! survive the round-off of the sum that computes it: the weight exceeds that sum's round-off
//! bound (unit round-off u times the terms' magnitudes and count) by 1/sqrt(u), 10^8 in double
//! and 4096 in single precision, so round-off moves a trusted ratio by at most sqrt(u) relative.
//! It keeps the ratio of its last trusted mass (at the start, after each push and after each
//! failure notice). Its estimate, and the result it completes with, is the current ratio when
//! trusted and that kept one otherwise, at most one push old. Push-Sum's weights stay positive
//! and always pass, so it reports as before.

use super::engine::Gossip;
use super::real::Real;
use super::Rule;

impl<T: Real> Gossip<T> {
    /// Whether the current weight is clearly positive: above its sum's round-off bound divided
    /// by sqrt(u). False for a NaN weight.
    pub(super) fn weight_trusted(&self) -> bool {
        let j = self.layout.weight();
        if self.own.len() <= j {
            return false;
        }
        let width = self.layout.width();
        let own = self.own[j].to_f64().abs();
        // Magnitudes of the terms of the weight's sum, and their count.
        let (magnitude, terms) = match self.config.rule {
            Rule::PushSum => (own, 1),
            Rule::PushFlow | Rule::LocalCorrection | Rule::CooperativeCorrection => {
                let flows: f64 = self.flows.iter().map(|(_, f, _)| f[j].to_f64().abs()).sum();
                (own + flows, self.flows.len() + 1)
            }
            Rule::PushCancelFlow => (own + self.phi[j].to_f64().abs(), 2),
            Rule::PushCancelFlowTolerant => {
                let flows: f64 = self
                    .flows
                    .iter()
                    .map(|(_, s, _)| s[j].to_f64().abs() + s[width + j].to_f64().abs())
                    .sum();
                (
                    own + self.phi[j].to_f64().abs() + flows,
                    2 * self.flows.len() + 2,
                )
            }
        };
        let bound = magnitude * terms as f64 * T::UNIT_ROUNDOFF;
        self.mass_element(j).to_f64() > bound / T::UNIT_ROUNDOFF.sqrt()
    }

    /// Keeps the current ratio `x / w` (unscaled) if the weight is trusted.
    pub(super) fn keep_trusted_ratio(&mut self) {
        if !self.weight_trusted() {
            return;
        }
        let w = self.mass_element(self.layout.weight()).to_f64();
        let mut kept = std::mem::take(&mut self.trusted_ratio);
        kept.clear();
        kept.extend((0..self.layout.len).map(|k| self.mass_element(k).to_f64() / w));
        self.trusted_ratio = kept;
    }

    /// The estimate this rank stands by: the current one when its weight is trusted, else the
    /// last trusted ratio, scaled for a sum by the live rank count known now.
    pub(super) fn reported_estimate(&self, dst: &mut Vec<f64>) {
        if self.trusted_ratio.is_empty() || self.weight_trusted() {
            self.current_estimate(dst);
            return;
        }
        let scale = self.scale();
        dst.clear();
        dst.extend(self.trusted_ratio.iter().map(|x| x * scale));
    }
}
