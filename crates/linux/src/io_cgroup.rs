//! One cgroup's disk I/O as the Linux host sees it, over v1 blkio or v2 io: per-device counters, a proportional weight (BFQ's, or v2's blk-iocost), per-device caps, and the weight and caps it had before memtide changed them, given back by `restore`.
//!
//! v1: weight `blkio.bfq.weight` (1..=1000), caps the four `blkio.throttle.*_device` files
//! (`MAJ:MIN N`; `MAJ:MIN 0` removes one), counters BFQ's stat files where BFQ lists the
//! device, else the throttle's. v2: the weight is BFQ's `io.bfq.weight` (`default N`,
//! 1..=1000) on a device BFQ schedules, and blk-iocost's `io.weight` (`default N`, 1..=10000)
//! otherwise, which acts only where iocost is enabled (`io.cost.qos`); caps one `io.max` line
//! per device, counters `io.stat`, and `io.pressure`. [`IoInterface`] says which. Every write
//! is bounded (`fs::write_bounded`).

use crate::fs::blkio::{self, BlkioStats, ThrottleFile, BFQ_WEIGHTS};
use crate::fs::io_v2::{self, IO_WEIGHTS};
use crate::fs::read::{parse_u64, read_optional_cgroup_file};
use crate::fs::{write_bounded, FsError};
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::fs::blkio::{CounterSource, DevNum, DeviceIo};
pub use crate::fs::hierarchy::CgroupVersion;
pub use crate::fs::io_v2::IoCap;
pub use crate::fs::pressure::Pressure;

/// What went wrong with a cgroup's or a device's I/O settings. Each message names the file or
/// directory, the value and the limit it broke.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// Reading or writing a kernel file failed.
    #[error(transparent)]
    Fs(#[from] FsError),

    /// A weight outside what the interface takes.
    #[error("weight {value} for {}: must be {}..={}", dir.display(), range.start(), range.end())]
    Weight {
        dir: PathBuf,
        value: u64,
        range: RangeInclusive<u64>,
    },

    /// A cap of zero, which v1 reads as "remove the cap": no cap is `None`.
    #[error("{what} cap 0 for device {device} in {}: must be at least 1 (no cap is None)", dir.display())]
    ZeroCap {
        dir: PathBuf,
        device: DevNum,
        what: &'static str,
    },

    /// The cgroup lacks the file a setting lives in.
    #[error("{} is absent: {why}", path.display())]
    Unsupported { path: PathBuf, why: &'static str },

    /// No block device of that name or path.
    #[error("no block device {name:?} at {}", path.display())]
    NoDevice { name: String, path: PathBuf },

    /// The device did not take the scheduler asked for.
    #[error("{}: scheduler {wanted:?} not taken: {active:?} in force, offered: {offered:?}", path.display())]
    Scheduler {
        path: PathBuf,
        wanted: &'static str,
        active: Option<String>,
        offered: String,
    },
}

/// One reading of a cgroup's I/O.
#[derive(Clone, Debug, PartialEq)]
pub struct IoSample {
    /// Cumulative counters per device the cgroup did I/O on.
    pub devices: Vec<DeviceIo>,
    /// v2 io.pressure; `None` on v1, which has no per-cgroup PSI.
    pub pressure: Option<Pressure>,
}

impl IoSample {
    /// The counters of `device`; `None` when the cgroup did no I/O on it.
    pub fn device(&self, device: DevNum) -> Option<&DeviceIo> {
        self.devices.iter().find(|d| d.device == device)
    }
}

/// Which files a cgroup's I/O weight lives in.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum IoInterface {
    /// v1 blkio under BFQ: `blkio.bfq.weight`, a plain number.
    V1Bfq,
    /// v2 io on a device BFQ schedules: `io.bfq.weight`, `default N`.
    V2Bfq,
    /// v2 io on any other device: blk-iocost's `io.weight`, `default N`.
    V2IoCost,
}

impl IoInterface {
    /// The interface for a cgroup of `version` on a device that BFQ schedules (`bfq`) or not.
    /// v1 has BFQ's weight only.
    pub fn of(version: CgroupVersion, bfq: bool) -> IoInterface {
        match (version, bfq) {
            (CgroupVersion::V1, _) => IoInterface::V1Bfq,
            (CgroupVersion::V2, true) => IoInterface::V2Bfq,
            (CgroupVersion::V2, false) => IoInterface::V2IoCost,
        }
    }

