//! The daemon's configuration file (TOML): host, policy, safety rails, page sharing, cache quotas, the shared disk and tenants, validated at load into typed values.
//!
//! The loader (`DaemonConfig::load` / `DaemonConfig::parse`, on `memtide_config`) rejects unknown
//! fields, wrong types, out-of-range values and inconsistent tenants with one line naming
//! file:line:col, the field and the value. The sections below are read straight from their
//! tables by serde (`#[serde(default)]`, fields with their own syntax through `read.rs`); the
//! tenants' tables, shaped unlike [`TenantConfig`], are in `schema.rs` and become
//! [`TenantConfig`]s in `tenant.rs`; the checks across fields are plain functions in
//! `build.rs` and `tenant.rs`; `check.rs` checks the result against the host.
//! See docs/configuration.md.

mod build;
pub mod check;
mod read;
mod schema;
mod tenant;

#[cfg(test)]
mod tests;

pub use memtide_config::ConfigError;

use memtide_config::read_as;
use memtide_engines::EngineKind;
use serde::Deserialize;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonConfig {
    pub daemon: DaemonSection,
    pub api: ApiSection,
    pub host: HostSection,
    pub policy: PolicySection,
    pub rails: RailsSection,
    pub balloon: BalloonSection,
    pub sharing: SharingSection,
    /// `[cache]`: Gemini's quotas for the pools of tenants with an `slo` (docs/cache.md);
    /// `None`: absent or `enabled = false`.
    pub cache: Option<memtide_config::quotas::QuotaTable>,
    /// `[io]`: the disk the tenants share (docs/io.md).
    pub io: IoSection,
    /// `[engines]`: where the container engines listen (docs/containers.md).
    pub engines: EnginesSection,
    /// In file order; names are unique.
    pub tenants: Vec<TenantConfig>,
}

/// `[daemon]`: how the daemon runs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "the [daemon] table")]
pub struct DaemonSection {
    /// `tick = "1s"`: time between two ticks (100ms..=60s).
    #[serde(deserialize_with = "read_as::duration")]
    pub tick: Duration,
    /// `listen = "127.0.0.1:9464"`: the JSON API and `/metrics`; must be a loopback address
    /// unless `listen_public = true`.
    #[serde(deserialize_with = "read::address")]
    pub listen: SocketAddr,
    /// `listen_public = false`: allow `listen` on a non-loopback address (the API has no
    /// authentication).
    pub listen_public: bool,
    /// `state_file = "/run/memtide/state.json"`: limits found at start, for restore and re-adoption.
    #[serde(deserialize_with = "read::path")]
    pub state_file: PathBuf,
    /// `dry_run = false`: decide and log, write nothing (also `--dry-run`).
    pub dry_run: bool,
    /// `log_format = "text" | "json"`.
    pub log_format: LogFormat,
    /// `decisions_kept = 200`: how many recent decisions the API keeps.
    pub decisions_kept: usize,
}

/// `[api]`: who may change settings through the API (docs/api.md, "Authority"). Over TCP the
/// API is read-only unless a request carries the token of `token_file`; the Unix socket takes
/// changes from root and the members of `group`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "the [api] table")]
pub struct ApiSection {
    /// `socket = "/run/memtide/api.sock"`: the Unix socket for changes. `None`: `api.sock` in
    /// the state file's directory.
    #[serde(deserialize_with = "read::some_path")]
    pub socket: Option<PathBuf>,
    /// `group = "memtide"`: a group whose members may use the socket besides root (mode 0660,
    /// owned by root and this group). `None`: root only (mode 0600).
    pub group: Option<String>,
    /// `token_file = "/etc/memtide/token"`: a bearer token that allows changes over TCP; the
    /// file must be root's and readable by no one else. `None`: TCP is read-only.
    #[serde(deserialize_with = "read::some_path")]
    pub token_file: Option<PathBuf>,
}

