//! Unmodified servers under `memtide daemon` through their adapters: a real `redis-server` in an adopted cgroup with `[tenant.app] kind = "redis"`. When the budget runs short Redis is asked to shrink its own `maxmemory` before the limit moves, its memory really goes back, nothing is killed, and at stop the adapter goes and the limit is given back. And the failure paths — a wrong password, a server that refuses, one that hangs — each end with the cgroup limit (the OS mechanism) holding the tenant and the reason logged, with no OOM kill and the tenant beside it untouched. And the adapters' life: Redis and MariaDB get back the pool they had before memtide when the daemon stops, also after a `kill -9` of the daemon (which takes its adapters with it) and a restart; a server killed mid-resize or shut down while managed has its tenant dropped and its limit and OOM killer given back, though its adapter ran.

use crate::host::mariadb::{self, DataDir, Mariadbd, Tables};
use crate::host::*;
use memtide_testkit::samples::build_binaries;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Root, cgroups, redis-server and a built `memtide-adapter` (the daemon runs the one beside
/// its own binary).
fn prerequisites(test: &str) -> Option<Linux> {
    let linux = linux(test)?;
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        skip_or_fail(test, "redis-server is not installed");
        return None;
    }
    build_binaries();
    Some(linux)
}

/// A redis-server in its own test cgroup, holding about `mib` MiB of 64 KiB values.
struct Redis {
    cg: TestCgroup,
    server: Toucher,
    port: u16,
    password: Option<String>,
}

