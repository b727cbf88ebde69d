//! Application-level ballooning on the real host, with each SDK's sample pool (Rust, Go, Python, Java, C: real pools that give their memory back) in an adopted cgroup: it registers with `memtide daemon` over its balloon socket; when the budget runs short memtide asks the application to shrink its own pool before it lowers the limit, the pool's memory really goes back, the limit follows, and nothing is OOM-killed. At stop the agent hears bye and the limit is given back.

use crate::host::*;
use memtide_testkit::samples::Sdk;
use std::time::{Duration, Instant};

/// `sdk`'s sample pool (256 MiB) in an adopted cgroup under a daemon whose budget is 128 MiB.
fn asks_the_application_first(test: &str, sdk: Sdk) {
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(sample) = sdk.build(test) else {
        return;
    };
    let cg = linux.cgroup("alb");
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("balloon.sock");
    // The pool joins the cgroup before it allocates, so all of it is charged there.
    let procs = cg.dir().join("cgroup.procs");
    let mut pool = sample.start(("256M", "32M", "256M"), &socket, Some(&procs));
    let start = Instant::now();
    while cg.sample().usage.0 < 250 * MIB {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the {sdk:?} pool never filled: {} bytes",
            cg.sample().usage.0
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let head = config_head("250ms", "self", "128M");
    let config = format!(
        r#"{head}
[policy]
sampling_period = "1s"

[rails]
floor_margin = "16M"

[[tenant]]
name = "app"
cgroup = "{}"
min = "16M"
max = "1G"
"#,
        cg.path
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    assert_eq!(daemon.state.parent(), socket.parent());

    // The agent registers for its own tenant.
    daemon.wait_for_log(&["agent_registered"], Duration::from_secs(30));

    // The budget is short: the application gives its pool back itself, and the limit follows.
    daemon.wait_until("the pool shrinks", Duration::from_secs(90), |_| {
        cg.sample().usage.0 < 150 * MIB
    });
    // The agent's answer is logged at the tick after it came.
    daemon.wait_for_log(&["agent_answered", "status=done"], Duration::from_secs(10));
    daemon.wait_until("the limit follows", Duration::from_secs(60), |_| {
        limit_bytes(&cg.sample()).is_some_and(|l| l < 200 * MIB)
    });
    // The application went first: no limit below its pool was written before its done.
    let log = daemon.log_text();
    let lines: Vec<&str> = log.lines().collect();
    let done = lines
        .iter()
        .position(|l| l.contains("agent_answered") && l.contains("status=done"))
        .unwrap();
    let first_low_limit = lines.iter().position(|l| {
        l.contains(" limit tenant=app ")
            && l.split("to_bytes=")
                .nth(1)
                .and_then(|v| v.split(' ').next())
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|b| b < 250 * MIB)
    });
    assert!(
        first_low_limit.is_some_and(|i| i > done),
        "a limit below the pool came before the application's done; log:\n{log}"
    );
    let sample = cg.sample();
    let limit = limit_bytes(&sample).unwrap();
    assert!(
        limit >= sample.usage.0,
        "limit {limit} below usage {}",
        sample.usage.0
    );
    assert!(
        pool.0.try_wait().unwrap().is_none(),
        "the application was killed; log:\n{}",
        daemon.log_text()
    );

    // At stop the agent hears bye and the cgroup gets its limit back.
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}");
    assert_eq!(limit_bytes(&cg.sample()), None, "the limit was given back");
    assert!(
        pool.0.try_wait().unwrap().is_none(),
        "the application lives on"
    );
    assert!(!socket.exists(), "the socket file is removed");
}

#[test]
fn rust_the_daemon_asks_the_application_first_and_the_limit_follows() {
    let _gate = memtide_testkit::file_gate(module_path!());
    asks_the_application_first(
        "rust_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::Rust,
    );
}

#[test]
fn go_the_daemon_asks_the_application_first_and_the_limit_follows() {
    let _gate = memtide_testkit::file_gate(module_path!());
    asks_the_application_first(
        "go_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::Go,
    );
}

#[test]
fn python_the_daemon_asks_the_application_first_and_the_limit_follows() {
    let _gate = memtide_testkit::file_gate(module_path!());
    asks_the_application_first(
        "python_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::Python,
    );
}

#[test]
fn java_the_daemon_asks_the_application_first_and_the_limit_follows() {
    let _gate = memtide_testkit::file_gate(module_path!());
    asks_the_application_first(
        "java_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::Java,
    );
}

#[test]
fn c_the_daemon_asks_the_application_first_and_the_limit_follows() {
    let _gate = memtide_testkit::file_gate(module_path!());
    asks_the_application_first(
        "c_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::C,
    );
}

