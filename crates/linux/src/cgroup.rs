//! One memory cgroup as the Linux host sees it, over v1 or v2: a sample of everything observed, the limit settings to record and restore, and limit writes ordered so the kernel accepts them.
//!
//! `MemoryCgroup` reads by path; `CgroupReader` is the same sample for a cgroup read every
//! tick, through descriptors kept open (`fs::kept`) and one buffer.

use crate::fs::kept::{Extent, KeptDir, KeptFile};
use crate::fs::read::{as_text, parse_u64};
use crate::fs::write::write_bounded;
use crate::fs::{cgroup_v1 as v1, cgroup_v2 as v2, procs, FsError};
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::fs::hierarchy::CgroupVersion;
pub use crate::fs::limit::Limit;
pub use crate::fs::pressure::{Pressure, PsiLine};

/// A memory cgroup directory and the interface it speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryCgroup {
    version: CgroupVersion,
    dir: PathBuf,
}

/// One reading of a cgroup. Sizes in bytes; counters cumulative since the cgroup was created.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CgroupSample {
    /// Memory charged: v1 memory.usage_in_bytes, v2 memory.current.
    pub usage: Bytes,
    /// The limit in force: v1 memory.limit_in_bytes, v2 the lower of memory.high and memory.max.
    pub limit: Limit,
    /// Anonymous memory: v1 `total_rss`, v2 `anon`.
    pub anon: Option<Bytes>,
    /// Page cache: v1 `total_cache`, v2 `file`.
    pub file: Option<Bytes>,
    /// tmpfs and shared memory, part of `file` but backed by swap like anonymous memory: v1
    /// `total_shmem`, v2 `shmem`.
    pub shmem: Option<Bytes>,
    /// Swapped out: v1 `total_swap` (or memsw usage − usage), v2 memory.swap.current.
    pub swap: Option<Bytes>,
    pub unevictable: Option<Bytes>,
    /// Refaults of anonymous pages (events).
    pub refault_anon: Option<u64>,
    /// Refaults of file pages (events).
    pub refault_file: Option<u64>,
    pub major_faults: Option<u64>,
    /// v2 memory.pressure; `None` on v1, which has no per-cgroup PSI.
    pub pressure: Option<Pressure>,
    /// The kernel accounts this cgroup's swap (v1: memsw files exist; v2: memory.swap.max does).
    pub swap_accounting: bool,
    /// v2 memory.swap.max: the most swap the cgroup may use (`Limit::Max`: unbounded); `None`
    /// on v1 or without swap accounting (unknown, not zero).
    #[serde(default)]
    pub swap_max: Option<Limit>,
    /// v2: the least swap the memory.swap.max of the cgroups above leaves it (limit − usage),
    /// among those [`CgroupReader::watch_swap_above`] watches; `None` when none bounds it.
    #[serde(default)]
    pub swap_room_above: Option<Bytes>,
    /// v2 memory.events `high`: how often the cgroup was throttled and reclaimed for being
    /// over memory.high (cumulative); `None` on v1 or where the kernel does not count it.
    #[serde(default)]
    pub events_high: Option<u64>,
}

/// The limit-related settings of a cgroup, recorded before memtide changes them and written
/// back when it lets go.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq, Eq)]
pub enum LimitSettings {
    V1 {
        limit: Limit,
        soft_limit: Limit,
        /// `None` without swap accounting.
        memsw_limit: Option<Limit>,
        swappiness: Option<u64>,
    },
    V2 {
        high: Limit,
        max: Limit,
        low: Limit,
        min: Limit,
    },
}

impl LimitSettings {
    /// The interface these settings were read from.
    pub fn version(&self) -> CgroupVersion {
        match self {
            LimitSettings::V1 { .. } => CgroupVersion::V1,
            LimitSettings::V2 { .. } => CgroupVersion::V2,
        }
    }
}

const V1_LIMIT: &str = "memory.limit_in_bytes";
const V1_SOFT_LIMIT: &str = "memory.soft_limit_in_bytes";
const V1_MEMSW_LIMIT: &str = "memory.memsw.limit_in_bytes";
const V1_SWAPPINESS: &str = "memory.swappiness";
const V2_HIGH: &str = "memory.high";
const V2_MAX: &str = "memory.max";
const V2_LOW: &str = "memory.low";
const V2_MIN: &str = "memory.min";
const V2_RECLAIM: &str = "memory.reclaim";
const V2_SWAP_MAX: &str = "memory.swap.max";
const V2_EVENTS: &str = "memory.events";

