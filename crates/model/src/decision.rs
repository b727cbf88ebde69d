//! What the controller decides each tick: the reclamation state and, per tenant, a target and how to reach it.

use crate::reason::Reason;
use crate::tenant::TenantId;
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// ESX reclamation states, from most to least free memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReclamationState {
    High,
    Soft,
    Hard,
    Low,
}

impl ReclamationState {
    pub const ALL: [ReclamationState; 4] = [
        ReclamationState::High,
        ReclamationState::Soft,
        ReclamationState::Hard,
        ReclamationState::Low,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReclamationState::High => "high",
            ReclamationState::Soft => "soft",
            ReclamationState::Hard => "hard",
            ReclamationState::Low => "low",
        }
    }
}

impl fmt::Display for ReclamationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How memory moves between a tenant and the host.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// Guest balloon driver.
    Balloon,
    /// Application-level balloon (DB buffer pool, JVM heap).
    AppBalloon,
    /// Host paging, the fallback.
    HostSwap,
    /// Content-based page sharing.
    Sharing,
    /// A cgroup limit (linux world).
    Limit,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Balloon => "balloon",
            Mechanism::AppBalloon => "app_balloon",
            Mechanism::HostSwap => "host_swap",
            Mechanism::Sharing => "sharing",
            Mechanism::Limit => "limit",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The decision for one tenant in one tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantAction {
    pub id: TenantId,
    /// Memory the policy wants the tenant to hold.
    pub target: Pages,
    /// The tenant's active estimate this tick (recorded for explanation and output).
    pub active_estimate: Pages,
    /// Balloon size to ask the driver for; `None` when the tenant has no driver.
    pub balloon_target: Option<Pages>,
    /// Pages the host should page out of this tenant this tick (randomly chosen victims).
    pub host_swap_out: Pages,
    /// In the low state, a tenant above its target is blocked until it is back under it.
    pub blocked: bool,
    /// The limit to enforce, for a tenant whose memory moves by a limit; `None` otherwise.
    pub limit: Option<Pages>,
    /// Mechanisms used this tick, in the order they are applied.
    pub mechanisms: Vec<Mechanism>,
    /// Why: the figures behind the decision; `Display` gives one line a person can read.
    pub reason: Reason,
}

impl TenantAction {
    /// An action that asks nothing of the tenant (no balloon, no paging, not blocked), for
    /// worlds and tests to fill in.
    pub fn none(id: TenantId, state: ReclamationState) -> TenantAction {
        TenantAction {
            id,
            target: Pages::ZERO,
            active_estimate: Pages::ZERO,
            balloon_target: None,
            host_swap_out: Pages::ZERO,
            blocked: false,
            limit: None,
            mechanisms: Vec::new(),
            reason: Reason {
                mechanism: crate::reason::MechanismNote {
                    state,
                    allocated: Pages::ZERO,
                    target: Pages::ZERO,
                    balloon: Pages::ZERO,
                    balloon_target: None,
                    balloon_limit: None,
                    balloon_stalled: false,
                    beyond_balloon: Pages::ZERO,
                    wanted_swap: Pages::ZERO,
                    host_swap_out: Pages::ZERO,
                    blocked: false,
                    limit: None,
                },
                estimate: crate::reason::EstimateNote::Committed {
                    estimate: Pages::ZERO,
                    known: false,
                },
            },
        }
    }
}

/// Everything decided in one tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub now: Duration,
    pub state: ReclamationState,
    /// Machine memory handed out to tenants this tick (sum of targets is at most this).
    pub budget: Pages,
    pub actions: Vec<TenantAction>,
}

impl Decision {
    pub fn action(&self, id: TenantId) -> Option<&TenantAction> {
        self.actions.iter().find(|a| a.id == id)
    }
}
