//! Protection from the host's reclaim as a mechanism of the Linux host: each tenant's cgroup v2 `memory.low` (v1 `memory.soft_limit_in_bytes`) as its `ProtectionLever`, set to what the policy asks.
//!
//! The value in force is read once, at a tenant's first observation, and then known from what
//! this actuator writes (a file read per tenant per tick saved). The setting found is part of
//! the tenant's recorded `LimitSettings`, which the host writes back when it lets the tenant
//! go, so this actuator keeps no originals of its own. A write that fails is reported as the
//! tenant's `WriteFailed` and tried again at the next change.

use crate::cgroup::MemoryCgroup;
use crate::fs::hierarchy::{CgroupVersion, MemoryHierarchy};
use crate::fs::limit::Limit;
use crate::fs::{cgroup_v1 as v1, cgroup_v2 as v2, write_bounded, FsError};
use crate::host::actuator::{Actuator, TenantView};
use crate::host::Placement;
use memtide_model::{
    Bytes, Moves, Pages, ProtectionLever, TenantId, TenantObservation, TenantSpec, WorldEvent,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// Each tenant's cgroup and the protection in force there (`None` until first read).
#[derive(Debug)]
pub struct Protection {
    hierarchy: MemoryHierarchy,
    timeout: Duration,
    tenants: BTreeMap<TenantId, Protected>,
}

#[derive(Debug)]
struct Protected {
    cgroup: MemoryCgroup,
    /// The protection in force (`Some(None)`: the kernel's default, none), once read.
    in_force: Option<Option<Pages>>,
}

impl Protection {
    /// Protection for the tenants of `hierarchy`, each write bounded by `timeout`.
    pub fn new(hierarchy: MemoryHierarchy, timeout: Duration) -> Protection {
        Protection {
            hierarchy,
            timeout,
            tenants: BTreeMap::new(),
        }
    }
}

/// The protection from the host's reclaim in force in `cgroup`: v1
/// memory.soft_limit_in_bytes, v2 memory.low.
pub fn in_force(cgroup: &MemoryCgroup) -> Result<Limit, FsError> {
    match cgroup.version() {
        CgroupVersion::V1 => v1::read_soft_limit(cgroup.dir()),
        CgroupVersion::V2 => v2::read_low(cgroup.dir()),
    }
}

/// Sets the protection from the host's reclaim in `cgroup`: v1 memory.soft_limit_in_bytes, v2
/// memory.low (restored with the other settings by `MemoryCgroup::restore`).
fn set(cgroup: &MemoryCgroup, protected: Bytes, timeout: Duration) -> Result<(), FsError> {
    let file = match cgroup.version() {
        CgroupVersion::V1 => "memory.soft_limit_in_bytes",
        CgroupVersion::V2 => "memory.low",
    };
    write_bounded(&cgroup.dir().join(file), &protected.0.to_string(), timeout)
}

/// A protection as the lever reports it: zero (v2's default) and `max` (v1's) are none.
fn protected(limit: Limit) -> Option<Pages> {
    match limit {
        Limit::Bytes(b) if b > Bytes::ZERO => Some(b.to_pages_floor()),
        _ => None,
    }
}

impl Actuator for Protection {
    fn name(&self) -> &'static str {
        "protection"
    }

    fn attach(&mut self, id: TenantId, _spec: &TenantSpec, placement: &Placement) {
        let cgroup = MemoryCgroup::new(
            self.hierarchy.version,
            self.hierarchy.dir_of(&placement.cgroup),
        );
        self.tenants.insert(
            id,
            Protected {
                cgroup,
                in_force: None,
            },
        );
    }

    fn observe(
        &mut self,
        _t: &TenantView<'_>,
        obs: &mut TenantObservation,
        _events: &mut Vec<WorldEvent>,
    ) {
        let Some(p) = self.tenants.get_mut(&obs.id) else {
            return;
        };
        if p.in_force.is_none() {
            // Unreadable: no lever this tick (tried again at the next).
            p.in_force = in_force(&p.cgroup).ok().map(protected);
        }
        if let Some(in_force) = p.in_force {
            obs.levers.protection = Some(ProtectionLever {
                protected: in_force,
            });
        }
    }

    fn apply(&mut self, id: TenantId, moves: &Moves, events: &mut Vec<WorldEvent>) {
        let (Some(to), Some(p)) = (moves.protection, self.tenants.get_mut(&id)) else {
            return;
        };
        match set(&p.cgroup, to.to_bytes(), self.timeout) {
            Ok(()) => p.in_force = Some(Some(to)),
            Err(e) => events.push(WorldEvent::WriteFailed {
                id,
                to,
                error: e.to_string(),
            }),
        }
    }

    fn forget(&mut self, id: TenantId) {
        self.tenants.remove(&id);
    }
}