impl MemoryCgroup {
    pub fn new(version: CgroupVersion, dir: PathBuf) -> Self {
        MemoryCgroup { version, dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// True while the cgroup directory exists.
    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// One reading of everything the host observes (by path; see [`CgroupReader`] for a
    /// cgroup read again and again).
    pub fn sample(&self) -> Result<CgroupSample, FsError> {
        CgroupReader::new(self).sample()
    }

    /// The limit-related settings in force now, to record and later restore.
    pub fn settings(&self) -> Result<LimitSettings, FsError> {
        let d = &self.dir;
        Ok(match self.version {
            CgroupVersion::V1 => LimitSettings::V1 {
                limit: v1::read_limit(d)?,
                soft_limit: v1::read_soft_limit(d)?,
                memsw_limit: v1::read_memsw_limit(d)?,
                swappiness: v1::read_swappiness(d)?,
            },
            CgroupVersion::V2 => LimitSettings::V2 {
                high: v2::read_high(d)?,
                max: v2::read_max(d)?,
                low: v2::read_low(d)?,
                min: v2::read_min(d)?,
            },
        })
    }

    /// Writes back recorded settings, skipping those already in force. On v1 the memory and
    /// memory+swap limits are ordered so that memsw >= limit holds after every write: memsw
    /// first when it rises (or stays), the limit first when memsw falls.
    pub fn restore(&self, s: &LimitSettings, timeout: Duration) -> Result<(), FsError> {
        match (self.version, *s) {
            (
                CgroupVersion::V1,
                LimitSettings::V1 {
                    limit,
                    soft_limit,
                    memsw_limit,
                    swappiness,
                },
            ) => {
                let d = &self.dir;
                let limit_now = v1::read_limit(d)?;
                let write_limit = || {
                    if limit_now == limit {
                        Ok(())
                    } else {
                        self.write(V1_LIMIT, limit.to_v1_value(), timeout)
                    }
                };
                let memsw_write = |memsw: Limit| -> Result<(), FsError> {
                    self.write(V1_MEMSW_LIMIT, memsw.to_v1_value(), timeout)
                };
                match v1_restore_order(memsw_limit, v1::read_memsw_limit(d)?) {
                    V1Order::MemswFirst(memsw) => {
                        memsw_write(memsw)?;
                        write_limit()?;
                    }
                    V1Order::LimitFirst(memsw) => {
                        write_limit()?;
                        memsw_write(memsw)?;
                    }
                    V1Order::LimitOnly => write_limit()?,
                }
                if v1::read_soft_limit(d)? != soft_limit {
                    self.write(V1_SOFT_LIMIT, soft_limit.to_v1_value(), timeout)?;
                }
                if let Some(swappiness) = swappiness {
                    if v1::read_swappiness(d)? != Some(swappiness) {
                        self.write(V1_SWAPPINESS, swappiness.to_string(), timeout)?;
                    }
                }
                Ok(())
            }
            (
                CgroupVersion::V2,
                LimitSettings::V2 {
                    high,
                    max,
                    low,
                    min,
                },
            ) => {
                let d = &self.dir;
                let fields = [
                    (V2_HIGH, high, v2::read_high(d)?),
                    (V2_MAX, max, v2::read_max(d)?),
                    (V2_LOW, low, v2::read_low(d)?),
                    (V2_MIN, min, v2::read_min(d)?),
                ];
                for (name, want, now) in fields {
                    if want != now {
                        self.write(name, want.to_v2_value(), timeout)?;
                    }
                }
                Ok(())
            }
            (version, _) => Err(FsError::Write {
                path: self.dir.clone(),
                value: format!("{s:?}"),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "settings recorded from a cgroup {:?} cannot be restored on a {version:?} cgroup",
                        s.version()
                    ),
                ),
            }),
        }
    }

    /// Sets the enforced limit. v1: memory.limit_in_bytes; when swap accounting exists and the
    /// memsw limit is below the new limit, memsw is raised to it first (the kernel refuses a
    /// limit above memsw); memsw is never lowered here, so on a lower limit only the limit is
    /// written. v2: memory.high (memory.max stays as recorded: it is the hard fence).
    /// `Limit::Max` writes `-1` (v1) or `max` (v2).
    pub fn set_limit(&self, limit: Limit, timeout: Duration) -> Result<(), FsError> {
        let memsw = match self.version {
            CgroupVersion::V1 => v1::read_memsw_limit(&self.dir)?,
            CgroupVersion::V2 => None,
        };
        self.set_limit_given(limit, memsw, timeout)
    }

    /// [`MemoryCgroup::set_limit`] with v1's memsw limit in force (`None` without swap
    /// accounting) already read.
    fn set_limit_given(
        &self,
        limit: Limit,
        memsw: Option<Limit>,
        timeout: Duration,
    ) -> Result<(), FsError> {
        match self.version {
            CgroupVersion::V1 => {
                if let Some(memsw) = memsw {
                    if memsw < limit {
                        self.write(V1_MEMSW_LIMIT, limit.to_v1_value(), timeout)?;
                    }
                }
                self.write(V1_LIMIT, limit.to_v1_value(), timeout)
            }
            CgroupVersion::V2 => self.write(V2_HIGH, limit.to_v2_value(), timeout),
        }
    }

    /// Asks the kernel to reclaim `bytes` from the cgroup once (v2 memory.reclaim), leaving no
    /// limit behind. `Ok(false)` when unsupported: v1, or a v2 kernel before 5.19. A partial
    /// reclaim is `FsError::Busy`.
    pub fn reclaim(&self, bytes: Bytes, timeout: Duration) -> Result<bool, FsError> {
        match self.version {
            CgroupVersion::V1 => Ok(false),
            CgroupVersion::V2 => {
                if !v2::has_reclaim(&self.dir) {
                    if !self.exists() {
                        return Err(FsError::Vanished {
                            path: self.dir.join(V2_RECLAIM),
                        });
                    }
                    return Ok(false);
                }
                if bytes == Bytes::ZERO {
                    return Ok(true);
                }
                self.write(V2_RECLAIM, bytes.0.to_string(), timeout)?;
                Ok(true)
            }
        }
    }

    /// The processes in this cgroup (cgroup.procs; not those in child cgroups).
    pub fn pids(&self) -> Result<Vec<u32>, FsError> {
        procs::read_procs(&self.dir)
    }

    /// The processes in this cgroup and every cgroup below it (see
    /// [`procs::read_subtree_procs`]).
    pub fn subtree_pids(&self) -> Result<Vec<u32>, FsError> {
        let mut pids = Vec::new();
        procs::read_subtree_procs(&self.dir, &mut pids)?;
        Ok(pids)
    }

    /// Cumulative OOM kills: v1 memory.oom_control `oom_kill`, v2 memory.events `oom_kill`;
    /// `None` on kernels that do not count them.
    pub fn oom_kills(&self) -> Result<Option<u64>, FsError> {
        match self.version {
            CgroupVersion::V1 => Ok(v1::read_oom_control(&self.dir)?.oom_kill),
            CgroupVersion::V2 => Ok(v2::read_events(&self.dir)?.oom_kill),
        }
    }

    fn write(&self, name: &str, value: String, timeout: Duration) -> Result<(), FsError> {
        write_bounded(&self.dir.join(name), &value, timeout)
    }
}