impl ApiSection {
    /// The socket's path: the configured one, or `api.sock` beside the state file.
    pub fn socket_path(&self, state_file: &Path) -> PathBuf {
        self.socket.clone().unwrap_or_else(|| {
            state_file
                .parent()
                .unwrap_or_else(|| Path::new("/"))
                .join("api.sock")
        })
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Text,
    Json,
}

/// `[host]`: where the cgroups are and how much memory memtide hands out.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "the [host] table")]
pub struct HostSection {
    /// `proc_root = "/"`: root under which `/proc` and `/sys` are read (tests use fake trees).
    #[serde(deserialize_with = "read::path")]
    pub proc_root: PathBuf,
    /// `parent = "/memtide"`: cgroup (path inside the memory hierarchy) under which launched
    /// tenants are created; every adopted tenant's cgroup must lie under it too. The special
    /// value `"self"` means the cgroup the daemon itself runs in (`/proc/self/cgroup`).
    #[serde(deserialize_with = "read::parent")]
    pub parent: ParentCgroup,
    /// `budget = "16G"`: bytes handed out to tenants. `None`: MemTotal minus `reserve`.
    #[serde(rename = "budget", deserialize_with = "read_as::some_bytes")]
    pub budget_bytes: Option<u64>,
    /// `reserve = "1G"`: kept back from MemTotal when no budget is given.
    #[serde(rename = "reserve", deserialize_with = "read_as::bytes")]
    pub reserve_bytes: u64,
    /// `write_timeout = "2s"`: longest wait for one write to a kernel file.
    #[serde(deserialize_with = "read_as::duration")]
    pub write_timeout: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParentCgroup {
    /// The daemon's own memory cgroup.
    OwnCgroup,
    /// A path inside the memory hierarchy, starting with `/`.
    Path(String),
}

/// `[policy]`: the ESX parameters.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "the [policy] table")]
pub struct PolicySection {
    /// `tax_rate = 0.75`, in [0, 1).
    pub tax_rate: memtide_model::TaxRate,
    /// `sampling_period = "30s"`: period of the sampling estimator on this host.
    #[serde(deserialize_with = "read_as::duration")]
    pub sampling_period: Duration,
    /// `reclaim = "when_short"`: when memory may be taken from a tenant.
    pub reclaim: Reclaim,
}

/// When memtide takes memory from a tenant.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reclaim {
    /// Only when the budget (or the host) runs short, as ESX reclaims only below its high state.
    WhenShort,
    /// Also while the budget has room: targets capped at the estimates, the TWS probe always on.
    Always,
}

impl Reclaim {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Reclaim::WhenShort => "when_short",
            Reclaim::Always => "always",
        }
    }
}

/// `[rails]`: the safety rails on a real host.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "the [rails] table")]
pub struct RailsSection {
    /// `shrink_step = 0.05`: a limit is lowered by at most this fraction of the tenant's usage
    /// per tick, in (0, 0.5].
    pub shrink_step: f64,
    /// `floor_margin = "32M"`: room kept above what a tenant cannot give back.
    #[serde(rename = "floor_margin", deserialize_with = "read_as::bytes")]
    pub floor_margin_bytes: u64,
    /// `backoff_refaults_per_s = 2000`: more refaults + swap-ins + major faults than this per
    /// second (pages) stop a tenant's shrinking at once.
    #[serde(rename = "backoff_refaults_per_s")]
    pub backoff_faults_per_s: f64,
    /// `backoff_pressure = 10.0`: the tenant's own PSI some avg10 (percent) at or above which
    /// its shrinking stops and, throttled over its v2 memory.high, it is rescued.
    pub backoff_pressure: f64,
    /// `backoff_throttled_per_s = 100`: the kernel throttling a tenant over its v2 memory.high
    /// this often a second or more (memory.events `high`) stops its shrinking.
    pub backoff_throttled_per_s: f64,
}

