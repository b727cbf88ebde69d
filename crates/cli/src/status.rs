//! `memtide status`'s table: the human summary of a daemon's `Snapshot` (the client that fetches it is `memtide_api::client`).

use memtide_api::{AppSnapshot, DecisionRecord, DiskSnapshot, Snapshot, TenantSnapshot};
use memtide_runner::columns::{Column, StatusColumn, Unit, TENANT_COLUMNS};

/// How many recent decisions `render_table` shows.
const DECISIONS_SHOWN: usize = 5;

/// A size in MiB below 1 GiB, in GiB above.
pub fn human_bytes(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    const GIB: f64 = MIB * 1024.0;
    let b = bytes as f64;
    if b >= GIB {
        format!("{:.2} GiB", b / GIB)
    } else {
        format!("{:.1} MiB", b / MIB)
    }
}

fn opt_bytes(bytes: Option<u64>, none: &str) -> String {
    bytes.map_or_else(|| none.to_string(), human_bytes)
}

/// A figure's cell in the table: `absent` without the figure.
fn cell(column: &StatusColumn, value: Option<f64>) -> String {
    match (value, column.unit) {
        (None, _) => column.absent.to_string(),
        (Some(b), Unit::Bytes) => human_bytes(b as u64),
        (Some(r), Unit::PerSecond) => format!("{r:.1}"),
    }
}

fn uptime(seconds: f64) -> String {
    let s = if seconds.is_finite() && seconds > 0.0 {
        seconds as u64
    } else {
        0
    };
    match (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60) {
        (0, 0, m, sec) => format!("{m}m{sec:02}s"),
        (0, h, m, _) => format!("{h}h{m:02}m"),
        (d, h, _, _) => format!("{d}d{h:02}h"),
    }
}

/// The human summary `memtide status` prints: a host line, a table of tenants and the last
/// few decisions with their reasons.
pub fn render_table(s: &Snapshot) -> String {
    let mut out = host_lines(s);
    out.push('\n');
    if s.tenants.is_empty() {
        out.push_str("no tenants\n");
    } else {
        out.push_str(&tenant_table(&s.tenants));
    }
    out.push_str(&tenant_notes(&s.tenants));
    out.push('\n');
    out.push_str(&recent_decisions(&s.decisions));
    out
}

/// The daemon's line and the host's, with page sharing's when it is on.
fn host_lines(s: &Snapshot) -> String {
    let h = &s.host;
    let mut out = format!(
        "memtide {} · tick {} · up {} · cgroup {} {}\n",
        s.version,
        s.ticks,
        uptime(s.uptime_s),
        h.hierarchy,
        h.parent,
    );
    let pressure = h
        .pressure_some_avg10
        .map_or_else(String::new, |p| format!(" · pressure {p:.1}%"));
    out.push_str(&format!(
        "host: state {} · free {} · budget {} of {} · swap {} free of {} · tax {:.2} · dry-run {}{}\n",
        h.state,
        human_bytes(h.free_bytes),
        human_bytes(h.budget_bytes),
        human_bytes(h.machine_bytes),
        human_bytes(h.swap_free_bytes),
        human_bytes(h.swap_total_bytes),
        h.tax_rate,
        if s.dry_run {
            "yes (decides, writes nothing)"
        } else {
            "no"
        },
        pressure,
    ));
    if let Some(sh) = &h.sharing {
        out.push_str(&sharing_line(sh, &s.tenants));
    }
    out
}