impl Redis {
    fn start(linux: &Linux, dir: &Path, name: &str, extra: &[&str], mib: u64) -> Redis {
        let cg = linux.cgroup(name);
        let port = free_port();
        let procs = cg.dir().join("cgroup.procs");
        let server = Toucher(
            Command::new("sh")
                .arg("-c")
                .arg("echo $$ > \"$0\" && exec \"$@\"")
                .arg(&procs)
                .args(["redis-server", "--port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--maxmemory-policy", "allkeys-lru"])
                .args(extra)
                .arg("--dir")
                .arg(dir)
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let password = extra
            .iter()
            .position(|a| *a == "--requirepass")
            .map(|i| extra[i + 1].to_string());
        let r = Redis {
            cg,
            server,
            port,
            password,
        };
        let until = Instant::now() + Duration::from_secs(10);
        while !r.cli(&["ping"]).contains("PONG") {
            assert!(Instant::now() < until, "redis never answered");
            std::thread::sleep(Duration::from_millis(50));
        }
        // 64 KiB values through redis-cli's pipe mode.
        let value = "x".repeat(64 * 1024);
        let script: String = (0..mib * 16)
            .map(|i| format!("SET k{i} {value}\n"))
            .collect();
        let mut fill = r.command().stdin(Stdio::piped()).spawn().unwrap();
        std::io::Write::write_all(fill.stdin.as_mut().unwrap(), script.as_bytes()).unwrap();
        drop(fill.stdin.take());
        assert!(fill.wait().unwrap().success());
        r
    }

    fn command(&self) -> Command {
        let mut c = Command::new("redis-cli");
        c.args(["-p", &self.port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(p) = &self.password {
            c.args(["--no-auth-warning", "-a", p]);
        }
        c
    }

    fn cli(&self, args: &[&str]) -> String {
        self.command()
            .args(args)
            .stdout(Stdio::piped())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe { libc::kill(self.server.0.id() as i32, signal) };
    }
}

/// The daemon's configuration: the Redis tenant `cache` with its `[tenant.app]` (plus
/// `app_extra`), and a launched bystander touching 24 MiB.
fn config(redis: &Redis, budget: &str, app_extra: &str) -> String {
    format!(
        r#"
[daemon]
tick = "250ms"
listen = "{{listen}}"
state_file = "{{state}}"

[host]
parent = "self"
budget = "{budget}"

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
url = "{}"
min = "16M"
max = "256M"
{app_extra}

[[tenant]]
name = "bystander"
command = ["memtide-toucher", "--active", "24M"]
min = "16M"
max = "256M"
"#,
        redis.cg.path,
        redis.url()
    )
}

/// The bystander is untouched: running, never limited below what it uses, nothing swapped.
fn bystander_untouched(daemon: &Daemon) {
    let b = daemon.tenant("bystander");
    assert!(
        b.limit_bytes.is_none_or(|l| l >= b.allocated_bytes),
        "the bystander was squeezed: {b:?}"
    );
    assert_eq!(b.swap_bytes.unwrap_or(0), 0, "{b:?}");
    assert!(b.allocated_bytes > 20 * MIB, "the bystander runs: {b:?}");
}

/// The OS mechanism holds `cache`: a limit is set on its cgroup, nothing was OOM-killed, and
/// the server still runs unless the test killed it.
fn os_holds(daemon: &mut Daemon, redis: &Redis) {
    daemon.wait_until(
        "the limit holds the cache tenant",
        Duration::from_secs(60),
        |s| {
            s.tenants
                .iter()
                .any(|t| t.name == "cache" && t.limit_bytes.is_some())
        },
    );
    assert_eq!(
        redis.cg.cgroup.oom_kills().unwrap_or(Some(0)),
        Some(0),
        "nothing is OOM-killed"
    );
}

#[test]
fn the_daemon_shrinks_redis_through_its_adapter() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "the_daemon_shrinks_redis_through_its_adapter";
    let Some(linux) = prerequisites(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut redis = Redis::start(&linux, tmp.path(), "redis", &[], 160);
    let full = redis.cg.sample().usage.0;
    assert!(full > 150 * MIB, "redis holds {full} bytes");
    let mut daemon = Daemon::start(tmp.path(), &config(&redis, "160M", ""), &[]);
    daemon.wait_for_log(&["agent_registered"], Duration::from_secs(30));
    // Redis gives back what it holds above its share of the budget.
    daemon.wait_until(
        "redis shrinks under the budget",
        Duration::from_secs(90),
        |_| redis.cg.sample().usage.0 < 128 * MIB,
    );
    daemon.wait_for_log(&["agent_answered", "status=done"], Duration::from_secs(10));
    // A pool that served requests goes down in paced moves, 5 s apart.
    daemon.wait_until(
        "the pool is paced down to its share",
        Duration::from_secs(60),
        |s| {
            s.tenants
                .iter()
                .filter(|t| t.name == "cache")
                .filter_map(|t| t.app.as_ref())
                .any(|a| a.pool_bytes <= 160 * MIB)
        },
    );
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
    bystander_untouched(&daemon);
    assert!(
        redis.server.0.try_wait().unwrap().is_none(),
        "redis was killed"
    );
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}");
    assert_eq!(
        limit_bytes(&redis.cg.sample()),
        None,
        "the limit was given back"
    );
    assert_eq!(
        redis.cg.cgroup.pids().unwrap(),
        vec![redis.server.0.id()],
        "only redis is left: the adapter is stopped"
    );
}

#[test]
fn a_wrong_password_leaves_redis_to_its_limit_and_says_why() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_wrong_password_leaves_redis_to_its_limit_and_says_why";
    let Some(linux) = prerequisites(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let redis = Redis::start(&linux, tmp.path(), "auth", &["--requirepass", "right"], 120);
    let pass = tmp.path().join("redis.pass");
    std::fs::write(&pass, "wrong\n").unwrap();
    let extra = format!("password_file = \"{}\"", pass.display());
    let mut daemon = Daemon::start(tmp.path(), &config(&redis, "128M", &extra), &[]);
    // The adapter cannot log in: it exits saying why, and the daemon logs it.
    daemon.wait_for_log(&["adapter_failed", "WRONGPASS"], Duration::from_secs(30));
    os_holds(&mut daemon, &redis);
    assert!(
        daemon.tenant("cache").app.is_none(),
        "no agent ever spoke for the tenant"
    );
    assert!(!daemon.log_text().contains("agent_registered"));
    bystander_untouched(&daemon);
}

#[test]
fn a_redis_that_refuses_to_evict_is_left_to_its_limit_with_the_reason() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_redis_that_refuses_to_evict_is_left_to_its_limit_with_the_reason";
    let Some(linux) = prerequisites(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let redis = Redis::start(
        &linux,
        tmp.path(),
        "refuse",
        &["--maxmemory-policy", "noeviction"],
        120,
    );
    let mut daemon = Daemon::start(tmp.path(), &config(&redis, "128M", ""), &[]);
    daemon.wait_for_log(
        &["agent_answered", "status=failed", "noeviction"],
        Duration::from_secs(60),
    );
    os_holds(&mut daemon, &redis);
    let app = daemon.tenant("cache").app.expect("an app");
    let last = app.last_resize.expect("the refusal is the last resize");
    assert!(
        last.status == "failed"
            && last
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("noeviction")),
        "{last:?}"
    );
    // Nothing was evicted behind the operator's back.
    assert!(redis.cli(&["dbsize"]).trim().parse::<u64>().unwrap() >= 120 * 16);
    bystander_untouched(&daemon);
}

/// Registers, then stops Redis (SIGSTOP) and lowers the tenant's max, so that the shrink is
/// asked of a server that does not answer; `kill` then kills it mid-resize.
fn hung_or_killed(test: &str, kill: bool) {
    let Some(linux) = prerequisites(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut redis = Redis::start(
        &linux,
        tmp.path(),
        if kill { "killed" } else { "hung" },
        &[],
        120,
    );
    let mut daemon = Daemon::start(tmp.path(), &config(&redis, "1G", ""), &[]);
    daemon.wait_for_log(&["agent_registered"], Duration::from_secs(30));
    redis.signal(libc::SIGSTOP);
    daemon
        .changer(Duration::from_secs(5))
        .patch_tenant(
            "cache",
            &memtide_api::TenantPatch {
                max: Some(memtide_api::Size::Text("64M".into())),
                ..Default::default()
            },
        )
        .expect("PATCH the cache tenant's max");
    if kill {
        // The adapter is inside CONFIG SET, waiting on the stopped server.
        std::thread::sleep(Duration::from_secs(1));
        redis.signal(libc::SIGKILL);
        let _ = redis.server.0.wait();
    }
    // The adapter answers failed (its read times out, or the connection resets), or memtide
    // takes the tenant over at the deadline: either way the limit has it, with the reason. A
    // killed server's tenant may be dropped first: its adapter leaves with the server, and the
    // cgroup is empty before any answer (seen once in a full run).
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        let log = daemon.log_text();
        if log.contains("status=failed")
            || log.contains("taken over")
            || (kill && log.contains("dropped tenant=cache"))
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "no failure within 90 s; log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    if kill {
        // Only the adapter is left in the cgroup: the tenant is gone all the same.
        gone_and_restored(&mut daemon, &redis.cg, "cache", None);
        bystander_untouched(&daemon);
        return;
    }
    os_holds(&mut daemon, &redis);
    let app = daemon.tenant("cache").app.expect("an app");
    assert!(
        app.held_by == "os"
            || app
                .last_resize
                .as_ref()
                .is_some_and(|r| r.status == "failed" && r.reason.is_some()),
        "{app:?}"
    );
    bystander_untouched(&daemon);
    redis.signal(libc::SIGCONT);
}

#[test]
fn a_redis_that_hangs_past_the_deadline_is_left_to_its_limit() {
    let _gate = memtide_testkit::file_gate(module_path!());
    hung_or_killed(
        "a_redis_that_hangs_past_the_deadline_is_left_to_its_limit",
        false,
    );
}

#[test]
fn a_redis_killed_mid_resize_has_its_tenant_dropped_and_restored() {
    let _gate = memtide_testkit::file_gate(module_path!());
    hung_or_killed(
        "a_redis_killed_mid_resize_has_its_tenant_dropped_and_restored",
        true,
    );
}

/// The `memtide-adapter` processes in `cg`.
fn adapters_in(cg: &TestCgroup) -> Vec<u32> {
    cg.cgroup
        .pids()
        .unwrap_or_default()
        .into_iter()
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.to_string_lossy().contains("memtide-adapter"))
        })
        .collect()
}

