//! Host swap's planner (ESX), the fallback: the host pages random victims out behind the tenant's back, and in the low state blocks the tenant until it is at its target.
//!
//! By reclamation state: `high` pages nothing; `soft` pages only what the levers before it
//! could not take ("page only where the balloon cannot"); `hard` pages the whole excess to
//! force reclamation, the cooperative levers continuing alongside; `low` does as `hard` and
//! blocks the tenant while it is above its target. Paging is bounded by the host swap budget
//! of one tick. Cost: O(1).

use super::Need;
use memtide_model::{HostSwapNote, Pages, ReclamationState};

/// Plans host paging and blocking for what `need` leaves.
pub(super) fn plan(need: &Need, budget: Pages) -> HostSwapNote {
    let wanted = match need.state {
        ReclamationState::High => Pages::ZERO,
        ReclamationState::Soft => need.left,
        ReclamationState::Hard | ReclamationState::Low => need.excess,
    };
    HostSwapNote {
        wanted,
        out: wanted.min(budget),
        blocked: need.state == ReclamationState::Low && need.excess > Pages::ZERO,
    }
}
