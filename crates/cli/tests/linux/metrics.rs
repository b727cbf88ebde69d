//! A real Prometheus server (Debian's `prometheus`, on loopback) scrapes the daemon's `/metrics`: the exposition is valid and the figures arrive.

use crate::host::*;
use memtide_api::client as status;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn prometheus_scrapes_the_daemon() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "prometheus_scrapes_the_daemon";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(prometheus) = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
    else {
        skip_or_fail(test, "no prometheus binary (apt-get install prometheus)");
        return;
    };
    let cg = linux.cgroup("metrics");
    let _toucher = cg.spawn_toucher(&["--active", "16M"]);
    let tmp = tempfile::tempdir().unwrap();
    let head = config_head("500ms", "self", "1G");
    let config = format!(
        r#"{head}
[[tenant]]
name = "app"
cgroup = "{}"
min = "16M"
max = "512M"
"#,
        cg.path
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &["--dry-run"]);
    daemon.wait_until("the toucher's memory shows", Duration::from_secs(20), |s| {
        s.tenants.iter().any(|t| t.allocated_bytes > 4 * MIB)
    });

    let prom_port = free_port();
    let prom_config = tmp.path().join("prometheus.yml");
    std::fs::write(
        &prom_config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: memtide\n    static_configs:\n      - targets: ['{}']\n",
            daemon.addr
        ),
    )
    .unwrap();
    let prom_log = std::fs::File::create(tmp.path().join("prometheus.log")).unwrap();
    let mut server = Command::new(prometheus)
        .arg(format!("--config.file={}", prom_config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            tmp.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(prom_log)
        .spawn()
        .expect("start prometheus");
    let prom = format!("127.0.0.1:{prom_port}").parse().unwrap();
    let query = |q: &str| -> Option<serde_json::Value> {
        let path = format!("/api/v1/query?query={q}");
        let (code, body) =
            status::request(prom, "GET", &path, None, Duration::from_secs(5)).ok()?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
    };
    let start = Instant::now();
    let result = loop {
        let up = query("up%7Bjob%3D%22memtide%22%7D");
        let alloc = query("memtide_tenant_allocated_bytes%7Btenant%3D%22app%22%7D");
        let has = |v: &Option<serde_json::Value>| {
            v.as_ref()
                .and_then(|v| v["data"]["result"].as_array().cloned())
                .filter(|r| !r.is_empty())
        };
        if let (Some(up), Some(alloc)) = (has(&up), has(&alloc)) {
            break (up, alloc);
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = server.kill();
            let log =
                std::fs::read_to_string(tmp.path().join("prometheus.log")).unwrap_or_default();
            panic!("prometheus never ingested memtide's metrics; its log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let (up, alloc) = result;
    assert_eq!(up[0]["value"][1], "1", "the scrape failed: {up:?}");
    let bytes: f64 = alloc[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(bytes > 4.0 * MIB as f64, "allocated {bytes}");
    // Prometheus reports no scrape error for the target.
    let (_, targets) =
        status::request(prom, "GET", "/api/v1/targets", None, Duration::from_secs(5)).unwrap();
    let targets: serde_json::Value = serde_json::from_str(&targets).unwrap();
    let target = &targets["data"]["activeTargets"][0];
    assert_eq!(target["health"], "up", "{target}");
    assert_eq!(target["lastError"], "", "{target}");
    let _ = server.kill();
    let _ = server.wait();
}
