//! Disk I/O as a mechanism of the Linux host: the [`Disk`] actuator fills each I/O tenant's `DiskIo` lever, writes the policy's weights and the configured caps, and persists and gives back each tenant's weight and caps through its part of the state file's record.
//!
//! A launched tenant's process joins its blkio cgroup (v1) before it executes (`launch`);
//! an adopted one's is taken on as it is attached (`resume`). The daemon builds it with
//! [`Disk::take_over`] when `[io]` is enabled, else with [`Disk::off`], which manages no
//! device and only gives back what a record from an earlier run holds; it reaches it again
//! through `LinuxHost::actuator::<Disk>()` for the caps at a reload ([`Disk::set_cap`]) and
//! why a tenant's I/O is unmanaged ([`IoHost::unmanaged`]).

use super::{IoHost, IoOptions, TenantIo};
use crate::fs::hierarchy::MemoryHierarchy;
use crate::host::actuator::{Actuator, Attached, Joins, TenantView};
use crate::host::{LinuxError, Origin, TenantRecord};
use crate::io_cgroup::{IoCap, IoError};
use memtide_model::{HostObservation, Moves, TenantId, TenantObservation, TenantSpec, WorldEvent};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The tenants' disk I/O as the host's mechanism.
#[derive(Debug)]
pub struct Disk {
    /// The shared device, when memtide manages the tenants' I/O (`None`: [`Disk::off`]).
    shared: Option<IoHost>,
    /// Each tenant whose I/O is managed.
    tenants: BTreeMap<TenantId, TenantIo>,
    /// Tenants launched into the blkio directories memtide created for them (parents first),
    /// until they are attached.
    launched: BTreeMap<TenantId, Vec<PathBuf>>,
    timeout: Duration,
    dry_run: bool,
}

impl Disk {
    /// Takes the shared device over (see [`IoHost::take_over`]): from now on, tenants
    /// attached with a `disk` in their spec get their blkio or io cgroup managed. `root` is
    /// the root /proc and /sys are read under (`/` live); nothing is written in a dry run.
    pub fn take_over(
        root: &Path,
        memory: &MemoryHierarchy,
        options: &IoOptions,
        timeout: Duration,
        dry_run: bool,
    ) -> Result<Disk, LinuxError> {
        let shared = IoHost::take_over(root, memory, options, timeout, dry_run)?;
        Ok(Disk {
            shared: Some(shared),
            ..Disk::off(timeout, dry_run)
        })
    }

    /// No shared device: no tenant's I/O is managed, but the weight and caps a state file's
    /// record holds (a run with disk I/O enabled before) are given back (not in a dry run).
    pub fn off(timeout: Duration, dry_run: bool) -> Disk {
        Disk {
            shared: None,
            tenants: BTreeMap::new(),
            launched: BTreeMap::new(),
            timeout,
            dry_run,
        }
    }

    /// The shared disk, when memtide manages the tenants' I/O.
    pub fn shared(&self) -> Option<&IoHost> {
        self.shared.as_ref()
    }

    /// The caps `id`'s configuration gives it on the shared disk (`None`: none, and any cap
    /// memtide wrote before is given back): kept for its attach, and written now when it runs
    /// (not in a dry run).
    pub fn set_cap(&mut self, id: TenantId, cap: Option<IoCap>) -> Result<(), LinuxError> {
        let Some(shared) = &mut self.shared else {
            return Ok(());
        };
        shared.configure_cap(id, cap);
        let Some(io) = self.tenants.get_mut(&id) else {
            return Ok(());
        };
        Ok(io.apply_cap(shared.device().dev(), cap, self.timeout, self.dry_run)?)
    }

    /// Manages `t`'s disk I/O: its blkio (v1) or io (v2) cgroup, resuming `record`'s
    /// originals, with its configured caps. Never fails the tenant: one whose I/O cannot be
    /// managed runs without, and `IoHost::unmanaged` says why.
    fn open(
        shared: &mut IoHost,
        t: &Attached<'_>,
        record: Option<&super::IoRecord>,
        created: Vec<PathBuf>,
    ) -> Option<TenantIo> {
        let dir = shared.dir_of(t.cgroup, t.dir);
        shared
            .open(t.id, dir, record, created)
            .inspect_err(|e| shared.not_managed(t.id, e.to_string()))
            .ok()
    }

    /// Gives back the weight and caps a record holds for a tenant whose I/O is no longer
    /// managed (not in a dry run).
    fn give_back_record(&self, record: &super::IoRecord) -> Result<(), LinuxError> {
        if self.dry_run {
            return Ok(());
        }
        match TenantIo::of_record(record).restore(self.timeout) {
            Err(IoError::Fs(e)) if e.is_vanished() => Ok(()),
            other => Ok(other?),
        }
    }
}

