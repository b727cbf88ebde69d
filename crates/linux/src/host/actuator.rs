//! The seam between the Linux host and its mechanisms: each mechanism a host runs is an [`Actuator`] in its own folder, given every tenant's observation to fill its lever in and the policy's moves to carry out.
//!
//! The host reads the cgroup and derives the observation (`derive.rs`); then each actuator
//! adds what it knows, in the order the host was built with. Moves reach an actuator only
//! outside a dry run.

use memtide_model::{Moves, TenantId, TenantObservation, WorldEvent};
use std::fmt;

/// One mechanism of the Linux world.
pub trait Actuator: fmt::Debug + Send {
    /// Fills this mechanism's lever in `obs` (a managed tenant's observation this tick, its
    /// cgroup's figures already in), and reports what went wrong as events.
    fn observe(&mut self, obs: &mut TenantObservation, events: &mut Vec<WorldEvent>);

    /// Carries out tenant `id`'s `moves` for this mechanism (never in a dry run).
    fn apply(&mut self, id: TenantId, moves: &Moves, events: &mut Vec<WorldEvent>);

    /// `id` is no longer managed: it was let go, or its cgroup is gone.
    fn forget(&mut self, id: TenantId);
}
