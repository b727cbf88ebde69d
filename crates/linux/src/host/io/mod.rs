//! Disk I/O on the Linux host (issue 14, Lai et al.), the [`Disk`] actuator: one block device the tenants share, its scheduler, and each I/O tenant's blkio (v1) or io (v2) cgroup — the policy's weights written, caps only as configured, counters and a latency read each tick, and all of it given back.
//!
//! This file holds the device's side ([`IoHost`]) and the state-file part ([`IoRecord`]);
//! `tenant.rs` a tenant's side, `actuator.rs` the mechanism the host runs.
//!
//! **The device.** `[io] device` names one whole block device. With `scheduler = "bfq"`,
//! memtide makes BFQ its scheduler at start (v1's weights act only under BFQ) through
//! `block`'s guard, and gives the previous one back at exit. Before it changes the scheduler
//! it keeps the one in force in a small file beside the state file (`io.json`); a run that
//! crashed leaves that file behind, and the next start first writes the scheduler it names
//! back, then takes over as any start does, so the original is never lost to a crash. With
//! `scheduler = "keep"` nothing is changed (on v1 the device must already run BFQ).
//!
//! **The tenant's cgroup.** On v1 the blkio hierarchy is mounted apart from memory: a tenant's
//! blkio cgroup is the same path as its memory cgroup under the blkio mount (found in
//! `/proc/self/mountinfo`). memtide creates it for a launched tenant, and the launched process
//! joins it before it executes; an adopted tenant's must exist, and where it does not, the
//! tenant runs with its I/O unmanaged (said once, with the path). On v2 it is the tenant's own
//! cgroup, weighted through `io.bfq.weight` when the device runs BFQ and through blk-iocost's
//! `io.weight` otherwise ([`IoInterface`]).
//!
//! **What is written.** The weight, when the policy's move says so (never in a dry run); the
//! caps a tenant's configuration gives (`read_iops`, `write_iops`, `read_bps`, `write_bps`),
//! at attach and at every reload, and never by policy. The first change of each records what
//! was in force ([`IoOriginals`]); the tenant's state-file record carries it, so a daemon
//! restarted after a SIGKILL gives back the original, not what the killed one wrote. At
//! detach and at exit the originals are written back; a launched tenant's blkio cgroup, and
//! the parents memtide created for it, are removed.
//!
//! **What is read.** Each tick, a tenant's operations and bytes on the device since the last
//! observation (the cgroup's BFQ counters on v1 where BFQ schedules the device, else the
//! throttle's; `io.stat` on v2), the weight in force, and its IOPS cap. Latency: cgroup v1
//! has no per-cgroup I/O latency, so memtide reads the device's mean await over the interval
//! from `/sys/block/<dev>/stat` (Δ read and write ticks over Δ reads and writes) and gives it
//! to every tenant that did I/O in the interval (none to one that did not). It is the
//! device's latency, not the tenant's own: under BFQ a tenant with a larger weight waits
//! less than the mean, one with a smaller weight more, so a tenant whose target is missed
//! by the mean is raised even when its own operations were faster, and the mean falls as the
//! raised tenant gets more of the disk only as far as its neighbours' operations get slower.
//! On v2, `io.stat`'s per-cgroup latency with blk-iocost would be the tenant's own; that is
//! not done. Syncs and their latency are not measured on Linux (`None`).

mod actuator;
mod tenant;

pub use actuator::Disk;
pub(crate) use tenant::TenantIo;

use super::error::LinuxError;
use crate::block::BlockDevice;
use crate::fs::diskstat::{self, DiskStat};
use crate::fs::hierarchy::{parse_mountinfo, MemoryHierarchy};
use crate::fs::read::read_text;
use crate::fs::{write_bounded, CgroupVersion, FsError};
use crate::io_cgroup::{IoCap, IoCgroup, IoError, IoInterface, IoOriginals};
use memtide_model::TenantId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What can go wrong taking a shared disk over or a tenant's I/O cgroup on (the host's
/// `LinuxError::Disk`).
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error(
        "disk I/O on cgroup v1 needs the blkio controller, and {mountinfo} lists no blkio mount"
    )]
    NoBlkio { mountinfo: String },
    #[error("disk I/O on cgroup v2 needs the io controller, and {path} does not list it")]
    NoIoController { path: String },
    #[error("device {device} runs the {scheduler} scheduler, and cgroup v1's blkio weights act only under BFQ; set [io] scheduler = \"bfq\"")]
    NeedsBfq { device: String, scheduler: String },
    #[error("the device's original scheduler in {path}: {error}")]
    Saved { path: String, error: String },
    #[error("there is no {what} cgroup at {dir}")]
    NoIoCgroup { dir: String, what: &'static str },
}

