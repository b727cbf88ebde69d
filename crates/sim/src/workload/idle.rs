//! The idle workload: a guest that boots (zeroing `resident_mb` once) and then only keeps a
//! little background activity alive (ESX's idle Windows VM, Fig. 7).

use super::pick::{Mix, Picker};
use super::validate::Check;
use super::{Plan, Skew, WorkloadError};
use memtide_model::Pages;

/// Background accesses per second (open loop) unless `max_accesses_per_s` says otherwise.
pub(super) const DEFAULT_RATE: f64 = 500.0;
/// One access is one operation.
pub(super) const DEFAULT_ACCESSES_PER_OP: u32 = 1;
/// Share of background accesses that write.
pub(super) const WRITE_FRACTION: f64 = 0.25;

/// Anonymous region `max(resident, background)`; the sweep writes `resident` once; then
/// uniform accesses over the `background` prefix. Working set: the background.
pub(super) fn plan(
    check: Check,
    resident_mb: f64,
    background_mb: f64,
) -> Result<Plan, WorkloadError> {
    let resident = check.size_mb("resident_mb", resident_mb)?;
    let background = check.size_mb("background_mb", background_mb)?;
    let mix = Mix::new(
        Picker::new(background, Skew::Uniform),
        Picker::Empty,
        0.0,
        WRITE_FRACTION,
        Pages(u64::from(background)),
    );
    Ok(Plan {
        anon_pages: resident.max(background),
        file_pages: 0,
        sweep: resident,
        phases: vec![(0.0, mix)],
        default_rate: Some(DEFAULT_RATE),
        default_accesses_per_op: DEFAULT_ACCESSES_PER_OP,
    })
}

#[cfg(test)]
mod tests {
    use crate::cost::CostModel;
    use crate::rng::SimRng;
    use crate::workload::{Access, Pace, Workload, WorkloadConfig};
    use memtide_model::Pages;
    use std::time::Duration;

    fn idle(resident_mb: f64, background_mb: f64) -> Workload {
        let config = WorkloadConfig::Idle {
            resident_mb,
            background_mb,
            pace: Pace::default(),
        };
        Workload::new(&config, &CostModel::default()).unwrap()
    }

    #[test]
    fn boot_sweep_writes_resident_once_then_only_background() {
        let mut w = idle(8.0, 1.0);
        let mut rng = SimRng::new(1);
        assert_eq!(w.anon_pages(), 2048);
        assert_eq!(w.file_pages(), 0);
        assert_eq!(w.working_set(), Pages(256));
        assert!(w.initialising());
        // First tick: the whole sweep plus 500 background accesses.
        assert_eq!(w.demand(Duration::from_secs(1)), Some(2048 + 500));
        let mut out = Vec::new();
        w.fill(&mut rng, &mut out, 2048 + 500);
        for (i, a) in out[..2048].iter().enumerate() {
            assert_eq!(
                *a,
                Access::Anon {
                    page: i as u32,
                    write: true
                }
            );
        }
        for a in &out[2048..] {
            assert!(
                matches!(a, Access::Anon { page, .. } if *page < 256),
                "{a:?}"
            );
        }
        assert!(!w.initialising());
        w.advance(Duration::from_secs(1));
        assert_eq!(w.demand(Duration::from_secs(1)), Some(500));
        out.clear();
        w.fill(&mut rng, &mut out, 10_000);
        assert!(out
            .iter()
            .all(|a| matches!(a, Access::Anon { page, .. } if *page < 256)));
    }

    #[test]
    fn background_larger_than_resident_widens_the_region() {
        let w = idle(1.0, 2.0);
        assert_eq!(w.anon_pages(), 512);
        assert_eq!(w.sweep_remaining(), 256);
    }

    #[test]
    fn fully_idle_guest_wants_nothing_after_boot() {
        let mut w = idle(1.0, 0.0);
        let mut rng = SimRng::new(2);
        assert_eq!(w.demand(Duration::from_secs(1)), Some(256));
        let mut out = Vec::new();
        w.fill(&mut rng, &mut out, 256);
        assert_eq!(out.len(), 256);
        assert_eq!(w.demand(Duration::from_secs(1)), Some(0));
        assert_eq!(w.working_set(), Pages::ZERO);
    }
}
