//! The cpu_job workload (SPEC CPU-like, TWS Table 1): initialises all the memory it allocates
//! once, then works in a smaller working set, leaving the rest allocated but idle; the working
//! set may change in phases (SPEC CPU 401 moves between inputs, and the paper's Fig. 2 shows its
//! demand jump at 320, 460 and 630 s), while committed memory stays what was allocated.

use super::config::TouchPhase;
use super::pick::{Mix, Picker};
use super::validate::Check;
use super::{Plan, Skew, WorkloadError};
use memtide_model::Pages;

/// Share of steady-state accesses that write.
pub(super) const WRITE_FRACTION: f64 = 0.3;
/// Page accesses per unit of work (throughput is work units per second).
pub(super) const DEFAULT_ACCESSES_PER_OP: u32 = 100;

/// The sizes of a cpu_job.
pub(super) struct Sizes<'a> {
    pub allocated_mb: f64,
    pub working_set_mb: f64,
    pub input_mb: f64,
    pub input_fraction: f64,
    /// Later working sets, by time.
    pub phases: &'a [TouchPhase],
}

/// Anonymous region `allocated_mb`, written once in order (initialisation); then accesses
/// over the `working_set_mb` prefix with `skew`, and `input_fraction` of them uniformly over
/// `input_mb` of input files through the page cache; from each of `phases` on, the prefix is
/// that phase's working set. Closed loop by default. Working set: the phase's + `input_mb`.
pub(super) fn plan(check: Check, sizes: Sizes, skew: Skew) -> Result<Plan, WorkloadError> {
    let Sizes {
        allocated_mb,
        working_set_mb,
        input_mb,
        input_fraction,
        phases,
    } = sizes;
    let allocated = check.size_mb("allocated_mb", allocated_mb)?;
    let ws = check.size_mb("working_set_mb", working_set_mb)?;
    let input = check.size_mb("input_mb", input_mb)?;
    let input_fraction = if input == 0 {
        0.0
    } else {
        check.fraction("input_fraction", input_fraction)?
    };
    if ws > allocated {
        return Err(check.error(
            "working_set_mb",
            working_set_mb,
            format!("<= allocated_mb = {allocated_mb}"),
        ));
    }
    let skew = check.skew("skew", skew)?;
    let mix = |ws: u32| {
        Mix::new(
            Picker::new(ws, skew),
            Picker::new(input, Skew::Uniform),
            input_fraction,
            WRITE_FRACTION,
            Pages(u64::from(ws) + u64::from(input)),
        )
    };
    let mut mixes = vec![(0.0, mix(ws))];
    for (i, (at_s, ws)) in check.phases(phases, Some(0.0))?.into_iter().enumerate() {
        if ws > allocated {
            return Err(check.error(
                &format!("phases[{i}].working_set_mb"),
                phases[i].working_set_mb,
                format!("<= allocated_mb = {allocated_mb}"),
            ));
        }
        mixes.push((at_s, mix(ws)));
    }
    Ok(Plan {
        anon_pages: allocated,
        file_pages: input,
        sweep: allocated,
        phases: mixes,
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

    fn job(allocated_mb: f64, working_set_mb: f64, skew: Skew) -> Workload {
        let config = WorkloadConfig::CpuJob {
            allocated_mb,
            working_set_mb,
            skew,
            input_mb: 0.0,
            input_fraction: 0.1,
            phases: Vec::new(),
            pace: Pace::default(),
        };
        Workload::new(&config, &CostModel::default()).unwrap()
    }

    #[test]
    fn a_later_phase_moves_the_working_set_within_the_allocation() {
        let config = WorkloadConfig::CpuJob {
            allocated_mb: 4.0,
            working_set_mb: 1.0,
            skew: Skew::Uniform,
            input_mb: 0.0,
            input_fraction: 0.1,
            phases: vec![crate::workload::TouchPhase {
                at_s: 10.0,
                working_set_mb: 3.0,
            }],
            pace: Pace::default(),
        };
        let mut w = Workload::new(&config, &CostModel::default()).unwrap();
        let mut rng = SimRng::new(1);
        let mut out = Vec::new();
        w.advance(Duration::ZERO);
        w.fill(&mut rng, &mut out, 1024 + 5_000);
        assert!(out[1024..]
            .iter()
            .all(|a| matches!(a, Access::Anon { page, .. } if *page < 256)));
        assert_eq!(w.working_set(), Pages(256));
        w.advance(Duration::from_secs(10));
        out.clear();
        w.fill(&mut rng, &mut out, 20_000);
        assert!(out
            .iter()
            .all(|a| matches!(a, Access::Anon { page, .. } if *page < 768)));
        assert!(out
            .iter()
            .any(|a| matches!(a, Access::Anon { page, .. } if *page >= 256)));
        assert_eq!(w.working_set(), Pages(768));
        // Committed memory is the allocation throughout.
        assert_eq!(w.anon_pages(), 1024);
    }

    #[test]
    fn phases_out_of_order_or_beyond_the_allocation_are_refused() {
        let with = |phases: Vec<(f64, f64)>| WorkloadConfig::CpuJob {
            allocated_mb: 4.0,
            working_set_mb: 1.0,
            skew: Skew::Uniform,
            input_mb: 0.0,
            input_fraction: 0.1,
            phases: phases
                .into_iter()
                .map(|(at_s, working_set_mb)| crate::workload::TouchPhase {
                    at_s,
                    working_set_mb,
                })
                .collect(),
            pace: Pace::default(),
        };
        let err = |c| {
            Workload::new(&c, &CostModel::default())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(with(vec![(0.0, 2.0)])),
            "workload cpu_job: phases[0].at_s = 0 must be > 0"
        );
        assert_eq!(
            err(with(vec![(5.0, 2.0), (5.0, 3.0)])),
            "workload cpu_job: phases[1].at_s = 5 must be > phases[0].at_s = 5"
        );
        assert_eq!(
            err(with(vec![(5.0, 5.0)])),
            "workload cpu_job: phases[0].working_set_mb = 5 must be <= allocated_mb = 4"
        );
    }

    #[test]
    fn initialises_all_allocated_pages_once_then_stays_in_working_set() {
        for skew in [Skew::Uniform, Skew::Zipf { theta: 0.9 }] {
            let mut w = job(4.0, 1.0, skew);
            let mut rng = SimRng::new(1);
            assert_eq!(w.anon_pages(), 1024);
            assert_eq!(w.working_set(), Pages(256));
            assert_eq!(w.demand(Duration::from_secs(1)), None);
            let mut out = Vec::new();
            // Fill in uneven batches across the end of the sweep.
            for n in [300, 300, 300, 300, 20_000] {
                w.fill(&mut rng, &mut out, n);
            }
            assert_eq!(out.len(), 21_200);
            for (i, a) in out[..1024].iter().enumerate() {
                assert_eq!(
                    *a,
                    Access::Anon {
                        page: i as u32,
                        write: true
                    }
                );
            }
            assert!(!w.initialising());
            let mut writes = 0;
            for a in &out[1024..] {
                match a {
                    Access::Anon { page, write } => {
                        assert!(*page < 256, "{page}");
                        writes += usize::from(*write);
                    }
                    other => panic!("{other:?}"),
                }
            }
            let frac = writes as f64 / (out.len() - 1024) as f64;
            assert!((0.27..0.33).contains(&frac), "{frac}");
        }
    }

    #[test]
    fn returned_sweep_accesses_are_handed_out_again() {
        let mut w = job(1.0, 1.0, Skew::Uniform);
        let mut rng = SimRng::new(2);
        let mut out = Vec::new();
        w.fill(&mut rng, &mut out, 200);
        w.return_unused(&out[150..]); // pages 150..200 were not performed
        out.clear();
        w.fill(&mut rng, &mut out, 10);
        assert_eq!(
            out[0],
            Access::Anon {
                page: 150,
                write: true
            }
        );
        // Steady accesses returned are simply dropped: the sweep cursor stays put.
        let mut w = job(1.0, 1.0, Skew::Uniform);
        out.clear();
        w.fill(&mut rng, &mut out, 300); // 256 sweep + 44 steady
        w.return_unused(&out[260..]);
        assert_eq!(w.sweep_remaining(), 0);
        w.return_unused(&out[260..]); // a second call has nothing to return
        assert_eq!(w.sweep_remaining(), 0);
        w.fill(&mut rng, &mut out, 10);
        w.return_unused(&out[210..]); // more than the fill appended: only its sweep part (none)
        assert_eq!(w.sweep_remaining(), 0);
    }

    #[test]
    fn working_set_larger_than_allocation_is_rejected() {
        let config = WorkloadConfig::CpuJob {
            allocated_mb: 100.0,
            working_set_mb: 200.0,
            skew: Skew::Uniform,
            input_mb: 0.0,
            input_fraction: 0.1,
            phases: Vec::new(),
            pace: Pace::default(),
        };
        assert_eq!(
            Workload::new(&config, &CostModel::default())
                .unwrap_err()
                .to_string(),
            "workload cpu_job: working_set_mb = 200 must be <= allocated_mb = 100"
        );
    }

    #[test]
    fn input_files_are_read_through_the_page_cache() {
        let config = WorkloadConfig::CpuJob {
            allocated_mb: 2.0,
            working_set_mb: 1.0,
            skew: Skew::Uniform,
            input_mb: 1.0,
            input_fraction: 0.25,
            phases: Vec::new(),
            pace: Pace::default(),
        };
        let mut w = Workload::new(&config, &CostModel::default()).unwrap();
        assert_eq!(w.file_pages(), 256);
        assert_eq!(w.working_set(), Pages(512));
        let mut rng = SimRng::new(3);
        let mut out = Vec::new();
        w.fill(&mut rng, &mut out, 512 + 40_000);
        let files = out[512..]
            .iter()
            .filter(|a| matches!(a, Access::File { block } if *block < 256))
            .count();
        let share = files as f64 / 40_000.0;
        assert!((0.23..0.27).contains(&share), "{share}");
    }
}