/// The tenants' table: the figures the one table of columns marks for the status, the balloon
/// column when some tenant is a VM, the disk column when some tenant's I/O is managed, and the
/// estimator.
fn tenant_table(tenants: &[TenantSnapshot]) -> String {
    let disk = tenants.iter().any(|t| t.disk.is_some());
    let vm = tenants.iter().any(|t| t.vm.is_some());
    let columns: Vec<(&StatusColumn, &Column)> = TENANT_COLUMNS
        .iter()
        .filter_map(|c| Some((c.status.as_ref()?, c)))
        .collect();
    let mut header = vec!["TENANT"];
    header.extend(columns.iter().map(|(c, _)| c.header));
    if vm {
        header.push("BALLOON");
    }
    if disk {
        header.push("DISK");
    }
    header.push("ESTIMATOR");
    let rows: Vec<Vec<String>> = tenants
        .iter()
        .map(|t| {
            let mut row = vec![t.name.clone()];
            row.extend(columns.iter().map(|(s, c)| cell(s, c.value_of(t))));
            if vm {
                row.push(t.vm.as_ref().map_or_else(|| "-".to_string(), balloon_cell));
            }
            if disk {
                row.push(t.disk.as_ref().map_or_else(|| "-".to_string(), disk_cell));
            }
            row.push(if t.estimator.is_empty() {
                "-".to_string()
            } else {
                t.estimator.clone()
            });
            row
        })
        .collect();
    aligned(&header, &rows)
}

/// `header` and `rows` in columns as wide as their widest cell: the first and last
/// left-aligned, the figures between right-aligned, two spaces apart.
pub(crate) fn aligned(header: &[&str], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            if i == 0 || i == cells.len() - 1 {
                l.push_str(cell);
                if i != cells.len() - 1 {
                    l.push_str(&" ".repeat(pad));
                }
            } else {
                l.push_str(&" ".repeat(pad));
                l.push_str(cell);
            }
            if i != cells.len() - 1 {
                l.push_str("  ");
            }
        }
        l.push('\n');
        l
    };
    let mut out = line(header);
    for row in rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        out.push_str(&line(&cells));
    }
    out
}

/// Under the table, each in a block of its own where some tenant has one: why a limit is
/// held, the application pools, and Lai et al.'s advice (never applied).
fn tenant_notes(tenants: &[TenantSnapshot]) -> String {
    let mut out = String::new();
    let held: Vec<&TenantSnapshot> = tenants.iter().filter(|t| t.held.is_some()).collect();
    if !held.is_empty() {
        out.push('\n');
        for t in held {
            out.push_str(&format!(
                "held: {}: {}\n",
                t.name,
                t.held.as_deref().unwrap_or_default()
            ));
        }
    }
    let apps: Vec<(&str, &AppSnapshot)> = tenants
        .iter()
        .filter_map(|t| t.app.as_ref().map(|a| (t.name.as_str(), a)))
        .collect();
    if !apps.is_empty() {
        out.push('\n');
        for (name, a) in apps {
            out.push_str(&app_line(name, a));
        }
    }
    let advice: Vec<(&str, &str)> = tenants
        .iter()
        .flat_map(|t| t.advice.iter().map(|a| (t.name.as_str(), a.line.as_str())))
        .collect();
    if !advice.is_empty() {
        out.push('\n');
        for (name, line) in advice {
            out.push_str(&format!("advice: {name}: {line}\n"));
        }
    }
    out
}

/// The last few decisions, newest last, in aligned columns.
fn recent_decisions(decisions: &[DecisionRecord]) -> String {
    let recent = &decisions[decisions.len().saturating_sub(DECISIONS_SHOWN)..];
    if recent.is_empty() {
        return "no decisions yet\n".to_string();
    }
    let mut out = "recent decisions (newest last):\n".to_string();
    let width = |f: fn(&DecisionRecord) -> usize| recent.iter().map(f).max().unwrap_or(0);
    let tick_w = width(|d| d.tick.to_string().len());
    let tenant_w = width(|d| d.tenant.chars().count());
    let outcome_w = width(|d| d.outcome.chars().count());
    for d in recent {
        out.push_str(&format!(
            "  tick {:>tick_w$}  {:<tenant_w$}  {:<outcome_w$}  {}: {}\n",
            d.tick,
            d.tenant,
            d.outcome,
            decision_limits(d),
            d.reason
        ));
    }
    out
}

