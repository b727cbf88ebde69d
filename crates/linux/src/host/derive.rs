//! Deriving a tenant's observation from raw cgroup readings: pure (plain samples in, a `TenantObservation` out), so reading the kernel stays apart from what is made of it.
//!
//! Counters in a sample are cumulative; the observation carries deltas since the previous
//! sample (the policy divides them by its own elapsed time). A counter either reading lacks
//! is `None`, never 0; one that went backwards (the cgroup was recreated) counts as a fresh
//! start.

use crate::cgroup::{CgroupSample, Limit};
use memtide_model::{Bytes, LimitLever, Pages, TenantId, TenantObservation};

/// What a tenant's observation needs besides its samples.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// MemTotal: an unlimited cgroup's limit stands for it, and no limit reads above it.
    pub machine: Pages,
    /// Swap free on the host now: anonymous memory that fits there can still be given back.
    pub swap_free: Pages,
    /// v1 `memory.swappiness` is 0: the kernel never swaps this cgroup's anonymous memory.
    pub no_anon_swap: bool,
    /// The smallest lowering of its limit worth a kernel write (see `SMALLEST_LOWERING`).
    pub smallest_lowering: Pages,
    /// v2 memory.reclaim lately answered EAGAIN for this tenant (see `host::ReclaimRefusal`).
    pub reclaim_refused: bool,
}

/// The observation of tenant `id` from its reading `now` and the one before (`None` at the
/// first): sizes, deltas of its fault counters, and its limit lever. The levers of the other
/// mechanisms are left empty for them to fill.
pub fn observation(
    id: TenantId,
    now: &CgroupSample,
    before: Option<&CgroupSample>,
    ctx: &Context,
) -> TenantObservation {
    let (swap_ins, refaults, major_faults, throttled) = match before {
        Some(b) => (
            distinct_swap_ins(
                delta(now.refault_anon, b.refault_anon),
                swap_pages(now),
                swap_pages(b),
            ),
            delta(now.refault_file, b.refault_file),
            delta(now.major_faults, b.major_faults),
            delta(now.events_high, b.events_high),
        ),
        None => (None, None, None, None),
    };
    let mut obs = TenantObservation {
        anon: now.anon.map(Bytes::to_pages_floor),
        file: now.file.map(Bytes::to_pages_floor),
        swapped: now.swap.map(Bytes::to_pages_floor),
        swap_ins,
        refaults,
        ..TenantObservation::new(id, now.usage.to_pages_floor())
    };
    // A cgroup's memory moves by its limit.
    obs.levers.limit = Some(LimitLever {
        limit: limit_pages(now.limit, ctx.machine),
        unlimited: now.limit == Limit::Max,
        unreclaimable: unreclaimable(now, ctx.swap_free, ctx.no_anon_swap),
        major_faults,
        pressure: now.pressure.as_ref().map(|p| p.some.avg10_pct),
        pressure_full: now.pressure.and_then(|p| p.full).map(|f| f.avg10_pct),
        unevictable: now.unevictable.map(Bytes::to_pages_ceil),
        smallest_lowering: ctx.smallest_lowering,
        throttled,
        reclaim_refused: ctx.reclaim_refused,
        // `swap_in.rs`.
        reads_back: true,
    });
    obs
}

/// A limit in pages: the machine when there is none, and never above it.
pub fn limit_pages(limit: Limit, machine: Pages) -> Pages {
    match limit {
        Limit::Max => machine,
        Limit::Bytes(b) => b.to_pages_floor().min(machine),
    }
}

