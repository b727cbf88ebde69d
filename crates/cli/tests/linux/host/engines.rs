//! Private Docker and Podman engines for the container tests: a dockerd or `podman system service` of the test's own (its socket, data, state and cgroup parent in a fresh directory and a test cgroup, never the system's engine or store), the image `memtide-test:1` imported into it from a registry-free rootfs holding busybox and memtide-toucher, the engine's CLI pointed at it, and on drop its containers, daemon, helper processes, mounts, directory and cgroups (in every hierarchy) removed.

use super::redis::find_program;
use super::{remove_tree, skip_or_fail, toucher_path, Linux, TestCgroup};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The image every engine holds: busybox (sh, sleep, cat) and /usr/local/bin/memtide-toucher.
pub const IMAGE: &str = "memtide-test:1";
/// How long a daemon has to answer `GET /_ping` after it starts.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How long a daemon has to exit after SIGTERM before it is killed.
const STOP_WITHIN: Duration = Duration::from_secs(30);
/// The Docker API version the tests speak (Docker 20.10's; Podman serves it too).
const API: &str = "/v1.41";

/// Engines started by this process, for unique directory and cgroup names.
static STARTED: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    Docker,
    Podman,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }

    /// The programs the engine runs: its daemon first, then its CLI.
    fn programs(self) -> &'static [&'static str] {
        match self {
            EngineKind::Docker => &["dockerd", "docker", "containerd", "runc"],
            EngineKind::Podman => &["podman", "conmon", "runc"],
        }
    }

    /// Whether the engine's programs are installed; when not, `skip_or_fail` says `test` needs
    /// them (so under CI the test fails) and this returns false.
    pub fn installed(self, test: &str) -> bool {
        let missing: Vec<&str> = self
            .programs()
            .iter()
            .copied()
            .filter(|p| program(p).is_none())
            .collect();
        if missing.is_empty() {
            return true;
        }
        skip_or_fail(
            test,
            &format!(
                "needs {} (missing {}; Debian: apt-get install {})",
                self.name(),
                missing.join(", "),
                match self {
                    EngineKind::Docker => "docker.io",
                    EngineKind::Podman => "podman",
                }
            ),
        );
        false
    }
}

/// `name` on PATH or in /usr/bin, /usr/local/bin or /usr/sbin (dockerd's and libvirtd's home).
pub fn program(name: &str) -> Option<PathBuf> {
    find_program(name).or_else(|| {
        let p = Path::new("/usr/sbin").join(name);
        p.is_file().then_some(p)
    })
}

/// A private engine: its daemon, socket, state and cgroup parent. Dropping it removes its
/// containers and everything it made.
pub struct Engine {
    kind: EngineKind,
    test: String,
    /// The private directory: socket, daemon log, data, state, the image's rootfs.
    dir: PathBuf,
    socket: PathBuf,
    cli: PathBuf,
    daemon: Option<Child>,
    /// Directories on the cgroup parent's path that did not exist before the engine started,
    /// in the hierarchies other than memory (the cgroupfs driver creates the parent in every
    /// hierarchy): removed on drop, deepest first.
    made_dirs: Vec<PathBuf>,
    /// The cgroup given to the engine as the containers' parent (removed on drop).
    cg: TestCgroup,
}

/// The busy container's command: 300 MiB kept active.
pub const BUSY: &[&str] = &[
    "/usr/local/bin/memtide-toucher",
    "--active",
    "300M",
    "--pause-ms",
    "100",
];
/// The idle container's command: 8 MiB active, 250 MiB allocated and left idle.
pub const IDLE: &[&str] = &[
    "/usr/local/bin/memtide-toucher",
    "--active",
    "8M",
    "--idle",
    "250M",
    "--pause-ms",
    "100",
];

