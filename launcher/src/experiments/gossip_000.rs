//! Paper 000's resilience experiments (Sec. 4.4) in the simulator.

use super::Ctx;

/// 000 Fig. 1
pub fn fig1(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 000 Fig. 1")
}

/// 000 Fig. 2
pub fn fig2(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 000 Fig. 2")
}

/// 000 Fig. 3
pub fn fig3(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 000 Fig. 3")
}

/// 000 Figs. 4-5
pub fn fig4_5(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 000 Figs. 4-5")
}

/// 000 Fig. 6
pub fn fig6(_ctx: &Ctx) -> anyhow::Result<()> {
    anyhow::bail!("experiment not implemented yet: 000 Fig. 6")
}

