//! The memcached adapter against a real `memcached` (Debian's, on loopback, launched as docs/apps.md says) and memtide's real balloon server and hub: it registers, shrinks a memcached holding over 600 MiB by 512 MiB — pages freed, the server's resident memory falling — grows it back, and answers `failed` without dying when memcached is killed during a shrink; stopped, it gives the restarted memcached back the limit it found.

mod common;

use common::{rss, Memtide, Proc, TestCgroup, MIB};
use memtide_agents::hub::{AgentEvent, Closed};
use memtide_balloon::protocol::ProgressStatus;
use memtide_testkit::free_port;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether memcached is here; missing, a skip, or a failure under `MEMTIDE_REQUIRE_LINUX`.
fn memcached_installed() -> bool {
    if Command::new("memcached").arg("-V").output().is_ok() {
        return true;
    }
    let why = "memcached is not installed (apt-get install memcached)";
    memtide_testkit::skip_or_fail(module_path!(), why);
    false
}

/// memcached as docs/apps.md launches it: glibc unmapping freed pages, on loopback; in the
/// memory cgroup `cg`, where its adapter confirms a shrink on the usage.
fn memcached(cg: &TestCgroup, port: u16, mib: u64) -> Proc {
    let mut cmd = cg.command("memcached");
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

/// The memcached adapter on `port` with `--max max`, registered, in the server's cgroup `cg`.
fn adapter(memtide: &Memtide, cg: &TestCgroup, port: u16, max: &str) -> Proc {
    let mut command = cg.command(env!("CARGO_BIN_EXE_memtide-adapter"));
    command
        .args([
            "memcached",
            "--url",
            &format!("memcache://127.0.0.1:{port}"),
        ])
        .args(["--min", "64M", "--max", max]);
    let adapter = memtide.spawn(command);
    memtide.registered();
    adapter
}

#[test]
fn the_memcached_adapter_shrinks_memcached_by_more_than_half_and_grows_it_back() {
    if !memcached_installed() {
        return;
    }
    let Some(cg) = TestCgroup::new("memcached-shrink") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = memcached(&cg, port, 1024);
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

    let memtide = Memtide::start(dir.path());
    let adapter = adapter(&memtide, &cg, port, "1024M");
    // The agent's first statistics, so the shrink knows what the pool holds.
    std::thread::sleep(Duration::from_millis(2500));

    // 512 MiB of slab pages given back (docs/apps.md quotes the time), well over half.
    let small = (held - 512 * MIB) / MIB * MIB;
    assert!(small * 2 <= held);
    let asked = Instant::now();
    memtide.target(small, Duration::from_secs(30));
    memtide.done(small);
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

    memtide.target(1024 * MIB, Duration::from_secs(30));
    memtide.done(1024 * MIB);
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
    let Some(cg) = TestCgroup::new("memcached-killed") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = memcached(&cg, port, 512);
    Client::connect(port).fill(128 * MIB, 4000);
    let memtide = Memtide::start(dir.path());
    let mut adapter = adapter(&memtide, &cg, port, "512M");

    // memcached stopped, so the shrink waits on it, then killed under it.
    let pid = server.0.id().to_string();
    Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    memtide.target(96 * MIB, Duration::from_secs(30));
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
    let _server = memcached(&cg, port, 512);
    Client::connect(port).fill(128 * MIB, 4000);
    memtide.target(80 * MIB, Duration::from_secs(30));
    memtide.done(80 * MIB);
    assert!(adapter.0.try_wait().unwrap().is_none());

    // Stopped, it gives memcached back the limit it found at start.
    let status = adapter.stop();
    assert!(status.success(), "adapter exit {status}");
    assert_eq!(
        Client::connect(port).stats("stats")["limit_maxbytes"],
        512 * MIB
    );
    memtide.server.stop();
}
