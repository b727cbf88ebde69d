//! What a world reports each tick: machine memory and, per tenant, allocation, balloon, swap and event counters.

use crate::mechanism::{HostSharing, IoRemapping, Levers};
use crate::tenant::TenantId;
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One observation of the whole host, taken at the start of a tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostObservation {
    /// Time since the world started.
    pub now: Duration,
    /// Machine memory (RAM) of the host.
    pub machine: Pages,
    /// Free machine memory (not allocated to any tenant nor used as overhead).
    pub free: Pages,
    /// Size of the host swap device (0 when there is none).
    pub host_swap_total: Pages,
    /// Host swap in use.
    pub host_swap_used: Pages,
    /// Host memory pressure (PSI "some" avg10, percent), where the world measures it.
    pub pressure: Option<f64>,
    /// What page sharing saves across the host, where the world shares pages.
    pub sharing: Option<HostSharing>,
    /// Hot I/O page remapping's counts, where the world models it.
    pub remapping: Option<IoRemapping>,
    /// Running tenants, in ascending id order.
    pub tenants: Vec<TenantObservation>,
}

/// One tenant as the world sees it. Counters are deltas since the previous observation;
/// `None` means the world cannot measure that quantity (never read as zero). Build one with
/// `..TenantObservation::new(id, allocated)` (or `..Default::default()`), so a new figure is
/// added here alone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantObservation {
    pub id: TenantId,
    /// Machine memory the tenant holds (excluding its overhead).
    pub allocated: Pages,
    /// Memory the tenant's OS has promised (Linux `Committed_AS`).
    pub committed: Option<Pages>,
    /// Anonymous memory resident in the tenant.
    pub anon: Option<Pages>,
    /// Page cache resident in the tenant.
    pub file: Option<Pages>,
    /// Memory of the tenant in its own swap (a guest's swap device, a cgroup's swap).
    pub swapped: Option<Pages>,
    /// Guest swap-ins since the last observation.
    pub swap_ins: Option<u64>,
    /// Page-cache refaults since the last observation.
    pub refaults: Option<u64>,
    /// ESX sampling counts, where the world samples pages.
    pub sample: Option<SampleCounts>,
    /// Operations per second over the last tick, where known.
    pub throughput: Option<f64>,
    /// Mean operation latency over the last tick in milliseconds, where known.
    pub latency_ms: Option<f64>,
    /// What can move the tenant's memory, and where each lever stands: its capabilities.
    pub levers: Levers,
}

/// ESX-style sampling counts: `sampled` random pages were chosen at the start of period
/// `period`; `touched` of them have been accessed so far. `completed` carries the final
/// counts of the previous period on the first observation after it ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleCounts {
    pub period: u64,
    pub sampled: u32,
    pub touched: u32,
    pub completed: Option<CompletedSample>,
}

/// Final counts of one finished sampling period.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletedSample {
    pub sampled: u32,
    pub touched: u32,
}

impl TenantObservation {
    /// An observation with only the allocation known: a starting point for tests and worlds.
    pub fn new(id: TenantId, allocated: Pages) -> TenantObservation {
        TenantObservation {
            id,
            allocated,
            ..TenantObservation::default()
        }
    }
}