/// A memory cgroup read every tick: the sampled files kept open (one `pread` each, see
/// `fs::kept`), all read into one buffer, and `cgroup.procs` opened afresh each time it is read
/// (v1 builds its pid list when the file is opened), relative to a descriptor kept on the
/// directory. Gives the same `CgroupSample` as [`MemoryCgroup::sample`], which reads through a
/// reader of its own. Whether the cgroup holds a process is mostly answered by a pidfd on one
/// it held (see [`CgroupReader::has_processes`]).
#[derive(Debug)]
pub struct CgroupReader {
    version: CgroupVersion,
    /// v1 memory.usage_in_bytes, v2 memory.current.
    usage: KeptFile,
    /// v1 memory.limit_in_bytes, v2 memory.high.
    limit: KeptFile,
    /// v2 memory.max.
    max: KeptFile,
    stat: KeptFile,
    /// v1 memory.memsw.usage_in_bytes (read only when memory.stat has no `swap`), v2
    /// memory.swap.current.
    swap: KeptFile,
    /// v2 memory.swap.max.
    swap_max: KeptFile,
    /// v2 memory.events.
    events: KeptFile,
    /// v2: memory.swap.max and memory.swap.current of the cgroups above whose swap limit was
    /// bounded when they were looked at (see [`CgroupReader::watch_swap_above`]).
    swap_above: Vec<(KeptFile, KeptFile)>,
    /// v2 memory.pressure.
    pressure: KeptFile,
    /// v1 memory.oom_control.
    oom_control: KeptFile,
    /// v1 memory.memsw.limit_in_bytes, read before each limit write.
    memsw_limit: KeptFile,
    /// The cgroup's directory, for cgroup.procs.
    dir: KeptDir,
    /// A process cgroup.procs listed at its last reading, as a pidfd.
    tracked: Option<Pidfd>,
    /// Answers of `has_processes` left before cgroup.procs is read again in any case.
    until_reread: u32,
    /// Its processes are those of every cgroup below it too (a systemd slice).
    subtree: bool,
    buf: Vec<u8>,
}

/// How many `has_processes` answers a tracked process may give before cgroup.procs is read
/// again anyway (so a cgroup whose processes all moved elsewhere is seen empty within that
/// many ticks; one whose processes exit is seen at once).
pub const PROCS_REREAD_EVERY: u32 = 10;

const PROCS: &std::ffi::CStr = c"cgroup.procs";

impl CgroupReader {
    /// A reader of `cgroup`; nothing is opened before the first reading.
    pub fn new(cgroup: &MemoryCgroup) -> CgroupReader {
        let d = &cgroup.dir;
        let (usage, limit, swap) = match cgroup.version {
            CgroupVersion::V1 => (
                "memory.usage_in_bytes",
                V1_LIMIT,
                "memory.memsw.usage_in_bytes",
            ),
            CgroupVersion::V2 => ("memory.current", V2_HIGH, "memory.swap.current"),
        };
        CgroupReader {
            version: cgroup.version,
            usage: KeptFile::new(d.join(usage)),
            limit: KeptFile::new(d.join(limit)),
            max: KeptFile::new(d.join(V2_MAX)),
            stat: KeptFile::new(d.join("memory.stat")),
            swap: KeptFile::new(d.join(swap)),
            swap_max: KeptFile::new(d.join(V2_SWAP_MAX)),
            events: KeptFile::new(d.join(V2_EVENTS)),
            swap_above: Vec::new(),
            pressure: KeptFile::new(d.join("memory.pressure")),
            oom_control: KeptFile::new(d.join("memory.oom_control")),
            memsw_limit: KeptFile::new(d.join(V1_MEMSW_LIMIT)),
            dir: KeptDir::new(d.clone()),
            tracked: None,
            until_reread: 0,
            subtree: false,
            buf: Vec::new(),
        }
    }

    /// From now on, the cgroup's processes are those of every cgroup below it too (a systemd
    /// slice, whose services hold its processes): `pids` and `has_processes` walk the subtree
    /// by path, reading at most `procs::SUBTREE_CGROUPS` cgroups.
    pub fn read_subtree(&mut self) {
        self.subtree = true;
    }

    /// One reading of everything the host observes. v1: memory.stat printing `swap` means the
    /// kernel accounts swap, and memsw usage is read only when it does not print it.
    pub fn sample(&mut self) -> Result<CgroupSample, FsError> {
        match self.version {
            CgroupVersion::V1 => self.sample_v1(),
            CgroupVersion::V2 => self.sample_v2(),
        }
    }

    fn sample_v1(&mut self) -> Result<CgroupSample, FsError> {
        let usage = Bytes(read_u64(&mut self.usage, &mut self.buf)?);
        let text = self.limit.read(&mut self.buf)?;
        let limit = Limit::parse_v1(self.limit.path(), V1_LIMIT, text)?;
        let text = self.stat.read(&mut self.buf)?;
        let stat = v1::parse_stat(self.stat.path(), text)?;
        let (swap, swap_accounting) = match stat.swap {
            Some(swap) => (Some(swap), true),
            None => {
                let memsw = read_optional_u64(&mut self.swap, &mut self.buf)?.map(Bytes);
                (memsw.map(|m| m.saturating_sub(usage)), memsw.is_some())
            }
        };
        Ok(CgroupSample {
            usage,
            limit,
            anon: stat.rss,
            file: stat.cache,
            shmem: stat.shmem,
            swap,
            unevictable: stat.unevictable,
            refault_anon: stat.workingset_refault_anon,
            refault_file: stat.workingset_refault_file,
            major_faults: stat.pgmajfault,
            pressure: None,
            swap_accounting,
            swap_max: None,
            swap_room_above: None,
            events_high: None,
        })
    }

    fn sample_v2(&mut self) -> Result<CgroupSample, FsError> {
        let usage = Bytes(read_u64(&mut self.usage, &mut self.buf)?);
        let text = self.limit.read(&mut self.buf)?;
        let high = Limit::parse_v2(self.limit.path(), V2_HIGH, text)?;
        let text = self.max.read(&mut self.buf)?;
        let max = Limit::parse_v2(self.max.path(), V2_MAX, text)?;
        let text = self.stat.read(&mut self.buf)?;
        let stat = v2::parse_stat(self.stat.path(), text)?;
        // memory.swap.current and memory.swap.max exist together, with swap accounting.
        let swap = read_optional_u64(&mut self.swap, &mut self.buf)?.map(Bytes);
        let swap_max = match self.swap_max.read_optional_str(&mut self.buf)? {
            Some(text) => Some(Limit::parse_v2(self.swap_max.path(), V2_SWAP_MAX, text)?),
            None => None,
        };
        let swap_room_above = self.swap_room_above()?;
        let events_high = match self.events.read_optional_str(&mut self.buf)? {
            Some(text) => v2::parse_events(self.events.path(), text)?.high,
            None => None,
        };
        let pressure = match self.pressure.read_optional_str(&mut self.buf)? {
            Some(text) => Some(crate::fs::pressure::parse_pressure(
                self.pressure.path(),
                text,
            )?),
            None => None,
        };
        Ok(CgroupSample {
            usage,
            limit: high.min(max),
            anon: stat.anon,
            file: stat.file,
            shmem: stat.shmem,
            swap,
            unevictable: stat.unevictable,
            refault_anon: stat.workingset_refault_anon,
            refault_file: stat.workingset_refault_file,
            major_faults: stat.pgmajfault,
            pressure,
            swap_accounting: swap.is_some(),
            swap_max,
            swap_room_above,
            events_high,
        })
    }

