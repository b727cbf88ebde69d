//! The file_server workload (dbench-like, ESX Figs. 2 and 7): mostly page-cache reads over a
//! file set, plus a small anonymous part; its speed depends on how much of the file set
//! the guest can cache.

use super::pick::{Mix, Picker};
use super::validate::Check;
use super::{Plan, Skew, WorkloadError};
use memtide_model::Pages;

/// Share of accesses that go to the file set.
pub(super) const FILE_FRACTION: f64 = 0.85;
/// Share of anonymous accesses that write.
pub(super) const WRITE_FRACTION: f64 = 0.5;
/// Page accesses per dbench-style operation (open/read/write/close of a small file).
pub(super) const DEFAULT_ACCESSES_PER_OP: u32 = 10;

/// Anonymous region `anon_mb` (uniform), file set `file_set_mb` (`skew`, default uniform);
/// 85% of accesses to the file set. Closed loop by default. Working set: both regions.
pub(super) fn plan(
    check: Check,
    file_set_mb: f64,
    anon_mb: f64,
    skew: Skew,
) -> Result<Plan, WorkloadError> {
    let file = check.size_mb("file_set_mb", file_set_mb)?;
    let anon = check.size_mb("anon_mb", anon_mb)?;
    let skew = check.skew("skew", skew)?;
    let mix = Mix::new(
        Picker::new(anon, Skew::Uniform),
        Picker::new(file, skew),
        FILE_FRACTION,
        WRITE_FRACTION,
        Pages(u64::from(anon) + u64::from(file)),
    );
    Ok(Plan {
        anon_pages: anon,
        file_pages: file,
        sweep: 0,
        phases: vec![(0.0, mix)],
        default_rate: None,
        default_accesses_per_op: DEFAULT_ACCESSES_PER_OP,
    })
}

#[cfg(test)]
mod tests {
    use crate::cost::CostModel;
    use crate::rng::SimRng;
    use crate::workload::{Access, Pace, Skew, Workload, WorkloadConfig};
    use memtide_model::Pages;
    use std::time::Duration;

    fn server(file_set_mb: f64, anon_mb: f64, skew: Skew) -> Workload {
        let config = WorkloadConfig::FileServer {
            file_set_mb,
            anon_mb,
            skew,
            pace: Pace::default(),
        };
        Workload::new(&config, &CostModel::default()).unwrap()
    }

    #[test]
    fn accesses_stay_in_range_and_are_mostly_file() {
        for skew in [Skew::Uniform, Skew::Zipf { theta: 0.9 }] {
            let mut w = server(100.0, 16.0, skew);
            let mut rng = SimRng::new(1);
            assert_eq!((w.anon_pages(), w.file_pages()), (4096, 25_600));
            assert_eq!(w.working_set(), Pages(4096 + 25_600));
            assert_eq!(w.demand(Duration::from_secs(1)), None);
            assert_eq!(w.accesses_per_op(), 10);
            let mut out = Vec::new();
            w.fill(&mut rng, &mut out, 100_000);
            assert_eq!(out.len(), 100_000);
            let mut files = 0;
            for a in &out {
                match a {
                    Access::File { block } => {
                        files += 1;
                        assert!(*block < 25_600);
                    }
                    Access::Anon { page, .. } => assert!(*page < 4096),
                    other => panic!("{other:?}"),
                }
            }
            assert!((84_000..86_000).contains(&files), "{files}");
        }
    }

    #[test]
    fn without_anon_part_all_accesses_are_file() {
        let mut w = server(10.0, 0.0, Skew::Uniform);
        let mut out = Vec::new();
        w.fill(&mut SimRng::new(2), &mut out, 1000);
        assert!(out
            .iter()
            .all(|a| matches!(a, Access::File { block } if *block < 2560)));
    }

    #[test]
    fn bad_sizes_are_rejected_naming_the_field() {
        let config = WorkloadConfig::FileServer {
            file_set_mb: f64::INFINITY,
            anon_mb: 1.0,
            skew: Skew::Uniform,
            pace: Pace::default(),
        };
        assert_eq!(
            Workload::new(&config, &CostModel::default())
                .unwrap_err()
                .to_string(),
            "workload file_server: file_set_mb = inf must be a finite number"
        );
    }
}
