//! The daemon's live dashboard (`GET /`) in a real browser: headless Chromium opens the page of a daemon managing two real tenants under the idle tax and shows what a person would check, each tenant's name, a chart per tenant whose last point is what `/v1/status` said at the page's tick, a decision's reason, with no console message (no script error, nothing the page's security policy refused); without scripts it is served whole. Set `MEMTIDE_SCREENSHOTS=DIR` to keep the screenshot (`scripts/screenshots.sh` does, for docs/screenshots/dashboard.png).

use crate::host::*;
use memtide_api::Snapshot;
use memtide_testkit::browser::{chromium, dump_and_shoot, ink, run_with_limit};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Text as Chromium serializes it in a dumped DOM.
fn as_dom_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The tick the page was drawn at, from its header ("tick N,").
fn page_tick(dom: &str) -> Option<u64> {
    let at = dom.find(", tick ")? + ", tick ".len();
    dom[at..].split(',').next()?.trim().parse().ok()
}

#[test]
fn the_dashboard_shows_each_tenant_its_latest_figures_and_the_reasons_in_chromium() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "the_dashboard_shows_each_tenant_its_latest_figures_and_the_reasons_in_chromium";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(chromium) = chromium() else {
        skip_or_fail(test, "no chromium on the PATH (apt-get install chromium)");
        return;
    };
    let busy = linux.cgroup("dash-busy");
    let idle = linux.cgroup("dash-idle");
    let _busy = busy.spawn_toucher(&["--active", "48M"]);
    let _idle = idle.spawn_toucher(&["--idle", "96M"]);
    let tmp = tempfile::tempdir().unwrap();
    let config = format!(
        r#"{}
[[tenant]]
name = "busy"
cgroup = "{}"
min = "16M"
max = "512M"

[[tenant]]
name = "idle.cache"
cgroup = "{}"
min = "16M"
max = "512M"
"#,
        config_head("500ms", "self", "200M"),
        busy.path,
        idle.path
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    daemon.wait_until(
        "both tenants hold their memory and a limit was lowered",
        Duration::from_secs(60),
        |s| {
            s.tenants.iter().all(|t| t.allocated_bytes > 32 * MIB)
                && s.decisions.iter().any(|d| d.outcome == "lower")
        },
    );

    // For the docs' picture, some history to draw.
    if std::env::var_os("MEMTIDE_SCREENSHOTS").is_some() {
        std::thread::sleep(Duration::from_secs(90));
    }

    // Every snapshot while the browser loads the page, by tick: the page's own tick then
    // names the snapshot it was drawn from.
    let seen: Arc<Mutex<BTreeMap<u64, Snapshot>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (seen, stop, addr) = (Arc::clone(&seen), Arc::clone(&stop), daemon.addr);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(s) = memtide_api::fetch(addr, Duration::from_secs(2)) {
                    seen.lock().unwrap().insert(s.ticks, s);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let url = format!("http://{}/?window=5m", daemon.addr);
    let shot = tmp.path().join("dashboard.png");
    let mut command = dump_and_shoot(&chromium, &tmp.path().join("profile"), (1400, 2000), &shot);
    command.arg(&url);
    let out = run_with_limit(command, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed: {stderr}");
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    poller.join().unwrap();
    // What a browser without scripts gets: the page as the daemon drew it (headless Chromium
    // with scripts off neither dumps nor paints, so it is read as served).
    let (code, served) = memtide_api::request(
        daemon.addr,
        "GET",
        "/?window=5m",
        None,
        Duration::from_secs(5),
    )
    .expect("GET /");
    let log = daemon.log_text();

    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    assert!(dom.trim_end().ends_with("</html>"), "DOM cut short:\n{dom}");
    let tick = page_tick(&dom).unwrap_or_else(|| panic!("no tick in the page:\n{dom}"));
    let seen = seen.lock().unwrap();
    let status = seen.get(&tick).unwrap_or_else(|| {
        panic!(
            "the page's tick {tick} is none of the snapshots seen meanwhile ({:?})",
            seen.keys().collect::<Vec<_>>()
        )
    });

    // Host band, host memory, and a chart per tenant (with one of refaults for a tenant
    // that had any).
    let charts = dom.matches("<svg class=\"chart\"").count();
    assert!(charts >= 4, "{charts} charts:\n{dom}");
    for t in &status.tenants {
        let name = as_dom_text(&t.name);
        assert!(dom.contains(&format!("<h3>{name}</h3>")), "{name}:\n{dom}");
        let chart = &dom[dom.find(&format!("<h3>{name}</h3>")).unwrap()..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        // The legend and the line's last point: the allocation and limit at the page's tick.
        let mib = |b: u64| format!("{:.1}", b as f64 / MIB as f64);
        let mut lines = vec![("allocated", t.allocated_bytes)];
        lines.extend(t.limit_bytes.map(|l| ("limit", l)));
        lines.push(("target", t.target_bytes));
        for (line, bytes) in lines {
            let want = format!("{line} {} MiB: last {} at 0.0", mib(bytes), mib(bytes));
            assert!(
                chart.contains(&want),
                "{name}'s {line} at tick {tick} should end at {} MiB:\n{chart}",
                mib(bytes)
            );
        }
        assert!(
            dom.contains(&as_dom_text(&t.reason)),
            "{name}'s reason {:?} is not on the page",
            t.reason
        );
    }
    let lowered = status
        .decisions
        .iter()
        .rev()
        .find(|d| d.outcome == "lower")
        .expect("a lowering in the snapshot");
    assert!(
        dom.contains(&as_dom_text(&lowered.reason)),
        "the last lowering's reason {:?} is not on the page",
        lowered.reason
    );

    assert_eq!(code, 200, "{served}");
    assert_eq!(
        served.matches("<svg class=\"chart\"").count(),
        charts,
        "the served page draws what the browser showed"
    );
    assert!(served.contains("<noscript><meta http-equiv=\"refresh\""));
    for t in &status.tenants {
        assert!(served.contains(&format!("<h3>{}</h3>", t.name)), "{served}");
    }

    // The screenshot: 1400 px wide, not blank.
    let (width, height, inked, colours) = ink(&shot);
    assert_eq!((width, height), (1400, 2000));
    assert!(
        inked > 0.02 && colours >= 8,
        "{inked} ink, {colours} colours"
    );
    if let Some(dir) = std::env::var_os("MEMTIDE_SCREENSHOTS") {
        std::fs::copy(&shot, std::path::Path::new(&dir).join("dashboard.png")).unwrap();
    }
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}; log:\n{log}");
}
