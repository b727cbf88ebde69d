//! Builds a [`DaemonConfig`] from the document: each section read key by key with its defaults, then the checks across fields (tenant names, cgroups, the budget against the mins).

use super::error::{quote, Problem};
use super::reader::{Result, Table};
use super::tree::{Node, Value};
use super::{
    cgroup_is_strictly_under, DaemonConfig, DaemonSection, EstimatorChoice, HostSection, LogFormat,
    ParentCgroup, PolicySection, RailsSection, Reclaim, TenantConfig, TenantOrigin, DEFAULT_SHARES,
};
use memtide_model::written::format_size;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

const ROOT_KEYS: &[&str] = &["daemon", "host", "policy", "rails", "tenant"];
const DAEMON_KEYS: &[&str] = &[
    "tick",
    "listen",
    "listen_public",
    "state_file",
    "dry_run",
    "log_format",
    "decisions_kept",
];
const HOST_KEYS: &[&str] = &["proc_root", "parent", "budget", "reserve", "write_timeout"];
const POLICY_KEYS: &[&str] = &["tax_rate", "sampling_period", "reclaim"];
const RAILS_KEYS: &[&str] = &[
    "shrink_step",
    "floor_margin",
    "backoff_refaults_per_s",
    "backoff_pressure",
];
const TENANT_KEYS: &[&str] = &[
    "name",
    "cgroup",
    "command",
    "min",
    "max",
    "shares",
    "estimator",
    "cap_at_estimate",
];

/// What a tenant name may be, for messages.
const NAME_RULE: &str = "1 to 64 letters, digits, '-', '_' or '.', and not \".\" or \"..\"";

pub(crate) fn build(doc: &Node) -> Result<DaemonConfig> {
    let root = Table::of("", doc, "a table")?;
    root.check_keys(ROOT_KEYS, "the file", root_hint)?;
    let daemon = match section(&root, "daemon")? {
        Some(t) => read_daemon(&t)?,
        None => DaemonSection::default(),
    };
    let host = match section(&root, "host")? {
        Some(t) => read_host(&t)?,
        None => HostSection::default(),
    };
    let policy = match section(&root, "policy")? {
        Some(t) => read_policy(&t)?,
        None => PolicySection::default(),
    };
    let rails = match section(&root, "rails")? {
        Some(t) => read_rails(&t)?,
        None => RailsSection::default(),
    };
    let tenants = read_tenants(&root, &host)?;
    Ok(DaemonConfig {
        daemon,
        host,
        policy,
        rails,
        tenants,
    })
}

/// A sentence about an unknown top-level key: the section it belongs in, or `[[tenant]]`.
fn root_hint(key: &str) -> Option<String> {
    if key == "tenants" {
        return Some("tenants are written [[tenant]]".to_string());
    }
    let sections = [
        ("daemon", DAEMON_KEYS),
        ("host", HOST_KEYS),
        ("policy", POLICY_KEYS),
        ("rails", RAILS_KEYS),
        ("tenant", TENANT_KEYS),
    ];
    sections
        .iter()
        .find(|(_, keys)| keys.contains(&key))
        .map(|(section, _)| match *section {
            "tenant" => format!("`{key}` belongs in a [[tenant]] table"),
            s => format!("`{key}` belongs in the [{s}] section"),
        })
}

fn section<'a>(root: &Table<'a>, key: &str) -> Result<Option<Table<'a>>> {
    root.get(key)
        .map(|node| Table::of(root.field(key), node, &format!("a table ([{key}])")))
        .transpose()
}

pub(crate) const MIN_TICK: Duration = Duration::from_millis(100);
pub(crate) const MAX_TICK: Duration = Duration::from_secs(60);
pub(crate) const MIN_WRITE_TIMEOUT: Duration = Duration::from_millis(10);
pub(crate) const MAX_WRITE_TIMEOUT: Duration = Duration::from_secs(60);
pub(crate) const MIN_SAMPLING_PERIOD: Duration = Duration::from_secs(1);
pub(crate) const MAX_SAMPLING_PERIOD: Duration = Duration::from_secs(3600);
pub(crate) const MAX_DECISIONS_KEPT: i64 = 100_000;

