//! Builds a [`DaemonConfig`] from the file as read: the sections as serde filled them (their defaults included), checked by plain functions for what serde cannot say (ranges, a loopback address, defaults that follow other fields), each error pointing at the field it names; the tenants are `tenant.rs`'s. Reads no host file (`check.rs` checks against the host).

use super::schema::FileDoc;
use super::{
    BalloonSection, DaemonConfig, DaemonSection, HostSection, IoSection, PolicySection,
    RailsSection, SharingSection,
};
use memtide_config::{ConfigError, Document, FieldPath};
use memtide_model::SharingSettings;
use std::time::Duration;

type Result<T> = std::result::Result<T, ConfigError>;

pub(crate) const MIN_TICK: Duration = Duration::from_millis(100);
pub(crate) const MAX_TICK: Duration = Duration::from_secs(60);
pub(crate) const MIN_WRITE_TIMEOUT: Duration = Duration::from_millis(10);
pub(crate) const MAX_WRITE_TIMEOUT: Duration = Duration::from_secs(60);
pub(crate) const MIN_SAMPLING_PERIOD: Duration = Duration::from_secs(1);
pub(crate) const MAX_SAMPLING_PERIOD: Duration = Duration::from_secs(3600);
pub(crate) const MAX_DECISIONS_KEPT: usize = 100_000;

pub(super) fn root() -> FieldPath {
    FieldPath::root()
}

pub(crate) fn build(doc: &Document) -> Result<DaemonConfig> {
    let FileDoc {
        daemon,
        api,
        host,
        policy,
        rails,
        mut balloon,
        sharing,
        cache,
        io,
        engines,
        tenant,
    } = doc.read(&root())?;
    check_daemon(doc, &daemon)?;
    check_host(doc, &host)?;
    check_policy(doc, &policy)?;
    check_rails(doc, &rails)?;
    balloon_defaults(doc, &mut balloon, &daemon);
    check_balloon(doc, &balloon)?;
    check_sharing(doc, &sharing)?;
    check_io(doc, &io)?;
    let cache_given = cache.is_some();
    let cache = match cache {
        Some(c) => c.build(doc, &root().key("cache"))?,
        None => None,
    };
    let tenants = super::tenant::tenants(doc, tenant, &host)?;
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
        api,
        host,
        policy,
        rails,
        balloon,
        sharing,
        cache,
        io,
        engines,
        tenants,
    })
}

/// An error at `path` unless `ok`.
fn require(doc: &Document, path: FieldPath, ok: bool, message: impl Into<String>) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(doc.error(&path, message))
    }
}

/// `d` lies in `min..=max`; `range` says what is allowed, e.g. `100ms and 60s`.
fn within(
    doc: &Document,
    path: FieldPath,
    d: Duration,
    (min, max): (Duration, Duration),
    range: &str,
) -> Result<()> {
    require(
        doc,
        path,
        (min..=max).contains(&d),
        format!("must be between {range}"),
    )
}

/// `v` is finite and `ok` holds; `range` says what is allowed.
fn number_in(
    doc: &Document,
    path: FieldPath,
    v: f64,
    ok: impl Fn(f64) -> bool,
    range: &str,
) -> Result<()> {
    require(doc, path, v.is_finite() && ok(v), range)
}

fn check_daemon(doc: &Document, d: &DaemonSection) -> Result<()> {
    let at = root().key("daemon");
    within(
        doc,
        at.key("tick"),
        d.tick,
        (MIN_TICK, MAX_TICK),
        "100ms and 60s",
    )?;
    require(
        doc,
        at.key("listen"),
        d.listen_public || d.listen.ip().is_loopback(),
        "is not a loopback address; the API's reads need no authority, so it listens on \
         127.0.0.1 or [::1] unless [daemon] listen_public = true",
    )?;
    require(
        doc,
        at.key("decisions_kept"),
        (1..=MAX_DECISIONS_KEPT).contains(&d.decisions_kept),
        format!("must be between 1 and {MAX_DECISIONS_KEPT}"),
    )
}

fn check_host(doc: &Document, h: &HostSection) -> Result<()> {
    let at = root().key("host");
    require(
        doc,
        at.key("budget"),
        h.budget_bytes != Some(0),
        "must be > 0",
    )?;
    within(
        doc,
        at.key("write_timeout"),
        h.write_timeout,
        (MIN_WRITE_TIMEOUT, MAX_WRITE_TIMEOUT),
        "10ms and 60s",
    )
}

