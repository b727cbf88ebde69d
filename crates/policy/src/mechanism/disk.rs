//! Disk weights (Lai et al., issue 14): each tenant's share of a disk the tenants share is a work-conserving proportional-share weight, raised while the tenant sees more I/O latency than its target.
//!
//! **The paper's rule.** Hard per-tenant IOPS caps do worse than sharing: a capped tenant
//! cannot use the disk's idle time, and a cap protects nobody once the disk is idle. So memtide
//! never caps by policy (a cap exists only where a tenant's configuration asks for one); it
//! sets weights, which divide the disk only while tenants contend for it (BFQ, `io.weight`,
//! the simulator's fair queue).
//!
//! **Latency targets.** A tenant's weight is its configured `weight` shifted by a power of two,
//! `boost` (0 to [`MAX_BOOST`]): each observation in which its mean I/O latency is above its
//! target raises the boost by one; each in which it is below half the target lowers it by one
//! (between the two it holds, so the weight does not flap around the target); an observation
//! with no I/O holds it too (no evidence). The weight stays within [`DiskSpec::WEIGHTS`].
//! Raising one tenant's weight lowers everyone else's share only while they contend, and by
//! at most 2^`MAX_BOOST` against their own configured weights.
//!
//! **Guarantees.** No tenant's weight leaves the range both cgroup versions take; without a
//! target the weight is the configured one, always; a tenant that stops missing its target
//! returns to its configured weight within `MAX_BOOST` comfortable observations.
//!
//! **Cost.** O(1) per tenant per step, one byte of state.

use memtide_model::{DiskIo, DiskNote, DiskSpec};

/// The largest power of two a weight is raised by: 8x.
pub const MAX_BOOST: u8 = 3;

/// What the planner remembers of a tenant between observations.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskWatch {
    boost: u8,
}

/// The weight `spec` gives a tenant that did `io` since the last observation.
pub fn plan(spec: &DiskSpec, io: &DiskIo, watch: &mut DiskWatch) -> DiskNote {
    let latency = io.latency_us.filter(|_| io.ops > 0);
    if let (Some(target), Some(seen)) = (spec.latency_target_us, latency) {
        let target = f64::from(target);
        if seen > target {
            watch.boost = (watch.boost + 1).min(MAX_BOOST);
        } else if seen < target / 2.0 {
            watch.boost = watch.boost.saturating_sub(1);
        }
    } else if spec.latency_target_us.is_none() {
        watch.boost = 0;
    }
    let (lo, hi) = (*DiskSpec::WEIGHTS.start(), *DiskSpec::WEIGHTS.end());
    let weight = (u64::from(spec.weight) << watch.boost).clamp(u64::from(lo), u64::from(hi));
    DiskNote {
        weight: weight as u32,
        was: io.weight,
        base: spec.weight,
        boost: watch.boost,
        latency_us: latency.map(|us| us as f32),
        target_us: spec.latency_target_us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(latency_us: f64, weight: u32) -> DiskIo {
        DiskIo {
            weight: Some(weight),
            ops: 100,
            latency_us: Some(latency_us),
            ..DiskIo::default()
        }
    }

    const SPEC: DiskSpec = DiskSpec {
        weight: 100,
        latency_target_us: Some(10_000),
    };

    #[test]
    fn a_tenant_without_a_target_keeps_its_configured_weight() {
        let spec = DiskSpec {
            weight: 250,
            latency_target_us: None,
        };
        let mut w = DiskWatch::default();
        let n = plan(&spec, &io(1e6, 100), &mut w);
        assert_eq!((n.weight, n.new_weight()), (250, Some(250)));
        let n = plan(&spec, &io(1e6, 250), &mut w);
        assert_eq!((n.weight, n.new_weight()), (250, None));
    }

    #[test]
    fn a_missed_target_doubles_the_weight_up_to_eight_times() {
        let mut w = DiskWatch::default();
        let weights: Vec<u32> = (0..5)
            .map(|_| plan(&SPEC, &io(25_000.0, 100), &mut w).weight)
            .collect();
        assert_eq!(weights, vec![200, 400, 800, 800, 800]);
    }

    #[test]
    fn the_weight_holds_near_the_target_and_falls_back_when_comfortable() {
        let mut w = DiskWatch::default();
        for _ in 0..3 {
            plan(&SPEC, &io(25_000.0, 100), &mut w);
        }
        // Between half the target and the target: held.
        assert_eq!(plan(&SPEC, &io(7_000.0, 800), &mut w).weight, 800);
        // No I/O: held.
        let idle = DiskIo {
            weight: Some(800),
            ..DiskIo::default()
        };
        assert_eq!(plan(&SPEC, &idle, &mut w).weight, 800);
        let back: Vec<u32> = (0..4)
            .map(|_| plan(&SPEC, &io(2_000.0, 800), &mut w).weight)
            .collect();
        assert_eq!(back, vec![400, 200, 100, 100]);
    }

    #[test]
    fn weights_stay_within_the_range_both_cgroup_versions_take() {
        let spec = DiskSpec {
            weight: 900,
            latency_target_us: Some(1),
        };
        let mut w = DiskWatch::default();
        assert_eq!(plan(&spec, &io(50.0, 900), &mut w).weight, 1000);
    }
}