/// `[balloon]`: the application balloon socket (docs/balloon-protocol.md).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "the [balloon] table")]
pub struct BalloonSection {
    /// `enabled = true`: serve the socket, so applications' agents can register.
    pub enabled: bool,
    /// `socket = "/run/memtide/balloon.sock"`: where; at most 107 bytes. Default:
    /// `balloon.sock` beside `state_file`.
    #[serde(deserialize_with = "read::path")]
    pub socket: PathBuf,
    /// `mode = "0660"`: the socket file's permission bits (the owning group may connect).
    #[serde(deserialize_with = "read::mode")]
    pub mode: u32,
    /// `group = "memtide"`: the socket file's group, so that its members may connect (with
    /// `mode` giving the group write permission). Default: root's group. The socket's owner,
    /// group and mode are set before it appears at `socket`.
    pub group: Option<String>,
    /// `stats_interval = "1s"`: agents send statistics this often (100ms..=60s).
    #[serde(deserialize_with = "read_as::duration")]
    pub stats_interval: Duration,
    /// `dead_after = "5s"`: an agent silent this long is dead (stats_interval..=10m).
    /// Default: 5s, or `stats_interval` when longer.
    #[serde(deserialize_with = "read_as::duration")]
    pub dead_after: Duration,
    /// `max_agents = 16384`: connections served at once (1..=1000000); never more than a
    /// quarter of the descriptor budget allows (`memtide_linux::host::max_agent_connections`).
    pub max_agents: usize,
    /// `max_agents_per_uid = 64`: connections served at once from one user, the peer's uid
    /// (1..=1000000): one user's flood cannot lock out other users' agents.
    pub max_agents_per_uid: usize,
}

/// `[sharing]`: content-based page sharing through the kernel's KSM (docs/sharing.md).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "the [sharing] table")]
pub struct SharingSection {
    /// `enabled = false`: drive KSM (its settings are given back at exit); launched tenants
    /// not marked `isolated` are asked to merge their pages.
    pub enabled: bool,
    /// `idle_rate = 1000`: pages a second KSM scans while memory is plentiful (0..=10000000).
    pub idle_rate: u64,
    /// `pressed_rate = 20000`: pages a second once the budget runs short (0..=10000000).
    pub pressed_rate: u64,
    /// `cpu_budget = 0.2`: the most of one core ksmd may use, in (0, 1]; the rate is cut to fit.
    pub cpu_budget: f64,
}

impl SharingSection {
    /// The policy's settings.
    pub fn settings(&self) -> memtide_model::SharingSettings {
        memtide_model::SharingSettings {
            idle_rate: self.idle_rate,
            pressed_rate: self.pressed_rate,
            cpu_budget: Some(self.cpu_budget),
        }
    }
}

impl Default for SharingSection {
    fn default() -> SharingSection {
        let d = memtide_model::SharingSettings::default();
        SharingSection {
            enabled: false,
            idle_rate: d.idle_rate,
            pressed_rate: d.pressed_rate,
            cpu_budget: d.cpu_budget.unwrap_or(0.2),
        }
    }
}

/// `[engines]`: the container engines' sockets, for tenants named by `container`
/// (docs/containers.md).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "the [engines] table")]
pub struct EnginesSection {
    /// `docker_socket = "/var/run/docker.sock"`: dockerd's API socket.
    #[serde(deserialize_with = "read::path")]
    pub docker_socket: PathBuf,
    /// `podman_socket = "/run/podman/podman.sock"`: Podman's API service's socket
    /// (`podman.socket`, or `podman system service`).
    #[serde(deserialize_with = "read::path")]
    pub podman_socket: PathBuf,
}

impl Default for EnginesSection {
    fn default() -> EnginesSection {
        EnginesSection {
            docker_socket: EngineKind::Docker.default_socket(),
            podman_socket: EngineKind::Podman.default_socket(),
        }
    }
}

impl EnginesSection {
    /// Where engine `kind` listens.
    pub fn socket(&self, kind: EngineKind) -> &Path {
        match kind {
            EngineKind::Docker => &self.docker_socket,
            EngineKind::Podman => &self.podman_socket,
        }
    }
}

