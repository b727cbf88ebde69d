//! Prometheus text exposition (format 0.0.4) of a `Snapshot`: host, per-tenant and counter metrics, each family with HELP and TYPE.
//!
//! A figure the kernel does not expose (`None` in the snapshot) has no series at all, never a
//! zero. Names, labels and meanings: docs/metrics.md.

use std::fmt::Write;

use memtide_api::Snapshot;
use memtide_runner::columns::{Column, Kind, Metric, TENANT_COLUMNS};

/// The reclamation states, in the order their series are written.
const STATES: [&str; 4] = ["high", "soft", "hard", "low"];

/// The host's gauges: name, HELP and the figure (`None`: no series).
type HostGauge = (&'static str, &'static str, fn(&Snapshot) -> Option<f64>);

/// The host's gauges, in the order they are written.
const HOST_GAUGES: &[HostGauge] = &[
    (
        "memtide_host_machine_bytes",
        "The host's memory (MemTotal), in bytes.",
        |s| Some(s.host.machine_bytes as f64),
    ),
    (
        "memtide_host_free_bytes",
        "Memory available on the host (MemAvailable), in bytes.",
        |s| Some(s.host.free_bytes as f64),
    ),
    (
        "memtide_host_budget_bytes",
        "Bytes memtide hands out to its tenants.",
        |s| Some(s.host.budget_bytes as f64),
    ),
    (
        "memtide_host_swap_total_bytes",
        "The host's swap space, in bytes.",
        |s| Some(s.host.swap_total_bytes as f64),
    ),
    (
        "memtide_host_swap_free_bytes",
        "The host's free swap space, in bytes.",
        |s| Some(s.host.swap_free_bytes as f64),
    ),
    (
        "memtide_host_pressure_some_avg10",
        "The host's memory pressure (PSI some avg10), percent.",
        |s| s.host.pressure_some_avg10,
    ),
    (
        "memtide_sharing_shared_bytes",
        "Memory backed by a page shared by page sharing (KSM), in bytes.",
        |s| s.host.sharing.as_ref().map(|x| x.shared_bytes as f64),
    ),
    (
        "memtide_sharing_reclaimed_bytes",
        "Memory page sharing saves: shared less one copy per shared page, in bytes.",
        |s| s.host.sharing.as_ref().map(|x| x.reclaimed_bytes as f64),
    ),
    (
        "memtide_sharing_zero_bytes",
        "Of the shared memory, pages of zeros, in bytes.",
        |s| s.host.sharing.as_ref().and_then(|x| x.zero_bytes).map(|b| b as f64),
    ),
    (
        "memtide_sharing_metadata_bytes",
        "Page sharing's own bookkeeping (KSM's rmap items), in bytes.",
        |s| s.host.sharing.as_ref().and_then(|x| x.metadata_bytes).map(|b| b as f64),
    ),
    (
        "memtide_sharing_scan_rate_pages",
        "The scan rate memtide set for page sharing, pages per second.",
        |s| s.host.sharing.as_ref().map(|x| x.scan_rate_pages_per_s as f64),
    ),
    (
        "memtide_sharing_scanner_cpu_ratio",
        "The page-sharing scanner's (ksmd's) CPU time over the last tick, as a fraction of one core.",
        |s| s.host.sharing.as_ref().and_then(|x| x.scanner_cpu),
    ),
    (
        "memtide_tax_rate",
        "The idle memory tax rate, in [0, 1).",
        |s| Some(s.host.tax_rate),
    ),
];

