//! What one simulated tenant will cost in memory, predicted from its configuration before it boots: bytes per simulated page of each per-page structure, and what grows with the run.
//!
//! Per guest-physical page (the tenant's max): the guest's flags (1 byte), owner value (an
//! entry), the pmap's entry (2 bits) and at most one CLOCK queue entry (an entry, and an
//! eighth more: the queue's growth) while the page is resident. Per page of the workload's
//! regions: its anonymous or file map entry and a file block's evicted bit. An entry is 2
//! bytes for a guest whose pages and regions are under 256 MiB each and 4 otherwise
//! (`entries::Width`): 5.5 bytes a guest page and 2.1 a region page, or 9.8 and 4.1. An
//! application pool adds its own lists (16 bytes per pool page at most: a database's LRU),
//! page sharing its contents and hash table slots and the pmap's shared bit (24 bytes and a
//! bit per guest page), sampling the pmap's marks (8 bytes a sampled page, and a bit per 16
//! guest pages), and a key-value server 4 bytes per second of the run (what a wake-up is
//! judged by), its share of the open window's latencies and of its demand schedule, and one
//! closed report window (32 bytes) per `window_s`.
//!
//! These are bounds: a structure is counted at the size it reaches when every page is
//! used, so a run whose tenants leave memory untouched uses less (docs/benchmarks.md,
//! "Predicted peak memory", compares the prediction with measured peaks).

use crate::config::VmConfig;
use crate::entries::Width;
use crate::workload::Workload;
use std::time::Duration;

/// Eighths of a byte per guest-physical page with entries of `width`: flags 1, the pmap's
/// 2 bits, the owner value, and a CLOCK queue entry and an eighth.
fn guest_page_eighths(width: Width) -> u64 {
    8 + 2 + width.bytes() * 8 + width.bytes() * 9
}

/// Eighths of a byte per page of the anonymous region or the file set with entries of
/// `width`: the map entry and, for a file block, its evicted bit (counted for both: a bound).
fn region_page_eighths(width: Width) -> u64 {
    width.bytes() * 8 + 1
}
/// Bytes per pool page of an application with a pool of its own, at most (a database's
/// buffer pool: previous, next, page and slot of each frame).
const POOL_PAGE_BYTES: u64 = 16;
/// Bytes per guest page where the host shares pages: the page's contents key (8) and a
/// slot of the hash table (16); and the pmap's shared bit, an eighth.
const SHARING_PAGE_BYTES: u64 = 24;
/// Bytes of one sampled page's mark in the pmap (a page of a period's sample).
const SAMPLE_MARK_BYTES: u64 = 8;
/// Guest pages per byte of the pmap's summary of its marks.
const PAGES_PER_SUMMARY_BYTE: u64 = crate::pmap::GROUP as u64 * 8;
/// A key-value server's bytes per second of the run: its record of the tick
/// (`slo::SECOND_BYTES`) and its share of the schedule and the open window's latencies (its
/// closed report windows are counted apart).
const KV_SECOND_BYTES: u64 = crate::slo::SECOND_BYTES + 16;
/// Bytes of one closed report window of a key-value server.
const KV_WINDOW_BYTES: u64 = crate::slo::WINDOW_BYTES;
/// What every tenant costs beyond its pages: the VM, its workload, sampler and balloon, the
/// controller's and the runner's state and its row in a tick's record (measured: 10,000
/// idle 4 MiB tenants).
pub const TENANT_BYTES: u64 = 24 * 1024;

