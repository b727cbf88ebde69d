//! The recent past the dashboard draws: the host's and each tenant's figures over the last hour, in a ring of fixed size, taken from each published snapshot.
//!
//! One point per [`STEP_S`] seconds of wall time, at most [`POINTS`] of them ([`SPAN_S`], an
//! hour): a tick replaces the point of its slot, so the newest point is always the latest
//! snapshot's (the dashboard's last point is what `/v1/status` says) and a slot keeps the last
//! tick in it. Figures are kept as `f32` MiB (`NaN` where the snapshot has none: a figure the
//! kernel does not expose is not drawn, never drawn as 0). Memory: 48 bytes a tenant a point,
//! 34 KiB a tenant for the hour, whatever the tick; a tenant that leaves the snapshot leaves the
//! ring. Cost: a tick writes one point per tenant, O(tenants · log tenants).

use memtide_api::{Snapshot, TenantSnapshot};
use memtide_model::ReclamationState;
use std::collections::{BTreeMap, VecDeque};

/// Wall-clock seconds a point stands for.
pub const STEP_S: f64 = 5.0;

/// Points kept per series: an hour at [`STEP_S`].
pub const POINTS: usize = 720;

/// Seconds the ring covers.
pub const SPAN_S: f64 = STEP_S * POINTS as f64;

const MIB: f64 = (1u64 << 20) as f64;

/// The host at one point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostPoint {
    /// Unix time, seconds.
    pub at_s: f64,
    pub state: ReclamationState,
    pub free_mib: f32,
    pub budget_mib: f32,
    /// The tenants' allocations summed.
    pub allocated_mib: f32,
    pub swap_used_mib: f32,
    /// Memory on pages merged by page sharing (`NaN`: sharing off).
    pub shared_mib: f32,
}

/// A tenant at one point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TenantPoint {
    /// Unix time, seconds.
    pub at_s: f64,
    pub allocated_mib: f32,
    /// Its limit in force (`NaN`: none).
    pub limit_mib: f32,
    pub target_mib: f32,
    /// The lowest limit the rails allow it.
    pub floor_mib: f32,
    pub estimate_mib: f32,
    pub swap_mib: f32,
    pub refaults_per_s: f32,
    /// Its application's pool (`NaN`: no agent).
    pub pool_mib: f32,
    /// Its VM's balloon (`NaN`: not a VM).
    pub balloon_mib: f32,
}

/// The ring of the host's and the tenants' points.
#[derive(Clone, Debug, Default)]
pub struct History {
    host: VecDeque<HostPoint>,
    tenants: BTreeMap<String, VecDeque<TenantPoint>>,
}

fn mib(bytes: u64) -> f32 {
    (bytes as f64 / MIB) as f32
}

fn mib_or_nan(bytes: Option<u64>) -> f32 {
    bytes.map_or(f32::NAN, mib)
}

/// Puts `point` in its slot: replaces the last point when it is of the same slot, else
/// appends it and drops the oldest beyond [`POINTS`].
fn put<P: Copy>(ring: &mut VecDeque<P>, point: P, at: impl Fn(&P) -> f64) {
    let slot = |p: &P| (at(p) / STEP_S).floor();
    // A clock stepped back: what now lies in the future is dropped, so time order holds.
    while ring.back().is_some_and(|last| at(last) > at(&point)) {
        ring.pop_back();
    }
    match ring.back_mut() {
        Some(last) if slot(last) == slot(&point) => *last = point,
        _ => {
            ring.push_back(point);
            while ring.len() > POINTS {
                ring.pop_front();
            }
        }
    }
}

impl History {
    /// Takes in the snapshot published at Unix time `at_s`.
    pub fn record(&mut self, snapshot: &Snapshot, at_s: f64) {
        let h = &snapshot.host;
        let host = HostPoint {
            at_s,
            state: ReclamationState::ALL
                .into_iter()
                .find(|s| s.name() == h.state)
                .unwrap_or(ReclamationState::High),
            free_mib: mib(h.free_bytes),
            budget_mib: mib(h.budget_bytes),
            allocated_mib: mib(snapshot.tenants.iter().map(|t| t.allocated_bytes).sum()),
            swap_used_mib: mib(h.swap_total_bytes.saturating_sub(h.swap_free_bytes)),
            shared_mib: mib_or_nan(h.sharing.as_ref().map(|s| s.shared_bytes)),
        };
        put(&mut self.host, host, |p| p.at_s);
        self.tenants
            .retain(|name, _| snapshot.tenants.iter().any(|t| t.name == *name));
        for t in &snapshot.tenants {
            let point = tenant_point(t, at_s);
            // A tenant's name is copied once, when it first appears, not every tick.
            match self.tenants.get_mut(&t.name) {
                Some(ring) => put(ring, point, |p| p.at_s),
                None => {
                    self.tenants.insert(t.name.clone(), VecDeque::from([point]));
                }
            }
        }
    }

