//! The daemon's safety rails on this machine's real cgroups: dry run writes nothing, no limit under anonymous memory without swap, re-adoption after SIGKILL, restore on SIGTERM, launched tenants stopped, and bad input refused with nothing changed.

use crate::host::*;
use memtide_linux::host::protection;
use std::time::{Duration, Instant};

/// A config adopting `cgroup` (under the daemon's own cgroup) with the TWS probe.
fn tws_config(cgroup: &str, budget: &str) -> String {
    adopt_config(cgroup, budget, "estimator = \"tws\"")
}

#[test]
fn dry_run_decides_and_logs_but_writes_nothing() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("dry_run_decides_and_logs_but_writes_nothing") else {
        return;
    };
    let cg = linux.cgroup("dry");
    cg.set_limit_bytes(800 * MIB);
    let _toucher = cg.spawn_toucher(&["--active", "64M"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(tmp.path(), &tws_config(&cg.path, "200M"), &["--dry-run"]);
    let s = daemon.wait_until("a dry-run decision", Duration::from_secs(20), |s| {
        s.dry_run && s.counters.dry_run >= 2
    });
    assert_eq!(
        limit_bytes(&cg.sample()),
        Some(800 * MIB),
        "dry run wrote the limit"
    );
    assert!(!daemon.state.exists(), "dry run wrote a state file");
    let t = s.tenants.iter().find(|t| t.name == "app").unwrap();
    assert!(!t.reason.is_empty());
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(limit_bytes(&cg.sample()), Some(800 * MIB));
    let log = daemon.log_text();
    let decisions: Vec<&str> = log.lines().filter(|l| l.contains(" decision ")).collect();
    assert!(!decisions.is_empty(), "no decision logged:\n{log}");
    assert!(
        decisions.iter().all(|l| l.contains("reason=")),
        "a decision without its reason:\n{log}"
    );
}

#[test]
fn without_swap_no_limit_goes_below_anonymous_memory() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "without_swap_no_limit_goes_below_anonymous_memory";
    let Some(linux) = linux(test) else {
        return;
    };
    if swap_total() > 0 {
        skip_or_fail(test, "the host has swap; this test needs none");
        return;
    }
    let cg = linux.cgroup("noswap");
    cg.set_limit_bytes(1 << 30);
    let mut toucher = cg.spawn_toucher(&["--active", "200M", "--pause-ms", "100"]);
    std::thread::sleep(Duration::from_secs(2));
    let tmp = tempfile::tempdir().unwrap();
    // A budget below the anonymous memory: memory is wanted, and only the floor holds it.
    let daemon = Daemon::start(tmp.path(), &tws_config(&cg.path, "150M"), &[]);
    let start = Instant::now();
    let mut lowest = u64::MAX;
    while start.elapsed() < Duration::from_secs(20) {
        let s = cg.sample();
        let limit = limit_bytes(&s).unwrap_or(u64::MAX);
        let anon = s.anon.expect("v1 reports rss").0;
        assert!(
            limit >= anon,
            "limit {:.1} MiB under anon {:.1} MiB",
            mib(limit),
            mib(anon)
        );
        lowest = lowest.min(limit);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(toucher.0.try_wait().unwrap().is_none(), "the toucher died");
    assert_eq!(
        cg.cgroup.oom_kills().unwrap().unwrap_or(0),
        0,
        "an OOM kill"
    );
    // The probe wanted less: the floor held the limit just above the anonymous memory.
    assert!(
        lowest < 300 * MIB,
        "the limit never came near the floor: {:.1} MiB",
        mib(lowest)
    );
    let t = daemon.tenant("app");
    assert!(t.reason.contains("floor"), "{}", t.reason);
    assert!(t.floor_bytes >= 200 * MIB, "floor {}", t.floor_bytes);
}

/// Also the protection slice: while memtide manages the tenant its min (16 MiB) is protected
/// from the host's reclaim (v1 soft limit, v2 memory.low), and SIGTERM gives back the setting
/// found.
#[test]
fn a_killed_daemon_readopts_and_sigterm_restores_the_original_limit() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("a_killed_daemon_readopts_and_sigterm_restores_the_original_limit")
    else {
        return;
    };
    let cg = linux.cgroup("readopt");
    cg.set_limit_bytes(900 * MIB);
    let protection_found = protection::in_force(&cg.cgroup).unwrap();
    let _toucher = cg.spawn_toucher(&["--active", "64M"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(tmp.path(), &tws_config(&cg.path, "256M"), &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while limit_bytes(&cg.sample()).unwrap_or(u64::MAX) >= 800 * MIB {
        assert!(
            Instant::now() < deadline,
            "the limit never moved:\n{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Written in the tenant's first tick, right after the limit.
    let protected = memtide_linux::Limit::Bytes(memtide_model::Bytes(16 * MIB));
    while protection::in_force(&cg.cgroup).unwrap() != protected {
        assert!(
            Instant::now() < deadline,
            "the tenant's min is not protected:\n{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!daemon.signal_and_wait(libc::SIGKILL).success());
    let moved = limit_bytes(&cg.sample()).unwrap();
    assert!(moved < 800 * MIB);
    let state = std::fs::read_to_string(&daemon.state).expect("the state file survives a crash");
    assert!(state.contains(&(900 * MIB).to_string()), "{state}");

    daemon.spawn(&[]);
    daemon.wait_until("two ticks after restart", Duration::from_secs(20), |s| {
        s.ticks >= 2
    });
    let log = daemon.log_text();
    assert!(log.contains(" readopted "), "no re-adoption logged:\n{log}");
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(
        limit_bytes(&cg.sample()),
        Some(900 * MIB),
        "SIGTERM must restore the limit found before the first start"
    );
    assert_eq!(
        protection::in_force(&cg.cgroup).unwrap(),
        protection_found,
        "SIGTERM must restore the protection found"
    );
    assert!(
        !daemon.state.exists(),
        "a clean exit removes the state file"
    );
}

#[test]
fn a_launched_tenant_runs_in_its_own_cgroup_and_is_stopped_on_sigterm() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("a_launched_tenant_runs_in_its_own_cgroup_and_is_stopped_on_sigterm")
    else {
        return;
    };
    let parent = linux.cgroup("parent");
    let tmp = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
[daemon]
tick = "250ms"
listen = "{{listen}}"
state_file = "{{state}}"

[host]
parent = "{}"
budget = "1G"

[[tenant]]
name = "job"
command = ["memtide-toucher", "--active", "32M"]
min = "16M"
max = "512M"
"#,
        parent.path
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    let s = daemon.wait_until("the job holds memory", Duration::from_secs(20), |s| {
        s.tenants.iter().any(|t| t.allocated_bytes > 30 * MIB)
    });
    let job = s.tenants.iter().find(|t| t.name == "job").unwrap();
    assert_eq!(job.origin, "launched");
    assert_eq!(job.cgroup, format!("{}/job", parent.path));
    let job_dir = parent.dir().join("job");
    let pids = std::fs::read_to_string(job_dir.join("cgroup.procs")).unwrap();
    assert_eq!(
        pids.lines().count(),
        1,
        "the toucher runs in the job's cgroup"
    );
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert!(
        !job_dir.exists(),
        "the launched tenant's cgroup is removed on exit"
    );
}

#[test]
fn bad_configs_exit_2_with_one_line_and_change_nothing() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("bad_configs_exit_2_with_one_line_and_change_nothing") else {
        return;
    };
    let cg = linux.cgroup("badcfg");
    cg.set_limit_bytes(700 * MIB);
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state.json");
    let cases = [
        ("malformed", "[daemon\ntick = 1".to_string(), "memtide.toml"),
        (
            "outside the parent",
            tws_config("/elsewhere/app", "1G"),
            "outside",
        ),
        (
            "wrong type",
            tws_config(&cg.path, "1G").replace("min = \"16M\"", "min = true"),
            "min",
        ),
    ];
    for (what, text, needle) in cases {
        let text = text
            .replace("{listen}", "127.0.0.1:1")
            .replace("{state}", &state.display().to_string());
        let path = tmp.path().join("memtide.toml");
        std::fs::write(&path, text).unwrap();
        let (code, _, stderr) = memtide(&["daemon", "--config", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{what}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{what}: {stderr}");
        assert!(stderr.contains(needle), "{what}: {stderr}");
        assert!(!state.exists(), "{what}: wrote a state file");
        assert_eq!(limit_bytes(&cg.sample()), Some(700 * MIB), "{what}");
    }
}

#[test]
fn bad_api_requests_are_refused_and_change_nothing() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("bad_api_requests_are_refused_and_change_nothing") else {
        return;
    };
    let cg = linux.cgroup("api");
    let _toucher = cg.spawn_toucher(&["--active", "16M"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(tmp.path(), &tws_config(&cg.path, "1G"), &["--dry-run"]);
    daemon.wait_until("the tenant is managed", Duration::from_secs(20), |s| {
        s.tenants.len() == 1
    });
    let before = daemon.status();
    let t = Duration::from_secs(5);
    let cases = [
        ("PATCH", "/v1/tenants/app", r#"{"shares": "ten"}"#, 400),
        ("PATCH", "/v1/tenants/app", r#"{"min": -5}"#, 400),
        (
            "PATCH",
            "/v1/tenants/app",
            r#"{"min": "2G", "max": "1G"}"#,
            400,
        ),
        ("PATCH", "/v1/tenants/app", r#"{"colour": 1}"#, 400),
        ("PATCH", "/v1/tenants/app", "{not json", 400),
        ("PATCH", "/v1/tenants/nobody", r#"{"shares": 5}"#, 404),
        ("PUT", "/v1/tax-rate", r#"{"tax_rate": 1.5}"#, 400),
        ("PUT", "/v1/tax-rate", r#"{"tax_rate": "high"}"#, 400),
        ("PATCH", "/v1/tenants/app", r#"{"min": "900G"}"#, 400),
    ];
    for (method, path, body, want) in cases {
        let (code, text) = daemon.changer(t).request(method, path, Some(body)).unwrap();
        // 900G is a well-formed size above max: the API or admission refuses it.
        let want_ok = code == want || (body.contains("900G") && code == 409);
        assert!(want_ok, "{method} {path} {body}: {code} {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let error = v["error"].as_str().unwrap_or_default();
        assert!(!error.is_empty() && !error.contains('\n'), "{body}: {text}");
    }
    let after = daemon.status();
    assert_eq!(after.host.tax_rate, before.host.tax_rate);
    assert_eq!(after.tenants[0].min_bytes, before.tenants[0].min_bytes);
    assert_eq!(after.tenants[0].max_bytes, before.tenants[0].max_bytes);
    assert_eq!(after.tenants[0].shares, before.tenants[0].shares);

    let (code, text) = daemon
        .changer(t)
        .request("PUT", "/v1/tax-rate", Some(r#"{"tax_rate": 0.5}"#))
        .unwrap();
    assert_eq!(code, 200, "{text}");
    let (code, text) = daemon
        .changer(t)
        .request(
            "PATCH",
            "/v1/tenants/app",
            Some(r#"{"shares": 2000, "min": "32M"}"#),
        )
        .unwrap();
    assert_eq!(code, 200, "{text}");
    let s = daemon.wait_until("the changes show", Duration::from_secs(10), |s| {
        s.host.tax_rate == 0.5 && s.tenants[0].shares == 2000
    });
    assert_eq!(s.tenants[0].min_bytes, 32 * MIB);
}