/// The predicted peak bytes of one tenant running `workload` in `vm` for `duration`,
/// `sharing` when the host shares pages.
pub fn tenant(vm: &VmConfig, workload: &Workload, duration: Duration, sharing: bool) -> u64 {
    let guest = vm.max.0;
    let (anon, file) = (workload.anon_pages(), workload.file_pages());
    let width = Width::of(u32::try_from(guest).unwrap_or(u32::MAX), anon, file);
    let region = u64::from(anon) + u64::from(file);
    let pool = workload.pool().map_or(0, |p| u64::from(p.max()));
    let kv = workload.kv().map_or(0, |kv| {
        let seconds = duration.as_secs().saturating_add(1);
        let windows = (duration.as_secs_f64() / kv.window_s()).ceil() as u64 + 1;
        (seconds.saturating_mul(KV_SECOND_BYTES))
            .saturating_add(windows.saturating_mul(KV_WINDOW_BYTES))
    });
    let shared = if sharing {
        guest * SHARING_PAGE_BYTES + guest.div_ceil(8)
    } else {
        0
    };
    let sampled = vm.sampling.as_ref().map_or(0, |s| {
        u64::from(s.sample_pages).min(guest) * SAMPLE_MARK_BYTES
            + guest.div_ceil(PAGES_PER_SUMMARY_BYTE)
    });
    (guest * guest_page_eighths(width)).div_ceil(8)
        + (region * region_page_eighths(width)).div_ceil(8)
        + pool * POOL_PAGE_BYTES
        + kv
        + shared
        + sampled
        + TENANT_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TenantKind;
    use crate::cost::CostModel;
    use crate::workload::{Pace, TouchPhase, WorkloadConfig};
    use memtide_model::Pages;

    fn toucher(max_mib: u64, allocated_mb: f64) -> (VmConfig, Workload) {
        let config = WorkloadConfig::Toucher {
            phases: vec![TouchPhase {
                at_s: 0.0,
                working_set_mb: allocated_mb,
            }],
            allocated_mb: Some(allocated_mb),
            skew: Default::default(),
            pace: Pace::default(),
        };
        let workload = Workload::new(&config, &CostModel::default()).unwrap();
        let vm = VmConfig {
            kind: TenantKind::Vm,
            max: Pages::from_mib(max_mib),
            overhead: Pages::ZERO,
            kernel: Pages::from_mib(1),
            guest_swap: Pages::ZERO,
            balloon: None,
            initial_balloon: Pages::ZERO,
            sampling: None,
            content: Default::default(),
            workload: config,
            io: None,
            disk: None,
        };
        (vm, workload)
    }

    #[test]
    fn a_tenant_of_256_mib_or_more_costs_about_ten_bytes_a_guest_page_and_four_a_region_page() {
        let (vm, w) = toucher(1024, 512.0);
        let bytes = tenant(&vm, &w, Duration::from_secs(60), false);
        // 262,144 guest pages and 131,072 anonymous ones.
        let expected = 262_144 * 78 / 8 + 131_072 * 33 / 8 + TENANT_BYTES;
        assert_eq!(bytes, expected);
        assert!(bytes > 3_000_000 && bytes < 4 * 1024 * 1024, "{bytes}");
    }

    #[test]
    fn a_tenant_under_256_mib_costs_about_six_bytes_a_guest_page_and_two_a_region_page() {
        let (vm, w) = toucher(255, 128.0);
        let bytes = tenant(&vm, &w, Duration::from_secs(60), false);
        // 65,280 guest pages and 32,768 anonymous ones.
        let expected = 65_280 * 44 / 8 + 32_768 * 17 / 8 + TENANT_BYTES;
        assert_eq!(bytes, expected);
        let (vm, w) = toucher(256, 128.0);
        let wide = tenant(&vm, &w, Duration::from_secs(60), false);
        assert_eq!(wide, 65_536 * 78 / 8 + 32_768 * 33 / 8 + TENANT_BYTES);
    }

    #[test]
    fn page_sharing_adds_its_contents_and_table_per_guest_page() {
        let (vm, w) = toucher(64, 32.0);
        let plain = tenant(&vm, &w, Duration::from_secs(60), false);
        let shared = tenant(&vm, &w, Duration::from_secs(60), true);
        assert_eq!(shared - plain, 16_384 * SHARING_PAGE_BYTES + 16_384 / 8);
    }

    #[test]
    fn sampling_adds_the_marks_of_a_sample_and_their_summary() {
        let (mut vm, w) = toucher(64, 32.0);
        let plain = tenant(&vm, &w, Duration::from_secs(60), false);
        vm.sampling = Some(crate::config::SamplingSetup {
            sample_pages: 100,
            period: Duration::from_secs(30),
        });
        let sampled = tenant(&vm, &w, Duration::from_secs(60), false);
        assert_eq!(sampled - plain, 100 * SAMPLE_MARK_BYTES + 16_384 / 128);
        // A sample larger than the guest marks every page once.
        vm.sampling = Some(crate::config::SamplingSetup {
            sample_pages: 1_000_000,
            period: Duration::from_secs(30),
        });
        let all = tenant(&vm, &w, Duration::from_secs(60), false);
        assert_eq!(all - plain, 16_384 * SAMPLE_MARK_BYTES + 16_384 / 128);
    }
}
