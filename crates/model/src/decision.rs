//! What the controller decides each tick: the reclamation state and, per tenant, a target and how to reach it.

use crate::mechanism::{MechanismNote, Mechanisms, Moves, ScanRate};
use crate::reason::{EstimateNote, Reason};
use crate::resource::ResourceState;
use crate::tenant::TenantId;
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// ESX reclamation states, from most to least free memory.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ReclamationState {
    #[default]
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

/// The decision for one tenant in one tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantAction {
    pub id: TenantId,
    /// Machine memory the tenant should hold.
    pub target: Pages,
    /// The estimator's active-memory estimate the target was computed from.
    pub active_estimate: Pages,
    /// The mechanisms that act this tick, in the order they were chosen.
    pub mechanisms: Mechanisms,
    /// The figures behind the action; `Display` gives the readable line.
    pub reason: Reason,
}

impl TenantAction {
    /// What each of the tenant's levers does this tick.
    pub fn moves(&self) -> Moves {
        Moves {
            disk_weight: self.reason.disk.and_then(|d| d.new_weight()),
            ..self.reason.mechanism.moves()
        }
    }

    /// No action: nothing moves, for a tenant in reclamation state `state`.
    pub fn none(id: TenantId, state: ReclamationState) -> TenantAction {
        TenantAction {
            id,
            target: Pages::ZERO,
            active_estimate: Pages::ZERO,
            mechanisms: Mechanisms::new(),
            reason: Reason {
                mechanism: MechanismNote::new(state, Pages::ZERO, Pages::ZERO),
                estimate: EstimateNote::Committed {
                    estimate: Pages::ZERO,
                    known: false,
                },
                cache: None,
                disk: None,
            },
        }
    }
}

/// Everything decided in one tick.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub now: Duration,
    /// Memory's reclamation state and the machine memory handed out to tenants this tick (the
    /// targets add up to at most this budget). Each resource memtide divides has its own.
    pub memory: ResourceState<Pages>,
    /// How fast the host's page-sharing scanner runs, where the controller has sharing
    /// settings.
    pub sharing: Option<ScanRate>,
    pub actions: Vec<TenantAction>,
}

impl Decision {
    pub fn action(&self, id: TenantId) -> Option<&TenantAction> {
        self.actions.iter().find(|a| a.id == id)
    }
}
