//! What the daemon publishes after every tick, served by `GET /v1/status` (and in parts by `/v1/host`, `/v1/tenants`, `/v1/decisions`): host, tenants, recent decisions and counters.
//!
//! Amounts are in bytes (`*_bytes`), rates per second, times in seconds; a `None` (`null`) is a
//! figure the kernel does not expose here (never a zero).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::API_VERSION;

/// Everything the daemon knows after its latest tick: the answer to `GET /v1/status`.
///
/// `memtide status --json` prints it as it comes; for example:
///
/// ```json
#[doc = include_str!("../json/snapshot.json")]
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The version of the API's wire format, [`API_VERSION`]. A snapshot without the field comes
    /// from a daemon older than it, which spoke version 1.
    #[serde(default = "version_before_the_field")]
    pub api_version: u32,
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

fn version_before_the_field() -> u32 {
    1
}

impl Default for Snapshot {
    /// An empty snapshot of this [`API_VERSION`].
    fn default() -> Snapshot {
        Snapshot {
            api_version: API_VERSION,
            version: String::new(),
            dry_run: false,
            ticks: 0,
            uptime_s: 0.0,
            host: HostSnapshot::default(),
            tenants: Vec::new(),
            decisions: Vec::new(),
            counters: Counters::default(),
        }
    }
}

/// The host as a whole: the snapshot's `host`, and the answer to `GET /v1/host`.
///
/// ```json
#[doc = include_str!("../json/host.json")]
/// ```
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
    /// Page sharing (the kernel's KSM driven by memtide), when `[sharing]` is enabled.
    #[serde(default)]
    pub sharing: Option<SharingSnapshot>,
}

/// What page sharing saves across the host, and how hard the scanner works for it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SharingSnapshot {
    /// Memory backed by a shared page (KSM's pages_shared + pages_sharing + ksm_zero_pages).
    pub shared_bytes: u64,
    /// Memory saved: shared less the one copy each shared page keeps.
    pub reclaimed_bytes: u64,
    /// Of `shared_bytes`, pages of zeros, where the kernel counts them.
    pub zero_bytes: Option<u64>,
    /// KSM's own bookkeeping, where the kernel reports its profit.
    pub metadata_bytes: Option<u64>,
    /// The scan rate memtide set for this tick, pages a second.
    pub scan_rate_pages_per_s: u64,
    /// Pages scanned per second over the last tick, where the kernel counts them.
    pub scanned_pages_per_s: Option<f64>,
    /// The scanner's CPU time over the last tick, as a fraction of one core.
    pub scanner_cpu: Option<f64>,
}

/// One managed tenant: an element of the snapshot's `tenants`, and the answer to
/// `GET /v1/tenants/{name}`.
///
/// ```json
#[doc = include_str!("../json/tenant.json")]
/// ```
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
    /// The figures of its levers published as the world reports them, each at the top level
    /// of the tenant's JSON under its own key (`null` where the tenant has none): the
    /// `memtide_tenant_*` gauges and counters docs/metrics.md lists with an API key, such as
    /// `pressure_full_avg10` (the share of time all its tasks stalled on memory at once, PSI
    /// "full" avg10, percent, where the kernel has it per cgroup). A client reads those it
    /// knows; a newer daemon's figures arrive here too.
    #[serde(flatten)]
    pub figures: BTreeMap<String, serde_json::Value>,
    /// Mechanisms used in the last tick (`limit`, ...).
    pub mechanisms: Vec<String>,
    /// Why the last decision is what it is, one line.
    pub reason: String,
    /// Why the tenant's limit is held away from its target this tick (a shrink held by a rail,
    /// or a raise waiting for the budget), one line; `None` when it is not held.
    #[serde(default)]
    pub held: Option<String>,
    /// The tenant's application pool, when a balloon agent (an SDK or `memtide-adapter`) has
    /// registered for it; `None` for a tenant no agent ever spoke for.
    #[serde(default)]
    pub app: Option<AppSnapshot>,
    /// The tenant's memory backed by pages shared with others (its processes' KSM merged and
    /// zero pages), when page sharing is on.
    #[serde(default)]
    pub shared_bytes: Option<u64>,
    /// What sharing saves the tenant net of KSM's bookkeeping (`ksm_process_profit`, may be
    /// negative), when page sharing is on.
    #[serde(default)]
    pub sharing_profit_bytes: Option<i64>,
    /// The tenant's cache quota, when its application pool is sized by an SLO (`[cache]`);
    /// `None` otherwise.
    #[serde(default)]
    pub cache: Option<CacheSnapshot>,
    /// The tenant's share of the disk memtide manages (`[io]` and its `[tenant.io]`); `None`
    /// for a tenant whose I/O it does not manage.
    #[serde(default)]
    pub disk: Option<DiskSnapshot>,
    /// Lai et al.'s mitigations its database's own figures call for (a MariaDB tenant whose
    /// adapter reports its durability settings and fsync rates): advice to its operator, never
    /// applied by memtide. Empty for a tenant that has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub advice: Vec<AdviceSnapshot>,
    /// A VM's balloon and host swap (a `[tenant.vm]`); `None` for a cgroup tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<VmSnapshot>,
}