/// Memory the tenant cannot give back now: its swap-backed memory (anonymous, and tmpfs or
/// shared memory, which the kernel counts as page cache but can only swap) beyond the swap it
/// may still use (the host's free swap, and no more than its own v2 memory.swap.max leaves it;
/// none at all when the cgroup may not swap), plus unevictable pages. Unknown anon counts as
/// the whole usage minus known page cache: never as zero; shmem is added where the kernel
/// prints it (every kernel memtide runs on does).
pub fn unreclaimable(sample: &CgroupSample, swap_free: Pages, no_anon_swap: bool) -> Pages {
    let anon = match (sample.anon, sample.file, sample.shmem) {
        (Some(a), _, Some(shmem)) => a + shmem,
        (Some(a), _, None) => a,
        (None, Some(f), _) => sample.usage.saturating_sub(f) + sample.shmem.unwrap_or_default(),
        (None, None, _) => sample.usage,
    }
    .min(sample.usage)
    .to_pages_ceil();
    let swap_room = if no_anon_swap {
        Pages::ZERO
    } else {
        swap_allowed(sample).map_or(swap_free, |allowed| allowed.min(swap_free))
    };
    let unevictable = sample.unevictable.unwrap_or(Bytes::ZERO).to_pages_ceil();
    anon.saturating_sub(swap_room) + unevictable
}

/// The swap the v2 memory.swap.max of the cgroup and of those above it still let it use: the
/// least of its own limit less what it has in swap (all of it taken when that is unknown) and
/// the room the limits above leave; `None` when none sets a bound (`max`) or none is known
/// (v1, no swap accounting: the host's free swap alone bounds it).
fn swap_allowed(sample: &CgroupSample) -> Option<Pages> {
    let own = match sample.swap_max {
        Some(Limit::Bytes(max)) => Some(max.saturating_sub(sample.swap.unwrap_or(max))),
        Some(Limit::Max) | None => None,
    };
    match (own, sample.swap_room_above) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
    .map(Bytes::to_pages_floor)
}

/// Pages in swap at a reading.
fn swap_pages(s: &CgroupSample) -> Option<u64> {
    s.swap.map(|b| b.to_pages_ceil().0)
}

/// Swap-ins of distinct pages: anonymous refaults since the last reading, at most the pages
/// that were in swap at either reading. A hot page thrashing in and out of swap refaults many
/// times a tick; the working-set probe needs how much memory was missing, not how often.
fn distinct_swap_ins(refaults: Option<u64>, now: Option<u64>, before: Option<u64>) -> Option<u64> {
    let in_swap = match (now, before) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    match (refaults, in_swap) {
        (Some(r), Some(s)) => Some(r.min(s)),
        (r, _) => r,
    }
}

