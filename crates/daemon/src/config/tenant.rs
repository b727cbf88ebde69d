//! The `[[tenant]]` tables into [`TenantConfig`]s: a unique name, one origin (cgroup, command, vm, unit or container), bounds that make sense, an app's fields by its kind, a disk share; then, across tenants, the budget against the mins and cgroups that do not nest. Reads no host file.

use super::build::root;
use super::schema::{TenantDoc, TenantIoDoc, VmDoc};
use super::{
    cgroup_is_strictly_under, HostSection, IoCaps, ParentCgroup, TenantConfig, TenantIoConfig,
    TenantOrigin, DEFAULT_SHARES,
};
use memtide_config::{ConfigError, Document, FieldPath};
use memtide_model::written::format_size;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

type Result<T> = std::result::Result<T, ConfigError>;

/// What a launched VM's tenant needs in `max` above its guest's memory: QEMU's own memory
/// (about 110 MiB under TCG with a 64 MiB translation cache, docs/benchmarks.md).
const QEMU_ROOM: u64 = 128 << 20;

/// The libvirt connection a domain tenant uses unless it names one.
const DEFAULT_URI: &str = "qemu:///system";

/// Whether `uri` may be a libvirt URI: a driver, `://`, printable ASCII without spaces (it is
/// passed to virsh as one argument, never through a shell).
fn valid_uri(uri: &str) -> bool {
    uri.len() <= 1024
        && uri.split_once("://").is_some_and(|(driver, _)| {
            !driver.is_empty()
                && driver
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        })
        && uri.bytes().all(|b| b.is_ascii_graphic())
}

/// What a tenant name may be, for messages.
const NAME_RULE: &str = "1 to 64 letters, digits, '-', '_' or '.', and not \".\" or \"..\"";

/// A tenant's disk weight when it does not say: BFQ's and iocost's default.
pub(crate) const DEFAULT_IO_WEIGHT: u32 = 100;
pub(crate) const MIN_LATENCY_TARGET: Duration = Duration::from_micros(100);
pub(crate) const MAX_LATENCY_TARGET: Duration = Duration::from_secs(60);

/// `[tenant.io]`: a weight BFQ takes, a target within reach, caps of at least 1.
fn tenant_io(doc: &Document, at: &FieldPath, t: TenantIoDoc) -> Result<TenantIoConfig> {
    let weights = memtide_model::DiskSpec::WEIGHTS;
    let weight = match t.weight {
        None => DEFAULT_IO_WEIGHT,
        Some(w) if w >= u64::from(*weights.start()) && w <= u64::from(*weights.end()) => w as u32,
        Some(_) => {
            return Err(doc.error(
                &at.key("weight"),
                format!(
                    "must be between {} and {} (BFQ's weights)",
                    weights.start(),
                    weights.end()
                ),
            ))
        }
    };
    let latency_target = duration_in(
        doc,
        at.key("latency_target"),
        t.latency_target,
        (MIN_LATENCY_TARGET, MAX_LATENCY_TARGET),
        "0.1ms and 60s",
    )?;
    let at_least_one = |key: &str, v: Option<u64>| match v {
        Some(0) => Err(doc.error(&at.key(key), "must be at least 1; leave it out for no cap")),
        other => Ok(other),
    };
    Ok(TenantIoConfig {
        weight,
        latency_target,
        caps: IoCaps {
            read_iops: at_least_one("read_iops", t.read_iops)?,
            write_iops: at_least_one("write_iops", t.write_iops)?,
            read_bps: at_least_one("read_bps", t.read_bps.map(|s| s.bytes()))?,
            write_bps: at_least_one("write_bps", t.write_bps.map(|s| s.bytes()))?,
        },
    })
}

/// `d` when it lies in `min..=max`; `range` says what is allowed, e.g. `100ms and 60s`.
fn duration_in(
    doc: &Document,
    path: FieldPath,
    d: Option<memtide_config::Duration>,
    (min, max): (Duration, Duration),
    range: &str,
) -> Result<Option<Duration>> {
    match d.map(|d| d.get()) {
        Some(d) if d < min || d > max => Err(doc.error(&path, format!("must be between {range}"))),
        other => Ok(other),
    }
}

