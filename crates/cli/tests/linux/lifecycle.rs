//! The daemon's lifecycle on this machine's real cgroups: a tenant whose processes exit gets back everything memtide changed and keeps its first original, the OOM killer is given back after a crash and restart, SIGHUP reloads, a second daemon is refused, a failed start leaves nothing, a restart keeps the estimates, a missing cgroup is waited for and a start with every tenant refused exits 2.

use crate::host::*;
use std::time::{Duration, Instant};

/// v1 memory.oom_control's oom_kill_disable.
fn oom_killer_disabled(cg: &TestCgroup) -> bool {
    memtide_linux::fs::cgroup_v1::read_oom_control(cg.dir())
        .expect("read memory.oom_control")
        .oom_kill_disable
}

/// Waits until the cgroup's limit is below `below` bytes (memtide wrote it).
fn wait_for_limit_below(cg: &TestCgroup, below: u64, daemon: &Daemon) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let limit = limit_bytes(&cg.sample()).unwrap_or(u64::MAX);
        if limit < below {
            return limit;
        }
        assert!(
            Instant::now() < deadline,
            "the limit never went below {:.0} MiB:\n{}",
            mib(below),
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until memtide's OOM guard is on (it is written right after the limit).
fn wait_for_guard(cg: &TestCgroup, daemon: &Daemon) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !oom_killer_disabled(cg) {
        assert!(
            Instant::now() < deadline,
            "the OOM guard never came on under max:\n{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn v1_only(test: &str, linux: &Linux) -> bool {
    if linux.hierarchy.version != memtide_linux::fs::CgroupVersion::V1 {
        skip_or_fail(test, "the OOM guard exists on cgroup v1 only");
        return false;
    }
    true
}

#[test]
fn a_tenant_whose_processes_exit_gets_back_its_limit_and_oom_killer_and_keeps_its_original() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test =
        "a_tenant_whose_processes_exit_gets_back_its_limit_and_oom_killer_and_keeps_its_original";
    let Some(linux) = linux(test) else {
        return;
    };
    if !v1_only(test, &linux) {
        return;
    }
    let cg = linux.cgroup("exit");
    cg.set_limit_bytes(900 * MIB);
    let toucher = cg.spawn_toucher(&["--active", "48M"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(tmp.path(), &adopt_config(&cg.path, "256M", ""), &[]);
    wait_for_limit_below(&cg, 300 * MIB, &daemon);
    wait_for_guard(&cg, &daemon);

    drop(toucher);
    daemon.wait_until("the tenant is dropped", Duration::from_secs(20), |s| {
        s.tenants.is_empty()
    });
    assert_eq!(
        limit_bytes(&cg.sample()),
        Some(900 * MIB),
        "a dropped tenant gets its limit back:\n{}",
        daemon.log_text()
    );
    assert!(
        !oom_killer_disabled(&cg),
        "a dropped tenant gets its OOM killer back"
    );
    assert!(daemon.log_text().contains("restored=true"));

    // The workload comes back: re-adopted, with the first original kept.
    let _again = cg.spawn_toucher(&["--active", "48M"]);
    daemon.wait_until("re-adopted", Duration::from_secs(20), |s| {
        s.tenants.len() == 1
    });
    wait_for_limit_below(&cg, 300 * MIB, &daemon);
    let state = std::fs::read_to_string(&daemon.state).unwrap();
    assert!(state.contains(&(900 * MIB).to_string()), "{state}");
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(limit_bytes(&cg.sample()), Some(900 * MIB));
    assert!(!oom_killer_disabled(&cg));
}

#[test]
fn a_restart_after_a_crash_then_a_clean_stop_gives_back_the_oom_killer() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_restart_after_a_crash_then_a_clean_stop_gives_back_the_oom_killer";
    let Some(linux) = linux(test) else {
        return;
    };
    if !v1_only(test, &linux) {
        return;
    }
    let cg = linux.cgroup("crash");
    cg.set_limit_bytes(900 * MIB);
    let _toucher = cg.spawn_toucher(&["--active", "48M"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(tmp.path(), &adopt_config(&cg.path, "256M", ""), &[]);
    let lowered = wait_for_limit_below(&cg, 300 * MIB, &daemon);
    wait_for_guard(&cg, &daemon);
    // The state file follows within the tick.
    let state_path = daemon.state.clone();
    daemon.wait_until(
        "the state file records the guard",
        Duration::from_secs(5),
        |_| std::fs::read_to_string(&state_path).is_ok_and(|s| s.contains("\"oom_guard\": true")),
    );
    assert!(!daemon.signal_and_wait(libc::SIGKILL).success());

    // The restarted daemon finds the limit where it wants it and writes nothing new.
    daemon.spawn(&[]);
    daemon.wait_until("a few ticks", Duration::from_secs(20), |s| s.ticks >= 4);
    assert_eq!(limit_bytes(&cg.sample()), Some(lowered));
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(limit_bytes(&cg.sample()), Some(900 * MIB));
    assert!(
        !oom_killer_disabled(&cg),
        "a clean stop after a restart gives back the OOM killer:\n{}",
        daemon.log_text()
    );
    assert!(!daemon.state.exists());
}

#[test]
fn sighup_reloads_the_configuration_and_keeps_managing() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("sighup_reloads_the_configuration_and_keeps_managing") else {
        return;
    };
    let cg = linux.cgroup("hup");
    cg.set_limit_bytes(900 * MIB);
    let _toucher = cg.spawn_toucher(&["--active", "48M"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(tmp.path(), &adopt_config(&cg.path, "256M", ""), &[]);
    daemon.wait_until("managed", Duration::from_secs(20), |s| s.tenants.len() == 1);
    let text = std::fs::read_to_string(&daemon.config).unwrap();
    let good = text.replace("max = \"1G\"", "max = \"1G\"\nshares = 3000")
        + "\n[policy]\ntax_rate = 0.5\n";
    // A config that does not load is refused and changes nothing.
    std::fs::write(&daemon.config, "[daemon\n").unwrap();
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(daemon.pid() as i32, libc::SIGHUP);
    }
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        daemon.log_text().contains("reload_failed"),
        "{}",
        daemon.log_text()
    );
    assert_eq!(daemon.tenant("app").shares, 1000);

    std::fs::write(&daemon.config, good).unwrap();
    // SAFETY: as above.
    unsafe {
        libc::kill(daemon.pid() as i32, libc::SIGHUP);
    }
    let s = daemon.wait_until("the reload shows", Duration::from_secs(20), |s| {
        s.tenants.first().is_some_and(|t| t.shares == 3000)
    });
    assert_eq!(s.host.tax_rate, 0.5);
    assert!(
        daemon.log_text().contains(" reloaded "),
        "{}",
        daemon.log_text()
    );
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(limit_bytes(&cg.sample()), Some(900 * MIB), "restored");
}

#[test]
fn a_second_daemon_is_refused_a_cgroup_the_first_manages_and_leaves_nothing() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) =
        linux("a_second_daemon_is_refused_a_cgroup_the_first_manages_and_leaves_nothing")
    else {
        return;
    };
    let cg = linux.cgroup("twice");
    cg.set_limit_bytes(900 * MIB);
    let _toucher = cg.spawn_toucher(&["--active", "48M"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut first = Daemon::start(tmp.path(), &adopt_config(&cg.path, "256M", ""), &[]);
    wait_for_limit_below(&cg, 300 * MIB, &first);

    let other = tempfile::tempdir().unwrap();
    let (code, stderr, state) = daemon_to_exit(other.path(), &adopt_config(&cg.path, "512M", ""));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("another memtide"), "{stderr}");
    assert!(!state.exists(), "the refused daemon left a state file");
    let kept = std::fs::read_to_string(&first.state).unwrap();
    assert!(kept.contains(&(900 * MIB).to_string()), "{kept}");
    assert!(limit_bytes(&cg.sample()).unwrap() < 900 * MIB);
    first.wait_until("still managing", Duration::from_secs(10), |s| {
        s.tenants.len() == 1
    });
    assert!(first.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(limit_bytes(&cg.sample()), Some(900 * MIB));
}

#[test]
fn a_start_that_cannot_bind_its_port_leaves_nothing_behind() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("a_start_that_cannot_bind_its_port_leaves_nothing_behind") else {
        return;
    };
    let cg = linux.cgroup("port");
    cg.set_limit_bytes(900 * MIB);
    let _toucher = cg.spawn_toucher(&["--active", "48M"]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let (code, stderr, state) =
        daemon_to_exit_on(tmp.path(), &adopt_config(&cg.path, "256M", ""), &listen);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("API"), "{stderr}");
    assert!(!state.exists(), "a failed start left its state file");
    assert_eq!(limit_bytes(&cg.sample()), Some(900 * MIB));
    assert!(!oom_killer_disabled_any(&cg));
}

fn oom_killer_disabled_any(cg: &TestCgroup) -> bool {
    memtide_linux::fs::cgroup_v1::read_oom_control(cg.dir())
        .map(|o| o.oom_kill_disable)
        .unwrap_or(false)
}

#[test]
fn a_restart_after_a_crash_starts_from_the_kept_estimate() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("a_restart_after_a_crash_starts_from_the_kept_estimate") else {
        return;
    };
    let cg = linux.cgroup("estimate");
    let _toucher = cg.spawn_toucher(&["--active", "96M", "--pause-ms", "100"]);
    let tmp = tempfile::tempdir().unwrap();
    // Sampling starts a tenant it has not measured at its max: only a kept estimate avoids that.
    let text = adopt_config(&cg.path, "256M", "estimator = \"sampling\"")
        + "\n[policy]\nsampling_period = \"2s\"\n";
    let mut daemon = Daemon::start(tmp.path(), &text, &[]);
    let state_path = daemon.state.clone();
    let estimate = move || -> Option<u64> {
        let text = std::fs::read_to_string(&state_path).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v["estimates"]["app"].as_u64()
    };
    daemon.wait_until(
        "the state file holds a measured estimate",
        Duration::from_secs(60),
        |_| estimate().is_some_and(|e| e < 512 * MIB),
    );
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&daemon.state).unwrap()).unwrap();
    let kept = state["estimates"]["app"].as_u64().unwrap();
    assert!(!daemon.signal_and_wait(libc::SIGKILL).success());
    daemon.spawn(&[]);
    let s = daemon.wait_until("re-adopted", Duration::from_secs(20), |s| {
        s.tenants.len() == 1 && s.ticks >= 1
    });
    let now = s.tenants[0].active_estimate_bytes;
    assert!(
        now.abs_diff(kept) <= kept / 10,
        "estimate {:.0} MiB after restart, {:.0} MiB kept",
        mib(now),
        mib(kept)
    );
    assert!(daemon
        .log_text()
        .contains(&format!("estimate_bytes={kept}")));
}