    pub fn version(self) -> CgroupVersion {
        match self {
            IoInterface::V1Bfq => CgroupVersion::V1,
            IoInterface::V2Bfq | IoInterface::V2IoCost => CgroupVersion::V2,
        }
    }

    /// The file the weight lives in.
    pub fn weight_file(self) -> &'static str {
        match self {
            IoInterface::V1Bfq => V1_WEIGHT,
            IoInterface::V2Bfq => V2_BFQ_WEIGHT,
            IoInterface::V2IoCost => V2_WEIGHT,
        }
    }
}

/// What a cgroup had before memtide's first change: its weight and each device's caps. The
/// state file keeps it, so a daemon restarted after a crash gives back these, not what the
/// crashed one wrote.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct IoOriginals {
    /// The weight before memtide's first `set_weight`; `None` while memtide has not changed it.
    pub weight: Option<u64>,
    /// Each device's caps before memtide's first change to them.
    pub caps: Vec<(DevNum, IoCap)>,
}

/// A blkio (v1) or io (v2) cgroup directory, and what it had before memtide's first change.
#[derive(Debug)]
pub struct IoCgroup {
    interface: IoInterface,
    dir: PathBuf,
    /// What to give back, until restored.
    original: IoOriginals,
}

const V1_WEIGHT: &str = "blkio.bfq.weight";
const V2_BFQ_WEIGHT: &str = "io.bfq.weight";
const V2_WEIGHT: &str = "io.weight";
const V2_MAX: &str = "io.max";

impl IoCgroup {
    pub fn new(interface: IoInterface, dir: PathBuf) -> IoCgroup {
        IoCgroup {
            interface,
            dir,
            original: IoOriginals::default(),
        }
    }

