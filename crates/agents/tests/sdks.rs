//! Every SDK in `sdk/`, tested from the workspace's test command: each one's own tests (the vectors, its agent against a test memtide), and each one's sample pool live against memtide's real server and hub over a Unix socket — registered for its own process, shrunk and grown back, its resident memory following.
//!
//! A missing toolchain skips its SDK with the reason printed, unless `MEMTIDE_REQUIRE_LINUX`
//! is set (CI sets it, and installs every toolchain): then it fails.

use memtide_agents::hub::{AgentEvent, Hub, HubConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_balloon::protocol::ProgressStatus;
use memtide_model::{AppMove, Bytes, Pages, TenantId};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const TENANT: TenantId = TenantId(3);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `PATH` with the places toolchains are installed outside Debian's (Go's tarball).
fn path_env() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    format!("{path}:/usr/local/go/bin")
}

/// Whether `tool` runs; when it does not, a failure under `MEMTIDE_REQUIRE_LINUX`, else a
/// printed skip.
fn have(tool: &str, sdk: &str) -> bool {
    // `go` has no `--version`: it asks `go version`.
    let ok = Command::new(tool)
        .arg(if tool == "go" { "version" } else { "--version" })
        .env("PATH", path_env())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let why = format!("{sdk} SDK: `{tool}` is not installed");
        assert!(std::env::var_os("MEMTIDE_REQUIRE_LINUX").is_none(), "{why}");
        eprintln!("skipped: {why}");
    }
    ok
}