/// Renders every metric of `s` in the Prometheus text format.
pub fn render(s: &Snapshot) -> String {
    let mut out = String::with_capacity(4096 + s.tenants.len() * 2048);
    for column in TENANT_COLUMNS {
        if let Some(metric) = &column.metric {
            tenant_family(&mut out, s, metric, column);
        }
    }
    for (name, help, value) in HOST_GAUGES {
        gauge(&mut out, name, help, value(s));
    }
    let h = &s.host;

    family(
        &mut out,
        "memtide_reclamation_state",
        "gauge",
        "1 for the reclamation state the host is in (high, soft, hard, low), 0 for the others.",
    );
    for state in STATES {
        let v = if h.state == state { 1.0 } else { 0.0 };
        sample(
            &mut out,
            "memtide_reclamation_state",
            &[("state", state)],
            v,
        );
    }

    let c = &s.counters;
    family(
        &mut out,
        "memtide_state_ticks_total",
        "counter",
        "Ticks spent in each reclamation state.",
    );
    for state in STATES {
        let v = c.state_ticks.get(state).copied().unwrap_or(0);
        sample(
            &mut out,
            "memtide_state_ticks_total",
            &[("state", state)],
            v as f64,
        );
    }
    for (state, v) in c
        .state_ticks
        .iter()
        .filter(|(k, _)| !STATES.contains(&k.as_str()))
    {
        sample(
            &mut out,
            "memtide_state_ticks_total",
            &[("state", state)],
            *v as f64,
        );
    }

    family(&mut out, "memtide_decisions_total", "counter", "Decisions by outcome: limit raised or lowered, shrink held by the rails, not written (dry run), write failed, tenant admitted, refused or dropped.");
    let outcomes = [
        ("raise", c.limit_raised),
        ("lower", c.limit_lowered),
        ("hold", c.held),
        ("dry_run", c.dry_run),
        ("write_failed", c.write_failures),
        ("admitted", c.admitted),
        ("refused", c.refused),
        ("dropped", c.dropped),
    ];
    for (outcome, v) in outcomes {
        sample(
            &mut out,
            "memtide_decisions_total",
            &[("outcome", outcome)],
            v as f64,
        );
    }

    family(
        &mut out,
        "memtide_restore_failures_total",
        "counter",
        "Failed attempts to give a tenant memtide let go (no longer configured, or gone) back its limits; a failed restore is retried every tick, so one tenant left unrestored counts once a tick.",
    );
    sample(
        &mut out,
        "memtide_restore_failures_total",
        &[],
        c.restore_failures as f64,
    );
    family(
        &mut out,
        "memtide_ticks_total",
        "counter",
        "Ticks completed since the daemon started.",
    );
    sample(&mut out, "memtide_ticks_total", &[], c.ticks as f64);
    gauge(
        &mut out,
        "memtide_uptime_seconds",
        "Seconds since the daemon started.",
        Some(s.uptime_s),
    );
    gauge(
        &mut out,
        "memtide_dry_run",
        "1 when the daemon decides and explains but writes nothing.",
        Some(if s.dry_run { 1.0 } else { 0.0 }),
    );
    family(
        &mut out,
        "memtide_build_info",
        "gauge",
        "Always 1; the version label says which memtide runs.",
    );
    sample(
        &mut out,
        "memtide_build_info",
        &[("version", &s.version)],
        1.0,
    );
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, value: Option<f64>) {
    family(out, name, "gauge", help);
    if let Some(v) = value {
        sample(out, name, &[], v);
    }
}

/// One family of per-tenant series (`tenant` label).
fn tenant_family(out: &mut String, s: &Snapshot, metric: &Metric, column: &Column) {
    family(out, metric.name, metric.kind.name(), metric.help);
    for t in &s.tenants {
        if let Kind::Choice { label, values, of } = metric.kind {
            let Some(chosen) = of(t) else { continue };
            for v in values {
                let x = if chosen == *v { 1.0 } else { 0.0 };
                sample(out, metric.name, &[("tenant", &t.name), (label, v)], x);
            }
        } else if let Kind::Counts { label, values, of } = metric.kind {
            for v in values {
                if let Some(n) = of(t, v) {
                    sample(
                        out,
                        metric.name,
                        &[("tenant", &t.name), (label, v)],
                        n as f64,
                    );
                }
            }
        } else if let Some(v) = column.value_of(t) {
            sample(out, metric.name, &[("tenant", &t.name)], v);
        }
    }
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label_value(v));
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&format_value(value));
    out.push('\n');
}