/// Waits until the daemon's log has `n` lines with `word`.
fn wait_for_lines(daemon: &Daemon, word: &str, n: usize) {
    let until = Instant::now() + Duration::from_secs(60);
    while daemon
        .log_text()
        .lines()
        .filter(|l| l.contains(word))
        .count()
        < n
    {
        assert!(
            Instant::now() < until,
            "fewer than {n} {word} lines within 60 s; log:\n{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `tenant` has left the status (dropped: its server gone), then checks that its
/// cgroup got back its limit (`limit`, `None` for none) and OOM killer (v1), the log says
/// `dropped`, and no adapter is left in it.
fn gone_and_restored(daemon: &mut Daemon, cg: &TestCgroup, tenant: &str, limit: Option<u64>) {
    daemon.wait_until(
        &format!("{tenant} is dropped"),
        Duration::from_secs(30),
        |s| s.tenants.iter().all(|t| t.name != tenant),
    );
    let log = daemon.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("dropped") && l.contains(tenant)),
        "{log}"
    );
    assert_eq!(limit_bytes(&cg.sample()), limit, "its limit is given back");
    if let Ok(oom) = memtide_linux::fs::cgroup_v1::read_oom_control(cg.dir()) {
        assert!(!oom.oom_kill_disable, "its OOM killer is given back");
    }
    assert_eq!(adapters_in(cg), Vec::<u32>::new(), "its adapter is stopped");
}

/// A daemon managing a server through its adapter, whose `pool` it finds at `original` and
/// the adapter shrinks to `shrunk` as it starts (its `[tenant.app] max`): a SIGTERM gives the
/// pool back; a SIGKILL takes the adapter with it and leaves the pool and its record; the
/// restarted daemon has one adapter in the tenant, and its SIGTERM gives back the pool as it
/// was before memtide, not as the restarted adapter found it.
fn pool_given_back_at_stop_and_after_a_crash(
    daemon: &mut Daemon,
    cg: &TestCgroup,
    tenant: &str,
    pool: impl Fn() -> u64,
    (original, shrunk): (u64, u64),
) {
    let record = daemon.dir.join(format!("app-{tenant}.pool"));
    let registered = |daemon: &Daemon, n: usize| {
        wait_for_lines(daemon, "agent_registered", n);
        assert_eq!(pool(), shrunk, "the adapter shrank the pool to its max");
    };
    registered(daemon, 1);
    assert_eq!(
        std::fs::read_to_string(&record).unwrap().trim(),
        original.to_string()
    );
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}");
    assert_eq!(pool(), original, "a daemon stop gives the pool back");
    assert_eq!(adapters_in(cg), Vec::<u32>::new());
    assert!(!record.exists(), "the record goes with the stop");

    daemon.spawn(&[]);
    registered(daemon, 2);
    let killed = Instant::now();
    assert!(!daemon.signal_and_wait(libc::SIGKILL).success());
    while !adapters_in(cg).is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(3),
            "the adapter outlived its daemon: {:?}",
            adapters_in(cg)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Nothing given back under memtide's limit, which stays until the next daemon.
    assert_eq!(pool(), shrunk);
    assert!(record.exists(), "the record outlives the crash");

    daemon.spawn(&[]);
    registered(daemon, 3);
    assert_eq!(adapters_in(cg).len(), 1, "one adapter, no orphan");
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}");
    assert_eq!(
        pool(),
        original,
        "the pool from before memtide, not the one the restarted adapter found"
    );
    assert!(!record.exists());
}

