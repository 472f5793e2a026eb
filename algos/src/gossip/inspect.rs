//! The console's view of one gossip rank: its mass (weight, checksum), and one row per
//! neighbour's flow (PCF: both flows, which is active, and the role-change count).

use crate::inspect::{short_number, InspectTable, Inspection};
use crate::rank::Rank;

use super::engine::Gossip;
use super::real::Real;
use super::Rule;

impl<T: Real> Gossip<T> {
    /// See [`crate::Protocol::inspect`].
    pub(super) fn inspection(&self) -> Inspection {
        let mut view = Inspection::default();
        view.field("rule", format!("{:?}", self.config.rule));
        view.field("pushes", self.iteration);
        let mut mass = Vec::new();
        if self.own.len() == self.layout.width() {
            self.current_mass(&mut mass);
        }
        if let Some(&w) = mass.get(self.layout.weight()) {
            view.field("weight", short_number(w.to_f64()));
        }
        if let Some(&x) = mass.first().filter(|_| self.layout.len > 0) {
            view.field("mass x0", short_number(x.to_f64()));
        }
        if self.layout.checked && !mass.is_empty() {
            let defect = self.layout.checksum_defect(&mass);
            let verdict = if defect > self.tau { "CORRUPT" } else { "ok" };
            view.field(
                "checksum",
                format!("{verdict} (defect {defect:.1e}, tau {:.0e})", self.tau),
            );
        }
        view.field("flows", self.flows.len());
        view.field("excluded peers", self.excluded_count());
        view.field("checksum detections", self.detections);
        view.field("sent", self.counters.messages_sent);
        view.field("received", self.counters.messages_received);
        if self.config.rule.uses_flows() {
            view.table = Some(self.flow_table(&mut view.neighbours));
        }
        view
    }

    fn flow_table(&self, neighbours: &mut Vec<u32>) -> InspectTable {
        let width = self.layout.width();
        let weight = self.layout.weight();
        let pcf = matches!(
            self.config.rule,
            Rule::PushCancelFlow | Rule::PushCancelFlowTolerant
        );
        let mut table = if pcf {
            InspectTable::new(&["peer", "active", "f1 x0", "f2 x0", "roles r"])
        } else if self.layout.checked {
            InspectTable::new(&["peer", "flow x0", "flow w", "checksum"])
        } else {
            InspectTable::new(&["peer", "flow x0", "flow w"])
        };
        for (Rank(peer), slot, tag) in self.flows.iter() {
            neighbours.push(peer);
            let x0 = |base: usize| short_number(slot[base].to_f64());
            let row = if pcf {
                vec![
                    peer.to_string(),
                    format!("f{}", tag.active + 1),
                    x0(0),
                    x0(width),
                    tag.round.to_string(),
                ]
            } else {
                let mut row = vec![peer.to_string(), x0(0), x0(weight)];
                if self.layout.checked {
                    let flow = &slot[..width];
                    let ok = self.layout.checksum_defect(flow) <= self.tau;
                    row.push(if ok { "ok" } else { "CORRUPT" }.to_string());
                }
                row
            };
            table.row(row);
        }
        table
    }
}
