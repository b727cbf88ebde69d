//! A disk for the I/O tests: a loop device over a file on a real disk filesystem (direct I/O, under BFQ through `memtide_linux::block`, or left on its own scheduler for the daemon to change), blkio test cgroups under our own or at a memory cgroup's path, and fio runs inside them; everything — fio, cgroups, scheduler, loop device, file — is removed on drop, also after a panic.

use super::redis::find_program;
use super::{remove_tree, skip_or_fail};
use memtide_linux::block::{BlockDevice, SchedulerGuard};
use memtide_linux::fs::hierarchy::parse_mountinfo;
use memtide_linux::io_cgroup::{IoCgroup, IoInterface};
use serde_json::Value;
use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// One disk at a time in a test binary: the loop device's backing file and the probe
/// cgroup are named by the process, and two fio loads on one real disk would measure
/// each other.
static DISK: Mutex<()> = Mutex::new(());
/// Disks made in this process so far: each one's file and probe cgroup are named apart, so a
/// test checking that its file is gone never sees the next test's.
static DISKS: AtomicU32 = AtomicU32::new(0);

/// The backing file's size.
const SIZE: u64 = 512 << 20;
/// Bounded writes to sysfs and cgroupfs wait at most this.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// The loop device and what was changed to make it; dropping it undoes all of it. Tenants
/// borrow it, so they (their fio runs and cgroups) are gone before it is.
pub struct Disk {
    /// The file behind the loop device.
    pub backing: PathBuf,
    /// `/dev/loopN`, once attached.
    pub node: Option<PathBuf>,
    pub device: Option<BlockDevice>,
    /// The scheduler the device had when attached, before BFQ.
    pub scheduler_before: Option<String>,
    scheduler: Option<SchedulerGuard>,
    /// Our own blkio cgroup, where the tenants' cgroups go.
    blkio_parent: PathBuf,
    /// fio's JSON outputs.
    pub out: tempfile::TempDir,
    /// Held while this disk exists (see [`DISK`]).
    _serial: MutexGuard<'static, ()>,
}

/// A disk under BFQ for `test`, or `None` after skipping (or failing under
/// `MEMTIDE_REQUIRE_LINUX=1`) when root, blkio v1, a real disk filesystem for the file,
/// losetup, fio or BFQ is missing.
pub fn disk(test: &str) -> Option<Disk> {
    disk_with(test, true)
}

/// A disk on the scheduler the kernel gave it (BFQ checked to be available, then given
/// back), for a test where memtide sets BFQ itself.
pub fn disk_without_bfq(test: &str) -> Option<Disk> {
    disk_with(test, false)
}

fn disk_with(test: &str, bfq: bool) -> Option<Disk> {
    let serial = DISK.lock().unwrap_or_else(|e| e.into_inner());
    let tag = format!(
        "{}-{}",
        std::process::id(),
        DISKS.fetch_add(1, Ordering::Relaxed)
    );
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip_or_fail(test, "needs root for loop devices and blkio cgroups");
        return None;
    }
    for program in ["fio", "losetup"] {
        if find_program(program).is_none() && !Path::new("/usr/sbin").join(program).is_file() {
            skip_or_fail(test, &format!("{program} is not installed"));
            return None;
        }
    }
    let Some(blkio_parent) = own_blkio_cgroup() else {
        skip_or_fail(test, "no cgroup v1 blkio hierarchy holds this process");
        return None;
    };
    let probe = blkio_parent.join(format!("memtide-probe-{tag}"));
    if let Err(e) = std::fs::create_dir(&probe) {
        skip_or_fail(
            test,
            &format!("cannot create a blkio cgroup at {}: {e}", probe.display()),
        );
        return None;
    }
    let _ = std::fs::remove_dir(&probe);
    let Some(dir) = [std::env::temp_dir(), PathBuf::from("/var/tmp")]
        .into_iter()
        .find(|d| on_real_disk(d))
    else {
        skip_or_fail(
            test,
            "the temporary directory and /var/tmp are on tmpfs: a loop device with direct I/O needs a disk",
        );
        return None;
    };

    let mut disk = Disk {
        backing: dir.join(format!("memtide-disk-{tag}.img")),
        node: None,
        device: None,
        scheduler_before: None,
        scheduler: None,
        blkio_parent,
        out: tempfile::tempdir().expect("a directory for fio's output"),
        _serial: serial,
    };
    fill(&disk.backing);
    let attach = Command::new("losetup")
        .args(["--direct-io=on", "--find", "--show"])
        .arg(&disk.backing)
        .output()
        .expect("run losetup");
    if !attach.status.success() {
        skip_or_fail(
            test,
            &format!(
                "losetup could not attach {}: {}",
                disk.backing.display(),
                String::from_utf8_lossy(&attach.stderr).trim()
            ),
        );
        return None;
    }
    let node = PathBuf::from(String::from_utf8_lossy(&attach.stdout).trim());
    disk.node = Some(node.clone());
    let device = BlockDevice::by_path(Path::new("/sys"), &node).expect("the loop device in sysfs");
    disk.scheduler_before = device.scheduler().expect("read its scheduler").active;
    match device.use_bfq(TIMEOUT) {
        Ok(guard) if bfq => disk.scheduler = Some(guard),
        Ok(mut guard) => guard.restore().expect("give the scheduler back"),
        Err(e) => {
            skip_or_fail(test, &format!("BFQ on {}: {e}", node.display()));
            return None;
        }
    }
    let dio = std::fs::read_to_string(format!("/sys/block/{}/loop/dio", device.name()))
        .unwrap_or_default();
    println!(
        "disk: {} ({}) over {} ({} MiB), direct I/O {}, scheduler {:?}{}",
        node.display(),
        device.dev(),
        disk.backing.display(),
        SIZE >> 20,
        dio.trim(),
        disk.scheduler_before.as_deref().unwrap_or("none"),
        if bfq { " -> bfq" } else { "" },
    );
    disk.device = Some(device);
    Some(disk)
}