#[test]
fn redis_gets_back_its_maxmemory_at_stop_and_after_a_crash_and_restart() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "redis_gets_back_its_maxmemory_at_stop_and_after_a_crash_and_restart";
    let Some(linux) = prerequisites(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let redis = Redis::start(
        &linux,
        tmp.path(),
        "give-back",
        &["--maxmemory", "300mb"],
        8,
    );
    let maxmemory = || {
        let said = redis.cli(&["config", "get", "maxmemory"]);
        said.lines()
            .nth(1)
            .unwrap_or_default()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(maxmemory(), 300 * MIB);
    let mut daemon = Daemon::start(tmp.path(), &config(&redis, "1G", ""), &[]);
    pool_given_back_at_stop_and_after_a_crash(
        &mut daemon,
        &redis.cg,
        "cache",
        maxmemory,
        (300 * MIB, 256 * MIB),
    );
}

/// A MariaDB in test cgroup `name` with a `pool` buffer pool, on a small data directory.
fn mariadb_in(
    linux: &Linux,
    test: &str,
    name: &str,
    pool: &str,
) -> Option<(DataDir, TestCgroup, Mariadbd)> {
    if let Some(why) = mariadb::missing() {
        skip_or_fail(test, &why);
        return None;
    }
    build_binaries();
    let data = DataDir::prepare(Tables {
        tables: 1,
        rows: 1000,
    })
    .expect("prepare a data directory");
    let cg = linux.cgroup(name);
    let server = Mariadbd::start(&data, pool, Some(&cg)).expect("start mariadbd");
    Some((data, cg, server))
}

/// Tenant `app` in `cgroup`: the MariaDB on `socket` through its adapter, its pool between
/// 64 and 256 MiB.
fn mariadb_config(cgroup: &str, socket: &Path, budget: &str) -> String {
    adopt_config(
        cgroup,
        budget,
        &format!(
            "\n[tenant.app]\nkind = \"mariadb\"\nurl = \"unix://{}\"\nuser = \"root\"\n\
             min = \"64M\"\nmax = \"256M\"\n",
            socket.display()
        ),
    )
}

#[test]
fn mariadb_gets_back_its_buffer_pool_at_stop_and_after_a_crash_and_restart() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "mariadb_gets_back_its_buffer_pool_at_stop_and_after_a_crash_and_restart";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some((_data, cg, server)) = mariadb_in(&linux, test, "mdb-give-back", "512M") else {
        return;
    };
    assert_eq!(server.pool_bytes().unwrap(), 512 * MIB);
    let tmp = tempfile::tempdir().unwrap();
    let config = mariadb_config(&cg.path, &server.socket, "8G");
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    pool_given_back_at_stop_and_after_a_crash(
        &mut daemon,
        &cg,
        "app",
        || server.pool_bytes().unwrap(),
        (512 * MIB, 256 * MIB),
    );
}

#[test]
fn a_mariadb_shut_down_while_managed_has_its_tenant_dropped_and_restored() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_mariadb_shut_down_while_managed_has_its_tenant_dropped_and_restored";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some((_data, cg, mut server)) = mariadb_in(&linux, test, "mdb-shutdown", "128M") else {
        return;
    };
    cg.set_limit_bytes(900 * MIB);
    let tmp = tempfile::tempdir().unwrap();
    let config = mariadb_config(&cg.path, &server.socket, "160M");
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    daemon.wait_for_log(&["agent_registered"], Duration::from_secs(60));
    // memtide holds the tenant: a limit of its own, and (v1) the OOM guard on under the max.
    daemon.wait_until("memtide limits the tenant", Duration::from_secs(60), |_| {
        limit_bytes(&cg.sample()).is_some_and(|l| l < 900 * MIB)
            && memtide_linux::fs::cgroup_v1::read_oom_control(cg.dir())
                .map_or(true, |o| o.oom_kill_disable)
    });
    assert_eq!(adapters_in(&cg).len(), 1);
    server.shutdown().expect("mariadb-admin shutdown");
    gone_and_restored(&mut daemon, &cg, "app", Some(900 * MIB));
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}");
}
