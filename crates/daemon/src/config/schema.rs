//! The daemon's configuration file as written where it is shaped unlike the config: the whole file (the sections are the config's own types) and the tenants' tables (cgroup, command, vm, unit, container or domain; an app's fields by its kind), unknown keys refused; `build.rs` checks and converts them.

use super::{
    ApiSection, BalloonSection, DaemonSection, EnginesSection, EstimatorChoice, HostSection,
    IoSection, PolicySection, RailsSection, SharingSection,
};
use memtide_config::quotas::{QuotasDoc, SloDoc};
use memtide_config::{Duration, Size};
use serde::Deserialize;

/// The whole file. An absent table takes every default.
#[derive(Debug, Default, Deserialize)]
#[serde(
    default,
    deny_unknown_fields,
    expecting = "a table of [daemon], [host], [policy], [rails], [balloon], [sharing], [cache], [io], [engines], [api] and [[tenant]]"
)]
pub(super) struct FileDoc {
    pub(super) daemon: DaemonSection,
    pub(super) host: HostSection,
    pub(super) policy: PolicySection,
    pub(super) rails: RailsSection,
    pub(super) balloon: BalloonSection,
    pub(super) sharing: SharingSection,
    pub(super) cache: Option<QuotasDoc>,
    pub(super) io: IoSection,
    pub(super) engines: EnginesSection,
    pub(super) api: ApiSection,
    /// `[[tenant]]`, one table per tenant.
    pub(super) tenant: Vec<TenantDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[tenant]] table")]
pub(super) struct TenantDoc {
    pub(super) name: String,
    pub(super) cgroup: Option<String>,
    pub(super) command: Option<Vec<String>>,
    pub(super) min: Option<Size>,
    pub(super) max: Size,
    pub(super) shares: Option<u64>,
    pub(super) estimator: Option<EstimatorChoice>,
    pub(super) cap_at_estimate: Option<bool>,
    pub(super) isolated: Option<bool>,
    pub(super) app: Option<AppDoc>,
    pub(super) slo: Option<SloDoc>,
    pub(super) io: Option<TenantIoDoc>,
    pub(super) vm: Option<VmDoc>,
    pub(super) unit: Option<String>,
    pub(super) slice: Option<String>,
    pub(super) container: Option<String>,
    pub(super) engine: Option<String>,
    pub(super) domain: Option<String>,
    pub(super) uri: Option<String>,
}

/// `[tenant.vm]`: a QEMU VM memtide launches (kernel or disk, memory, …) or adopts by its QMP
/// socket (`qmp`, and nothing else).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [tenant.vm] table")]
pub(super) struct VmDoc {
    pub(super) qmp: Option<String>,
    pub(super) qemu: Option<String>,
    pub(super) kernel: Option<String>,
    pub(super) initrd: Option<String>,
    pub(super) disk: Option<String>,
    pub(super) memory: Option<Size>,
    pub(super) cpus: Option<u32>,
    pub(super) append: Option<String>,
    pub(super) args: Option<Vec<String>>,
    pub(super) kvm: Option<bool>,
}

/// `[tenant.io]`: the tenant's weight on the shared disk, its latency target and its caps.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [tenant.io] table")]
pub(super) struct TenantIoDoc {
    pub(super) weight: Option<u64>,
    pub(super) latency_target: Option<Duration>,
    pub(super) read_iops: Option<u64>,
    pub(super) write_iops: Option<u64>,
    pub(super) read_bps: Option<Size>,
    pub(super) write_bps: Option<Size>,
}

/// `[tenant.app]`: the tenant's server, reached through `memtide-adapter`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [tenant.app] table")]
pub(super) struct AppDoc {
    pub(super) kind: super::AppKind,
    pub(super) url: Option<String>,
    pub(super) user: Option<String>,
    pub(super) password_file: Option<String>,
    pub(super) collector: Option<super::Collector>,
    pub(super) min: Size,
    pub(super) max: Size,
    pub(super) granule: Option<Size>,
}