/// A file-system path: a non-empty string without NUL.
fn file_path(doc: &Document, path: FieldPath, text: Option<String>) -> Result<Option<PathBuf>> {
    match text {
        Some(t) if !super::read::is_path(&t) => Err(doc.error(&path, super::read::PATH_RULE)),
        other => Ok(other.map(PathBuf::from)),
    }
}

/// Whether `name` may name a tenant (and so a cgroup directory).
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name != "."
        && name != ".."
}

/// What [`valid_unit`] accepts, for its error.
const UNIT_RULE: &str = "a unit such as \"redis-server.service\" or \"redis-server@a.service\": \
     1 to 255 letters, digits, `:`, `-`, `_`, `.`, `@` or `\\`, with a type suffix \
     (.service, .scope, .slice, ...)";

/// Whether `unit` may name a systemd unit (systemd's own rule: unit_name_is_valid), with a
/// type suffix so that systemctl is asked about exactly that unit.
fn valid_unit(unit: &str) -> bool {
    let chars_ok = unit
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_' | '.' | '@' | '\\'));
    let suffix_ok = unit.rsplit_once('.').is_some_and(|(stem, kind)| {
        !stem.is_empty() && kind.chars().all(|c| c.is_ascii_lowercase()) && !kind.is_empty()
    });
    (1..=255).contains(&unit.len()) && chars_ok && suffix_ok && !unit.starts_with('-')
}

pub(super) fn tenants(
    doc: &Document,
    docs: Vec<TenantDoc>,
    host: &HostSection,
) -> Result<Vec<TenantConfig>> {
    let mut tenants = Vec::with_capacity(docs.len());
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(docs.len());
    for (i, t) in docs.into_iter().enumerate() {
        let at = root().key("tenant").index(i);
        if !valid_name(&t.name) {
            return Err(doc.error(
                &at.key("name"),
                format!("is not a tenant name; expected {NAME_RULE}"),
            ));
        }
        if let Some(first) = seen.insert(t.name.clone(), i) {
            return Err(doc.error(
                &at.key("name"),
                format!("is already the name of tenant[{first}]; tenant names must be unique"),
            ));
        }
        let t = tenant(doc, &at, t, host)?;
        if let TenantOrigin::Container { name, engine } = &t.origin {
            let same = tenants.iter().position(|o: &TenantConfig| {
                matches!(&o.origin, TenantOrigin::Container { name: n, engine: e }
                    if n == name && (e == engine || e.is_none() || engine.is_none()))
            });
            if let Some(first) = same {
                return Err(doc.error(
                    &at.key("container"),
                    format!(
                        "is already the container of tenant[{first}]; a container is one tenant"
                    ),
                ));
            }
        }
        tenants.push(t);
    }
    check_budget(doc, host, &tenants)?;
    check_cgroups(doc, host, &tenants)?;
    Ok(tenants)
}