/// Gemini's cache quotas on the real host: two Rust sample pools of 256 MiB, each looking up
/// keys uniform over its 256 MiB and reporting its SHARDS curve every 2 s (`--curve`), share
/// `[cache] budget = "320M"`. The strict one (500 µs + 10%, a miss costing 3500 µs) needs a miss
/// ratio of at most 15.7%, so 216 MiB of its uniform keys; the best-effort one gets the rest.
/// Each is asked through its agent, and each pool really goes to its quota.
#[test]
fn rust_cache_quotas_size_two_pools_by_their_curves_and_slos() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "rust_cache_quotas_size_two_pools_by_their_curves_and_slos";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(sample) = Sdk::Rust.build(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("balloon.sock");
    let cgroups = [linux.cgroup("gold"), linux.cgroup("bronze")];
    let _pools: Vec<_> = cgroups
        .iter()
        .map(|cg| {
            let procs = cg.dir().join("cgroup.procs");
            sample.start_with(
                ("256M", "16M", "256M"),
                &socket,
                Some(&procs),
                &["--curve", "2", "--lookups", "50000"],
            )
        })
        .collect();
    let start = Instant::now();
    while cgroups.iter().any(|cg| cg.sample().usage.0 < 250 * MIB) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the pools never filled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let head = config_head("250ms", "self", "2G");
    let config = format!(
        r#"{head}
[cache]
budget = "320M"

[[tenant]]
name = "gold"
cgroup = "{}"
min = "16M"
max = "1G"
slo = {{ kind = "strict", target_us = 500, slack = 0.1 }}

[[tenant]]
name = "bronze"
cgroup = "{}"
min = "16M"
max = "1G"
slo = {{ kind = "best-effort" }}
"#,
        cgroups[0].path, cgroups[1].path
    );
    let started = Instant::now();
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    let pool = |s: &memtide_api::Snapshot, name: &str| {
        s.tenants
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.app.as_ref())
            .map_or(0, |a| a.pool_bytes)
    };
    // The latency the strict pool's curve predicts at its quota.
    let predicted = |s: &memtide_api::Snapshot| {
        let t = s.tenants.iter().find(|t| t.name == "gold")?;
        t.cache.as_ref().map(|c| c.predicted_latency_us)
    };
    // The curves come from the second window on (4 s), and settle as samples add up. A pool
    // that grows may do so while the other is still paced down, so the pools' sum is within
    // the cache budget once both have reached their quotas, not at every moment on the way.
    let s = daemon.wait_until(
        "the pools reach their quotas, together within the cache budget",
        Duration::from_secs(90),
        |s| {
            (200 * MIB..=240 * MIB).contains(&pool(s, "gold"))
                && (80 * MIB..=120 * MIB).contains(&pool(s, "bronze"))
                && pool(s, "gold") + pool(s, "bronze") <= 320 * MIB
                && predicted(s).is_some_and(|p| p <= 550.0)
        },
    );
    eprintln!(
        "quotas reached {:.1} s after the daemon started: gold {} MiB ({:.0} µs predicted), bronze {} MiB",
        started.elapsed().as_secs_f64(),
        pool(&s, "gold") / MIB,
        predicted(&s).unwrap_or(f64::NAN),
        pool(&s, "bronze") / MIB
    );
    for (name, slo, kind) in [
        ("gold", "SLO 500 µs (+10%)", "strict"),
        ("bronze", "best effort", "best_effort"),
    ] {
        let t = daemon.tenant(name);
        assert!(
            t.reason.contains("cache quota") && t.reason.contains(slo),
            "{name}: {}",
            t.reason
        );
        let cache = t.cache.expect("a quota in the API");
        assert_eq!(cache.slo, kind);
        assert_eq!(cache.budget_bytes, 320 * MIB);
        // The agent was asked for its quota and the pool is there (within two 5 MiB steps:
        // a later window's curve may move the quota while the pool follows).
        let pool = t.app.map_or(0, |a| a.pool_bytes);
        assert!(
            pool.abs_diff(cache.quota_bytes) <= 10 * MIB,
            "{name}: pool {pool}, quota {}",
            cache.quota_bytes
        );
    }
    // The pools' memory really went back: each cgroup holds about its pool.
    for (cg, name) in cgroups.iter().zip(["gold", "bronze"]) {
        let usage = cg.sample().usage.0;
        let held = pool(&daemon.status(), name);
        assert!(
            usage < held + 32 * MIB,
            "{name}: usage {} MiB for a pool of {} MiB",
            usage / MIB,
            held / MIB
        );
    }
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}");
}