    /// Takes `original` as what to give back (a state file's record, after a crash): memtide's
    /// first changes from now on find it already recorded.
    pub fn with_originals(mut self, original: IoOriginals) -> IoCgroup {
        self.original = original;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn interface(&self) -> IoInterface {
        self.interface
    }

    /// What `restore` would give back.
    pub fn originals(&self) -> &IoOriginals {
        &self.original
    }

    /// The weights this interface takes.
    pub fn weights(&self) -> RangeInclusive<u64> {
        match self.interface {
            IoInterface::V1Bfq | IoInterface::V2Bfq => BFQ_WEIGHTS,
            IoInterface::V2IoCost => IO_WEIGHTS,
        }
    }

    /// The weight in force: v1 blkio.bfq.weight, v2 io.bfq.weight's or io.weight's default.
    /// `None` when the cgroup has no such file (no BFQ in the kernel, the root cgroup, v2
    /// without the io controller).
    pub fn weight(&self) -> Result<Option<u64>, IoError> {
        Ok(match self.interface {
            IoInterface::V1Bfq => blkio::read_bfq_weight(&self.dir)?,
            IoInterface::V2Bfq => read_v2_bfq_weight(&self.dir)?,
            IoInterface::V2IoCost => io_v2::read_io_weight(&self.dir)?.map(|w| w.default),
        })
    }

    /// Sets the weight, recording the one in force first if memtide has not changed it yet.
    pub fn set_weight(&mut self, weight: u64, timeout: Duration) -> Result<(), IoError> {
        let range = self.weights();
        if !range.contains(&weight) {
            return Err(IoError::Weight {
                dir: self.dir.clone(),
                value: weight,
                range,
            });
        }
        let now = self.require_weight()?;
        self.original.weight.get_or_insert(now);
        self.write_weight(now, weight, timeout)
    }

    /// The weight in force, which must exist to be changed.
    fn require_weight(&self) -> Result<u64, IoError> {
        self.weight()?.ok_or_else(|| {
            let why = match self.interface {
                IoInterface::V1Bfq => {
                    "no BFQ in this kernel, or the root cgroup, which has no weight"
                }
                IoInterface::V2Bfq => {
                    "no BFQ in this kernel, the io controller is not enabled for this cgroup, or it is the root"
                }
                IoInterface::V2IoCost => {
                    "the io controller is not enabled for this cgroup, or it is the root"
                }
            };
            IoError::Unsupported {
                path: self.dir.join(self.interface.weight_file()),
                why,
            }
        })
    }

    fn write_weight(&self, now: u64, weight: u64, timeout: Duration) -> Result<(), IoError> {
        if now == weight {
            return Ok(());
        }
        let file = self.interface.weight_file();
        match self.interface {
            IoInterface::V1Bfq => self.write(file, &weight.to_string(), timeout),
            IoInterface::V2Bfq | IoInterface::V2IoCost => {
                self.write(file, &format!("default {weight}"), timeout)
            }
        }
    }

    /// The caps in force on `device` (`IoCap::NONE` when it has none).
    pub fn cap(&self, device: DevNum) -> Result<IoCap, IoError> {
        match self.interface.version() {
            CgroupVersion::V1 => {
                let mut cap = IoCap::NONE;
                for file in ThrottleFile::ALL {
                    let caps = blkio::read_throttle(&self.dir, file)?.ok_or_else(|| {
                        IoError::Unsupported {
                            path: self.dir.join(file.name()),
                            why: "no blk-throttle in this kernel",
                        }
                    })?;
                    let value = caps.iter().find(|(d, _)| *d == device).map(|(_, n)| *n);
                    match file {
                        ThrottleFile::ReadBps => cap.read_bps = value.map(Bytes),
                        ThrottleFile::WriteBps => cap.write_bps = value.map(Bytes),
                        ThrottleFile::ReadIops => cap.read_iops = value,
                        ThrottleFile::WriteIops => cap.write_iops = value,
                    }
                }
                Ok(cap)
            }
            CgroupVersion::V2 => {
                let caps = io_v2::read_io_max(&self.dir)?.ok_or_else(|| IoError::Unsupported {
                    path: self.dir.join(V2_MAX),
                    why: "the io controller is not enabled for this cgroup, or it is the root",
                })?;
                Ok(caps
                    .into_iter()
                    .find(|(d, _)| *d == device)
                    .map_or(IoCap::NONE, |(_, c)| c))
            }
        }
    }

    /// Caps the cgroup's I/O to `device` (a `None` direction uncapped), recording the device's
    /// caps in force first if memtide has not changed them yet. Only the directions that
    /// change are written.
    pub fn set_cap(
        &mut self,
        device: DevNum,
        cap: IoCap,
        timeout: Duration,
    ) -> Result<(), IoError> {
        let zero = [
            ("read_iops", cap.read_iops),
            ("write_iops", cap.write_iops),
            ("read_bps", cap.read_bps.map(|b| b.0)),
            ("write_bps", cap.write_bps.map(|b| b.0)),
        ]
        .into_iter()
        .find(|(_, v)| *v == Some(0));
        if let Some((what, _)) = zero {
            return Err(IoError::ZeroCap {
                dir: self.dir.clone(),
                device,
                what,
            });
        }
        let now = self.cap(device)?;
        if !self.original.caps.iter().any(|(d, _)| *d == device) {
            self.original.caps.push((device, now));
        }
        self.write_cap(device, now, cap, timeout)
    }

    /// Removes every cap on `device` (recording them first, as `set_cap` does).
    pub fn clear_cap(&mut self, device: DevNum, timeout: Duration) -> Result<(), IoError> {
        self.set_cap(device, IoCap::NONE, timeout)
    }

    fn write_cap(
        &self,
        device: DevNum,
        now: IoCap,
        cap: IoCap,
        timeout: Duration,
    ) -> Result<(), IoError> {
        if now == cap {
            return Ok(());
        }
        match self.interface.version() {
            CgroupVersion::V1 => {
                let pairs = [
                    (
                        ThrottleFile::ReadBps,
                        now.read_bps.map(|b| b.0),
                        cap.read_bps.map(|b| b.0),
                    ),
                    (
                        ThrottleFile::WriteBps,
                        now.write_bps.map(|b| b.0),
                        cap.write_bps.map(|b| b.0),
                    ),
                    (ThrottleFile::ReadIops, now.read_iops, cap.read_iops),
                    (ThrottleFile::WriteIops, now.write_iops, cap.write_iops),
                ];
                for (file, was, want) in pairs {
                    if was != want {
                        // 0 removes the device's line.
                        let value = format!("{device} {}", want.unwrap_or(0));
                        self.write(file.name(), &value, timeout)?;
                    }
                }
                Ok(())
            }
            CgroupVersion::V2 => self.write(V2_MAX, &cap.to_io_max(device), timeout),
        }
    }

    /// The cgroup's counters per device, and v2's io.pressure. v1 prefers BFQ's counters for
    /// a device BFQ lists and takes the throttle's for the others (each `DeviceIo` says
    /// which). `None` when the kernel has no counters for the cgroup.
    pub fn sample(&self) -> Result<Option<IoSample>, IoError> {
        match self.interface.version() {
            CgroupVersion::V1 => {
                let bfq = blkio::read_io(&self.dir, BlkioStats::Bfq)?;
                let throttle = blkio::read_io(&self.dir, BlkioStats::Throttle)?;
                if bfq.is_none() && throttle.is_none() {
                    return Ok(None);
                }
                let mut devices = bfq.unwrap_or_default();
                for t in throttle.unwrap_or_default() {
                    if !devices.iter().any(|d| d.device == t.device) {
                        devices.push(t);
                    }
                }
                Ok(Some(IoSample {
                    devices,
                    pressure: None,
                }))
            }
            CgroupVersion::V2 => {
                let Some(devices) = io_v2::read_io_stat(&self.dir)? else {
                    return Ok(None);
                };
                Ok(Some(IoSample {
                    devices,
                    pressure: io_v2::read_io_pressure(&self.dir)?,
                }))
            }
        }
    }

    /// Gives back the weight and every device's caps as they were before memtide's first
    /// change, writing only what differs from what is in force. What was given back is
    /// forgotten; after an error the rest is kept for the next call.
    pub fn restore(&mut self, timeout: Duration) -> Result<(), IoError> {
        if let Some(weight) = self.original.weight {
            let now = self.require_weight()?;
            self.write_weight(now, weight, timeout)?;
            self.original.weight = None;
        }
        while let Some(&(device, cap)) = self.original.caps.first() {
            let now = self.cap(device)?;
            self.write_cap(device, now, cap, timeout)?;
            self.original.caps.remove(0);
        }
        Ok(())
    }

    fn write(&self, name: &str, value: &str, timeout: Duration) -> Result<(), IoError> {
        Ok(write_bounded(&self.dir.join(name), value, timeout)?)
    }
}

/// v2 io.bfq.weight's `default N` (its `MAJ:MIN N` lines are devices with a weight of their
/// own); `None` when the file is absent.
fn read_v2_bfq_weight(dir: &Path) -> Result<Option<u64>, FsError> {
    let path = dir.join(V2_BFQ_WEIGHT);
    let Some(text) = read_optional_cgroup_file(&path)? else {
        return Ok(None);
    };
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("default "))
        .ok_or_else(|| FsError::Missing {
            path: path.clone(),
            field: "default".to_string(),
        })?;
    let weight = parse_u64(&path, "default", line)?;
    if !BFQ_WEIGHTS.contains(&weight) {
        return Err(FsError::Parse {
            path,
            field: "default".to_string(),
            value: weight.to_string(),
            expected: "a weight in 1..=1000",
        });
    }
    Ok(Some(weight))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::blkio::tests::fake_blkio;
    use crate::fs::io_v2::tests::fake_io;
    use std::fs;

