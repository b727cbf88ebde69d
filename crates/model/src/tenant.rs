//! Tenant identity and allocation parameters (min / max / shares), and the idle memory tax rate.

use crate::curve::Slo;
use crate::estimator_config::EstimatorConfig;
use crate::mechanism::DiskSpec;
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A tenant's identity: an index assigned by the world (scenario order or config order).
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct TenantId(pub u32);

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// What the administrator configured for one tenant: ESX's min, max and shares, its
/// per-tenant overhead in machine memory, and which estimator measures its active memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantSpec {
    pub id: TenantId,
    pub name: String,
    /// Guaranteed floor: never reclaimed below this.
    pub min: Pages,
    /// Configured size (the guest's "physical" memory): never allocated above this.
    pub max: Pages,
    /// Relative entitlement.
    pub shares: u64,
    /// Machine memory the host spends on this tenant besides its allocation (ESX: ~32 MB per VM).
    pub overhead: Pages,
    pub estimator: EstimatorConfig,
    /// When true the tenant's target never exceeds its active estimate (TWS / self-ballooning
    /// style: memory the tenant does not use is reclaimed even without host pressure).
    /// When false the estimate only feeds the idle memory tax (ESX style).
    pub cap_at_estimate: bool,
    /// What its application pool's latency is held to, where the pool's cache quota is chosen
    /// by its utility (Gemini; `None`: the pool is sized by memory alone).
    #[serde(default)]
    pub slo: Option<Slo>,
    /// Its weight on a shared disk and the I/O latency it should see, where memtide shares a
    /// disk among the tenants (Lai et al.).
    #[serde(default)]
    pub disk: Option<DiskSpec>,
}

impl TenantSpec {
    /// ESX's default shares: every tenant equal.
    pub const DEFAULT_SHARES: u64 = 1000;

    /// A tenant with its identity and bounds, and everything else at its plain default: the
    /// default shares, no overhead, the committed-memory estimator, no cap at the estimate, no
    /// SLO, no shared disk. Callers set the rest with `..TenantSpec::new(..)`, so a new field
    /// is added here alone.
    pub fn new(id: TenantId, name: impl Into<String>, min: Pages, max: Pages) -> TenantSpec {
        TenantSpec {
            id,
            name: name.into(),
            min,
            max,
            shares: TenantSpec::DEFAULT_SHARES,
            overhead: Pages::ZERO,
            estimator: EstimatorConfig::Committed,
            cap_at_estimate: false,
            slo: None,
            disk: None,
        }
    }
}

/// The idle memory tax rate tau, 0 <= tau < 1. `k = 1 / (1 - tau)` is the cost of an idle page.
#[derive(Copy, Clone, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct TaxRate(f64);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("tax rate {0} is outside [0, 1)")]
pub struct TaxRateError(pub f64);

impl TaxRate {
    /// ESX's default, 75%.
    pub const DEFAULT: TaxRate = TaxRate(0.75);

    pub fn new(tau: f64) -> Result<TaxRate, TaxRateError> {
        if tau.is_finite() && (0.0..1.0).contains(&tau) {
            // -0.0 is 0.0: keep the one zero.
            Ok(TaxRate(if tau == 0.0 { 0.0 } else { tau }))
        } else {
            Err(TaxRateError(tau))
        }
    }

    pub fn value(self) -> f64 {
        self.0
    }

    /// The idle page cost `k = 1 / (1 - tau)`.
    pub fn idle_page_cost(self) -> f64 {
        1.0 / (1.0 - self.0)
    }
}

impl Default for TaxRate {
    fn default() -> Self {
        TaxRate::DEFAULT
    }
}

impl TryFrom<f64> for TaxRate {
    type Error = TaxRateError;
    fn try_from(v: f64) -> Result<Self, Self::Error> {
        TaxRate::new(v)
    }
}

impl From<TaxRate> for f64 {
    fn from(t: TaxRate) -> f64 {
        t.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tax_rate_accepts_zero_and_rejects_one() {
        assert!(TaxRate::new(0.0).is_ok());
        assert!(TaxRate::new(0.999).is_ok());
        assert_eq!(TaxRate::new(1.0), Err(TaxRateError(1.0)));
        assert!(TaxRate::new(-0.1).is_err());
        assert!(TaxRate::new(f64::NAN).is_err());
    }

    #[test]
    fn a_new_spec_has_equal_shares_and_nothing_optional() {
        let s = TenantSpec::new(TenantId(3), "db", Pages(10), Pages(20));
        assert_eq!(
            (s.id, s.name.as_str(), s.min, s.max),
            (TenantId(3), "db", Pages(10), Pages(20))
        );
        assert_eq!(s.shares, 1000);
        assert_eq!(s.overhead, Pages::ZERO);
        assert_eq!(s.estimator, EstimatorConfig::Committed);
        assert!(!s.cap_at_estimate && s.slo.is_none() && s.disk.is_none());
    }

    #[test]
    fn idle_page_cost_at_default_tax_is_four() {
        assert!((TaxRate::DEFAULT.idle_page_cost() - 4.0).abs() < 1e-12);
        assert!((TaxRate::new(0.0).unwrap().idle_page_cost() - 1.0).abs() < 1e-12);
    }
}
