//! Controller parameters that are not per tenant: tax rate, reclamation thresholds, paging rate.

use memtide_model::{Pages, SharingSettings, TaxRate};
use memtide_policy::{Backing, LimitRails, QuotaSettings, ReclamationThresholds, ThresholdError};
use serde::{Deserialize, Serialize};

/// Host-wide policy parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerConfig {
    pub tax_rate: TaxRate,
    pub thresholds: ReclamationThresholds,
    /// Memory handed out to tenants; `None` means machine memory minus tenant overheads minus
    /// the high-state reserve, so targets drive free memory above the high threshold.
    pub budget: Option<Pages>,
    /// Most pages the host pages out of one tenant per tick.
    pub host_swap_per_tick: Pages,
    /// Ticks a balloon may stay still while short of its target before it counts as stalled.
    pub balloon_stall_ticks: u32,
    /// Safety rails for tenants whose memory moves by a limit (cgroups).
    pub rails: LimitRails,
    /// Nothing the controller decides is written (a dry run): estimators must not probe.
    pub dry_run: bool,
    /// Limit tenants: take memory above a tenant's estimate even while the budget has room
    /// (TWS as published, probing all the time). Default false: only once the budget runs short.
    pub reclaim_always: bool,
    /// The tenants share a host with others (a Linux host, its VMs among them): the machine's
    /// free memory says nothing of the budget, so every tenant's memory counts against the
    /// budget's own reclamation state, not only that of tenants under a limit. False where
    /// memtide owns the machine (the simulator's ESX host).
    pub shared_host: bool,
    /// What backs max - min at admission, as refusals name it.
    pub backing: Backing,
    /// Page sharing's scan rates and CPU budget, where the world shares pages; `None`: no
    /// scan rate is decided.
    pub sharing: Option<SharingSettings>,
    /// Cache quotas (Gemini): the budget the SLO tenants' application pools share, and how
    /// it is searched; `None`: pools are sized by memory alone.
    pub cache: Option<QuotaSettings>,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum ConfigError {
    #[error("{0}")]
    Thresholds(String),
}

impl From<ThresholdError> for ConfigError {
    fn from(e: ThresholdError) -> Self {
        ConfigError::Thresholds(e.to_string())
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            tax_rate: TaxRate::DEFAULT,
            thresholds: ReclamationThresholds::default(),
            budget: None,
            host_swap_per_tick: Pages::from_mib(32),
            balloon_stall_ticks: 3,
            rails: LimitRails::default(),
            dry_run: false,
            reclaim_always: false,
            shared_host: false,
            backing: Backing::HostSwap,
            sharing: None,
            cache: None,
        }
    }
}

impl ControllerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.thresholds.validate()?;
        Ok(())
    }
}
