//! A block device as sysfs shows it: found by name or path (`<sysfs>/block/<name>/dev` gives its `MAJ:MIN`), its I/O scheduler read from `queue/scheduler`, and BFQ put in place by a guard that gives the previous scheduler back.
//!
//! Every function takes the sysfs root (`/sys` live), so tests run against fake trees.

use crate::fs::blkio::DevNum;
use crate::fs::read::read_optional_text;
use crate::fs::{write_bounded, FsError};
use crate::io_cgroup::IoError;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The scheduler that divides a device by cgroup weights.
pub const BFQ: &str = "bfq";

/// A whole block device (not a partition: schedulers belong to the disk).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    name: String,
    dev: DevNum,
    /// `<sysfs>/block/<name>`.
    dir: PathBuf,
}

/// A device's `queue/scheduler`: the schedulers offered, one in brackets being in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scheduler {
    /// The one in brackets; `None` when the device offers no choice.
    pub active: Option<String>,
    /// Every scheduler offered, the active one included, in the kernel's order.
    pub offered: Vec<String>,
}

impl BlockDevice {
    /// The device `<sysfs>/block/<name>`, e.g. `loop0`.
    pub fn by_name(sysfs: &Path, name: &str) -> Result<BlockDevice, IoError> {
        let dir = sysfs.join("block").join(name);
        let no_device = || IoError::NoDevice {
            name: name.to_string(),
            path: dir.clone(),
        };
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(no_device());
        }
        let dev_path = dir.join("dev");
        let text = read_optional_text(&dev_path)?.ok_or_else(no_device)?;
        Ok(BlockDevice {
            name: name.to_string(),
            dev: DevNum::parse(&dev_path, "dev", &text)?,
            dir,
        })
    }

    /// The device whose node (or a link to it, such as `/dev/disk/by-id/...`) is `path`.
    pub fn by_path(sysfs: &Path, path: &Path) -> Result<BlockDevice, IoError> {
        let no_device = || IoError::NoDevice {
            name: path.display().to_string(),
            path: path.to_path_buf(),
        };
        let node = std::fs::canonicalize(path).map_err(|_| no_device())?;
        let name = node.file_name().ok_or_else(no_device)?;
        BlockDevice::by_name(sysfs, &name.to_string_lossy())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device number, as cgroup files name the device.
    pub fn dev(&self) -> DevNum {
        self.dev
    }

    fn scheduler_path(&self) -> PathBuf {
        self.dir.join("queue/scheduler")
    }

    /// The schedulers offered and the one in force. A device without `queue/scheduler`
    /// (one that queues no requests, such as zram) offers none.
    pub fn scheduler(&self) -> Result<Scheduler, IoError> {
        let path = self.scheduler_path();
        let Some(text) = read_optional_text(&path)? else {
            return Ok(Scheduler {
                active: None,
                offered: Vec::new(),
            });
        };
        parse_scheduler(&path, &text)
    }

    /// Makes BFQ the device's scheduler (the kernel loads its module if need be) and returns
    /// the guard that puts the previous one back. On a device already under BFQ the guard has
    /// nothing to give back.
    pub fn use_bfq(&self, timeout: Duration) -> Result<SchedulerGuard, IoError> {
        let path = self.scheduler_path();
        let before = self.scheduler()?;
        let Some(previous) = before.active.clone() else {
            return Err(scheduler_refused(&path, before));
        };
        if previous != BFQ {
            match write_bounded(&path, BFQ, timeout) {
                // The kernel refuses a scheduler it does not have with EINVAL: said below.
                Ok(()) | Err(FsError::Write { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            let after = self.scheduler()?;
            if after.active.as_deref() != Some(BFQ) {
                return Err(scheduler_refused(&path, after));
            }
        }
        Ok(SchedulerGuard {
            path,
            previous: (previous != BFQ).then_some(previous),
            timeout,
        })
    }
}

fn scheduler_refused(path: &Path, now: Scheduler) -> IoError {
    IoError::Scheduler {
        path: path.to_path_buf(),
        wanted: BFQ,
        active: now.active,
        offered: now.offered.join(" "),
    }
}

/// Parses `queue/scheduler` text read from `path`: names separated by spaces, the active one
/// in brackets, e.g. `[none] mq-deadline kyber bfq`.
fn parse_scheduler(path: &Path, text: &str) -> Result<Scheduler, IoError> {
    let mut active = None;
    let mut offered = Vec::new();
    for token in text.split_whitespace() {
        let name = match token.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(name) if active.is_none() && !name.is_empty() => {
                active = Some(name.to_string());
                name
            }
            Some(_) => {
                return Err(FsError::Parse {
                    path: path.to_path_buf(),
                    field: "scheduler".to_string(),
                    value: text.trim().to_string(),
                    expected: "scheduler names with at most one in brackets",
                }
                .into())
            }
            None => token,
        };
        offered.push(name.to_string());
    }
    Ok(Scheduler { active, offered })
}

/// The scheduler a device had before [`BlockDevice::use_bfq`], written back by
/// [`SchedulerGuard::restore`] or, failing that, when the guard is dropped.
#[derive(Debug)]
pub struct SchedulerGuard {
    path: PathBuf,
    /// What to write back; `None` once given back, or when BFQ was already in force.
    previous: Option<String>,
    timeout: Duration,
}

impl SchedulerGuard {
    /// Writes the previous scheduler back. Done once: a second call, or the drop after a
    /// successful one, writes nothing. After a failure the drop tries again.
    pub fn restore(&mut self) -> Result<(), IoError> {
        if let Some(previous) = &self.previous {
            write_bounded(&self.path, previous, self.timeout)?;
            self.previous = None;
        }
        Ok(())
    }
}

impl Drop for SchedulerGuard {
    /// Best effort: call [`SchedulerGuard::restore`] to see an error.
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A sysfs tree with `loop0` (7:0) under `scheduler`, and `zram0` without a scheduler.
    fn fake_sysfs(root: &Path, scheduler: &str) {
        let loop0 = root.join("block/loop0");
        fs::create_dir_all(loop0.join("queue")).unwrap();
        fs::write(loop0.join("dev"), "7:0\n").unwrap();
        fs::write(loop0.join("queue/scheduler"), scheduler).unwrap();
        let zram = root.join("block/zram0");
        fs::create_dir_all(zram.join("queue")).unwrap();
        fs::write(zram.join("dev"), "253:0\n").unwrap();
    }

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[test]
    fn finds_a_device_by_name_or_by_a_link_to_its_node() {
        let tmp = tempfile::tempdir().unwrap();
        fake_sysfs(tmp.path(), "[none] mq-deadline kyber bfq\n");
        let dev = BlockDevice::by_name(tmp.path(), "loop0").unwrap();
        assert_eq!(dev.name(), "loop0");
        assert_eq!(dev.dev(), DevNum { major: 7, minor: 0 });

        let nodes = tmp.path().join("dev");
        fs::create_dir_all(nodes.join("disk")).unwrap();
        fs::write(nodes.join("loop0"), "").unwrap();
        std::os::unix::fs::symlink("../loop0", nodes.join("disk/backing")).unwrap();
        assert_eq!(
            BlockDevice::by_path(tmp.path(), &nodes.join("disk/backing")).unwrap(),
            dev
        );
    }

    #[test]
    fn an_unknown_device_is_no_device_naming_what_was_looked_for() {
        let tmp = tempfile::tempdir().unwrap();
        fake_sysfs(tmp.path(), "[none] bfq\n");
        for name in ["sdz", "", "..", "loop0/queue"] {
            let err = BlockDevice::by_name(tmp.path(), name).unwrap_err();
            assert!(matches!(err, IoError::NoDevice { .. }), "{name:?}: {err}");
        }
        let msg = BlockDevice::by_path(tmp.path(), &tmp.path().join("dev/missing"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("dev/missing"), "{msg}");
    }

    #[test]
    fn the_scheduler_in_brackets_is_active() {
        let tmp = tempfile::tempdir().unwrap();
        fake_sysfs(tmp.path(), "none [mq-deadline] kyber bfq\n");
        let dev = BlockDevice::by_name(tmp.path(), "loop0").unwrap();
        assert_eq!(
            dev.scheduler().unwrap(),
            Scheduler {
                active: Some("mq-deadline".into()),
                offered: vec![
                    "none".into(),
                    "mq-deadline".into(),
                    "kyber".into(),
                    "bfq".into()
                ],
            }
        );
        let zram = BlockDevice::by_name(tmp.path(), "zram0").unwrap();
        assert_eq!(zram.scheduler().unwrap().active, None);
        let msg = parse_scheduler(Path::new("/q/scheduler"), "[none] [bfq]")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("/q/scheduler") && msg.contains("[bfq]"),
            "{msg}"
        );
    }

    /// A fake scheduler file keeps what is written ("bfq", no brackets), as a kernel that did
    /// not switch would not show `[bfq]` either.
    #[test]
    fn a_device_that_does_not_switch_to_bfq_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fake_sysfs(tmp.path(), "[none] bfq\n");
        let dev = BlockDevice::by_name(tmp.path(), "loop0").unwrap();
        let msg = dev.use_bfq(TIMEOUT).unwrap_err().to_string();
        assert!(
            msg.contains("loop0/queue/scheduler") && msg.contains("\"bfq\""),
            "{msg}"
        );
    }

    #[test]
    fn a_device_already_under_bfq_gets_a_guard_with_nothing_to_give_back() {
        let tmp = tempfile::tempdir().unwrap();
        fake_sysfs(tmp.path(), "none [bfq]\n");
        let dev = BlockDevice::by_name(tmp.path(), "loop0").unwrap();
        let path = tmp.path().join("block/loop0/queue/scheduler");
        let mut guard = dev.use_bfq(TIMEOUT).unwrap();
        guard.restore().unwrap();
        drop(guard);
        assert_eq!(fs::read_to_string(&path).unwrap(), "none [bfq]\n");
    }

    #[test]
    fn the_guard_gives_the_previous_scheduler_back_once_on_restore_or_drop() {
        let tmp = tempfile::tempdir().unwrap();
        fake_sysfs(tmp.path(), "none [bfq]\n");
        let path = tmp.path().join("block/loop0/queue/scheduler");
        let guard = |previous: &str| SchedulerGuard {
            path: path.clone(),
            previous: Some(previous.into()),
            timeout: TIMEOUT,
        };
        let mut restored = guard("mq-deadline");
        restored.restore().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "mq-deadline");
        fs::write(&path, "none [bfq]\n").unwrap();
        restored.restore().unwrap();
        drop(restored);
        assert_eq!(fs::read_to_string(&path).unwrap(), "none [bfq]\n");

        drop(guard("none"));
        assert_eq!(fs::read_to_string(&path).unwrap(), "none");
    }

    #[test]
    fn a_device_without_a_scheduler_cannot_take_bfq() {
        let tmp = tempfile::tempdir().unwrap();
        fake_sysfs(tmp.path(), "[none] bfq\n");
        let zram = BlockDevice::by_name(tmp.path(), "zram0").unwrap();
        let msg = zram.use_bfq(TIMEOUT).unwrap_err().to_string();
        assert!(msg.contains("zram0/queue/scheduler"), "{msg}");
    }
}
