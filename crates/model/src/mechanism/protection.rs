//! The protection of a tenant's min from the host's own reclaim: its lever (what is in force), its move (`Moves::protection`) and its planner's note with the clause it adds to the reason line.

use super::{Clause, Moves, Standing};
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The kernel's protection of a tenant's memory from the host's reclaim, as in force now: on
/// cgroup v2 `memory.low` (best-effort protection: global reclaim leaves the cgroup's memory
/// below it alone while others have memory to give); on v1 `memory.soft_limit_in_bytes`
/// (under global pressure the kernel pushes cgroups back to their soft limits first, so one
/// at or below it is passed over).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectionLever {
    /// What is protected now (`None`: the kernel's default, nothing).
    pub protected: Option<Pages>,
}

/// The kernel protection planned for the tenant's min (`ProtectionLever`): from what was in
/// force to what is asked.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectionNote {
    pub from: Option<Pages>,
    pub to: Pages,
}

impl ProtectionNote {
    /// The protection to set, when it is not the one in force.
    pub fn moved(self) -> Option<Pages> {
        (self.from != Some(self.to)).then_some(self.to)
    }

    /// The note that makes `moves`' protection (see `MechanismNote::with_moves`).
    pub(super) fn replaying(moves: &Moves) -> Option<ProtectionNote> {
        moves.protection.map(|to| ProtectionNote { from: None, to })
    }
}

impl Clause for ProtectionNote {
    /// `; protects 64.0 MiB from host reclaim`, only when it moves.
    fn clause(&self, _at: Standing, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.moved() {
            Some(to) => write!(f, "; protects {to} from host reclaim"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::MechanismNote;
    use super::*;
    use crate::decision::ReclamationState;

    #[test]
    fn a_protection_reads_only_when_it_changes() {
        let mib = Pages::from_mib;
        let with = |from| MechanismNote {
            protection: Some(ProtectionNote { from, to: mib(64) }),
            ..MechanismNote::new(ReclamationState::High, mib(64), mib(64))
        };
        assert_eq!(
            with(None).to_string(),
            "high: at target; protects 64.0 MiB from host reclaim"
        );
        assert_eq!(with(Some(mib(64))).to_string(), "high: at target");
    }
}