/// Runs a command in the repository, failing with its output if it fails.
fn run(what: &str, cmd: &mut Command) {
    let out = cmd
        .current_dir(repo())
        .env("PATH", path_env())
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_go_sdk_passes_its_tests() {
    if have("go", "Go") {
        run(
            "go test",
            Command::new("go").args(["-C", "sdk/go", "test", "./..."]),
        );
    }
}

#[test]
fn the_python_sdk_passes_its_tests() {
    if have("python3", "Python") {
        run(
            "python unittest",
            Command::new("python3")
                .args(["-m", "unittest", "discover", "-s", "sdk/python/tests"])
                .env("PYTHONPATH", repo().join("sdk/python/src")),
        );
    }
}

/// The one process the hub accepts: the sample's, once it is spawned.
struct Only(Arc<AtomicU32>);

impl Tenants for Only {
    fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)> {
        (pid == self.0.load(Ordering::SeqCst)).then(|| (TENANT, "sample".to_string()))
    }
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Kills the sample when the test ends, however it ends.
struct Sample(Child);

impl Drop for Sample {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn target(bytes: u64) -> AppMove {
    AppMove::Target {
        pool: Bytes(bytes).to_pages_floor(),
        deadline: Duration::from_secs(30),
    }
}

/// Waits up to 60 s for an event `want` accepts, failing with what came instead.
fn wait_for(hub: &Hub, what: &str, mut want: impl FnMut(&AgentEvent) -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while Instant::now() < until {
        for e in hub.drain_events() {
            if want(&e) {
                return;
            }
            seen.push(e);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no {what} within 60 s; events: {seen:?}");
}

/// The sample of one SDK, started with `argv` (its socket flag last), registers, shrinks from
/// 96 MiB to 16 MiB and grows back, its RSS falling and rising with the pool.
fn sample_follows_targets(sdk: &str, argv: &[&str], env: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("b.sock");
    let pid = Arc::new(AtomicU32::new(0));
    let hub = Hub::new(HubConfig::default(), Box::new(Only(pid.clone())));
    let server = Server::start(
        &ServerConfig {
            socket: socket.clone(),
            mode: 0o600,
            max_connections: 8,
        },
        hub.handler(),
    )
    .unwrap();
    hub.set_wake(server.waker());
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .arg(&socket)
        .current_dir(repo())
        .env("PATH", path_env())
        .env("PYTHONPATH", repo().join("sdk/python/src"))
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let sample = Sample(cmd.spawn().unwrap_or_else(|e| panic!("{sdk}: {e}")));
    let child = sample.0.id();
    pid.store(child, Ordering::SeqCst);
    wait_for(
        &hub,
        "registration",
        |e| matches!(e, AgentEvent::Registered { tenant, .. } if *tenant == TENANT),
    );
    let full = rss_bytes(child);
    assert!(full >= 90 * MIB, "{sdk}: RSS {full} with a 96 MiB pool");

    hub.apply(TENANT, target(16 * MIB));
    wait_for(
        &hub,
        "done shrinking",
        |e| matches!(e, AgentEvent::Answered { status: ProgressStatus::Done, pool_bytes, .. } if *pool_bytes == 16 * MIB),
    );
    let small = rss_bytes(child);
    assert!(
        small + 70 * MIB <= full,
        "{sdk}: RSS {full} -> {small} for a pool of 96 -> 16 MiB"
    );

    hub.apply(TENANT, target(96 * MIB));
    wait_for(
        &hub,
        "done growing",
        |e| matches!(e, AgentEvent::Answered { status: ProgressStatus::Done, pool_bytes, .. } if *pool_bytes == 96 * MIB),
    );
    let again = rss_bytes(child);
    assert!(
        again >= small + 70 * MIB,
        "{sdk}: RSS {small} -> {again} for a pool of 16 -> 96 MiB"
    );
    let lever = hub.lever(TENANT, Pages::ZERO, hub.now()).unwrap();
    assert_eq!(lever.pool, Bytes(96 * MIB).to_pages_floor());
    server.stop();
}

const POOL_FLAGS: [&str; 8] = [
    "--pool",
    "96M",
    "--min",
    "0",
    "--max",
    "128M",
    "--granule",
    "1M",
];

#[test]
fn the_go_sample_follows_memtides_targets() {
    if have("go", "Go") {
        let bin = tempfile::tempdir().unwrap();
        let exe = bin.path().join("balloon-pool");
        run(
            "go build",
            Command::new("go")
                .args(["-C", "sdk/go", "build", "-o"])
                .arg(&exe)
                .arg("./cmd/balloon-pool"),
        );
        let exe = exe.to_string_lossy().into_owned();
        let mut argv = vec![exe.as_str()];
        argv.extend(POOL_FLAGS);
        argv.push("--socket");
        sample_follows_targets("Go", &argv, &[]);
    }
}

#[test]
fn the_python_sample_follows_memtides_targets() {
    if have("python3", "Python") {
        let mut argv = vec!["python3", "sdk/python/examples/pool.py"];
        argv.extend(POOL_FLAGS);
        argv.extend(["--lookups-per-second", "0", "--socket"]);
        sample_follows_targets("Python", &argv, &[]);
    }
}

#[test]
fn the_rust_sample_follows_memtides_targets() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(
        "cargo build --example pool",
        Command::new(&cargo).args([
            "build",
            "--release",
            "-p",
            "memtide-balloon",
            "--example",
            "pool",
        ]),
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    let exe = target.join("release/examples/pool");
    let exe = exe.to_string_lossy().into_owned();
    let mut argv = vec![exe.as_str()];
    argv.extend(POOL_FLAGS);
    argv.extend(["--small-pages", "--lookups", "0", "--socket"]);
    sample_follows_targets("Rust", &argv, &[]);
}

/// One test for both, since the sample runs from the classes `mvn test` compiles (two Maven
/// runs at once would write the same `target/`).
#[test]
fn the_java_sdk_passes_its_tests_and_its_sample_follows_memtides_targets() {
    if !(have("mvn", "Java") && have("java", "Java")) {
        return;
    }
    run(
        "mvn test",
        Command::new("mvn").args(["-B", "-q", "-f", "sdk/java/pom.xml", "test"]),
    );
    let mut argv = vec![
        "java",
        "-cp",
        "sdk/java/target/classes",
        "io.memtide.balloon.sample.PoolSample",
    ];
    argv.extend(POOL_FLAGS);
    argv.push("--socket");
    // glibc returns each 1 MiB direct buffer to the OS only when it was mmap'd
    // (sdk/java/README.md, "How honest the release is").
    sample_follows_targets("Java", &argv, &[("MALLOC_MMAP_THRESHOLD_", "131072")]);
}

/// One test for both, since the sample is built into the `build/` the tests use.
#[test]
fn the_c_sdk_passes_its_tests_and_its_sample_follows_memtides_targets() {
    if !(have("make", "C") && have("cc", "C")) {
        return;
    }
    run(
        "make test",
        Command::new("make").args(["-C", "sdk/c", "test"]),
    );
    run(
        "make examples",
        Command::new("make").args(["-C", "sdk/c", "examples"]),
    );
    let mut argv = vec!["sdk/c/build/pool"];
    argv.extend(POOL_FLAGS);
    argv.extend(["--no-huge-pages", "--socket"]);
    sample_follows_targets("C", &argv, &[]);
}