/// What [`Disk::take_over`] takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoOptions {
    /// The shared device: a path to its node (`/dev/vdb`, a link to it) or its name under
    /// `/sys/block` (`vdb`).
    pub device: String,
    /// Make BFQ the device's scheduler while memtide runs (`scheduler = "bfq"`); false keeps
    /// the one in force (`"keep"`).
    pub bfq: bool,
    /// Where the scheduler in force before memtide is kept while it runs (`None`: nowhere,
    /// as in tests).
    pub saved: Option<PathBuf>,
}

/// What the state file keeps of a tenant's I/O, so a restarted daemon gives back what the
/// one before it changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoRecord {
    /// The tenant's blkio (v1) or io (v2) cgroup directory.
    pub dir: PathBuf,
    pub interface: IoInterface,
    /// The weight and caps before memtide's first change.
    pub originals: IoOriginals,
    /// The blkio directories memtide created for a launched tenant, parents first (v1).
    #[serde(default)]
    pub created: Vec<PathBuf>,
}

/// Something about the disk that failed: reading the device or a tenant's counters, writing a
/// weight or caps. The tenant keeps running; what failed is tried again at its next turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoFailure {
    /// Numbered from 0 in the order they happened, so a reader can take those it has not seen.
    pub seq: u64,
    /// The tenant, or `None` for the device.
    pub id: Option<TenantId>,
    pub error: String,
}

/// Failures kept for readers; older ones are dropped.
const FAILURES_KEPT: usize = 64;

/// The scheduler found on the device before memtide set BFQ, as kept beside the state file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct SavedScheduler {
    /// The device's name under /sys/block.
    device: String,
    scheduler: String,
}

/// The shared device under memtide's control.
#[derive(Debug)]
pub struct IoHost {
    device: BlockDevice,
    /// v1: the blkio hierarchy the tenants' blkio cgroups are in; `None` on v2 (a tenant's
    /// memory cgroup is its io cgroup).
    blkio: Option<MemoryHierarchy>,
    interface: IoInterface,
    sysfs: PathBuf,
    /// BFQ put in place by memtide; gives the previous scheduler back.
    scheduler: Option<crate::block::SchedulerGuard>,
    /// Where the previous scheduler is kept while the guard holds it.
    saved: Option<PathBuf>,
    timeout: Duration,
    dry_run: bool,
    last_stat: Option<DiskStat>,
    /// The device's mean await over the last interval, µs.
    await_us: Option<f64>,
    /// Each I/O tenant's configured caps.
    caps: BTreeMap<TenantId, IoCap>,
    /// Why each I/O tenant whose I/O is not managed is not.
    unmanaged: BTreeMap<TenantId, String>,
    /// What failed lately (reading counters, writing a weight or caps), oldest first.
    failures: VecDeque<IoFailure>,
    /// The number of the next failure.
    next_failure: u64,
    /// Every blkio directory memtide created (v1), removed at exit when empty.
    created: BTreeSet<PathBuf>,
}