impl Engine {
    /// Starts a private `kind` engine for `test`: its daemon on a socket in a fresh directory,
    /// its containers' cgroups beneath a test cgroup, and [`IMAGE`] imported. Panics, naming
    /// what failed and the daemon's log, when the daemon does not answer within a minute.
    pub fn start(kind: EngineKind, linux: &Linux, test: &str) -> Engine {
        for p in kind.programs() {
            assert!(
                program(p).is_some(),
                "{test}: {p} is missing (check EngineKind::installed first)"
            );
        }
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{n}", kind.name());
        // Short (a socket's path is at most 107 bytes) and unique to this process.
        let dir = PathBuf::from(format!("/tmp/memtide-{}-{name}", std::process::id()));
        if dir.exists() {
            cleanup_dir(&dir);
        }
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let cg = linux.cgroup(&name);
        let made_dirs = missing_dirs(&cg.path);
        let socket = dir.join(format!("{}.sock", kind.name()));
        let cli = program(kind.name()).expect("checked above");
        let mut engine = Engine {
            kind,
            test: test.to_string(),
            dir,
            socket,
            cli,
            daemon: None,
            made_dirs,
            cg,
        };
        if kind == EngineKind::Docker {
            // Not /etc/docker/daemon.json: nothing of the system's configuration applies.
            std::fs::write(engine.dir.join("daemon.json"), "{}\n").expect("write daemon.json");
            std::fs::create_dir(engine.dir.join("cli")).expect("mkdir the CLI's config dir");
        }
        engine.spawn_daemon();
        engine.import_image();
        engine
    }

    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    /// The daemon's socket (Docker's API: `/_ping`, `/v1.41/...`).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The engine's private directory (every helper process it starts names it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The containers' cgroup parent, as /proc/<pid>/cgroup names it in the memory hierarchy.
    pub fn parent(&self) -> &str {
        &self.cg.path
    }

    /// The daemon's stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    /// The options every podman command takes so it uses the private store and state.
    fn podman_globals(&self) -> Vec<String> {
        let d = |sub: &str| self.dir.join(sub).display().to_string();
        [
            "--root".to_string(),
            d("root"),
            "--runroot".into(),
            d("runroot"),
            "--tmpdir".into(),
            d("tmp"),
            "--volumepath".into(),
            d("volumes"),
            "--network-config-dir".into(),
            d("net"),
            "--cgroup-manager".into(),
            "cgroupfs".into(),
            // The file lives in --tmpdir; the service streams what every command logs there.
            "--events-backend".into(),
            "file".into(),
        ]
        .into()
    }