fn read_daemon(t: &Table) -> Result<DaemonSection> {
    t.check_keys(DAEMON_KEYS, "[daemon]", |_| None)?;
    let d = DaemonSection::default();
    let tick = t
        .duration("tick", MIN_TICK, MAX_TICK, "100ms and 60s")?
        .unwrap_or(d.tick);
    let listen_public = t.boolean("listen_public")?.unwrap_or(d.listen_public);
    let listen = match t.string("listen", "an address such as \"127.0.0.1:9464\"")? {
        None => d.listen,
        Some((text, node)) => {
            let addr: SocketAddr = text.trim().parse().map_err(|_| {
                t.bad(
                    "listen",
                    node,
                    "is not an IP address and port such as \"127.0.0.1:9464\" or \"[::1]:9464\"",
                )
            })?;
            if !listen_public && !addr.ip().is_loopback() {
                return Err(t.bad(
                    "listen",
                    node,
                    "is not a loopback address; the API has no authentication, so it listens on \
                     127.0.0.1 or [::1] unless [daemon] listen_public = true",
                ));
            }
            addr
        }
    };
    let state_file = path(t, "state_file")?.unwrap_or(d.state_file);
    let dry_run = t.boolean("dry_run")?.unwrap_or(d.dry_run);
    let log_format = match t.string("log_format", "\"text\" or \"json\"")? {
        None => d.log_format,
        Some(("text", _)) => LogFormat::Text,
        Some(("json", _)) => LogFormat::Json,
        Some((_, node)) => {
            return Err(t.bad(
                "log_format",
                node,
                "is not a log format; expected \"text\" or \"json\"",
            ))
        }
    };
    let decisions_kept = t
        .integer("decisions_kept", 1, MAX_DECISIONS_KEPT)?
        .map_or(d.decisions_kept, |n| n as usize);
    Ok(DaemonSection {
        tick,
        listen,
        listen_public,
        state_file,
        dry_run,
        log_format,
        decisions_kept,
    })
}

/// A file-system path: a non-empty string.
fn path(t: &Table, key: &str) -> Result<Option<PathBuf>> {
    match t.string(key, "a path")? {
        None => Ok(None),
        Some((text, node)) if text.is_empty() || text.contains('\0') => Err(t.bad(
            key,
            node,
            "is not a path; expected a non-empty path without NUL characters",
        )),
        Some((text, _)) => Ok(Some(PathBuf::from(text))),
    }
}

fn read_host(t: &Table) -> Result<HostSection> {
    t.check_keys(HOST_KEYS, "[host]", |_| None)?;
    let d = HostSection::default();
    let proc_root = path(t, "proc_root")?.unwrap_or(d.proc_root);
    let parent = match t.string("parent", "\"self\" or a cgroup path such as \"/memtide\"")? {
        None => d.parent,
        Some(("self", _)) => ParentCgroup::OwnCgroup,
        Some((text, node)) => ParentCgroup::Path(cgroup_path(text).map_err(|why| {
            t.bad(
                "parent",
                node,
                format!(
                    "is not a cgroup path: it {why}; write \"self\" or an absolute path \
                     inside the cgroup hierarchy such as \"/memtide\""
                ),
            )
        })?),
    };
    let budget_bytes = match t.size("budget")? {
        Some(0) => {
            let node = t.get("budget");
            return Err(match node {
                Some(node) => t.bad("budget", node, "is out of range: must be > 0"),
                None => Problem::new(t.field("budget"), "must be > 0"),
            });
        }
        other => other,
    };
    let reserve_bytes = t.size("reserve")?.unwrap_or(d.reserve_bytes);
    let write_timeout = t
        .duration(
            "write_timeout",
            MIN_WRITE_TIMEOUT,
            MAX_WRITE_TIMEOUT,
            "10ms and 60s",
        )?
        .unwrap_or(d.write_timeout);
    Ok(HostSection {
        proc_root,
        parent,
        budget_bytes,
        reserve_bytes,
        write_timeout,
    })
}

/// A cgroup path as written, normalised: starts with `/`, no `.` or `..` components, no
/// control characters; repeated and trailing slashes dropped. The error says why not.
pub(crate) fn cgroup_path(text: &str) -> std::result::Result<String, String> {
    if !text.starts_with('/') {
        return Err("does not start with \"/\"".to_string());
    }
    if text.chars().any(char::is_control) {
        return Err("contains a control character".to_string());
    }
    let parts: Vec<&str> = text.split('/').filter(|p| !p.is_empty()).collect();
    if let Some(p) = parts.iter().find(|p| **p == "." || **p == "..") {
        return Err(format!("has a {} component", quote(p)));
    }
    Ok(format!("/{}", parts.join("/")))
}