impl IoHost {
    /// Takes the device over: finds it and the tenants' blkio or io hierarchy, gives back a
    /// scheduler a crashed run left (named in `saved`), then, with `bfq`, keeps the scheduler
    /// in force in `saved` and makes BFQ the device's scheduler. Nothing is written in a dry
    /// run. `root` is the root /proc and /sys are read under (`/` live).
    pub(crate) fn take_over(
        root: &Path,
        memory: &MemoryHierarchy,
        options: &IoOptions,
        timeout: Duration,
        dry_run: bool,
    ) -> Result<IoHost, LinuxError> {
        let sysfs = root.join("sys");
        let device = if options.device.contains('/') {
            BlockDevice::by_path(&sysfs, Path::new(&options.device))?
        } else {
            BlockDevice::by_name(&sysfs, &options.device)?
        };
        let blkio = match memory.version {
            CgroupVersion::V1 => Some(blkio_hierarchy(root)?),
            CgroupVersion::V2 => {
                let controllers = memory.mount.join("cgroup.controllers");
                let text = read_text(&controllers)?;
                if !text.split_whitespace().any(|c| c == "io") {
                    return Err(LinuxError::Disk(DiskError::NoIoController {
                        path: controllers.display().to_string(),
                    }));
                }
                None
            }
        };
        let saved = options.saved.clone();
        if let (Some(path), false) = (&saved, dry_run) {
            give_back_saved(&sysfs, path, timeout)?;
        }
        let active = device.scheduler()?.active;
        let mut scheduler = None;
        let bfq = if options.bfq {
            if !dry_run {
                if let (Some(path), Some(was)) = (&saved, &active) {
                    store_saved(
                        path,
                        &SavedScheduler {
                            device: device.name().to_string(),
                            scheduler: was.clone(),
                        },
                    )?;
                }
                scheduler = Some(device.use_bfq(timeout).inspect_err(|_| {
                    if let Some(path) = &saved {
                        let _ = std::fs::remove_file(path);
                    }
                })?);
            }
            true
        } else {
            active.as_deref() == Some(crate::block::BFQ)
        };
        if memory.version == CgroupVersion::V1 && !bfq {
            return Err(LinuxError::Disk(DiskError::NeedsBfq {
                device: device.name().to_string(),
                scheduler: active.unwrap_or_else(|| "none".to_string()),
            }));
        }
        let last_stat = diskstat::read_disk_stat(&sysfs, device.name())?;
        Ok(IoHost {
            device,
            blkio,
            interface: IoInterface::of(memory.version, bfq),
            sysfs,
            scheduler,
            saved,
            timeout,
            dry_run,
            last_stat,
            await_us: None,
            caps: BTreeMap::new(),
            unmanaged: BTreeMap::new(),
            failures: VecDeque::new(),
            next_failure: 0,
            created: BTreeSet::new(),
        })
    }

    pub fn device(&self) -> &BlockDevice {
        &self.device
    }

    /// How the tenants' weights are written.
    pub fn interface(&self) -> IoInterface {
        self.interface
    }

    /// The device's mean await over the last interval, µs (`None` before a second reading,
    /// or when nothing completed).
    pub fn await_us(&self) -> Option<f64> {
        self.await_us
    }

    /// Why tenant `id`'s I/O is not managed, when it is not.
    pub fn unmanaged(&self, id: TenantId) -> Option<&str> {
        self.unmanaged.get(&id).map(String::as_str)
    }

    /// The failures numbered `seq` and later that are still kept (the last 64).
    pub fn failures_since(&self, seq: u64) -> impl Iterator<Item = &IoFailure> {
        self.failures.iter().filter(move |f| f.seq >= seq)
    }

    pub(crate) fn fail(&mut self, id: Option<TenantId>, error: impl std::fmt::Display) {
        if self.failures.len() == FAILURES_KEPT {
            self.failures.pop_front();
        }
        self.failures.push_back(IoFailure {
            seq: self.next_failure,
            id,
            error: error.to_string(),
        });
        self.next_failure += 1;
    }

    /// The caps configured for `id` from now on (`None`: none; the originals stay in force).
    pub(crate) fn configure_cap(&mut self, id: TenantId, cap: Option<IoCap>) {
        match cap {
            Some(c) => self.caps.insert(id, c),
            None => self.caps.remove(&id),
        };
    }

    pub(crate) fn configured_cap(&self, id: TenantId) -> Option<IoCap> {
        self.caps.get(&id).copied()
    }

    /// A new observation: the device's await since the last one.
    pub(crate) fn observe_device(&mut self) -> Result<(), FsError> {
        let now = diskstat::read_disk_stat(&self.sysfs, self.device.name())?;
        self.await_us = match (&now, &self.last_stat) {
            (Some(n), Some(b)) => n.await_since(b),
            _ => None,
        };
        self.last_stat = now;
        Ok(())
    }

