//! The toucher workload (ESX Fig. 6): repeatedly touches a working set whose size changes
//! by phase, inside an anonymous region allocated once.

use super::config::TouchPhase;
use super::pick::{Mix, Picker};
use super::validate::Check;
use super::{Plan, Skew, WorkloadError};
use memtide_model::Pages;

/// One access is one operation.
pub(super) const DEFAULT_ACCESSES_PER_OP: u32 = 1;
/// Share of accesses that write.
pub(super) const WRITE_FRACTION: f64 = 0.5;

/// Anonymous region `allocated_mb` (default: the largest phase). Phase `i` touches pages
/// `0..working_set_mb` from `at_s` on, uniformly or with `skew`. Closed loop by default.
pub(super) fn plan(
    check: Check,
    phases: &[TouchPhase],
    allocated_mb: Option<f64>,
    skew: Skew,
) -> Result<Plan, WorkloadError> {
    if phases.is_empty() {
        return Err(WorkloadError::Empty {
            kind: check.kind,
            field: "phases",
        });
    }
    let skew = check.skew("skew", skew)?;
    let sizes: Vec<u32> = check
        .phases(phases, None)?
        .into_iter()
        .map(|(_, ws)| ws)
        .collect();
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let anon_pages = match allocated_mb {
        None => largest,
        Some(mb) => {
            let pages = check.size_mb("allocated_mb", mb)?;
            if let Some(i) = sizes.iter().position(|&s| s > pages) {
                return Err(check.error(
                    "allocated_mb",
                    mb,
                    format!(
                        ">= phases[{i}].working_set_mb = {}",
                        phases[i].working_set_mb
                    ),
                ));
            }
            pages
        }
    };
    let phases = phases
        .iter()
        .zip(&sizes)
        .map(|(p, &ws)| {
            let mix = Mix::new(
                Picker::new(ws, skew),
                Picker::Empty,
                0.0,
                WRITE_FRACTION,
                Pages(u64::from(ws)),
            );
            (p.at_s, mix)
        })
        .collect();
    Ok(Plan {
        anon_pages,
        file_pages: 0,
        sweep: 0,
        phases,
        default_rate: None,
        default_accesses_per_op: DEFAULT_ACCESSES_PER_OP,
    })
}

#[cfg(test)]
mod tests {
    use crate::cost::CostModel;
    use crate::rng::SimRng;
    use crate::workload::{Access, Pace, Skew, TouchPhase, Workload, WorkloadConfig};
    use memtide_model::Pages;
    use std::time::Duration;

    fn config(phases: &[(f64, f64)], allocated_mb: Option<f64>, skew: Skew) -> WorkloadConfig {
        WorkloadConfig::Toucher {
            phases: phases
                .iter()
                .map(|&(at_s, working_set_mb)| TouchPhase {
                    at_s,
                    working_set_mb,
                })
                .collect(),
            allocated_mb,
            skew,
            pace: Pace::default(),
        }
    }

    fn toucher(phases: &[(f64, f64)], skew: Skew) -> Workload {
        Workload::new(&config(phases, None, skew), &CostModel::default()).unwrap()
    }

    fn max_page(w: &mut Workload, rng: &mut SimRng) -> u32 {
        let mut out = Vec::new();
        w.fill(rng, &mut out, 50_000);
        assert_eq!(out.len(), 50_000);
        out.iter()
            .map(|a| match a {
                Access::Anon { page, .. } => *page,
                other => panic!("toucher made {other:?}"),
            })
            .max()
            .unwrap()
    }

