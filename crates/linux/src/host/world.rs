//! The Linux host over a tenant's life, as the runner drives every world: attach adopts a cgroup (waiting while it is missing or empty) or launches a command in one, with its disk I/O when its spec shares the disk, detach gives back what memtide changed.

use super::{LinuxError, LinuxHost, Origin, Original, TenantRecord};
use crate::cgroup::MemoryCgroup;
use memtide_controller::{Attach, Joined, World};
use memtide_model::{TenantId, TenantSpec, WorldEvent};
use std::convert::Infallible;
use std::time::Duration;

/// Where a tenant lives on the host: its cgroup (a path inside the memory hierarchy) and, for a
/// tenant memtide starts itself, the command to launch there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub cgroup: String,
    /// `None`: adopt the cgroup and whatever runs in it.
    pub launch: Option<Vec<String>>,
    /// An adapter to keep running in the cgroup (`memtide-adapter` and its arguments): a
    /// balloon agent for a server that has none.
    pub adapter: Option<Vec<String>>,
    /// Never asked to merge its pages with other tenants' (page sharing is a side channel
    /// between tenants); others launched while page sharing is on are.
    pub isolated: bool,
}

impl LinuxHost {
    /// The cgroup at `path` holds at least one process.
    fn has_processes(&self, path: &str) -> bool {
        MemoryCgroup::new(self.hierarchy.version, self.hierarchy.dir_of(path))
            .pids()
            .is_ok_and(|p| !p.is_empty())
    }
}

impl World for LinuxHost {
    type Placement = Placement;
    type Record = TenantRecord;
    /// The Linux host has no commands of its own.
    type Command = Infallible;
    type Done = Infallible;

    /// Adopts the placement's cgroup (re-adopting under `record`'s original after a crash), or
    /// launches its command, and sets up what policy needs: the tenant's max for the OOM guard,
    /// the access sampler when its estimator samples, and its blkio or io cgroup when its spec
    /// shares the disk (with disk I/O enabled; a record's I/O originals are given back when it
    /// no longer does). An adopted cgroup that does not exist or holds no process yet waits
    /// (its record is kept for when it comes). A launched tenant whose command still runs from
    /// a previous run is re-adopted, not launched twice.
    fn attach(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        placement: &Placement,
        record: Option<&TenantRecord>,
    ) -> Result<Attach, LinuxError> {
        let record = record.filter(|r| r.cgroup == placement.cgroup);
        let cgroup = &placement.cgroup;
        let io = spec.disk.is_some() && self.io.is_some();
        let has_procs = self.has_processes(cgroup);
        let how = match &placement.launch {
            None => {
                if !has_procs {
                    if let Some(r) = record {
                        self.remember(r);
                    }
                    let why = if self.hierarchy.dir_of(cgroup).is_dir() {
                        "its cgroup holds no process"
                    } else {
                        "its cgroup does not exist"
                    };
                    return Ok(Attach::Waiting(why.to_string()));
                }
                self.adopt(
                    id,
                    &spec.name,
                    cgroup,
                    record.map(Original::of),
                    Origin::Adopted,
                )?;
                if record.is_some() {
                    Joined::Readopted
                } else {
                    Joined::Adopted
                }
            }
            Some(argv) => {
                if record.is_some() && has_procs {
                    self.adopt(
                        id,
                        &spec.name,
                        cgroup,
                        record.map(Original::of),
                        Origin::Launched,
                    )?;
                    Joined::Readopted
                } else {
                    let flags = (!placement.isolated, io);
                    self.launch(id, &spec.name, cgroup, argv, spec.max, flags)?;
                    Joined::Launched
                }
            }
        };
        let io_record = record.and_then(|r| r.io.as_ref());
        // A launched tenant's I/O was set up as it launched.
        let launched = how == Joined::Launched;
        if io && !launched {
            self.attach_io(id, io_record, Vec::new());
        } else if let (true, Some(r)) = (io, io_record) {
            self.inherit_io_dirs(id, r);
        } else if let (false, Some(r)) = (io, io_record) {
            if let Err(e) = self.give_back_io_record(r) {
                self.events.push(WorldEvent::RestoreFailed {
                    name: spec.name.clone(),
                    error: e.to_string(),
                });
            }
        }
        self.set_max(id, spec.max);
        self.set_adapter(id, placement.adapter.clone());
        self.attach_mechanisms(id, spec, placement);
        Ok(Attach::Attached(how))
    }

    fn detach(&mut self, id: TenantId) -> Result<(), LinuxError> {
        self.release(id).map(|_| ())
    }

    fn retune(&mut self, id: TenantId, spec: &TenantSpec) {
        self.set_max(id, spec.max);
    }

    /// Real tenants run by themselves.
    fn run(&mut self, _tick: Duration) {}

    /// Rescues v1 tenants stalled at their limit (never in a dry run, which writes nothing).
    fn between_ticks(&mut self) {
        if !self.options.dry_run {
            self.rescue_stalled();
        }
    }

    fn drain_events(&mut self) -> Vec<WorldEvent> {
        std::mem::take(&mut self.events)
    }

    fn command(&mut self, _id: TenantId, command: &Infallible) -> Result<Infallible, LinuxError> {
        match *command {}
    }

    fn records(&self) -> Vec<TenantRecord> {
        self.tenants
            .values()
            .chain(&self.unrestored)
            .map(|t| t.record.clone())
            .collect()
    }

    /// Adopts the recorded cgroup under its record, outside the managed ids, and releases it at
    /// once.
    fn restore(&mut self, record: &TenantRecord) -> Result<(), LinuxError> {
        let id = TenantId(u32::MAX);
        self.adopt(
            id,
            &record.name,
            &record.cgroup,
            Some(Original::of(record)),
            record.origin,
        )?;
        if let (Some(r), Some(t)) = (&record.io, self.tenants.get_mut(&id)) {
            t.io = Some(super::io::TenantIo::of_record(r));
            t.record.io = Some(r.clone());
        }
        self.release(id).map(|_| ())
    }

    fn detach_all(&mut self) -> Vec<(String, LinuxError)> {
        self.release_all()
    }
}
