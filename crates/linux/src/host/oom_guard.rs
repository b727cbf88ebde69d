//! The v1 OOM guard: while memtide holds a tenant's limit under its max, the kernel's OOM killer is off in its cgroup, and a tenant stalled at its limit is rescued between ticks.

use super::tenant::{ManagedTenant, OomState};
use super::LinuxHost;
use crate::cgroup::{CgroupSample, Limit, MemoryCgroup};
use crate::fs::oom_events::OomEvents;
use crate::fs::FsError;
use memtide_model::{Bytes, Stall, TenantId, WorldEvent};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the state file keeps of a tenant's OOM guard, so whoever restores the tenant (this
/// daemon, or one restarted after a crash) switches the killer back as it was found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OomRecord {
    /// v1: whether the cgroup's OOM killer was disabled before memtide changed anything
    /// (memtide disables it while it holds a limit under the tenant's max).
    #[serde(rename = "oom_kill_disable", default)]
    pub killer_was_disabled: Option<bool>,
    /// v1: memtide has disabled the cgroup's OOM killer (its guard is on), so whoever restores
    /// this record must switch the killer back on.
    #[serde(rename = "oom_guard", default)]
    pub guard_on: bool,
}

impl LinuxHost {
    /// Between ticks: a v1 tenant stalled at its limit (under_oom, with the OOM killer that
    /// memtide disabled) gets its limit raised at once by one step (5%, at least 8 MiB), up to
    /// its max; at its max the kernel's OOM killer is given back, as without memtide.
    ///
    /// Runs every 50 ms. A guarded tenant's memory.oom_control is read only when the kernel
    /// signalled its OOM eventfd, once a tick (see `observe`), or at every check when it could
    /// not be registered; a tenant found under OOM is read again at each check until it is not.
    pub fn rescue_stalled(&mut self) {
        let timeout = self.options.write_timeout;
        let machine = self.machine;
        if let Some(events) = &mut self.oom_events {
            events.fired(&mut self.fired);
            for &key in &self.fired {
                let id = TenantId(u32::try_from(key).unwrap_or(u32::MAX));
                if let Some(t) = self.tenants.get_mut(&id) {
                    if let Some(watch) = &t.oom.watch {
                        watch.take_fired();
                    }
                    t.oom.pending = true;
                    self.oom_due = true;
                }
            }
        }
        if !self.oom_due {
            return;
        }
        let mut still_due = false;
        for t in self.tenants.values_mut() {
            if !t.record.oom.guard_on || (t.oom.watch.is_some() && !t.oom.pending) {
                continue;
            }
            // Read again at the next check: not cleared below, or no eventfd to wait on.
            still_due = true;
            let Ok(oom) = t.reader.oom_control() else {
                continue;
            };
            if !oom.under_oom {
                t.oom.pending = false;
                still_due |= t.oom.watch.is_none();
                continue;
            }
            let from = match crate::fs::cgroup_v1::read_limit(t.cgroup.dir()) {
                Ok(Limit::Bytes(b)) => b.to_pages_floor(),
                _ => continue,
            };
            let max = t.max.unwrap_or(machine);
            let to = super::rescue::raised(from, max);
            if to > from
                && t.reader
                    .set_limit(&t.cgroup, Limit::Bytes(to.to_bytes()), timeout)
                    .is_ok()
            {
                self.events.push(WorldEvent::Rescued {
                    id: t.id,
                    from,
                    to,
                    stall: Stall::OutOfMemory,
                });
                if let Some(s) = &mut t.last_sample {
                    s.limit = Limit::Bytes(to.to_bytes());
                }
            }
            if to >= max {
                set_oom_guard(t, false, timeout, &mut self.oom_events);
            }
        }
        self.oom_due = still_due;
    }
}

/// v1: the cgroup's `oom_kill_disable`; `None` on v2.
pub(super) fn oom_kill_disable(cgroup: &MemoryCgroup) -> Result<Option<bool>, FsError> {
    match cgroup.version() {
        crate::fs::CgroupVersion::V1 => Ok(Some(
            crate::fs::cgroup_v1::read_oom_control(cgroup.dir())?.oom_kill_disable,
        )),
        crate::fs::CgroupVersion::V2 => Ok(None),
    }
}

/// v1: disables the OOM killer while memtide holds the tenant under its max (`on`), or gives
/// back the tenant's own setting. A tenant whose killer was already disabled is left alone.
/// The record carries the guard's state, so the state file knows what to give back. While the
/// guard is on, the kernel signals the tenant's OOMs on an eventfd in `events` (made on first
/// use); when that cannot be set up, `rescue_stalled` reads memory.oom_control at each check.
pub(super) fn set_oom_guard(
    t: &mut ManagedTenant,
    on: bool,
    timeout: Duration,
    events: &mut Option<OomEvents>,
) {
    let Some(original) = t.record.oom.killer_was_disabled else {
        return;
    };
    if original || t.record.oom.guard_on == on {
        return;
    }
    let value = if on { "1" } else { "0" };
    let path = t.cgroup.dir().join("memory.oom_control");
    if crate::fs::write_bounded(&path, value, timeout).is_err() {
        return;
    }
    t.record.oom.guard_on = on;
    t.oom = OomState {
        watch: None,
        // Look once at once: the tenant may already be at its limit.
        pending: on,
    };
    if on {
        if events.is_none() {
            *events = OomEvents::new().ok();
        }
        if let Some(events) = events {
            t.oom.watch = events
                .watch(u64::from(t.id.0), t.cgroup.dir(), timeout)
                .ok();
        }
    }
}

/// True when the cgroup's usage is within 4 MiB of its limit. A cgroup under OOM is at its
/// limit: it failed to charge at most a huge page (2 MiB) more, and an uncharge wakes its
/// waiters to try again; one further away cannot be under OOM.
pub(super) fn near_its_limit(sample: &CgroupSample) -> bool {
    match sample.limit {
        Limit::Max => false,
        Limit::Bytes(limit) => sample.usage + Bytes::from_mib(4) >= limit,
    }
}