impl Actuator for Disk {
    fn name(&self) -> &'static str {
        "io"
    }

    /// v1: creates the blkio cgroup (and what leads to it) of a tenant that shares the disk,
    /// for its process to join before it executes.
    fn launch(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        cgroup: &str,
    ) -> Result<Joins, LinuxError> {
        let Some(shared) = &mut self.shared else {
            return Ok(Joins::default());
        };
        if spec.disk.is_none() {
            return Ok(Joins::default());
        }
        let (dirs, created) = match shared.create_for_launch(cgroup)? {
            Some((dir, created)) => (vec![dir], created),
            None => (Vec::new(), Vec::new()),
        };
        self.launched.insert(id, created.clone());
        Ok(Joins { dirs, created })
    }

    /// A tenant whose spec shares the disk is managed (a launched one in the blkio directories
    /// made for it, and in those a crashed run made, named in its record); a record's weight
    /// and caps are given back when it no longer shares it.
    fn resume(
        &mut self,
        t: &Attached<'_>,
        record: Option<&TenantRecord>,
    ) -> Result<(), LinuxError> {
        let io_record = record.and_then(|r| r.io.as_ref());
        let created = self.launched.remove(&t.id).unwrap_or_default();
        let Some(shared) = self.shared.as_mut().filter(|_| t.spec.disk.is_some()) else {
            return match io_record {
                Some(r) => self.give_back_record(r),
                None => Ok(()),
            };
        };
        let io = if t.launched {
            Disk::open(shared, t, None, created).map(|mut io| {
                if let Some(r) = io_record {
                    io.inherit(&r.created);
                    shared.keep_created(&r.created);
                }
                io
            })
        } else {
            Disk::open(shared, t, io_record, Vec::new())
        };
        if let Some(io) = io {
            self.tenants.insert(t.id, io);
        }
        Ok(())
    }

    fn persist(&self, id: TenantId, record: &mut TenantRecord) {
        if let Some(io) = self.tenants.get(&id) {
            record.io = Some(io.record());
        }
    }

    /// An adopted tenant's weight and caps are written back (a cgroup gone has none to
    /// restore); a launched one's too, and the blkio directories memtide created for it are
    /// removed.
    fn restore(&mut self, record: &mut TenantRecord) -> Result<(), LinuxError> {
        let Some(r) = &record.io else {
            return Ok(());
        };
        let mut io = TenantIo::of_record(r);
        match record.origin {
            Origin::Adopted => {
                match io.restore(self.timeout) {
                    Err(IoError::Fs(e)) if e.is_vanished() => {}
                    other => other?,
                }
                record.io = Some(io.record());
            }
            Origin::Launched => {
                let _ = io.restore(self.timeout);
                io.remove_created();
            }
        }
        Ok(())
    }

    /// The device's await since the last observation.
    fn observe_host(&mut self, _obs: &mut HostObservation, _events: &mut Vec<WorldEvent>) {
        if let Some(shared) = &mut self.shared {
            if let Err(e) = shared.observe_device() {
                shared.fail(None, e);
            }
        }
    }

    fn observe(
        &mut self,
        _t: &TenantView<'_>,
        obs: &mut TenantObservation,
        _events: &mut Vec<WorldEvent>,
    ) {
        let id = obs.id;
        let (Some(shared), Some(io)) = (&mut self.shared, self.tenants.get_mut(&id)) else {
            return;
        };
        match io.observe(shared.device().dev(), shared.await_us()) {
            Ok(disk) => obs.levers.disk = disk.map(Box::new),
            Err(e) => {
                if matches!(&e, IoError::Fs(f) if f.is_vanished()) {
                    // Its blkio cgroup went away (v1: apart from its memory cgroup).
                    shared.not_managed(id, e.to_string());
                    self.tenants.remove(&id);
                }
                shared.fail(Some(id), e);
            }
        }
    }

    /// Writes the policy's weight; the record keeps the weight in force before memtide's
    /// first.
    fn apply(&mut self, id: TenantId, moves: &Moves, _events: &mut Vec<WorldEvent>) {
        let (Some(weight), Some(shared)) = (moves.disk_weight, &mut self.shared) else {
            return;
        };
        if let Some(io) = self.tenants.get_mut(&id) {
            if let Err(e) = io.set_weight(weight, self.timeout) {
                shared.fail(Some(id), e);
            }
        }
    }

    /// No note of `id`'s I/O any more (its configured caps stay, for when it comes back).
    fn forget(&mut self, id: TenantId) {
        self.tenants.remove(&id);
        self.launched.remove(&id);
        if let Some(shared) = &mut self.shared {
            shared.forget(id);
        }
    }

    fn finish(&mut self) -> Result<(), LinuxError> {
        match &mut self.shared {
            Some(shared) => shared.finish(),
            None => Ok(()),
        }
    }
}