/// A VM tenant's balloon and host swap (ESX's mechanisms on a QEMU VM): where its balloon
/// stands and where the policy wants it, whether its driver moves, and what the host paged
/// out through the VM's cgroup.
///
/// ```json
#[doc = include_str!("../json/vm.json")]
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VmSnapshot {
    /// The balloon's size now: guest memory the guest gave back.
    pub balloon_bytes: u64,
    /// The size the policy asked for this tick (`None`: the guest has no balloon driver).
    pub balloon_target_bytes: Option<u64>,
    /// The largest balloon memtide asks of this guest (its memory less what its kernel
    /// needs), with a driver.
    pub balloon_limit_bytes: Option<u64>,
    /// The driver did not move toward a larger target for the configured ticks: what the
    /// balloon cannot take goes to host swap.
    pub stalled: bool,
    /// The VM's memory in host swap (its cgroup's swap).
    pub host_swapped_bytes: u64,
    /// What the policy pages out this tick, through the VM's cgroup limit.
    pub host_swap_out_bytes: u64,
    /// memtide paused the VM until it is at its target (ESX's low state).
    pub blocked: bool,
    /// The guest's swap-ins per second over the last tick (its balloon statistics).
    pub guest_swap_ins_per_s: Option<f64>,
}

/// One piece of advice on a database's durability settings (Lai et al.), with the figures
/// that call for it.
///
/// ```json
/// {
///   "setting": "sync_binlog",
///   "value": 1,
///   "suggested": 100,
///   "line": "sync_binlog 1 -> 100: 240 commits/s, 240 binlog fsyncs/s (Lai et al.: response time >400% lower at 100 than at 1)"
/// }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AdviceSnapshot {
    /// The server's setting: `sync_binlog`, `innodb_log_buffer_size` or
    /// `innodb_write_io_threads`.
    pub setting: String,
    /// Its value now and the value suggested (bytes for the log buffer).
    pub value: u64,
    pub suggested: u64,
    /// The advice in one line: the change, the measured evidence, the paper's effect.
    pub line: String,
}

/// A tenant's share of the disk the tenants share (Lai et al., the daemon's `[io]`): its
/// weight, why it is what it is, and what it did over the last tick.
///
/// ```json
#[doc = include_str!("../json/disk.json")]
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskSnapshot {
    /// The weight memtide set this tick (in a dry run: would set); the one read from the
    /// cgroup where the planner said nothing.
    pub weight: Option<u32>,
    /// The configured weight, and the factor the latency target raised it by (1, 2, 4 or 8):
    /// weight = base_weight x boost, within 1..=1000.
    pub base_weight: Option<u32>,
    pub boost: Option<u32>,
    /// Its read and write IOPS caps together, where its configuration gives any.
    pub cap_iops: Option<u32>,
    /// Operations and bytes a second on the device over the last tick.
    pub ops_per_s: Option<f64>,
    pub bytes_per_s: Option<f64>,
    /// The I/O latency seen over the last tick, in ms, when it did I/O (on Linux the device's
    /// mean await: cgroup v1 has no per-cgroup latency).
    pub latency_ms: Option<f64>,
    /// Its configured latency target, in ms.
    pub target_ms: Option<f64>,
    /// Operations and bytes since memtide started watching it.
    pub ops_total: u64,
    pub bytes_total: u64,
}

/// A tenant's cache quota (Gemini, the daemon's `[cache]`): its SLO, its share of the pools'
/// budget, and the mean latency its pool's miss-ratio curve predicts there.
///
/// ```json
#[doc = include_str!("../json/cache.json")]
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheSnapshot {
    /// `strict` or `best_effort`.
    pub slo: String,
    /// A strict SLO's target and slack (0.1: 10% over still counts as met); `None` for best
    /// effort.
    pub target_us: Option<f64>,
    pub slack: Option<f64>,
    /// The pool the quota gives it.
    pub quota_bytes: u64,
    /// The budget the SLO tenants' pools share this tick.
    pub budget_bytes: u64,
    /// The mean latency its curve predicts at the quota, in µs.
    pub predicted_latency_us: f64,
    /// What that latency is worth under its SLO (the paper's utilities: 0 when a strict SLO
    /// is met, down to -100; up to 100 for best effort).
    pub utility: f64,
}

