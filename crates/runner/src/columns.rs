//! Every per-tenant figure, declared once: [`TENANT_COLUMNS`] says which Prometheus family the daemon's `/metrics` writes for it, which column `memtide status` shows it in and which column of the simulator's timeline.csv holds it.
//!
//! Adding a figure of a lever means its field in the lever (the record nests the levers as
//! the world reported them) and one row here reading it ([`Value::Record`]): the daemon's
//! snapshot publishes it under its key, and `/metrics`, the status table and the timeline each
//! read the rows in order, taking those that name them. Figures the daemon derives beyond a
//! tick (lifetime totals, per-second rates) are the snapshot's own fields
//! ([`Value::Snapshot`]); the timeline writes each tick's own figures of the record.

use crate::record::{TenantRow, TickRecord};
use memtide_api::TenantSnapshot;
use memtide_model::Bytes;
use std::collections::BTreeMap;
use Value::{Record, Snapshot};

/// A per-tenant figure: where it is published and how each view reads it.
pub struct Column {
    /// Its Prometheus family on `/metrics` (labelled `tenant`), where it has one.
    pub metric: Option<Metric>,
    /// Its column in `memtide status`'s table, where it has one.
    pub status: Option<StatusColumn>,
    /// Where the figure of a tenant's snapshot comes from (read `None` where the tenant has
    /// none: no series, the status's `absent`); never read for a column with neither a metric
    /// nor a status column.
    pub value: Value,
    /// Its column in timeline.csv, where it has one.
    pub timeline: Option<TimelineColumn>,
}

/// Where a column's figure is in a tenant's snapshot.
pub enum Value {
    /// One of the snapshot's own fields: what the daemon keeps beyond a tick's record
    /// (lifetime totals, per-second rates, the agent's and the VM's parts).
    Snapshot(fn(&TenantSnapshot) -> Option<f64>),
    /// A figure of the tick's record, published as it is: [`record_figures`] puts it in the
    /// snapshot's `figures` under `key` (a top-level key of the tenant's JSON), from where
    /// `/metrics` and `memtide status` read it. A new figure of a lever needs only this.
    Record {
        key: &'static str,
        read: fn(&TenantRow) -> Option<f64>,
    },
}

impl Column {
    /// The figure of tenant `t`'s snapshot, `None` where it has none.
    pub fn value_of(&self, t: &TenantSnapshot) -> Option<f64> {
        match self.value {
            Snapshot(read) => read(t),
            Record { key, .. } => t.figures.get(key)?.as_f64(),
        }
    }
}

/// The record's figures of `row` the snapshot publishes ([`Value::Record`]), by key: an
/// amount's or a count's as an integer, the others as they are; `null` where the tenant has none, so
/// every key is always there.
pub fn record_figures(row: Option<&TenantRow>) -> BTreeMap<String, serde_json::Value> {
    TENANT_COLUMNS
        .iter()
        .filter_map(|c| match c.value {
            Record { key, read } => {
                // Amounts (`_bytes`) and counts (`_total`) are whole numbers in the JSON, as
                // the snapshot's own fields are.
                let whole = key.ends_with("_bytes") || key.ends_with("_total");
                let json = match row.and_then(read) {
                    None => serde_json::Value::Null,
                    Some(x) if whole => serde_json::Value::from(x as u64),
                    Some(x) => serde_json::Value::from(x),
                };
                Some((key.to_string(), json))
            }
            Snapshot(_) => None,
        })
        .collect()
}

/// A column of timeline.csv after `time_s` and `tenant`: its header, and how a tenant's row of
/// a tick writes its field (with fixed decimals, so the same run gives the same bytes).
pub struct TimelineColumn {
    pub header: &'static str,
    pub write: fn(&mut String, &TickRecord, &TenantRow),
}

/// A Prometheus family of one series per tenant.
pub struct Metric {
    pub name: &'static str,
    /// The HELP text.
    pub help: &'static str,
    pub kind: Kind,
}

/// A Prometheus metric type, and for a choice its extra label.
pub enum Kind {
    Gauge,
    /// A lifetime total: the name ends in `_total`.
    Counter,
    /// A gauge with one series per value of `label` in `values`: 1 for the one `of` the tenant
    /// names, 0 for the others; no series where `of` is `None`.
    Choice {
        label: &'static str,
        values: &'static [&'static str],
        of: fn(&TenantSnapshot) -> Option<&str>,
    },
    /// A lifetime total with one series per value of `label` in `values`: what `of` counts
    /// for the tenant and that value; no series where `of` is `None`.
    Counts {
        label: &'static str,
        values: &'static [&'static str],
        of: fn(&TenantSnapshot, &str) -> Option<u64>,
    },
}

