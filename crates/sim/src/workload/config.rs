//! Workload parameters as the simulator takes them, with their defaults (scenario files have their own form, read by memtide-scenario).

use super::Skew;
use crate::app::AgentConfig;
use serde::{Deserialize, Serialize};

/// One phase of a toucher: from `at_s` on, it touches `working_set_mb`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TouchPhase {
    pub at_s: f64,
    pub working_set_mb: f64,
}

/// Work an application with a pool is given: from `at_s` on, `ops` operations (after any given
/// before them are done).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub at_s: f64,
    pub ops: u64,
}

/// How fast a workload works, the options every kind has (each `None`: the kind's default).
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pace {
    /// Work per page access besides memory stalls, in µs (default: the cost model's).
    #[serde(default)]
    pub cpu_us_per_access: Option<f64>,
    /// Page accesses that make one operation, for throughput and latency.
    #[serde(default)]
    pub accesses_per_op: Option<u32>,
    /// Open-loop demand cap; `None`: run as fast as it can (or the kind's own rate).
    #[serde(default)]
    pub max_accesses_per_s: Option<f64>,
}

/// The workload a simulated guest runs. `kind` selects the variant in TOML; every variant has
/// its [`Pace`] (a `pace` table in TOML).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkloadConfig {
    /// A guest that booted and then does almost nothing: `resident_mb` touched once at
    /// start, `background_mb` touched lightly forever.
    Idle {
        #[serde(default)]
        resident_mb: f64,
        #[serde(default = "default_idle_background_mb")]
        background_mb: f64,
        #[serde(default)]
        pace: Pace,
    },
    /// ESX's toucher: repeatedly touches a working set whose size changes by phase, inside
    /// an anonymous region of `allocated_mb` (default: the largest phase).
    Toucher {
        phases: Vec<TouchPhase>,
        #[serde(default)]
        allocated_mb: Option<f64>,
        #[serde(default)]
        skew: Skew,
        #[serde(default)]
        pace: Pace,
    },
    /// dbench-like file server: mostly page-cache reads/writes over `file_set_mb`, plus a
    /// small anonymous part; memory-intensive through its page cache.
    FileServer {
        file_set_mb: f64,
        #[serde(default = "default_file_server_anon_mb")]
        anon_mb: f64,
        #[serde(default)]
        skew: Skew,
        #[serde(default)]
        pace: Pace,
    },
    /// SPEC CPU-like job: allocates and initialises `allocated_mb`, then only touches
    /// `working_set_mb` of it (allocated-but-idle memory), and reads `input_mb` of input
    /// files through the page cache with `input_fraction` of its accesses.
    CpuJob {
        allocated_mb: f64,
        working_set_mb: f64,
        #[serde(default)]
        skew: Skew,
        /// Input files read through the page cache (not in Committed_AS).
        #[serde(default)]
        input_mb: f64,
        /// Share of accesses that read the input files.
        #[serde(default = "default_cpu_job_input_fraction")]
        input_fraction: f64,
        /// Later phases: from `at_s` on, the job works in `working_set_mb` of its allocation
        /// (SPEC CPU's demand changes as it moves between inputs).
        #[serde(default)]
        phases: Vec<TouchPhase>,
        #[serde(default)]
        pace: Pace,
    },
    /// OLTP-like (sysbench on MySQL): skewed reads of a `data_mb` table (`file_fraction` of
    /// accesses) through the database's own `buffer_pool_mb` pool (anonymous, committed) and,
    /// for the pool's misses, the page cache; plus an anonymous heap; I/O heavy.
    Oltp {
        data_mb: f64,
        #[serde(default)]
        buffer_pool_mb: f64,
        #[serde(default = "default_oltp_anon_mb")]
        anon_mb: f64,
        #[serde(default = "default_oltp_file_fraction")]
        file_fraction: f64,
        #[serde(default = "default_oltp_skew")]
        skew: Skew,
        #[serde(default)]
        pace: Pace,
    },
    /// Tiny web-like service (SPECweb banking): small anonymous and file working sets.
    Web {
        #[serde(default = "default_web_anon_mb")]
        anon_mb: f64,
        #[serde(default = "default_web_file_mb")]
        file_mb: f64,
        #[serde(default)]
        pace: Pace,
    },

    /// A key-value cache (memcached-like) whose pool of `pool_mb` holds some of its
    /// `items_mb` of items, read uniformly; a miss fetches the item from its backend. The
    /// pool is an application pool its agent can resize, down to `min_pool_mb`, at
    /// `shrink_s_per_gib` and `grow_s_per_gib` (default: ALB Table 2's InnoDB).
    Cache {
        items_mb: f64,
        pool_mb: f64,
        #[serde(default)]
        min_pool_mb: f64,
        #[serde(default = "default_innodb_shrink_s_per_gib")]
        shrink_s_per_gib: f64,
        #[serde(default = "default_innodb_grow_s_per_gib")]
        grow_s_per_gib: f64,
        /// The balloon agent linked into the cache (none: only the OS can take its memory).
        #[serde(default)]
        agent: Option<AgentConfig>,
        /// Its work (none: it works all the time).
        #[serde(default)]
        jobs: Option<Vec<Job>>,
        #[serde(default)]
        pace: Pace,
    },
    /// A database (MySQL/InnoDB) whose buffer pool of `pool_mb` holds some of its `data_mb`
    /// pages with its own LRU; a query mix of index lookups (`skew`) and scans of `scan_mb`
    /// (`scan_share` of its page reads); joins and sorts given `work_ratio` of the pool it
    /// believes it has, touched by `work_share` of its accesses; `heap_mb` of other memory.
    /// The pool is an application pool its agent can resize, down to `min_pool_mb`.
    Database {
        data_mb: f64,
        pool_mb: f64,
        #[serde(default)]
        min_pool_mb: f64,
        #[serde(default = "default_database_heap_mb")]
        heap_mb: f64,
        #[serde(default = "default_database_work_ratio")]
        work_ratio: f64,
        #[serde(default = "default_database_work_share")]
        work_share: f64,
        #[serde(default = "default_database_scan_share")]
        scan_share: f64,
        #[serde(default = "default_database_scan_mb")]
        scan_mb: f64,
        #[serde(default = "default_database_skew")]
        skew: Skew,
        #[serde(default = "default_innodb_shrink_s_per_gib")]
        shrink_s_per_gib: f64,
        #[serde(default = "default_innodb_grow_s_per_gib")]
        grow_s_per_gib: f64,
        #[serde(default)]
        agent: Option<AgentConfig>,
        #[serde(default)]
        jobs: Option<Vec<Job>>,
        #[serde(default)]
        pace: Pace,
    },
    /// A JVM (OpenJDK) with a generational heap of `heap_mb`: an old generation of `old_mb`
    /// holding `live_mb` of live data, survivor spaces of `survivors_mb`, and eden, the rest;
    /// `alloc_share` of its accesses allocate in eden, the others read the live data; a minor
    /// collection copies `young_live_mb` and promotes `promote` of it, a full one marks the
    /// live data. The heap is an application pool its agent resizes by a balloon in eden
    /// (down to `min_eden_mb`), after a full collection.
    Jvm {
        heap_mb: f64,
        old_mb: f64,
        live_mb: f64,
        survivors_mb: f64,
        min_eden_mb: f64,
        young_live_mb: f64,
        #[serde(default = "default_jvm_alloc_share")]
        alloc_share: f64,
        #[serde(default = "default_jvm_promote")]
        promote: f64,
        #[serde(default = "default_jvm_shrink_s_per_gib")]
        shrink_s_per_gib: f64,
        #[serde(default = "default_jvm_grow_s_per_gib")]
        grow_s_per_gib: f64,
        #[serde(default)]
        agent: Option<AgentConfig>,
        #[serde(default)]
        jobs: Option<Vec<Job>>,
        #[serde(default)]
        pace: Pace,
    },
    /// The density benchmark's key-value server (Redis, memcached): `keys` items of
    /// `value_bytes` and `item_overhead` more each, filled at start, then GETs over its keys,
    /// uniformly, when the `demand` pattern laid out from `seed` says they are due, from
    /// `start_s` for `length_s` seconds, judged in windows of `window_s` (see `workload::kv`
    /// and `crate::slo`).
    Kv {
        keys: u64,
        value_bytes: u64,
        item_overhead: f64,
        demand: String,
        seed: u64,
        start_s: f64,
        length_s: f64,
        window_s: f64,
        #[serde(default)]
        pace: Pace,
    },
}

