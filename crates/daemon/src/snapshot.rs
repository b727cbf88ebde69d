//! What the daemon publishes after every tick for the API, `/metrics` and `memtide status`: host, tenants, recent decisions and counters.
//!
//! Amounts are in bytes (`*_bytes`), rates per second, times in seconds; a `None` is a figure the
//! kernel does not expose here (never a zero).

use serde::{Deserialize, Serialize};

/// Everything the daemon knows after its latest tick.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// memtide's version.
    pub version: String,
    /// True when the daemon decides and explains but writes nothing.
    pub dry_run: bool,
    /// Ticks completed since start.
    pub ticks: u64,
    /// Seconds since the daemon started.
    pub uptime_s: f64,
    pub host: HostSnapshot,
    /// Managed tenants, in config order.
    pub tenants: Vec<TenantSnapshot>,
    /// The most recent decisions that changed something or were held back, newest last.
    pub decisions: Vec<DecisionRecord>,
    /// Cumulative counts since start.
    pub counters: Counters,
}

/// The host as a whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSnapshot {
    /// `v1` or `v2`: which cgroup hierarchy holds the memory controller.
    pub hierarchy: String,
    /// The cgroup under which tenants live (relative to the memory hierarchy's root).
    pub parent: String,
    pub machine_bytes: u64,
    /// MemAvailable from /proc/meminfo.
    pub free_bytes: u64,
    /// Bytes memtide hands out to its tenants.
    pub budget_bytes: u64,
    pub swap_total_bytes: u64,
    pub swap_free_bytes: u64,
    /// Reclamation state: high, soft, hard or low.
    pub state: String,
    pub tax_rate: f64,
    /// Host memory pressure (PSI "some" avg10, percent), where the kernel has it.
    pub pressure_some_avg10: Option<f64>,
}

/// One managed tenant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantSnapshot {
    pub name: String,
    /// The tenant's cgroup (relative to the memory hierarchy's root).
    pub cgroup: String,
    /// `adopted` (an existing cgroup) or `launched` (a command memtide started).
    pub origin: String,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub shares: u64,
    /// `tws`, `sampling` or `committed`.
    pub estimator: String,
    /// Memory the cgroup holds now (usage).
    pub allocated_bytes: u64,
    pub target_bytes: u64,
    pub active_estimate_bytes: u64,
    /// The limit in force (None: unlimited).
    pub limit_bytes: Option<u64>,
    /// The lowest limit the safety rails allow now (min, or unreclaimable memory + margin).
    pub floor_bytes: u64,
    pub anon_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    /// Refaults (anon + file) since the daemon started watching this tenant.
    pub refaults_total: Option<u64>,
    /// Refaults per second over the last tick.
    pub refaults_per_s: Option<f64>,
    pub major_faults_total: Option<u64>,
    /// The tenant's pressure (PSI "some" avg10, percent), where the kernel has it per cgroup.
    pub pressure_some_avg10: Option<f64>,
    /// Mechanisms used in the last tick (`limit`, ...).
    pub mechanisms: Vec<String>,
    /// Why the last decision is what it is, one line.
    pub reason: String,
    /// Why the tenant's limit is held away from its target this tick (a shrink held by a rail,
    /// or a raise waiting for the budget), one line; `None` when it is not held.
    #[serde(default)]
    pub held: Option<String>,
}

/// One decision worth recording: a limit changed, was held back, or a write failed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub tick: u64,
    /// Milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    pub tenant: String,
    pub target_bytes: u64,
    pub limit_from_bytes: Option<u64>,
    pub limit_to_bytes: Option<u64>,
    /// `raise`, `lower`, `hold`, `dry_run`, `write_failed`, `admitted`, `refused`, `dropped`.
    pub outcome: String,
    pub reason: String,
}

/// Cumulative counts, exported as Prometheus counters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    pub ticks: u64,
    pub limit_raised: u64,
    pub limit_lowered: u64,
    /// Shrinks held back by the safety rails (floor, backoff).
    pub held: u64,
    /// Decisions logged but not written (dry run).
    pub dry_run: u64,
    pub write_failures: u64,
    pub admitted: u64,
    pub refused: u64,
    pub dropped: u64,
    /// Ticks spent in each reclamation state, keyed high/soft/hard/low; all four are always
    /// present, as in /metrics.
    pub state_ticks: std::collections::BTreeMap<String, u64>,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            ticks: 0,
            limit_raised: 0,
            limit_lowered: 0,
            held: 0,
            dry_run: 0,
            write_failures: 0,
            admitted: 0,
            refused: 0,
            dropped: 0,
            state_ticks: ["high", "soft", "hard", "low"]
                .into_iter()
                .map(|s| (s.to_string(), 0))
                .collect(),
        }
    }
}
