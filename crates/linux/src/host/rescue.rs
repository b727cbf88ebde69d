//! The v2 rescue: a tenant the kernel keeps throttling over a memory.high it cannot get under gets its limit raised at once, at the tick, as v1's OOM guard raises a stalled tenant's.
//!
//! On v2 a limit (memory.high) under what a tenant must keep does not kill it: the kernel
//! throttles each of its allocations, for as long as it stays over. The rails' back-off only
//! holds a shrink; it never raises a limit already too low. A tenant is rescued when, at a
//! tick, all of these hold:
//!
//! - its limit in force is memory.high and its usage is over it or within 4 MiB of it;
//! - its memory.events `high` count climbed since the last tick (the kernel throttled it);
//! - its own memory.pressure `some avg10` is at least the rails' `backoff_pressure`, or its
//!   last memory.reclaim answered EAGAIN (the kernel found nothing more to take).
//!
//! The limit rises by v1's rescue step ([`raised`]: 5%, at least 8 MiB), never above the
//! tenant's max nor the limit it had before memtide, logged `rescued`.

use super::oom_guard::near_its_limit;
use super::tenant::ManagedTenant;
use super::LinuxHost;
use crate::cgroup::{CgroupSample, Limit, LimitSettings};
use memtide_model::{Pages, Stall, WorldEvent};
use std::time::Duration;

/// What the rescue of one tick needs besides the tenant.
#[derive(Copy, Clone, Debug)]
pub(super) struct Rescue {
    /// MemTotal: no limit stands for it.
    pub machine: Pages,
    /// The tenant's own PSI some avg10 (percent) that, with throttling, calls for a rescue.
    pub pressure: f64,
    /// The tenant's last memory.reclaim answered EAGAIN, lately.
    pub reclaim_refused: bool,
    pub timeout: Duration,
}

impl Rescue {
    /// Rescues `t`, read as `now` this tick, when it is throttled over its memory.high (see the
    /// module docs): memory.high is raised by one step and `now`'s limit with it, so the
    /// observation shows the limit in force.
    pub fn throttled(
        &self,
        t: &mut ManagedTenant,
        now: &mut CgroupSample,
        events: &mut Vec<WorldEvent>,
    ) {
        let LimitSettings::V2 { high, max, .. } = t.record.original else {
            return;
        };
        let Some(before) = &t.last_sample else {
            return;
        };
        let throttled = matches!(
            (now.events_high, before.events_high),
            (Some(n), Some(b)) if n > b
        );
        let pressed = now
            .pressure
            .is_some_and(|p| p.some.avg10_pct >= self.pressure);
        if !throttled || !(pressed || self.reclaim_refused) || !near_its_limit(now) {
            return;
        }
        let Limit::Bytes(limit) = now.limit else {
            return;
        };
        let from = limit.to_pages_floor();
        let original = match high.min(max) {
            Limit::Max => self.machine,
            Limit::Bytes(b) => b.to_pages_floor(),
        };
        let cap = t.max.unwrap_or(self.machine).min(original);
        let to = raised(from, cap);
        if to <= from {
            return;
        }
        match t
            .reader
            .set_limit(&t.cgroup, Limit::Bytes(to.to_bytes()), self.timeout)
        {
            Ok(()) => {
                now.limit = Limit::Bytes(to.to_bytes());
                events.push(WorldEvent::Rescued {
                    id: t.id,
                    from,
                    to,
                    stall: Stall::Throttled,
                });
            }
            Err(e) if e.is_vanished() => {}
            Err(e) => events.push(WorldEvent::WriteFailed {
                id: t.id,
                to,
                error: e.to_string(),
            }),
        }
    }
}

/// The limit a rescue gives a tenant held at `from`: one step up (5%, at least 8 MiB), at
/// most `cap`.
pub(super) fn raised(from: Pages, cap: Pages) -> Pages {
    (from + from.scale(0.05).max(Pages::from_mib(8))).min(cap)
}

impl LinuxHost {
    /// The tenant's own PSI at which a throttled v2 tenant is rescued: the rails'
    /// `backoff_pressure`, as a reload changes it.
    pub fn set_rescue_pressure(&mut self, pressure: f64) {
        self.options.rescue_pressure = pressure;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rescue_raises_by_five_percent_at_least_8_mib_and_never_past_its_cap() {
        let mib = Pages::from_mib;
        assert_eq!(raised(mib(100), mib(1024)), mib(108), "8 MiB over 5 MiB");
        assert_eq!(raised(mib(400), mib(1024)), mib(420), "5%");
        assert_eq!(raised(mib(400), mib(410)), mib(410), "capped");
        assert_eq!(raised(mib(400), mib(400)), mib(400), "at its cap");
    }
}
