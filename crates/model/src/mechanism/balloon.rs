//! The guest balloon (ESX): its lever (the balloon, the guest's memory and its driver), its move (`Moves::balloon`, the balloon's target) and its planner's note with the clause it adds to the reason line.

use super::{Clause, Moves, Standing};
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A guest balloon and its driver.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalloonLever {
    /// The guest's memory, which the balloon's pages are taken from: the tenant holds at most
    /// `memory - size`. (A tenant's max in policy may be set below it: a limit on the VM.)
    pub memory: Pages,
    /// Pages in the balloon now.
    pub size: Pages,
    /// The guest's driver; without one the balloon holds what it has (pages ballooned at boot)
    /// and cannot move.
    pub driver: Option<BalloonDriverInfo>,
    /// The host backs only the memory the guest uses (it reports its free pages, as a real
    /// guest with free page reporting does): what the tenant holds falls short of what the
    /// balloon leaves it by the guest's free memory, also while the guest pages. False where
    /// a guest's free pages stay backed (the simulator's).
    #[serde(default)]
    pub free_unbacked: bool,
}

/// A tenant's balloon driver as the host knows it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalloonDriverInfo {
    /// Most pages the driver inflates or deflates per second.
    pub rate_per_s: Pages,
    /// Largest balloon the guest allows.
    pub limit: Pages,
}

/// The guest balloon's part.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalloonNote {
    pub size: Pages,
    /// `None` without a driver.
    pub target: Option<Pages>,
    /// The guest's balloon limit, with a driver.
    pub limit: Option<Pages>,
    pub stalled: bool,
    /// Excess left for the mechanisms after the balloon: all of it without a driver or with a
    /// stalled one, else what lies past the guest's limit.
    pub beyond: Pages,
}

impl BalloonNote {
    /// The note that makes `moves`' balloon target (see `MechanismNote::with_moves`).
    pub(super) fn replaying(moves: &Moves) -> Option<BalloonNote> {
        moves.balloon.map(|target| BalloonNote {
            size: Pages::ZERO,
            target: Some(target),
            limit: Some(target),
            stalled: false,
            beyond: Pages::ZERO,
        })
    }
}

impl Clause for BalloonNote {
    /// `; balloon 0.0 MiB -> 76.0 MiB`, then, above the target, why it stops short.
    fn clause(&self, at: Standing, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.limit, self.target) {
            (Some(limit), Some(bt)) => {
                if bt != self.size {
                    write!(f, "; balloon {} -> {}", self.size, bt)?;
                } else if at.over {
                    write!(f, "; balloon holds at {bt}")?;
                }
                if at.over {
                    if self.stalled {
                        f.write_str("; balloon stalled")?;
                    } else if self.beyond > Pages::ZERO {
                        write!(
                            f,
                            "; guest balloon limit {limit} reached, {} beyond it",
                            self.beyond
                        )?;
                    }
                }
                Ok(())
            }
            _ if at.over => f.write_str("; no balloon driver"),
            _ => Ok(()),
        }
    }
}