/// Defaults of the optional workload parameters (MiB and fractions), for scenarios.
pub mod defaults {
    use super::Skew;

    pub const IDLE_BACKGROUND_MB: f64 = 4.0;
    pub const FILE_SERVER_ANON_MB: f64 = 16.0;
    pub const CPU_JOB_INPUT_FRACTION: f64 = 0.1;
    pub const OLTP_ANON_MB: f64 = 32.0;
    pub const OLTP_FILE_FRACTION: f64 = 0.8;
    pub const OLTP_SKEW: Skew = Skew::Zipf { theta: 0.9 };
    pub const WEB_ANON_MB: f64 = 16.0;
    pub const WEB_FILE_MB: f64 = 16.0;
    pub use crate::workload::database::defaults::{
        HEAP_MB as DATABASE_HEAP_MB, SCAN_MB as DATABASE_SCAN_MB,
        SCAN_SHARE as DATABASE_SCAN_SHARE, SKEW as DATABASE_SKEW,
        WORK_RATIO as DATABASE_WORK_RATIO, WORK_SHARE as DATABASE_WORK_SHARE,
    };
    pub use crate::workload::jvm::defaults::{
        ALLOC_SHARE as JVM_ALLOC_SHARE, PROMOTE as JVM_PROMOTE,
    };
    pub use crate::workload::jvm::{JVM_GROW_S_PER_GIB, JVM_SHRINK_S_PER_GIB};
    pub use crate::workload::pool::{INNODB_GROW_S_PER_GIB, INNODB_SHRINK_S_PER_GIB};
}