/// A tenant's disk in the table: its weight and the latency it saw, e.g. `w400 12.3ms`
/// A VM's balloon: its size, `->` the target when it moves, `stalled` or `paused` when so,
/// `no driver` without one.
fn balloon_cell(v: &memtide_api::VmSnapshot) -> String {
    let mut cell = human_bytes(v.balloon_bytes);
    match v.balloon_target_bytes {
        None => cell.push_str(" no driver"),
        Some(t) if t.abs_diff(v.balloon_bytes) >= 1 << 20 => {
            cell.push_str(&format!("->{}", human_bytes(t)));
        }
        Some(_) => {}
    }
    if v.stalled {
        cell.push_str(" stalled");
    }
    if v.blocked {
        cell.push_str(" paused");
    }
    cell
}

/// (`w100 -` when it did no I/O in the last tick).
fn disk_cell(d: &DiskSnapshot) -> String {
    let weight = d.weight.map_or_else(|| "-".to_string(), |w| w.to_string());
    let latency = d
        .latency_ms
        .map_or_else(|| "-".to_string(), |ms| format!("{ms:.1}ms"));
    format!("w{weight} {latency}")
}

/// Page sharing's host line, e.g. `sharing: shared 512.0 MiB · reclaimed 384.0 MiB (zeros
/// 64.0 MiB) · KSM's own 6.2 MiB · scanning 20000 pages/s · ksmd 12.0% of a core · db 200.0
/// MiB, web 180.0 MiB`: the host figures, then each tenant's merged memory where it has any.
fn sharing_line(sh: &memtide_api::SharingSnapshot, tenants: &[TenantSnapshot]) -> String {
    let zero = sh
        .zero_bytes
        .map_or_else(String::new, |z| format!(" (zeros {})", human_bytes(z)));
    let meta = sh
        .metadata_bytes
        .map_or_else(String::new, |m| format!(" · KSM's own {}", human_bytes(m)));
    let cpu = sh.scanner_cpu.map_or_else(String::new, |c| {
        format!(" · ksmd {:.1}% of a core", c * 100.0)
    });
    let per_tenant: Vec<String> = tenants
        .iter()
        .filter_map(|t| {
            let b = t.shared_bytes.filter(|&b| b > 0)?;
            Some(format!("{} {}", t.name, human_bytes(b)))
        })
        .collect();
    let per_tenant = if per_tenant.is_empty() {
        String::new()
    } else {
        format!(" · {}", per_tenant.join(", "))
    };
    format!(
        "sharing: shared {} · reclaimed {}{zero}{meta} · scanning {} pages/s{cpu}{per_tenant}\n",
        human_bytes(sh.shared_bytes),
        human_bytes(sh.reclaimed_bytes),
        sh.scan_rate_pages_per_s,
    )
}

/// One application tenant: its pool, what memtide wants of it, the last resize and who holds
/// the tenant, e.g. `app: db: mariadb buffer_pool 384.0 MiB (wants 384.0 MiB) · last resize
/// done in 0.42 s · held by app`.
fn app_line(tenant: &str, a: &AppSnapshot) -> String {
    let wants = a
        .wanted_bytes
        .map_or_else(String::new, |w| format!(" (wants {})", human_bytes(w)));
    let last = a.last_resize.as_ref().map_or_else(String::new, |r| {
        let reason = r
            .reason
            .as_deref()
            .map_or_else(String::new, |why| format!(": {why}"));
        format!(
            " · last resize {} to {} in {:.2} s{reason}",
            r.status,
            human_bytes(r.pool_bytes),
            r.took_s
        )
    });
    let why = a
        .why
        .as_deref()
        .map_or_else(String::new, |w| format!(" ({w})"));
    format!(
        "app: {tenant}: {} {} {}{wants}{last} · held by {}{why}\n",
        a.app,
        a.kind,
        human_bytes(a.pool_bytes),
        a.held_by
    )
}

