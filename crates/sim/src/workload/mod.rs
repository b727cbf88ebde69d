//! Workloads that drive a simulated guest: each produces a stream of page accesses (anonymous or page-cache).

use serde::{Deserialize, Serialize};

/// One access by a workload, in the workload's own address space.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anonymous (heap/stack) page `page` of the workload's anonymous region.
    Anon { page: u32, write: bool },
    /// Block `block` of the workload's file set, read through the guest page cache.
    File { block: u32 },
}

/// Access skew over a region.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Skew {
    #[default]
    Uniform,
    /// Zipf with exponent `theta` (> 0): page rank r is touched with probability ~ 1/r^theta.
    Zipf { theta: f64 },
}

pub mod config;

pub use config::{TouchPhase, WorkloadConfig};
