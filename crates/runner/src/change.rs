//! What can change while a world runs, whoever asks (a scenario's timeline, an API request), and what came of it.

use memtide_controller::Joined;
use memtide_model::{Pages, TaxRate, TenantId};

/// One change to a run. `C` is the world's own command type.
#[derive(Clone, Debug, PartialEq)]
pub enum Change<C> {
    /// A declared tenant starts: admission control, then the world attaches it.
    Start(TenantId),
    /// A running tenant stops: the controller forgets it and the world detaches it.
    Stop(TenantId),
    /// The idle memory tax rate for every tenant.
    TaxRate(TaxRate),
    /// A running tenant's min, max or shares (`None` keeps the current value).
    Tenant {
        id: TenantId,
        min: Option<Pages>,
        max: Option<Pages>,
        shares: Option<u64>,
    },
    /// A world-specific command to a running tenant.
    World { id: TenantId, command: C },
}

impl<C> Change<C> {
    /// The tenant the change is about, if any.
    pub fn tenant(&self) -> Option<TenantId> {
        match self {
            Change::Start(id) | Change::Stop(id) => Some(*id),
            Change::Tenant { id, .. } | Change::World { id, .. } => Some(*id),
            Change::TaxRate(_) => None,
        }
    }
}

/// What came of a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The tenant was admitted and is in the world, and how it joined.
    Started(Joined),
    /// Carried out; what happened, in words (`"web stops"`, `"tax rate -> 0.5"`).
    Done(String),
    /// Refused by policy (admission control, a min above the max …): why.
    Refused(String),
    /// The tenant started but must wait to be attached (its cgroup does not exist yet): why.
    Waiting(String),
    /// The tenant it concerns is not running (refused earlier, stopped, not started yet).
    NotRunning,
}