    const LOOP0: DevNum = DevNum { major: 7, minor: 0 };
    const VDA: DevNum = DevNum {
        major: 254,
        minor: 0,
    };
    const TIMEOUT: Duration = Duration::from_secs(5);

    fn read(dir: &Path, name: &str) -> String {
        fs::read_to_string(dir.join(name)).unwrap()
    }

    #[test]
    fn v1_weight_is_written_and_the_original_given_back() {
        let tmp = tempfile::tempdir().unwrap();
        fake_blkio(tmp.path());
        let mut cg = IoCgroup::new(IoInterface::V1Bfq, tmp.path().to_path_buf());
        assert_eq!(cg.weight().unwrap(), Some(100));
        cg.set_weight(400, TIMEOUT).unwrap();
        assert_eq!(read(tmp.path(), "blkio.bfq.weight"), "400");
        cg.set_weight(800, TIMEOUT).unwrap();
        cg.restore(TIMEOUT).unwrap();
        assert_eq!(read(tmp.path(), "blkio.bfq.weight"), "100");
    }

    #[test]
    fn v2_under_bfq_writes_io_bfq_weight_and_leaves_iocost_s_io_weight_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fake_io(d);
        fs::write(d.join("io.bfq.weight"), "default 100\n7:0 300\n").unwrap();
        assert_eq!(IoInterface::of(CgroupVersion::V2, true), IoInterface::V2Bfq);
        let mut cg = IoCgroup::new(IoInterface::V2Bfq, d.to_path_buf());
        assert_eq!(cg.weights(), 1..=1000);
        assert_eq!(cg.weight().unwrap(), Some(100));
        cg.set_weight(800, TIMEOUT).unwrap();
        assert_eq!(read(d, "io.bfq.weight"), "default 800");
        assert_eq!(
            read(d, "io.weight"),
            "default 100\n",
            "iocost's weight untouched"
        );
        cg.restore(TIMEOUT).unwrap();
        assert_eq!(read(d, "io.bfq.weight"), "default 100");
        let msg = IoCgroup::new(IoInterface::V2Bfq, d.to_path_buf())
            .set_weight(2000, TIMEOUT)
            .unwrap_err()
            .to_string();
        assert!(msg.ends_with("must be 1..=1000"), "{msg}");
    }

    #[test]
    fn originals_from_a_record_are_given_back_not_what_is_in_force() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fake_blkio(d);
        // A crashed memtide left weight 800 and a cap; the record says 100 and no cap.
        fs::write(d.join("blkio.bfq.weight"), "800\n").unwrap();
        fs::write(d.join("blkio.throttle.write_iops_device"), "7:0 50\n").unwrap();
        let record = IoOriginals {
            weight: Some(100),
            caps: vec![(LOOP0, IoCap::NONE)],
        };
        let mut cg =
            IoCgroup::new(IoInterface::V1Bfq, d.to_path_buf()).with_originals(record.clone());
        cg.set_weight(400, TIMEOUT).unwrap();
        assert_eq!(cg.originals(), &record, "the record stays the original");
        cg.restore(TIMEOUT).unwrap();
        assert_eq!(read(d, "blkio.bfq.weight"), "100");
        assert_eq!(read(d, "blkio.throttle.write_iops_device"), "7:0 0");
        assert_eq!(
            cg.originals(),
            &IoOriginals::default(),
            "nothing left to give back"
        );
    }

    #[test]
    fn v2_weight_is_written_as_default() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        let mut cg = IoCgroup::new(IoInterface::V2IoCost, tmp.path().to_path_buf());
        cg.set_weight(5000, TIMEOUT).unwrap();
        assert_eq!(read(tmp.path(), "io.weight"), "default 5000");
        cg.restore(TIMEOUT).unwrap();
        assert_eq!(read(tmp.path(), "io.weight"), "default 100");
    }

    #[test]
    fn a_weight_out_of_range_names_the_cgroup_the_value_and_the_range() {
        let tmp = tempfile::tempdir().unwrap();
        fake_blkio(tmp.path());
        let mut v1 = IoCgroup::new(IoInterface::V1Bfq, tmp.path().to_path_buf());
        let msg = v1.set_weight(1200, TIMEOUT).unwrap_err().to_string();
        let want = format!("weight 1200 for {}: must be 1..=1000", tmp.path().display());
        assert_eq!(msg, want);
        let mut v2 = IoCgroup::new(IoInterface::V2IoCost, tmp.path().to_path_buf());
        let msg = v2.set_weight(0, TIMEOUT).unwrap_err().to_string();
        assert!(msg.ends_with("must be 1..=10000"), "{msg}");
        assert_eq!(read(tmp.path(), "blkio.bfq.weight"), "100\n");
    }

    #[test]
    fn a_cgroup_without_a_weight_file_cannot_be_weighted() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cg = IoCgroup::new(IoInterface::V1Bfq, tmp.path().to_path_buf());
        let msg = cg.set_weight(200, TIMEOUT).unwrap_err().to_string();
        assert!(msg.contains("blkio.bfq.weight is absent"), "{msg}");
        assert_eq!(cg.weight().unwrap(), None);
    }

    #[test]
    fn v1_caps_write_only_the_directions_that_change_and_restore_removes_them() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fake_blkio(d);
        fs::write(d.join("blkio.throttle.read_bps_device"), "254:0 1048576\n").unwrap();
        let mut cg = IoCgroup::new(IoInterface::V1Bfq, d.to_path_buf());
        let cap = IoCap {
            write_iops: Some(400),
            ..IoCap::NONE
        };
        cg.set_cap(LOOP0, cap, TIMEOUT).unwrap();
        assert_eq!(read(d, "blkio.throttle.write_iops_device"), "7:0 400");
        // A plain file holds what was written last, not the kernel's list: the directions not
        // changed were not written.
        assert_eq!(read(d, "blkio.throttle.read_iops_device"), "");
        assert_eq!(cg.cap(LOOP0).unwrap(), cap);
        assert_eq!(
            cg.cap(VDA).unwrap(),
            IoCap {
                read_bps: Some(Bytes::from_mib(1)),
                ..IoCap::NONE
            }
        );
        cg.clear_cap(LOOP0, TIMEOUT).unwrap();
        assert_eq!(read(d, "blkio.throttle.write_iops_device"), "7:0 0");
        fs::write(d.join("blkio.throttle.write_iops_device"), "7:0 550\n").unwrap();
        cg.restore(TIMEOUT).unwrap();
        assert_eq!(read(d, "blkio.throttle.write_iops_device"), "7:0 0");
    }

    #[test]
    fn v2_caps_are_one_io_max_line_and_restore_gives_back_the_original() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fake_io(d);
        let original = "7:0 rbps=max wbps=max riops=2000 wiops=max\n";
        fs::write(d.join("io.max"), original).unwrap();
        let mut cg = IoCgroup::new(IoInterface::V2IoCost, d.to_path_buf());
        let cap = IoCap {
            read_iops: Some(400),
            write_iops: Some(550),
            ..IoCap::NONE
        };
        cg.set_cap(LOOP0, cap, TIMEOUT).unwrap();
        assert_eq!(
            read(d, "io.max"),
            "7:0 rbps=max wbps=max riops=400 wiops=550"
        );
        cg.restore(TIMEOUT).unwrap();
        assert_eq!(
            read(d, "io.max"),
            "7:0 rbps=max wbps=max riops=2000 wiops=max"
        );
    }

    #[test]
    fn a_zero_cap_is_refused_naming_the_direction_and_device() {
        let tmp = tempfile::tempdir().unwrap();
        fake_blkio(tmp.path());
        let mut cg = IoCgroup::new(IoInterface::V1Bfq, tmp.path().to_path_buf());
        let cap = IoCap {
            write_bps: Some(Bytes(0)),
            ..IoCap::NONE
        };
        let msg = cg.set_cap(LOOP0, cap, TIMEOUT).unwrap_err().to_string();
        assert!(msg.contains("write_bps cap 0 for device 7:0"), "{msg}");
    }

    #[test]
    fn v1_sample_prefers_bfq_and_takes_the_throttle_for_other_devices() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fake_blkio(d);
        fs::write(
            d.join("blkio.throttle.io_serviced"),
            "7:0 Read 0\n7:0 Write 33074\n254:0 Read 3\n254:0 Write 0\nTotal 33077\n",
        )
        .unwrap();
        fs::write(
            d.join("blkio.throttle.io_service_bytes"),
            "7:0 Read 0\n7:0 Write 67735552\n254:0 Read 12288\n254:0 Write 0\nTotal 67747840\n",
        )
        .unwrap();
        let cg = IoCgroup::new(IoInterface::V1Bfq, d.to_path_buf());
        let s = cg.sample().unwrap().unwrap();
        let loop0 = s.device(LOOP0).unwrap();
        assert_eq!((loop0.source, loop0.write_ios), (CounterSource::Bfq, 16537));
        let vda = s.device(VDA).unwrap();
        assert_eq!(
            (vda.source, vda.read_bytes),
            (CounterSource::Throttle, Bytes(12288))
        );
        assert_eq!(s.pressure, None);
    }

    #[test]
    fn v2_sample_reads_io_stat_and_pressure() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        let cg = IoCgroup::new(IoInterface::V2IoCost, tmp.path().to_path_buf());
        let s = cg.sample().unwrap().unwrap();
        assert_eq!(s.device(LOOP0).unwrap().write_ios, 16537);
        assert_eq!(s.pressure.unwrap().some.total_stall_us, 1200);
    }

    #[test]
    fn a_cgroup_without_counters_samples_none_and_a_gone_one_is_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        for interface in [IoInterface::V1Bfq, IoInterface::V2IoCost] {
            let cg = IoCgroup::new(interface, tmp.path().to_path_buf());
            assert_eq!(cg.sample().unwrap(), None);
            let gone = IoCgroup::new(interface, tmp.path().join("gone"));
            match gone.sample().unwrap_err() {
                IoError::Fs(e) => assert!(e.is_vanished(), "{e}"),
                other => panic!("{other}"),
            }
        }
    }
}
