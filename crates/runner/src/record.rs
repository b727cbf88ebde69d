//! One record of a tick for every world, memory in bytes: what the simulator writes to timeline.csv and report.html and the daemon publishes (its API snapshot, `/metrics`, `memtide status`), built from the same observation and decision any world's tick has. MiB appear only where a record is presented.

use crate::sink::TickView;
use memtide_model::{
    BalloonLever, Bytes, DiskIo, Durability, HostSharing, HostSwapLever, IoRemapping, LimitLever,
    Mechanisms, Reason, ReclamationState, ScanRate, SharingLever, TenantId,
};

/// One tick: the decision taken at `time_s` and what the world measured over the tick.
#[derive(Clone, Debug, PartialEq)]
pub struct TickRecord {
    pub time_s: f64,
    pub state: ReclamationState,
    /// Machine memory, and what of it is free.
    pub machine: Bytes,
    pub free: Bytes,
    pub budget: Bytes,
    /// The host's swap space, and what of it is in use.
    pub host_swap_total: Bytes,
    pub host_swap_used: Bytes,
    /// Host memory pressure (PSI "some" avg10, percent), where the world measures it.
    pub pressure: Option<f64>,
    /// What page sharing saves across the host, and the scan rate decided, where the world
    /// shares pages.
    pub sharing: Option<HostSharing>,
    pub scan_rate: Option<ScanRate>,
    /// Hot I/O page remapping's lifetime counts, where the world models it.
    pub remapping: Option<IoRemapping>,
    pub rows: Vec<TenantRow>,
}

/// One tenant in one tick. Figures only some worlds know (a workload's true working set, its
/// throughput) are `None` elsewhere.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantRow {
    pub tenant: TenantId,
    /// Machine memory held when observed.
    pub allocated: Bytes,
    pub target: Bytes,
    pub active_estimate: Bytes,
    /// The workload's true working set (a simulated world knows it).
    pub working_set: Option<Bytes>,
    /// Operations per second over the tick.
    pub throughput: Option<f64>,
    /// Mean operation latency over the tick, in milliseconds.
    pub latency_ms: Option<f64>,
    pub swap_ins: Option<u64>,
    pub refaults: Option<u64>,
    pub blocked: bool,
    /// Anonymous memory and page cache resident in the tenant, where the world measures them.
    pub anon: Option<Bytes>,
    pub file: Option<Bytes>,
    /// Memory of the tenant in its own swap (a guest's swap device, a cgroup's swap).
    pub swapped: Option<Bytes>,
    /// Its levers' figures as the world reported them, each where the tenant has the lever:
    /// a figure a lever gains is in the record, and for the columns' table, with no more
    /// declarations.
    pub balloon: Option<BalloonLever>,
    pub host_swap: Option<HostSwapLever>,
    pub sharing: Option<SharingLever>,
    pub limit: Option<LimitLever>,
    /// Its disk I/O over the tick, where the world shares a disk among tenants.
    pub disk: Option<DiskIo>,
    /// Its database's durability settings and fsync rates, where its agent reports them
    /// (boxed: most tenants have none).
    pub durability: Option<Box<Durability>>,
    /// The mechanisms that act this tick, in the order they were chosen.
    pub mechanisms: Mechanisms,
    /// Why, kept as data: formatted only when written.
    pub reason: Reason,
}

impl TenantRow {
    /// Its balloon's size (zero without a balloon).
    pub fn balloon_size(&self) -> Bytes {
        self.balloon.map_or(Bytes::ZERO, |b| b.size.to_bytes())
    }

    /// Its memory in host swap (zero without host swap).
    pub fn host_swapped(&self) -> Bytes {
        self.host_swap.map_or(Bytes::ZERO, |h| h.swapped.to_bytes())
    }

    /// The limit in force on it (`None` without the limit lever, or at the kernel's `max`).
    pub fn limit_in_force(&self) -> Option<Bytes> {
        self.limit
            .and_then(|l| (!l.unlimited).then(|| l.limit.to_bytes()))
    }
}

impl TickRecord {
    /// Tenant `id`'s row.
    pub fn row(&self, id: TenantId) -> Option<&TenantRow> {
        self.rows.iter().find(|r| r.tenant == id)
    }

    /// The record of a tick from what every world reports: each observed tenant that has an
    /// action, with the observation's own counters.
    pub fn of<W>(t: &TickView<'_, W>) -> TickRecord {
        let rows = t
            .observation
            .tenants
            .iter()
            .filter_map(|o| {
                let action = t.decision.action(o.id)?;
                Some(TenantRow {
                    tenant: o.id,
                    allocated: o.allocated.to_bytes(),
                    target: action.target.to_bytes(),
                    active_estimate: action.active_estimate.to_bytes(),
                    working_set: None,
                    throughput: o.throughput,
                    latency_ms: o.latency_ms,
                    swap_ins: o.swap_ins,
                    refaults: o.refaults,
                    blocked: action.moves().blocked,
                    anon: o.anon.map(|p| p.to_bytes()),
                    file: o.file.map(|p| p.to_bytes()),
                    swapped: o.swapped.map(|p| p.to_bytes()),
                    balloon: o.levers.balloon,
                    host_swap: o.levers.host_swap,
                    sharing: o.levers.sharing,
                    limit: o.levers.limit,
                    disk: o.levers.disk.as_deref().copied(),
                    durability: o
                        .levers
                        .app_balloon
                        .as_ref()
                        .and_then(|a| a.durability.clone()),
                    mechanisms: action.mechanisms,
                    reason: action.reason,
                })
            })
            .collect();
        TickRecord {
            time_s: t.at.as_secs_f64(),
            state: t.decision.memory.state,
            machine: t.observation.machine.to_bytes(),
            free: t.observation.free.to_bytes(),
            budget: t.decision.memory.budget.to_bytes(),
            host_swap_total: t.observation.host_swap_total.to_bytes(),
            host_swap_used: t.observation.host_swap_used.to_bytes(),
            pressure: t.observation.pressure,
            sharing: t.observation.sharing,
            scan_rate: t.decision.sharing,
            remapping: t.observation.remapping,
            rows,
        }
    }
}
