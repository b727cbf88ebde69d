//! The scenario file as written: one serde struct per table, unknown fields refused, sizes (`"512M"`) and times (`"10m"`) in their one syntax (`memtide_config::{Size, Duration}`).
//!
//! Tables whose fields depend on their `kind` (estimators, workloads, events) stay TOML here
//! and are read by kind in `build/` with one struct per kind below (serde's tagged enums
//! buffer the table, and an error inside would lose its path). Checks between fields and the
//! defaults that are not `None` are in `build/`. The field reference is `docs/scenarios.md`.

use memtide_config::quotas::{QuotasDoc, SloDoc};
use memtide_config::{Duration, Size};
use memtide_sim::app::Behaviour;
use memtide_sim::cost::CostModel;
use memtide_sim::workload::{Pace, Skew};
use serde::Deserialize;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a scenario")]
pub(crate) struct ScenarioDoc {
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) description: String,
    /// The run's length: whole seconds.
    pub(crate) duration: Duration,
    pub(crate) seed: Option<u64>,
    #[serde(default)]
    pub(crate) baseline: bool,
    pub(crate) convergence: Option<ConvergenceDoc>,
    pub(crate) headline: Option<HeadlineDoc>,
    pub(crate) host: HostDoc,
    pub(crate) policy: Option<PolicyDoc>,
    pub(crate) cost: Option<CostModel>,
    pub(crate) sharing: Option<SharingDoc>,
    pub(crate) io_remap: Option<IoRemapDoc>,
    pub(crate) disk: Option<DiskDoc>,
    /// The density benchmark's set-up: its tenants come from here, not `tenants`.
    pub(crate) density: Option<DensityDoc>,
    #[serde(default)]
    pub(crate) tenants: Vec<TenantDoc>,
    /// Each read by its `kind`: [`SetTaxRateDoc`], [`SetWorkloadDoc`], [`StopTenantDoc`],
    /// [`SetTenantDoc`].
    #[serde(default)]
    pub(crate) events: Vec<toml::Value>,
    #[serde(default)]
    pub(crate) variants: Vec<VariantDoc>,
}

/// `[density]`: N key-value servers, the mix repeated, under one policy (issue 31).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the [density] table")]
pub(crate) struct DensityDoc {
    /// `static`, `kernel`, `sampling` or `tws` (each variant sets one).
    pub(crate) policy: String,
    /// N: tenant i is `mix[i % len]`.
    pub(crate) tenants: usize,
    pub(crate) warmup: Duration,
    pub(crate) window: Duration,
    pub(crate) start: usize,
    pub(crate) step: usize,
    pub(crate) max: usize,
    /// Each server's own memory beside its dataset (its process, never reclaimed).
    pub(crate) server_memory: Size,
    /// A GET's work per page it reads, besides stalls, in µs.
    pub(crate) cpu_us_per_access: Option<f64>,
    pub(crate) slo: DensitySloDoc,
    pub(crate) mix: Vec<MixDoc>,
}

/// `[density.slo]`, as bench/density.toml's `[slo]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the [density.slo] table")]
pub(crate) struct DensitySloDoc {
    pub(crate) p99: Duration,
    pub(crate) wake: Duration,
    pub(crate) min_requests: u64,
}

/// One kind of tenant of the density mix, as bench/density.toml's `[[mix]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[density.mix]] table")]
pub(crate) struct MixDoc {
    pub(crate) server: memtide_demand::ServerKind,
    pub(crate) keys: u64,
    pub(crate) value_bytes: Size,
    /// Bytes an item takes beside its value, as a fraction of the value.
    pub(crate) item_overhead: f64,
    pub(crate) demand: String,
}