fn tenant(
    doc: &Document,
    at: &FieldPath,
    t: TenantDoc,
    host: &HostSection,
) -> Result<TenantConfig> {
    let launched_into = match &host.parent {
        ParentCgroup::OwnCgroup => format!("<the daemon's cgroup>/{}", t.name),
        ParentCgroup::Path(p) => join(p, &t.name),
    };
    if t.engine.is_some() && t.container.is_none() {
        return Err(doc.error(
            &at.key("engine"),
            "names the engine of a container tenant; give container = \"NAME\" beside it",
        ));
    }
    if t.uri.is_some() && t.domain.is_none() {
        return Err(doc.error(
            &at.key("uri"),
            "names the libvirt connection of a domain tenant; give domain = \"NAME\" beside it",
        ));
    }
    let origin = if let Some(name) = &t.domain {
        let given = [
            ("cgroup", t.cgroup.is_some()),
            ("command", t.command.is_some()),
            ("vm", t.vm.is_some()),
            ("unit", t.unit.is_some()),
            ("slice", t.slice.is_some()),
            ("container", t.container.is_some()),
        ];
        if let Some((key, _)) = given.into_iter().find(|(_, set)| *set) {
            return Err(doc.error(
                &at.key(key),
                "is given beside domain; a domain tenant is found by its name through libvirt \
                 (give no cgroup, command, vm, unit, slice or container)",
            ));
        }
        if !memtide_engines::libvirt::valid_domain_name(name) {
            return Err(doc.error(
                &at.key("domain"),
                format!(
                    "is not a domain name; expected {}",
                    memtide_engines::libvirt::DOMAIN_NAME_RULE
                ),
            ));
        }
        let uri = t.uri.clone().unwrap_or_else(|| DEFAULT_URI.to_string());
        if !valid_uri(&uri) {
            return Err(doc.error(
                &at.key("uri"),
                "is not a libvirt URI; expected a driver and path such as \"qemu:///system\"",
            ));
        }
        TenantOrigin::Domain {
            name: name.clone(),
            uri,
        }
    } else if let Some(name) = &t.container {
        let given = [
            ("cgroup", t.cgroup.is_some()),
            ("command", t.command.is_some()),
            ("vm", t.vm.is_some()),
            ("unit", t.unit.is_some()),
            ("slice", t.slice.is_some()),
        ];
        if let Some((key, _)) = given.into_iter().find(|(_, set)| *set) {
            return Err(doc.error(
                &at.key(key),
                "is given beside container; a container tenant is found by its name through \
                 its engine (give no cgroup, command, vm, unit or slice)",
            ));
        }
        if !memtide_engines::valid_name(name) {
            return Err(doc.error(
                &at.key("container"),
                format!(
                    "is not a container name; expected {}",
                    memtide_engines::NAME_RULE
                ),
            ));
        }
        let engine = match &t.engine {
            None => None,
            Some(e) => Some(memtide_engines::EngineKind::parse(e).ok_or_else(|| {
                doc.error(
                    &at.key("engine"),
                    "is not an engine memtide knows; expected \"docker\" or \"podman\"",
                )
            })?),
        };
        TenantOrigin::Container {
            name: name.clone(),
            engine,
        }
    } else {
        if let (Some(_), Some(_)) = (&t.unit, &t.slice) {
            return Err(doc.error(
                &at.key("slice"),
                "adopts a systemd slice; give no unit beside it",
            ));
        }
        if let Some(unit) = t.unit.or(t.slice.clone()) {
            let key = super::unit_key(&unit);
            if t.cgroup.is_some() || t.command.is_some() || t.vm.is_some() {
                return Err(doc.error(
                    &at.key(key),
                    format!(
                        "adopts a systemd {key}'s cgroup; give no cgroup, command or [tenant.vm] \
                         beside it"
                    ),
                ));
            }
            if !valid_unit(&unit) {
                return Err(doc.error(
                    &at.key(key),
                    format!("is not a systemd unit name; expected {UNIT_RULE}"),
                ));
            }
            match (t.slice.is_some(), key) {
                (true, "unit") => {
                    return Err(doc.error(
                        &at.key("slice"),
                        "is not a slice; expected a name ending in .slice, such as \"batch.slice\"",
                    ))
                }
                (false, "slice") => {
                    return Err(doc.error(
                        &at.key("unit"),
                        "is a slice: write it as slice = \"...\" (its processes are in the \
                         cgroups below it)",
                    ))
                }
                _ => {}
            }
            TenantOrigin::Unit { unit, cgroup: None }
        } else {
            match (t.cgroup, t.command, t.vm) {
            (None, None, Some(vm_doc)) => vm(doc, &at.key("vm"), vm_doc)?,
            (cgroup, command, Some(_)) if cgroup.is_some() || command.is_some() => {
                return Err(doc.error(
                    &at.key("vm"),
                    "is a VM, which memtide launches or adopts by its QMP socket; give no cgroup or \
                     command beside it",
                ))
            }
            (Some(_), Some(_), _) => {
                return Err(doc.error(
                    at,
                    format!(
                        "has both cgroup and command; give cgroup to adopt an existing cgroup, \
                         or command to launch a program in a new cgroup {launched_into}"
                    ),
                ))
            }
            (None, None, _) => {
                return Err(doc.error(
                    at,
                    format!(
                        "has neither cgroup nor command (nor a [tenant.vm]); give cgroup to adopt an existing cgroup, \
                         or command to launch a program in a new cgroup {launched_into}"
                    ),
                ))
            }
            (None, Some(argv), _) => match argv.first() {
                None => {
                    return Err(doc.error(
                        &at.key("command"),
                        "is empty; expected the program to run and its arguments, such as \
                         [\"memtide-toucher\", \"--active\", \"400M\"]",
                    ))
                }
                Some(program) if program.trim().is_empty() => {
                    return Err(doc.error(
                        &at.key("command").index(0),
                        "is empty; the first element is the program to run",
                    ))
                }
                Some(_) => TenantOrigin::Launch { argv },
            },
            (Some(text), None, _) => TenantOrigin::Adopt {
                cgroup: adopted_cgroup(doc, &at.key("cgroup"), &text, host)?,
            },
        }
        }
    };
    let max_bytes = t.max.bytes();
    if max_bytes == 0 {
        return Err(doc.error(&at.key("max"), "must be > 0"));
    }
    // A launched VM's cgroup holds QEMU's own memory besides the guest's, and starts limited
    // at max: a max without room for both gets QEMU OOM-killed as the guest boots.
    if let TenantOrigin::Vm {
        source: memtide_qemu::vm::VmSource::Launch(l),
        ..
    } = &origin
    {
        let needed = l.memory.0 + QEMU_ROOM;
        if max_bytes < needed {
            return Err(doc.error(
                &at.key("max"),
                format!(
                    "must be at least the VM's memory ({}) plus {} for QEMU's own memory: {}; \
                     the VM's cgroup holds both",
                    format_size(l.memory.0),
                    format_size(QEMU_ROOM),
                    format_size(needed)
                ),
            ));
        }
    }
    let min_bytes = t.min.map_or(0, |m| m.bytes());
    if min_bytes > max_bytes {
        return Err(doc.error(
            &at.key("min"),
            format!("must not exceed max = \"{}\"", format_size(max_bytes)),
        ));
    }
    if t.shares == Some(0) {
        return Err(doc.error(&at.key("shares"), "must be at least 1"));
    }
    let estimator = t.estimator.unwrap_or(super::EstimatorChoice::Sampling);
    let app = match t.app {
        None => None,
        Some(a) => Some(app(doc, &at.key("app"), a)?),
    };
    Ok(TenantConfig {
        name: t.name,
        origin,
        min_bytes,
        max_bytes,
        shares: t.shares.unwrap_or(DEFAULT_SHARES),
        estimator,
        cap_at_estimate: t.cap_at_estimate.unwrap_or(estimator.caps_by_default()),
        app,
        isolated: t.isolated.unwrap_or(false),
        slo: t.slo.map(|s| s.build(doc, &at.key("slo"))).transpose()?,
        io: t
            .io
            .map(|io| tenant_io(doc, &at.key("io"), io))
            .transpose()?,
    })
}