impl Kind {
    /// The name in a `# TYPE` line.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Counter | Kind::Counts { .. } => "counter",
            Kind::Gauge | Kind::Choice { .. } => "gauge",
        }
    }
}

/// A column of `memtide status`'s table.
pub struct StatusColumn {
    pub header: &'static str,
    pub unit: Unit,
    /// The cell of a tenant without the figure.
    pub absent: &'static str,
}

/// How the status table spells a figure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unit {
    /// MiB below 1 GiB, GiB above.
    Bytes,
    /// A rate with one decimal.
    PerSecond,
}

const fn gauge(name: &'static str, help: &'static str) -> Option<Metric> {
    Some(Metric {
        name,
        help,
        kind: Kind::Gauge,
    })
}

const fn counter(name: &'static str, help: &'static str) -> Option<Metric> {
    Some(Metric {
        name,
        help,
        kind: Kind::Counter,
    })
}

const fn shown(header: &'static str, unit: Unit, absent: &'static str) -> Option<StatusColumn> {
    Some(StatusColumn {
        header,
        unit,
        absent,
    })
}

const fn timeline(
    header: &'static str,
    write: fn(&mut String, &TickRecord, &TenantRow),
) -> Option<TimelineColumn> {
    Some(TimelineColumn { header, write })
}

/// A figure only timeline.csv writes (the snapshot has no such figure).
const fn timeline_only(
    header: &'static str,
    write: fn(&mut String, &TickRecord, &TenantRow),
) -> Column {
    Column {
        metric: None,
        status: None,
        value: Snapshot(|_| None),
        timeline: timeline(header, write),
    }
}

/// Memory in MiB with three decimals.
fn mib(line: &mut String, b: Bytes) {
    push_fixed3(line, b.as_mib_f64());
}

/// A count a world does not keep is 0.
fn count(line: &mut String, n: Option<u64>) {
    line.push_str(&n.unwrap_or(0).to_string());
}

/// Appends `x` with three decimals to `out`; values that round to zero print as `0.000` (never
/// `-0.000`), so outputs are byte-stable.
pub fn push_fixed3(out: &mut String, x: f64) {
    use std::fmt::Write;
    if x.is_nan() {
        out.push_str("nan");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
    } else {
        let r = round3(x);
        let _ = write!(out, "{r:.3}");
    }
}

/// `x` rounded to three decimals, with negative zero made positive.
pub fn round3(x: f64) -> f64 {
    let r = (x * 1000.0).round() / 1000.0;
    if r == 0.0 {
        0.0
    } else {
        r
    }
}

/// A CSV field, quoted (RFC 4180) when it holds a comma, quote or line break, or starts or
/// ends with a space.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) || s.starts_with(' ') || s.ends_with(' ') {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn figure(b: u64) -> Option<f64> {
    Some(b as f64)
}

fn some_u64(b: Option<u64>) -> Option<f64> {
    b.map(|b| b as f64)
}