fn read_policy(t: &Table) -> Result<PolicySection> {
    t.check_keys(POLICY_KEYS, "[policy]", |_| None)?;
    let d = PolicySection::default();
    let tax_rate = t
        .number(
            "tax_rate",
            |v| (0.0..1.0).contains(&v),
            "must be >= 0 and < 1",
        )?
        .unwrap_or(d.tax_rate);
    // -0.0 is 0.0: keep the one zero.
    let tax_rate = if tax_rate == 0.0 { 0.0 } else { tax_rate };
    let sampling_period = t
        .duration(
            "sampling_period",
            MIN_SAMPLING_PERIOD,
            MAX_SAMPLING_PERIOD,
            "1s and 1h",
        )?
        .unwrap_or(d.sampling_period);
    let reclaim = match t.string("reclaim", "\"when_short\" or \"always\"")? {
        None => d.reclaim,
        Some(("when_short", _)) => Reclaim::WhenShort,
        Some(("always", _)) => Reclaim::Always,
        Some((_, node)) => {
            return Err(t.bad(
                "reclaim",
                node,
                "is not a reclaim mode; expected \"when_short\" or \"always\"",
            ))
        }
    };
    Ok(PolicySection {
        tax_rate,
        sampling_period,
        reclaim,
    })
}

fn read_rails(t: &Table) -> Result<RailsSection> {
    t.check_keys(RAILS_KEYS, "[rails]", |_| None)?;
    let d = RailsSection::default();
    let shrink_step = t
        .number(
            "shrink_step",
            |v| v > 0.0 && v <= 0.5,
            "must be > 0 and <= 0.5",
        )?
        .unwrap_or(d.shrink_step);
    let floor_margin_bytes = t.size("floor_margin")?.unwrap_or(d.floor_margin_bytes);
    let backoff_faults_per_s = t
        .number("backoff_refaults_per_s", |v| v > 0.0, "must be > 0")?
        .unwrap_or(d.backoff_faults_per_s);
    let backoff_pressure = t
        .number(
            "backoff_pressure",
            |v| v > 0.0 && v <= 100.0,
            "must be > 0 and <= 100 (PSI avg10 is a percentage)",
        )?
        .unwrap_or(d.backoff_pressure);
    Ok(RailsSection {
        shrink_step,
        floor_margin_bytes,
        backoff_faults_per_s,
        backoff_pressure,
    })
}

/// Whether `name` may name a tenant (and so a cgroup directory).
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name != "."
        && name != ".."
}

/// Where a tenant's problems point, for the checks across tenants.
struct Written<'a> {
    /// `tenant "db"`.
    path: String,
    table_span: Option<std::ops::Range<usize>>,
    cgroup: Option<&'a Node>,
}

fn read_tenants(root: &Table, host: &HostSection) -> Result<Vec<TenantConfig>> {
    let Some(node) = root.get("tenant") else {
        return Ok(Vec::new());
    };
    let items = match &node.value {
        Value::Array(items) => items,
        Value::Table(_) => {
            return Err(root.bad(
                "tenant",
                node,
                "is a single table; tenants are an array of tables, each written [[tenant]]",
            ))
        }
        _ => {
            return Err(root.bad(
                "tenant",
                node,
                format!(
                    "is {}, expected an array of tables, each written [[tenant]]",
                    node.type_name()
                ),
            ))
        }
    };
    let mut tenants = Vec::with_capacity(items.len());
    let mut written = Vec::with_capacity(items.len());
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut t = Table::of(format!("tenant[{i}]"), item, "a table ([[tenant]])")?;
        if let Some(Value::String(name)) = t.get("name").map(|n| &n.value) {
            if valid_name(name) {
                t.rename(format!("tenant {}", quote(name)));
            }
        }
        t.check_keys(TENANT_KEYS, "[[tenant]]", |_| None)?;
        let (name, name_node) = t
            .string("name", "a string")?
            .ok_or_else(|| t.missing("name", NAME_RULE))?;
        if !valid_name(name) {
            return Err(t.bad(
                "name",
                name_node,
                format!("is not a tenant name; expected {NAME_RULE}"),
            ));
        }
        if let Some(first) = seen.insert(name.to_string(), i) {
            return Err(Problem::new(
                format!("tenant[{i}].name"),
                format!("is already the name of tenant[{first}]; tenant names must be unique"),
            )
            .value(name_node.render())
            .span(name_node.span.clone()));
        }
        let tenant = read_tenant(&t, name, host)?;
        tenants.push(tenant);
        written.push(Written {
            path: t.path().to_string(),
            table_span: t.span(),
            cgroup: t.get("cgroup"),
        });
    }
    check_budget(root, host, &tenants)?;
    check_cgroups(host, &tenants, &written)?;
    Ok(tenants)
}