/// `[io]`: the block device the tenants share, divided by weights (docs/io.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "the [io] table")]
pub struct IoSection {
    /// `enabled = false`: manage the I/O of tenants with a `[tenant.io]` table.
    pub enabled: bool,
    /// `device = "/dev/vdb"`: the shared device, a path to its node or its name under
    /// `/sys/block`; required when enabled, and checked to be a whole block device against
    /// the host (`check::against_host`).
    pub device: Option<String>,
    /// `scheduler = "bfq"`: make BFQ the device's scheduler while memtide runs (the previous
    /// one is given back at exit), or `"keep"` the one in force.
    pub scheduler: IoScheduler,
}

/// `[io] scheduler`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoScheduler {
    /// BFQ while memtide runs: v1's blkio weights act only under BFQ.
    #[default]
    Bfq,
    /// The scheduler in force (on cgroup v1 it must be BFQ already).
    Keep,
}

/// `[tenant.io]`: a tenant's share of the disk, and caps where it asks for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantIoConfig {
    /// `weight = 100`: its proportional share while tenants contend (1..=1000).
    pub weight: u32,
    /// `latency_target = "20ms"`: the mean I/O latency it should see; while it sees more, its
    /// weight is raised (up to 8x). None: its weight stays the configured one.
    pub latency_target: Option<Duration>,
    /// `read_iops`, `write_iops` (operations a second) and `read_bps`, `write_bps` (bytes a
    /// second, sizes such as `"10M"`): hard caps, written as configured and never by policy.
    pub caps: IoCaps,
}

/// A tenant's configured caps; `None` is no cap in that direction.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct IoCaps {
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
    pub read_bps: Option<u64>,
    pub write_bps: Option<u64>,
}

impl IoCaps {
    /// No cap in any direction.
    pub fn is_none(&self) -> bool {
        *self == IoCaps::default()
    }
}

impl TenantIoConfig {
    /// The spec's disk: the weight and the target in µs.
    pub fn disk_spec(&self) -> memtide_model::DiskSpec {
        memtide_model::DiskSpec {
            weight: self.weight,
            latency_target_us: self
                .latency_target
                .map(|d| u32::try_from(d.as_micros()).unwrap_or(u32::MAX)),
        }
    }
}

/// Which active-memory estimator a tenant uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EstimatorChoice {
    /// TWS working-set probing on the cgroup's refault and swap-in counters.
    Tws,
    /// ESX statistical sampling; on Linux the touched fraction comes from the accessed bits (`clear_refs`, `smaps_rollup`).
    Sampling,
}

/// How a tenant comes to exist.
#[derive(Clone, Debug, PartialEq)]
pub enum TenantOrigin {
    /// `cgroup = "/memtide/db"`: an existing cgroup, adopted; must lie under the parent.
    Adopt { cgroup: String },
    /// `unit = "redis-server.service"` or `slice = "batch.slice"`: a systemd unit's cgroup,
    /// adopted (a slice's with its subtree: its processes are in the cgroups below it). The
    /// cgroup is found by the check against the host (`check::against_host`, asking systemd
    /// for the unit's `ControlGroup`, or where it is not running the cgroup it will get) and
    /// must lie under the parent.
    Unit {
        unit: String,
        cgroup: Option<String>,
    },
    /// `command = ["memtide-toucher", "--active", "400M"]`: memtide creates
    /// `<parent>/<name>`, starts the command in it, and stops it on exit.
    Launch { argv: Vec<String> },
    /// `[tenant.vm]`: a QEMU VM, launched in `<parent>/<name>` (and stopped on exit), or
    /// adopted by its QMP socket in the cgroup its QEMU process was found in (`cgroup`, found
    /// by the check against the host, `check::against_host`: an adopted VM must be running
    /// then).
    Vm {
        source: memtide_qemu::vm::VmSource,
        cgroup: Option<String>,
    },
    /// `container = "redis-a"` (with `engine = "docker"` or `"podman"`): a container, found
    /// by name through its engine, whose cgroup is adopted while it runs (its cgroup changes
    /// as the engine restarts or makes it again: found anew each time). Without an engine,
    /// the check against the host takes the one whose socket exists, Docker first.
    Container {
        name: String,
        engine: Option<EngineKind>,
    },
    /// `domain = "vm1"` (with `uri = "qemu:///system"`): a libvirt domain, found by name
    /// through libvirt, its balloon moved and its statistics read through libvirt, its cgroup
    /// (found from its QEMU process as it runs) the host swap's; followed across its restarts.
    Domain { name: String, uri: String },
}

