//! An unmodified server under `memtide daemon` through its adapter: a real `redis-server` in an adopted cgroup, `[tenant.app] kind = "redis"`; the daemon starts `memtide-adapter` in the tenant's cgroup, and when the budget runs short Redis is asked to shrink its own `maxmemory` before the limit moves; its memory really goes back, nothing is killed, and at stop the adapter goes and the limit is given back.

mod linux_host;

use linux_host::samples::run;
use linux_host::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn the_daemon_shrinks_redis_through_its_adapter() {
    let test = "the_daemon_shrinks_redis_through_its_adapter";
    let Some(linux) = linux(test) else {
        return;
    };
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        skip_or_fail(test, "redis-server is not installed");
        return;
    }
    // The daemon runs the adapter from beside its own binary.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(
        "cargo build memtide-adapter",
        Command::new(cargo).args(["build", "--release", "-p", "memtide-adapter"]),
    );
    let cg = linux.cgroup("redis");
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let procs = cg.dir().join("cgroup.procs");
    let redis = Toucher(
        Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(&procs)
            .args([
                "redis-server",
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--maxmemory-policy",
                "allkeys-lru",
            ])
            .arg("--dir")
            .arg(tmp.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("redis://127.0.0.1:{port}");
    let until = Instant::now() + Duration::from_secs(10);
    while Command::new("redis-cli")
        .args(["-p", &port.to_string(), "ping"])
        .output()
        .map_or(true, |o| {
            !String::from_utf8_lossy(&o.stdout).contains("PONG")
        })
    {
        assert!(Instant::now() < until, "redis never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    // 160 MiB of 64 KiB values, through redis-cli's pipe mode.
    let value = "x".repeat(64 * 1024);
    let mut script = String::new();
    for i in 0..2560 {
        script.push_str(&format!("SET k{i} {value}\n"));
    }
    let mut fill = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(fill.stdin.as_mut().unwrap(), script.as_bytes()).unwrap();
    drop(fill.stdin.take());
    assert!(fill.wait().unwrap().success());
    let full = cg.sample().usage.0;
    assert!(full > 150 * MIB, "redis holds {full} bytes");

    let config = format!(
        r#"
[daemon]
tick = "250ms"
listen = "{{listen}}"
state_file = "{{state}}"

[host]
parent = "self"
budget = "128M"

[policy]
sampling_period = "1s"

[rails]
floor_margin = "16M"

[[tenant]]
name = "cache"
cgroup = "{}"
min = "16M"
max = "1G"

[tenant.app]
kind = "redis"
url = "{url}"
min = "16M"
max = "256M"
"#,
        cg.path
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    daemon.wait_for_log(&["agent_registered"], Duration::from_secs(30));
    // The budget (128 MiB) is the target: Redis gives back what it holds above it.
    daemon.wait_until(
        "redis shrinks under the budget",
        Duration::from_secs(90),
        |_| cg.sample().usage.0 < 128 * MIB,
    );
    daemon.wait_for_log(&["agent_answered", "status=done"], Duration::from_secs(10));
    // The status names the pool, what memtide wants, the last resize and who holds the tenant.
    let app = daemon
        .tenant("cache")
        .app
        .expect("the cache tenant has an app");
    assert_eq!(
        (app.kind.as_str(), app.held_by.as_str(), app.why.as_deref()),
        ("cache", "app", None),
        "{app:?}"
    );
    assert!(app.pool_bytes <= 160 * MIB, "{app:?}");
    let last = app.last_resize.clone().expect("a resize was answered");
    assert!(last.status == "done" && last.took_s > 0.0, "{app:?}");
    let log = daemon.log_text();
    assert!(
        !log.contains("taken over"),
        "Redis was confirmed on its cgroup before done, so never judged dishonest or stuck: {log}"
    );
    let mut redis = redis;
    assert!(redis.0.try_wait().unwrap().is_none(), "redis was killed");
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}");
    assert_eq!(limit_bytes(&cg.sample()), None, "the limit was given back");
    let pids = cg.cgroup.pids().unwrap();
    assert_eq!(
        pids,
        vec![redis.0.id()],
        "only redis is left: the adapter is stopped"
    );
}
