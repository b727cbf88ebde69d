//! The memcached adapter against a real `memcached` (Debian's, on loopback, launched as docs/apps.md says) and memtide's real balloon server and hub: it registers, shrinks a memcached holding over 600 MiB by 512 MiB — pages freed, the server's resident memory falling — grows it back, and answers `failed` without dying when memcached is killed during a shrink.

use memtide_agents::hub::{AgentEvent, Closed, Hub, HubConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_balloon::protocol::ProgressStatus;
use memtide_model::{AppMove, Bytes, TenantId};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const T: TenantId = TenantId(6);

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

/// Whether memcached is here; missing, a skip, or a failure under `MEMTIDE_REQUIRE_LINUX`.
fn memcached_installed() -> bool {
    if Command::new("memcached").arg("-V").output().is_ok() {
        return true;
    }
    let why = "memcached is not installed (apt-get install memcached)";
    assert!(std::env::var_os("MEMTIDE_REQUIRE_LINUX").is_none(), "{why}");
    eprintln!("SKIPPED: {why}");
    false
}

/// memcached as docs/apps.md launches it: glibc unmapping freed pages, on loopback.
fn memcached(port: u16, mib: u64) -> Proc {
    let mut cmd = Command::new("memcached");
    cmd.env("MALLOC_MMAP_THRESHOLD_", "131072")
        .args(["-l", "127.0.0.1", "-U", "0", "-p", &port.to_string()])
        .args(["-m", &mib.to_string()]);
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if root {
        // memcached will not run as root without being told whom to run as.
        cmd.args(["-u", "root"]);
    }
    Proc(cmd.stdout(Stdio::null()).spawn().unwrap())
}

/// A plain text-protocol connection, for filling and reading memcached.
struct Client(BufReader<TcpStream>);

impl Client {
    fn connect(port: u16) -> Client {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => return Client(BufReader::new(s)),
                Err(e) if Instant::now() > until => panic!("memcached never answered: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn stats(&mut self, which: &str) -> BTreeMap<String, u64> {
        self.0
            .get_mut()
            .write_all(format!("{which}\r\n").as_bytes())
            .unwrap();
        let mut out = BTreeMap::new();
        loop {
            let mut line = String::new();
            assert!(self.0.read_line(&mut line).unwrap() > 0, "closed");
            let line = line.trim_end();
            if line == "END" {
                return out;
            }
            let mut parts = line.split(' ').skip(1);
            if let (Some(k), Some(Ok(v))) = (parts.next(), parts.next().map(str::parse)) {
                out.insert(k.to_string(), v);
            }
        }
    }

    /// `total` bytes of `value`-byte items, sent without replies.
    fn fill(&mut self, total: u64, value: usize) {
        let body = vec![b'x'; value];
        let mut batch = Vec::with_capacity(2 << 20);
        for i in 0..total / value as u64 {
            write!(batch, "set k{i} 0 0 {value} noreply\r\n").unwrap();
            batch.extend_from_slice(&body);
            batch.extend_from_slice(b"\r\n");
            if batch.len() > 1 << 20 {
                self.0.get_mut().write_all(&batch).unwrap();
                batch.clear();
            }
        }
        self.0.get_mut().write_all(&batch).unwrap();
    }
}

struct Memtide {
    hub: Hub,
    server: Server,
    pid: Arc<AtomicU32>,
}

fn memtide(dir: &Path) -> Memtide {
    let pid = Arc::new(AtomicU32::new(0));
    let hub = Hub::new(HubConfig::default(), Box::new(Only(pid.clone())));
    let server = Server::start(
        &ServerConfig {
            socket: dir.join("b.sock"),
            mode: 0o600,
            max_connections: 4,
        },
        hub.handler(),
    )
    .unwrap();
    hub.set_wake(server.waker());
    Memtide { hub, server, pid }
}

impl Memtide {
    fn adapter(&self, port: u16, max: &str) -> Proc {
        let adapter = Proc(
            Command::new(env!("CARGO_BIN_EXE_memtide-adapter"))
                .args([
                    "memcached",
                    "--url",
                    &format!("memcache://127.0.0.1:{port}"),
                ])
                .args(["--min", "64M", "--max", max, "--socket"])
                .arg(self.server.path())
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        self.pid.store(adapter.0.id(), Ordering::SeqCst);
        self.wait_for("registration", |e| {
            matches!(e, AgentEvent::Registered { .. })
        });
        adapter
    }

    /// The first event `want` takes, within 60 s (a bound on a hang, not a timed assertion).
    fn wait_for(&self, what: &str, mut want: impl FnMut(&AgentEvent) -> bool) -> AgentEvent {
        let until = Instant::now() + Duration::from_secs(60);
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
        panic!("no {what} within 60 s; events: {seen:?}");
    }

    fn target(&self, bytes: u64) {
        self.hub.apply(
            T,
            AppMove::Target {
                pool: Bytes(bytes).to_pages_floor(),
                deadline: Duration::from_secs(30),
            },
        );
    }

    fn done(&self, what: &str, bytes: u64) {
        self.wait_for(what, |e| {
            matches!(e, AgentEvent::Answered { status: ProgressStatus::Done, pool_bytes, .. }
                if *pool_bytes == bytes)
        });
    }
}

#[test]
fn the_memcached_adapter_shrinks_memcached_by_more_than_half_and_grows_it_back() {
    if !memcached_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = memcached(port, 1024);
    let mut client = Client::connect(port);
    // 600 MiB of 4,000-byte values: enough items that memcached's hash table grows.
    client.fill(600 * MIB, 4000);
    let held = client.stats("stats slabs")["total_malloced"];
    let full = rss(server.0.id());
    assert!(
        held >= 600 * MIB,
        "memcached holds {held} bytes of slab pages"
    );
    assert!(full >= 600 * MIB, "memcached RSS {full}");

    let memtide = memtide(dir.path());
    let adapter = memtide.adapter(port, "1024M");
    // The agent's first statistics, so the shrink knows what the pool holds.
    std::thread::sleep(Duration::from_millis(2500));

    // 512 MiB of slab pages given back (docs/apps.md quotes the time), well over half.
    let small = (held - 512 * MIB) / MIB * MIB;
    assert!(small * 2 <= held);
    let asked = Instant::now();
    memtide.target(small);
    memtide.done("done shrinking", small);
    let took = asked.elapsed();
    let stats = client.stats("stats");
    let malloced = client.stats("stats slabs")["total_malloced"];
    let now = rss(server.0.id());
    eprintln!(
        "memcached: {held} -> {malloced} bytes of slab pages, RSS {full} -> {now} bytes, \
         target to done in {took:?}"
    );
    assert_eq!(stats["limit_maxbytes"], small);
    assert!(malloced <= small, "total_malloced {malloced}");
    let released = held - small;
    assert!(
        full.saturating_sub(now) * 2 >= released,
        "memcached RSS {full} -> {now}: fell by less than half of the {released} released"
    );

    memtide.target(1024 * MIB);
    memtide.done("done growing", 1024 * MIB);
    assert_eq!(client.stats("stats")["limit_maxbytes"], 1024 * MIB);
    // The cache fills again up to its new limit.
    client.fill(64 * MIB, 4000);
    assert!(client.stats("stats slabs")["total_malloced"] > small);

    // Stopped, the adapter says bye: memtide's limit has the tenant from then on.
    Command::new("kill")
        .arg(adapter.0.id().to_string())
        .status()
        .unwrap();
    memtide.wait_for("bye", |e| {
        matches!(
            e,
            AgentEvent::Closed {
                why: Closed::Bye(_),
                ..
            }
        )
    });
    memtide.server.stop();
}

#[test]
fn memcached_killed_during_a_shrink_is_a_failed_answer_and_the_adapter_keeps_running() {
    if !memcached_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = memcached(port, 512);
    Client::connect(port).fill(128 * MIB, 4000);
    let memtide = memtide(dir.path());
    let mut adapter = memtide.adapter(port, "512M");

    // memcached stopped, so the shrink waits on it, then killed under it.
    let pid = server.0.id().to_string();
    Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    memtide.target(96 * MIB);
    std::thread::sleep(Duration::from_millis(500));
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let failed = memtide.wait_for("failed", |e| {
        matches!(
            e,
            AgentEvent::Answered {
                status: ProgressStatus::Failed,
                ..
            }
        )
    });
    let AgentEvent::Answered { reason, .. } = &failed else {
        unreachable!()
    };
    eprintln!("the shrink failed: {reason:?}");
    assert!(
        reason.as_deref().is_some_and(|r| r.contains("memcached")),
        "{failed:?}"
    );
    assert!(
        adapter.0.try_wait().unwrap().is_none(),
        "the adapter exited"
    );

    // memcached back on the same port: the adapter connects again and shrinks it.
    let _server = memcached(port, 512);
    Client::connect(port).fill(128 * MIB, 4000);
    memtide.target(80 * MIB);
    memtide.done("done after the restart", 80 * MIB);
    assert!(adapter.0.try_wait().unwrap().is_none());
    memtide.server.stop();
}