/// Delta of a cumulative counter; `None` when either reading is missing. A counter that went
/// backwards (the cgroup was recreated) counts as a fresh start.
fn delta(now: Option<u64>, before: Option<u64>) -> Option<u64> {
    match (now, before) {
        (Some(n), Some(b)) if n >= b => Some(n - b),
        (Some(n), Some(_)) => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::pressure::{Pressure, PsiLine};

    const MIB: u64 = 1 << 20;

    /// A v1-like reading: 300 MiB used (250 anon, 50 cache), no swap, no PSI, under `limit`.
    fn sample(limit: Limit) -> CgroupSample {
        CgroupSample {
            usage: Bytes(300 * MIB),
            limit,
            anon: Some(Bytes(250 * MIB)),
            file: Some(Bytes(50 * MIB)),
            shmem: Some(Bytes::ZERO),
            swap: Some(Bytes::ZERO),
            unevictable: Some(Bytes::ZERO),
            refault_anon: Some(10),
            refault_file: Some(20),
            major_faults: Some(3),
            pressure: None,
            swap_accounting: true,
            swap_max: None,
            swap_room_above: None,
            events_high: None,
        }
    }

    fn ctx(swap_free_mib: u64) -> Context {
        Context {
            machine: Pages::from_mib(8192),
            swap_free: Pages::from_mib(swap_free_mib),
            no_anon_swap: false,
            smallest_lowering: Pages(256),
            reclaim_refused: false,
        }
    }

    #[test]
    fn a_first_reading_has_sizes_and_a_limit_lever_but_no_deltas() {
        let obs = observation(TenantId(3), &sample(Limit::Max), None, &ctx(0));
        assert_eq!(obs.id, TenantId(3));
        assert_eq!(obs.allocated, Pages::from_mib(300));
        assert_eq!(obs.anon, Some(Pages::from_mib(250)));
        assert_eq!(obs.file, Some(Pages::from_mib(50)));
        assert_eq!((obs.swap_ins, obs.refaults), (None, None));
        let lever = obs.levers.limit.unwrap();
        assert_eq!(
            lever.limit,
            Pages::from_mib(8192),
            "max reads as the machine"
        );
        assert!(lever.unlimited);
        assert_eq!(
            lever.unreclaimable,
            Pages::from_mib(250),
            "no swap: all anon"
        );
        assert_eq!(lever.major_faults, None);
        assert_eq!(lever.smallest_lowering, Pages(256));
    }

    #[test]
    fn counters_become_deltas_and_a_counter_that_went_backwards_starts_afresh() {
        let before = sample(Limit::Bytes(Bytes(400 * MIB)));
        let before = CgroupSample {
            events_high: Some(40),
            ..before
        };
        let now = CgroupSample {
            refault_file: Some(25),
            major_faults: Some(1),
            events_high: Some(52),
            unevictable: Some(Bytes(4097)),
            pressure: Some(Pressure {
                some: PsiLine {
                    avg10_pct: 2.5,
                    avg60_pct: 0.0,
                    avg300_pct: 0.0,
                    total_stall_us: 0,
                },
                full: Some(PsiLine {
                    avg10_pct: 0.75,
                    avg60_pct: 0.0,
                    avg300_pct: 0.0,
                    total_stall_us: 0,
                }),
            }),
            ..before.clone()
        };
        let obs = observation(TenantId(0), &now, Some(&before), &ctx(0));
        assert_eq!(obs.refaults, Some(5));
        assert_eq!(obs.swap_ins, Some(0), "10 anon refaults then 10");
        let lever = obs.levers.limit.unwrap();
        assert_eq!(
            lever.major_faults,
            Some(1),
            "3 then 1: the cgroup was recreated"
        );
        assert_eq!(lever.limit, Pages::from_mib(400));
        assert!(!lever.unlimited);
        assert_eq!(lever.pressure, Some(2.5));
        assert_eq!(lever.pressure_full, Some(0.75));
        assert_eq!(lever.throttled, Some(12), "memory.events high 40 then 52");
        assert!(!lever.reclaim_refused);
        assert_eq!(
            lever.unevictable,
            Some(Pages(2)),
            "4097 bytes touch two pages"
        );
    }

    #[test]
    fn missing_counters_are_none_and_unknown_anon_is_usage_less_cache() {
        let before = sample(Limit::Max);
        let now = CgroupSample {
            anon: None,
            swap: None,
            refault_anon: None,
            major_faults: None,
            unevictable: None,
            ..before.clone()
        };
        let refused = Context {
            reclaim_refused: true,
            ..ctx(0)
        };
        let obs = observation(TenantId(0), &now, Some(&before), &refused);
        assert!(obs.levers.limit.unwrap().reclaim_refused);
        assert_eq!(obs.levers.limit.unwrap().throttled, None, "v1: not counted");
        assert_eq!(obs.anon, None);
        assert_eq!(obs.swapped, None);
        assert_eq!(obs.swap_ins, None);
        assert_eq!(obs.refaults, Some(0));
        let lever = obs.levers.limit.unwrap();
        assert_eq!(lever.major_faults, None);
        assert_eq!(lever.unevictable, None, "not read as 0");
        assert_eq!(
            lever.unreclaimable,
            Pages::from_mib(250),
            "300 used - 50 cache"
        );
    }

    #[test]
    fn free_swap_makes_anon_reclaimable_unless_the_cgroup_may_not_swap() {
        let s = sample(Limit::Max);
        assert_eq!(
            unreclaimable(&s, Pages::from_mib(100), false),
            Pages::from_mib(150)
        );
        assert_eq!(
            unreclaimable(&s, Pages::from_mib(100), true),
            Pages::from_mib(250)
        );
        let unevictable = CgroupSample {
            unevictable: Some(Bytes(10 * MIB)),
            ..s
        };
        assert_eq!(
            unreclaimable(&unevictable, Pages::from_mib(1000), false),
            Pages::from_mib(10)
        );
    }

    #[test]
    fn tmpfs_and_shared_memory_count_with_anon_as_memory_only_swap_can_take() {
        // 250 anon + 40 of the 50 MiB cache in tmpfs: without swap all 290 stay.
        let s = CgroupSample {
            shmem: Some(Bytes(40 * MIB)),
            ..sample(Limit::Max)
        };
        assert_eq!(unreclaimable(&s, Pages::ZERO, false), Pages::from_mib(290));
        assert_eq!(
            unreclaimable(&s, Pages::from_mib(100), false),
            Pages::from_mib(190)
        );
        assert_eq!(unreclaimable(&s, Pages::ZERO, true), Pages::from_mib(290));
    }

    #[test]
    fn a_cgroups_own_swap_max_bounds_the_swap_its_anon_may_use() {
        let mib = Pages::from_mib;
        let with = |swap_max: Option<Limit>, swap: Option<u64>| CgroupSample {
            swap_max,
            swap: swap.map(|m| Bytes(m * MIB)),
            ..sample(Limit::Max)
        };
        let bytes = |m: u64| Some(Limit::Bytes(Bytes(m * MIB)));
        // 250 MiB anon, `swap_free` MiB free on the host.
        let cases = [
            (with(bytes(0), Some(0)), 1000, mib(250), "swap.max 0: none"),
            (
                with(bytes(100), Some(40)),
                1000,
                mib(190),
                "60 MiB left of 100",
            ),
            (
                with(bytes(100), Some(40)),
                30,
                mib(220),
                "the host has less",
            ),
            (with(bytes(100), Some(120)), 1000, mib(250), "over its max"),
            (
                with(bytes(100), None),
                1000,
                mib(250),
                "usage unknown: all used",
            ),
            (
                with(Some(Limit::Max), Some(40)),
                1000,
                mib(0),
                "max: unbounded",
            ),
            (
                with(None, None),
                100,
                mib(150),
                "unknown: the host's swap alone",
            ),
        ];
        let above = |swap_max: Option<Limit>, room_mib: u64| CgroupSample {
            swap_room_above: Some(Bytes(room_mib * MIB)),
            ..with(swap_max, Some(40))
        };
        let cases = cases.into_iter().chain([
            (above(bytes(100), 20), 1000, mib(230), "20 MiB left above"),
            (above(bytes(100), 200), 1000, mib(190), "its own 60 MiB"),
            (above(Some(Limit::Max), 20), 1000, mib(230), "its own max"),
            (above(None, 20), 1000, mib(230), "its own unknown"),
        ]);
        for (s, swap_free, want, why) in cases {
            assert_eq!(unreclaimable(&s, mib(swap_free), false), want, "{why}");
        }
        let obs = observation(TenantId(0), &with(bytes(0), Some(0)), None, &ctx(1000));
        assert_eq!(obs.levers.limit.unwrap().unreclaimable, mib(250));
    }

    #[test]
    fn swap_ins_count_each_swapped_page_once() {
        let cases = [
            (Some(25_600), Some(2_560), Some(1_000), Some(2_560)),
            (Some(100), Some(2_560), Some(1_000), Some(100)),
            (Some(500), None, None, Some(500)),
            (None, Some(10), Some(10), None),
        ];
        for (refaults, now, before, want) in cases {
            assert_eq!(
                distinct_swap_ins(refaults, now, before),
                want,
                "{refaults:?}"
            );
        }
    }

    #[test]
    fn deltas_need_both_readings_and_restart_on_a_reset_counter() {
        let cases = [
            (Some(10), Some(4), Some(6)),
            (Some(4), Some(4), Some(0)),
            (Some(3), Some(9), Some(3)),
            (None, Some(4), None),
            (Some(4), None, None),
        ];
        for (now, before, want) in cases {
            assert_eq!(delta(now, before), want, "{now:?} - {before:?}");
        }
    }
}
