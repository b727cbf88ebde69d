//! Kernel protection of a tenant's min (issue 26): the host's own reclaim, which runs whatever memtide decides (another program's demand, a page-cache burst), is told to leave each tenant's min alone.
//!
//! **The rule.** memtide guarantees a tenant its configured min (ESX's reservation): no limit
//! of memtide's goes below it. The kernel's global reclaim does not know that, so a tenant at
//! its floor could still lose pages to memory pressure from outside. Where the world offers
//! protection (cgroup v2 `memory.low`, v1's soft limit), the planner asks for the tenant's min
//! to be protected: on v2 global reclaim then takes from the cgroup's memory below its min
//! only once every cgroup's unprotected memory is gone; on v1 the kernel pushes the cgroups
//! above their soft limits back first, so one at its floor is passed over.
//!
//! **Guarantees.** The protection asked is the min, never more (a larger one would shelter
//! memory memtide means to take); a protection already in force is not written again.
//!
//! **Cost.** O(1) per tenant, no state.

use memtide_model::{Pages, ProtectionLever, ProtectionNote};

/// Plans the protection of a tenant whose min is `min`.
pub(super) fn plan(lever: &ProtectionLever, min: Pages) -> ProtectionNote {
    ProtectionNote {
        from: lever.protected,
        to: min,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_min_is_protected_and_a_protection_in_force_is_not_asked_again() {
        let mib = Pages::from_mib;
        let none = plan(&ProtectionLever { protected: None }, mib(64));
        assert_eq!(none.moved(), Some(mib(64)));
        let other = plan(
            &ProtectionLever {
                protected: Some(mib(32)),
            },
            mib(64),
        );
        assert_eq!(other.moved(), Some(mib(64)));
        let same = plan(
            &ProtectionLever {
                protected: Some(mib(64)),
            },
            mib(64),
        );
        assert_eq!(same.moved(), None);
    }
}