fn decision_limits(d: &DecisionRecord) -> String {
    match (d.limit_from_bytes, d.limit_to_bytes) {
        (None, None) => format!("target {}", human_bytes(d.target_bytes)),
        (from, to) => format!(
            "limit {} -> {}",
            opt_bytes(from, "max"),
            opt_bytes(to, "max")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_api::HostSnapshot;

    #[test]
    fn the_table_shows_why_a_tenant_is_held_and_an_absent_limit_as_max() {
        let mut s = Snapshot::default();
        s.tenants.push(TenantSnapshot {
            name: "db".to_string(),
            limit_bytes: None,
            held: Some("backoff: limit holds at 400.0 MiB (backing off: 2500 faults/s)".into()),
            ..TenantSnapshot::default()
        });
        let text = render_table(&s);
        assert!(
            text.contains(
                "held: db: backoff: limit holds at 400.0 MiB (backing off: 2500 faults/s)"
            ),
            "{text}"
        );
        let row = text.lines().find(|l| l.starts_with("db ")).unwrap();
        assert!(row.contains(" max "), "{row}");
        assert_eq!(
            Snapshot::default()
                .counters
                .state_ticks
                .keys()
                .collect::<Vec<_>>(),
            ["hard", "high", "low", "soft"],
            "all four states, even at 0"
        );
    }

    #[test]
    fn page_sharing_shows_host_figures_and_each_tenant_with_merged_memory() {
        let mut s = Snapshot::default();
        s.host.sharing = Some(memtide_api::SharingSnapshot {
            shared_bytes: 512 << 20,
            reclaimed_bytes: 384 << 20,
            zero_bytes: Some(64 << 20),
            metadata_bytes: None,
            scan_rate_pages_per_s: 20_000,
            scanned_pages_per_s: None,
            scanner_cpu: Some(0.12),
        });
        for (name, shared) in [("db", Some(200 << 20)), ("web", Some(0)), ("cache", None)] {
            s.tenants.push(TenantSnapshot {
                name: name.to_string(),
                shared_bytes: shared,
                ..TenantSnapshot::default()
            });
        }
        let text = render_table(&s);
        let line = text.lines().find(|l| l.starts_with("sharing: ")).unwrap();
        assert_eq!(
            line,
            "sharing: shared 512.0 MiB · reclaimed 384.0 MiB (zeros 64.0 MiB) · scanning 20000 \
             pages/s · ksmd 12.0% of a core · db 200.0 MiB"
        );
        assert!(!render_table(&Snapshot::default()).contains("sharing:"));
    }

    #[test]
    fn an_application_tenant_shows_its_pool_last_resize_and_who_holds_it() {
        let mut s = Snapshot::default();
        let app = AppSnapshot {
            app: "db".into(),
            kind: "buffer_pool".into(),
            pid: Some(7),
            pool_bytes: 384 << 20,
            wanted_bytes: Some(256 << 20),
            held_by: "app".into(),
            why: None,
            takeovers: Default::default(),
            last_resize: Some(memtide_api::ResizeSnapshot {
                pool_bytes: 384 << 20,
                status: "done".into(),
                took_s: 0.42,
                reason: None,
            }),
        };
        s.tenants.push(TenantSnapshot {
            name: "db".into(),
            app: Some(app.clone()),
            ..TenantSnapshot::default()
        });
        s.tenants.push(TenantSnapshot {
            name: "cache".into(),
            app: Some(AppSnapshot {
                held_by: "os".into(),
                why: Some("taken over: stuck".into()),
                last_resize: None,
                pid: None,
                ..app
            }),
            ..TenantSnapshot::default()
        });
        s.tenants.push(TenantSnapshot {
            name: "web".into(),
            ..TenantSnapshot::default()
        });
        let text = render_table(&s);
        assert!(
            text.contains(
                "app: db: db buffer_pool 384.0 MiB (wants 256.0 MiB) · last resize done to \
                 384.0 MiB in 0.42 s · held by app\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("app: cache: db buffer_pool 384.0 MiB (wants 256.0 MiB) · held by os (taken over: stuck)\n"),
            "{text}"
        );
        assert!(!text.contains("app: web"), "{text}");
    }

    #[test]
    fn tenants_with_managed_io_show_weight_and_latency_in_a_disk_column() {
        let mut s = Snapshot::default();
        s.tenants.push(TenantSnapshot {
            name: "db".into(),
            estimator: "tws".into(),
            disk: Some(DiskSnapshot {
                weight: Some(400),
                latency_ms: Some(12.34),
                ..Default::default()
            }),
            ..Default::default()
        });
        s.tenants.push(TenantSnapshot {
            name: "idle".into(),
            estimator: "tws".into(),
            disk: Some(DiskSnapshot {
                weight: Some(100),
                ..Default::default()
            }),
            ..Default::default()
        });
        s.tenants.push(TenantSnapshot {
            name: "web".into(),
            estimator: "tws".into(),
            ..Default::default()
        });
        let text = render_table(&s);
        let lines: Vec<&str> = text.lines().collect();
        let header = lines.iter().position(|l| l.starts_with("TENANT")).unwrap();
        assert!(
            lines[header].ends_with("REFAULTS/S         DISK  ESTIMATOR"),
            "{text}"
        );
        assert!(lines[header + 1].ends_with("w400 12.3ms  tws"), "{text}");
        assert!(lines[header + 2].ends_with("     w100 -  tws"), "{text}");
        assert!(lines[header + 3].ends_with("           -  tws"), "{text}");
        s.tenants.retain(|t| t.disk.is_none());
        assert!(!render_table(&s).contains("DISK"), "no column without I/O");
    }

    #[test]
    fn vm_tenants_show_their_balloon_its_target_and_a_stall_in_a_balloon_column() {
        let mut s = Snapshot::default();
        let vm = |balloon: u64, target: Option<u64>, stalled: bool| memtide_api::VmSnapshot {
            balloon_bytes: balloon << 20,
            balloon_target_bytes: target.map(|t| t << 20),
            stalled,
            ..Default::default()
        };
        for (name, v) in [
            ("moving", Some(vm(0, Some(512), false))),
            ("stuck", Some(vm(0, Some(512), true))),
            ("bare", Some(vm(0, None, false))),
            ("box", None),
        ] {
            s.tenants.push(TenantSnapshot {
                name: name.into(),
                estimator: "tws".into(),
                vm: v,
                ..Default::default()
            });
        }
        let text = render_table(&s);
        let lines: Vec<&str> = text.lines().collect();
        let header = lines.iter().position(|l| l.starts_with("TENANT")).unwrap();
        assert!(lines[header].contains("REFAULTS/S"), "{text}");
        assert!(lines[header].contains("BALLOON  ESTIMATOR"), "{text}");
        assert!(
            lines[header + 1].ends_with("0.0 MiB->512.0 MiB  tws"),
            "{text}"
        );
        assert!(
            lines[header + 2].ends_with("0.0 MiB->512.0 MiB stalled  tws"),
            "{text}"
        );
        assert!(
            lines[header + 3].ends_with("0.0 MiB no driver  tws"),
            "{text}"
        );
        assert!(lines[header + 4].ends_with(" -  tws"), "{text}");
        s.tenants.retain(|t| t.vm.is_none());
        assert!(
            !render_table(&s).contains("BALLOON"),
            "no column without VMs"
        );
    }

    #[test]
    fn a_databases_advice_is_listed_under_the_table_one_line_each() {
        let mut s = Snapshot::default();
        s.tenants.push(TenantSnapshot {
            name: "db".into(),
            advice: vec![memtide_api::AdviceSnapshot {
                setting: "sync_binlog".into(),
                value: 1,
                suggested: 100,
                line: "sync_binlog 1 -> 100: 240 commits/s".into(),
            }],
            ..Default::default()
        });
        let text = render_table(&s);
        assert!(
            text.contains("\nadvice: db: sync_binlog 1 -> 100: 240 commits/s\n"),
            "{text}"
        );
        s.tenants[0].advice.clear();
        assert!(!render_table(&s).contains("advice:"), "none without advice");
    }

    #[test]
    fn sizes_read_in_mib_below_a_gib_and_gib_above() {
        assert_eq!(human_bytes(0), "0.0 MiB");
        assert_eq!(human_bytes(512 << 20), "512.0 MiB");
        assert_eq!(human_bytes(3 << 29), "1.50 GiB");
    }

    #[test]
    fn uptime_reads_in_the_largest_units() {
        assert_eq!(uptime(65.0), "1m05s");
        assert_eq!(uptime(7_380.0), "2h03m");
        assert_eq!(uptime(90_000.0), "1d01h");
        assert_eq!(uptime(f64::NAN), "0m00s");
    }

    #[test]
    fn the_table_shows_host_tenants_and_last_decisions() {
        let s = Snapshot {
            version: "0.1.0".into(),
            dry_run: true,
            ticks: 42,
            uptime_s: 42.0,
            host: HostSnapshot {
                hierarchy: "v2".into(),
                parent: "/memtide".into(),
                machine_bytes: 16 << 30,
                free_bytes: 3 << 30,
                budget_bytes: 12 << 30,
                swap_total_bytes: 2 << 30,
                swap_free_bytes: 1 << 30,
                state: "soft".into(),
                tax_rate: 0.75,
                pressure_some_avg10: None,
                sharing: None,
            },
            tenants: vec![
                TenantSnapshot {
                    name: "db".into(),
                    estimator: "tws".into(),
                    allocated_bytes: 3 << 29,
                    target_bytes: 1 << 30,
                    active_estimate_bytes: 900 << 20,
                    limit_bytes: Some(1 << 30),
                    floor_bytes: 64 << 20,
                    swap_bytes: Some(10 << 20),
                    refaults_per_s: Some(12.5),
                    ..Default::default()
                },
                TenantSnapshot {
                    name: "web-frontend".into(),
                    estimator: "sampling".into(),
                    ..Default::default()
                },
            ],
            decisions: (1..=7)
                .map(|i| DecisionRecord {
                    tick: i,
                    tenant: "db".into(),
                    outcome: "dry_run".into(),
                    limit_from_bytes: Some(2 << 30),
                    limit_to_bytes: Some(1 << 30),
                    reason: format!("reason {i}"),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let text = render_table(&s);
        let want_host = "host: state soft · free 3.00 GiB · budget 12.00 GiB of 16.00 GiB · swap 1.00 GiB free of 2.00 GiB · tax 0.75 · dry-run yes (decides, writes nothing)\n";
        assert!(text.contains(want_host), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        let header = lines.iter().position(|l| l.starts_with("TENANT")).unwrap();
        assert_eq!(
            lines[header + 1],
            "db             1.50 GiB  1.00 GiB  900.0 MiB  1.00 GiB  64.0 MiB  10.0 MiB        12.5  tws"
        );
        assert_eq!(
            lines[header + 2],
            "web-frontend    0.0 MiB   0.0 MiB    0.0 MiB       max   0.0 MiB         -           -  sampling"
        );
        assert!(!text.contains("reason 2"), "{text}");
        assert!(
            text.contains("  tick 7  db  dry_run  limit 2.00 GiB -> 1.00 GiB: reason 7\n"),
            "{text}"
        );
        assert_eq!(text.matches("  tick ").count(), 5);
    }

    #[test]
    fn an_empty_snapshot_renders_without_tenants_or_decisions() {
        let text = render_table(&Snapshot::default());
        assert!(text.contains("no tenants\n"));
        assert!(text.contains("no decisions yet\n"));
    }
}
