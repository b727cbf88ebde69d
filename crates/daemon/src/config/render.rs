//! Writes a [`DaemonConfig`] back as a configuration file, every default spelled out.

use super::{DaemonConfig, LogFormat, TenantOrigin};
use memtide_model::written::{format_duration, format_size};
use toml::{Table, Value};

pub(crate) fn to_toml(c: &DaemonConfig) -> String {
    let mut daemon = Table::new();
    let d = &c.daemon;
    daemon.insert("tick".into(), duration(d.tick));
    daemon.insert("listen".into(), Value::String(d.listen.to_string()));
    daemon.insert("listen_public".into(), Value::Boolean(d.listen_public));
    daemon.insert(
        "state_file".into(),
        Value::String(d.state_file.to_string_lossy().into_owned()),
    );
    daemon.insert("dry_run".into(), Value::Boolean(d.dry_run));
    let log_format = match d.log_format {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    };
    daemon.insert("log_format".into(), Value::String(log_format.into()));
    daemon.insert(
        "decisions_kept".into(),
        Value::Integer(i64::try_from(d.decisions_kept).unwrap_or(i64::MAX)),
    );

    let mut host = Table::new();
    let h = &c.host;
    host.insert(
        "proc_root".into(),
        Value::String(h.proc_root.to_string_lossy().into_owned()),
    );
    host.insert("parent".into(), Value::String(h.parent.as_written().into()));
    if let Some(budget) = h.budget_bytes {
        host.insert("budget".into(), size(budget));
    }
    host.insert("reserve".into(), size(h.reserve_bytes));
    host.insert("write_timeout".into(), duration(h.write_timeout));

    let mut policy = Table::new();
    policy.insert("tax_rate".into(), Value::Float(c.policy.tax_rate));
    policy.insert("sampling_period".into(), duration(c.policy.sampling_period));
    policy.insert(
        "reclaim".into(),
        Value::String(c.policy.reclaim.as_str().into()),
    );

    let mut rails = Table::new();
    let r = &c.rails;
    rails.insert("shrink_step".into(), Value::Float(r.shrink_step));
    rails.insert("floor_margin".into(), size(r.floor_margin_bytes));
    rails.insert(
        "backoff_refaults_per_s".into(),
        Value::Float(r.backoff_faults_per_s),
    );
    rails.insert("backoff_pressure".into(), Value::Float(r.backoff_pressure));

    let tenants: Vec<Value> = c
        .tenants
        .iter()
        .map(|t| {
            let mut tenant = Table::new();
            tenant.insert("name".into(), Value::String(t.name.clone()));
            match &t.origin {
                TenantOrigin::Adopt { cgroup } => {
                    tenant.insert("cgroup".into(), Value::String(cgroup.clone()));
                }
                TenantOrigin::Launch { argv } => {
                    let argv = argv.iter().map(|a| Value::String(a.clone())).collect();
                    tenant.insert("command".into(), Value::Array(argv));
                }
            }
            tenant.insert("min".into(), size(t.min_bytes));
            tenant.insert("max".into(), size(t.max_bytes));
            tenant.insert(
                "shares".into(),
                Value::Integer(i64::try_from(t.shares).unwrap_or(i64::MAX)),
            );
            tenant.insert(
                "estimator".into(),
                Value::String(t.estimator.as_str().into()),
            );
            tenant.insert("cap_at_estimate".into(), Value::Boolean(t.cap_at_estimate));
            Value::Table(tenant)
        })
        .collect();

    let mut root = Table::new();
    root.insert("daemon".into(), Value::Table(daemon));
    root.insert("host".into(), Value::Table(host));
    root.insert("policy".into(), Value::Table(policy));
    root.insert("rails".into(), Value::Table(rails));
    if !tenants.is_empty() {
        root.insert("tenant".into(), Value::Array(tenants));
    }
    // A table of strings, numbers, booleans and tables always serializes.
    toml::to_string(&root).unwrap_or_default()
}

fn size(bytes: u64) -> Value {
    Value::String(format_size(bytes))
}

fn duration(d: std::time::Duration) -> Value {
    Value::String(format_duration(d))
}
