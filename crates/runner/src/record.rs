//! One record of a tick for every world, memory in bytes: what the simulator writes to timeline.csv and report.html, built from the same observation and decision any world's tick has. MiB appear only where a record is presented.

use crate::sink::TickView;
use memtide_model::{Bytes, Reason, ReclamationState, TenantId};

/// One tick: the decision taken at `time_s` and what the world measured over the tick.
#[derive(Clone, Debug, PartialEq)]
pub struct TickRecord {
    pub time_s: f64,
    pub state: ReclamationState,
    pub free: Bytes,
    pub budget: Bytes,
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
    pub balloon: Bytes,
    pub host_swapped: Bytes,
    /// Operations per second over the tick.
    pub throughput: Option<f64>,
    /// Mean operation latency over the tick, in milliseconds.
    pub latency_ms: Option<f64>,
    pub swap_ins: Option<u64>,
    pub refaults: Option<u64>,
    pub host_swap_ins: Option<u64>,
    pub blocked: bool,
    /// Why, kept as data: formatted only when written.
    pub reason: Reason,
}

impl TickRecord {
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
                    balloon: o.levers.balloon_size().to_bytes(),
                    host_swapped: o.levers.host_swapped().to_bytes(),
                    throughput: o.throughput,
                    latency_ms: o.latency_ms,
                    swap_ins: o.swap_ins,
                    refaults: o.refaults,
                    host_swap_ins: o.levers.host_swap.and_then(|h| h.swap_ins),
                    blocked: action.moves().blocked,
                    reason: action.reason,
                })
            })
            .collect();
        TickRecord {
            time_s: t.at.as_secs_f64(),
            state: t.decision.memory.state,
            free: t.observation.free.to_bytes(),
            budget: t.decision.memory.budget.to_bytes(),
            rows,
        }
    }
}