fn check_policy(doc: &Document, p: &PolicySection) -> Result<()> {
    within(
        doc,
        root().key("policy").key("sampling_period"),
        p.sampling_period,
        (MIN_SAMPLING_PERIOD, MAX_SAMPLING_PERIOD),
        "1s and 1h",
    )
}

fn check_rails(doc: &Document, r: &RailsSection) -> Result<()> {
    let at = root().key("rails");
    number_in(
        doc,
        at.key("shrink_step"),
        r.shrink_step,
        |v| v > 0.0 && v <= 0.5,
        "must be > 0 and <= 0.5",
    )?;
    number_in(
        doc,
        at.key("backoff_refaults_per_s"),
        r.backoff_faults_per_s,
        |v| v > 0.0,
        "must be a finite number > 0",
    )?;
    number_in(
        doc,
        at.key("backoff_pressure"),
        r.backoff_pressure,
        |v| v > 0.0 && v <= 100.0,
        "must be > 0 and <= 100 (PSI avg10 is a percentage)",
    )?;
    number_in(
        doc,
        at.key("backoff_throttled_per_s"),
        r.backoff_throttled_per_s,
        |v| v > 0.0,
        "must be a finite number > 0",
    )
}

/// The `[balloon]` defaults that follow other fields: the socket beside the state file, an
/// agent dead after 5s or one `stats_interval`, whichever is longer.
fn balloon_defaults(doc: &Document, b: &mut BalloonSection, daemon: &DaemonSection) {
    let at = root().key("balloon");
    if doc.get(&at.key("socket")).is_none() {
        if let Some(dir) = daemon.state_file.parent() {
            b.socket = dir.join("balloon.sock");
        }
    }
    if doc.get(&at.key("dead_after")).is_none() {
        b.dead_after = b.dead_after.max(b.stats_interval);
    }
}

fn check_balloon(doc: &Document, b: &BalloonSection) -> Result<()> {
    let at = root().key("balloon");
    let len = b.socket.as_os_str().len();
    let max = memtide_files::socket::MAX_PATH_BYTES;
    require(
        doc,
        at.key("socket"),
        len <= max,
        format!("is {len} bytes; a Unix socket path has at most {max}"),
    )?;
    within(
        doc,
        at.key("stats_interval"),
        b.stats_interval,
        (MIN_TICK, MAX_TICK),
        "100ms and 60s",
    )?;
    within(
        doc,
        at.key("dead_after"),
        b.dead_after,
        (b.stats_interval, Duration::from_secs(600)),
        "stats_interval and 10m",
    )?;
    require(
        doc,
        at.key("max_agents"),
        (1..=1_000_000).contains(&b.max_agents),
        "must be between 1 and 1000000",
    )?;
    require(
        doc,
        at.key("max_agents_per_uid"),
        (1..=1_000_000).contains(&b.max_agents_per_uid),
        "must be between 1 and 1000000",
    )
}

/// `[sharing]`: rates in range, the CPU budget a fraction of one core.
fn check_sharing(doc: &Document, s: &SharingSection) -> Result<()> {
    let at = root().key("sharing");
    for (key, rate) in [("idle_rate", s.idle_rate), ("pressed_rate", s.pressed_rate)] {
        require(
            doc,
            at.key(key),
            rate <= SharingSettings::MAX_RATE,
            format!(
                "must be between 0 and {} pages a second",
                SharingSettings::MAX_RATE
            ),
        )?;
    }
    number_in(
        doc,
        at.key("cpu_budget"),
        s.cpu_budget,
        |v| v > 0.0 && v <= 1.0,
        "must be more than 0 and at most 1 (a fraction of one core)",
    )
}

/// `[io]`: when enabled, a device (whether it is one on this host is `check.rs`'s).
fn check_io(doc: &Document, io: &IoSection) -> Result<()> {
    let at = root().key("io");
    match &io.device {
        Some(text) if text.is_empty() || text.contains('\0') => Err(doc.error(
            &at.key("device"),
            "is not a device; expected a path such as \"/dev/vdb\" or a name under /sys/block such as \"vdb\"",
        )),
        None if io.enabled => Err(doc.error(
            &at,
            "has enabled = true and no device; name the block device the tenants share, \
             such as device = \"/dev/vdb\"",
        )),
        _ => Ok(()),
    }
}