/// `[tenant.vm]`: adopted by `qmp` alone, or launched, with its memory given. What the host
/// must have (the running VM's cgroup, the files to boot, the memory) is `check.rs`'s.
fn vm(doc: &Document, at: &FieldPath, v: VmDoc) -> Result<TenantOrigin> {
    use memtide_qemu::vm::{LaunchSpec, VmSource};
    if let Some(qmp) = v.qmp {
        let launch_field = [
            ("qemu", v.qemu.is_some()),
            ("kernel", v.kernel.is_some()),
            ("initrd", v.initrd.is_some()),
            ("disk", v.disk.is_some()),
            ("memory", v.memory.is_some()),
            ("cpus", v.cpus.is_some()),
            ("append", v.append.is_some()),
            ("args", v.args.is_some()),
            ("kvm", v.kvm.is_some()),
        ]
        .into_iter()
        .find(|(_, set)| *set);
        if let Some((field, _)) = launch_field {
            return Err(doc.error(
                &at.key(field),
                "is for a VM memtide launches; an adopted VM (qmp) runs as it was started",
            ));
        }
        return Ok(TenantOrigin::Vm {
            source: VmSource::Adopt {
                qmp: PathBuf::from(&qmp),
            },
            cgroup: None,
        });
    }
    let Some(memory) = v.memory else {
        return Err(doc.error(
            at,
            "needs memory (the guest's, e.g. memory = \"1G\") to launch a VM, or qmp to adopt a running one",
        ));
    };
    let spec = LaunchSpec {
        qemu: v.qemu.unwrap_or_else(|| "qemu-system-x86_64".to_string()),
        kernel: v.kernel.map(PathBuf::from),
        initrd: v.initrd.map(PathBuf::from),
        disk: v.disk.map(PathBuf::from),
        memory: memtide_model::Bytes(memory.bytes()),
        cpus: v.cpus.unwrap_or(1),
        append: v.append,
        args: v.args.unwrap_or_default(),
        kvm: v.kvm.unwrap_or(false),
    };
    Ok(TenantOrigin::Vm {
        source: VmSource::Launch(spec),
        cgroup: None,
    })
}