    /// The blkio (v1) or io (v2) directory of the tenant whose memory cgroup is `cgroup_path`
    /// at `memory_dir`.
    pub(crate) fn dir_of(&self, cgroup_path: &str, memory_dir: &Path) -> PathBuf {
        match &self.blkio {
            Some(h) => h.dir_of(cgroup_path),
            None => memory_dir.to_path_buf(),
        }
    }

    /// v1: creates a launched tenant's blkio cgroup (and what leads to it), for its process to
    /// join before it executes; the directories created, parents first. v2 and a dry run: none.
    pub(crate) fn create_for_launch(
        &mut self,
        cgroup_path: &str,
    ) -> Result<Option<(PathBuf, Vec<PathBuf>)>, LinuxError> {
        let Some(h) = &self.blkio else {
            return Ok(None);
        };
        if self.dry_run {
            return Ok(None);
        }
        let dir = h.dir_of(cgroup_path);
        let mut missing = Vec::new();
        let mut at = dir.as_path();
        while !at.is_dir() && at.starts_with(&h.mount) && at != h.mount {
            missing.push(at.to_path_buf());
            match at.parent() {
                Some(p) => at = p,
                None => break,
            }
        }
        missing.reverse();
        for d in &missing {
            std::fs::create_dir(d).map_err(|error| LinuxError::CreateCgroup {
                dir: d.display().to_string(),
                error,
            })?;
            self.created.insert(d.clone());
        }
        Ok(Some((dir, missing)))
    }

    /// The tenant's I/O over the cgroup at `dir`, resuming `record`'s originals (a restart
    /// after a crash), with the configured caps written (not in a dry run). An error says why
    /// its I/O cannot be managed: the cgroup is missing or has no weight.
    pub(crate) fn open(
        &mut self,
        id: TenantId,
        dir: PathBuf,
        record: Option<&IoRecord>,
        created: Vec<PathBuf>,
    ) -> Result<TenantIo, LinuxError> {
        self.unmanaged.remove(&id);
        if !dir.is_dir() {
            return Err(LinuxError::Disk(DiskError::NoIoCgroup {
                dir: dir.display().to_string(),
                what: if self.blkio.is_some() { "blkio" } else { "io" },
            }));
        }
        let originals = record
            .filter(|r| r.interface == self.interface && r.dir == dir)
            .map(|r| r.originals.clone())
            .unwrap_or_default();
        let created = match record {
            Some(r) if created.is_empty() => r.created.clone(),
            _ => created,
        };
        self.created.extend(created.iter().cloned());
        let cgroup = IoCgroup::new(self.interface, dir).with_originals(originals);
        if cgroup.weight()?.is_none() {
            return Err(IoError::Unsupported {
                path: cgroup.dir().join(self.interface.weight_file()),
                why: "the cgroup has no weight to set",
            }
            .into());
        }
        let mut io = TenantIo::new(cgroup, created, self.device.dev());
        let cap = self.configured_cap(id);
        if cap.is_some() || !io.cgroup.originals().caps.is_empty() {
            if let Err(e) = io.apply_cap(self.device.dev(), cap, self.timeout, self.dry_run) {
                self.fail(Some(id), e);
            }
        }
        Ok(io)
    }

    /// Directories a crashed run created, to remove at exit with this run's.
    pub(crate) fn keep_created(&mut self, created: &[PathBuf]) {
        self.created.extend(created.iter().cloned());
    }

    /// Notes that `id`'s I/O is not managed, and why.
    pub(crate) fn not_managed(&mut self, id: TenantId, why: String) {
        self.unmanaged.insert(id, why);
    }

    /// `id` is no longer managed: no note of its I/O (its configured caps stay, for when it
    /// comes back).
    pub(crate) fn forget(&mut self, id: TenantId) {
        self.unmanaged.remove(&id);
    }