/// `[[tenant]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantConfig {
    /// `name = "db"`: unique; letters, digits, `-`, `_`, `.`.
    pub name: String,
    pub origin: TenantOrigin,
    /// `min = "64M"`.
    pub min_bytes: u64,
    /// `max = "1G"`, at least `min`.
    pub max_bytes: u64,
    /// `shares = 1000`, at least 1.
    pub shares: u64,
    /// `estimator = "tws" | "sampling"`, default `tws`.
    pub estimator: EstimatorChoice,
    /// `cap_at_estimate = true` (default for tws): the target never exceeds the estimate.
    pub cap_at_estimate: bool,
    /// `[tenant.app]`: its server, resized through `memtide-adapter` (docs/apps.md).
    pub app: Option<AppConfig>,
    /// `slo = { kind = "strict", target_us = 500, slack = 0.1 }` or `{ kind = "best-effort" }`:
    /// its pool's quota is chosen by `[cache]` from the curve its agent reports.
    pub slo: Option<memtide_model::Slo>,
    /// `isolated = false`: never ask this tenant to merge pages with others (page sharing
    /// across tenants is a timing side channel; docs/sharing.md).
    pub isolated: bool,
    /// `[tenant.io]`: its share of the disk `[io]` manages (needs `[io] enabled = true`).
    pub io: Option<TenantIoConfig>,
}

/// Which server an adapter speaks to: `kind = "redis" | "mariadb" | "memcached" | "jvm"`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AppKind {
    Redis,
    Mariadb,
    Memcached,
    Jvm,
}

impl AppKind {
    /// The name `kind =` and `memtide-adapter` give it.
    pub fn name(self) -> &'static str {
        match self {
            AppKind::Redis => "redis",
            AppKind::Mariadb => "mariadb",
            AppKind::Memcached => "memcached",
            AppKind::Jvm => "jvm",
        }
    }
}

/// A JVM tenant's collector, which decides how its heap is resized (docs/apps.md).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Collector {
    Shenandoah,
    Zgc,
    G1,
}

impl Collector {
    /// The name `collector =` and `memtide-adapter jvm --collector` give it.
    pub fn name(self) -> &'static str {
        match self {
            Collector::Shenandoah => "shenandoah",
            Collector::Zgc => "zgc",
            Collector::G1 => "g1",
        }
    }
}

/// The server behind `[tenant.app]`, with the fields its kind takes.
#[derive(Clone, Debug, PartialEq)]
pub enum AppServer {
    /// `url = "redis://127.0.0.1:6379"` or `unix:///PATH`, `password_file`.
    Redis {
        url: String,
        password_file: Option<PathBuf>,
    },
    /// `url = "unix:///run/mysqld/mysqld.sock"` or `mysql://HOST:PORT`, `user` (default
    /// root), `password_file`.
    Mariadb {
        url: String,
        user: String,
        password_file: Option<PathBuf>,
    },
    /// `url = "memcache://127.0.0.1:11211"` or `unix:///PATH`.
    Memcached { url: String },
    /// `collector = "shenandoah" | "zgc" | "g1"`: the JVM is the one in the tenant's cgroup.
    Jvm { collector: Collector },
}

impl AppServer {
    /// The kind, as `kind =` names it.
    pub fn kind(&self) -> AppKind {
        match self {
            AppServer::Redis { .. } => AppKind::Redis,
            AppServer::Mariadb { .. } => AppKind::Mariadb,
            AppServer::Memcached { .. } => AppKind::Memcached,
            AppServer::Jvm { .. } => AppKind::Jvm,
        }
    }
}

/// `[tenant.app]`.
#[derive(Clone, Debug, PartialEq)]
pub struct AppConfig {
    /// `kind = ...` and the fields that kind takes.
    pub server: AppServer,
    /// `min = "64M"`, `max = "1G"`: the pool's bounds (`max` at least `min`).
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// `granule = "1M"`.
    pub granule_bytes: u64,
}

