//! A `memtide daemon` process for a test: its config written with a free port and a state
//! file, started and awaited through its API, stopped by signal; and the daemon configs and
//! one-shot runs the tests share.

use crate::{free_port, toucher_path};
use memtide_api::{Snapshot, TenantSnapshot};
use std::io::Read;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The `memtide` binary, beside the test binary's `deps` folder (cargo builds it for the
/// integration tests of memtide-cli).
pub fn memtide_path() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary sits in target/<profile>/deps")
        .join("memtide");
    assert!(
        path.exists(),
        "{} is missing: build memtide-cli (its tests build it)",
        path.display()
    );
    path
}

/// A `memtide daemon` process with its own config, state file and log.
pub struct Daemon {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub state: PathBuf,
    /// The Unix socket for changes (`[api] socket`'s default: beside the state file).
    pub socket: PathBuf,
    pub log: PathBuf,
    /// The open-file limit (soft and hard) the daemon is started with; `None`: this
    /// process's.
    nofile: Option<u64>,
}

impl Daemon {
    /// Writes `config` (which must use `{listen}` and `{state}` placeholders) and starts the daemon.
    pub fn start(dir: &Path, config: &str, extra_args: &[&str]) -> Daemon {
        Daemon::start_with(dir, config, extra_args, None)
    }

    /// [`Daemon::start`] with its open-file limit, soft and hard, at `nofile` (as
    /// `prlimit --nofile=N:N` would start it; the daemon lifts its soft limit to the hard one).
    pub fn start_with_nofile(dir: &Path, config: &str, extra_args: &[&str], nofile: u64) -> Daemon {
        Daemon::start_with(dir, config, extra_args, Some(nofile))
    }

    fn start_with(dir: &Path, config: &str, extra_args: &[&str], nofile: Option<u64>) -> Daemon {
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
            socket: dir.join("api.sock"),
            state,
            log: dir.join("daemon.log"),
            nofile,
        };
        d.spawn(extra_args);
        d
    }

    /// A client of the daemon's Unix socket, which takes changes from root (the tests' user).
    pub fn changer(&self, timeout: Duration) -> memtide_api::Client {
        memtide_api::Client::unix(&self.socket, timeout)
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
        let mut command = Command::new(memtide_path());
        command
            .arg("daemon")
            .arg("--config")
            .arg(&self.config)
            .args(extra_args)
            .env("PATH", path)
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(nofile) = self.nofile {
            let limit = libc::rlimit {
                rlim_cur: nofile,
                rlim_max: nofile,
            };
            // SAFETY: setrlimit is async-signal-safe and reads a struct copied into the closure.
            unsafe {
                command.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command.spawn().expect("start memtide daemon");
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
        r#"{}
[rails]
floor_margin = "16M"

[[tenant]]
name = "app"
cgroup = "{cgroup}"
min = "16M"
max = "1G"
{tenant_extra}
"#,
        config_head("250ms", "self", budget)
    )
}

/// The head every test's daemon config starts with: `[daemon]` with `tick`, the `{listen}`
/// and `{state}` placeholders [`Daemon::start`] fills, and `[host]` with `parent` and
/// `budget`; the rest of the config follows it.
pub fn config_head(tick: &str, parent: &str, budget: &str) -> String {
    format!(
        r#"
[daemon]
tick = "{tick}"
listen = "{{listen}}"
state_file = "{{state}}"

[host]
parent = "{parent}"
budget = "{budget}"
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
