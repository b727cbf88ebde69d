//! The daemon's configuration file (TOML): host, policy, safety rails and tenants, validated at load into typed values.
//!
//! The loader (`DaemonConfig::load` / `DaemonConfig::parse`) rejects unknown fields, wrong types,
//! out-of-range values and inconsistent tenants with one line naming the file, the field and the
//! value. See docs/configuration.md.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonConfig {
    pub daemon: DaemonSection,
    pub host: HostSection,
    pub policy: PolicySection,
    pub rails: RailsSection,
    /// In file order; names are unique.
    pub tenants: Vec<TenantConfig>,
}

/// `[daemon]`: how the daemon runs.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonSection {
    /// `tick = "1s"`: time between two ticks (100ms..=60s).
    pub tick: Duration,
    /// `listen = "127.0.0.1:9464"`: the JSON API and `/metrics`; must be a loopback address
    /// unless `listen_public = true`.
    pub listen: SocketAddr,
    /// `state_file = "/run/memtide/state.json"`: limits found at start, for restore and re-adoption.
    pub state_file: PathBuf,
    /// `dry_run = false`: decide and log, write nothing (also `--dry-run`).
    pub dry_run: bool,
    /// `log_format = "text" | "json"`.
    pub log_format: LogFormat,
    /// `decisions_kept = 200`: how many recent decisions the API keeps.
    pub decisions_kept: usize,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// `[host]`: where the cgroups are and how much memory memtide hands out.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSection {
    /// `proc_root = "/"`: root under which `/proc` and `/sys` are read (tests use fake trees).
    pub proc_root: PathBuf,
    /// `parent = "/memtide"`: cgroup (path inside the memory hierarchy) under which launched
    /// tenants are created; every adopted tenant's cgroup must lie under it too. The special
    /// value `"self"` means the cgroup the daemon itself runs in (`/proc/self/cgroup`).
    pub parent: ParentCgroup,
    /// `budget = "16G"`: bytes handed out to tenants. `None`: MemTotal minus `reserve`.
    pub budget_bytes: Option<u64>,
    /// `reserve = "1G"`: kept back from MemTotal when no budget is given.
    pub reserve_bytes: u64,
    /// `write_timeout = "2s"`: longest wait for one write to a kernel file.
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
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySection {
    /// `tax_rate = 0.75`, in [0, 1).
    pub tax_rate: f64,
    /// `sampling_period = "30s"`: period of the sampling estimator on this host.
    pub sampling_period: Duration,
}

/// `[rails]`: the safety rails on a real host.
#[derive(Clone, Debug, PartialEq)]
pub struct RailsSection {
    /// `shrink_step = 0.05`: a limit is lowered by at most this fraction of the tenant's usage
    /// per tick, in (0, 0.5].
    pub shrink_step: f64,
    /// `floor_margin = "32M"`: room kept above what a tenant cannot give back.
    pub floor_margin_bytes: u64,
    /// `backoff_refaults_per_s = 2000`: more refaults + swap-ins + major faults than this per
    /// second (pages) stop a tenant's shrinking at once.
    pub backoff_faults_per_s: f64,
    /// `backoff_pressure = 10.0`: host or tenant PSI some avg10 (percent) above this stops shrinking.
    pub backoff_pressure: f64,
}

/// Which active-memory estimator a tenant uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EstimatorChoice {
    /// TWS working-set probing on the cgroup's refault and swap-in counters.
    Tws,
    /// ESX statistical sampling; on Linux the touched fraction comes from DAMON.
    Sampling,
}

/// How a tenant comes to exist.
#[derive(Clone, Debug, PartialEq)]
pub enum TenantOrigin {
    /// `cgroup = "/memtide/db"`: an existing cgroup, adopted; must lie under the parent.
    Adopt { cgroup: String },
    /// `command = ["memtide-toucher", "--active", "400M"]`: memtide creates
    /// `<parent>/<name>`, starts the command in it, and stops it on exit.
    Launch { argv: Vec<String> },
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
}