/// The v1 blkio hierarchy's mount, from mountinfo.
fn blkio_mount() -> Option<memtide_linux::fs::hierarchy::Mount> {
    let mountinfo = Path::new("/proc/self/mountinfo");
    let text = std::fs::read_to_string(mountinfo).ok()?;
    parse_mountinfo(mountinfo, &text)
        .ok()?
        .into_iter()
        .find(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "blkio"))
}

/// The directory of the blkio cgroup at `path` (a cgroup path, as the memory hierarchy names
/// one): where memtide's `[io]` finds an adopted tenant's blkio cgroup.
pub fn blkio_dir(path: &str) -> PathBuf {
    let mount = blkio_mount().expect("a blkio hierarchy");
    let below = path
        .strip_prefix(mount.root.trim_end_matches('/'))
        .unwrap_or(path);
    mount.mount_point.join(below.trim_start_matches('/'))
}

/// A blkio cgroup the test made at a memory cgroup's path, and the parents it had to make;
/// removed (with anything in it) on drop.
pub struct BlkioCgroup {
    pub dir: PathBuf,
    created: Vec<PathBuf>,
}

impl BlkioCgroup {
    /// Makes the blkio cgroup at cgroup path `path`, and what leads to it.
    pub fn at(path: &str) -> BlkioCgroup {
        let dir = blkio_dir(path);
        let mut created = Vec::new();
        let mut at = dir.clone();
        while !at.exists() {
            created.push(at.clone());
            at = at.parent().expect("under the mount").to_path_buf();
        }
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        BlkioCgroup { dir, created }
    }
}

impl Drop for BlkioCgroup {
    fn drop(&mut self) {
        // Deepest first: `created` runs from the cgroup up.
        for d in &self.created {
            remove_tree(d);
        }
    }
}

/// Our own cgroup's directory in the v1 blkio hierarchy, from mountinfo and /proc/self/cgroup.
fn own_blkio_cgroup() -> Option<PathBuf> {
    let mount = blkio_mount()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "blkio")
            .then(|| path.to_string())
    })?;
    // The path as the hierarchy names it, relative to what is mounted.
    let below = path
        .strip_prefix(mount.root.trim_end_matches('/'))
        .unwrap_or(&path);
    Some(mount.mount_point.join(below.trim_start_matches('/')))
}

/// True when `dir` exists and is not on tmpfs.
fn on_real_disk(dir: &Path) -> bool {
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs is plain old data; zeroed is a valid value for it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path and st a valid statfs to fill.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    st.f_type != libc::TMPFS_MAGIC
}

/// Writes the whole file (no holes or unwritten extents, so a write never changes the file's
/// metadata and an fsync is a cache flush, the same in every run).
fn fill(path: &Path) {
    let mut file =
        std::fs::File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    let chunk = vec![0x5au8; 1 << 20];
    for _ in 0..SIZE / chunk.len() as u64 {
        file.write_all(&chunk)
            .unwrap_or_else(|e| panic!("fill {}: {e}", path.display()));
    }
    file.sync_all()
        .unwrap_or_else(|e| panic!("sync {}: {e}", path.display()));
}

impl Disk {
    pub fn device(&self) -> &BlockDevice {
        self.device.as_ref().expect("attached")
    }

    pub fn node(&self) -> &Path {
        self.node.as_deref().expect("attached")
    }

