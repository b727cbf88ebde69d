//! The Linux host over a tenant's life, as the runner drives every world: attach adopts a cgroup (waiting while it is missing or empty) or launches a command in one and hands it to every mechanism (resuming the state file's record), detach gives back what memtide changed.

use super::{Attached, LinuxError, LinuxHost, Origin, Original, TenantRecord};
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
    /// An adopted cgroup whose processes live in the cgroups below it (a systemd slice): it
    /// is running while any of them holds a process, and its processes are theirs.
    pub subtree: bool,
}

impl LinuxHost {
    /// Hands tenant `id`, just attached (`launched` now or adopted), to every mechanism with
    /// the state file's `record` of it; a mechanism that fails to give back its part of the
    /// record is reported as a failed restore.
    fn resume_mechanisms(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        launched: bool,
        record: Option<&TenantRecord>,
    ) {
        let Some(t) = self.tenants.get(&id) else {
            return;
        };
        let attached = Attached {
            id,
            spec,
            cgroup: &t.record.cgroup,
            dir: t.cgroup.dir(),
            launched,
        };
        for a in &mut self.actuators {
            if let Err(e) = a.resume(&attached, record) {
                self.events.push(WorldEvent::RestoreFailed {
                    name: spec.name.clone(),
                    error: e.to_string(),
                });
            }
        }
    }

    /// The cgroup at `path` (with `subtree`, or a cgroup below it) holds at least one process.
    fn has_processes(&self, path: &str, subtree: bool) -> bool {
        let cgroup = MemoryCgroup::new(self.hierarchy.version, self.hierarchy.dir_of(path));
        let pids = if subtree {
            cgroup.subtree_pids()
        } else {
            cgroup.pids()
        };
        pids.is_ok_and(|p| !p.is_empty())
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
    /// and every mechanism's part (`Actuator::resume` with the record, then `attach`: the
    /// access sampler when its estimator samples, its blkio or io cgroup when its spec shares
    /// the disk, a record's I/O originals given back when it no longer does). An adopted cgroup that does not exist or holds no process yet waits
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
        let subtree = placement.subtree && placement.launch.is_none();
        let has_procs = self.has_processes(cgroup, subtree);
        let how = match &placement.launch {
            None => {
                if !has_procs {
                    if let Some(r) = record {
                        self.remember(r);
                    }
                    let why = if !self.hierarchy.dir_of(cgroup).is_dir() {
                        "its cgroup does not exist"
                    } else if subtree {
                        "no cgroup in its subtree holds a process"
                    } else {
                        "its cgroup holds no process"
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
                if subtree {
                    self.read_subtree(id);
                }
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
                    self.launch(id, spec, cgroup, argv, !placement.isolated)?;
                    Joined::Launched
                }
            }
        };
        self.resume_mechanisms(id, spec, how == Joined::Launched, record);
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

    /// Rescues v1 tenants stalled at their limit (never in a dry run, which writes nothing), and
    /// reports the swap-ins that ended.
    fn between_ticks(&mut self) {
        if !self.options.dry_run {
            self.rescue_stalled();
        }
        self.finish_swap_ins();
    }

    fn drain_events(&mut self) -> Vec<WorldEvent> {
        std::mem::take(&mut self.events)
    }

    fn command(&mut self, _id: TenantId, command: &Infallible) -> Result<Infallible, LinuxError> {
        match *command {}
    }

    /// Each managed tenant's record with every mechanism's part persisted, then those whose
    /// restore failed, as they were let go.
    fn records(&self) -> Vec<TenantRecord> {
        self.tenants
            .values()
            .map(|t| {
                let mut record = t.record.clone();
                for a in &self.actuators {
                    a.persist(t.id, &mut record);
                }
                record
            })
            .chain(self.unrestored.iter().map(|t| t.record.clone()))
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
        // The mechanisms' parts of the record are given back from the record itself.
        if let Some(t) = self.tenants.get_mut(&id) {
            t.record.io = record.io.clone();
        }
        self.release(id).map(|_| ())
    }

    fn detach_all(&mut self) -> Vec<(String, LinuxError)> {
        self.release_all()
    }
}
