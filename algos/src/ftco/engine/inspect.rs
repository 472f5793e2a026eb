//! The console's view of one FTCO rank: its place in the tree, what it holds, and one row per
//! tree neighbour with the acknowledgement state the failure detection works from.

use crate::inspect::{InspectTable, Inspection};

use super::Ftco;

impl Ftco {
    /// See [`crate::Protocol::inspect`].
    pub(super) fn inspection(&self) -> Inspection {
        let mut view = Inspection::default();
        let role = if self.at_top {
            "root"
        } else if self.down.is_empty() {
            "leaf"
        } else {
            "inner"
        };
        view.field("collective", format!("{:?}", self.config.collective));
        view.field("role", role);
        view.field("up", list(&self.up));
        view.field("down", self.down.len());
        view.field("known dead", self.dead.len());
        view.field("contributors held", self.pieces.cover().len());
        view.field(
            "result",
            if self.result.is_some() {
                "fixed"
            } else {
                "pending"
            },
        );
        view.field("conflicting pieces", self.conflicts);
        view.field("queued frames", self.queue.len());
        let mut table = InspectTable::new(&["peer", "dir", "timeout", "sent/acked", "data in"]);
        for (&peer, state) in &self.peers {
            view.neighbours.push(peer);
            let dir = if self.up.contains(&peer) {
                "up"
            } else if self.down.contains(&peer) {
                "down"
            } else {
                "other"
            };
            table.row(vec![
                peer.to_string(),
                dir.to_string(),
                state.timeout.0.to_string(),
                format!("{}/{}", state.seq_sent, state.seq_acked),
                if state.arrived { "yes" } else { "no" }.to_string(),
            ]);
        }
        view.table = Some(table);
        view
    }
}

/// Up to eight ranks, then a count.
fn list(ranks: &[u32]) -> String {
    let mut text: Vec<String> = ranks.iter().take(8).map(u32::to_string).collect();
    if ranks.len() > 8 {
        text.push(format!("(+{})", ranks.len() - 8));
    }
    if text.is_empty() {
        "-".to_string()
    } else {
        text.join(" ")
    }
}
