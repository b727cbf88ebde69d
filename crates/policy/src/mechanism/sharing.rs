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
//! uses at most `cpu_budget` of one core: `rate ≤ budget / cost per page`. The cost per page
//! rises at once to a dearer reading (the budget is a ceiling, so the estimate errs on the dear
//! side) and falls smoothly (an EWMA with weight 0.3 on the newest), so that one cheap reading
//! does not let the rate jump. Until a first reading with pages scanned, a world that
//! measures the scanner's CPU is assumed to pay [`ScanCost::PRIOR_NS_PER_PAGE`] (5 µs a page:
//! KSM's default 5,000 pages/s at its usual few percent of a core), so the first tick does not
//! run unchecked. Guarantee: the rate never exceeds `pressed_rate`, nor the budget at the
//! measured (or, before any measurement, the assumed) cost. Cost: O(1) per tick.

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
    /// The world has reported the scanner's CPU time at least once.
    measures_cpu: bool,
}

impl ScanCost {
    /// Weight of the newest reading.
    const NEWEST: f64 = 0.3;
    /// The cost per page assumed before the first measurement, where CPU is measured.
    pub const PRIOR_NS_PER_PAGE: f64 = 5_000.0;

    /// Takes one observation's scanned pages and CPU time; one without both, or without a
    /// page scanned, teaches nothing.
    pub fn observe(&mut self, sharing: &HostSharing) {
        self.measures_cpu |= sharing.cpu.is_some();
        let (Some(pages), Some(cpu)) = (sharing.scanned, sharing.cpu) else {
            return;
        };
        if pages == 0 {
            return;
        }
        let x = cpu.as_nanos() as f64 / pages as f64;
        self.ns_per_page = Some(match self.ns_per_page {
            Some(old) if x < old => old + Self::NEWEST * (x - old),
            _ => x,
        });
    }

    /// Nanoseconds of scanner CPU per page, once measured.
    pub fn ns_per_page(&self) -> Option<f64> {
        self.ns_per_page
    }

    /// The cost the rate is cut by: measured, else assumed where CPU is measured at all.
    fn for_budget(&self) -> Option<f64> {
        self.ns_per_page
            .or(self.measures_cpu.then_some(Self::PRIOR_NS_PER_PAGE))
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
    let pages_per_sec = match (settings.cpu_budget, cost.for_budget()) {
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
        // Dearer pages (20 µs), taken at once: the budget, not the pressed rate, decides.
        cost.observe(&reading(1_000, 20));
        let rate = scan_rate(ReclamationState::Hard, &s, &cost).pages_per_sec;
        assert_eq!(rate, 5_000);
        // Cheaper again (10 µs): the estimate falls smoothly, not at once.
        cost.observe(&reading(1_000, 10));
        assert_eq!(cost.ns_per_page(), Some(17_000.0));
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
    fn before_its_first_measurement_a_measured_scanner_is_assumed_to_cost_5_us_a_page() {
        let mut cost = ScanCost::default();
        let s = SharingSettings {
            pressed_rate: 1_000_000,
            ..settings()
        };
        let unmeasured = scan_rate(ReclamationState::Soft, &s, &cost).pages_per_sec;
        assert_eq!(
            unmeasured, 1_000_000,
            "a world without CPU figures is not cut"
        );
        // CPU time reported, nothing scanned yet (ksmd was stopped): the prior applies.
        cost.observe(&reading(0, 0));
        assert_eq!(cost.ns_per_page(), None);
        let first = scan_rate(ReclamationState::Soft, &s, &cost).pages_per_sec;
        assert_eq!(first, 20_000, "a tenth of a core at 5 µs a page");
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
