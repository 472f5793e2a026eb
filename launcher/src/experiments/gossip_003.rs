//! Paper 003's accuracy, link-failure and dmGS experiments in the simulator.

use super::Ctx;

/// 003 Figs. 3 and 6
pub fn fig3_6(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 003 Figs. 3 and 6")
}

/// 003 Figs. 4 and 7
pub fn fig4_7(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 003 Figs. 4 and 7")
}

/// 003 Fig. 8
pub fn dmgs(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 003 Fig. 8")
}