    /// The host's points, oldest first.
    pub fn host(&self) -> &VecDeque<HostPoint> {
        &self.host
    }

    /// `name`'s points, oldest first (none for a tenant not in the last snapshot).
    pub fn tenant(&self, name: &str) -> Option<&VecDeque<TenantPoint>> {
        self.tenants.get(name)
    }
}

fn tenant_point(t: &TenantSnapshot, at_s: f64) -> TenantPoint {
    TenantPoint {
        at_s,
        allocated_mib: mib(t.allocated_bytes),
        limit_mib: mib_or_nan(t.limit_bytes),
        target_mib: mib(t.target_bytes),
        floor_mib: mib(t.floor_bytes),
        estimate_mib: mib(t.active_estimate_bytes),
        swap_mib: mib_or_nan(t.swap_bytes),
        refaults_per_s: t.refaults_per_s.map_or(f32::NAN, |r| r as f32),
        pool_mib: mib_or_nan(t.app.as_ref().map(|a| a.pool_bytes)),
        balloon_mib: mib_or_nan(t.vm.as_ref().map(|v| v.balloon_bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_api::{AppSnapshot, HostSnapshot};

    fn snapshot(tenants: &[(&str, u64)], state: &str) -> Snapshot {
        Snapshot {
            host: HostSnapshot {
                state: state.to_string(),
                free_bytes: 100 << 20,
                budget_bytes: 500 << 20,
                ..HostSnapshot::default()
            },
            tenants: tenants
                .iter()
                .map(|&(name, allocated)| TenantSnapshot {
                    name: name.to_string(),
                    allocated_bytes: allocated,
                    ..TenantSnapshot::default()
                })
                .collect(),
            ..Snapshot::default()
        }
    }

    #[test]
    fn ticks_in_one_slot_keep_the_latest() {
        let mut h = History::default();
        h.record(&snapshot(&[("a", 1 << 20)], "high"), 1000.0);
        h.record(&snapshot(&[("a", 2 << 20)], "soft"), 1002.5);
        h.record(&snapshot(&[("a", 3 << 20)], "soft"), 1004.9);
        assert_eq!(h.host().len(), 1);
        let a = h.tenant("a").unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].allocated_mib, 3.0);
        assert_eq!(a[0].at_s, 1004.9);
        assert_eq!(h.host()[0].state, ReclamationState::Soft);
        h.record(&snapshot(&[("a", 4 << 20)], "soft"), 1005.0);
        assert_eq!(h.tenant("a").unwrap().len(), 2);
    }

    #[test]
    fn the_ring_keeps_an_hour_whatever_the_run_s_length() {
        let mut h = History::default();
        for i in 0..10 * POINTS {
            let t = i as f64 * STEP_S;
            h.record(&snapshot(&[("a", i as u64)], "high"), t);
        }
        assert_eq!(h.host().len(), POINTS);
        let a = h.tenant("a").unwrap();
        assert_eq!(a.len(), POINTS);
        assert_eq!(a.back().unwrap().at_s, (10 * POINTS - 1) as f64 * STEP_S);
        assert!(a.back().unwrap().at_s - a.front().unwrap().at_s < SPAN_S);
    }

    #[test]
    fn a_tenant_that_leaves_leaves_the_ring_and_missing_figures_are_nan() {
        let mut h = History::default();
        let mut s = snapshot(&[("a", 1 << 20), ("b", 1 << 20)], "high");
        s.tenants[1].app = Some(AppSnapshot {
            pool_bytes: 64 << 20,
            ..AppSnapshot::default()
        });
        h.record(&s, 10.0);
        let b = h.tenant("b").unwrap()[0];
        assert_eq!(b.pool_mib, 64.0);
        assert!(b.limit_mib.is_nan() && b.swap_mib.is_nan() && b.balloon_mib.is_nan());
        assert!(h.tenant("a").unwrap()[0].pool_mib.is_nan());
        assert_eq!(h.host()[0].allocated_mib, 2.0);
        h.record(&snapshot(&[("a", 1 << 20)], "high"), 20.0);
        assert!(h.tenant("b").is_none());
    }

    #[test]
    fn a_clock_stepped_back_keeps_time_order() {
        let mut h = History::default();
        h.record(&snapshot(&[("a", 1 << 20)], "high"), 100.0);
        h.record(&snapshot(&[("a", 2 << 20)], "high"), 110.0);
        h.record(&snapshot(&[("a", 3 << 20)], "high"), 50.0);
        let a = h.tenant("a").unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a.back().unwrap().allocated_mib, 3.0);
    }
}
