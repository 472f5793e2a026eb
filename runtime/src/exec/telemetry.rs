//! Status samples for the console, taken by the executor (the only one who sees the protocol)
//! when the control thread says one is due: at most one per telemetry period, so a rank's
//! reporting cost is bounded whatever its message rate.

use ftcoll_algos::protocol::{Detail, Phase, Protocol};

use super::Endpoint;
use crate::control::RankSample;
use crate::transport::Transport;

impl<T: Transport> Endpoint<T> {
    /// Sends a sample of `protocol` (operation `self.op_index`) if one is due.
    pub(super) fn sample_if_due<P: Protocol + ?Sized>(&mut self, protocol: &P) {
        if self.control.sample_due() {
            let sample = self.sample_of(protocol);
            self.send_sample(&sample);
        }
    }

    /// Keeps the final state of a finished operation, for the samples sent between operations.
    pub(super) fn remember_final<P: Protocol + ?Sized>(&mut self, protocol: &P) {
        if self.telemetry_on {
            self.last_sample = Some(self.sample_of(protocol));
        }
    }

    /// Records the outcome of operation `op` for samples between operations, unless the
    /// executor already kept its protocol's final state (agreements run outside it).
    pub fn note_outcome(&mut self, op: u64, value: f64) {
        if !self.telemetry_on || self.last_sample.as_ref().is_some_and(|s| s.op == op) {
            return;
        }
        self.last_sample = Some(RankSample {
            op,
            iteration: 0,
            phase: Phase::Done,
            estimate: value,
            messages_sent: self.sent_total,
            detections: 0,
            inspection: None,
            suspected: Vec::new(),
        });
    }

    /// Between operations (a console-paced job waiting for the next one): sends the last
    /// operation's final state if a sample is due.
    pub fn idle_telemetry(&mut self) {
        if !self.control.sample_due() {
            return;
        }
        if let Some(mut sample) = self.last_sample.take() {
            sample.messages_sent = self.sent_total;
            sample.suspected = std::mem::take(&mut self.suspicions);
            if !self.control.watched() {
                sample.inspection = None;
            }
            self.send_sample(&sample);
            self.last_sample = Some(sample);
        }
    }

    fn sample_of<P: Protocol + ?Sized>(&mut self, protocol: &P) -> RankSample {
        protocol.estimate(&mut self.sample_scratch);
        let status = protocol.status();
        RankSample {
            op: self.op_index,
            iteration: status.iteration,
            phase: protocol.phase(),
            estimate: self.sample_scratch.first().copied().unwrap_or(f64::NAN),
            messages_sent: self.sent_total,
            detections: match status.detail {
                Detail::Gossip { detections, .. } => detections,
                _ => 0,
            },
            inspection: self.control.watched().then(|| protocol.inspect()),
            suspected: std::mem::take(&mut self.suspicions),
        }
    }

    fn send_sample(&self, sample: &RankSample) {
        if let Err(error) = self.control.telemetry(sample.clone()) {
            // The control thread notices a dead launcher and exits the rank.
            tracing::debug!(%error, "telemetry sample not sent");
        }
    }
}

/// Whether a sample's phase means the rank holds its final value.
pub fn is_final(phase: Phase) -> bool {
    matches!(phase, Phase::Done | Phase::Aborted)
}
