//! What one VM did in one tick (throughput, latency, memory events), and the lifetime counters the per-tick figures are taken from.

use memtide_model::Pages;

/// One VM's figures for the last tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TickStats {
    /// Page accesses completed.
    pub accesses: u64,
    /// Operations completed (`accesses / accesses_per_op`, fractional).
    pub ops: f64,
    /// Operations per second of simulated time.
    pub throughput: f64,
    /// Busy time per operation, in milliseconds (0 when no operation completed).
    pub latency_ms: f64,
    /// The workload's true working set.
    pub working_set: Pages,
    /// Guest swap-ins.
    pub swap_ins: u64,
    /// Guest swap-outs.
    pub swap_outs: u64,
    /// Page-cache refaults (misses on blocks evicted before).
    pub refaults: u64,
    /// Page-cache misses (disk reads), refaults included.
    pub disk_reads: u64,
    /// Pages of this VM read back from host swap.
    pub host_swap_ins: u64,
    /// Pages of this VM written to host swap (by the controller's decision or to make room
    /// for any VM's fault).
    pub host_swap_outs: u64,
    /// Guest swap-outs of pages the host had swapped (host swap-in first).
    pub double_pagings: u64,
    /// Pool pages the guest swapped back in only for the application to fill them from disk
    /// (its pool paged out behind its back, then reused).
    pub app_double_pagings: u64,
    /// Accesses charged a minor fault: the first touch of an anonymous page (zero-fill) or
    /// of a page the host had not backed yet.
    pub minor_faults: u64,
    /// Accesses that could not proceed (no frame and no host swap; or nothing the guest
    /// could free): the VM lost the rest of the tick.
    pub stalls: u64,
    /// Pages the balloon took and gave back.
    pub balloon_inflated: u64,
    pub balloon_deflated: u64,
    /// The tenant was blocked (ESX low state) and ran no accesses.
    pub blocked: bool,
}

/// Lifetime event counts of one VM; per-tick figures are differences of two of these.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub swap_ins: u64,
    pub swap_outs: u64,
    pub refaults: u64,
    pub disk_reads: u64,
    pub host_swap_ins: u64,
    pub host_swap_outs: u64,
    pub double_pagings: u64,
    pub app_double_pagings: u64,
    pub minor_faults: u64,
    pub stalls: u64,
}

impl Totals {
    /// Counts since `earlier`, written into `stats`.
    pub fn delta_into(&self, earlier: &Totals, stats: &mut TickStats) {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        stats.swap_ins = d(self.swap_ins, earlier.swap_ins);
        stats.swap_outs = d(self.swap_outs, earlier.swap_outs);
        stats.refaults = d(self.refaults, earlier.refaults);
        stats.disk_reads = d(self.disk_reads, earlier.disk_reads);
        stats.host_swap_ins = d(self.host_swap_ins, earlier.host_swap_ins);
        stats.host_swap_outs = d(self.host_swap_outs, earlier.host_swap_outs);
        stats.double_pagings = d(self.double_pagings, earlier.double_pagings);
        stats.app_double_pagings = d(self.app_double_pagings, earlier.app_double_pagings);
        stats.minor_faults = d(self.minor_faults, earlier.minor_faults);
        stats.stalls = d(self.stalls, earlier.stalls);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_tick_counts_are_differences_of_totals() {
        let before = Totals {
            swap_ins: 3,
            refaults: 1,
            ..Totals::default()
        };
        let after = Totals {
            swap_ins: 10,
            refaults: 1,
            stalls: 2,
            ..Totals::default()
        };
        let mut s = TickStats::default();
        after.delta_into(&before, &mut s);
        assert_eq!((s.swap_ins, s.refaults, s.stalls), (7, 0, 2));
    }
}
