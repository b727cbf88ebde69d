//! The seam between the Linux host and its mechanisms: each mechanism a host runs is an [`Actuator`] in its own folder, given every tenant's observation to fill its lever in and the policy's moves to carry out.
//!
//! The host reads the cgroup and derives the observation (`derive.rs`); then each actuator
//! adds what it knows, in the order the host was built with. Moves reach an actuator only
//! outside a dry run.
//!
//! A mechanism that changes a tenant's settings outside its memory cgroup (the disk: its
//! blkio or io cgroup) also uses the tenant's life hooks, each a no-op by default: `launch`
//! (cgroups of other hierarchies a launched process joins before it executes), `resume` and
//! `persist` (its part of the state file's [`TenantRecord`], Firecracker's `Persist` pair)
//! and `restore` (given back from that part as the tenant is let go). The daemon reaches an
//! actuator's own methods through `LinuxHost::actuator` (by its type).

use super::{LinuxError, Placement, TenantRecord};
use memtide_model::{
    Decision, HostObservation, Moves, TenantId, TenantObservation, TenantSpec, WorldEvent,
};
use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};
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

/// A tenant just attached, as [`Actuator::resume`] sees it.
#[derive(Debug)]
pub struct Attached<'a> {
    pub id: TenantId,
    pub spec: &'a TenantSpec,
    /// Its cgroup, as a path inside the memory hierarchy.
    pub cgroup: &'a str,
    /// Its memory cgroup's directory.
    pub dir: &'a Path,
    /// Launched by this attach (not adopted, nor re-adopted).
    pub launched: bool,
}

/// The cgroups of other hierarchies a launched tenant's process joins before it executes, as
/// [`Actuator::launch`] made them ready.
#[derive(Debug, Default)]
pub struct Joins {
    /// The cgroup directories to join.
    pub dirs: Vec<PathBuf>,
    /// The directories created for them, parents first: removed (deepest first) when the
    /// launch fails.
    pub created: Vec<PathBuf>,
}

/// One mechanism of the Linux world. It is `Any`, so the one who built the host can reach
/// its own methods again (`LinuxHost::actuator`).
pub trait Actuator: Any + fmt::Debug + Send {
    /// Its name, for the errors of `finish`.
    fn name(&self) -> &'static str;

    /// Tenant `id` is attached (or attached again) with `spec` at `placement`: what this
    /// mechanism does for it. Nothing by default.
    fn attach(&mut self, _id: TenantId, _spec: &TenantSpec, _placement: &Placement) {}

    /// Tenant `id` (with `spec`) is about to be launched in the memory cgroup at `cgroup` (a
    /// path inside the memory hierarchy): the cgroups of other hierarchies its process must
    /// join, made ready (not in a dry run). On an error nothing is launched; when the launch
    /// fails after, the host removes what was created and `forget`s `id`. None by default.
    fn launch(
        &mut self,
        _id: TenantId,
        _spec: &TenantSpec,
        _cgroup: &str,
    ) -> Result<Joins, LinuxError> {
        Ok(Joins::default())
    }

    /// Tenant `t` was attached (before `attach`): takes it on, resuming the state file's
    /// `record` of it (after a restart), or gives back the record's part of this mechanism
    /// when it no longer manages that for the tenant (not in a dry run). An error is a failed
    /// restore, reported; the tenant runs. Nothing by default.
    fn resume(
        &mut self,
        _t: &Attached<'_>,
        _record: Option<&TenantRecord>,
    ) -> Result<(), LinuxError> {
        Ok(())
    }

    /// Writes this mechanism's part of managed tenant `id`'s state-file `record`: what a
    /// restarted daemon needs to give back what it changed. Nothing by default.
    fn persist(&self, _id: TenantId, _record: &mut TenantRecord) {}

    /// Gives back this mechanism's part of what memtide changed for a tenant let go, from its
    /// `record` (persisted just before it was forgotten; updated as it is given back): an
    /// adopted cgroup's before its limits (never in a dry run), a launched one's after its
    /// cgroup is removed (errors then ignored). Nothing by default.
    fn restore(&mut self, _record: &mut TenantRecord) -> Result<(), LinuxError> {
        Ok(())
    }

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