    /// Gives the scheduler back, removes the kept copy and the blkio directories memtide
    /// created (those still holding cgroups stay).
    pub(crate) fn finish(&mut self) -> Result<(), LinuxError> {
        let mut created: Vec<&PathBuf> = self.created.iter().collect();
        created.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in created {
            let _ = std::fs::remove_dir(d);
        }
        self.created.clear();
        if let Some(guard) = &mut self.scheduler {
            guard.restore()?;
        }
        self.scheduler = None;
        if let (Some(path), false) = (&self.saved, self.dry_run) {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(LinuxError::Disk(DiskError::Saved {
                        path: path.display().to_string(),
                        error: e.to_string(),
                    }))
                }
            }
        }
        Ok(())
    }
}

/// The v1 blkio hierarchy, from `<root>/proc/self/mountinfo`.
fn blkio_hierarchy(root: &Path) -> Result<MemoryHierarchy, LinuxError> {
    let path = root.join("proc/self/mountinfo");
    let mounts = parse_mountinfo(&path, &read_text(&path)?)?;
    let mount = mounts
        .into_iter()
        .find(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "blkio"))
        .ok_or_else(|| {
            LinuxError::Disk(DiskError::NoBlkio {
                mountinfo: path.display().to_string(),
            })
        })?;
    let point = mount
        .mount_point
        .strip_prefix("/")
        .unwrap_or(&mount.mount_point);
    Ok(MemoryHierarchy {
        version: CgroupVersion::V1,
        mount: root.join(point),
        mount_root: mount.root,
        own_cgroup: String::new(),
    })
}

/// Writes back the scheduler a crashed run kept in `path`, if any, on the device it names
/// (when that device is still there and runs another).
fn give_back_saved(sysfs: &Path, path: &Path, timeout: Duration) -> Result<(), LinuxError> {
    let saved_error = |e: String| {
        LinuxError::Disk(DiskError::Saved {
            path: path.display().to_string(),
            error: e,
        })
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(saved_error(e.to_string())),
    };
    let saved: SavedScheduler =
        serde_json::from_str(&text).map_err(|e| saved_error(e.to_string()))?;
    if let Ok(device) = BlockDevice::by_name(sysfs, &saved.device) {
        if device.scheduler()?.active.as_deref() != Some(saved.scheduler.as_str()) {
            let file = sysfs
                .join("block")
                .join(device.name())
                .join("queue/scheduler");
            write_bounded(&file, &saved.scheduler, timeout)?;
        }
    }
    std::fs::remove_file(path).map_err(|e| saved_error(e.to_string()))
}

