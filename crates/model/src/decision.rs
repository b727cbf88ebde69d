//! What the controller decides each tick: the reclamation state and, per tenant, a target and how to reach it.

use crate::reason::{Reason, Takeover};
use crate::resource::ResourceState;
use crate::sharing::ScanRate;
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

/// The mechanisms used for one tenant in one tick, in the order they are applied, each at most
/// once. Held inline (no heap allocation: a step for 10,000 tenants makes one per tenant); it
/// reads as a slice and serializes as a list.
#[derive(Copy, Clone, PartialEq, Eq)]
pub struct Mechanisms {
    items: [Mechanism; Mechanisms::CAPACITY],
    len: u8,
}

impl Mechanisms {
    /// Every mechanism there is, so a set can hold all of them.
    pub const CAPACITY: usize = 5;

    #[inline]
    pub const fn new() -> Mechanisms {
        Mechanisms {
            items: [Mechanism::Balloon; Mechanisms::CAPACITY],
            len: 0,
        }
    }

    /// Appends `m` unless it is already there.
    #[inline]
    pub fn push(&mut self, m: Mechanism) {
        if !self.contains(&m) {
            self.items[usize::from(self.len)] = m;
            self.len += 1;
        }
    }

    /// Takes `m` out, keeping the order of the others.
    pub fn remove(&mut self, m: Mechanism) {
        if let Some(at) = self.iter().position(|&x| x == m) {
            let len = usize::from(self.len);
            self.items.copy_within(at + 1..len, at);
            self.len -= 1;
        }
    }
}

impl Default for Mechanisms {
    fn default() -> Mechanisms {
        Mechanisms::new()
    }
}

impl std::ops::Deref for Mechanisms {
    type Target = [Mechanism];
    #[inline]
    fn deref(&self) -> &[Mechanism] {
        &self.items[..usize::from(self.len)]
    }
}

impl fmt::Debug for Mechanisms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq<Vec<Mechanism>> for Mechanisms {
    fn eq(&self, other: &Vec<Mechanism>) -> bool {
        **self == other[..]
    }
}

impl FromIterator<Mechanism> for Mechanisms {
    fn from_iter<I: IntoIterator<Item = Mechanism>>(iter: I) -> Mechanisms {
        let mut set = Mechanisms::new();
        for m in iter {
            set.push(m);
        }
        set
    }
}

impl Serialize for Mechanisms {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Mechanisms {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Mechanisms, D::Error> {
        Ok(Vec::<Mechanism>::deserialize(d)?.into_iter().collect())
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

/// What to do with each lever of a tenant (see `crate::lever`); a lever that does not move
/// is `None` or zero, and a world ignores the moves of levers it does not have. Read off the
/// planners' notes ([`TenantAction::moves`]): the note is the one record of a decision.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moves {
    /// The guest balloon's target size.
    pub balloon: Option<Pages>,
    /// What to tell the application's agent: the pool to resize to, or that the OS takes
    /// the tenant over.
    pub app_balloon: Option<AppMove>,
    /// Identical pages to merge this tick.
    pub share: Pages,
    /// Pages the host pages out now (random victims, as ESX does).
    pub host_swap_out: Pages,
    /// The tenant may not run until it is at its target (ESX's low state).
    pub blocked: bool,
    /// The limit to set.
    pub limit: Option<Pages>,
    /// The disk weight to set.
    pub disk_weight: Option<u32>,
    /// The protection from the host's reclaim to set (`ProtectionLever`).
    pub protection: Option<Pages>,
}

/// What memtide tells a tenant's application balloon agent this tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppMove {
    /// The pool should be `pool` within `deadline` (a world sends a `target` when this differs
    /// from the last one it sent).
    Target { pool: Pages, deadline: Duration },
    /// The agent is closed with this reason (a fatal `error`) and the OS levers move the
    /// tenant's memory from now on.
    TakeOver(Takeover),
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
                mechanism: crate::reason::MechanismNote::new(state, Pages::ZERO, Pages::ZERO),
                estimate: crate::reason::EstimateNote::Committed {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanisms_keep_order_hold_each_once_and_read_as_a_slice() {
        let mut m = Mechanisms::new();
        assert!(m.is_empty());
        m.push(Mechanism::HostSwap);
        m.push(Mechanism::Balloon);
        m.push(Mechanism::HostSwap);
        assert_eq!(&m[..], &[Mechanism::HostSwap, Mechanism::Balloon]);
        assert_eq!(m, vec![Mechanism::HostSwap, Mechanism::Balloon]);
        let all: Mechanisms = [
            Mechanism::Balloon,
            Mechanism::AppBalloon,
            Mechanism::HostSwap,
            Mechanism::Sharing,
            Mechanism::Limit,
            Mechanism::Limit,
        ]
        .into_iter()
        .collect();
        assert_eq!(all.len(), Mechanisms::CAPACITY);
        assert_eq!(format!("{m:?}"), "[HostSwap, Balloon]");
        m.remove(Mechanism::HostSwap);
        m.remove(Mechanism::Limit);
        assert_eq!(m, vec![Mechanism::Balloon]);
    }

    #[test]
    fn mechanisms_serialize_as_a_list_of_names() {
        let m: Mechanisms = [Mechanism::Balloon, Mechanism::HostSwap]
            .into_iter()
            .collect();
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"["balloon","host_swap"]"#);
        assert_eq!(serde_json::from_str::<Mechanisms>(&json).unwrap(), m);
        assert_eq!(serde_json::to_string(&Mechanisms::new()).unwrap(), "[]");
    }
}
