//! The Redis adapter against a real `redis-server` (Debian's, on loopback) and memtide's real balloon server and hub: it registers, shrinks Redis's `maxmemory` by well over half — keys evicted, the server's resident memory falling — grows it back, and when stopped says bye and gives Redis back the `maxmemory` it found.

mod common;

use common::{rss, Memtide, Proc, TestCgroup, MIB};
use memtide_agents::hub::{AgentEvent, Closed};
use memtide_testkit::free_port;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn the_redis_adapter_shrinks_redis_by_more_than_half_and_grows_it_back() {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        let why = "redis-server is not installed (apt-get install redis-server)";
        memtide_testkit::skip_or_fail(module_path!(), why);
        return;
    }
    // Server and adapter in a cgroup of their own: the adapter confirms a shrink on its
    // cgroup's usage, which must be the server's and nothing else's.
    let Some(cg) = TestCgroup::new("redis") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let redis = Proc(
        cg.command("redis-server")
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

    let memtide = Memtide::start(dir.path());
    let mut command = cg.command(env!("CARGO_BIN_EXE_memtide-adapter"));
    command.args(["redis", "--url", &url, "--min", "16M", "--max", "256M"]);
    let mut adapter = memtide.spawn(command);
    memtide.registered();

    memtide.target(48 * MIB, Duration::from_secs(30));
    memtide.done(48 * MIB);
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

    memtide.target(256 * MIB, Duration::from_secs(30));
    memtide.done(256 * MIB);
    let (_, max): (String, u64) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut conn)
        .unwrap();
    assert_eq!(max, 256 * MIB);

    // Stopped, the adapter says bye (memtide's limit has the tenant from then on) and gives
    // Redis back the maxmemory it found: none.
    let status = adapter.stop();
    assert!(status.success(), "adapter exit {status}");
    memtide.wait_for("bye", |e| {
        matches!(
            e,
            AgentEvent::Closed {
                why: Closed::Bye(_),
                ..
            }
        )
    });
    let (_, max): (String, u64) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        max, 0,
        "the maxmemory Redis had at start (none) is given back"
    );
    memtide.server.stop();
}

#[test]
fn a_url_carrying_a_password_is_refused_in_one_line_that_does_not_show_it() {
    for (kind, url) in [
        ("redis", "redis://:s3cret@127.0.0.1:1"),
        ("mariadb", "mysql://root:s3cret@127.0.0.1:1"),
        ("memcached", "memcache://u:s3cret@127.0.0.1:1"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_memtide-adapter"))
            .args([kind, "--url", url, "--min", "8M", "--max", "64M"])
            .args(["--socket", "/nonexistent/balloon.sock"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{kind}: {said}");
        assert_eq!(said.lines().count(), 1, "{kind}: {said}");
        assert!(
            said.contains("--url") && said.contains("--password-file"),
            "{said}"
        );
        assert!(said.contains("***@127.0.0.1:1"), "{said}");
        assert!(
            !said.contains("s3cret"),
            "{kind} shows the password: {said}"
        );
    }
}