    /// The engine's CLI pointed at this engine, with `args`.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.cli);
        match self.kind {
            EngineKind::Docker => {
                c.arg("-H")
                    .arg(format!("unix://{}", self.socket.display()))
                    .env("DOCKER_CONFIG", self.dir.join("cli"))
                    .env_remove("DOCKER_HOST")
                    .env_remove("DOCKER_CONTEXT");
            }
            EngineKind::Podman => {
                c.args(self.podman_globals())
                    .env_remove("CONTAINER_HOST")
                    .env_remove("CONTAINER_CONNECTION");
            }
        }
        c.args(args).stdin(Stdio::null());
        c
    }

    /// Runs the engine's CLI against this engine.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.command(args)
            .output()
            .unwrap_or_else(|e| panic!("run {} {args:?}: {e}", self.cli.display()))
    }

    /// Runs the engine's CLI and returns its trimmed stdout; panics with its stderr when it
    /// fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "{}: {} {args:?} exited {}: {}{}",
            self.test,
            self.kind.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Runs containers "busy" ([`BUSY`]) and "idle" ([`IDLE`]), each limited to 600 MiB by
    /// the engine, and waits (60 s at most) until each holds what it touches: 290 and 250 MiB.
    pub fn run_busy_and_idle(&self, linux: &Linux) {
        for (name, command) in [("busy", BUSY), ("idle", IDLE)] {
            self.run(name, Some("600m"), command);
        }
        for (name, holds) in [("busy", 290u64 << 20), ("idle", 250 << 20)] {
            let cg = linux.memory_cgroup(&self.cgroup(name));
            memtide_testkit::wait_for(
                &format!(
                    "{}'s {name} container to hold {} MiB",
                    self.kind.name(),
                    holds >> 20
                ),
                Duration::from_secs(60),
                Duration::from_millis(200),
                || (cg.sample().map_or(0, |s| s.usage.0) >= holds).then_some(()),
                || format!("{:?}", cg.sample()),
            );
        }
    }

    /// Starts container `name` from [`IMAGE`], detached, running `command`, with `-m memory`
    /// when given, and no network; returns its id.
    pub fn run(&self, name: &str, memory: Option<&str>, command: &[&str]) -> String {
        let limit: Vec<&str> = memory.map_or_else(Vec::new, |m| vec!["-m", m]);
        self.run_image(name, IMAGE, &limit, command)
    }

    /// `inspect` of container `name` with a Go template.
    fn inspect(&self, name: &str, format: &str) -> String {
        self.ok(&["inspect", "--type", "container", "-f", format, name])
    }

    /// The host pid of container `name`'s first process; panics when it is not running.
    pub fn pid(&self, name: &str) -> u32 {
        let text = self.inspect(name, "{{.State.Pid}}");
        let pid: u32 = text
            .parse()
            .unwrap_or_else(|e| panic!("{name}'s pid {text:?}: {e}"));
        assert!(pid != 0, "{}: container {name} is not running", self.test);
        pid
    }

    /// Container `name`'s memory cgroup: the path of the memory line of /proc/<pid>/cgroup
    /// (`<parent>/<id>` under Docker, `<parent>/libpod-<id>` under Podman).
    pub fn cgroup(&self, name: &str) -> String {
        let pid = self.pid(name);
        memory_cgroup_of(pid).unwrap_or_else(|e| panic!("container {name}: {e}"))
    }

    /// HostConfig.Memory and HostConfig.MemorySwap of container `name`, as inspect shows them.
    pub fn hostconfig_memory(&self, name: &str) -> (i64, i64) {
        let text = self.inspect(name, "{{.HostConfig.Memory}} {{.HostConfig.MemorySwap}}");
        let v: Vec<i64> = text
            .split_whitespace()
            .map(|f| f.parse().unwrap_or_else(|e| panic!("{text:?}: {e}")))
            .collect();
        assert_eq!(v.len(), 2, "inspect {name}: {text:?}");
        (v[0], v[1])
    }

    /// Container `name`'s memory as the engine's `stats` shows it: (MEM USAGE, LIMIT) in
    /// bytes, from the API's `memory_stats`. Docker's CLI (20.10 and later) shows the usage less
    /// the inactive page cache (`total_inactive_file` on cgroup v1, `inactive_file` on v2, when
    /// smaller than the usage); Podman 4 shows the cgroup's usage as it is (its API's `usage`
    /// is memory.usage_in_bytes on v1).
    pub fn stats(&self, name: &str) -> (u64, u64) {
        let body = self.api_json(&format!("{API}/containers/{name}/stats?stream=false"));
        let m = &body["memory_stats"];
        let field = |v: &serde_json::Value, k: &str| v[k].as_u64();
        let usage = field(m, "usage").unwrap_or_else(|| panic!("no memory_stats.usage: {body}"));
        let limit = field(m, "limit").unwrap_or_else(|| panic!("no memory_stats.limit: {body}"));
        let usage = match self.kind {
            EngineKind::Docker => {
                let s = &m["stats"];
                match field(s, "total_inactive_file").or_else(|| field(s, "inactive_file")) {
                    Some(inactive) if inactive < usage => usage - inactive,
                    _ => usage,
                }
            }
            EngineKind::Podman => usage,
        };
        (usage, limit)
    }

    /// GET `path` on the daemon's socket: the status code and body.
    pub fn api(&self, path: &str) -> Result<(u16, String), String> {
        http_get(&self.socket, path)
    }

    /// GET `path`, which must answer 200 with JSON.
    pub fn api_json(&self, path: &str) -> serde_json::Value {
        match self.api(path) {
            Ok((200, body)) => serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("{} GET {path}: {e}: {body}", self.kind.name())),
            Ok((code, body)) => panic!("{} GET {path}: {code} {body}", self.kind.name()),
            Err(e) => panic!("{} GET {path}: {e}", self.kind.name()),
        }
    }

    /// The events the daemon streams on `/v1.41/events` from `since` to `until` (Unix seconds;
    /// a future `until` holds the stream open until then), one JSON object each. Podman's
    /// service streams what every podman command of this engine logs to its events file.
    pub fn events(&self, since: u64, until: u64) -> Vec<serde_json::Value> {
        let path = format!("{API}/events?since={since}&until={until}");
        let body = match self.api(&path) {
            Ok((200, body)) => body,
            Ok((code, body)) => panic!("{} GET {path}: {code} {body}", self.kind.name()),
            Err(e) => panic!("{} GET {path}: {e}", self.kind.name()),
        };
        serde_json::Deserializer::from_str(&body)
            .into_iter::<serde_json::Value>()
            .map(|v| v.unwrap_or_else(|e| panic!("{} events: {e}: {body}", self.kind.name())))
            .collect()
    }

    /// Whether the daemon answers `GET /_ping` with OK.
    pub fn answers(&self) -> bool {
        matches!(self.api("/_ping"), Ok((200, body)) if body.trim() == "OK")
    }

    /// Stops the daemon and starts it again on the same data and socket, waiting until it
    /// answers. Docker's stops its containers as it shuts down (no live restore), so they are
    /// left exited; Podman's containers run on under conmon, whether its service runs or not.
    pub fn restart_daemon(&mut self) {
        self.stop_daemon();
        self.spawn_daemon();
    }

    /// Starts the daemon and waits until it answers on the socket.
    fn spawn_daemon(&mut self) {
        assert!(self.daemon.is_none(), "the daemon is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("daemon.log"))
            .expect("open the daemon log");
        let err = log.try_clone().expect("clone the daemon log");
        let d = |sub: &str| self.dir.join(sub);
        let mut c = match self.kind {
            EngineKind::Docker => {
                let mut c = Command::new(program("dockerd").expect("dockerd"));
                c.arg("--config-file")
                    .arg(d("daemon.json"))
                    .arg("-H")
                    .arg(format!("unix://{}", self.socket.display()))
                    .arg("--data-root")
                    .arg(d("data"))
                    .arg("--exec-root")
                    .arg(d("exec"))
                    .arg("--pidfile")
                    .arg(d("docker.pid"))
                    .args(["--exec-opt", "native.cgroupdriver=cgroupfs"])
                    .arg(format!("--cgroup-parent={}", self.cg.path))
                    // No bridge, NAT or firewall rules on the host: the containers run with
                    // --network none.
                    .args(["--iptables=false", "--bridge=none"])
                    // Seconds its containers get to stop on SIGTERM before they are killed.
                    .args(["--shutdown-timeout", "3"]);
                c
            }
            EngineKind::Podman => {
                let mut c = Command::new(&self.cli);
                c.args(self.podman_globals())
                    .args(["system", "service", "--time=0"])
                    .arg(format!("unix://{}", self.socket.display()));
                c
            }
        };
        c.stdin(Stdio::null()).stdout(log).stderr(err);
        parent_death_signal(&mut c);
        let child = c.spawn().unwrap_or_else(|e| {
            panic!("{}: start the {} daemon: {e}", self.test, self.kind.name())
        });
        self.daemon = Some(child);
        let start = Instant::now();
        loop {
            if self.answers() {
                return;
            }
            let exited = self
                .daemon
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || start.elapsed() > READY_WITHIN {
                let why = match exited {
                    Some(status) => format!("exited {status}"),
                    None => format!("did not answer GET /_ping within {READY_WITHIN:?}"),
                };
                panic!(
                    "{}: the {} daemon on {} {why}; its log ends:\n{}",
                    self.test,
                    self.kind.name(),
                    self.socket.display(),
                    tail(&self.log(), 40)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM to the daemon, SIGKILL when it has not exited within [`STOP_WITHIN`]; reaped.
    fn stop_daemon(&mut self) {
        let Some(mut child) = self.daemon.take() else {
            return;
        };
        // SAFETY: kill has no memory-safety preconditions; the child is not reaped yet.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let start = Instant::now();
        while matches!(child.try_wait(), Ok(None)) {
            if start.elapsed() > STOP_WITHIN {
                eprintln!(
                    "{}: the {} daemon ignored SIGTERM for {STOP_WITHIN:?}: killing it",
                    self.test,
                    self.kind.name()
                );
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.wait();
        if self.kind == EngineKind::Docker {
            // dockerd stops its containerd as it exits; wait until that is gone too (a new
            // dockerd would otherwise find it holding its socket).
            wait_gone(&self.dir, &["containerd --config"], Duration::from_secs(15));
        }
    }

    /// Builds the image's rootfs (busybox as sh, sleep and cat; the toucher; the shared
    /// libraries they load, at their paths) and imports it as [`IMAGE`].
    fn import_image(&self) {
        let toucher = toucher_path();
        self.import(IMAGE, &[(&toucher, "/usr/local/bin/memtide-toucher")]);
    }

    /// Imports image `image`: busybox (as sh, sleep and cat) and each host program of
    /// `programs` at its path inside, with the shared libraries they load at their paths.
    pub fn import(&self, image: &str, programs: &[(&Path, &str)]) {
        let rootfs = self
            .dir
            .join(format!("rootfs-{}", image.replace([':', '/'], "-")));
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{}: busybox is missing (Debian: busybox)", self.test));
        copy_into(&rootfs, &busybox, Path::new("/bin/busybox"));
        for applet in ["sh", "sleep", "cat"] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet))
                .expect("link a busybox applet");
        }
        let mut binaries = vec![busybox.clone()];
        for (host, inside) in programs {
            copy_into(&rootfs, host, Path::new(inside));
            binaries.push(host.to_path_buf());
        }
        for binary in &binaries {
            for lib in shared_libraries(binary) {
                copy_into(&rootfs, &lib, &lib);
            }
        }
        let mut tar = Command::new("tar")
            .arg("-C")
            .arg(&rootfs)
            .args(["-c", "."])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tar");
        let out = self
            .command(&["import", "-", image])
            .stdin(tar.stdout.take().expect("tar's stdout"))
            .output()
            .expect("run the image import");
        let tar_status = tar.wait().expect("wait for tar");
        assert!(
            tar_status.success() && out.status.success(),
            "{}: {} import of {image} failed (tar {tar_status}): {}",
            self.test,
            self.kind.name(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// [`Engine::run`] of `image` with `extra` options before it (volumes, say).
    pub fn run_image(&self, name: &str, image: &str, extra: &[&str], command: &[&str]) -> String {
        let parent = self.cg.path.clone();
        let mut args: Vec<&str> = vec!["run", "-d", "--name", name, "--network", "none"];
        if self.kind == EngineKind::Podman {
            // Without these podman copies our rlimits, which runc may not set here ("error
            // setting rlimit type 7: operation not permitted"); dockerd's parent is its own.
            args.extend([
                "--ulimit",
                "nofile=1024:1024",
                "--ulimit",
                "nproc=1024:1024",
                "--cgroup-parent",
                &parent,
            ]);
        }
        args.extend(extra);
        args.push(image);
        args.extend(command);
        self.ok(&args)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // The containers first, while the engine can still remove them (Podman's CLI needs no
        // service; Docker's does).
        if self.daemon.is_some() || self.kind == EngineKind::Podman {
            let out = self.cli(&["ps", "-aq"]);
            let ids = String::from_utf8_lossy(&out.stdout).into_owned();
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if !ids.is_empty() {
                let mut args = vec!["rm", "-f"];
                if self.kind == EngineKind::Podman {
                    args.extend(["-t", "0"]);
                }
                args.extend(&ids);
                let out = self.cli(&args);
                if !out.status.success() {
                    eprintln!(
                        "{}: {} rm -f: {}",
                        self.test,
                        self.kind.name(),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
        }
        self.stop_daemon();
        // Whatever the engine left (containerd, shims, conmon, a podman cleanup), then the
        // containers' processes with their cgroups, in every hierarchy.
        kill_named(&self.dir);
        for dir in cgroup_dirs(&self.cg.path) {
            remove_tree(&dir);
        }
        kill_named(&self.dir);
        for dir in self.made_dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
        cleanup_dir(&self.dir);
    }
}

/// Unmounts everything under `dir` (the engines' overlay, shm and bind mounts) and removes it.
fn cleanup_dir(dir: &Path) {
    let mut mounts = mounts_under(dir);
    // Deepest first.
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in &mounts {
        let c = std::ffi::CString::new(m.as_str()).expect("a mount point has no NUL");
        // SAFETY: umount2 with a valid C string; MNT_DETACH cannot fail on a busy mount.
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
            eprintln!("umount {m}: {}", std::io::Error::last_os_error());
        }
    }
    if let Err(e) = std::fs::remove_dir_all(dir) {
        eprintln!("remove {}: {e}", dir.display());
    }
}

/// Mount points at or under `dir`, from /proc/self/mountinfo.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let dir = dir.display().to_string();
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mountinfo)
        .filter(|m| m == &dir || m.starts_with(&format!("{dir}/")))
        .collect()
}

/// A mountinfo field with its octal escapes (`\040` for a space) decoded.
fn unescape_mountinfo(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount points of this machine's cgroup hierarchies (v1 controllers, named ones such as
/// name=systemd, and a v2 one), from /proc/self/mountinfo.
pub fn cgroup_mounts() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fstype = right.split(' ').next()?;
            let point = left.split(' ').nth(4)?;
            matches!(fstype, "cgroup" | "cgroup2").then(|| PathBuf::from(unescape_mountinfo(point)))
        })
        .collect();
    mounts.sort();
    mounts.dedup();
    mounts
}

/// The directories of cgroup `path` that exist, in every hierarchy.
pub fn cgroup_dirs(path: &str) -> Vec<PathBuf> {
    let rel = path.trim_start_matches('/');
    cgroup_mounts()
        .into_iter()
        .map(|m| m.join(rel))
        .filter(|d| d.is_dir())
        .collect()
}

/// The directories on `path` (ancestors included, hierarchy roots not) that do not exist yet
/// in any hierarchy, shallowest first.
fn missing_dirs(path: &str) -> Vec<PathBuf> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut missing = Vec::new();
    for m in cgroup_mounts() {
        let mut d = m.clone();
        for p in &parts {
            d.push(p);
            if !d.exists() {
                missing.push(d.clone());
            }
        }
    }
    missing
}

/// Process `pid`'s memory cgroup: the path of the memory line of /proc/<pid>/cgroup.
pub fn memory_cgroup_of(pid: u32) -> Result<String, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("read /proc/{pid}/cgroup: {e}"))?;
    text.lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            controllers
                .split(',')
                .any(|c| c == "memory")
                .then(|| path.to_string())
        })
        .ok_or_else(|| format!("no memory line in /proc/{pid}/cgroup:\n{text}"))
}

