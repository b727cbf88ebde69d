//! One tenant's disk I/O: its blkio (v1) or io (v2) cgroup, the weight and caps found before memtide changed them, and its counters between ticks (see the folder's `mod.rs`).

use super::IoRecord;
use crate::io_cgroup::{DevNum, IoCap, IoCgroup, IoError};
use memtide_model::{Bytes, DiskIo};
use std::path::PathBuf;
use std::time::Duration;

/// One tenant's I/O: its cgroup, what it had before memtide, and the counters kept between
/// ticks.
#[derive(Debug)]
pub(crate) struct TenantIo {
    pub cgroup: IoCgroup,
    /// The cumulative operations and bytes on the device at the last observation.
    last: Option<(u64, u64)>,
    /// The caps in force on the device, as read at attach and after each write.
    cap: Option<IoCap>,
    /// The blkio directories memtide created for it (v1, launched), parents first.
    created: Vec<PathBuf>,
}

impl TenantIo {
    /// The tenant's I/O over `cgroup`, with the directories memtide created for it (parents
    /// first) and the caps in force on `device` as read now.
    pub fn new(cgroup: IoCgroup, created: Vec<PathBuf>, device: DevNum) -> TenantIo {
        let cap = cgroup.cap(device).ok();
        TenantIo {
            cgroup,
            last: None,
            cap,
            created,
        }
    }

    /// The tenant's I/O as a record names it (to give back a tenant no longer configured).
    pub fn of_record(record: &IoRecord) -> TenantIo {
        TenantIo {
            cgroup: IoCgroup::new(record.interface, record.dir.clone())
                .with_originals(record.originals.clone()),
            last: None,
            cap: None,
            created: record.created.clone(),
        }
    }

    /// What the state file keeps.
    pub fn record(&self) -> IoRecord {
        IoRecord {
            dir: self.cgroup.dir().to_path_buf(),
            interface: self.cgroup.interface(),
            originals: self.cgroup.originals().clone(),
            created: self.created.clone(),
        }
    }

    /// What the tenant did on `device` since the last observation: the first observation has
    /// no difference yet (0 operations, no latency). `await_us`, the device's mean await, is
    /// its latency when it did I/O. `None` when the kernel keeps no counters for the cgroup.
    pub fn observe(
        &mut self,
        device: DevNum,
        await_us: Option<f64>,
    ) -> Result<Option<DiskIo>, IoError> {
        let Some(sample) = self.cgroup.sample()? else {
            return Ok(None);
        };
        // A device the cgroup is not listed on has seen no I/O from it.
        let (ops, bytes) = sample.device(device).map_or((0, 0), |d| {
            (
                d.read_ios.saturating_add(d.write_ios),
                d.read_bytes.0.saturating_add(d.write_bytes.0),
            )
        });
        let (d_ops, d_bytes) = match self.last.replace((ops, bytes)) {
            None => (0, 0),
            // Counters that went backwards (the cgroup was made again) start afresh.
            Some((o, b)) if ops < o || bytes < b => (ops, bytes),
            Some((o, b)) => (ops - o, bytes - b),
        };
        let weight = self
            .cgroup
            .weight()?
            .map(|w| u32::try_from(w).unwrap_or(u32::MAX));
        Ok(Some(DiskIo {
            weight,
            cap_iops: self.cap.and_then(cap_iops),
            ops: d_ops,
            bytes: Bytes(d_bytes),
            latency_us: await_us.filter(|_| d_ops > 0),
            syncs: None,
            sync_latency_us: None,
        }))
    }

    /// Writes the configured caps on `device` (`None`: the originals back, where memtide
    /// changed them), nothing in a dry run.
    pub fn apply_cap(
        &mut self,
        device: DevNum,
        cap: Option<IoCap>,
        timeout: Duration,
        dry_run: bool,
    ) -> Result<(), IoError> {
        if dry_run {
            return Ok(());
        }
        let want = match cap {
            Some(c) => c,
            None => match self
                .cgroup
                .originals()
                .caps
                .iter()
                .find(|(d, _)| *d == device)
            {
                Some((_, original)) => *original,
                None => return Ok(()),
            },
        };
        let result = self.cgroup.set_cap(device, want, timeout);
        self.cap = self.cgroup.cap(device).ok();
        result
    }

    /// Writes `weight`.
    pub fn set_weight(&mut self, weight: u32, timeout: Duration) -> Result<(), IoError> {
        self.cgroup.set_weight(u64::from(weight), timeout)
    }

    /// Gives back the weight and caps memtide changed.
    pub fn restore(&mut self, timeout: Duration) -> Result<(), IoError> {
        self.cgroup.restore(timeout)?;
        self.cap = None;
        Ok(())
    }

    /// Takes on directories a crashed run created for the tenant, parents first.
    pub fn inherit(&mut self, created: &[PathBuf]) {
        for d in created {
            if !self.created.contains(d) {
                self.created.push(d.clone());
            }
        }
        self.created.sort_by_key(|d| d.components().count());
    }

    /// Removes the blkio directories memtide created for a launched tenant, deepest first
    /// (a parent still holding another tenant's cgroup stays).
    pub fn remove_created(&self) {
        for d in self.created.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// The most operations a second a cap lets through: its read and write IOPS caps together;
/// `None` without an IOPS cap.
fn cap_iops(cap: IoCap) -> Option<u32> {
    let total = match (cap.read_iops, cap.write_iops) {
        (None, None) => return None,
        (r, w) => r.unwrap_or(0).saturating_add(w.unwrap_or(0)),
    };
    Some(u32::try_from(total).unwrap_or(u32::MAX))
}
