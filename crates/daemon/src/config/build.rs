//! Builds a [`DaemonConfig`] from the file as read (`schema.rs`): defaults filled in, then the checks serde cannot make, each error pointing at the field it names (ranges, addresses, cgroup paths, tenant names, the budget against the mins, cgroups that nest, the shared disk's device on this host).

use super::schema::{
    BalloonDoc, DaemonDoc, FileDoc, HostDoc, IoDoc, PolicyDoc, RailsDoc, SharingDoc, TenantDoc,
    TenantIoDoc, VmDoc,
};
use super::{
    cgroup_is_strictly_under, BalloonSection, DaemonConfig, DaemonSection, HostSection, IoCaps,
    IoSection, ParentCgroup, PolicySection, RailsSection, SharingSection, TenantConfig,
    TenantIoConfig, TenantOrigin, DEFAULT_SHARES,
};
use memtide_config::{ConfigError, Document, FieldPath};
use memtide_model::written::format_size;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

type Result<T> = std::result::Result<T, ConfigError>;

/// What a launched VM's tenant needs in `max` above its guest's memory: QEMU's own memory
/// (about 110 MiB under TCG with a 64 MiB translation cache, docs/benchmarks.md).
const QEMU_ROOM: u64 = 128 << 20;

/// What a tenant name may be, for messages.
const NAME_RULE: &str = "1 to 64 letters, digits, '-', '_' or '.', and not \".\" or \"..\"";

pub(crate) const MIN_TICK: Duration = Duration::from_millis(100);
pub(crate) const MAX_TICK: Duration = Duration::from_secs(60);
pub(crate) const MIN_WRITE_TIMEOUT: Duration = Duration::from_millis(10);
pub(crate) const MAX_WRITE_TIMEOUT: Duration = Duration::from_secs(60);
pub(crate) const MIN_SAMPLING_PERIOD: Duration = Duration::from_secs(1);
pub(crate) const MAX_SAMPLING_PERIOD: Duration = Duration::from_secs(3600);
pub(crate) const MAX_DECISIONS_KEPT: u64 = 100_000;
/// The fastest scan rate `[sharing]` takes, pages a second (40 GB/s of 4 KiB pages).
pub(crate) const MAX_SCAN_RATE: u64 = 10_000_000;
/// A tenant's disk weight when it does not say: BFQ's and iocost's default.
pub(crate) const DEFAULT_IO_WEIGHT: u32 = 100;
pub(crate) const MIN_LATENCY_TARGET: Duration = Duration::from_micros(100);
pub(crate) const MAX_LATENCY_TARGET: Duration = Duration::from_secs(60);

fn root() -> FieldPath {
    FieldPath::root()
}

pub(crate) fn build(doc: &Document) -> Result<DaemonConfig> {
    let file: FileDoc = doc.read(&root())?;
    let daemon = daemon(doc, file.daemon.unwrap_or_default())?;
    let host = host(doc, file.host.unwrap_or_default())?;
    let policy = policy(doc, file.policy.unwrap_or_default())?;
    let rails = rails(doc, file.rails.unwrap_or_default())?;
    let balloon = balloon(doc, file.balloon.unwrap_or_default(), &daemon)?;
    let sharing = sharing(doc, file.sharing.unwrap_or_default())?;
    let io = io(doc, file.io.unwrap_or_default(), &host)?;
    let cache_given = file.cache.is_some();
    let cache = match file.cache {
        Some(c) => c.build(doc, &root().key("cache"))?,
        None => None,
    };
    let tenants = tenants(doc, file.tenant, &host)?;
    if !cache_given {
        if let Some(i) = tenants.iter().position(|t| t.slo.is_some()) {
            return Err(doc.error(
                &root().key("tenant").index(i).key("slo"),
                "needs [cache]: the budget the SLO tenants' pools share",
            ));
        }
    }
    if !io.enabled {
        if let Some(i) = tenants.iter().position(|t| t.io.is_some()) {
            return Err(doc.error(
                &root().key("tenant").index(i).key("io"),
                "needs [io] enabled = true and the device the tenants share",
            ));
        }
    }
    Ok(DaemonConfig {
        daemon,
        host,
        policy,
        rails,
        balloon,
        sharing,
        cache,
        io,
        tenants,
    })
}

