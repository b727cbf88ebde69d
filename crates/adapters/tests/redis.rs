//! The Redis adapter against a real `redis-server` (Debian's, on loopback) and memtide's real balloon server and hub: it registers, shrinks Redis's `maxmemory` by well over half — keys evicted, the server's resident memory falling — grows it back, and says bye when stopped.

use memtide_agents::hub::{AgentEvent, Closed, Hub, HubConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_balloon::protocol::ProgressStatus;
use memtide_model::{AppMove, Bytes, TenantId};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const T: TenantId = TenantId(5);

struct Only(Arc<AtomicU32>);

impl Tenants for Only {
    fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)> {
        (pid == self.0.load(Ordering::SeqCst)).then(|| (T, "cache".to_string()))
    }
}

/// A child killed and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

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

fn target(bytes: u64) -> AppMove {
    AppMove::Target {
        pool: Bytes(bytes).to_pages_floor(),
        deadline: Duration::from_secs(30),
    }
}

#[test]
fn the_redis_adapter_shrinks_redis_by_more_than_half_and_grows_it_back() {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        let why = "redis-server is not installed (apt-get install redis-server)";
        assert!(std::env::var_os("MEMTIDE_REQUIRE_LINUX").is_none(), "{why}");
        eprintln!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let redis = Proc(
        Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--maxmemory-policy", "allkeys-lru"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("redis://127.0.0.1:{port}");
    let client = redis::Client::open(url.as_str()).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let mut conn = loop {
        match client.get_connection() {
            Ok(c) => break c,
            Err(e) if Instant::now() > until => panic!("redis never answered: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    // 160 MiB of values.
    let value = vec![b'x'; 64 * 1024];
    for chunk in 0..40 {
        let mut pipe = redis::pipe();
        for i in 0..64 {
            pipe.set(format!("k{chunk}:{i}"), &value).ignore();
        }
        let _: () = pipe.query(&mut conn).unwrap();
    }
    let full = rss(redis.0.id());
    assert!(full > 150 * MIB, "redis RSS {full}");

    let pid = Arc::new(AtomicU32::new(0));
    let hub = Hub::new(HubConfig::default(), Box::new(Only(pid.clone())));
    let server = Server::start(
        &ServerConfig {
            socket: dir.path().join("b.sock"),
            mode: 0o600,
            max_connections: 4,
        },
        hub.handler(),
    )
    .unwrap();
    hub.set_wake(server.waker());
    let adapter = Proc(
        Command::new(env!("CARGO_BIN_EXE_memtide-adapter"))
            .args([
                "redis", "--url", &url, "--min", "16M", "--max", "256M", "--socket",
            ])
            .arg(server.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    pid.store(adapter.0.id(), Ordering::SeqCst);
    wait_for(&hub, "registration", |e| {
        matches!(e, AgentEvent::Registered { .. })
    });

    hub.apply(T, target(48 * MIB));
    wait_for(
        &hub,
        "done shrinking",
        |e| matches!(e, AgentEvent::Answered { status: ProgressStatus::Done, pool_bytes, .. } if *pool_bytes == 48 * MIB),
    );
    let info: String = redis::cmd("INFO").arg("memory").query(&mut conn).unwrap();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(used <= 48 * MIB, "used_memory {used}");
    let small = rss(redis.0.id());
    eprintln!("redis: used_memory {used}, RSS {full} -> {small} bytes");
    assert!(
        small * 2 <= full,
        "redis RSS {full} -> {small}: not halved by a 160 -> 48 MiB maxmemory"
    );

    hub.apply(T, target(256 * MIB));
    wait_for(
        &hub,
        "done growing",
        |e| matches!(e, AgentEvent::Answered { status: ProgressStatus::Done, pool_bytes, .. } if *pool_bytes == 256 * MIB),
    );
    let (_, max): (String, u64) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut conn)
        .unwrap();
    assert_eq!(max, 256 * MIB);

    // Stopped, the adapter says bye: memtide's limit has the tenant from then on.
    Command::new("kill")
        .arg(adapter.0.id().to_string())
        .status()
        .unwrap();
    wait_for(&hub, "bye", |e| {
        matches!(
            e,
            AgentEvent::Closed {
                why: Closed::Bye(_),
                ..
            }
        )
    });
    server.stop();
}