/// `shares` when the tenant does not say.
pub const DEFAULT_SHARES: u64 = 1000;

const MIB: u64 = 1 << 20;

impl Default for DaemonSection {
    fn default() -> DaemonSection {
        DaemonSection {
            tick: Duration::from_secs(1),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 9464)),
            listen_public: false,
            state_file: PathBuf::from("/run/memtide/state.json"),
            dry_run: false,
            log_format: LogFormat::Text,
            decisions_kept: 200,
        }
    }
}

impl Default for HostSection {
    fn default() -> HostSection {
        HostSection {
            proc_root: PathBuf::from("/"),
            parent: ParentCgroup::OwnCgroup,
            budget_bytes: None,
            reserve_bytes: 1024 * MIB,
            write_timeout: Duration::from_secs(2),
        }
    }
}

impl Default for PolicySection {
    fn default() -> PolicySection {
        PolicySection {
            tax_rate: memtide_model::TaxRate::DEFAULT,
            sampling_period: Duration::from_secs(30),
            reclaim: Reclaim::WhenShort,
        }
    }
}

impl Default for RailsSection {
    fn default() -> RailsSection {
        RailsSection {
            shrink_step: 0.05,
            floor_margin_bytes: 32 * MIB,
            backoff_faults_per_s: 2000.0,
            backoff_pressure: 10.0,
            backoff_throttled_per_s: memtide_policy::mechanism::limit::BACKOFF_THROTTLED_PER_S,
        }
    }
}

impl Default for BalloonSection {
    fn default() -> BalloonSection {
        BalloonSection {
            enabled: true,
            socket: PathBuf::from("/run/memtide/balloon.sock"),
            mode: 0o660,
            group: None,
            stats_interval: Duration::from_secs(1),
            dead_after: Duration::from_secs(5),
            max_agents: 16_384,
            max_agents_per_uid: 64,
        }
    }
}

/// Every default and no tenants: what an empty file gives.
impl Default for DaemonConfig {
    fn default() -> DaemonConfig {
        DaemonConfig {
            daemon: DaemonSection::default(),
            api: ApiSection::default(),
            host: HostSection::default(),
            policy: PolicySection::default(),
            rails: RailsSection::default(),
            balloon: BalloonSection::default(),
            sharing: SharingSection::default(),
            cache: None,
            io: IoSection::default(),
            engines: EnginesSection::default(),
            tenants: Vec::new(),
        }
    }
}

impl DaemonConfig {
    /// Reads and validates the configuration file at `path`, and checks it against this host
    /// (at start and at every reload).
    pub fn load(path: &Path) -> Result<DaemonConfig, ConfigError> {
        DaemonConfig::parse_on_host(&memtide_config::read_file(path)?, path)
    }

    /// Validates the configuration `text` without looking at the host (an adopted VM's
    /// cgroup stays unknown); `origin` names it in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<DaemonConfig, ConfigError> {
        memtide_config::Document::parse(origin, text)?.build(build::build)
    }

    /// [`DaemonConfig::parse`], then [`check::against_host`] on the host's own files under
    /// `[host] proc_root`.
    pub fn parse_on_host(text: &str, origin: &Path) -> Result<DaemonConfig, ConfigError> {
        let doc = memtide_config::Document::parse(origin, text)?;
        let mut config = doc.build(build::build)?;
        let host = check::HostFiles::new(&config.host.proc_root);
        check::against_host(&mut config, &doc, &host)?;
        Ok(config)
    }

    /// The tenant named `name`.
    pub fn tenant(&self, name: &str) -> Option<&TenantConfig> {
        self.tenants.iter().find(|t| t.name == name)
    }

    /// The first adopted tenant whose cgroup does not lie strictly under `parent`. The loader
    /// checks this when `[host] parent` is a path; with `"self"` the daemon calls it once it
    /// has read its own cgroup, and should refuse to start on `Some`, saying e.g.
    /// `tenant "db".cgroup "/x/y" is outside the daemon's cgroup "/system.slice/memtide.service"`.
    pub fn first_adopted_outside(&self, parent: &str) -> Option<&TenantConfig> {
        self.tenants.iter().find(|t| match &t.origin {
            TenantOrigin::Adopt { cgroup }
            | TenantOrigin::Unit {
                cgroup: Some(cgroup),
                ..
            }
            | TenantOrigin::Vm {
                cgroup: Some(cgroup),
                ..
            } => !cgroup_is_strictly_under(cgroup, parent),
            // Checked as it is found (`memtide_qemu::ContainerPlacement::within`).
            TenantOrigin::Launch { .. }
            | TenantOrigin::Unit { cgroup: None, .. }
            | TenantOrigin::Vm { cgroup: None, .. }
            | TenantOrigin::Container { .. }
            | TenantOrigin::Domain { .. } => false,
        })
    }
}