fn read_tenant(t: &Table, name: &str, host: &HostSection) -> Result<TenantConfig> {
    let launched_into = match &host.parent {
        ParentCgroup::OwnCgroup => format!("<the daemon's cgroup>/{name}"),
        ParentCgroup::Path(p) => join(p, name),
    };
    let cgroup = t.string("cgroup", "a cgroup path such as \"/memtide/db\"")?;
    let command = t.strings("command", "[\"memtide-toucher\", \"--active\", \"400M\"]")?;
    let origin = match (cgroup, command) {
        (Some(_), Some(_)) => {
            return Err(Problem::new(
                t.path(),
                format!(
                    "has both cgroup and command; give cgroup to adopt an existing cgroup, \
                     or command to launch a program in a new cgroup {launched_into}"
                ),
            )
            .span(t.span()))
        }
        (None, None) => {
            return Err(Problem::new(
                t.path(),
                format!(
                    "has neither cgroup nor command; give cgroup to adopt an existing cgroup, \
                     or command to launch a program in a new cgroup {launched_into}"
                ),
            )
            .span(t.span()))
        }
        (None, Some(argv)) => {
            if argv[0].trim().is_empty() {
                let node = t.get("command").and_then(|n| match &n.value {
                    Value::Array(items) => items.first(),
                    _ => None,
                });
                return Err(Problem::new(
                    format!("{}[0]", t.field("command")),
                    "is empty; the first element is the program to run",
                )
                .value("\"\"")
                .span(node.and_then(|n| n.span.clone())));
            }
            TenantOrigin::Launch { argv }
        }
        (Some((text, node)), None) => {
            let cgroup = cgroup_path(text).map_err(|why| {
                t.bad(
                    "cgroup",
                    node,
                    format!(
                        "is not a cgroup path: it {why}; write an absolute path inside the \
                         cgroup hierarchy such as \"/memtide/db\""
                    ),
                )
            })?;
            if cgroup == "/" {
                return Err(t.bad(
                    "cgroup",
                    node,
                    "is the root cgroup; adopt a cgroup below it",
                ));
            }
            if let ParentCgroup::Path(parent) = &host.parent {
                if cgroup == *parent {
                    return Err(t.bad(
                        "cgroup",
                        node,
                        format!(
                            "is the configured parent {} itself; an adopted cgroup must lie \
                             strictly under [host] parent",
                            quote(parent)
                        ),
                    ));
                }
                if !cgroup_is_strictly_under(&cgroup, parent) {
                    return Err(t.bad(
                        "cgroup",
                        node,
                        format!(
                            "is outside the configured parent {}; an adopted cgroup must lie \
                             under [host] parent",
                            quote(parent)
                        ),
                    ));
                }
            }
            TenantOrigin::Adopt { cgroup }
        }
    };
    let min_bytes = t.size("min")?.unwrap_or(0);
    let max_bytes = t
        .size("max")?
        .ok_or_else(|| t.missing("max", "the most memory the tenant may have, e.g. \"1G\""))?;
    if max_bytes == 0 {
        if let Some(node) = t.get("max") {
            return Err(t.bad("max", node, "is out of range: must be > 0"));
        }
    }
    if min_bytes > max_bytes {
        if let Some(node) = t.get("min") {
            return Err(t.bad(
                "min",
                node,
                format!(
                    "is more than max ({}); min must be <= max",
                    format_size(max_bytes)
                ),
            ));
        }
    }
    let shares = t
        .integer("shares", 1, i64::MAX)?
        .map_or(DEFAULT_SHARES, |s| s as u64);
    let estimator = match t.string("estimator", "\"tws\" or \"sampling\"")? {
        None => EstimatorChoice::Sampling,
        Some(("tws", _)) => EstimatorChoice::Tws,
        Some(("sampling", _)) => EstimatorChoice::Sampling,
        Some((_, node)) => {
            return Err(t.bad(
                "estimator",
                node,
                "is not an estimator; expected \"tws\" or \"sampling\"",
            ))
        }
    };
    let cap_at_estimate = t
        .boolean("cap_at_estimate")?
        .unwrap_or(estimator.caps_by_default());
    Ok(TenantConfig {
        name: name.to_string(),
        origin,
        min_bytes,
        max_bytes,
        shares,
        estimator,
        cap_at_estimate,
    })
}