    /// A fresh blkio cgroup `memtide-it-<pid>-<name>` under our own, removed on drop.
    pub fn tenant(&self, name: &str) -> Tenant<'_> {
        let dir = self
            .blkio_parent
            .join(format!("memtide-it-{}-{name}", std::process::id()));
        if dir.exists() {
            remove_tree(&dir);
        }
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        Tenant {
            name: name.to_string(),
            io: IoCgroup::new(IoInterface::V1Bfq, dir),
            disk: self,
        }
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        if let Some(mut guard) = self.scheduler.take() {
            if let Err(e) = guard.restore() {
                eprintln!("could not give the scheduler back: {e}");
            }
        }
        if let Some(node) = self.node.take() {
            match Command::new("losetup").arg("-d").arg(&node).output() {
                Ok(o) if o.status.success() => {}
                Ok(o) => eprintln!(
                    "losetup -d {}: {}",
                    node.display(),
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                Err(e) => eprintln!("losetup -d {}: {e}", node.display()),
            }
        }
        if let Err(e) = std::fs::remove_file(&self.backing) {
            eprintln!("could not remove {}: {e}", self.backing.display());
        }
    }
}

/// A blkio cgroup on the disk, with memtide's `IoCgroup` over it.
pub struct Tenant<'d> {
    pub name: String,
    pub io: IoCgroup,
    disk: &'d Disk,
}

impl Tenant<'_> {
    pub fn dir(&self) -> &Path {
        self.io.dir()
    }

    /// Starts fio on the loop device inside this cgroup (a shell joins it, then becomes fio):
    /// 4 KiB direct I/O for `ramp` and then `secs` measured seconds, with `job`'s own options.
    pub fn fio(&self, label: &str, job: &[&str], ramp: u32, secs: u32) -> Fio {
        let output = self
            .disk
            .out
            .path()
            .join(format!("{}-{label}.json", self.name));
        let child = Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\"/cgroup.procs && exec \"$@\"")
            .arg(self.dir())
            .arg("fio")
            .arg(format!("--name={}-{label}", self.name))
            .arg(format!("--filename={}", self.disk.node().display()))
            .args(["--bs=4k", "--direct=1", "--time_based", "--group_reporting"])
            .args(["--randrepeat=0", "--output-format=json"])
            .arg(format!("--ramp_time={ramp}"))
            .arg(format!("--runtime={secs}"))
            .arg(format!("--output={}", output.display()))
            .args(job)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start fio");
        Fio {
            child: Some(child),
            output,
        }
    }
}

impl Drop for Tenant<'_> {
    fn drop(&mut self) {
        remove_tree(self.io.dir());
    }
}

/// A fio run; killed and reaped if dropped before [`Fio::wait`].
pub struct Fio {
    child: Option<Child>,
    output: PathBuf,
}

/// One direction of a fio run's figures.
#[derive(Clone, Copy, Debug)]
pub struct FioDir {
    pub ios: u64,
    pub iops: f64,
    /// Completion latency, µs: its mean and 95th and 99th percentiles; `None` without I/O in
    /// this direction.
    pub mean_us: Option<f64>,
    pub p95_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// A fio run's figures (all its jobs together).
#[derive(Clone, Copy, Debug)]
pub struct FioResult {
    pub read: FioDir,
    pub write: FioDir,
}

impl FioResult {
    pub fn iops(&self) -> f64 {
        self.read.iops + self.write.iops
    }

    /// The mean completion latency of all its I/O, µs (each direction's mean weighed by its
    /// operations); `None` without I/O.
    pub fn mean_us(&self) -> Option<f64> {
        let ios = (self.read.ios + self.write.ios) as f64;
        let sum: f64 = [self.read, self.write]
            .iter()
            .filter_map(|d| d.mean_us.map(|m| m * d.ios as f64))
            .sum();
        (ios > 0.0).then(|| sum / ios)
    }
}

impl Fio {
    /// Waits for fio to finish and reads its JSON report; panics with fio's stderr if it failed.
    pub fn wait(mut self) -> FioResult {
        let child = self.child.take().expect("running");
        let out = child.wait_with_output().expect("wait for fio");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "fio failed ({}): {stderr}",
            out.status
        );
        let text = std::fs::read_to_string(&self.output)
            .unwrap_or_else(|e| panic!("read {}: {e}; stderr: {stderr}", self.output.display()));
        // fio may print notes before the JSON.
        let json = text.find('{').map_or(text.as_str(), |at| &text[at..]);
        let report: Value = serde_json::from_str(json)
            .unwrap_or_else(|e| panic!("fio's JSON in {}: {e}", self.output.display()));
        let job = &report["jobs"][0];
        assert_eq!(job["error"].as_i64(), Some(0), "fio job error: {job}");
        let dir = |d: &str| {
            let ios = job[d]["total_ios"].as_u64().unwrap_or(0);
            let clat = &job[d]["clat_ns"];
            let us = |v: &Value| v.as_f64().filter(|_| ios > 0).map(|ns| ns / 1000.0);
            FioDir {
                ios,
                iops: job[d]["iops"].as_f64().unwrap_or(0.0),
                mean_us: us(&clat["mean"]),
                p95_us: us(&clat["percentile"]["95.000000"]),
                p99_us: us(&clat["percentile"]["99.000000"]),
            }
        };
        FioResult {
            read: dir("read"),
            write: dir("write"),
        }
    }
}

impl Drop for Fio {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
