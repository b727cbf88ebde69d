//! Host swap (ESX's fallback): its lever (pages swapped, the room left), its moves (`Moves::host_swap_out` and `blocked`) and its planner's note with the clause it adds to the reason line.

use super::{Clause, Moves, Standing};
use crate::decision::ReclamationState;
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Host swap of a tenant's memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSwapLever {
    /// Pages of the tenant in host swap now.
    pub swapped: Pages,
    /// Pages the host swapped back in since the previous observation, where known.
    pub swap_ins: Option<u64>,
    /// The most the host can page out of the tenant now (its swap device's free space, less
    /// what the tenant cannot give), where the world bounds it; `None`: no bound known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<Pages>,
}

/// Host swap's part (ESX's fallback), with blocking in the low state.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSwapNote {
    /// Pages the state calls for paging out.
    pub wanted: Pages,
    /// Pages actually paged out (bounded by the host swap budget and its room).
    pub out: Pages,
    /// The most the host could page out of the tenant, where its world bounds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<Pages>,
    /// Held until at its target: only while paging brings it there (a tenant blocked with
    /// nothing left to page would stop for good, and a guest's balloon stops with it).
    pub blocked: bool,
}

impl HostSwapNote {
    /// The note that makes `moves`' paging and blocking (see `MechanismNote::with_moves`).
    pub(super) fn replaying(moves: &Moves) -> Option<HostSwapNote> {
        (moves.host_swap_out > Pages::ZERO || moves.blocked).then_some(HostSwapNote {
            wanted: moves.host_swap_out,
            out: moves.host_swap_out,
            room: None,
            blocked: moves.blocked,
        })
    }
}

impl Clause for HostSwapNote {
    /// Above the target only: `; host swap 32.0 MiB (of 76.0 MiB, limited by host swap
    /// budget); blocked until at target`.
    fn clause(&self, at: Standing, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !at.over {
            return Ok(());
        }
        // Paging stopped short by the room the world reports, not by the budget.
        let by_room = self.out < self.wanted && self.room == Some(self.out);
        if self.out > Pages::ZERO {
            write!(f, "; host swap {}", self.out)?;
            if by_room {
                write!(f, " (of {}, all the room host swap has)", self.wanted)?;
            } else if self.out < self.wanted {
                write!(f, " (of {}, limited by host swap budget)", self.wanted)?;
            }
        } else if by_room {
            write!(f, "; no room in host swap, {} left to page", self.wanted)?;
        } else if self.wanted > Pages::ZERO {
            write!(
                f,
                "; host swap budget exhausted, {} left to page",
                self.wanted
            )?;
        } else if at.state == ReclamationState::High {
            f.write_str("; no host swap in high state")?;
        }
        if self.blocked {
            f.write_str("; blocked until at target")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{BalloonNote, MechanismNote};
    use super::*;

    #[test]
    fn a_tenant_without_driver_in_low_reads_as_paged_and_blocked() {
        let m = MechanismNote {
            balloon: Some(BalloonNote {
                size: Pages::ZERO,
                target: None,
                limit: None,
                stalled: false,
                beyond: Pages::from_mib(76),
            }),
            host_swap: Some(HostSwapNote {
                wanted: Pages::from_mib(76),
                out: Pages::from_mib(32),
                room: None,
                blocked: true,
            }),
            ..MechanismNote::new(
                ReclamationState::Low,
                Pages::from_mib(256),
                Pages::from_mib(180),
            )
        };
        assert_eq!(
            m.to_string(),
            "low: allocated 256.0 MiB > target 180.0 MiB; no balloon driver; host swap 32.0 MiB \
             (of 76.0 MiB, limited by host swap budget); blocked until at target"
        );
    }
}
