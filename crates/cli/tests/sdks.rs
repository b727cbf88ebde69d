//! Every SDK in `sdk/` (and the Rust one in `crates/balloon`), from the workspace's test command: each one's own tests (the vectors, its agent against a test memtide), then its sample pool live against memtide's balloon server and hub over a Unix socket — registered for its own process, shrunk and grown back, its resident memory following. (`linux_balloon.rs` runs each sample under a real `memtide daemon` too.)
//!
//! A missing toolchain skips its SDK with the reason printed, unless `MEMTIDE_REQUIRE_LINUX=1`
//! (CI sets it, and installs every toolchain): then it fails.

use memtide_agents::hub::{AgentEvent, Hub, SessionConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_balloon::protocol::ProgressStatus;
use memtide_model::{AppMove, Bytes, Pages, TenantId};
use memtide_testkit::repo;
use memtide_testkit::samples::{run, Sdk};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const TENANT: TenantId = TenantId(3);

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

/// `sdk`'s sample registers, shrinks from 96 MiB to 16 MiB and grows back, its RSS falling
/// and rising with the pool.
fn sample_follows_targets(test: &str, sdk: Sdk) {
    let Some(sample) = sdk.build(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pid = Arc::new(AtomicU32::new(0));
    let hub = Hub::new(SessionConfig::default(), Box::new(Only(pid.clone())));
    let server = Server::start(
        &ServerConfig {
            socket: dir.path().join("b.sock"),
            mode: 0o600,
            max_connections: 8,
            group: None,
            max_per_uid: 8,
            descriptors: None,
        },
        hub.handler(),
    )
    .unwrap();
    hub.set_wake(server.waker());
    let running = sample.start(("96M", "0", "128M"), server.path(), None);
    let child = running.0.id();
    pid.store(child, Ordering::SeqCst);
    wait_for(
        &hub,
        "registration",
        |e| matches!(e, AgentEvent::Registered { tenant, .. } if *tenant == TENANT),
    );
    let full = rss_bytes(child);
    assert!(full >= 90 * MIB, "{sdk:?}: RSS {full} with a 96 MiB pool");

    hub.apply(TENANT, target(16 * MIB));
    wait_for(
        &hub,
        "done shrinking",
        |e| matches!(e, AgentEvent::Answered { status: ProgressStatus::Done, pool_bytes, .. } if *pool_bytes == 16 * MIB),
    );
    let small = rss_bytes(child);
    assert!(
        small + 70 * MIB <= full,
        "{sdk:?}: RSS {full} -> {small} for a pool of 96 -> 16 MiB"
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
        "{sdk:?}: RSS {small} -> {again} for a pool of 16 -> 96 MiB"
    );
    let lever = hub.lever(TENANT, Pages::ZERO, hub.now()).unwrap();
    assert_eq!(lever.pool, Bytes(96 * MIB).to_pages_floor());
    server.stop();
}

#[test]
fn the_rust_sample_follows_memtides_targets() {
    // The crate's own tests run with the workspace's.
    sample_follows_targets("the_rust_sample_follows_memtides_targets", Sdk::Rust);
}

#[test]
fn the_go_sdk_passes_its_tests_and_its_sample_follows_memtides_targets() {
    let test = "the_go_sdk_passes_its_tests_and_its_sample_follows_memtides_targets";
    if memtide_testkit::samples::have(test, "go") {
        run(
            "go test",
            Command::new("go").args(["-C", "sdk/go", "test", "./..."]),
        );
        sample_follows_targets(test, Sdk::Go);
    }
}

#[test]
fn the_python_sdk_passes_its_tests_and_its_sample_follows_memtides_targets() {
    let test = "the_python_sdk_passes_its_tests_and_its_sample_follows_memtides_targets";
    if memtide_testkit::samples::have(test, "python3") {
        run(
            "python unittest",
            Command::new("python3")
                .args(["-m", "unittest", "discover", "-s", "sdk/python/tests"])
                .env("PYTHONPATH", repo().join("sdk/python/src")),
        );
        sample_follows_targets(test, Sdk::Python);
    }
}

/// The tests and the sample in one test: both use `sdk/java/target`.
#[test]
fn the_java_sdk_passes_its_tests_and_its_sample_follows_memtides_targets() {
    let test = "the_java_sdk_passes_its_tests_and_its_sample_follows_memtides_targets";
    if memtide_testkit::samples::have(test, "mvn") {
        run(
            "mvn test",
            Command::new("mvn").args(["-B", "-q", "-f", "sdk/java/pom.xml", "test"]),
        );
        sample_follows_targets(test, Sdk::Java);
    }
}

/// The tests and the sample in one test: both use `sdk/c/build`.
#[test]
fn the_c_sdk_passes_its_tests_and_its_sample_follows_memtides_targets() {
    let test = "the_c_sdk_passes_its_tests_and_its_sample_follows_memtides_targets";
    if memtide_testkit::samples::have(test, "make") {
        run(
            "make test",
            Command::new("make").args(["-C", "sdk/c", "test"]),
        );
        sample_follows_targets(test, Sdk::C);
    }
}