/// Every per-tenant figure, in the order `/metrics` writes them, `memtide status` shows those
/// it shows (after the tenant's name) and timeline.csv writes its columns (after `time_s` and
/// `tenant`).
pub static TENANT_COLUMNS: &[Column] = &[
    Column {
        metric: gauge(
            "memtide_tenant_allocated_bytes",
            "Memory the tenant's cgroup holds now (usage), in bytes.",
        ),
        status: shown("ALLOCATED", Unit::Bytes, "-"),
        value: Snapshot(|t| figure(t.allocated_bytes)),
        timeline: timeline("allocated_mb", |l, _, r| mib(l, r.allocated)),
    },
    Column {
        metric: gauge(
            "memtide_tenant_target_bytes",
            "The allocation memtide aims at for the tenant, in bytes.",
        ),
        status: shown("TARGET", Unit::Bytes, "-"),
        value: Snapshot(|t| figure(t.target_bytes)),
        timeline: timeline("target_mb", |l, _, r| mib(l, r.target)),
    },
    Column {
        metric: gauge(
            "memtide_tenant_active_estimate_bytes",
            "The estimator's figure for the tenant's active memory, in bytes.",
        ),
        status: shown("ESTIMATE", Unit::Bytes, "-"),
        value: Snapshot(|t| figure(t.active_estimate_bytes)),
        timeline: timeline("active_estimate_mb", |l, _, r| mib(l, r.active_estimate)),
    },
    timeline_only("working_set_mb", |l, _, r| {
            mib(l, r.working_set.unwrap_or(Bytes::ZERO))
        }),
    Column {
        metric: gauge(
            "memtide_tenant_limit_bytes",
            "The memory limit in force on the tenant's cgroup, in bytes (no series: unlimited).",
        ),
        status: shown("LIMIT", Unit::Bytes, "max"),
        value: Snapshot(|t| some_u64(t.limit_bytes)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_floor_bytes",
            "The lowest limit the safety rails allow now, in bytes.",
        ),
        status: shown("FLOOR", Unit::Bytes, "-"),
        value: Snapshot(|t| figure(t.floor_bytes)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_min_bytes",
            "The tenant's configured min, in bytes.",
        ),
        status: None,
        value: Snapshot(|t| figure(t.min_bytes)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_max_bytes",
            "The tenant's configured max, in bytes.",
        ),
        status: None,
        value: Snapshot(|t| figure(t.max_bytes)),
        timeline: None,
    },
    Column {
        metric: gauge("memtide_tenant_shares", "The tenant's configured shares."),
        status: None,
        value: Snapshot(|t| Some(t.shares as f64)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_anon_bytes",
            "Anonymous memory the tenant holds, in bytes.",
        ),
        status: None,
        value: Snapshot(|t| some_u64(t.anon_bytes)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_file_bytes",
            "Page cache the tenant holds, in bytes.",
        ),
        status: None,
        value: Snapshot(|t| some_u64(t.file_bytes)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_swap_bytes",
            "The tenant's memory in swap, in bytes.",
        ),
        status: shown("SWAP", Unit::Bytes, "-"),
        value: Snapshot(|t| some_u64(t.swap_bytes)),
        timeline: None,
    },
    Column {
        metric: None,
        status: shown("REFAULTS/S", Unit::PerSecond, "-"),
        value: Snapshot(|t| t.refaults_per_s),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_pressure_some_avg10",
            "The tenant's memory pressure (PSI some avg10), percent.",
        ),
        status: None,
        value: Snapshot(|t| t.pressure_some_avg10),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_pressure_full_avg10",
            "The share of time all the tenant's tasks stalled on memory at once (PSI full avg10), percent.",
        ),
        status: None,
        value: Record {
            key: "pressure_full_avg10",
            read: |r| r.limit?.pressure_full,
        },
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_unevictable_bytes",
            "The tenant's unevictable memory (mlocked, ramfs, SHM_LOCK), which no limit reclaims, in bytes.",
        ),
        status: None,
        value: Record {
            key: "unevictable_bytes",
            read: |r| Some(r.limit?.unevictable?.to_bytes().0 as f64),
        },
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_app_pool_bytes",
            "The tenant's application pool as its balloon agent last reported it, in bytes.",
        ),
        status: None,
        value: Snapshot(|t| t.app.as_ref().map(|a| a.pool_bytes as f64)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_app_wanted_bytes",
            "The application pool memtide wants for the tenant, in bytes.",
        ),
        status: None,
        value: Snapshot(|t| some_u64(t.app.as_ref().and_then(|a| a.wanted_bytes))),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_app_last_resize_seconds",
            "How long the application took to answer its last target, in seconds.",
        ),
        status: None,
        value: Snapshot(|t| {
            t.app
                .as_ref()
                .and_then(|a| a.last_resize.as_ref())
                .map(|r| r.took_s)
        }),
        timeline: None,
    },
    Column {
        metric: Some(Metric {
            name: "memtide_app_held_by",
            help: "1 for the mechanism that moves an application tenant's memory (app: its agent, os: the cgroup limit), 0 for the other.",
            kind: Kind::Choice {
                label: "by",
                values: &["app", "os"],
                of: |t| t.app.as_ref().map(|a| a.held_by.as_str()),
            },
        }),
        status: None,
        value: Snapshot(|_| None),
        timeline: None,
    },
    Column {
        metric: Some(Metric {
            name: "memtide_app_takeovers_total",
            help: "Times memtide took an application tenant over from its agent, by reason: deadline (no answer in time), dead (its process is gone), dishonest (it claimed a release its memory did not show), violations (too many protocol errors).",
            kind: Kind::Counts {
                label: "reason",
                values: &["deadline", "dead", "dishonest", "violations"],
                of: |t, reason| {
                    t.app
                        .as_ref()
                        .map(|a| a.takeovers.get(reason).copied().unwrap_or(0))
                },
            },
        }),
        status: None,
        value: Snapshot(|_| None),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_cache_quota_bytes",
            "The pool the tenant's cache quota gives it (its SLO under [cache]), in bytes.",
        ),
        status: None,
        value: Snapshot(|t| t.cache.as_ref().map(|c| c.quota_bytes as f64)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_cache_predicted_latency_seconds",
            "The mean latency the tenant's pool curve predicts at its cache quota, in seconds.",
        ),
        status: None,
        value: Snapshot(|t| t.cache.as_ref().map(|c| c.predicted_latency_us / 1e6)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_disk_weight",
            "The tenant's weight on the disk [io] manages (BFQ's, 1-1000).",
        ),
        status: None,
        value: Snapshot(|t| t.disk.as_ref().and_then(|d| d.weight).map(f64::from)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_disk_latency_seconds",
            "The I/O latency the tenant saw over the last tick, in seconds (on Linux the device's mean await); no series when it did no I/O.",
        ),
        status: None,
        value: Snapshot(|t| t.disk.as_ref().and_then(|d| d.latency_ms).map(|ms| ms / 1e3)),
        timeline: None,
    },
    Column {
        metric: counter(
            "memtide_tenant_disk_ops_total",
            "Operations the tenant completed on the disk [io] manages since memtide started watching it.",
        ),
        status: None,
        value: Snapshot(|t| t.disk.as_ref().map(|d| d.ops_total as f64)),
        timeline: None,
    },
    Column {
        metric: counter(
            "memtide_tenant_disk_bytes_total",
            "Bytes the tenant read and wrote on the disk [io] manages since memtide started watching it.",
        ),
        status: None,
        value: Snapshot(|t| t.disk.as_ref().map(|d| d.bytes_total as f64)),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_balloon_bytes",
            "A VM's balloon now: guest memory its guest gave back, in bytes.",
        ),
        status: None,
        value: Snapshot(|t| t.vm.as_ref().map(|v| v.balloon_bytes as f64)),
        timeline: timeline("balloon_mb", |l, _, r| mib(l, r.balloon_size())),
    },
    Column {
        metric: gauge(
            "memtide_tenant_balloon_target_bytes",
            "The balloon size the policy asked of a VM this tick, in bytes; no series without a balloon driver.",
        ),
        status: None,
        value: Snapshot(|t| some_u64(t.vm.as_ref().and_then(|v| v.balloon_target_bytes))),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_balloon_stalled",
            "1 while a VM's balloon driver does not move toward a larger target (host swap takes over), else 0.",
        ),
        status: None,
        value: Snapshot(|t| t.vm.as_ref().map(|v| f64::from(u8::from(v.stalled)))),
        timeline: None,
    },
    Column {
        metric: gauge(
            "memtide_tenant_host_swapped_bytes",
            "A VM's memory in host swap (its cgroup's swap), in bytes.",
        ),
        status: None,
        value: Snapshot(|t| t.vm.as_ref().map(|v| v.host_swapped_bytes as f64)),
        timeline: timeline("host_swapped_mb", |l, _, r| mib(l, r.host_swapped())),
    },
    timeline_only("throughput", |l, _, r| {
            push_fixed3(l, r.throughput.unwrap_or(0.0))
        }),
    timeline_only("latency_ms", |l, _, r| {
            push_fixed3(l, r.latency_ms.unwrap_or(0.0))
        }),
    timeline_only("state", |l, t, _| l.push_str(t.state.name())),
    timeline_only("swap_ins", |l, _, r| count(l, r.swap_ins)),
    timeline_only("refaults", |l, _, r| count(l, r.refaults)),
    timeline_only("host_swap_ins", |l, _, r| count(l, r.host_swap.and_then(|h| h.swap_ins))),
    timeline_only("blocked", |l, _, r| {
            l.push_str(if r.blocked { "1" } else { "0" })
        }),
    Column {
        metric: gauge(
            "memtide_tenant_shared_bytes",
            "The tenant's memory merged with other pages by page sharing (KSM), in bytes.",
        ),
        status: None,
        value: Snapshot(|t| some_u64(t.shared_bytes)),
        timeline: timeline("shared_mb", |l, _, r| {
            // Empty where the world shares no pages (not 0: nothing was measured).
            if let Some(s) = r.sharing {
                mib(l, s.shared.to_bytes());
            }
        }),
    },
    Column {
        metric: gauge(
            "memtide_tenant_sharing_profit_bytes",
            "What page sharing saves the tenant net of KSM's bookkeeping (ksm_process_profit), in bytes.",
        ),
        status: None,
        value: Snapshot(|t| t.sharing_profit_bytes.map(|b| b as f64)),
        timeline: None,
    },
    timeline_only("ios", |l, _, r| {
            // Disk operations in the tick: empty where the tenant has no disk work.
            if let Some(d) = &r.disk {
                l.push_str(&d.ops.to_string());
            }
        }),
    timeline_only("fsync_ms", |l, _, r| {
            // The mean fsync latency: empty where the tenant made no fsync.
            if let Some(us) = r.disk.and_then(|d| d.sync_latency_us) {
                push_fixed3(l, us / 1000.0);
            }
        }),
    timeline_only("reason", |l, _, r| {
            l.push_str(&csv_field(&r.reason.to_string()))
        }),
    Column {
        metric: counter(
            "memtide_tenant_refaults_total",
            "Refaults (anon + file) since memtide started watching the tenant.",
        ),
        status: None,
        value: Snapshot(|t| some_u64(t.refaults_total)),
        timeline: None,
    },
    Column {
        metric: counter(
            "memtide_tenant_major_faults_total",
            "Major page faults of the tenant's cgroup.",
        ),
        status: None,
        value: Snapshot(|t| some_u64(t.major_faults_total)),
        timeline: None,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_are_unique_and_only_counters_end_in_total() {
        let mut seen = std::collections::BTreeSet::new();
        for m in TENANT_COLUMNS.iter().filter_map(|c| c.metric.as_ref()) {
            assert!(seen.insert(m.name), "{} twice", m.name);
            assert_eq!(
                m.name.ends_with("_total"),
                matches!(m.kind, Kind::Counter | Kind::Counts { .. }),
                "{}",
                m.name
            );
        }
    }

    #[test]
    fn every_column_is_published_somewhere() {
        for c in TENANT_COLUMNS {
            assert!(c.metric.is_some() || c.status.is_some() || c.timeline.is_some());
        }
    }

    /// A row of tenant 1 whose limit lever reports `pressure_full`.
    fn row(pressure_full: Option<f64>) -> TenantRow {
        let action = memtide_model::TenantAction::none(
            memtide_model::TenantId(1),
            memtide_model::ReclamationState::High,
        );
        TenantRow {
            tenant: action.id,
            allocated: Bytes(64 << 20),
            target: Bytes(64 << 20),
            active_estimate: Bytes::ZERO,
            working_set: None,
            throughput: None,
            latency_ms: None,
            swap_ins: None,
            refaults: None,
            blocked: false,
            anon: None,
            file: None,
            swapped: None,
            balloon: None,
            host_swap: None,
            sharing: None,
            limit: Some(memtide_model::LimitLever {
                pressure_full,
                ..Default::default()
            }),
            disk: None,
            durability: None,
            mechanisms: action.mechanisms,
            reason: action.reason,
        }
    }

    #[test]
    fn a_record_figure_reaches_the_snapshot_json_and_the_columns_that_read_it() {
        let column = TENANT_COLUMNS
            .iter()
            .find(|c| {
                matches!(
                    c.value,
                    Record {
                        key: "pressure_full_avg10",
                        ..
                    }
                )
            })
            .expect("PSI full is a record figure");
        let mut t = TenantSnapshot {
            figures: record_figures(Some(&row(Some(0.75)))),
            ..TenantSnapshot::default()
        };
        assert_eq!(column.value_of(&t), Some(0.75));
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["pressure_full_avg10"], serde_json::json!(0.75));
        // Without the figure, its key is still there, as null, and the column reads nothing.
        t.figures = record_figures(Some(&row(None)));
        assert_eq!(column.value_of(&t), None);
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(
            json.get("pressure_full_avg10"),
            Some(&serde_json::Value::Null)
        );
        // Before the tenant's first tick too.
        assert_eq!(
            record_figures(None)["pressure_full_avg10"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn record_figure_keys_are_unique_and_never_a_field_of_the_snapshot() {
        let fields = serde_json::to_value(TenantSnapshot::default()).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for c in TENANT_COLUMNS {
            if let Record { key, .. } = c.value {
                assert!(seen.insert(key), "{key} twice");
                assert!(
                    fields.get(key).is_none(),
                    "{key} is a field of the snapshot"
                );
            }
        }
        assert!(!seen.is_empty());
    }

    #[test]
    fn fixed3_never_prints_negative_zero_and_spells_out_non_finite_values() {
        let mut s = String::new();
        for x in [1.23456, -0.0001, -2.5, f64::NAN, f64::NEG_INFINITY] {
            push_fixed3(&mut s, x);
            s.push(' ');
        }
        assert_eq!(s, "1.235 0.000 -2.500 nan -inf ");
    }
}
