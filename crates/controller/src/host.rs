//! What the controller and the runner need from a world (simulated, Linux, and next QEMU VMs): `Host` for one tick, `World` for a tenant's whole life.

use memtide_model::{Decision, HostObservation, TenantId, TenantSpec};
use std::time::Duration;

/// A world the controller drives. Implementations hold no policy.
pub trait Host {
    type Error: std::error::Error + Send + Sync + 'static;

    /// Observes machine memory and every running tenant.
    fn observe(&mut self) -> Result<HostObservation, Self::Error>;

    /// Carries out a decision (balloon targets, host paging, limits, blocking).
    fn apply(&mut self, decision: &Decision) -> Result<(), Self::Error>;
}

/// A tenant asked to join the world is in it, cannot be, or must wait (its cgroup does not exist yet,
/// its VM is not running): the runner asks again at the next tick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attach {
    Attached,
    Waiting(String),
    /// The world cannot take the tenant (a simulated VM's kernel does not fit): why.
    Refused(String),
}

/// A world's tenants over their whole life, in model types: the runner (crates/runner) drives
/// any `World` with one loop, so a new world is a new implementation of this trait, not a new
/// driver.
///
/// The life of a tenant: the runner admits it (pure policy), then `attach`es it (adopt what
/// runs, or launch, or power on), observes and applies every tick, lets the world `run` one
/// tick, and at the end (a stop, or the runner's own exit) `detach`es it, which gives back
/// everything the world changed. `record` is what a restarted runner needs to re-adopt the
/// tenant after a crash (what to restore on detach); it is kept in the runner's state file.
pub trait World: Host {
    /// How a tenant joins this world: a VM's configuration, a cgroup to adopt, a command to
    /// launch.
    type Placement;
    /// What re-adopting a tenant needs (the settings found before the world changed them).
    type Record: Clone + std::fmt::Debug + PartialEq;
    /// A change to a running tenant that only this world understands (a new workload in a
    /// simulated VM).
    type Command;

    /// Brings tenant `id`, already admitted with `spec`, into the world. `record` is what a
    /// previous run recorded for it (re-adoption after a crash).
    fn attach(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        placement: &Self::Placement,
        record: Option<&Self::Record>,
    ) -> Result<Attach, Self::Error>;

    /// Lets tenant `id` go, giving back what the world changed on it.
    fn detach(&mut self, id: TenantId) -> Result<(), Self::Error>;

    /// Runs the tenants for one tick after a decision was applied: a simulated world runs its
    /// workloads for `tick` of virtual time; a real one runs by itself and does nothing here.
    fn run(&mut self, tick: Duration);

    /// Carries out a world-specific command on a running tenant; returns what it did, in words.
    fn command(&mut self, id: TenantId, command: &Self::Command) -> Result<String, Self::Error>;

    /// What re-adopting tenant `id` would need, while it is attached.
    fn record(&self, id: TenantId) -> Option<Self::Record>;
}
