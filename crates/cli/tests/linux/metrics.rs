//! A real Prometheus server (Debian's `prometheus`, on loopback) scrapes the daemon's `/metrics`: the exposition is valid and the figures arrive, and contrib/'s alert rules (checked by `promtool`) and Grafana dashboard name only metrics the daemon exposes, in expressions Prometheus evaluates.

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

    // contrib/: every metric the alert rules and the Grafana dashboard name is one the daemon
    // exposes and Prometheus ingested (its metadata: a family without a series on this host,
    // such as a VM's balloon, still has its HELP and TYPE), and every expression evaluates.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let rules_path = root.join("contrib/prometheus/alerts.yml");
    let check = Command::new(std::path::Path::new(prometheus).with_file_name("promtool"))
        .args(["check", "rules"])
        .arg(&rules_path)
        .output()
        .expect("run promtool (Debian's prometheus package has it)");
    assert!(
        check.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let rules = std::fs::read_to_string(&rules_path).unwrap();
    let dashboard = std::fs::read_to_string(root.join("contrib/grafana/memtide.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    let mut exprs: Vec<String> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr: "))
        .map(str::to_string)
        .collect();
    let rule_count = exprs.len();
    assert!(rule_count >= 7, "{rules}");
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(
                t["expr"]
                    .as_str()
                    .unwrap()
                    .replace("$instance", ".*")
                    .replace("$tenant", ".*"),
            );
        }
    }
    assert!(exprs.len() > rule_count + 20, "the dashboard's panels");
    let get = |path: &str| -> serde_json::Value {
        let (code, body) = status::request(prom, "GET", path, None, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    };
    let metadata = get("/api/v1/metadata")["data"].clone();
    let mut names: Vec<String> = Vec::new();
    for e in &exprs {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("memtide_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[i + name.len()..];
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let answer = get(&format!(
            "/api/v1/query?query={}",
            memtide_api::body::percent_encode(e)
        ));
        assert_eq!(answer["status"], "success", "{e}: {answer}");
    }
    assert!(names.len() > 40, "{names:?}");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| metadata.get(n.as_str()).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "named in contrib/ but not exposed by the daemon: {missing:?}"
    );
    // The figures every host has arrive as series, not metadata alone.
    for name in [
        "memtide_tenant_target_bytes",
        "memtide_host_budget_bytes",
        "memtide_reclamation_state",
        "memtide_ticks_total",
        "memtide_restore_failures_total",
    ] {
        let answer = get(&format!("/api/v1/query?query={name}"));
        let series = answer["data"]["result"].as_array().map_or(0, Vec::len);
        assert!(series > 0, "{name}: {answer}");
    }
    let _ = server.kill();
    let _ = server.wait();
}
