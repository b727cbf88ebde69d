//! The daemon's configuration file as written: one serde struct per table, unknown keys refused, sizes and durations in their one syntax (`memtide_config::{Size, Duration}`); `build.rs` checks and converts it, `render.rs` writes a config back through the same structs.

use super::{EstimatorChoice, IoScheduler, LogFormat, Reclaim};
use memtide_config::quotas::{QuotasDoc, SloDoc};
use memtide_config::{Duration, Size};
use serde::{Deserialize, Serialize};

/// The whole file. An absent table takes every default.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table of [daemon], [host], [policy], [rails], [balloon], [sharing], [cache], [io] and [[tenant]]"
)]
pub(super) struct FileDoc {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) daemon: Option<DaemonDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) host: Option<HostDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) policy: Option<PolicyDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) rails: Option<RailsDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) balloon: Option<BalloonDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) sharing: Option<SharingDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cache: Option<QuotasDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) io: Option<IoDoc>,
    /// `[[tenant]]`, one table per tenant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) tenant: Vec<TenantDoc>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "the [daemon] table")]
pub(super) struct DaemonDoc {
    pub(super) tick: Option<Duration>,
    pub(super) listen: Option<String>,
    pub(super) listen_public: Option<bool>,
    pub(super) state_file: Option<String>,
    pub(super) dry_run: Option<bool>,
    pub(super) log_format: Option<LogFormat>,
    pub(super) decisions_kept: Option<u64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "the [host] table")]
pub(super) struct HostDoc {
    pub(super) proc_root: Option<String>,
    pub(super) parent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) budget: Option<Size>,
    pub(super) reserve: Option<Size>,
    pub(super) write_timeout: Option<Duration>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "the [policy] table")]
pub(super) struct PolicyDoc {
    pub(super) tax_rate: Option<memtide_model::TaxRate>,
    pub(super) sampling_period: Option<Duration>,
    pub(super) reclaim: Option<Reclaim>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "the [rails] table")]
pub(super) struct RailsDoc {
    pub(super) shrink_step: Option<f64>,
    pub(super) floor_margin: Option<Size>,
    pub(super) backoff_refaults_per_s: Option<f64>,
    pub(super) backoff_pressure: Option<f64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "the [balloon] table")]
pub(super) struct BalloonDoc {
    pub(super) enabled: Option<bool>,
    pub(super) socket: Option<String>,
    /// Permission bits as an octal string, e.g. `"0660"`.
    pub(super) mode: Option<String>,
    pub(super) stats_interval: Option<Duration>,
    pub(super) dead_after: Option<Duration>,
    pub(super) max_agents: Option<u64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "the [sharing] table")]
pub(super) struct SharingDoc {
    pub(super) enabled: Option<bool>,
    pub(super) idle_rate: Option<u64>,
    pub(super) pressed_rate: Option<u64>,
    pub(super) cpu_budget: Option<f64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "the [io] table")]
pub(super) struct IoDoc {
    pub(super) enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) device: Option<String>,
    pub(super) scheduler: Option<IoScheduler>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a [[tenant]] table")]
pub(super) struct TenantDoc {
    pub(super) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cgroup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) command: Option<Vec<String>>,
    pub(super) min: Option<Size>,
    pub(super) max: Size,
    pub(super) shares: Option<u64>,
    pub(super) estimator: Option<EstimatorChoice>,
    pub(super) cap_at_estimate: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) isolated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) app: Option<AppDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) slo: Option<SloDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) io: Option<TenantIoDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) vm: Option<VmDoc>,
}

/// `[tenant.vm]`: a QEMU VM memtide launches (kernel or disk, memory, …) or adopts by its QMP
/// socket (`qmp`, and nothing else).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a [tenant.vm] table")]
pub(super) struct VmDoc {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) qmp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) qemu: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) kernel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) initrd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) disk: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) memory: Option<Size>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cpus: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) append: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) args: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) kvm: Option<bool>,
}

/// `[tenant.io]`: the tenant's weight on the shared disk, its latency target and its caps.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a [tenant.io] table")]
pub(super) struct TenantIoDoc {
    pub(super) weight: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) latency_target: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) read_iops: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) write_iops: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) read_bps: Option<Size>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) write_bps: Option<Size>,
}

/// `[tenant.app]`: the tenant's server, reached through `memtide-adapter`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a [tenant.app] table")]
pub(super) struct AppDoc {
    pub(super) kind: super::AppKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) password_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) collector: Option<super::Collector>,
    pub(super) min: Size,
    pub(super) max: Size,
    pub(super) granule: Option<Size>,
}