/// `parent/name`, without doubling the slash under the root.
fn join(parent: &str, name: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// A budget, when given, covers every tenant's min.
fn check_budget(root: &Table, host: &HostSection, tenants: &[TenantConfig]) -> Result<()> {
    let Some(budget) = host.budget_bytes else {
        return Ok(());
    };
    let sum: u128 = tenants.iter().map(|t| u128::from(t.min_bytes)).sum();
    if u128::from(budget) >= sum {
        return Ok(());
    }
    let budget_node = root
        .get("host")
        .and_then(|h| match &h.value {
            Value::Table(entries) => entries.iter().find(|e| e.key == "budget"),
            _ => None,
        })
        .map(|e| &e.node);
    let sum_text = u64::try_from(sum).map_or_else(|_| sum.to_string(), format_size);
    let message = format!(
        "is less than the sum of the tenants' min ({sum_text}); the budget must cover every \
         tenant's min"
    );
    let mut p = Problem::new("host.budget", message);
    if let Some(node) = budget_node {
        p = p.value(node.render()).span(node.span.clone());
    }
    Err(p)
}

/// No two tenants share a cgroup, and no tenant's cgroup lies inside another's (a cgroup's
/// limit covers its children). Launched tenants' cgroups (`<parent>/<name>`) are known only
/// when the parent is a path; with `"self"` the daemon checks them once it knows its cgroup.
fn check_cgroups(host: &HostSection, tenants: &[TenantConfig], written: &[Written]) -> Result<()> {
    let paths: Vec<(usize, String)> = tenants
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match (&t.origin, &host.parent) {
            (TenantOrigin::Adopt { cgroup }, _) => Some((i, cgroup.clone())),
            (TenantOrigin::Launch { .. }, ParentCgroup::Path(p)) => Some((i, join(p, &t.name))),
            (TenantOrigin::Launch { .. }, ParentCgroup::OwnCgroup) => None,
        })
        .collect();
    // Sorted by components, a cgroup comes right before the cgroups inside it (or one of
    // them), so checking neighbours finds a pair that nests whenever one exists.
    let mut sorted: Vec<(Vec<&str>, usize, &str)> = paths
        .iter()
        .map(|(i, p)| (components(p), *i, p.as_str()))
        .collect();
    sorted.sort();
    for pair in sorted.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if !b.0.starts_with(&a.0) {
            continue;
        }
        // Report at the tenant written later in the file.
        let (later, earlier) = if a.1 > b.1 { (a, b) } else { (b, a) };
        let launched = match tenants[earlier.1].origin {
            TenantOrigin::Adopt { .. } => "",
            TenantOrigin::Launch { .. } => " (launched there)",
        };
        let other = format!(
            "{}'s cgroup {}{launched}",
            written[earlier.1].path,
            quote(earlier.2)
        );
        let relation = if a.0 == b.0 {
            format!("is also {other}")
        } else if later.0.len() > earlier.0.len() {
            format!("lies inside {other}")
        } else {
            format!("contains {other}")
        };
        let message = format!(
            "{relation}; tenants' cgroups must be distinct and must not nest (a cgroup's limit \
             covers its children)"
        );
        let w = &written[later.1];
        return Err(match (&tenants[later.1].origin, w.cgroup) {
            (TenantOrigin::Adopt { .. }, Some(node)) => {
                Problem::new(format!("{}.cgroup", w.path), message)
                    .value(node.render())
                    .span(node.span.clone())
            }
            _ => Problem::new(
                w.path.clone(),
                format!("would be launched into {}, which {message}", quote(later.2)),
            )
            .span(w.table_span.clone()),
        });
    }
    Ok(())
}

/// The non-empty components of a cgroup path.
fn components(path: &str) -> Vec<&str> {
    path.split('/').filter(|p| !p.is_empty()).collect()
}