    /// v2: watches the swap limit of every cgroup from this one's parent up to `mount` (the
    /// hierarchy's mount point, whose root cgroup has no swap limit) that bounds it now, so
    /// each reading knows the swap they leave it (`CgroupSample::swap_room_above`), at two
    /// kept files per bounding cgroup and none for the others. A cgroup above whose limit is
    /// `max` now is not read again: one set later goes unseen until the tenant is adopted
    /// again. One that cannot be read is left out.
    pub fn watch_swap_above(&mut self, mount: &Path) {
        self.swap_above.clear();
        if self.version != CgroupVersion::V2 {
            return;
        }
        let mut dir = self.dir.path().parent();
        while let Some(d) = dir.filter(|d| d.starts_with(mount) && *d != mount) {
            if let Ok(Some(Limit::Bytes(_))) = v2::read_swap_max(d) {
                self.swap_above.push((
                    KeptFile::new(d.join(V2_SWAP_MAX)),
                    KeptFile::new(d.join("memory.swap.current")),
                ));
            }
            dir = d.parent();
        }
    }

    /// The least swap the watched cgroups above leave (their limit less their usage; all of
    /// it taken when the usage is unknown); `None` when none bounds it now.
    fn swap_room_above(&mut self) -> Result<Option<Bytes>, FsError> {
        let mut least: Option<Bytes> = None;
        for (max, current) in &mut self.swap_above {
            let Some(text) = max.read_optional_str(&mut self.buf)? else {
                continue;
            };
            let Limit::Bytes(limit) = Limit::parse_v2(max.path(), V2_SWAP_MAX, text)? else {
                continue;
            };
            let used = read_optional_u64(current, &mut self.buf)?.map(Bytes);
            let room = limit.saturating_sub(used.unwrap_or(limit));
            least = Some(least.map_or(room, |l| l.min(room)));
        }
        Ok(least)
    }

    /// The processes in this cgroup (not those in child cgroups), into `out` (cleared first).
    pub fn pids(&mut self, out: &mut Vec<u32>) -> Result<(), FsError> {
        if self.subtree {
            return procs::read_subtree_procs(self.dir.path(), out);
        }
        out.clear();
        self.read_procs(Extent::Whole)?;
        let path = || self.dir.path().join("cgroup.procs");
        let text = as_text(&path(), &self.buf)?;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            out.push(line.parse::<u32>().map_err(|_| FsError::Parse {
                path: path(),
                field: "pid".to_string(),
                value: line.to_string(),
                expected: "a process id",
            })?);
        }
        Ok(())
    }

    /// The inode of the cgroup's directory as the last reading of cgroup.procs found it: a
    /// cgroup removed and made again under the same path (a service restarted) has another.
    pub fn identity(&self) -> Option<u64> {
        self.dir.identity()
    }

    /// True when the cgroup holds a process (not counting child cgroups). The first process
    /// cgroup.procs lists is tracked through a pidfd; while it has not exited, the answer is
    /// yes without reading cgroup.procs, for [`PROCS_REREAD_EVERY`] answers, after which (or
    /// once it exits, or where pidfds are unavailable) cgroup.procs is read again.
    pub fn has_processes(&mut self) -> Result<bool, FsError> {
        if self.subtree {
            let mut pids = Vec::new();
            procs::read_subtree_procs(self.dir.path(), &mut pids)?;
            return Ok(!pids.is_empty());
        }
        if self.until_reread > 0 && self.tracked.as_ref().is_some_and(|p| !p.exited()) {
            self.until_reread -= 1;
            return Ok(true);
        }
        self.tracked = None;
        self.until_reread = 0;
        self.read_procs(Extent::FirstRead)?;
        let path = || self.dir.path().join("cgroup.procs");
        let text = as_text(&path(), &self.buf)?;
        let Some(first) = text.split_ascii_whitespace().next() else {
            return Ok(false);
        };
        let pid = first.parse::<u32>().map_err(|_| FsError::Parse {
            path: path(),
            field: "pid".to_string(),
            value: first.to_string(),
            expected: "a process id",
        })?;
        self.tracked = Pidfd::open(pid);
        if self.tracked.is_some() {
            self.until_reread = PROCS_REREAD_EVERY - 1;
        }
        Ok(true)
    }

    fn read_procs(&mut self, extent: Extent) -> Result<(), FsError> {
        if self.dir.read(PROCS, &mut self.buf, extent)? {
            Ok(())
        } else {
            Err(FsError::Read {
                path: self.dir.path().join("cgroup.procs"),
                source: io::Error::from(io::ErrorKind::NotFound),
            })
        }
    }

    /// Sets the enforced limit as [`MemoryCgroup::set_limit`] does, reading v1's memsw limit
    /// through the kept file.
    pub fn set_limit(
        &mut self,
        cgroup: &MemoryCgroup,
        limit: Limit,
        timeout: Duration,
    ) -> Result<(), FsError> {
        let memsw = match cgroup.version {
            CgroupVersion::V1 => match self.memsw_limit.read_optional_str(&mut self.buf)? {
                Some(text) => Some(Limit::parse_v1(
                    self.memsw_limit.path(),
                    V1_MEMSW_LIMIT,
                    text,
                )?),
                None => None,
            },
            CgroupVersion::V2 => None,
        };
        cgroup.set_limit_given(limit, memsw, timeout)
    }

    /// v1 memory.oom_control.
    pub fn oom_control(&mut self) -> Result<v1::OomControl, FsError> {
        let text = self.oom_control.read(&mut self.buf)?;
        v1::parse_oom_control(self.oom_control.path(), text)
    }
}

/// A process watched through a pidfd (Linux 5.3+), which becomes readable when the process
/// exits, whether or not anyone has reaped it yet, and never stands for a later process that
/// reuses its pid.
#[derive(Debug)]
struct Pidfd {
    fd: std::os::fd::OwnedFd,
    _slot: crate::fs::kept::Slot,
}

