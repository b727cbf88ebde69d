//! Helpers the adapters' tests share: memtide's side (its real balloon server and hub, trusting the adapter's pid as the tenant's), children killed on drop, free loopback ports, resident memory, real servers started on loopback in temporary directories, and memory cgroups of their own for a server and its adapter (the adapter confirms a shrink on its cgroup's usage, which must not count another test's server or a build beside it).

#![allow(dead_code)]

pub mod mariadb;

use memtide_agents::hub::{AgentEvent, Hub, SessionConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_balloon::protocol::ProgressStatus;
use memtide_model::{AppMove, Bytes, TenantId};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const MIB: u64 = 1 << 20;

/// The one tenant these tests have.
pub const T: TenantId = TenantId(5);

/// How long a test waits for an event before it fails: a bound on a hang, not a timed
/// assertion.
const EVENT_WAIT: Duration = Duration::from_secs(120);

/// The one pid trusted as tenant [`T`]'s.
struct Only(Arc<AtomicU32>);

impl Tenants for Only {
    fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)> {
        (pid == self.0.load(Ordering::SeqCst)).then(|| (T, "app".to_string()))
    }
}

/// A child killed and reaped on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Stops the adapter as memtide does (SIGTERM) and waits for it: it says bye and gives
    /// the pool back before it exits.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .arg(self.0.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success(), "kill {}", self.0.id());
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < until,
                "the adapter did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A process's resident memory.
pub fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `memtide-adapter`, built with these tests.
pub fn adapter_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memtide-adapter"))
}

/// memtide's side: the balloon server and its hub, for one tenant.
pub struct Memtide {
    pub hub: Hub,
    pub server: Server,
    pid: Arc<AtomicU32>,
}

impl Memtide {
    pub fn start(dir: &Path) -> Memtide {
        let pid = Arc::new(AtomicU32::new(0));
        let hub = Hub::new(SessionConfig::default(), Box::new(Only(pid.clone())));
        let server = Server::start(
            &ServerConfig {
                socket: dir.join("b.sock"),
                mode: 0o600,
                max_connections: 4,
                group: None,
                max_per_uid: 4,
                descriptors: None,
            },
            hub.handler(),
        )
        .unwrap();
        hub.set_wake(server.waker());
        Memtide { hub, server, pid }
    }

    /// Starts `command` (an adapter) with `--socket` added, trusted as the tenant's agent.
    pub fn spawn(&self, mut command: Command) -> Proc {
        let p = Proc(
            command
                .arg("--socket")
                .arg(self.server.path())
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        self.pid.store(p.0.id(), Ordering::SeqCst);
        p
    }

    /// The first event `want` takes; fails naming `what` and the events seen.
    pub fn wait_for(&self, what: &str, mut want: impl FnMut(&AgentEvent) -> bool) -> AgentEvent {
        let until = Instant::now() + EVENT_WAIT;
        let mut seen = Vec::new();
        while Instant::now() < until {
            for e in self.hub.drain_events() {
                if want(&e) {
                    return e;
                }
                seen.push(e);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no {what} within {EVENT_WAIT:?}; events: {seen:?}");
    }

    pub fn registered(&self) {
        self.wait_for("registration", |e| {
            matches!(e, AgentEvent::Registered { .. })
        });
    }

    /// Asks for a pool of `bytes`, to be done within `deadline`.
    pub fn target(&self, bytes: u64, deadline: Duration) {
        self.hub.apply(
            T,
            AppMove::Target {
                pool: Bytes(bytes).to_pages_floor(),
                deadline,
            },
        );
    }

    /// The next answer (`done` or `failed`).
    pub fn answer(&self) -> AgentEvent {
        self.wait_for("an answer", |e| {
            matches!(e, AgentEvent::Answered { status, .. } if *status != ProgressStatus::Working)
        })
    }

    /// Waits for `done` at `bytes`.
    pub fn done(&self, bytes: u64) {
        self.wait_for(&format!("done at {bytes}"), |e| done_at(e, bytes));
    }
}

/// Whether `e` is `done` at `bytes`.
pub fn done_at(e: &AgentEvent, bytes: u64) -> bool {
    matches!(e, AgentEvent::Answered { status: ProgressStatus::Done, pool_bytes, .. } if *pool_bytes == bytes)
}

/// A v1 memory cgroup beneath this process's own, emptied (its processes killed) and removed on
/// drop.
pub struct TestCgroup {
    pub dir: PathBuf,
}

impl TestCgroup {
    pub fn new(name: &str) -> Option<TestCgroup> {
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                controllers
                    .split(',')
                    .any(|c| c == "memory")
                    .then(|| path.to_string())
            });
        let Some(own) = own else {
            let why = "no cgroup v1 memory controller (these tests place servers under /sys/fs/cgroup/memory)";
            memtide_testkit::skip_or_fail(module_path!(), why);
            return None;
        };
        let dir = Path::new("/sys/fs/cgroup/memory")
            .join(own.trim_start_matches('/'))
            .join(format!("memtide-adapters-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        if let Err(e) = std::fs::create_dir(&dir) {
            let why = format!("cannot create {}: {e}", dir.display());
            memtide_testkit::skip_or_fail(module_path!(), &why);
            return None;
        }
        Some(TestCgroup { dir })
    }

    pub fn usage(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("memory.usage_in_bytes"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// `program` started inside the cgroup (it joins before exec).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(self.dir.join("cgroup.procs"))
            .arg(program);
        c
    }

    pub fn pids(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let pids = self.pids();
            if pids.is_empty() || Instant::now() > until {
                break;
            }
            let _ = Command::new("kill").arg("-9").args(&pids).status();
            std::thread::sleep(Duration::from_millis(100));
        }
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
