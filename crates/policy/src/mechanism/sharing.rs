//! Page sharing's policy (ESX §4): identical pages merged onto one frame free memory at no cost to the tenant, so sharing is tried before every other lever, and the scanner that finds them runs faster when memory runs short.
//!
//! **Per tenant** ([`plan`]): above target, the pages found identical and not merged yet are
//! merged, up to what is left of the excess: `merge = min(left, shareable)`. Below target
//! nothing is merged (the scanner keeps its own pace; a merged page is broken again only when
//! written). Cost: O(1).
//!
//! **Host-wide** ([`scan_rate`]): ESX scans at a configured rate kept low enough that its CPU
//! cost is negligible, and always tries to share a page before paging it out. memtide scans
//! at `idle_rate` while memory is plentiful (the high state) and at `pressed_rate` once the
//! host is short (soft, hard, low: share before swap), backing off again in high. Where the
//! world measures the scanner's CPU time ([`ScanCost`]), the rate is cut so that the scanner
//! uses at most `cpu_budget` of one core: `rate ≤ budget / cost per page`, the cost per page
//! smoothed over observations (an EWMA with weight 0.3 on the newest) so that one noisy
//! reading does not swing the rate. Guarantee: the rate never exceeds `pressed_rate`, nor the
//! budget at the measured cost. Cost: O(1) per tick.

use super::Need;
use memtide_model::{
    HostSharing, ReclamationState, ScanRate, SharingLever, SharingNote, SharingSettings,
};

/// Plans merging and takes what it covers out of `need.left`.
pub(super) fn plan(need: &mut Need, lever: &SharingLever) -> SharingNote {
    let merge = need.left.min(lever.shareable);
    need.left -= merge;
    SharingNote {
        shareable: lever.shareable,
        merge,
    }
}

/// The scanner's CPU cost per page, as measured so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScanCost {
    ns_per_page: Option<f64>,
}

impl ScanCost {
    /// Weight of the newest reading.
    const NEWEST: f64 = 0.3;

    /// Takes one observation's scanned pages and CPU time; one without both, or without a
    /// page scanned, teaches nothing.
    pub fn observe(&mut self, sharing: &HostSharing) {
        let (Some(pages), Some(cpu)) = (sharing.scanned, sharing.cpu) else {
            return;
        };
        if pages == 0 {
            return;
        }
        let x = cpu.as_nanos() as f64 / pages as f64;
        self.ns_per_page = Some(match self.ns_per_page {
            Some(old) => old + Self::NEWEST * (x - old),
            None => x,
        });
    }

    /// Nanoseconds of scanner CPU per page, once measured.
    pub fn ns_per_page(&self) -> Option<f64> {
        self.ns_per_page
    }
}

/// The host-wide scan rate for this tick (see the module docs).
pub fn scan_rate(state: ReclamationState, settings: &SharingSettings, cost: &ScanCost) -> ScanRate {
    let wanted = match state {
        ReclamationState::High => settings.idle_rate,
        ReclamationState::Soft | ReclamationState::Hard | ReclamationState::Low => {
            settings.pressed_rate
        }
    };
    let pages_per_sec = match (settings.cpu_budget, cost.ns_per_page) {
        (Some(budget), Some(ns)) if ns > 0.0 => {
            let affordable = budget.clamp(0.0, 1.0) * 1e9 / ns;
            wanted.min(affordable as u64)
        }
        _ => wanted,
    };
    ScanRate { pages_per_sec }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::Pages;
    use std::time::Duration;

    fn settings() -> SharingSettings {
        SharingSettings {
            idle_rate: 1_000,
            pressed_rate: 20_000,
            cpu_budget: Some(0.1),
        }
    }

    fn reading(pages: u64, cpu_ms: u64) -> HostSharing {
        HostSharing {
            shared: Pages::ZERO,
            frames: Pages::ZERO,
            scanned: Some(pages),
            cpu: Some(Duration::from_millis(cpu_ms)),
            ..HostSharing::default()
        }
    }

    #[test]
    fn the_scanner_backs_off_in_high_and_ramps_up_once_the_host_runs_short() {
        let cost = ScanCost::default();
        let s = settings();
        assert_eq!(
            scan_rate(ReclamationState::High, &s, &cost).pages_per_sec,
            1_000
        );
        for state in [
            ReclamationState::Soft,
            ReclamationState::Hard,
            ReclamationState::Low,
        ] {
            assert_eq!(scan_rate(state, &s, &cost).pages_per_sec, 20_000);
        }
    }

    #[test]
    fn a_measured_cost_cuts_the_rate_to_the_cpu_budget() {
        let mut cost = ScanCost::default();
        // 10,000 pages for 50 ms: 5 µs a page, so a tenth of a core pays for 20,000 pages/s.
        cost.observe(&reading(10_000, 50));
        assert_eq!(cost.ns_per_page(), Some(5_000.0));
        let s = settings();
        assert_eq!(
            scan_rate(ReclamationState::Soft, &s, &cost).pages_per_sec,
            20_000
        );
        // Dearer pages (20 µs, smoothed): the budget, not the pressed rate, decides.
        for _ in 0..30 {
            cost.observe(&reading(1_000, 20));
        }
        let rate = scan_rate(ReclamationState::Hard, &s, &cost).pages_per_sec;
        assert!((4_990..=5_010).contains(&rate), "{rate}");
        // Without a budget the cost is not asked.
        let free = SharingSettings {
            cpu_budget: None,
            ..s
        };
        assert_eq!(
            scan_rate(ReclamationState::Hard, &free, &cost).pages_per_sec,
            20_000
        );
    }

    #[test]
    fn a_reading_without_pages_or_cpu_teaches_nothing() {
        let mut cost = ScanCost::default();
        cost.observe(&reading(0, 5));
        cost.observe(&HostSharing {
            scanned: Some(100),
            ..HostSharing::default()
        });
        assert_eq!(cost.ns_per_page(), None);
    }
}
