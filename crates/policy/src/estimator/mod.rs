//! Active-memory estimators, one small state machine each; the scenario or config picks one per tenant.

pub mod committed;
pub mod sampling;
pub mod working_set;

pub use committed::CommittedBaseline;
pub use sampling::SamplingEstimator;
pub use working_set::WorkingSetProbe;

use memtide_model::{EstimateNote, EstimatorConfig, Pages, TenantObservation};
use std::time::Duration;

/// What an estimator sees each tick.
#[derive(Clone, Debug)]
pub struct EstimatorInput<'a> {
    pub now: Duration,
    pub min: Pages,
    pub max: Pages,
    pub obs: &'a TenantObservation,
    /// The estimator may probe, i.e. act as if its estimate becomes the tenant's limit (TWS).
    /// False when memory is not wanted or nothing is written (a dry run): a probe then holds.
    pub probe: bool,
}

/// One tenant's estimator.
#[derive(Clone, Debug)]
pub enum ActiveEstimator {
    Sampling(SamplingEstimator),
    /// Boxed: the probe is about twice the size of the others, and a controller keeps one
    /// estimator per tenant in the array a step walks.
    WorkingSet(Box<WorkingSetProbe>),
    Committed(CommittedBaseline),
}

impl ActiveEstimator {
    pub fn new(config: &EstimatorConfig) -> ActiveEstimator {
        match config {
            EstimatorConfig::Sampling(c) => {
                ActiveEstimator::Sampling(SamplingEstimator::new(c.clone()))
            }
            EstimatorConfig::WorkingSet(c) => {
                ActiveEstimator::WorkingSet(Box::new(WorkingSetProbe::new(c.clone())))
            }
            EstimatorConfig::Committed => ActiveEstimator::Committed(CommittedBaseline::new()),
        }
    }

    /// Short name, as in the config: `sampling`, `tws`, `committed`.
    pub fn name(&self) -> &'static str {
        match self {
            ActiveEstimator::Sampling(_) => "sampling",
            ActiveEstimator::WorkingSet(_) => "tws",
            ActiveEstimator::Committed(_) => "committed",
        }
    }

    /// Feeds one observation and returns the new active estimate.
    ///
    /// Call once per controller tick, before reading `estimate` or `ceiling` (both are 0 until
    /// the first update: an estimator knows the tenant's max only from its input).
    #[inline]
    pub fn update(&mut self, input: &EstimatorInput) -> Pages {
        match self {
            ActiveEstimator::Sampling(e) => e.update(input),
            ActiveEstimator::WorkingSet(e) => e.update(input),
            ActiveEstimator::Committed(e) => e.update(input),
        }
    }

    /// Starts from an estimate kept across a restart instead of from nothing: TWS resumes at it
    /// in COOL_DOWN, sampling seeds its EWMAs with `estimate / max`; committed ignores it.
    pub fn resume(&mut self, estimate: Pages, max: Pages) {
        match self {
            ActiveEstimator::Sampling(e) => e.resume(estimate, max),
            ActiveEstimator::WorkingSet(e) => e.resume(estimate),
            ActiveEstimator::Committed(_) => {}
        }
    }

    /// Whether the estimate stands on a measurement: false for sampling before its first
    /// counts (it then reads the tenant as fully active); TWS and committed always measure.
    #[inline]
    pub fn measured(&self) -> bool {
        match self {
            ActiveEstimator::Sampling(e) => e.fraction().is_some(),
            ActiveEstimator::WorkingSet(_) | ActiveEstimator::Committed(_) => true,
        }
    }

    /// The latest estimate.
    #[inline]
    pub fn estimate(&self) -> Pages {
        match self {
            ActiveEstimator::Sampling(e) => e.estimate(),
            ActiveEstimator::WorkingSet(e) => e.estimate(),
            ActiveEstimator::Committed(e) => e.estimate(),
        }
    }

    /// The active memory the idle memory tax charges for: sampling's upper confidence bound
    /// of its estimate (see `sampling`), the estimate itself for TWS and committed, which do
    /// not sample.
    #[inline]
    pub fn active_bound(&self) -> Pages {
        match self {
            ActiveEstimator::Sampling(e) => e.active_bound(),
            ActiveEstimator::WorkingSet(e) => e.estimate(),
            ActiveEstimator::Committed(e) => e.estimate(),
        }
    }

    /// Where the estimate may cap the target: the estimate plus any headroom the estimator needs.
    #[inline]
    pub fn ceiling(&self) -> Pages {
        match self {
            ActiveEstimator::Sampling(e) => e.ceiling(),
            ActiveEstimator::WorkingSet(e) => e.ceiling(),
            ActiveEstimator::Committed(e) => e.ceiling(),
        }
    }

    /// The estimator's state, for explanations; formats lazily.
    #[inline]
    pub fn note(&self) -> EstimateNote {
        match self {
            ActiveEstimator::Sampling(e) => e.note(),
            ActiveEstimator::WorkingSet(e) => e.note(),
            ActiveEstimator::Committed(e) => e.note(),
        }
    }

    /// A short description of the estimator's state, e.g. `tws SLOW wss=300.0 MiB`.
    pub fn describe(&self) -> String {
        self.note().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::{SamplingConfig, TenantId, WorkingSetConfig};

    fn update_with_committed(est: &mut ActiveEstimator, committed: Pages) -> Pages {
        let mut obs = TenantObservation::new(TenantId(0), Pages::from_mib(512));
        obs.committed = Some(committed);
        est.update(&EstimatorInput {
            now: Duration::from_secs(1),
            min: Pages::from_mib(64),
            max: Pages::from_mib(1024),
            obs: &obs,
            probe: true,
        })
    }

    #[test]
    fn new_builds_the_configured_estimator() {
        let configs = [
            EstimatorConfig::Sampling(SamplingConfig::default()),
            EstimatorConfig::WorkingSet(WorkingSetConfig::default()),
            EstimatorConfig::Committed,
        ];
        for config in &configs {
            let est = ActiveEstimator::new(config);
            assert_eq!(est.name(), config.name());
        }
    }

    #[test]
    fn calls_delegate_to_the_chosen_estimator() {
        let mut committed = ActiveEstimator::new(&EstimatorConfig::Committed);
        let got = update_with_committed(&mut committed, Pages::from_mib(300));
        assert_eq!(got, Pages::from_mib(300));
        assert_eq!(committed.estimate(), got);
        assert_eq!(committed.ceiling(), got);
        assert_eq!(committed.active_bound(), got);
        assert!(committed.describe().starts_with("committed"));

        let mut tws =
            ActiveEstimator::new(&EstimatorConfig::WorkingSet(WorkingSetConfig::default()));
        assert_eq!(
            update_with_committed(&mut tws, Pages::from_mib(300)),
            Pages::from_mib(300)
        );
        assert_eq!(tws.describe(), "tws FAST wss=300.0 MiB");

        // No sampling counts: the tenant cannot be measured and counts as fully active.
        let mut sampling =
            ActiveEstimator::new(&EstimatorConfig::Sampling(SamplingConfig::default()));
        assert_eq!(
            update_with_committed(&mut sampling, Pages::from_mib(300)),
            Pages::from_mib(1024)
        );
        assert_eq!(sampling.ceiling(), Pages::from_mib(1024));
        assert_eq!(sampling.active_bound(), Pages::from_mib(1024));
        assert!(sampling.describe().starts_with("sampling"));
    }
}
