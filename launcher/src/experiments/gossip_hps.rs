//! Paper 000's round-based gossip (Sec. 6) in the simulator.

use super::Ctx;

/// 000 Figs. 9-10
pub fn fig9_10(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 000 Figs. 9-10")
}

/// 000 Fig. 12
pub fn fig12(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 000 Fig. 12")
}

/// 000 Fig. 13
pub fn fig13(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 000 Fig. 13")
}