/// `[tenant.app]`: the pool's bounds must make sense and the URL be the server's kind.
fn app(doc: &Document, at: &FieldPath, a: super::schema::AppDoc) -> Result<super::AppConfig> {
    let (min_bytes, max_bytes) = (a.min.bytes(), a.max.bytes());
    if max_bytes == 0 {
        return Err(doc.error(&at.key("max"), "must be > 0"));
    }
    if min_bytes > max_bytes {
        return Err(doc.error(
            &at.key("min"),
            format!("must not exceed max = \"{}\"", format_size(max_bytes)),
        ));
    }
    let granule_bytes = a.granule.map_or(1 << 20, |g| g.bytes());
    if granule_bytes == 0 || granule_bytes > max_bytes {
        return Err(doc.error(&at.key("granule"), "must be > 0 and at most max"));
    }
    let server = app_server(doc, at, a.kind, a.url, a.user, a.password_file, a.collector)?;
    Ok(super::AppConfig {
        server,
        min_bytes,
        max_bytes,
        granule_bytes,
    })
}

/// The fields `[tenant.app]`'s kind takes: each address in its kind's schemes (or a Unix
/// socket), and a field another kind takes named as not this kind's.
fn app_server(
    doc: &Document,
    at: &FieldPath,
    kind: super::AppKind,
    url: Option<String>,
    user: Option<String>,
    password_file: Option<String>,
    collector: Option<super::Collector>,
) -> Result<super::AppServer> {
    use super::{AppKind, AppServer};
    let (schemes, default, what): (&[&str], &str, &str) = match kind {
        AppKind::Redis => (
            &["redis://", "rediss://"],
            "redis://127.0.0.1:6379",
            "a Redis",
        ),
        AppKind::Mariadb => (&["mysql://"], "unix:///run/mysqld/mysqld.sock", "a MariaDB"),
        AppKind::Memcached => (
            &["memcache://"],
            "memcache://127.0.0.1:11211",
            "a memcached",
        ),
        AppKind::Jvm => (&[], "", "a JVM"),
    };
    let not_for = |field: &str, takes: &str| {
        doc.error(
            &at.key(field),
            format!(
                "is not a setting of kind = \"{}\"; only {takes} takes it",
                kind.name()
            ),
        )
    };
    if kind == AppKind::Jvm {
        if url.is_some() {
            return Err(not_for(
                "url",
                "a server kind (the JVM is found in the tenant's cgroup)",
            ));
        }
        if password_file.is_some() {
            return Err(not_for("password_file", "redis or mariadb"));
        }
    } else if collector.is_some() {
        return Err(not_for("collector", "jvm"));
    }
    if user.is_some() && kind != AppKind::Mariadb {
        return Err(not_for("user", "mariadb"));
    }
    if password_file.is_some() && kind == AppKind::Memcached {
        return Err(not_for("password_file", "redis or mariadb"));
    }
    let url = url.unwrap_or_else(|| default.to_string());
    if let Some(shown) = memtide_model::written::url_with_credentials(&url) {
        // Shown without them: the error line is logged.
        return Err(doc.error_with_value(
            &at.key("url"),
            Some(format!("\"{shown}\"")),
            "must not carry a user or password (a URL goes on the adapter's command line, \
             which every local user can read); put the password in password_file",
        ));
    }
    if kind != AppKind::Jvm
        && !(url.starts_with("unix:///") || schemes.iter().any(|s| url.starts_with(s)))
    {
        return Err(doc.error(
            &at.key("url"),
            format!(
                "is not {what} address; expected {}HOST:PORT or unix:///PATH",
                schemes[0]
            ),
        ));
    }
    let password_file = file_path(doc, at.key("password_file"), password_file)?;
    Ok(match kind {
        AppKind::Redis => AppServer::Redis { url, password_file },
        AppKind::Mariadb => AppServer::Mariadb {
            url,
            user: match user {
                Some(u) if u.is_empty() => return Err(doc.error(&at.key("user"), "must not be empty")),
                Some(u) => u,
                None => "root".to_string(),
            },
            password_file,
        },
        AppKind::Memcached => AppServer::Memcached { url },
        AppKind::Jvm => AppServer::Jvm {
            collector: collector.ok_or_else(|| {
                doc.error(
                    &at.key("collector"),
                    "is missing; a JVM tenant declares its collector: \"shenandoah\", \"zgc\" or \"g1\"",
                )
            })?,
        },
    })
}

