//! Host swap's planner (ESX), the fallback: the host pages random victims out behind the tenant's back, and in the low state blocks the tenant until it is at its target.
//!
//! By reclamation state: `high` pages nothing; `soft` pages only what the levers before it
//! could not take ("page only where the balloon cannot"); `hard` pages the whole excess to
//! force reclamation, the cooperative levers continuing alongside; `low` does as `hard` and
//! blocks the tenant while it is above its target. Paging is bounded by the host swap budget
//! of one tick and by the room the world reports (swap space, what the tenant cannot give).
//! A tenant is blocked only while host swap pages it and has room for all of its excess:
//! blocked with less room than that, it would stop above its target for good (and a guest's
//! balloon, the lever that could still take the rest, stops with it), so it runs while host
//! swap takes what it can. Cost: O(1).

use super::Need;
use memtide_model::{HostSwapLever, HostSwapNote, Pages, ReclamationState};

/// Plans host paging and blocking for what `need` leaves, within `budget` this tick.
pub(super) fn plan(need: &Need, lever: &HostSwapLever, budget: Pages) -> HostSwapNote {
    let wanted = match need.state {
        ReclamationState::High => Pages::ZERO,
        ReclamationState::Soft => need.left,
        ReclamationState::Hard | ReclamationState::Low => need.excess,
    };
    let out = lever.room.map_or(wanted, |r| wanted.min(r)).min(budget);
    HostSwapNote {
        wanted,
        out,
        room: lever.room,
        blocked: need.state == ReclamationState::Low
            && out > Pages::ZERO
            && lever.room.is_none_or(|r| r >= wanted),
    }
}
