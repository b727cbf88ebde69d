//! This machine's real memory cgroups for a test: the root and cgroup check, cgroups created
//! beneath the process's own and removed on drop, and the toucher run inside them.

use crate::skip_or_fail;
use memtide_linux::cgroup::{CgroupSample, Limit, MemoryCgroup};
use memtide_linux::fs::hierarchy::{self, MemoryHierarchy};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

pub const MIB: u64 = 1 << 20;
/// This machine's memory hierarchy, held exclusively by one test at a time (the tests share
/// swap and host memory).
pub struct Linux {
    pub hierarchy: MemoryHierarchy,
    _serial: MutexGuard<'static, ()>,
}

/// The real host, when this process is root and can create memory cgroups under its own.
pub fn linux(test: &str) -> Option<Linux> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip_or_fail(test, "needs root to write cgroup files");
        return None;
    }
    let hierarchy = match hierarchy::detect(Path::new("/")) {
        Ok(h) => h,
        Err(e) => {
            skip_or_fail(test, &format!("no memory cgroup controller: {e}"));
            return None;
        }
    };
    let probe = hierarchy
        .dir_of(&hierarchy.own_cgroup)
        .join(format!("memtide-probe-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&probe) {
        skip_or_fail(
            test,
            &format!("cannot create a memory cgroup at {}: {e}", probe.display()),
        );
        return None;
    }
    let _ = std::fs::remove_dir(&probe);
    Some(Linux {
        hierarchy,
        _serial: serial,
    })
}

impl Linux {
    /// A fresh cgroup under our own, removed (with anything running in it) on drop.
    pub fn cgroup(&self, name: &str) -> TestCgroup {
        let path = format!(
            "{}/memtide-it-{}-{name}",
            self.hierarchy.own_cgroup.trim_end_matches('/'),
            std::process::id()
        );
        let dir = self.hierarchy.dir_of(&path);
        if dir.exists() {
            remove_tree(&dir);
        }
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        TestCgroup {
            path,
            cgroup: MemoryCgroup::new(self.hierarchy.version, dir),
        }
    }

    pub fn memory_cgroup(&self, path: &str) -> MemoryCgroup {
        MemoryCgroup::new(self.hierarchy.version, self.hierarchy.dir_of(path))
    }
}

/// A toucher process the test started; killed and reaped on drop.
pub struct Toucher(pub Child);

impl Drop for Toucher {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A cgroup the test owns.
pub struct TestCgroup {
    /// Path inside the memory hierarchy.
    pub path: String,
    pub cgroup: MemoryCgroup,
}

impl TestCgroup {
    pub fn dir(&self) -> &Path {
        self.cgroup.dir()
    }

    pub fn sample(&self) -> CgroupSample {
        self.cgroup.sample().expect("sample the test cgroup")
    }

    /// Starts the toucher with `args` inside this cgroup: a shell joins the cgroup first and
    /// then becomes the toucher, so all of its memory is charged here.
    pub fn spawn_toucher(&self, args: &[&str]) -> Toucher {
        let procs = self.dir().join("cgroup.procs");
        let child = Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(&procs)
            .arg(toucher_path())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start memtide-toucher");
        let toucher = Toucher(child);
        let start = Instant::now();
        while self.cgroup.pids().map_or(true, |p| p.is_empty()) {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "the toucher never joined"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        toucher
    }

    pub fn set_limit_bytes(&self, bytes: u64) {
        self.cgroup
            .set_limit(
                Limit::Bytes(memtide_model::Bytes(bytes)),
                Duration::from_secs(5),
            )
            .expect("set the limit");
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        remove_tree(self.cgroup.dir());
    }
}

/// Kills every process in `dir` and its descendants, then removes the cgroups bottom-up.
pub fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                remove_tree(&e.path());
            }
        }
    }
    for _ in 0..100 {
        let pids = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<i32> = pids.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir(dir);
}

/// SwapTotal, in bytes.
pub fn swap_total() -> u64 {
    memtide_linux::fs::meminfo::read_meminfo(Path::new("/"))
        .ok()
        .and_then(|m| m.swap_total)
        .map_or(0, |b| b.0)
}

/// memtide-toucher, built beside memtide (same target directory).
pub fn toucher_path() -> PathBuf {
    let path = crate::memtide_path().with_file_name("memtide-toucher");
    assert!(
        path.exists(),
        "{} is missing: build the workspace (cargo test --workspace builds it)",
        path.display()
    );
    path
}
pub fn limit_bytes(sample: &CgroupSample) -> Option<u64> {
    match sample.limit {
        Limit::Max => None,
        Limit::Bytes(b) => Some(b.0),
    }
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}