/// An adopted tenant's cgroup, normalised; under the parent when the parent is a path.
fn adopted_cgroup(
    doc: &Document,
    at: &FieldPath,
    text: &str,
    host: &HostSection,
) -> Result<String> {
    let cgroup = super::read::cgroup_path(text).map_err(|why| {
        doc.error(
            at,
            format!(
                "is not a cgroup path: it {why}; write an absolute path inside the cgroup \
                 hierarchy such as \"/memtide/db\""
            ),
        )
    })?;
    if cgroup == "/" {
        return Err(doc.error(at, "is the root cgroup; adopt a cgroup below it"));
    }
    if let ParentCgroup::Path(parent) = &host.parent {
        if cgroup == *parent {
            return Err(doc.error(
                at,
                format!(
                    "is the configured parent \"{parent}\" itself; an adopted cgroup must lie \
                     strictly under [host] parent"
                ),
            ));
        }
        if !cgroup_is_strictly_under(&cgroup, parent) {
            return Err(doc.error(
                at,
                format!(
                    "is outside the configured parent \"{parent}\"; an adopted cgroup must lie \
                     under [host] parent"
                ),
            ));
        }
    }
    Ok(cgroup)
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
fn check_budget(doc: &Document, host: &HostSection, tenants: &[TenantConfig]) -> Result<()> {
    let Some(budget) = host.budget_bytes else {
        return Ok(());
    };
    let sum: u128 = tenants.iter().map(|t| u128::from(t.min_bytes)).sum();
    if u128::from(budget) >= sum {
        return Ok(());
    }
    let sum_text = u64::try_from(sum).map_or_else(|_| sum.to_string(), format_size);
    Err(doc.error(
        &root().key("host").key("budget"),
        format!(
            "is less than the sum of the tenants' min ({sum_text}); the budget must cover every \
             tenant's min"
        ),
    ))
}

/// No two tenants share a cgroup, and no tenant's cgroup lies inside another's (a cgroup's
/// limit covers its children). Launched tenants' cgroups (`<parent>/<name>`) are known only
/// when the parent is a path; with `"self"` the daemon checks them once it knows its cgroup.
/// An adopted VM's cgroup is known once the host check found it (which then checks again).
pub(super) fn check_cgroups(
    doc: &Document,
    host: &HostSection,
    tenants: &[TenantConfig],
) -> Result<()> {
    let paths: Vec<(usize, String)> = tenants
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match (t.adopted_cgroup(), &host.parent) {
            (Some(cgroup), _) => Some((i, cgroup.to_string())),
            (None, ParentCgroup::Path(p)) if t.launched() => Some((i, join(p, &t.name))),
            (None, _) => None,
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
        let launched = if tenants[earlier.1].launched() {
            " (launched there)"
        } else {
            ""
        };
        let other = format!(
            "tenant \"{}\"'s cgroup \"{}\"{launched}",
            tenants[earlier.1].name, earlier.2
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
        let at = root().key("tenant").index(later.1);
        return Err(match tenants[later.1].origin {
            TenantOrigin::Adopt { .. } => doc.error(&at.key("cgroup"), message),
            TenantOrigin::Unit { ref unit, .. } => doc.error(
                &at.key(super::unit_key(unit)),
                format!("is {unit} in cgroup \"{}\", which {message}", later.2),
            ),
            TenantOrigin::Vm {
                source: memtide_qemu::vm::VmSource::Adopt { .. },
                ..
            } => doc.error(
                &at.key("vm").key("qmp"),
                format!("is a VM in cgroup \"{}\", which {message}", later.2),
            ),
            TenantOrigin::Launch { .. } | TenantOrigin::Vm { .. } => doc.error(
                &at,
                format!("would be launched into \"{}\", which {message}", later.2),
            ),
            // Its cgroup is not known here (found as it runs), so it is never in `paths`.
            TenantOrigin::Container { .. } => doc.error(&at.key("container"), message),
            TenantOrigin::Domain { .. } => doc.error(&at.key("domain"), message),
        });
    }
    Ok(())
}

/// The non-empty components of a cgroup path.
fn components(path: &str) -> Vec<&str> {
    path.split('/').filter(|p| !p.is_empty()).collect()
}