impl Pidfd {
    /// `None` when the process is gone already, pidfds are unavailable, or no descriptor is
    /// left in the budget.
    fn open(pid: u32) -> Option<Pidfd> {
        use std::os::fd::FromRawFd;
        let slot = crate::fs::kept::Slot::take()?;
        let pid = libc::pid_t::try_from(pid).ok()?;
        // SAFETY: pidfd_open takes a pid and flags, no pointers.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
        Some(Pidfd {
            // SAFETY: `fd` is a new descriptor that nothing else owns.
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            _slot: slot,
        })
    }

    /// True once the process has exited (or when it cannot be told).
    fn exited(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd that we own; no waiting.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        n != 0
    }
}

/// A kept file holding one number.
fn read_u64(file: &mut KeptFile, buf: &mut Vec<u8>) -> Result<u64, FsError> {
    let text = file.read(buf)?;
    parse_u64(file.path(), file_name(file.path()), text)
}

/// A kept file holding one number, which only some kernels have.
fn read_optional_u64(file: &mut KeptFile, buf: &mut Vec<u8>) -> Result<Option<u64>, FsError> {
    match file.read_optional_str(buf)? {
        Some(text) => parse_u64(file.path(), file_name(file.path()), text).map(Some),
        None => Ok(None),
    }
}

/// The file's name as the field of a one-number file, without allocating.
fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// How a v1 restore writes the limit and memsw limit so memsw >= limit after every write,
/// given both old and new pairs satisfy it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum V1Order {
    /// memsw rises: write it first, then the limit.
    MemswFirst(Limit),
    /// memsw falls: write the limit first, then memsw.
    LimitFirst(Limit),
    /// memsw is unchanged, not recorded or not accounted now.
    LimitOnly,
}