fn default_idle_background_mb() -> f64 {
    defaults::IDLE_BACKGROUND_MB
}
fn default_file_server_anon_mb() -> f64 {
    defaults::FILE_SERVER_ANON_MB
}
fn default_cpu_job_input_fraction() -> f64 {
    defaults::CPU_JOB_INPUT_FRACTION
}
fn default_oltp_anon_mb() -> f64 {
    defaults::OLTP_ANON_MB
}
fn default_oltp_file_fraction() -> f64 {
    defaults::OLTP_FILE_FRACTION
}
fn default_oltp_skew() -> Skew {
    defaults::OLTP_SKEW
}
fn default_web_anon_mb() -> f64 {
    defaults::WEB_ANON_MB
}
fn default_web_file_mb() -> f64 {
    defaults::WEB_FILE_MB
}
fn default_database_heap_mb() -> f64 {
    defaults::DATABASE_HEAP_MB
}
fn default_database_work_ratio() -> f64 {
    defaults::DATABASE_WORK_RATIO
}
fn default_database_work_share() -> f64 {
    defaults::DATABASE_WORK_SHARE
}
fn default_database_scan_share() -> f64 {
    defaults::DATABASE_SCAN_SHARE
}
fn default_database_scan_mb() -> f64 {
    defaults::DATABASE_SCAN_MB
}
fn default_database_skew() -> Skew {
    defaults::DATABASE_SKEW
}
fn default_jvm_alloc_share() -> f64 {
    defaults::JVM_ALLOC_SHARE
}
fn default_jvm_promote() -> f64 {
    defaults::JVM_PROMOTE
}
fn default_jvm_shrink_s_per_gib() -> f64 {
    defaults::JVM_SHRINK_S_PER_GIB
}
fn default_jvm_grow_s_per_gib() -> f64 {
    defaults::JVM_GROW_S_PER_GIB
}
fn default_innodb_shrink_s_per_gib() -> f64 {
    defaults::INNODB_SHRINK_S_PER_GIB
}
fn default_innodb_grow_s_per_gib() -> f64 {
    defaults::INNODB_GROW_S_PER_GIB
}

impl WorkloadConfig {
    /// The `kind` name as written in scenarios.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadConfig::Idle { .. } => "idle",
            WorkloadConfig::Toucher { .. } => "toucher",
            WorkloadConfig::FileServer { .. } => "file_server",
            WorkloadConfig::CpuJob { .. } => "cpu_job",
            WorkloadConfig::Oltp { .. } => "oltp",
            WorkloadConfig::Web { .. } => "web",
            WorkloadConfig::Cache { .. } => "cache",
            WorkloadConfig::Database { .. } => "database",
            WorkloadConfig::Jvm { .. } => "jvm",
            WorkloadConfig::Kv { .. } => "kv",
        }
    }

    /// How fast it works.
    pub fn pace(&self) -> &Pace {
        match self {
            WorkloadConfig::Idle { pace, .. }
            | WorkloadConfig::Toucher { pace, .. }
            | WorkloadConfig::FileServer { pace, .. }
            | WorkloadConfig::CpuJob { pace, .. }
            | WorkloadConfig::Oltp { pace, .. }
            | WorkloadConfig::Web { pace, .. }
            | WorkloadConfig::Cache { pace, .. }
            | WorkloadConfig::Database { pace, .. }
            | WorkloadConfig::Jvm { pace, .. }
            | WorkloadConfig::Kv { pace, .. } => pace,
        }
    }

    /// The balloon agent linked into the application, for kinds with an application pool.
    pub fn agent(&self) -> Option<&AgentConfig> {
        match self {
            WorkloadConfig::Cache { agent, .. }
            | WorkloadConfig::Database { agent, .. }
            | WorkloadConfig::Jvm { agent, .. } => agent.as_ref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Holder {
        workload: WorkloadConfig,
    }

    #[test]
    fn toucher_parses_from_toml_with_defaults() {
        let h: Holder = toml::from_str(
            "[workload]\nkind = \"toucher\"\nphases = [{ at_s = 0, working_set_mb = 50 }]\n",
        )
        .unwrap();
        assert!(
            matches!(h.workload, WorkloadConfig::Toucher { ref phases, skew: Skew::Uniform, .. } if phases.len() == 1)
        );
    }

    #[test]
    fn unknown_workload_field_is_rejected() {
        let r: Result<Holder, _> = toml::from_str("[workload]\nkind = \"idle\"\nbogus = 1\n");
        assert!(r.is_err());
    }

    #[test]
    fn unknown_workload_kind_is_rejected() {
        let r: Result<Holder, _> = toml::from_str("[workload]\nkind = \"nope\"\n");
        assert!(r.is_err());
    }
}
