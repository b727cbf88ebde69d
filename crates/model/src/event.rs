//! What happens in a world outside the controller's decisions: limits written or refused, tenants that leave, restores that fail, rescues between ticks.

use crate::{Pages, TenantId};

/// Something that happened in a world this tick (or between ticks), for the runner and its sink to act on, log and count.
#[derive(Clone, Debug, PartialEq)]
pub enum WorldEvent {
    /// A limit was written (or, in a dry run, would have been). `from` is `None` when there
    /// was no limit (the kernel's `max`).
    Limit {
        id: TenantId,
        from: Option<Pages>,
        to: Pages,
        written: bool,
    },
    /// A write failed; the previous limit stays.
    WriteFailed {
        id: TenantId,
        to: Pages,
        error: String,
    },
    /// The host refused a limit under what the tenant cannot give back.
    BelowFloor {
        id: TenantId,
        to: Pages,
        floor: Pages,
    },
    /// The tenant left the world (a cgroup vanished or has no processes left); it is no longer
    /// managed. What still exists got back what the world changed (`restored`); when that
    /// failed, `RestoreFailed` follows and the world keeps trying. A tenant that `may_return`
    /// (an adopted cgroup) waits to be attached again; one that may not (a launched command
    /// that ended) is stopped.
    Gone {
        id: TenantId,
        name: String,
        why: String,
        restored: bool,
        may_return: bool,
    },
    /// Giving a tenant that left back its recorded settings failed; retried every tick and at exit.
    RestoreFailed { name: String, error: String },
    /// Reading a tenant failed this tick (it is left out of this tick's observation).
    ReadFailed { id: TenantId, error: String },
    /// The access sampler could not measure this tick.
    SamplerFailed { id: TenantId, error: String },
    /// The tenant's adapter (a balloon agent for its server) could not be started; it is
    /// tried again after a back-off.
    AdapterFailed { id: TenantId, error: String },
    /// An adapter an earlier memtide left in the tenant's cgroup was killed as the tenant was
    /// adopted (its pool left for the new adapter to give back).
    StrayAdapterKilled { id: TenantId, pid: u32 },
    /// Page sharing could not be read or driven this tick (the scanner keeps its last pace).
    SharingFailed { error: String },
    /// A tenant marked isolated has pages merged with others' (its own processes asked the
    /// kernel to merge): reported once.
    IsolatedMerged { id: TenantId, pages: Pages },
    /// A tenant stalled at its limit got its limit raised at once: Linux v1, its OOM killer
    /// disabled by memtide, between ticks; v2, throttled over memory.high under pressure, at
    /// the tick.
    Rescued {
        id: TenantId,
        from: Pages,
        to: Pages,
        stall: Stall,
    },
    /// Tenant `id`'s swapped memory was read back ahead of its faults (`Moves::swap_in`, by a
    /// worker between ticks): `advised` bytes of its processes' anonymous mappings were asked
    /// for, in `processes` processes; `error` names what failed, where something did.
    SwappedIn {
        id: TenantId,
        asked: Pages,
        advised: crate::Bytes,
        processes: u32,
        took: std::time::Duration,
        error: Option<String>,
    },
    /// A VM's balloon was asked to reach `size` (or, in a dry run, would have been).
    Balloon {
        id: TenantId,
        from: Pages,
        size: Pages,
        written: bool,
    },
    /// A VM was paused until it is at its target (ESX's low state), or let run again.
    Blocked { id: TenantId, blocked: bool },
    /// A VM's QMP socket could not be reached or answered an error: this tick it has no
    /// balloon lever, only host swap.
    VmFailed { id: TenantId, error: String },
}

/// How a rescued tenant was stalled at its limit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Stall {
    /// Out of memory with its OOM killer held off by memtide (Linux v1).
    OutOfMemory,
    /// Throttled over memory.high, under pressure or with reclaim refused (Linux v2).
    Throttled,
}

impl Stall {
    /// Why the limit was raised, as the log and the API say it.
    pub fn reason(self) -> &'static str {
        match self {
            Stall::OutOfMemory => {
                "stalled at its limit (out of memory, killer held off): raised at once"
            }
            Stall::Throttled => {
                "throttled over its memory.high under pressure (or reclaim refused): raised at once"
            }
        }
    }
}
