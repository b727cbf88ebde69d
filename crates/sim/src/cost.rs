//! The sim's stated cost model: what each kind of memory access costs in time (see docs/cost-model.md).

use serde::{Deserialize, Serialize};

/// Time costs of memory events, in microseconds of the tenant's time. A tenant runs one
/// tick (1 s) per tick; the accesses it completes in that time give its throughput.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostModel {
    /// First touch of a page the host has not backed yet (zero-fill, minor fault).
    pub minor_fault_us: f64,
    /// Guest reads an anonymous page back from its own swap device.
    pub guest_swap_in_us: f64,
    /// Guest writes an anonymous page to its own swap device (amortised, asynchronous).
    pub guest_swap_out_us: f64,
    /// Page-cache miss: the guest reads a file block from disk (refaults cost the same).
    pub disk_read_us: f64,
    /// The host reads a page of the tenant back from host swap.
    pub host_swap_in_us: f64,
    /// The host writes a victim page to host swap.
    pub host_swap_out_us: f64,
    /// Default work per page access when a workload does not say (`cpu_us_per_access`).
    pub cpu_us_per_access: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            minor_fault_us: 1.0,
            guest_swap_in_us: 2000.0,
            guest_swap_out_us: 200.0,
            disk_read_us: 2000.0,
            host_swap_in_us: 2500.0,
            host_swap_out_us: 200.0,
            cpu_us_per_access: 10.0,
        }
    }
}