/// `[io]`: when enabled, a device that is a whole block device on this host (its node, or its
/// name under `<proc_root>/sys/block`).
fn io(doc: &Document, t: IoDoc, host: &HostSection) -> Result<IoSection> {
    let at = root().key("io");
    let d = IoSection::default();
    let enabled = t.enabled.unwrap_or(d.enabled);
    let device = match t.device {
        Some(text) if text.is_empty() || text.contains('\0') => {
            return Err(doc.error(
                &at.key("device"),
                "is not a device; expected a path such as \"/dev/vdb\" or a name under /sys/block such as \"vdb\"",
            ))
        }
        other => other,
    };
    match &device {
        Some(text) if enabled => {
            if let Err(why) = block_device(&host.proc_root.join("sys"), text) {
                return Err(doc.error(
                    &at.key("device"),
                    format!("is not a whole block device on this host: {why}"),
                ));
            }
        }
        Some(_) => {}
        None if enabled => {
            return Err(doc.error(
                &at,
                "has enabled = true and no device; name the block device the tenants share, \
                 such as device = \"/dev/vdb\"",
            ))
        }
        None => {}
    }
    Ok(IoSection {
        enabled,
        device,
        scheduler: t.scheduler.unwrap_or(d.scheduler),
    })
}

/// Whether `text` names a whole block device: a path to a block device node (or a link to
/// one) whose name is under `<sysfs>/block`, or such a name. The error says what is wrong.
fn block_device(sysfs: &std::path::Path, text: &str) -> std::result::Result<(), String> {
    use memtide_linux::block::BlockDevice;
    use std::os::unix::fs::FileTypeExt;
    if !text.contains('/') {
        return BlockDevice::by_name(sysfs, text)
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    let path = std::path::Path::new(text);
    let meta = std::fs::metadata(path).map_err(|e| format!("{text}: {e}"))?;
    if !meta.file_type().is_block_device() {
        return Err(format!("{text} is not a block device node"));
    }
    BlockDevice::by_path(sysfs, path).map(|_| ()).map_err(|e| {
        format!(
            "{e} (a partition or another node: weights and schedulers belong to the whole disk)"
        )
    })
}

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

/// `[sharing]`: rates in range, the CPU budget a fraction of one core.
fn sharing(doc: &Document, t: SharingDoc) -> Result<SharingSection> {
    let at = root().key("sharing");
    let d = SharingSection::default();
    let rate = |key: &str, v: Option<u64>, default: u64| match v {
        Some(r) if r > MAX_SCAN_RATE => Err(doc.error(
            &at.key(key),
            format!("must be between 0 and {MAX_SCAN_RATE} pages a second"),
        )),
        Some(r) => Ok(r),
        None => Ok(default),
    };
    let cpu_budget = number_in(
        doc,
        at.key("cpu_budget"),
        t.cpu_budget,
        |v| v > 0.0 && v <= 1.0,
        "must be more than 0 and at most 1 (a fraction of one core)",
    )?
    .unwrap_or(d.cpu_budget);
    Ok(SharingSection {
        enabled: t.enabled.unwrap_or(d.enabled),
        idle_rate: rate("idle_rate", t.idle_rate, d.idle_rate)?,
        pressed_rate: rate("pressed_rate", t.pressed_rate, d.pressed_rate)?,
        cpu_budget,
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

/// `v` when it is finite and `ok` holds; `range` says what is allowed.
fn number_in(
    doc: &Document,
    path: FieldPath,
    v: Option<f64>,
    ok: impl Fn(f64) -> bool,
    range: &str,
) -> Result<Option<f64>> {
    match v {
        Some(v) if !(v.is_finite() && ok(v)) => Err(doc.error(&path, range)),
        other => Ok(other),
    }
}

/// A file-system path: a non-empty string without NUL.
fn file_path(doc: &Document, path: FieldPath, text: Option<String>) -> Result<Option<PathBuf>> {
    match text {
        Some(t) if t.is_empty() || t.contains('\0') => Err(doc.error(
            &path,
            "is not a path; expected a non-empty path without NUL characters",
        )),
        other => Ok(other.map(PathBuf::from)),
    }
}

fn daemon(doc: &Document, t: DaemonDoc) -> Result<DaemonSection> {
    let at = root().key("daemon");
    let d = DaemonSection::default();
    let tick = duration_in(
        doc,
        at.key("tick"),
        t.tick,
        (MIN_TICK, MAX_TICK),
        "100ms and 60s",
    )?
    .unwrap_or(d.tick);
    let listen_public = t.listen_public.unwrap_or(d.listen_public);
    let listen = match t.listen {
        None => d.listen,
        Some(text) => {
            let addr: SocketAddr = text.trim().parse().map_err(|_| {
                doc.error(
                    &at.key("listen"),
                    "is not an IP address and port such as \"127.0.0.1:9464\" or \"[::1]:9464\"",
                )
            })?;
            if !listen_public && !addr.ip().is_loopback() {
                return Err(doc.error(
                    &at.key("listen"),
                    "is not a loopback address; the API has no authentication, so it listens on \
                     127.0.0.1 or [::1] unless [daemon] listen_public = true",
                ));
            }
            addr
        }
    };
    let state_file = file_path(doc, at.key("state_file"), t.state_file)?.unwrap_or(d.state_file);
    let decisions_kept = match t.decisions_kept {
        None => d.decisions_kept,
        Some(n) if (1..=MAX_DECISIONS_KEPT).contains(&n) => n as usize,
        Some(_) => {
            return Err(doc.error(
                &at.key("decisions_kept"),
                format!("must be between 1 and {MAX_DECISIONS_KEPT}"),
            ))
        }
    };
    Ok(DaemonSection {
        tick,
        listen,
        listen_public,
        state_file,
        dry_run: t.dry_run.unwrap_or(d.dry_run),
        log_format: t.log_format.unwrap_or(d.log_format),
        decisions_kept,
    })
}

fn host(doc: &Document, t: HostDoc) -> Result<HostSection> {
    let at = root().key("host");
    let d = HostSection::default();
    let proc_root = file_path(doc, at.key("proc_root"), t.proc_root)?.unwrap_or(d.proc_root);
    let parent = match t.parent.as_deref() {
        None => d.parent,
        Some("self") => ParentCgroup::OwnCgroup,
        Some(text) => ParentCgroup::Path(cgroup_path(text).map_err(|why| {
            doc.error(
                &at.key("parent"),
                format!(
                    "is not a cgroup path: it {why}; write \"self\" or an absolute path inside \
                     the cgroup hierarchy such as \"/memtide\""
                ),
            )
        })?),
    };
    if t.budget.is_some_and(|b| b.bytes() == 0) {
        return Err(doc.error(&at.key("budget"), "must be > 0"));
    }
    let write_timeout = duration_in(
        doc,
        at.key("write_timeout"),
        t.write_timeout,
        (MIN_WRITE_TIMEOUT, MAX_WRITE_TIMEOUT),
        "10ms and 60s",
    )?
    .unwrap_or(d.write_timeout);
    Ok(HostSection {
        proc_root,
        parent,
        budget_bytes: t.budget.map(|b| b.bytes()),
        reserve_bytes: t.reserve.map_or(d.reserve_bytes, |r| r.bytes()),
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
        return Err(format!("has a \"{p}\" component"));
    }
    Ok(format!("/{}", parts.join("/")))
}

fn policy(doc: &Document, t: PolicyDoc) -> Result<PolicySection> {
    let at = root().key("policy");
    let d = PolicySection::default();
    let tax_rate = number_in(
        doc,
        at.key("tax_rate"),
        t.tax_rate,
        |v| (0.0..1.0).contains(&v),
        "must be >= 0 and < 1",
    )?
    .unwrap_or(d.tax_rate);
    // -0.0 is 0.0: keep the one zero.
    let tax_rate = if tax_rate == 0.0 { 0.0 } else { tax_rate };
    let sampling_period = duration_in(
        doc,
        at.key("sampling_period"),
        t.sampling_period,
        (MIN_SAMPLING_PERIOD, MAX_SAMPLING_PERIOD),
        "1s and 1h",
    )?
    .unwrap_or(d.sampling_period);
    Ok(PolicySection {
        tax_rate,
        sampling_period,
        reclaim: t.reclaim.unwrap_or(d.reclaim),
    })
}

fn rails(doc: &Document, t: RailsDoc) -> Result<RailsSection> {
    let at = root().key("rails");
    let d = RailsSection::default();
    let shrink_step = number_in(
        doc,
        at.key("shrink_step"),
        t.shrink_step,
        |v| v > 0.0 && v <= 0.5,
        "must be > 0 and <= 0.5",
    )?
    .unwrap_or(d.shrink_step);
    let backoff_faults_per_s = number_in(
        doc,
        at.key("backoff_refaults_per_s"),
        t.backoff_refaults_per_s,
        |v| v > 0.0,
        "must be a finite number > 0",
    )?
    .unwrap_or(d.backoff_faults_per_s);
    let backoff_pressure = number_in(
        doc,
        at.key("backoff_pressure"),
        t.backoff_pressure,
        |v| v > 0.0 && v <= 100.0,
        "must be > 0 and <= 100 (PSI avg10 is a percentage)",
    )?
    .unwrap_or(d.backoff_pressure);
    Ok(RailsSection {
        shrink_step,
        floor_margin_bytes: t.floor_margin.map_or(d.floor_margin_bytes, |m| m.bytes()),
        backoff_faults_per_s,
        backoff_pressure,
    })
}

/// `[balloon]`; the socket defaults to `balloon.sock` beside the state file.
fn balloon(doc: &Document, t: BalloonDoc, daemon: &DaemonSection) -> Result<BalloonSection> {
    let at = root().key("balloon");
    let d = BalloonSection::default();
    let beside_state = daemon
        .state_file
        .parent()
        .map_or(d.socket.clone(), |dir| dir.join("balloon.sock"));
    let socket = file_path(doc, at.key("socket"), t.socket)?.unwrap_or(beside_state);
    if socket.as_os_str().len() > memtide_agents::socket::MAX_PATH_BYTES {
        return Err(doc.error(
            &at.key("socket"),
            format!(
                "is {} bytes; a Unix socket path has at most {}",
                socket.as_os_str().len(),
                memtide_agents::socket::MAX_PATH_BYTES
            ),
        ));
    }
    let mode = match t.mode {
        None => d.mode,
        Some(text) => u32::from_str_radix(text.trim(), 8)
            .ok()
            .filter(|m| *m <= 0o777)
            .ok_or_else(|| {
                doc.error(
                    &at.key("mode"),
                    "is not a mode; expected octal permission bits such as \"0660\"",
                )
            })?,
    };
    let stats_interval = duration_in(
        doc,
        at.key("stats_interval"),
        t.stats_interval,
        (MIN_TICK, MAX_TICK),
        "100ms and 60s",
    )?
    .unwrap_or(d.stats_interval);
    let dead_after = duration_in(
        doc,
        at.key("dead_after"),
        t.dead_after,
        (stats_interval, Duration::from_secs(600)),
        "stats_interval and 10m",
    )?
    .unwrap_or(d.dead_after.max(stats_interval));
    let max_agents = match t.max_agents {
        None => d.max_agents,
        Some(n) if (1..=1_000_000).contains(&n) => n as usize,
        Some(_) => return Err(doc.error(&at.key("max_agents"), "must be between 1 and 1000000")),
    };
    Ok(BalloonSection {
        enabled: t.enabled.unwrap_or(d.enabled),
        socket,
        mode,
        stats_interval,
        dead_after,
        max_agents,
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

fn tenants(doc: &Document, docs: Vec<TenantDoc>, host: &HostSection) -> Result<Vec<TenantConfig>> {
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
        tenants.push(tenant(doc, &at, t, host)?);
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
    let origin = match (t.cgroup, t.command, t.vm) {
        (None, None, Some(vm_doc)) => vm(doc, &at.key("vm"), vm_doc, host)?,
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

/// `[tenant.vm]`: adopted by `qmp` alone (the VM must run now: its QEMU process's cgroup is
/// read through the socket), or launched, with what to boot present and its memory within
/// the host's.
fn vm(doc: &Document, at: &FieldPath, v: VmDoc, host: &HostSection) -> Result<TenantOrigin> {
    use memtide_qemu::vm::{LaunchSpec, VmError, VmSource};
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
        let hierarchy = memtide_linux::MemoryHierarchy::detect(&host.proc_root)
            .map_err(|e| doc.error(&at.key("qmp"), e.to_string()))?;
        let socket = PathBuf::from(&qmp);
        let cgroup = memtide_qemu::adopt::cgroup_of_socket(&socket, &hierarchy, &host.proc_root)
            .map_err(|e| doc.error(&at.key("qmp"), e.to_string()))?;
        return Ok(TenantOrigin::Vm {
            source: VmSource::Adopt { qmp: socket },
            cgroup: Some(cgroup),
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
    let machine = memtide_linux::read_meminfo(&host.proc_root)
        .map_err(|e| doc.error(&at.key("memory"), e.to_string()))?
        .mem_total;
    spec.check(machine).map_err(|e| {
        let field = match &e {
            VmError::Missing { what, .. } => *what,
            VmError::NothingToBoot => "kernel",
            VmError::MoreThanHost { .. } | VmError::TooSmall { .. } => "memory",
            VmError::Cpus(_) => "cpus",
            VmError::NoQemu(_) => "qemu",
        };
        doc.error(&at.key(field), e.to_string())
    })?;
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
    let cgroup = cgroup_path(text).map_err(|why| {
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
fn check_cgroups(doc: &Document, host: &HostSection, tenants: &[TenantConfig]) -> Result<()> {
    let paths: Vec<(usize, String)> = tenants
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match (t.adopted_cgroup(), &host.parent) {
            (Some(cgroup), _) => Some((i, cgroup.to_string())),
            (None, ParentCgroup::Path(p)) => Some((i, join(p, &t.name))),
            (None, ParentCgroup::OwnCgroup) => None,
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
            TenantOrigin::Vm {
                cgroup: Some(_), ..
            } => doc.error(
                &at.key("vm").key("qmp"),
                format!("is a VM in cgroup \"{}\", which {message}", later.2),
            ),
            TenantOrigin::Launch { .. } | TenantOrigin::Vm { cgroup: None, .. } => doc.error(
                &at,
                format!("would be launched into \"{}\", which {message}", later.2),
            ),
        });
    }
    Ok(())
}

/// The non-empty components of a cgroup path.
fn components(path: &str) -> Vec<&str> {
    path.split('/').filter(|p| !p.is_empty()).collect()
}
