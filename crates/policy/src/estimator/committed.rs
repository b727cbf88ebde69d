//! Xen self-ballooning baseline: the active estimate is the tenant's committed memory (`Committed_AS`).
//!
//! It misses page cache (I/O-heavy tenants are under-estimated) and counts allocated-but-idle
//! memory; it is here as the baseline TWS is compared against (Chiang et al. 2013, Table 1).

use super::EstimatorInput;
use memtide_model::{EstimateNote, Pages};

/// Estimate = committed memory clamped to `[min, max]`. When the world cannot report committed
/// memory the previous reading is kept; with no reading ever the tenant is treated as fully
/// active (estimate = max).
#[derive(Clone, Debug, Default)]
pub struct CommittedBaseline {
    /// The last committed figure the world reported, unclamped.
    committed: Option<Pages>,
    estimate: Pages,
}

impl CommittedBaseline {
    pub fn new() -> CommittedBaseline {
        CommittedBaseline::default()
    }

    /// Feeds one observation and returns the new estimate.
    pub fn update(&mut self, input: &EstimatorInput) -> Pages {
        if let Some(committed) = input.obs.committed {
            self.committed = Some(committed);
        }
        self.estimate = self
            .committed
            .unwrap_or(input.max)
            .clamp_to(input.min, input.max);
        self.estimate
    }

    pub fn estimate(&self) -> Pages {
        self.estimate
    }

    /// The baseline needs no headroom: its ceiling is the estimate.
    pub fn ceiling(&self) -> Pages {
        self.estimate
    }

    /// The baseline's state for explanations.
    #[inline]
    pub fn note(&self) -> EstimateNote {
        EstimateNote::Committed {
            estimate: self.estimate,
            known: self.committed.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::{TenantId, TenantObservation};
    use std::time::Duration;

    fn observe(committed: Option<Pages>) -> TenantObservation {
        let mut obs = TenantObservation::new(TenantId(0), Pages::from_mib(512));
        obs.committed = committed;
        obs
    }

    fn feed(est: &mut CommittedBaseline, committed: Option<Pages>) -> Pages {
        let obs = observe(committed);
        est.update(&EstimatorInput {
            now: Duration::from_secs(1),
            min: Pages::from_mib(64),
            max: Pages::from_mib(1024),
            obs: &obs,
            probe: true,
        })
    }

    #[test]
    fn estimate_is_committed_memory() {
        let mut est = CommittedBaseline::new();
        assert_eq!(
            feed(&mut est, Some(Pages::from_mib(300))),
            Pages::from_mib(300)
        );
        assert_eq!(est.estimate(), Pages::from_mib(300));
        assert_eq!(est.ceiling(), Pages::from_mib(300));
    }

    #[test]
    fn estimate_is_clamped_between_min_and_max() {
        let mut est = CommittedBaseline::new();
        assert_eq!(
            feed(&mut est, Some(Pages::from_mib(10))),
            Pages::from_mib(64)
        );
        assert_eq!(
            feed(&mut est, Some(Pages::from_mib(4096))),
            Pages::from_mib(1024)
        );
    }

    #[test]
    fn unknown_committed_starts_at_max() {
        let mut est = CommittedBaseline::new();
        assert_eq!(feed(&mut est, None), Pages::from_mib(1024));
        assert!(est.note().to_string().contains("unknown"));
    }

    #[test]
    fn missing_committed_keeps_the_previous_estimate() {
        let mut est = CommittedBaseline::new();
        feed(&mut est, Some(Pages::from_mib(300)));
        assert_eq!(feed(&mut est, None), Pages::from_mib(300));
        assert_eq!(est.note().to_string(), "committed est=300.0 MiB");
    }
}