fn v1_restore_order(memsw: Option<Limit>, memsw_now: Option<Limit>) -> V1Order {
    match (memsw, memsw_now) {
        (Some(want), Some(now)) if want > now => V1Order::MemswFirst(want),
        (Some(want), Some(now)) if want < now => V1Order::LimitFirst(want),
        _ => V1Order::LimitOnly,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::cgroup_v1::tests::fake_v1;
    use crate::fs::cgroup_v2::tests::fake_v2;
    use std::fs;

    const T: Duration = Duration::from_secs(10);

    fn mib(n: u64) -> Limit {
        Limit::Bytes(Bytes::from_mib(n))
    }

    fn contents(dir: &Path, name: &str) -> String {
        fs::read_to_string(dir.join(name)).unwrap()
    }

    fn v1_cgroup(memsw: bool) -> (tempfile::TempDir, MemoryCgroup) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("tenant");
        fake_v1(&dir, memsw);
        (tmp, MemoryCgroup::new(CgroupVersion::V1, dir))
    }

    fn v2_cgroup(swap: bool) -> (tempfile::TempDir, MemoryCgroup) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("tenant");
        fake_v2(&dir, swap);
        (tmp, MemoryCgroup::new(CgroupVersion::V2, dir))
    }

    #[test]
    fn v1_sample_uses_hierarchical_totals_and_sees_swap_accounting() {
        let (_tmp, cg) = v1_cgroup(true);
        let s = cg.sample().unwrap();
        assert_eq!(s.usage, Bytes(7516160));
        assert_eq!(s.limit, Limit::Max);
        assert_eq!(s.anon, Some(Bytes(3268608)));
        assert_eq!(s.file, Some(Bytes(7979008)));
        assert_eq!(s.swap, Some(Bytes(8192)));
        assert_eq!(s.unevictable, Some(Bytes(4096)));
        assert_eq!(s.refault_anon, Some(5));
        assert_eq!(s.refault_file, Some(1946));
        assert_eq!(s.major_faults, Some(40));
        assert_eq!(s.pressure, None);
        assert!(s.swap_accounting);
    }

    #[test]
    fn v1_swap_falls_back_to_memsw_minus_usage_and_is_none_without_accounting() {
        let (_tmp, cg) = v1_cgroup(true);
        fs::write(cg.dir().join("memory.stat"), "rss 1\ncache 2\n").unwrap();
        assert_eq!(cg.sample().unwrap().swap, Some(Bytes(7671808 - 7516160)));

        let (_tmp, cg) = v1_cgroup(false);
        fs::write(cg.dir().join("memory.stat"), "rss 1\ncache 2\n").unwrap();
        let s = cg.sample().unwrap();
        assert_eq!(s.swap, None);
        assert_eq!(s.refault_anon, None);
        assert!(!s.swap_accounting);
    }

    #[test]
    fn v2_sample_takes_the_lower_of_high_and_max_and_reads_pressure() {
        let (_tmp, cg) = v2_cgroup(true);
        let cases = [
            ("max", "max", Limit::Max),
            ("268435456", "max", mib(256)),
            ("max", "134217728", mib(128)),
            ("268435456", "134217728", mib(128)),
        ];
        for (high, max, want) in cases {
            fs::write(cg.dir().join("memory.high"), high).unwrap();
            fs::write(cg.dir().join("memory.max"), max).unwrap();
            assert_eq!(cg.sample().unwrap().limit, want, "high {high} max {max}");
        }
        let s = cg.sample().unwrap();
        assert_eq!(s.usage, Bytes(157286400));
        assert_eq!(s.anon, Some(Bytes::from_mib(100)));
        assert_eq!(s.swap, Some(Bytes(4096)));
        assert_eq!(s.refault_file, Some(11));
        assert_eq!(s.pressure.unwrap().some.total_stall_us, 1234);
        assert!(s.swap_accounting);
        assert_eq!(s.swap_max, Some(Limit::Max));
        assert_eq!(s.events_high, Some(4));
        fs::write(cg.dir().join("memory.swap.max"), "0\n").unwrap();
        assert_eq!(cg.sample().unwrap().swap_max, Some(mib(0)));

        let (_tmp, cg) = v2_cgroup(false);
        fs::remove_file(cg.dir().join("memory.events")).unwrap();
        let s = cg.sample().unwrap();
        assert_eq!(s.swap, None);
        assert!(!s.swap_accounting);
        assert_eq!(s.swap_max, None, "no swap accounting: unknown, not 0");
        assert_eq!(s.events_high, None, "no memory.events: unknown, not 0");
    }

    #[test]
    fn a_v2_readers_swap_max_and_events_are_read_again_through_kept_files() {
        let (_tmp, cg) = v2_cgroup(true);
        let mut r = CgroupReader::new(&cg);
        assert_eq!(r.sample().unwrap().events_high, Some(4));
        fs::write(cg.dir().join("memory.swap.max"), "1048576\n").unwrap();
        fs::write(cg.dir().join("memory.events"), "low 0\nhigh 90\nmax 0\n").unwrap();
        let s = r.sample().unwrap();
        assert_eq!((s.swap_max, s.events_high), (Some(mib(1)), Some(90)));
        fs::write(cg.dir().join("memory.swap.max"), "lots\n").unwrap();
        let msg = r.sample().unwrap_err().to_string();
        assert!(
            msg.contains("memory.swap.max") && msg.contains("lots"),
            "{msg}"
        );
    }

    #[test]
    fn the_swap_limits_above_a_v2_cgroup_bound_its_room_when_watched() {
        let tmp = tempfile::tempdir().unwrap();
        let mount = tmp.path();
        // mount/a (swap.max 100 MiB, 30 used) / b (max) / tenant (max, its own).
        let (a, b) = (mount.join("a"), mount.join("a/b"));
        let dir = b.join("tenant");
        fake_v2(&dir, true);
        for (d, max, current) in [(&a, "104857600\n", "31457280\n"), (&b, "max\n", "0\n")] {
            fs::write(d.join("memory.swap.max"), max).unwrap();
            fs::write(d.join("memory.swap.current"), current).unwrap();
        }
        let cg = MemoryCgroup::new(CgroupVersion::V2, dir);
        let mut r = CgroupReader::new(&cg);
        assert_eq!(r.sample().unwrap().swap_room_above, None, "not watched");
        r.watch_swap_above(mount);
        assert_eq!(
            r.sample().unwrap().swap_room_above,
            Some(Bytes::from_mib(70))
        );
        fs::write(a.join("memory.swap.current"), "94371840\n").unwrap();
        assert_eq!(
            r.sample().unwrap().swap_room_above,
            Some(Bytes::from_mib(10))
        );
        // b was unbounded when looked at: not read, until watched again.
        fs::write(b.join("memory.swap.max"), "0\n").unwrap();
        assert_eq!(
            r.sample().unwrap().swap_room_above,
            Some(Bytes::from_mib(10))
        );
        r.watch_swap_above(mount);
        assert_eq!(r.sample().unwrap().swap_room_above, Some(Bytes::ZERO));
        // Back to max above: no bound.
        fs::write(a.join("memory.swap.max"), "max\n").unwrap();
        fs::write(b.join("memory.swap.max"), "max\n").unwrap();
        assert_eq!(r.sample().unwrap().swap_room_above, None);
        // The mount point itself (the root cgroup) is never read.
        fs::write(mount.join("memory.swap.max"), "0\n").unwrap();
        r.watch_swap_above(mount);
        assert_eq!(r.sample().unwrap().swap_room_above, None);
    }

    #[test]
    fn sample_of_a_removed_cgroup_is_vanished() {
        for version in [CgroupVersion::V1, CgroupVersion::V2] {
            let cg = MemoryCgroup::new(version, PathBuf::from("/nonexistent-memtide/tenant"));
            assert!(!cg.exists());
            assert!(cg.sample().unwrap_err().is_vanished());
            assert!(cg.pids().unwrap_err().is_vanished());
        }
    }

    #[test]
    fn malformed_limit_in_sample_names_path_and_value() {
        let (_tmp, cg) = v1_cgroup(true);
        fs::write(cg.dir().join("memory.limit_in_bytes"), "lots\n").unwrap();
        let msg = cg.sample().unwrap_err().to_string();
        assert!(
            msg.contains("memory.limit_in_bytes") && msg.contains("\"lots\""),
            "{msg}"
        );
    }

    #[test]
    fn settings_read_every_limit_and_survive_json() {
        let (_tmp, cg) = v1_cgroup(false);
        let s = cg.settings().unwrap();
        assert_eq!(
            s,
            LimitSettings::V1 {
                limit: Limit::Max,
                soft_limit: Limit::Max,
                memsw_limit: None,
                swappiness: Some(60),
            }
        );
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<LimitSettings>(&json).unwrap(), s);

        let (_tmp, cg) = v2_cgroup(true);
        fs::write(cg.dir().join("memory.low"), "1048576\n").unwrap();
        let s = cg.settings().unwrap();
        assert_eq!(
            s,
            LimitSettings::V2 {
                high: Limit::Max,
                max: Limit::Max,
                low: mib(1),
                min: Limit::Bytes(Bytes(0)),
            }
        );
        assert_eq!(s.version(), CgroupVersion::V2);
    }

    #[test]
    fn v1_set_limit_raises_memsw_first_when_it_is_below_the_new_limit() {
        let (_tmp, cg) = v1_cgroup(true);
        let d = cg.dir().to_path_buf();
        fs::write(d.join("memory.memsw.limit_in_bytes"), "134217728\n").unwrap();
        fs::write(d.join("memory.limit_in_bytes"), "67108864\n").unwrap();
        cg.set_limit(mib(256), T).unwrap();
        assert_eq!(contents(&d, "memory.memsw.limit_in_bytes"), "268435456");
        assert_eq!(contents(&d, "memory.limit_in_bytes"), "268435456");

        // memsw is written before the limit: with the limit file unwritable, memsw has moved.
        fs::write(d.join("memory.memsw.limit_in_bytes"), "134217728\n").unwrap();
        fs::remove_file(d.join("memory.limit_in_bytes")).unwrap();
        fs::create_dir(d.join("memory.limit_in_bytes")).unwrap();
        assert!(cg.set_limit(mib(512), T).is_err());
        assert_eq!(contents(&d, "memory.memsw.limit_in_bytes"), "536870912");
    }

    #[test]
    fn v1_set_limit_lower_writes_only_the_limit() {
        let (_tmp, cg) = v1_cgroup(true);
        let d = cg.dir().to_path_buf();
        cg.set_limit(mib(256), T).unwrap();
        assert_eq!(contents(&d, "memory.limit_in_bytes"), "268435456");
        assert_eq!(
            contents(&d, "memory.memsw.limit_in_bytes"),
            "9223372036854771712\n"
        );
        cg.set_limit(mib(128), T).unwrap();
        assert_eq!(contents(&d, "memory.limit_in_bytes"), "134217728");
        assert_eq!(
            contents(&d, "memory.memsw.limit_in_bytes"),
            "9223372036854771712\n"
        );
    }

    #[test]
    fn v1_set_limit_max_writes_minus_one_to_memsw_then_limit() {
        let (_tmp, cg) = v1_cgroup(true);
        let d = cg.dir().to_path_buf();
        fs::write(d.join("memory.memsw.limit_in_bytes"), "268435456\n").unwrap();
        fs::write(d.join("memory.limit_in_bytes"), "134217728\n").unwrap();
        cg.set_limit(Limit::Max, T).unwrap();
        assert_eq!(contents(&d, "memory.memsw.limit_in_bytes"), "-1");
        assert_eq!(contents(&d, "memory.limit_in_bytes"), "-1");
        assert_eq!(cg.sample().unwrap().limit, Limit::Max);
    }

    #[test]
    fn v1_set_limit_without_swap_accounting_writes_only_the_limit() {
        let (_tmp, cg) = v1_cgroup(false);
        cg.set_limit(mib(64), T).unwrap();
        assert_eq!(contents(cg.dir(), "memory.limit_in_bytes"), "67108864");
        assert!(!cg.dir().join("memory.memsw.limit_in_bytes").exists());
    }

    #[test]
    fn v2_set_limit_writes_high_and_leaves_max() {
        let (_tmp, cg) = v2_cgroup(true);
        fs::write(cg.dir().join("memory.max"), "1073741824\n").unwrap();
        cg.set_limit(mib(256), T).unwrap();
        assert_eq!(contents(cg.dir(), "memory.high"), "268435456");
        assert_eq!(contents(cg.dir(), "memory.max"), "1073741824\n");
        cg.set_limit(Limit::Max, T).unwrap();
        assert_eq!(contents(cg.dir(), "memory.high"), "max");
    }

    #[test]
    fn v1_restore_after_set_limit_brings_back_every_setting() {
        let (_tmp, cg) = v1_cgroup(true);
        let d = cg.dir().to_path_buf();
        fs::write(d.join("memory.memsw.limit_in_bytes"), "536870912\n").unwrap();
        fs::write(d.join("memory.limit_in_bytes"), "268435456\n").unwrap();
        let original = cg.settings().unwrap();
        cg.set_limit(mib(1024), T).unwrap();
        assert_eq!(contents(&d, "memory.memsw.limit_in_bytes"), "1073741824");
        fs::write(d.join("memory.swappiness"), "0\n").unwrap();
        fs::write(d.join("memory.soft_limit_in_bytes"), "1048576\n").unwrap();
        cg.restore(&original, T).unwrap();
        assert_eq!(cg.settings().unwrap(), original);
    }

    #[test]
    fn v1_restore_order_keeps_memsw_at_or_above_the_limit() {
        let cases = [
            (
                Some(mib(1024)),
                Some(mib(512)),
                V1Order::MemswFirst(mib(1024)),
            ),
            (
                Some(Limit::Max),
                Some(mib(512)),
                V1Order::MemswFirst(Limit::Max),
            ),
            (
                Some(mib(512)),
                Some(Limit::Max),
                V1Order::LimitFirst(mib(512)),
            ),
            (
                Some(mib(512)),
                Some(mib(1024)),
                V1Order::LimitFirst(mib(512)),
            ),
            (Some(mib(512)), Some(mib(512)), V1Order::LimitOnly),
            (None, Some(mib(512)), V1Order::LimitOnly),
            (Some(mib(512)), None, V1Order::LimitOnly),
        ];
        for (want, now, order) in cases {
            assert_eq!(v1_restore_order(want, now), order, "{want:?} from {now:?}");
        }
    }

    #[test]
    fn v1_restore_lowering_memsw_sets_both() {
        let (_tmp, cg) = v1_cgroup(true);
        let d = cg.dir().to_path_buf();
        let target = LimitSettings::V1 {
            limit: mib(256),
            soft_limit: Limit::Max,
            memsw_limit: Some(mib(512)),
            swappiness: Some(60),
        };
        cg.restore(&target, T).unwrap();
        assert_eq!(contents(&d, "memory.limit_in_bytes"), "268435456");
        assert_eq!(contents(&d, "memory.memsw.limit_in_bytes"), "536870912");
        assert_eq!(cg.settings().unwrap(), target);
    }

    #[test]
    fn v2_restore_writes_back_every_changed_setting() {
        let (_tmp, cg) = v2_cgroup(true);
        let original = cg.settings().unwrap();
        cg.set_limit(mib(64), T).unwrap();
        fs::write(cg.dir().join("memory.low"), "4096\n").unwrap();
        cg.restore(&original, T).unwrap();
        assert_eq!(cg.settings().unwrap(), original);
        assert_eq!(contents(cg.dir(), "memory.high"), "max");
        // memory.max was unchanged, so it was not rewritten.
        assert_eq!(contents(cg.dir(), "memory.max"), "max\n");
    }

    #[test]
    fn restore_refuses_settings_of_the_other_version() {
        let (_tmp, cg) = v2_cgroup(true);
        let v1_settings = LimitSettings::V1 {
            limit: Limit::Max,
            soft_limit: Limit::Max,
            memsw_limit: None,
            swappiness: None,
        };
        let msg = cg.restore(&v1_settings, T).unwrap_err().to_string();
        assert!(msg.contains("tenant") && msg.contains("V1"), "{msg}");
    }

    #[test]
    fn reclaim_writes_memory_reclaim_on_v2_and_is_unsupported_elsewhere() {
        let (_tmp, cg) = v2_cgroup(false);
        assert!(cg.reclaim(Bytes::from_mib(1), T).unwrap());
        assert_eq!(contents(cg.dir(), "memory.reclaim"), "1048576");
        fs::remove_file(cg.dir().join("memory.reclaim")).unwrap();
        assert!(!cg.reclaim(Bytes::from_mib(1), T).unwrap());

        let (_tmp, cg) = v1_cgroup(true);
        assert!(!cg.reclaim(Bytes::from_mib(1), T).unwrap());

        let gone = MemoryCgroup::new(CgroupVersion::V2, PathBuf::from("/nonexistent-memtide/x"));
        assert!(gone.reclaim(Bytes(1), T).unwrap_err().is_vanished());
    }

    #[test]
    fn pids_and_oom_kills_read_on_both_versions() {
        let (_tmp, cg) = v1_cgroup(false);
        fs::write(cg.dir().join("cgroup.procs"), "12\n345\n").unwrap();
        assert_eq!(cg.pids().unwrap(), vec![12, 345]);
        assert_eq!(cg.oom_kills().unwrap(), Some(2));
        fs::write(
            cg.dir().join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\n",
        )
        .unwrap();
        assert_eq!(cg.oom_kills().unwrap(), None);

        let (_tmp, cg) = v2_cgroup(false);
        assert_eq!(cg.pids().unwrap(), vec![77]);
        assert_eq!(cg.oom_kills().unwrap(), Some(1));
    }

    #[test]
    fn has_processes_tracks_a_listed_process_and_reads_cgroup_procs_again_when_it_exits() {
        let (_tmp, cg) = v1_cgroup(false);
        let procs = cg.dir().join("cgroup.procs");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        fs::write(&procs, format!("{}\n", child.id())).unwrap();
        let mut r = CgroupReader::new(&cg);
        assert!(r.has_processes().unwrap());
        // While the tracked process runs, cgroup.procs is not read.
        fs::write(&procs, "").unwrap();
        assert!(r.has_processes().unwrap());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            !r.has_processes().unwrap(),
            "exited: cgroup.procs read again"
        );

        // A process that left for another cgroup is noticed at the periodic reading.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        fs::write(&procs, format!("{}\n", child.id())).unwrap();
        assert!(r.has_processes().unwrap());
        fs::write(&procs, "").unwrap();
        let answers: Vec<bool> = (0..PROCS_REREAD_EVERY)
            .map(|_| r.has_processes().unwrap())
            .collect();
        child.kill().unwrap();
        child.wait().unwrap();
        let mut want = vec![true; PROCS_REREAD_EVERY as usize - 1];
        want.push(false);
        assert_eq!(answers, want);

        fs::write(&procs, "junk\n").unwrap();
        let msg = r.has_processes().unwrap_err().to_string();
        assert!(
            msg.contains("cgroup.procs") && msg.contains("junk"),
            "{msg}"
        );
        fs::remove_dir_all(cg.dir()).unwrap();
        assert!(r.has_processes().unwrap_err().is_vanished());
    }

    #[test]
    fn a_reader_samples_as_memory_cgroup_does_and_lists_pids() {
        for (tmp, cg) in [v1_cgroup(true), v2_cgroup(true)] {
            let mut r = CgroupReader::new(&cg);
            assert_eq!(r.sample().unwrap(), cg.sample().unwrap());
            // Read again through the kept descriptors: what the files hold now.
            let usage = if cg.version() == CgroupVersion::V1 {
                "memory.usage_in_bytes"
            } else {
                "memory.current"
            };
            fs::write(cg.dir().join(usage), "4096\n").unwrap();
            assert_eq!(r.sample().unwrap().usage, Bytes(4096));
            fs::write(cg.dir().join("cgroup.procs"), "3\n1\n").unwrap();
            let mut pids = vec![9];
            r.pids(&mut pids).unwrap();
            assert_eq!(pids, vec![3, 1]);
            // (A removed cgroup's kept descriptors read ENODEV, which a plain file's do not:
            // fs::kept tests that case.) A reader of a removed cgroup finds it vanished.
            drop(tmp);
            assert!(CgroupReader::new(&cg).sample().unwrap_err().is_vanished());
        }
    }

    /// Removes the test cgroup however the test ends.
    struct RemoveOnDrop(PathBuf);

    impl Drop for RemoveOnDrop {
        fn drop(&mut self) {
            if let Err(e) = fs::remove_dir(&self.0) {
                eprintln!("could not remove test cgroup {}: {e}", self.0.display());
            }
        }
    }

    /// Runs against the live v1 memory controller, in a child of this process's own cgroup.
    #[test]
    fn live_v1_child_cgroup_samples_sets_limits_and_restores() {
        use crate::fs::hierarchy;

        if !Path::new("/sys/fs/cgroup/memory").is_dir() {
            eprintln!("skipped: no v1 memory controller at /sys/fs/cgroup/memory");
            return;
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: creating a cgroup needs root");
            return;
        }
        let h = match hierarchy::detect(Path::new("/")) {
            Ok(h) if h.version == CgroupVersion::V1 => h,
            Ok(h) => {
                eprintln!("skipped: the memory controller is on {:?}", h.version);
                return;
            }
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let own = h.own_dir();
        let dir = own.join(format!("memtide-fs-test-{}", std::process::id()));
        assert!(dir.starts_with(&own));
        fs::create_dir(&dir).unwrap();
        let _cleanup = RemoveOnDrop(dir.clone());
        let cg = MemoryCgroup::new(CgroupVersion::V1, dir);

        let s = cg.sample().unwrap();
        assert!(s.anon.is_some() && s.file.is_some());
        let original = cg.settings().unwrap();
        let LimitSettings::V1 { memsw_limit, .. } = original else {
            panic!("v1 cgroup gave {original:?}");
        };

        cg.set_limit(mib(256), T).unwrap();
        assert_eq!(cg.sample().unwrap().limit, mib(256));

        if memsw_limit.is_some() {
            // memsw below the next limit: set_limit must raise it first or the kernel refuses.
            cg.set_limit(mib(64), T).unwrap();
            write_bounded(
                &cg.dir().join("memory.memsw.limit_in_bytes"),
                "134217728",
                T,
            )
            .unwrap();
            cg.set_limit(mib(512), T).unwrap();
            assert_eq!(v1::read_limit(cg.dir()).unwrap(), mib(512));
            assert_eq!(v1::read_memsw_limit(cg.dir()).unwrap(), Some(mib(512)));
        }

        cg.restore(&original, T).unwrap();
        assert_eq!(cg.settings().unwrap(), original);
        assert_eq!(cg.pids().unwrap(), Vec::<u32>::new());
        assert!(cg.oom_kills().is_ok());
    }
}
