//! Support for the tests that run memtide on this machine's real cgroups: the root/cgroup check (skip with a reason, or fail when `MEMTIDE_REQUIRE_LINUX=1`), test cgroups under our own, zram swap, and a daemon process driven through its API.

#![allow(dead_code)]

pub mod disk;
pub mod mariadb;
pub mod redis;
pub mod samples;
pub mod vm;
use memtide_api::{Snapshot, TenantSnapshot};
use memtide_linux::cgroup::{CgroupSample, Limit, MemoryCgroup};
use memtide_linux::fs::hierarchy::{self, MemoryHierarchy};
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Set by `.ci/run`: a missing prerequisite fails the test instead of skipping it.
pub const REQUIRE_VAR: &str = "MEMTIDE_REQUIRE_LINUX";

static SERIAL: Mutex<()> = Mutex::new(());

pub const MIB: u64 = 1 << 20;

/// This machine's memory hierarchy, held exclusively by one test at a time (the tests share
/// swap and host memory).
pub struct Linux {
    pub hierarchy: MemoryHierarchy,
    _serial: MutexGuard<'static, ()>,
}

/// Skips (prints why, returns `None`) or fails (under `MEMTIDE_REQUIRE_LINUX=1`).
pub fn skip_or_fail(test: &str, why: &str) {
    if std::env::var_os(REQUIRE_VAR).is_some_and(|v| v == "1") {
        panic!("{test}: {why} ({REQUIRE_VAR}=1 makes this a failure)");
    }
    eprintln!("SKIPPED {test}: {why}");
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

/// A zram swap device made by scripts/zram-swap.sh, removed on drop; `None` (after skipping
/// or failing) when it cannot be made.
pub struct Zram {
    state: PathBuf,
}

pub fn zram(test: &str, size: &str) -> Option<Zram> {
    if swap_total() > 0 {
        skip_or_fail(
            test,
            "this host already has swap; the test sets up its own zram",
        );
        return None;
    }
    let state = std::env::temp_dir().join(format!("memtide-zram-{}.dev", std::process::id()));
    let out = Command::new("bash")
        .arg(repo().join("scripts/zram-swap.sh"))
        .args(["up", size])
        .env("MEMTIDE_ZRAM_STATE", &state)
        .output()
        .expect("run scripts/zram-swap.sh");
    if !out.status.success() {
        skip_or_fail(
            test,
            &format!(
                "scripts/zram-swap.sh up failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        );
        return None;
    }
    Some(Zram { state })
}

impl Drop for Zram {
    fn drop(&mut self) {
        let out = Command::new("bash")
            .arg(repo().join("scripts/zram-swap.sh"))
            .arg("down")
            .env("MEMTIDE_ZRAM_STATE", &self.state)
            .output();
        if let Ok(o) = out {
            if !o.status.success() {
                eprintln!(
                    "zram-swap.sh down: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
            }
        }
    }
}

pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

pub fn memtide_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_memtide"))
}

/// memtide-toucher, built beside memtide (same target directory).
pub fn toucher_path() -> PathBuf {
    let path = memtide_path().with_file_name("memtide-toucher");
    assert!(
        path.exists(),
        "{} is missing: build the workspace (cargo test --workspace builds it)",
        path.display()
    );
    path
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A `memtide daemon` process with its own config, state file and log.
pub struct Daemon {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub state: PathBuf,
    pub log: PathBuf,
}

impl Daemon {
    /// Writes `config` (which must use `{listen}` and `{state}` placeholders) and starts the daemon.
    pub fn start(dir: &Path, config: &str, extra_args: &[&str]) -> Daemon {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let state = dir.join("state.json");
        let text = config
            .replace("{listen}", &addr.to_string())
            .replace("{state}", &state.display().to_string());
        let config_path = dir.join("memtide.toml");
        std::fs::write(&config_path, text).unwrap();
        let mut d = Daemon {
            child: None,
            addr,
            dir: dir.to_path_buf(),
            config: config_path,
            state,
            log: dir.join("daemon.log"),
        };
        d.spawn(extra_args);
        d
    }

    /// Starts (again) with the same config.
    pub fn spawn(&mut self, extra_args: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let toucher_dir = toucher_path().parent().unwrap().to_path_buf();
        let path = format!(
            "{}:{}",
            toucher_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let child = Command::new(memtide_path())
            .arg("daemon")
            .arg("--config")
            .arg(&self.config)
            .args(extra_args)
            .env("PATH", path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start memtide daemon");
        self.child = Some(child);
        self.wait_until("the API answers", Duration::from_secs(20), |_| true);
    }

    pub fn try_status(&self) -> Option<Snapshot> {
        memtide_api::fetch(self.addr, Duration::from_secs(2)).ok()
    }

    pub fn status(&self) -> Snapshot {
        self.try_status().unwrap_or_else(|| {
            panic!(
                "no status from the daemon at {}; log:\n{}",
                self.addr,
                self.log_text()
            )
        })
    }

    pub fn tenant(&self, name: &str) -> TenantSnapshot {
        self.status()
            .tenants
            .into_iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("tenant {name} not in status; log:\n{}", self.log_text()))
    }

    /// Polls the status until `pred` holds; panics with the log after `timeout`.
    pub fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        mut pred: impl FnMut(&Snapshot) -> bool,
    ) -> Snapshot {
        let start = Instant::now();
        loop {
            if let Some(child) = &mut self.child {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "the daemon exited ({status}) while waiting for {what}; log:\n{}",
                        self.log_text()
                    );
                }
            }
            if let Some(s) = self.try_status() {
                if pred(&s) {
                    return s;
                }
            }
            if start.elapsed() > timeout {
                panic!(
                    "timed out after {timeout:?} waiting for {what}; status: {:?}\nlog:\n{}",
                    self.try_status().map(|s| s.tenants),
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Polls the daemon's log until one of its lines holds every word of `words`; panics with
    /// the log after `timeout`.
    pub fn wait_for_log(&self, words: &[&str], timeout: Duration) {
        let until = Instant::now() + timeout;
        while !self
            .log_text()
            .lines()
            .any(|l| words.iter().all(|w| l.contains(w)))
        {
            assert!(
                Instant::now() < until,
                "no log line with {words:?} within {timeout:?}; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log_text(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `signal` and waits for the process to end.
    pub fn signal_and_wait(&mut self, signal: i32) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status;
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!(
                    "the daemon did not stop on signal {signal}; log:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: as above.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(15) {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A daemon config adopting `cgroup` as tenant "app" (min 16M, max 1G) under the daemon's own
/// cgroup, tick 250 ms, floor margin 16M, with the `{listen}` and `{state}` placeholders that
/// [`Daemon::start`] fills; `tenant_extra` is added to the tenant's table.
pub fn adopt_config(cgroup: &str, budget: &str, tenant_extra: &str) -> String {
    format!(
        r#"
[daemon]
tick = "250ms"
listen = "{{listen}}"
state_file = "{{state}}"

[host]
parent = "self"
budget = "{budget}"

[rails]
floor_margin = "16M"

[[tenant]]
name = "app"
cgroup = "{cgroup}"
min = "16M"
max = "1G"
{tenant_extra}
"#
    )
}

/// Writes `config` (with `{listen}` on a free port and `{state}` in `dir`) and runs the daemon
/// until it exits, as a start expected to fail does: (exit code, stderr, the state file path).
pub fn daemon_to_exit(dir: &Path, config: &str) -> (i32, String, PathBuf) {
    daemon_to_exit_on(dir, config, &format!("127.0.0.1:{}", free_port()))
}

/// [`daemon_to_exit`] with the API on `listen`.
pub fn daemon_to_exit_on(dir: &Path, config: &str, listen: &str) -> (i32, String, PathBuf) {
    let state = dir.join("state.json");
    let path = dir.join("memtide.toml");
    std::fs::write(
        &path,
        config
            .replace("{listen}", listen)
            .replace("{state}", &state.display().to_string()),
    )
    .unwrap();
    let (code, _, stderr) = memtide(&["daemon", "--config", path.to_str().unwrap()]);
    (code, stderr, state)
}

/// Runs `memtide` with `args`, returning (exit code, stdout, stderr).
pub fn memtide(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(memtide_path())
        .args(args)
        .output()
        .expect("run memtide");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
