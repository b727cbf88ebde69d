//! The seam between the Linux host and its mechanisms: each mechanism a host runs is an [`Actuator`] in its own folder, given every tenant's observation to fill its lever in and the policy's moves to carry out.
//!
//! The host reads the cgroup and derives the observation (`derive.rs`); then each actuator
//! adds what it knows, in the order the host was built with. Moves reach an actuator only
//! outside a dry run.

use super::{LinuxError, Placement};
use memtide_model::{
    Decision, HostObservation, Moves, TenantId, TenantObservation, TenantSpec, WorldEvent,
};
use std::fmt;
use std::time::Duration;

/// A managed tenant as its mechanisms see it at an observation.
#[derive(Debug)]
pub struct TenantView<'a> {
    /// The host's clock.
    pub now: Duration,
    /// The processes in its cgroup, when some mechanism asked for them (`wants_pids`); else
    /// empty.
    pub pids: &'a [u32],
}

/// One mechanism of the Linux world.
pub trait Actuator: fmt::Debug + Send {
    /// Its name, for the errors of `finish`.
    fn name(&self) -> &'static str;

    /// Tenant `id` is attached (or attached again) with `spec` at `placement`: what this
    /// mechanism does for it. Nothing by default.
    fn attach(&mut self, _id: TenantId, _spec: &TenantSpec, _placement: &Placement) {}

    /// Whether a launched tenant (not placed `isolated`) is asked to merge its pages. No by
    /// default.
    fn merges_launched(&self) -> bool {
        false
    }

    /// Fills its host-wide figures in `obs`, before any tenant is observed. Nothing by
    /// default.
    fn observe_host(&mut self, _obs: &mut HostObservation, _events: &mut Vec<WorldEvent>) {}

    /// Whether `observe` at `now` needs tenant `id`'s processes (the host then lists them all,
    /// not only whether there is anyone). No by default.
    fn wants_pids(&self, _id: TenantId, _now: Duration) -> bool {
        false
    }

    /// Fills this mechanism's lever in `obs` (the tenant's observation this tick, its cgroup's
    /// figures already in), and reports what went wrong as events.
    fn observe(
        &mut self,
        t: &TenantView<'_>,
        obs: &mut TenantObservation,
        events: &mut Vec<WorldEvent>,
    );

    /// Carries out tenant `id`'s `moves` for this mechanism (never in a dry run).
    fn apply(&mut self, id: TenantId, moves: &Moves, events: &mut Vec<WorldEvent>);

    /// Carries out the host-wide part of `decision` (never in a dry run). Nothing by default.
    fn apply_host(&mut self, _decision: &Decision, _events: &mut Vec<WorldEvent>) {}

    /// `id` is no longer managed: it was let go, or its cgroup is gone.
    fn forget(&mut self, id: TenantId);

    /// Gives back what it changed host-wide, as memtide lets every tenant go. Nothing by
    /// default.
    fn finish(&mut self) -> Result<(), LinuxError> {
        Ok(())
    }
}
