//! What the controller and the runner need from a world (simulated, Linux, and next QEMU VMs): `Host` for one tick, `World` for a tenant's whole life.

use memtide_model::{Decision, HostObservation, TenantId, TenantSpec, WorldEvent};
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
    /// In the world, and how it joined.
    Attached(Joined),
    /// Not yet: why, in the world's words (a cgroup missing or empty, a VM's socket silent).
    Waiting(String),
    /// The world cannot take the tenant (a simulated VM's kernel does not fit): why.
    Refused(String),
}

/// How a tenant joined its world.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Joined {
    /// Something already running (a cgroup, a VM) taken under management.
    Adopted,
    /// Taken back after a crash of the runner, with the originals its record keeps.
    Readopted,
    /// A command or VM the world started for it.
    Launched,
    /// A simulated VM powered on.
    PoweredOn,
}

impl Joined {
    /// In one word, as logs say it.
    pub fn name(self) -> &'static str {
        match self {
            Joined::Adopted => "adopted",
            Joined::Readopted => "readopted",
            Joined::Launched => "launched",
            Joined::PoweredOn => "powered_on",
        }
    }
}

impl std::fmt::Display for Joined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
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
    /// What a command did (the runner says it with the tenant's name).
    type Done: std::fmt::Display;

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

    /// A running tenant's min, max or shares changed (a cgroup's OOM guard follows its max).
    fn retune(&mut self, id: TenantId, spec: &TenantSpec);

    /// Runs the tenants for one tick after a decision was applied: a simulated world runs its
    /// workloads for `tick` of virtual time; a real one runs by itself and does nothing here.
    fn run(&mut self, tick: Duration);

    /// Called every few milliseconds between two ticks on a wall clock (never on a virtual
    /// one): where a real world must act faster than a tick (a tenant stalled at its limit).
    fn between_ticks(&mut self);

    /// What happened since the last call.
    fn drain_events(&mut self) -> Vec<WorldEvent>;

    /// Carries out a world-specific command on a running tenant; returns what it did.
    fn command(&mut self, id: TenantId, command: &Self::Command)
        -> Result<Self::Done, Self::Error>;

    /// What a restarted runner needs to give back what this world changed: the attached
    /// tenants' records, and those whose restore failed and is being retried.
    fn records(&self) -> Vec<Self::Record>;

    /// Gives a tenant recorded by a previous run, which this run does not manage, back what it
    /// had.
    fn restore(&mut self, record: &Self::Record) -> Result<(), Self::Error>;

    /// Detaches every tenant and retries the restores that failed before; the failures by
    /// tenant name (every tenant is tried).
    fn detach_all(&mut self) -> Vec<(String, Self::Error)>;
}