/// `[headline]`: the result the scenario exists to show, printed first.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the [headline] table")]
pub(crate) struct HeadlineDoc {
    pub(crate) text: String,
    /// A tenant figure by name (`memtide_scenario::Figure`).
    pub(crate) figure: String,
    /// `[start, end]` windows of the run; none: the whole run.
    #[serde(default)]
    pub(crate) windows: Vec<[Duration; 2]>,
    /// The tenants shown; none: every tenant.
    #[serde(default)]
    pub(crate) tenants: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the convergence table")]
pub(crate) struct ConvergenceDoc {
    pub(crate) low: Option<f64>,
    pub(crate) high: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the [host] table")]
pub(crate) struct HostDoc {
    /// Machine memory.
    pub(crate) memory: Size,
    pub(crate) host_swap: Option<Size>,
}

/// Content-based page sharing on the host (ESX §4): scan rates in pages per second.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the [sharing] table")]
pub(crate) struct SharingDoc {
    pub(crate) idle_rate: Option<u64>,
    pub(crate) pressed_rate: Option<u64>,
    pub(crate) per_vm_rate: Option<u64>,
}

/// Hot I/O page remapping on the host (ESX §7).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the [io_remap] table")]
pub(crate) struct IoRemapDoc {
    /// Machine memory below the DMA line.
    pub(crate) low_memory: Size,
    /// Copies of a page before it is remapped.
    pub(crate) threshold: Option<u32>,
    /// `false`: count copies, never remap (the paper's "before").
    pub(crate) remap: Option<bool>,
}

/// The host's one shared disk (Lai et al.): its timing, write cache and queue depth.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the [disk] table")]
pub(crate) struct DiskDoc {
    pub(crate) seek_us: Option<f64>,
    pub(crate) near_us: Option<f64>,
    pub(crate) transfer_mb_s: Option<f64>,
    pub(crate) command_us: Option<f64>,
    pub(crate) flush_us: Option<f64>,
    pub(crate) cache: Option<Size>,
    pub(crate) queue_depth: Option<u32>,
}

/// A tenant's n-tier application on the disk (`kind = "ntier"`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a tenant's disk table of kind ntier")]
pub(crate) struct NtierDoc {
    pub(crate) weight: Option<u32>,
    pub(crate) cap_iops: Option<u32>,
    pub(crate) latency_target: Option<Duration>,
    pub(crate) users: u32,
    pub(crate) growth: Option<GrowthDoc>,
    pub(crate) think: Option<Duration>,
    pub(crate) cpu: Option<Duration>,
    pub(crate) reads_per_request: f64,
    pub(crate) read_size: Option<Size>,
    pub(crate) write_share: Option<f64>,
    pub(crate) db: Option<DbDoc>,
}

/// Users joining an n-tier application over time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a growth table")]
pub(crate) struct GrowthDoc {
    pub(crate) add: u32,
    pub(crate) every: Duration,
    pub(crate) until: u32,
}

/// The database settings that shape its I/O (MySQL/InnoDB names).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a db table")]
pub(crate) struct DbDoc {
    pub(crate) log_buffer: Option<Size>,
    pub(crate) redo: Option<Size>,
    pub(crate) sync_binlog: Option<u32>,
    pub(crate) binlog: Option<Size>,
    pub(crate) pages_dirtied: Option<f64>,
    pub(crate) page_size: Option<Size>,
    pub(crate) io_capacity: Option<u32>,
    pub(crate) write_io_threads: Option<u16>,
}

/// Filebench-like writer threads on the disk (`kind = "fsync"`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a tenant's disk table of kind fsync")]
pub(crate) struct FsyncDoc {
    pub(crate) weight: Option<u32>,
    pub(crate) cap_iops: Option<u32>,
    pub(crate) latency_target: Option<Duration>,
    pub(crate) threads: u16,
    pub(crate) write: Size,
    pub(crate) gap: Option<Duration>,
    pub(crate) stagger: Option<Duration>,
}

/// A tenant's I/O: its buffer pages and how often it transfers from them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a tenant's io table")]
pub(crate) struct IoDoc {
    pub(crate) buffers: Size,
    pub(crate) transfers_per_sec: f64,
}

/// What a tenant's pages hold, as fractions of its pages (the rest unique).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a tenant's content table")]
pub(crate) struct ContentDoc {
    pub(crate) image: Option<String>,
    pub(crate) zero: Option<f64>,
    pub(crate) common: Option<f64>,
    pub(crate) duplicate: Option<f64>,
    pub(crate) duplicate_copies: Option<u32>,
    pub(crate) common_files: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the [policy] table")]
pub(crate) struct PolicyDoc {
    pub(crate) tax_rate: Option<memtide_model::TaxRate>,
    pub(crate) budget: Option<Size>,
    /// Host swap bandwidth: bytes paged out per second.
    pub(crate) host_swap_per_s: Option<Size>,
    pub(crate) balloon_stall_ticks: Option<u32>,
    pub(crate) thresholds: Option<ThresholdsDoc>,
    /// Gemini's cache quotas.
    pub(crate) cache: Option<QuotasDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the thresholds table")]
pub(crate) struct ThresholdsDoc {
    pub(crate) high: Option<f64>,
    pub(crate) soft: Option<f64>,
    pub(crate) hard: Option<f64>,
    pub(crate) low: Option<f64>,
    pub(crate) hysteresis: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[tenants]] table")]
pub(crate) struct TenantDoc {
    pub(crate) name: String,
    /// `"vm"` (the default) or `"container"`.
    pub(crate) kind: Option<KindDoc>,
    pub(crate) min: Option<Size>,
    /// The guest's memory size.
    pub(crate) max: Size,
    pub(crate) shares: Option<u64>,
    pub(crate) overhead: Option<Size>,
    pub(crate) kernel: Option<Size>,
    pub(crate) guest_swap: Option<Size>,
    pub(crate) initial: Option<Size>,
    pub(crate) start: Option<Duration>,
    pub(crate) stop: Option<Duration>,
    pub(crate) cap_at_estimate: Option<bool>,
    pub(crate) slo: Option<SloDoc>,
    /// Read by its `kind` (default `sampling`): [`SamplingDoc`], [`TwsDoc`], [`CommittedDoc`].
    pub(crate) estimator: Option<toml::Value>,
    pub(crate) balloon: Option<BalloonDoc>,
    pub(crate) content: Option<ContentDoc>,
    pub(crate) io: Option<IoDoc>,
    /// Read by its `kind`: [`NtierDoc`], [`FsyncDoc`].
    pub(crate) disk: Option<toml::Value>,
    /// Read by its `kind`: [`IdleDoc`], [`ToucherDoc`], [`FileServerDoc`], [`CpuJobDoc`],
    /// [`OltpDoc`], [`WebDoc`], [`CacheDoc`], [`DatabaseDoc`], [`JvmDoc`].
    pub(crate) workload: toml::Value,
}

/// What a tenant is: which levers move its memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum KindDoc {
    Vm,
    Container,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "the balloon table")]
pub(crate) struct BalloonDoc {
    pub(crate) enabled: Option<bool>,
    /// Bytes the driver moves per second.
    pub(crate) rate_per_s: Option<Size>,
    pub(crate) limit: Option<Size>,
    /// Time from power-on until the driver loads.
    pub(crate) starts_after: Option<Duration>,
}

/// `kind = "sampling"`: ESX statistical sampling.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a sampling estimator table")]
pub(crate) struct SamplingDoc {
    pub(crate) sample_pages: Option<u32>,
    pub(crate) period: Option<Duration>,
    pub(crate) slow_gain: Option<f64>,
    pub(crate) fast_gain: Option<f64>,
    pub(crate) headroom: Option<f64>,
    pub(crate) wake: Option<bool>,
}

/// `kind = "tws"`: working-set probing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a tws estimator table")]
pub(crate) struct TwsDoc {
    pub(crate) epoch: Option<Duration>,
    pub(crate) fast_step: Option<f64>,
    pub(crate) slow_step: Option<f64>,
    pub(crate) cool_down: Option<Duration>,
    pub(crate) committed_change: Option<f64>,
}

/// `kind = "committed"`: self-ballooning on Committed_AS; no parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a committed estimator table")]
pub(crate) struct CommittedDoc {}

/// Declares a workload kind's table: its own fields, then the fields of its [`Pace`] that every
/// kind has. (serde's `flatten` would refuse `deny_unknown_fields`, and with it the list of
/// the table's fields that a misspelt field's message gives.)
macro_rules! workload_doc {
    ($(#[$meta:meta])* struct $name:ident { $($(#[$field_meta:meta])* $field:ident: $ty:ty,)* }) => {
        #[derive(Debug, Deserialize)]
        $(#[$meta])*
        pub(crate) struct $name {
            $($(#[$field_meta])* pub(crate) $field: $ty,)*
            pub(crate) cpu_us_per_access: Option<f64>,
            pub(crate) accesses_per_op: Option<u32>,
            pub(crate) max_accesses_per_s: Option<f64>,
        }

        impl $name {
            /// How fast the workload works.
            pub(crate) fn pace(&self) -> Pace {
                Pace {
                    cpu_us_per_access: self.cpu_us_per_access,
                    accesses_per_op: self.accesses_per_op,
                    max_accesses_per_s: self.max_accesses_per_s,
                }
            }
        }
    };
}

workload_doc! {
    /// `kind = "idle"`.
    #[serde(deny_unknown_fields, expecting = "an idle workload table")]
    struct IdleDoc {
        resident: Option<Size>,
        background: Option<Size>,
    }
}

workload_doc! {
    /// `kind = "toucher"`.
    #[serde(deny_unknown_fields, expecting = "a toucher workload table")]
    struct ToucherDoc {
        phases: Vec<PhaseDoc>,
        allocated: Option<Size>,
        skew: Option<Skew>,
    }
}

/// From `at` on, a toucher touches `working_set`.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a phase such as { at = \"0s\", working_set = \"100M\" }"
)]
pub(crate) struct PhaseDoc {
    pub(crate) at: Duration,
    pub(crate) working_set: Size,
}

workload_doc! {
    /// `kind = "file_server"`.
    #[serde(deny_unknown_fields, expecting = "a file_server workload table")]
    struct FileServerDoc {
        file_set: Size,
        anon: Option<Size>,
        skew: Option<Skew>,
    }
}

workload_doc! {
    /// `kind = "cpu_job"`.
    #[serde(deny_unknown_fields, expecting = "a cpu_job workload table")]
    struct CpuJobDoc {
        allocated: Size,
        working_set: Size,
        /// Later changes of the working set (each at most `allocated`).
        #[serde(default)]
        phases: Vec<PhaseDoc>,
        skew: Option<Skew>,
        input: Option<Size>,
        input_fraction: Option<f64>,
    }
}

workload_doc! {
    /// `kind = "oltp"`.
    #[serde(deny_unknown_fields, expecting = "an oltp workload table")]
    struct OltpDoc {
        data: Size,
        buffer_pool: Option<Size>,
        anon: Option<Size>,
        file_fraction: Option<f64>,
        skew: Option<Skew>,
    }
}

workload_doc! {
    /// `kind = "web"`.
    #[serde(deny_unknown_fields, expecting = "a web workload table")]
    struct WebDoc {
        anon: Option<Size>,
        file: Option<Size>,
    }
}

workload_doc! {
    /// `kind = "cache"`.
    #[serde(deny_unknown_fields, expecting = "a cache workload table")]
    struct CacheDoc {
        items: Size,
        pool: Size,
        min_pool: Option<Size>,
        shrink_s_per_gib: Option<f64>,
        grow_s_per_gib: Option<f64>,
        agent: Option<AgentDoc>,
        jobs: Option<Vec<JobDoc>>,
    }
}

workload_doc! {
    /// `kind = "database"`.
    #[serde(deny_unknown_fields, expecting = "a database workload table")]
    struct DatabaseDoc {
        data: Size,
        pool: Size,
        min_pool: Option<Size>,
        heap: Option<Size>,
        work_ratio: Option<f64>,
        work_share: Option<f64>,
        scan_share: Option<f64>,
        scan: Option<Size>,
        skew: Option<Skew>,
        shrink_s_per_gib: Option<f64>,
        grow_s_per_gib: Option<f64>,
        agent: Option<AgentDoc>,
        jobs: Option<Vec<JobDoc>>,
    }
}

workload_doc! {
    /// `kind = "jvm"`.
    #[serde(deny_unknown_fields, expecting = "a jvm workload table")]
    struct JvmDoc {
        heap: Size,
        old: Size,
        live: Size,
        survivors: Size,
        min_eden: Size,
        young_live: Size,
        alloc_share: Option<f64>,
        promote: Option<f64>,
        shrink_s_per_gib: Option<f64>,
        grow_s_per_gib: Option<f64>,
        agent: Option<AgentDoc>,
        jobs: Option<Vec<JobDoc>>,
    }
}

/// Work given to an application with a pool: from `at` on, `ops` operations.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a job such as { at = \"600s\", ops = 1000 }"
)]
pub(crate) struct JobDoc {
    pub(crate) at: Duration,
    pub(crate) ops: u64,
}

/// The balloon agent linked into an application with a pool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an agent table")]
pub(crate) struct AgentDoc {
    /// False: the application runs without its agent (only the OS moves its memory).
    pub(crate) enabled: Option<bool>,
    pub(crate) behaviour: Option<Behaviour>,
    pub(crate) silent_from: Option<Duration>,
    pub(crate) granule: Option<Size>,
    /// The agent reports its pool's miss-ratio curve of each window this long.
    pub(crate) curve_window: Option<Duration>,
}

/// `kind = "set_tax_rate"`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a set_tax_rate event")]
pub(crate) struct SetTaxRateDoc {
    pub(crate) at: Duration,
    pub(crate) tax_rate: memtide_model::TaxRate,
}

/// `kind = "set_workload"`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a set_workload event")]
pub(crate) struct SetWorkloadDoc {
    pub(crate) at: Duration,
    pub(crate) tenant: String,
    /// Read by its `kind`, as a tenant's.
    pub(crate) workload: toml::Value,
}

/// `kind = "stop_tenant"`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a stop_tenant event")]
pub(crate) struct StopTenantDoc {
    pub(crate) at: Duration,
    pub(crate) tenant: String,
}

/// `kind = "set_tenant"`: new min, max and/or shares.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a set_tenant event")]
pub(crate) struct SetTenantDoc {
    pub(crate) at: Duration,
    pub(crate) tenant: String,
    pub(crate) min: Option<Size>,
    pub(crate) max: Option<Size>,
    pub(crate) shares: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[variants]] table")]
pub(crate) struct VariantDoc {
    pub(crate) name: String,
    /// `--set` overrides, applied to the file in order.
    #[serde(default)]
    pub(crate) set: Vec<String>,
}