/// The `[[tenant]]` key that names systemd unit `unit`: `slice` for a slice, else `unit`.
pub(crate) fn unit_key(unit: &str) -> &'static str {
    if unit.ends_with(".slice") {
        "slice"
    } else {
        "unit"
    }
}

impl ParentCgroup {
    /// The parent as written in the file: `"self"` or the path.
    pub fn as_written(&self) -> &str {
        match self {
            ParentCgroup::OwnCgroup => "self",
            ParentCgroup::Path(p) => p,
        }
    }
}

impl EstimatorChoice {
    /// `cap_at_estimate` when the tenant does not say: true for TWS (its estimate follows
    /// demand), false for sampling (it cannot see demand beyond what the tenant holds).
    pub fn caps_by_default(self) -> bool {
        match self {
            EstimatorChoice::Tws => true,
            EstimatorChoice::Sampling => false,
        }
    }

    /// The name used in the file: `"tws"` or `"sampling"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EstimatorChoice::Tws => "tws",
            EstimatorChoice::Sampling => "sampling",
        }
    }
}

impl TenantConfig {
    /// The cgroup of an adopted tenant.
    pub fn adopted_cgroup(&self) -> Option<&str> {
        match &self.origin {
            TenantOrigin::Adopt { cgroup }
            | TenantOrigin::Unit {
                cgroup: Some(cgroup),
                ..
            }
            | TenantOrigin::Vm {
                cgroup: Some(cgroup),
                ..
            } => Some(cgroup),
            TenantOrigin::Launch { .. }
            | TenantOrigin::Unit { cgroup: None, .. }
            | TenantOrigin::Vm { cgroup: None, .. }
            | TenantOrigin::Container { .. }
            | TenantOrigin::Domain { .. } => None,
        }
    }

    /// Whether memtide starts this tenant (a command or a VM) rather than adopting it.
    pub fn launched(&self) -> bool {
        match &self.origin {
            TenantOrigin::Launch { .. } => true,
            TenantOrigin::Adopt { .. }
            | TenantOrigin::Unit { .. }
            | TenantOrigin::Container { .. }
            | TenantOrigin::Domain { .. } => false,
            TenantOrigin::Vm { source, .. } => {
                matches!(source, memtide_qemu::vm::VmSource::Launch(_))
            }
        }
    }

    /// The tenant's cgroup when the parent cgroup is `parent`: the adopted one, or
    /// `<parent>/<name>` for a launched tenant.
    pub fn cgroup_under(&self, parent: &str) -> String {
        match self.adopted_cgroup() {
            Some(cgroup) => cgroup.to_string(),
            None if parent.ends_with('/') => format!("{parent}{}", self.name),
            None => format!("{parent}/{}", self.name),
        }
    }
}

/// Whether cgroup path `cgroup` lies strictly under `parent`, component by component:
/// `"/a/b/c"` is under `"/a/b"`, `"/a/bc"` and `"/a/b"` are not. Both are absolute paths.
pub fn cgroup_is_strictly_under(cgroup: &str, parent: &str) -> bool {
    let mut child = cgroup.split('/').filter(|p| !p.is_empty());
    let parent = parent.split('/').filter(|p| !p.is_empty());
    for p in parent {
        if child.next() != Some(p) {
            return false;
        }
    }
    child.next().is_some()
}