/// Processes (pid, command line) whose command line names `dir` or a path under it: what an
/// engine started with its private directory.
pub fn processes_naming(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.display().to_string();
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            line.contains(&needle)
                .then(|| (pid, line.trim().to_string()))
        })
        .collect()
}

/// SIGKILLs every process naming `dir` and waits (10 s at most) until they are gone.
pub fn kill_named(dir: &Path) {
    let start = Instant::now();
    loop {
        let procs = processes_naming(dir);
        if procs.is_empty() {
            return;
        }
        if start.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "processes naming {} survive SIGKILL: {procs:?}",
                dir.display()
            );
            return;
        }
        for (pid, _) in procs {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until no process naming `dir` has a command line containing one of `words`.
fn wait_gone(dir: &Path, words: &[&str], within: Duration) {
    let start = Instant::now();
    while start.elapsed() < within {
        let left = processes_naming(dir)
            .into_iter()
            .any(|(_, line)| words.iter().any(|w| line.contains(w)));
        if !left {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends SIGTERM to what `c` starts when the thread that started it ends (a test killed
/// mid-run leaves no daemon behind).
fn parent_death_signal(c: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        c.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Copies `from` (following links) to `at` inside `rootfs`, making its directories.
fn copy_into(rootfs: &Path, from: &Path, at: &Path) {
    let to = rootfs.join(at.strip_prefix("/").unwrap_or(at));
    if to.exists() {
        return;
    }
    std::fs::create_dir_all(to.parent().expect("a file's directory"))
        .unwrap_or_else(|e| panic!("mkdir for {}: {e}", to.display()));
    std::fs::copy(from, &to)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
}

/// The shared libraries `binary` loads (its interpreter included), as ldd names them; none for a
/// static binary.
fn shared_libraries(binary: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .unwrap_or_else(|e| panic!("run ldd {}: {e}", binary.display()));
    // ldd exits 1 with "not a dynamic executable" for a static binary.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, right)) => right.trim(),
                None => l,
            };
            let path = path.split(" (").next()?.trim();
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// A GET over HTTP/1.0 on a unix socket (the server closes the connection after the answer, so
/// the body is never chunked): the status code and body. A stream is read until the server ends
/// it (60 s of silence at most).
fn http_get(socket: &Path, path: &str) -> Result<(u16, String), String> {
    let mut s = UnixStream::connect(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in {text:?}"))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok((code, body.to_string()))
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A size as `docker stats` (binary units: `50.86MiB`) or `podman stats` (decimal units:
/// `85.59MB`) prints it, in bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit.trim() {
        "B" | "" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((number * scale).round() as u64)
}

/// Now, in Unix seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs()
}