/// A tenant's application pool (a buffer pool, a heap, a cache) as its balloon agent reports
/// it, and which mechanism holds the tenant: the application or the OS.
///
/// ```json
#[doc = include_str!("../json/app.json")]
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AppSnapshot {
    /// The name the agent registered under (`memtide-adapter` uses the tenant's).
    pub app: String,
    /// `buffer_pool`, `heap`, `cache` or `other`.
    pub kind: String,
    /// The agent's process; `None` once it is gone.
    pub pid: Option<u32>,
    /// The pool's size as the agent last reported it.
    pub pool_bytes: u64,
    /// The pool memtide wants: the tenant's target minus its memory outside the pool, within
    /// the application's bounds (`None` before the agent's first statistics).
    pub wanted_bytes: Option<u64>,
    /// `app` while the application's agent moves the tenant's memory, `os` when the OS
    /// mechanism (the cgroup limit) does: the agent is gone or was taken over.
    pub held_by: String,
    /// Why the OS holds it (`taken over: dishonest: ...`, `agent gone: ...`); `None` while the
    /// application does.
    pub why: Option<String>,
    /// Times memtide took the tenant over from its agents since it started, by reason:
    /// `deadline`, `dead`, `dishonest`, `violations` (absent: none).
    #[serde(default)]
    pub takeovers: BTreeMap<String, u64>,
    /// The last target the agent answered.
    pub last_resize: Option<ResizeSnapshot>,
}

/// An application's answer to one target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResizeSnapshot {
    /// The pool's size when it answered.
    pub pool_bytes: u64,
    /// `done` or `failed`.
    pub status: String,
    /// From memtide sending the target to the answer, in seconds.
    pub took_s: f64,
    /// The application's reason, for `failed`.
    pub reason: Option<String>,
}

/// One decision worth recording (a limit changed, was held back, or a write failed): an element
/// of the snapshot's `decisions` and of the answer to `GET /v1/decisions`.
///
/// ```json
#[doc = include_str!("../json/decision.json")]
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub tick: u64,
    /// Milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    pub tenant: String,
    pub target_bytes: u64,
    /// The limit before (`None`: there was none, `max`).
    pub limit_from_bytes: Option<u64>,
    pub limit_to_bytes: Option<u64>,
    /// `raise`, `lower`, `hold`, `dry_run`, `write_failed`, `admitted`, `refused`, `dropped`,
    /// `waiting`.
    pub outcome: String,
    pub reason: String,
}

/// Cumulative counts since start, also exported as Prometheus counters: the snapshot's
/// `counters`.
///
/// ```json
#[doc = include_str!("../json/counters.json")]
/// ```
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
    /// Failed attempts to restore a tenant let go (no longer configured, or gone); a failed
    /// restore is retried every tick, so one tenant left unrestored counts once a tick.
    #[serde(default)]
    pub restore_failures: u64,
    /// Ticks spent in each reclamation state, keyed high/soft/hard/low; all four are always
    /// present, as in /metrics.
    pub state_ticks: BTreeMap<String, u64>,
}

impl Default for Counters {
    /// All zero, with all four states in `state_ticks`.
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
            restore_failures: 0,
            state_ticks: ["high", "soft", "hard", "low"]
                .into_iter()
                .map(|s| (s.to_string(), 0))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_carry_this_api_version_and_all_four_states() {
        assert_eq!(Snapshot::default().api_version, API_VERSION);
        assert_eq!(
            Counters::default().state_ticks.keys().collect::<Vec<_>>(),
            ["hard", "high", "low", "soft"]
        );
    }

    #[test]
    fn a_snapshot_without_api_version_is_version_1() {
        let mut v = serde_json::to_value(Snapshot::default()).unwrap();
        v.as_object_mut().unwrap().remove("api_version");
        let s: Snapshot = serde_json::from_value(v).unwrap();
        assert_eq!(s.api_version, 1);
    }

    #[test]
    fn a_tenant_without_held_is_not_held() {
        let mut v = serde_json::to_value(TenantSnapshot::default()).unwrap();
        v.as_object_mut().unwrap().remove("held");
        let t: TenantSnapshot = serde_json::from_value(v).unwrap();
        assert_eq!(t.held, None);
    }
}
