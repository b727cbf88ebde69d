//! Which active-memory estimator a tenant uses, and its parameters (ESX sampling, TWS probing, committed baseline).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The estimator chosen per tenant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EstimatorConfig {
    /// ESX statistical sampling of random pages with slow/fast EWMAs.
    Sampling(SamplingConfig),
    /// TWS working-set probing driven by swap-in and refault events.
    WorkingSet(WorkingSetConfig),
    /// Xen self-ballooning: the estimate is the tenant's committed memory.
    Committed,
}

/// ESX statistical sampling (Waldspurger 2002, section 5.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingConfig {
    /// Pages sampled per period (ESX: 100).
    pub sample_pages: u32,
    /// Length of one sampling period (ESX: 30 s).
    pub period: Duration,
    /// Gain of the slow EWMA, applied once per period (0 < gain <= 1).
    pub slow_gain: f64,
    /// Gain of the fast EWMA, applied once per period (0 < gain <= 1).
    pub fast_gain: f64,
    /// The largest rise of the cap when the estimate caps the target (`cap_at_estimate`), as a
    /// fraction of what the tenant holds: sampling cannot see demand beyond what the tenant
    /// already holds, so a capped tenant that faults at its cap gets room to show more (a
    /// quarter of this, then half, then all of it in consecutive periods). Without faults the
    /// cap falls to the estimate's upper confidence bound.
    pub headroom: f64,
    /// With `cap_at_estimate`, a tenant that wakes from swap (it faults back a sizeable share
    /// of it, steadily) gets what it holds and has in swap at once, not a step a period:
    /// memtide's addition, on in the daemon. Off by default, as ESX has no such rule and the
    /// simulator's scenarios reproduce its figures.
    #[serde(default)]
    pub wake: bool,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            sample_pages: 100,
            period: Duration::from_secs(30),
            slow_gain: 0.15,
            fast_gain: 0.7,
            headroom: 0.5,
            wake: false,
        }
    }
}

/// TWS working-set probing (Chiang et al. 2013), as restated in the papers digest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkingSetConfig {
    /// One epoch of the state machine (TWS: 1 s).
    pub epoch: Duration,
    /// FAST lowers the estimate by this fraction of committed memory per epoch (TWS: 5%).
    pub fast_step: f64,
    /// SLOW lowers it by this fraction per epoch (TWS: 1%).
    pub slow_step: f64,
    /// COOL_DOWN length, restarted by new events (TWS: 8 s).
    pub cool_down: Duration,
    /// Longest COOL_DOWN: each time a SLOW probe step finds the working set again, the next
    /// cool-down doubles, up to this, so a tenant known to be busy is probed less and less
    /// often (memtide's addition; equal to `cool_down`, the default, is TWS as published).
    pub max_cool_down: Duration,
    /// A relative change of committed memory larger than this resets to FAST.
    pub committed_change: f64,
}

impl Default for WorkingSetConfig {
    fn default() -> Self {
        WorkingSetConfig {
            epoch: Duration::from_secs(1),
            fast_step: 0.05,
            slow_step: 0.01,
            cool_down: Duration::from_secs(8),
            max_cool_down: Duration::from_secs(8),
            committed_change: 0.05,
        }
    }
}

impl EstimatorConfig {
    /// Short name used in outputs: `sampling`, `tws`, `committed`.
    pub fn name(&self) -> &'static str {
        match self {
            EstimatorConfig::Sampling(_) => "sampling",
            EstimatorConfig::WorkingSet(_) => "tws",
            EstimatorConfig::Committed => "committed",
        }
    }
}