#[test]
fn a_cgroup_missing_at_start_is_adopted_when_it_appears() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("a_cgroup_missing_at_start_is_adopted_when_it_appears") else {
        return;
    };
    let cg = linux.cgroup("late");
    let path = format!("{}-not-yet", cg.path);
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(tmp.path(), &adopt_config(&path, "256M", ""), &[]);
    daemon.wait_until("a tick", Duration::from_secs(20), |s| s.ticks >= 2);
    assert!(
        daemon.log_text().contains(" waiting "),
        "{}",
        daemon.log_text()
    );
    let status = daemon.status();
    assert!(status
        .decisions
        .iter()
        .any(|d| d.outcome == "waiting" && d.tenant == "app"));
    let late = linux.cgroup("late-not-yet");
    assert_eq!(late.path, path);
    late.set_limit_bytes(700 * MIB);
    let _toucher = late.spawn_toucher(&["--active", "32M"]);
    daemon.wait_until("adopted late", Duration::from_secs(20), |s| {
        s.tenants.len() == 1
    });
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(limit_bytes(&late.sample()), Some(700 * MIB));
}

#[test]
fn a_start_with_every_tenant_refused_exits_2_and_changes_nothing() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let Some(linux) = linux("a_start_with_every_tenant_refused_exits_2_and_changes_nothing") else {
        return;
    };
    let cg = linux.cgroup("refused");
    cg.set_limit_bytes(900 * MIB);
    let _toucher = cg.spawn_toucher(&["--active", "16M"]);
    let tmp = tempfile::tempdir().unwrap();
    // max - min of 1 TiB cannot be backed on this host.
    let text = adopt_config(&cg.path, "256M", "").replace("max = \"1G\"", "max = \"1T\"");
    let (code, stderr, state) = daemon_to_exit(tmp.path(), &text);
    assert_eq!(code, 2, "{stderr}");
    let last = stderr.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains("every configured tenant was refused"),
        "{stderr}"
    );
    assert!(last.contains("max - min"), "{stderr}");
    assert!(!state.exists());
    assert_eq!(limit_bytes(&cg.sample()), Some(900 * MIB));
}
