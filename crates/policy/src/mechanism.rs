//! Mechanism choice per reclamation state: balloon first, host swap only where the balloon cannot.

use memtide_model::{BalloonDriverInfo, Mechanism, Pages, ReclamationState};

/// One tenant's situation, as the mechanism choice needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct MechanismInput {
    pub state: ReclamationState,
    pub target: Pages,
    pub allocated: Pages,
    pub max: Pages,
    pub balloon: Pages,
    pub driver: Option<BalloonDriverInfo>,
    /// The driver has not moved toward its target for several ticks (too slow or unresponsive).
    pub balloon_stalled: bool,
    /// Most pages the host may page out of this tenant in this tick.
    pub host_swap_budget: Pages,
}

/// How to move one tenant toward its target this tick.
#[derive(Clone, Debug, PartialEq)]
pub struct MechanismPlan {
    pub balloon_target: Option<Pages>,
    pub host_swap_out: Pages,
    pub blocked: bool,
    pub mechanisms: Vec<Mechanism>,
    pub reason: String,
}

pub fn plan(input: &MechanismInput) -> MechanismPlan {
    let _ = input;
    todo!("policy helper implements")
}
