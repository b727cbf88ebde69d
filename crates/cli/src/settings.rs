//! A run's policy settings as summary.json records them: the controller's host-wide parameters and each tenant's estimator, in bytes and seconds, so a result can be traced to what produced it.

use memtide_controller::ControllerConfig;
use memtide_model::{EstimatorConfig, TenantSpec};
use serde::Serialize;

/// The controller's host-wide settings at the start of the run (scenario events that change
/// the tax rate later are listed among the summary's events).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PolicySettings {
    pub tax_rate: f64,
    pub reclamation: ThresholdSettings,
    /// Memory handed out to the tenants; absent when it is machine memory minus the tenants'
    /// overheads minus the high-state reserve.
    pub budget_bytes: Option<u64>,
    pub host_swap_per_tick_bytes: u64,
    pub balloon_stall_ticks: u32,
    /// Limit tenants are probed below their usage even while the budget has room.
    pub reclaim_always: bool,
    pub limit_rails: RailSettings,
}

/// Reclamation thresholds as fractions of machine memory.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThresholdSettings {
    pub high: f64,
    pub soft: f64,
    pub hard: f64,
    pub low: f64,
    pub hysteresis: f64,
}

/// The safety rails of tenants whose memory moves by a limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RailSettings {
    pub shrink_step: f64,
    pub min_step_bytes: u64,
    pub floor_margin_bytes: u64,
    pub backoff_faults_per_s: f64,
    pub backoff_pressure: f64,
}

impl PolicySettings {
    pub fn of(config: &ControllerConfig) -> PolicySettings {
        let t = &config.thresholds;
        let r = &config.rails;
        PolicySettings {
            tax_rate: config.tax_rate.value(),
            reclamation: ThresholdSettings {
                high: t.high,
                soft: t.soft,
                hard: t.hard,
                low: t.low,
                hysteresis: t.hysteresis,
            },
            budget_bytes: config.budget.map(|p| p.to_bytes().0),
            host_swap_per_tick_bytes: config.host_swap_per_tick.to_bytes().0,
            balloon_stall_ticks: config.balloon_stall_ticks,
            reclaim_always: config.reclaim_always,
            limit_rails: RailSettings {
                shrink_step: r.shrink_step,
                min_step_bytes: r.min_step.to_bytes().0,
                floor_margin_bytes: r.floor_margin.to_bytes().0,
                backoff_faults_per_s: r.backoff_faults_per_s,
                backoff_pressure: r.backoff_pressure,
            },
        }
    }
}

/// One tenant's estimator and whether its estimate caps its target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EstimatorSettings {
    pub cap_at_estimate: bool,
    #[serde(flatten)]
    pub kind: EstimatorKind,
}

/// The estimator's own parameters, tagged by its name.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum EstimatorKind {
    Sampling {
        sample_pages: u32,
        period_s: f64,
        slow_gain: f64,
        fast_gain: f64,
        headroom: f64,
    },
    Tws {
        epoch_s: f64,
        fast_step: f64,
        slow_step: f64,
        cool_down_s: f64,
        max_cool_down_s: f64,
        committed_change: f64,
    },
    Committed,
}

impl EstimatorSettings {
    pub fn of(spec: &TenantSpec) -> EstimatorSettings {
        let kind = match &spec.estimator {
            EstimatorConfig::Sampling(c) => EstimatorKind::Sampling {
                sample_pages: c.sample_pages,
                period_s: c.period.as_secs_f64(),
                slow_gain: c.slow_gain,
                fast_gain: c.fast_gain,
                headroom: c.headroom,
            },
            EstimatorConfig::WorkingSet(c) => EstimatorKind::Tws {
                epoch_s: c.epoch.as_secs_f64(),
                fast_step: c.fast_step,
                slow_step: c.slow_step,
                cool_down_s: c.cool_down.as_secs_f64(),
                max_cool_down_s: c.max_cool_down.as_secs_f64(),
                committed_change: c.committed_change,
            },
            EstimatorConfig::Committed => EstimatorKind::Committed,
        };
        EstimatorSettings {
            cap_at_estimate: spec.cap_at_estimate,
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::{Pages, SamplingConfig, TaxRate, TenantId};

    #[test]
    fn policy_settings_carry_the_tax_rate_budget_and_rails_in_bytes() {
        let config = ControllerConfig {
            tax_rate: TaxRate::new(0.5).unwrap(),
            budget: Some(Pages::from_mib(600)),
            ..ControllerConfig::default()
        };
        let s = PolicySettings::of(&config);
        assert_eq!(s.tax_rate, 0.5);
        assert_eq!(s.budget_bytes, Some(600 << 20));
        assert_eq!(s.limit_rails.min_step_bytes, 1 << 20);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["reclamation"]["high"], config.thresholds.high);
        assert_eq!(json["budget_bytes"], 600u64 << 20);
    }

    #[test]
    fn estimator_settings_are_tagged_by_name_with_seconds() {
        let spec = TenantSpec {
            estimator: EstimatorConfig::Sampling(SamplingConfig::default()),
            ..TenantSpec::new(TenantId(1), "a", Pages::from_mib(64), Pages::from_mib(512))
        };
        let json = serde_json::to_value(EstimatorSettings::of(&spec)).unwrap();
        assert_eq!(json["name"], "sampling");
        assert_eq!(json["period_s"], 30.0);
        assert_eq!(json["sample_pages"], 100);
        assert_eq!(json["cap_at_estimate"], false);
    }
}