    #[test]
    fn switches_phase_at_at_s() {
        let mut w = toucher(&[(0.0, 50.0), (10.0, 250.0), (20.0, 100.0)], Skew::Uniform);
        let mut rng = SimRng::new(1);
        assert_eq!(w.anon_pages(), 250 * 256);
        assert_eq!(w.demand(Duration::from_secs(1)), None);

        w.advance(Duration::from_secs(9));
        assert_eq!(w.phase_index(), Some(0));
        assert_eq!(w.working_set(), Pages(50 * 256));
        let m = max_page(&mut w, &mut rng);
        assert!(m < 50 * 256 && m > 49 * 256, "{m}");

        w.advance(Duration::from_secs(10));
        assert_eq!(w.phase_index(), Some(1));
        assert_eq!(w.working_set(), Pages(250 * 256));
        let m = max_page(&mut w, &mut rng);
        assert!(m < 250 * 256 && m > 240 * 256, "{m}");

        w.advance(Duration::from_millis(20_500));
        assert_eq!(w.phase_index(), Some(2));
        assert!(max_page(&mut w, &mut rng) < 100 * 256);
    }

    #[test]
    fn nothing_is_touched_before_the_first_phase() {
        let mut w = toucher(&[(5.0, 10.0)], Skew::Uniform);
        let mut rng = SimRng::new(2);
        assert_eq!(w.phase_index(), None);
        assert_eq!(w.working_set(), Pages::ZERO);
        assert_eq!(w.demand(Duration::from_secs(1)), Some(0));
        let mut out = Vec::new();
        w.fill(&mut rng, &mut out, 100);
        assert!(out.is_empty());
        w.advance(Duration::from_secs(5));
        assert_eq!(w.demand(Duration::from_secs(1)), None);
    }

    #[test]
    fn zero_mb_phase_touches_nothing() {
        let mut w = toucher(&[(0.0, 10.0), (1.0, 0.0)], Skew::Uniform);
        w.advance(Duration::from_secs(2));
        assert_eq!(w.demand(Duration::from_secs(1)), Some(0));
        assert_eq!(w.working_set(), Pages::ZERO);
        assert_eq!(w.anon_pages(), 2560);
    }

    #[test]
    fn zipf_skew_stays_in_phase_and_favours_few_pages() {
        let mut w = toucher(&[(0.0, 16.0)], Skew::Zipf { theta: 1.2 });
        let mut rng = SimRng::new(3);
        let mut out = Vec::new();
        w.fill(&mut rng, &mut out, 100_000);
        let mut counts = vec![0u32; 16 * 256];
        for a in &out {
            match a {
                Access::Anon { page, .. } => counts[*page as usize] += 1,
                other => panic!("{other:?}"),
            }
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = counts[..41].iter().sum(); // hottest 1% of pages
        assert!(top > 60_000, "{top}");
    }

    #[test]
    fn allocated_mb_widens_the_region() {
        let w = Workload::new(
            &config(&[(0.0, 10.0)], Some(100.0), Skew::Uniform),
            &CostModel::default(),
        )
        .unwrap();
        assert_eq!(w.anon_pages(), 25_600);
        assert_eq!(w.working_set(), Pages(2560));
    }

    #[test]
    fn bad_phases_are_rejected_naming_the_field() {
        let cost = CostModel::default();
        let err = |c: WorkloadConfig| Workload::new(&c, &cost).unwrap_err().to_string();
        assert_eq!(
            err(config(&[(0.0, 10.0), (5.0, -5.0)], None, Skew::Uniform)),
            "workload toucher: phases[1].working_set_mb = -5 must be >= 0"
        );
        assert_eq!(
            err(config(&[], None, Skew::Uniform)),
            "workload toucher: phases must not be empty"
        );
        assert_eq!(
            err(config(&[(10.0, 1.0), (5.0, 1.0)], None, Skew::Uniform)),
            "workload toucher: phases[1].at_s = 5 must be > phases[0].at_s = 10"
        );
        assert_eq!(
            err(config(&[(f64::NAN, 1.0)], None, Skew::Uniform)),
            "workload toucher: phases[0].at_s = NaN must be a finite number"
        );
        assert_eq!(
            err(config(&[(0.0, 200.0)], Some(100.0), Skew::Uniform)),
            "workload toucher: allocated_mb = 100 must be >= phases[0].working_set_mb = 200"
        );
        assert_eq!(
            err(config(&[(0.0, 1.0)], None, Skew::Zipf { theta: 0.0 })),
            "workload toucher: skew.theta = 0 must be > 0"
        );
    }
}