fn store_saved(path: &Path, saved: &SavedScheduler) -> Result<(), LinuxError> {
    crate::host::saved::store(path, saved).map_err(|error| {
        LinuxError::Disk(DiskError::Saved {
            path: path.display().to_string(),
            error,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::blkio::tests::fake_blkio;
    use crate::host::io::Disk;
    use crate::host::{HostOptions, LinuxHost, Origin, Placement};
    use crate::io_cgroup::DevNum;
    use memtide_controller::{Host, World};
    use memtide_model::{
        Bytes, Decision, DiskIo, DiskNote, DiskSpec, Pages, ReclamationState, TenantAction,
        TenantSpec,
    };
    use std::fs;

    const LOOP0: DevNum = DevNum { major: 7, minor: 0 };
    const TIMEOUT: Duration = Duration::from_secs(5);

    /// A fake v1 host under `root`: /proc (meminfo, a mountinfo with the blkio hierarchy at
    /// /blkio), the memory cgroup `cg/t` holding process 4242, its blkio cgroup `blkio/t`
    /// (unless `blkio`), and `loop0` (7:0) under `scheduler` in sysfs.
    fn fake_host(root: &Path, blkio: bool, scheduler: &str) -> LinuxHost {
        fs::create_dir_all(root.join("proc/self")).unwrap();
        fs::write(
            root.join("proc/meminfo"),
            "MemTotal: 8388608 kB\nMemFree: 4194304 kB\nMemAvailable: 6291456 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
        )
        .unwrap();
        fs::write(
            root.join("proc/self/mountinfo"),
            "35 31 0:32 / /cg rw,relatime - cgroup cgroup rw,memory\n\
             38 31 0:35 / /blkio rw,relatime - cgroup cgroup rw,blkio\n",
        )
        .unwrap();
        crate::fs::cgroup_v1::tests::fake_v1(&root.join("cg/t"), true);
        fs::write(root.join("cg/t/cgroup.procs"), "4242\n").unwrap();
        if blkio {
            fake_blkio(&root.join("blkio/t"));
        }
        let dev = root.join("sys/block/loop0");
        fs::create_dir_all(dev.join("queue")).unwrap();
        fs::write(dev.join("dev"), "7:0\n").unwrap();
        fs::write(dev.join("queue/scheduler"), scheduler).unwrap();
        stat(root, 1000, 500, 1000, 1500);
        host_on(root)
    }

    /// A host over the fake tree `fake_host` made under `root`.
    fn host_on(root: &Path) -> LinuxHost {
        let hierarchy = MemoryHierarchy::new(CgroupVersion::V1, root.join("cg"), "/".into());
        LinuxHost::new(
            hierarchy,
            HostOptions {
                proc_root: root.to_path_buf(),
                write_timeout: TIMEOUT,
                dry_run: false,
                log_dir: None,
                rescue_pressure: 10.0,
            },
        )
        .unwrap()
    }

    /// loop0's stat with these reads and writes and their ticks (ms).
    fn stat(root: &Path, reads: u64, read_ms: u64, writes: u64, write_ms: u64) {
        fs::write(
            root.join("sys/block/loop0/stat"),
            format!("{reads} 0 0 {read_ms} {writes} 0 0 {write_ms} 0 0 0\n"),
        )
        .unwrap();
    }

    /// The tenant's BFQ counters: `writes` 4 KiB writes on loop0.
    fn did(root: &Path, writes: u64) {
        let dir = root.join("blkio/t");
        fs::write(
            dir.join("blkio.bfq.io_serviced"),
            format!("7:0 Read 0\n7:0 Write {writes}\nTotal {writes}\n"),
        )
        .unwrap();
        fs::write(
            dir.join("blkio.bfq.io_service_bytes"),
            format!(
                "7:0 Read 0\n7:0 Write {}\nTotal {}\n",
                writes * 4096,
                writes * 4096
            ),
        )
        .unwrap();
    }

    /// The disk taken over under `options` on the host `fake_host` made under `root`.
    fn take_over(host: &LinuxHost, root: &Path, options: &IoOptions) -> Result<Disk, LinuxError> {
        Disk::take_over(root, host.hierarchy(), options, TIMEOUT, false)
    }

    /// `host` with the disk taken over under `options(root)`.
    fn with_disk(host: LinuxHost, root: &Path) -> LinuxHost {
        let disk = take_over(&host, root, &options(root)).unwrap();
        host.with(disk)
    }

    fn shared(host: &LinuxHost) -> &IoHost {
        host.actuator::<Disk>().unwrap().shared().unwrap()
    }

    fn options(root: &Path) -> IoOptions {
        IoOptions {
            device: "loop0".into(),
            bfq: true,
            saved: Some(root.join("state/io.json")),
        }
    }

    fn spec() -> TenantSpec {
        TenantSpec {
            disk: Some(DiskSpec {
                weight: 100,
                latency_target_us: Some(5000),
            }),
            ..TenantSpec::new(TenantId(0), "t", Pages::from_mib(16), Pages::from_mib(1024))
        }
    }

    fn adopt(host: &mut LinuxHost, record: Option<&crate::host::TenantRecord>) {
        let placement = Placement {
            cgroup: "/t".into(),
            launch: None,
            adapter: None,
            isolated: false,
            subtree: false,
        };
        host.attach(TenantId(0), &spec(), &placement, record)
            .unwrap();
    }

    fn weigh(host: &mut LinuxHost, weight: u32, was: u32) {
        let mut a = TenantAction::none(TenantId(0), ReclamationState::High);
        a.reason.disk = Some(DiskNote {
            weight,
            was: Some(was),
            base: 100,
            boost: 0,
            latency_us: None,
            target_us: None,
        });
        host.apply(&Decision {
            now: Duration::ZERO,
            memory: memtide_model::ResourceState {
                resource: memtide_model::Resource::Memory,
                state: ReclamationState::High,
                budget: Pages::ZERO,
            },
            sharing: None,
            actions: vec![a],
        })
        .unwrap();
    }

    fn disk(host: &mut LinuxHost) -> Option<DiskIo> {
        let obs = host.observe().unwrap();
        obs.tenants[0].levers.disk.as_deref().copied()
    }

    fn read(path: PathBuf) -> String {
        fs::read_to_string(path).unwrap()
    }

    #[test]
    fn a_tenant_s_io_is_observed_as_deltas_with_the_device_s_await_weighted_and_given_back() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mut host = with_disk(fake_host(root, true, "none [bfq]\n"), root);
        assert_eq!(shared(&host).interface(), IoInterface::V1Bfq);
        assert!(root.join("state/io.json").is_file(), "scheduler kept first");
        did(root, 1000);
        adopt(&mut host, None);

        // First observation: no difference yet.
        let first = disk(&mut host).unwrap();
        assert_eq!((first.ops, first.latency_us), (0, None));
        assert_eq!(first.weight, Some(100));
        // 300 more writes; the device did 1000 reads and writes in 3000 ms more: 3 ms each.
        did(root, 1300);
        stat(root, 1500, 1500, 1500, 3500);
        let io = disk(&mut host).unwrap();
        assert_eq!(io.ops, 300);
        assert_eq!(io.bytes, Bytes(300 * 4096));
        assert_eq!(io.latency_us, Some(3000.0));
        assert_eq!((io.syncs, io.sync_latency_us), (None, None));
        // No I/O from the tenant: no latency, though the device was busy.
        stat(root, 2000, 2500, 1500, 3500);
        let idle = disk(&mut host).unwrap();
        assert_eq!((idle.ops, idle.latency_us), (0, None));

        weigh(&mut host, 400, 100);
        assert_eq!(read(root.join("blkio/t/blkio.bfq.weight")), "400");
        let record = host.records().pop().unwrap().io.unwrap();
        assert_eq!(
            record.originals.weight,
            Some(100),
            "the state file keeps 100"
        );
        assert_eq!(record.dir, root.join("blkio/t"));

        host.release(TenantId(0)).unwrap();
        assert_eq!(read(root.join("blkio/t/blkio.bfq.weight")), "100");
        assert!(host.release_all().is_empty());
        assert!(
            !root.join("state/io.json").exists(),
            "the kept scheduler is removed"
        );
    }

    #[test]
    fn configured_caps_are_written_at_attach_reported_and_given_back_when_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mut host = with_disk(fake_host(root, true, "none [bfq]\n"), root);
        let cap = IoCap {
            write_iops: Some(50),
            read_iops: Some(200),
            ..IoCap::NONE
        };
        host.actuator_mut::<Disk>()
            .unwrap()
            .set_cap(TenantId(0), Some(cap))
            .unwrap();
        adopt(&mut host, None);
        let file = root.join("blkio/t/blkio.throttle.write_iops_device");
        assert_eq!(read(file.clone()), "7:0 50");
        assert_eq!(disk(&mut host).unwrap().cap_iops, Some(250));
        let record = host.records().pop().unwrap().io.unwrap();
        assert_eq!(record.originals.caps, vec![(LOOP0, IoCap::NONE)]);
        // A reload without caps gives the originals back at once.
        host.actuator_mut::<Disk>()
            .unwrap()
            .set_cap(TenantId(0), None)
            .unwrap();
        assert_eq!(read(file), "7:0 0");
    }

    #[test]
    fn an_adopted_tenant_without_a_blkio_cgroup_runs_with_its_io_unmanaged() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mut host = with_disk(fake_host(root, false, "none [bfq]\n"), root);
        adopt(&mut host, None);
        assert!(host.tenant(TenantId(0)).is_some(), "the memory side runs");
        let why = shared(&host).unmanaged(TenantId(0)).unwrap();
        let want = format!(
            "there is no blkio cgroup at {}",
            root.join("blkio/t").display()
        );
        assert_eq!(why, want);
        assert_eq!(disk(&mut host), None);
    }

    #[test]
    fn a_restarted_daemon_gives_back_the_weight_its_record_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mut host = with_disk(fake_host(root, true, "none [bfq]\n"), root);
        adopt(&mut host, None);
        weigh(&mut host, 800, 100);
        let record = host.records().pop().unwrap();
        drop(host); // SIGKILL: the weight stays 800.
        assert_eq!(read(root.join("blkio/t/blkio.bfq.weight")), "800");

        let mut host = with_disk(host_on(root), root);
        adopt(&mut host, Some(&record));
        assert_eq!(disk(&mut host).unwrap().weight, Some(800));
        host.release(TenantId(0)).unwrap();
        assert_eq!(read(root.join("blkio/t/blkio.bfq.weight")), "100");
    }

    #[test]
    fn with_disk_io_off_a_record_s_weight_is_still_given_back_and_not_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mut host = with_disk(fake_host(root, true, "none [bfq]\n"), root);
        adopt(&mut host, None);
        weigh(&mut host, 800, 100);
        let record = host.records().pop().unwrap();
        drop(host); // SIGKILL; the next run has [io] off.

        let mut host = host_on(root).with(Disk::off(TIMEOUT, false));
        adopt(&mut host, Some(&record));
        assert_eq!(read(root.join("blkio/t/blkio.bfq.weight")), "100");
        assert_eq!(disk(&mut host), None, "its I/O is not managed");
        assert_eq!(host.records().pop().unwrap().io, None);
        assert!(host.actuator::<Disk>().unwrap().shared().is_none());
    }

    #[test]
    fn keeping_a_scheduler_other_than_bfq_on_v1_is_refused_naming_the_device() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let host = fake_host(root, true, "[mq-deadline] bfq\n");
        let keep = IoOptions {
            bfq: false,
            ..options(root)
        };
        let msg = take_over(&host, root, &keep).unwrap_err().to_string();
        assert!(
            msg.contains("device loop0 runs the mq-deadline scheduler"),
            "{msg}"
        );
        let none = IoOptions {
            device: "sdz".into(),
            ..options(root)
        };
        let msg = take_over(&host, root, &none).unwrap_err().to_string();
        assert!(msg.contains("no block device \"sdz\""), "{msg}");
    }

    #[test]
    fn a_crashed_run_s_kept_scheduler_is_written_back_before_anything_else() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_host(root, true, "none [bfq]\n");
        let saved = root.join("io.json");
        store_saved(
            &saved,
            &SavedScheduler {
                device: "loop0".into(),
                scheduler: "mq-deadline".into(),
            },
        )
        .unwrap();
        give_back_saved(&root.join("sys"), &saved, TIMEOUT).unwrap();
        assert_eq!(
            read(root.join("sys/block/loop0/queue/scheduler")),
            "mq-deadline"
        );
        assert!(!saved.exists());
        // Nothing kept: nothing to do.
        give_back_saved(&root.join("sys"), &saved, TIMEOUT).unwrap();
    }

    #[test]
    fn a_launched_tenant_s_blkio_cgroup_is_created_with_its_parents_and_removed_at_exit() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let host = fake_host(root, true, "none [bfq]\n");
        let mut io =
            IoHost::take_over(root, host.hierarchy(), &options(root), TIMEOUT, false).unwrap();
        let (dir, created) = io.create_for_launch("/a/b/t").unwrap().unwrap();
        assert_eq!(dir, root.join("blkio/a/b/t"));
        assert_eq!(
            created,
            vec![root.join("blkio/a"), root.join("blkio/a/b"), dir.clone()]
        );
        assert!(dir.is_dir());
        io.finish().unwrap();
        assert!(!root.join("blkio/a").exists());
        assert!(root.join("blkio/t").is_dir(), "not memtide's: stays");
    }

    #[test]
    fn an_origin_launched_record_is_not_needed_to_read_an_adopted_one() {
        // A record written before disk I/O existed has no `io`; one with it round-trips.
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mut host = with_disk(fake_host(root, true, "none [bfq]\n"), root);
        adopt(&mut host, None);
        let record = host.records().pop().unwrap();
        assert_eq!(record.origin, Origin::Adopted);
        let text = serde_json::to_string(&record).unwrap();
        let back: crate::host::TenantRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, record);
        let mut old: serde_json::Value = serde_json::from_str(&text).unwrap();
        old.as_object_mut().unwrap().remove("io");
        let old: crate::host::TenantRecord = serde_json::from_value(old).unwrap();
        assert_eq!(old.io, None);
    }
}
