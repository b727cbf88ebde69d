//! The web workload (SPECweb banking, TWS Table 1): a small service with tiny anonymous and
//! file working sets and a modest open-loop request rate.

use super::pick::{Mix, Picker};
use super::validate::Check;
use super::{Plan, Skew, WorkloadError};
use memtide_model::Pages;

/// Accesses per second (open loop) unless `max_accesses_per_s` says otherwise.
pub(super) const DEFAULT_RATE: f64 = 20_000.0;
/// Share of accesses that read served files through the page cache.
pub(super) const FILE_FRACTION: f64 = 0.5;
/// Share of anonymous accesses that write.
pub(super) const WRITE_FRACTION: f64 = 0.3;
/// Page accesses per request.
pub(super) const DEFAULT_ACCESSES_PER_OP: u32 = 10;

/// Anonymous region `anon_mb`, file set `file_mb`, both uniform, half the accesses each;
/// open loop at 20 000 accesses/s. Working set: both regions.
pub(super) fn plan(check: Check, anon_mb: f64, file_mb: f64) -> Result<Plan, WorkloadError> {
    let anon = check.size_mb("anon_mb", anon_mb)?;
    let file = check.size_mb("file_mb", file_mb)?;
    let mix = Mix::new(
        Picker::new(anon, Skew::Uniform),
        Picker::new(file, Skew::Uniform),
        FILE_FRACTION,
        WRITE_FRACTION,
        Pages(u64::from(anon) + u64::from(file)),
    );
    Ok(Plan {
        anon_pages: anon,
        file_pages: file,
        sweep: 0,
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

    fn web(anon_mb: f64, file_mb: f64, max_accesses_per_s: Option<f64>) -> Workload {
        let config = WorkloadConfig::Web {
            anon_mb,
            file_mb,
            pace: Pace {
                max_accesses_per_s,
                ..Pace::default()
            },
        };
        Workload::new(&config, &CostModel::default()).unwrap()
    }

    #[test]
    fn open_loop_with_tiny_working_set_in_range() {
        let mut w = web(16.0, 16.0, None);
        assert_eq!(w.working_set(), Pages(32 * 256));
        assert_eq!(w.demand(Duration::from_secs(1)), Some(20_000));
        let mut out = Vec::new();
        w.fill(&mut SimRng::new(1), &mut out, 20_000);
        let files = out
            .iter()
            .filter(|a| matches!(a, Access::File { .. }))
            .count();
        assert!((9_500..10_500).contains(&files), "{files}");
        assert!(out.iter().all(|a| match a {
            Access::File { block } => *block < 4096,
            Access::Anon { page, .. } => *page < 4096,
            Access::Fill { .. } | Access::Collect { .. } => false,
        }));
    }

    #[test]
    fn fractional_rates_add_up_over_ticks() {
        let mut w = web(1.0, 1.0, Some(2.5));
        let tick = Duration::from_millis(100);
        let mut total = 0;
        for i in 0..40u64 {
            w.advance(tick * i as u32);
            total += w.demand(tick).unwrap();
        }
        assert_eq!(total, 10); // 4 s at 2.5/s
    }
}