/// A label value with backslash, double quote and newline escaped, as the format requires.
pub fn escape_label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text escapes backslash and newline (not the double quote).
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value: integers without a fraction, `NaN`, `+Inf`, `-Inf` spelled as Prometheus does.
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        // Rust's shortest round-trip form: `3`, `0.75`, `1e21` are all valid Go floats.
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_api::{Counters, HostSnapshot, TenantSnapshot};
    use std::collections::{BTreeMap, BTreeSet};

    fn tenant(name: &str) -> TenantSnapshot {
        TenantSnapshot {
            name: name.to_string(),
            min_bytes: 64 << 20,
            max_bytes: 1 << 30,
            shares: 1000,
            allocated_bytes: 500 << 20,
            target_bytes: 400 << 20,
            active_estimate_bytes: 300 << 20,
            limit_bytes: Some(450 << 20),
            floor_bytes: 96 << 20,
            anon_bytes: Some(200 << 20),
            file_bytes: Some(100 << 20),
            swap_bytes: Some(0),
            refaults_total: Some(12),
            major_faults_total: Some(3),
            app: Some(memtide_api::AppSnapshot {
                app: "db".into(),
                kind: "buffer_pool".into(),
                pid: Some(7),
                pool_bytes: 256 << 20,
                wanted_bytes: Some(192 << 20),
                held_by: "app".into(),
                why: None,
                takeovers: [("deadline".to_string(), 2)].into(),
                last_resize: Some(memtide_api::ResizeSnapshot {
                    pool_bytes: 256 << 20,
                    status: "done".into(),
                    took_s: 0.5,
                    reason: None,
                }),
            }),
            cache: Some(memtide_api::CacheSnapshot {
                slo: "strict".into(),
                target_us: Some(500.0),
                slack: Some(0.1),
                quota_bytes: 192 << 20,
                budget_bytes: 512 << 20,
                predicted_latency_us: 481.5,
                utility: 0.0,
            }),
            disk: Some(memtide_api::DiskSnapshot {
                weight: Some(400),
                base_weight: Some(100),
                boost: Some(4),
                latency_ms: Some(12.5),
                target_ms: Some(5.0),
                ops_total: 6000,
                bytes_total: 24 << 20,
                ..Default::default()
            }),
            vm: Some(memtide_api::VmSnapshot {
                balloon_bytes: 256 << 20,
                balloon_target_bytes: Some(320 << 20),
                stalled: false,
                host_swapped_bytes: 0,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            api_version: memtide_api::API_VERSION,
            version: "0.1.0".into(),
            dry_run: false,
            ticks: 10,
            uptime_s: 10.5,
            host: HostSnapshot {
                machine_bytes: 8 << 30,
                free_bytes: 2 << 30,
                budget_bytes: 6 << 30,
                swap_total_bytes: 1 << 30,
                swap_free_bytes: 1 << 30,
                state: "soft".into(),
                tax_rate: 0.75,
                pressure_some_avg10: Some(1.5),
                sharing: Some(memtide_api::SharingSnapshot {
                    shared_bytes: 300 << 20,
                    reclaimed_bytes: 200 << 20,
                    zero_bytes: Some(10 << 20),
                    metadata_bytes: None,
                    scan_rate_pages_per_s: 20_000,
                    scanned_pages_per_s: None,
                    scanner_cpu: Some(0.125),
                }),
                ..Default::default()
            },
            tenants: vec![TenantSnapshot {
                shared_bytes: Some(150 << 20),
                sharing_profit_bytes: Some(-4096),
                ..tenant("db")
            }],
            decisions: vec![],
            counters: Counters {
                ticks: 10,
                limit_raised: 2,
                limit_lowered: 3,
                admitted: 1,
                state_ticks: BTreeMap::from([("high".into(), 4), ("soft".into(), 6)]),
                ..Default::default()
            },
        }
    }

    /// Metric names of sample lines, and names with HELP and with TYPE.
    fn names(text: &str) -> (Vec<String>, BTreeSet<String>, BTreeSet<String>) {
        let mut samples = Vec::new();
        let (mut help, mut kind) = (BTreeSet::new(), BTreeSet::new());
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                help.insert(rest.split(' ').next().unwrap().to_string());
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                kind.insert(rest.split(' ').next().unwrap().to_string());
            } else {
                let end = line.find(['{', ' ']).unwrap();
                samples.push(line[..end].to_string());
            }
        }
        (samples, help, kind)
    }

    #[test]
    fn label_values_escape_backslash_quote_and_newline() {
        assert_eq!(escape_label_value(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label_value("two\nlines"), "two\\nlines");
        assert_eq!(escape_label_value("plain-name_1.x"), "plain-name_1.x");
        let mut s = snapshot();
        s.tenants[0].name = "we\"ird\\\nname".into();
        let text = render(&s);
        assert!(
            text.contains("memtide_tenant_shares{tenant=\"we\\\"ird\\\\\\nname\"} 1000\n"),
            "{text}"
        );
    }

    #[test]
    fn every_sample_has_help_and_type() {
        let text = render(&snapshot());
        let (samples, help, kind) = names(&text);
        assert!(samples.len() > 30);
        for name in samples {
            assert!(help.contains(&name), "{name} has no HELP");
            assert!(kind.contains(&name), "{name} has no TYPE");
        }
    }

    #[test]
    fn counters_end_in_total_and_gauges_do_not() {
        let text = render(&snapshot());
        for line in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
            let (name, kind) = line.split_once(' ').unwrap();
            assert_eq!(name.ends_with("_total"), kind == "counter", "{line}");
        }
    }

    #[test]
    fn absent_figures_have_no_series() {
        let mut s = snapshot();
        let t = &mut s.tenants[0];
        t.limit_bytes = None;
        t.anon_bytes = None;
        t.file_bytes = None;
        t.swap_bytes = None;
        t.refaults_total = None;
        t.major_faults_total = None;
        if let Some(d) = &mut t.disk {
            d.latency_ms = None;
        }
        s.host.pressure_some_avg10 = None;
        let (samples, _, _) = names(&render(&s));
        for gone in [
            "memtide_tenant_limit_bytes",
            "memtide_tenant_anon_bytes",
            "memtide_tenant_file_bytes",
            "memtide_tenant_swap_bytes",
            "memtide_tenant_refaults_total",
            "memtide_tenant_major_faults_total",
            "memtide_tenant_pressure_some_avg10",
            "memtide_host_pressure_some_avg10",
            "memtide_tenant_disk_latency_seconds",
        ] {
            assert!(
                !samples.iter().any(|n| n == gone),
                "{gone} should have no series"
            );
        }
        assert!(samples
            .iter()
            .any(|n| n == "memtide_tenant_allocated_bytes"));
    }

    #[test]
    fn values_spell_special_floats_as_prometheus_does() {
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(0.75), "0.75");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(u64::MAX as f64), "18446744073709552000");
    }

    #[test]
    fn golden_small_snapshot() {
        let want = r#"# HELP memtide_tenant_allocated_bytes Memory the tenant's cgroup holds now (usage), in bytes.
# TYPE memtide_tenant_allocated_bytes gauge
memtide_tenant_allocated_bytes{tenant="db"} 524288000
# HELP memtide_tenant_target_bytes The allocation memtide aims at for the tenant, in bytes.
# TYPE memtide_tenant_target_bytes gauge
memtide_tenant_target_bytes{tenant="db"} 419430400
# HELP memtide_tenant_active_estimate_bytes The estimator's figure for the tenant's active memory, in bytes.
# TYPE memtide_tenant_active_estimate_bytes gauge
memtide_tenant_active_estimate_bytes{tenant="db"} 314572800
# HELP memtide_tenant_limit_bytes The memory limit in force on the tenant's cgroup, in bytes (no series: unlimited).
# TYPE memtide_tenant_limit_bytes gauge
memtide_tenant_limit_bytes{tenant="db"} 471859200
# HELP memtide_tenant_floor_bytes The lowest limit the safety rails allow now, in bytes.
# TYPE memtide_tenant_floor_bytes gauge
memtide_tenant_floor_bytes{tenant="db"} 100663296
# HELP memtide_tenant_min_bytes The tenant's configured min, in bytes.
# TYPE memtide_tenant_min_bytes gauge
memtide_tenant_min_bytes{tenant="db"} 67108864
# HELP memtide_tenant_max_bytes The tenant's configured max, in bytes.
# TYPE memtide_tenant_max_bytes gauge
memtide_tenant_max_bytes{tenant="db"} 1073741824
# HELP memtide_tenant_shares The tenant's configured shares.
# TYPE memtide_tenant_shares gauge
memtide_tenant_shares{tenant="db"} 1000
# HELP memtide_tenant_anon_bytes Anonymous memory the tenant holds, in bytes.
# TYPE memtide_tenant_anon_bytes gauge
memtide_tenant_anon_bytes{tenant="db"} 209715200
# HELP memtide_tenant_file_bytes Page cache the tenant holds, in bytes.
# TYPE memtide_tenant_file_bytes gauge
memtide_tenant_file_bytes{tenant="db"} 104857600
# HELP memtide_tenant_swap_bytes The tenant's memory in swap, in bytes.
# TYPE memtide_tenant_swap_bytes gauge
memtide_tenant_swap_bytes{tenant="db"} 0
# HELP memtide_tenant_pressure_some_avg10 The tenant's memory pressure (PSI some avg10), percent.
# TYPE memtide_tenant_pressure_some_avg10 gauge
# HELP memtide_tenant_pressure_full_avg10 The share of time all the tenant's tasks stalled on memory at once (PSI full avg10), percent.
# TYPE memtide_tenant_pressure_full_avg10 gauge
# HELP memtide_tenant_unevictable_bytes The tenant's unevictable memory (mlocked, ramfs, SHM_LOCK), which no limit reclaims, in bytes.
# TYPE memtide_tenant_unevictable_bytes gauge
# HELP memtide_app_pool_bytes The tenant's application pool as its balloon agent last reported it, in bytes.
# TYPE memtide_app_pool_bytes gauge
memtide_app_pool_bytes{tenant="db"} 268435456
# HELP memtide_app_wanted_bytes The application pool memtide wants for the tenant, in bytes.
# TYPE memtide_app_wanted_bytes gauge
memtide_app_wanted_bytes{tenant="db"} 201326592
# HELP memtide_app_last_resize_seconds How long the application took to answer its last target, in seconds.
# TYPE memtide_app_last_resize_seconds gauge
memtide_app_last_resize_seconds{tenant="db"} 0.5
# HELP memtide_app_held_by 1 for the mechanism that moves an application tenant's memory (app: its agent, os: the cgroup limit), 0 for the other.
# TYPE memtide_app_held_by gauge
memtide_app_held_by{tenant="db",by="app"} 1
memtide_app_held_by{tenant="db",by="os"} 0
# HELP memtide_app_takeovers_total Times memtide took an application tenant over from its agent, by reason: deadline (no answer in time), dead (its process is gone), dishonest (it claimed a release its memory did not show), violations (too many protocol errors).
# TYPE memtide_app_takeovers_total counter
memtide_app_takeovers_total{tenant="db",reason="deadline"} 2
memtide_app_takeovers_total{tenant="db",reason="dead"} 0
memtide_app_takeovers_total{tenant="db",reason="dishonest"} 0
memtide_app_takeovers_total{tenant="db",reason="violations"} 0
# HELP memtide_tenant_cache_quota_bytes The pool the tenant's cache quota gives it (its SLO under [cache]), in bytes.
# TYPE memtide_tenant_cache_quota_bytes gauge
memtide_tenant_cache_quota_bytes{tenant="db"} 201326592
# HELP memtide_tenant_cache_predicted_latency_seconds The mean latency the tenant's pool curve predicts at its cache quota, in seconds.
# TYPE memtide_tenant_cache_predicted_latency_seconds gauge
memtide_tenant_cache_predicted_latency_seconds{tenant="db"} 0.0004815
# HELP memtide_tenant_disk_weight The tenant's weight on the disk [io] manages (BFQ's, 1-1000).
# TYPE memtide_tenant_disk_weight gauge
memtide_tenant_disk_weight{tenant="db"} 400
# HELP memtide_tenant_disk_latency_seconds The I/O latency the tenant saw over the last tick, in seconds (on Linux the device's mean await); no series when it did no I/O.
# TYPE memtide_tenant_disk_latency_seconds gauge
memtide_tenant_disk_latency_seconds{tenant="db"} 0.0125
# HELP memtide_tenant_disk_ops_total Operations the tenant completed on the disk [io] manages since memtide started watching it.
# TYPE memtide_tenant_disk_ops_total counter
memtide_tenant_disk_ops_total{tenant="db"} 6000
# HELP memtide_tenant_disk_bytes_total Bytes the tenant read and wrote on the disk [io] manages since memtide started watching it.
# TYPE memtide_tenant_disk_bytes_total counter
memtide_tenant_disk_bytes_total{tenant="db"} 25165824
# HELP memtide_tenant_balloon_bytes A VM's balloon now: guest memory its guest gave back, in bytes.
# TYPE memtide_tenant_balloon_bytes gauge
memtide_tenant_balloon_bytes{tenant="db"} 268435456
# HELP memtide_tenant_balloon_target_bytes The balloon size the policy asked of a VM this tick, in bytes; no series without a balloon driver.
# TYPE memtide_tenant_balloon_target_bytes gauge
memtide_tenant_balloon_target_bytes{tenant="db"} 335544320
# HELP memtide_tenant_balloon_stalled 1 while a VM's balloon driver does not move toward a larger target (host swap takes over), else 0.
# TYPE memtide_tenant_balloon_stalled gauge
memtide_tenant_balloon_stalled{tenant="db"} 0
# HELP memtide_tenant_host_swapped_bytes A VM's memory in host swap (its cgroup's swap), in bytes.
# TYPE memtide_tenant_host_swapped_bytes gauge
memtide_tenant_host_swapped_bytes{tenant="db"} 0
# HELP memtide_tenant_shared_bytes The tenant's memory merged with other pages by page sharing (KSM), in bytes.
# TYPE memtide_tenant_shared_bytes gauge
memtide_tenant_shared_bytes{tenant="db"} 157286400
# HELP memtide_tenant_sharing_profit_bytes What page sharing saves the tenant net of KSM's bookkeeping (ksm_process_profit), in bytes.
# TYPE memtide_tenant_sharing_profit_bytes gauge
memtide_tenant_sharing_profit_bytes{tenant="db"} -4096
# HELP memtide_tenant_refaults_total Refaults (anon + file) since memtide started watching the tenant.
# TYPE memtide_tenant_refaults_total counter
memtide_tenant_refaults_total{tenant="db"} 12
# HELP memtide_tenant_major_faults_total Major page faults of the tenant's cgroup.
# TYPE memtide_tenant_major_faults_total counter
memtide_tenant_major_faults_total{tenant="db"} 3
# HELP memtide_host_machine_bytes The host's memory (MemTotal), in bytes.
# TYPE memtide_host_machine_bytes gauge
memtide_host_machine_bytes 8589934592
# HELP memtide_host_free_bytes Memory available on the host (MemAvailable), in bytes.
# TYPE memtide_host_free_bytes gauge
memtide_host_free_bytes 2147483648
# HELP memtide_host_budget_bytes Bytes memtide hands out to its tenants.
# TYPE memtide_host_budget_bytes gauge
memtide_host_budget_bytes 6442450944
# HELP memtide_host_swap_total_bytes The host's swap space, in bytes.
# TYPE memtide_host_swap_total_bytes gauge
memtide_host_swap_total_bytes 1073741824
# HELP memtide_host_swap_free_bytes The host's free swap space, in bytes.
# TYPE memtide_host_swap_free_bytes gauge
memtide_host_swap_free_bytes 1073741824
# HELP memtide_host_pressure_some_avg10 The host's memory pressure (PSI some avg10), percent.
# TYPE memtide_host_pressure_some_avg10 gauge
memtide_host_pressure_some_avg10 1.5
# HELP memtide_sharing_shared_bytes Memory backed by a page shared by page sharing (KSM), in bytes.
# TYPE memtide_sharing_shared_bytes gauge
memtide_sharing_shared_bytes 314572800
# HELP memtide_sharing_reclaimed_bytes Memory page sharing saves: shared less one copy per shared page, in bytes.
# TYPE memtide_sharing_reclaimed_bytes gauge
memtide_sharing_reclaimed_bytes 209715200
# HELP memtide_sharing_zero_bytes Of the shared memory, pages of zeros, in bytes.
# TYPE memtide_sharing_zero_bytes gauge
memtide_sharing_zero_bytes 10485760
# HELP memtide_sharing_metadata_bytes Page sharing's own bookkeeping (KSM's rmap items), in bytes.
# TYPE memtide_sharing_metadata_bytes gauge
# HELP memtide_sharing_scan_rate_pages The scan rate memtide set for page sharing, pages per second.
# TYPE memtide_sharing_scan_rate_pages gauge
memtide_sharing_scan_rate_pages 20000
# HELP memtide_sharing_scanner_cpu_ratio The page-sharing scanner's (ksmd's) CPU time over the last tick, as a fraction of one core.
# TYPE memtide_sharing_scanner_cpu_ratio gauge
memtide_sharing_scanner_cpu_ratio 0.125
# HELP memtide_tax_rate The idle memory tax rate, in [0, 1).
# TYPE memtide_tax_rate gauge
memtide_tax_rate 0.75
# HELP memtide_reclamation_state 1 for the reclamation state the host is in (high, soft, hard, low), 0 for the others.
# TYPE memtide_reclamation_state gauge
memtide_reclamation_state{state="high"} 0
memtide_reclamation_state{state="soft"} 1
memtide_reclamation_state{state="hard"} 0
memtide_reclamation_state{state="low"} 0
# HELP memtide_state_ticks_total Ticks spent in each reclamation state.
# TYPE memtide_state_ticks_total counter
memtide_state_ticks_total{state="high"} 4
memtide_state_ticks_total{state="soft"} 6
memtide_state_ticks_total{state="hard"} 0
memtide_state_ticks_total{state="low"} 0
# HELP memtide_decisions_total Decisions by outcome: limit raised or lowered, shrink held by the rails, not written (dry run), write failed, tenant admitted, refused or dropped.
# TYPE memtide_decisions_total counter
memtide_decisions_total{outcome="raise"} 2
memtide_decisions_total{outcome="lower"} 3
memtide_decisions_total{outcome="hold"} 0
memtide_decisions_total{outcome="dry_run"} 0
memtide_decisions_total{outcome="write_failed"} 0
memtide_decisions_total{outcome="admitted"} 1
memtide_decisions_total{outcome="refused"} 0
memtide_decisions_total{outcome="dropped"} 0
# HELP memtide_restore_failures_total Failed attempts to give a tenant memtide let go (no longer configured, or gone) back its limits; a failed restore is retried every tick, so one tenant left unrestored counts once a tick.
# TYPE memtide_restore_failures_total counter
memtide_restore_failures_total 0
# HELP memtide_ticks_total Ticks completed since the daemon started.
# TYPE memtide_ticks_total counter
memtide_ticks_total 10
# HELP memtide_uptime_seconds Seconds since the daemon started.
# TYPE memtide_uptime_seconds gauge
memtide_uptime_seconds 10.5
# HELP memtide_dry_run 1 when the daemon decides and explains but writes nothing.
# TYPE memtide_dry_run gauge
memtide_dry_run 0
# HELP memtide_build_info Always 1; the version label says which memtide runs.
# TYPE memtide_build_info gauge
memtide_build_info{version="0.1.0"} 1
"#;
        assert_eq!(render(&snapshot()), want);
    }
}
