//! Memory moving on this machine's real cgroups: the idle memory tax takes memory from an idle toucher and gives it to an active one, and the TWS probe brings a tenant's limit down to its working set. Both need swap, so each sets up zram for its run.
//!
//! Times to converge are printed (`cargo test -- --nocapture`) and reported in
//! docs/benchmarks.md; the assertions are on the shape, with generous time bounds.

use crate::host::*;
use std::time::{Duration, Instant};

#[test]
fn the_idle_tax_moves_memory_from_an_idle_tenant_to_an_active_one() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "the_idle_tax_moves_memory_from_an_idle_tenant_to_an_active_one";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(_swap) = zram(test, "2G") else {
        return;
    };
    let parent = linux.cgroup("tax");
    let tmp = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
[daemon]
tick = "500ms"
listen = "{{listen}}"
state_file = "{{state}}"

[host]
parent = "{}"
budget = "600M"

[policy]
tax_rate = 0.75
sampling_period = "5s"

[[tenant]]
name = "active"
command = ["memtide-toucher", "--active", "400M", "--pause-ms", "100"]
min = "64M"
max = "1G"
estimator = "sampling"

[[tenant]]
name = "idle"
command = ["memtide-toucher", "--active", "8M", "--idle", "300M", "--pause-ms", "100"]
min = "64M"
max = "1G"
estimator = "sampling"
"#,
        parent.path
    );
    let start = Instant::now();
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    let limit_of = |s: &memtide_api::Snapshot, name: &str| {
        s.tenants
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.limit_bytes)
            .unwrap_or(u64::MAX)
    };
    // Tax 0 would split the 600 MiB budget 300/300. With tax 0.75 the shares-per-page
    // equilibrium, with active estimates of ~400 and ~10 MiB, is about 446/154 MiB: the
    // idle tenant keeps less than its 308 MiB, the active one gets more than its 400 MiB.
    let s = daemon.wait_until(
        "the idle limit falls and the active one rises",
        Duration::from_secs(240),
        |s| limit_of(s, "idle") <= 200 * MIB && limit_of(s, "active") >= 430 * MIB,
    );
    let converged = start.elapsed();
    println!(
        "idle tax: converged in {:.1} s: idle limit {:.0} MiB, active limit {:.0} MiB",
        converged.as_secs_f64(),
        mib(limit_of(&s, "idle")),
        mib(limit_of(&s, "active"))
    );
    // The active tenant now holds its working set: its refaults die down.
    std::thread::sleep(Duration::from_secs(5));
    let before = daemon.tenant("active").refaults_total.unwrap_or(0);
    std::thread::sleep(Duration::from_secs(5));
    let after = daemon.tenant("active");
    let rate = (after.refaults_total.unwrap_or(0) - before) as f64 / 5.0;
    println!("idle tax: active refaults at the end {rate:.1}/s");
    assert!(rate < 100.0, "active tenant still refaults {rate:.0}/s");
    let idle = daemon.tenant("idle");
    assert!(
        idle.active_estimate_bytes < after.active_estimate_bytes,
        "idle estimate {} vs active {}",
        idle.active_estimate_bytes,
        after.active_estimate_bytes
    );
    for name in ["active", "idle"] {
        let cg = linux.memory_cgroup(&format!("{}/{name}", parent.path));
        assert_eq!(
            cg.oom_kills().unwrap().unwrap_or(0),
            0,
            "{name} saw an OOM kill"
        );
        assert_eq!(cg.pids().unwrap().len(), 1, "{name}'s toucher is gone");
    }
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
}

#[test]
fn the_working_set_probe_brings_a_1g_limit_down_to_a_300m_working_set() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "the_working_set_probe_brings_a_1g_limit_down_to_a_300m_working_set";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(_swap) = zram(test, "2G") else {
        return;
    };
    let cg = linux.cgroup("tws");
    cg.set_limit_bytes(1 << 30);
    let _toucher = cg.spawn_toucher(&["--active", "300M", "--pause-ms", "100"]);
    std::thread::sleep(Duration::from_secs(2));
    let tmp = tempfile::tempdir().unwrap();
    let head = config_head("500ms", "self", "4G");
    let config = format!(
        r#"{head}
# The budget has room: TWS as published probes anyway.
[policy]
reclaim = "always"

[[tenant]]
name = "ws"
cgroup = "{}"
min = "64M"
max = "1G"
estimator = "tws"
"#,
        cg.path
    );
    let start = Instant::now();
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    let ceiling = 300 * MIB * 115 / 100;
    let in_band = |limit: u64| (280 * MIB..=ceiling).contains(&limit);
    // Converged: the limit stays within 15% above the working set for 10 s.
    let mut since: Option<Instant> = None;
    let converged = loop {
        let limit = limit_bytes(&cg.sample()).unwrap_or(u64::MAX);
        match (in_band(limit), since) {
            (true, None) => since = Some(Instant::now()),
            (true, Some(t)) if t.elapsed() >= Duration::from_secs(10) => {
                break t.duration_since(start)
            }
            (false, _) => since = None,
            _ => {}
        }
        assert!(
            start.elapsed() < Duration::from_secs(150),
            "limit {:.0} MiB not within [280, {:.0}] MiB after 150 s; log:\n{}",
            mib(limit),
            mib(ceiling),
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let t = daemon.tenant("ws");
    println!(
        "tws: limit within 15% of the 300 MiB working set after {:.1} s (limit {:.0} MiB, estimate {:.0} MiB)",
        converged.as_secs_f64(),
        mib(t.limit_bytes.unwrap_or(0)),
        mib(t.active_estimate_bytes)
    );
    let before = t.refaults_total.unwrap_or(0);
    std::thread::sleep(Duration::from_secs(10));
    let rate = (daemon.tenant("ws").refaults_total.unwrap_or(0) - before) as f64 / 10.0;
    println!("tws: refaults after convergence {rate:.0}/s");
    // One probe below the working set costs a few MiB of refaults every cool-down: low, not zero.
    assert!(rate < 1000.0, "refaults stay high: {rate:.0}/s");
    assert_eq!(cg.cgroup.oom_kills().unwrap().unwrap_or(0), 0);
    let _ = daemon.wait_until("still running", Duration::from_secs(5), |_| true);
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(limit_bytes(&cg.sample()), Some(1 << 30), "restored on exit");
}
