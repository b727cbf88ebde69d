//! The oltp workload (sysbench OLTP, TWS Table 1): skewed reads of a table through the page
//! cache plus a small anonymous part; I/O heavy, hurt most when its page cache is squeezed.

use super::pick::{Mix, Picker};
use super::validate::Check;
use super::{Plan, Skew, WorkloadError};
use crate::zipf::Zipf;
use memtide_model::Pages;

/// Share of anonymous accesses that write.
pub(super) const WRITE_FRACTION: f64 = 0.5;
/// Page accesses per transaction.
pub(super) const DEFAULT_ACCESSES_PER_OP: u32 = 50;
/// The working set counts the hottest data pages that together receive this share of the
/// file accesses.
pub(super) const HOT_COVERAGE: f64 = 0.9;

/// Anonymous region `anon_mb` (uniform), file set `data_mb` (`skew`, default Zipf 0.9);
/// `file_fraction` of accesses to the data. Closed loop by default. Working set: anon +
/// the hot data prefix receiving 90% of file accesses (all of the data if uniform).
pub(super) fn plan(
    check: Check,
    data_mb: f64,
    anon_mb: f64,
    file_fraction: f64,
    skew: Skew,
) -> Result<Plan, WorkloadError> {
    let data = check.size_mb("data_mb", data_mb)?;
    let anon = check.size_mb("anon_mb", anon_mb)?;
    let file_fraction = check.fraction("file_fraction", file_fraction)?;
    let skew = check.skew("skew", skew)?;
    let hot_data = match skew {
        Skew::Uniform => u64::from(data),
        Skew::Zipf { theta } => Zipf::new(u64::from(data), theta)
            .hot_prefix(HOT_COVERAGE)
            .min(u64::from(data)),
    };
    let anon_ws = if file_fraction < 1.0 {
        u64::from(anon)
    } else {
        0
    };
    let data_ws = if file_fraction > 0.0 { hot_data } else { 0 };
    let mix = Mix::new(
        Picker::new(anon, Skew::Uniform),
        Picker::new(data, skew),
        file_fraction,
        WRITE_FRACTION,
        Pages(anon_ws + data_ws),
    );
    Ok(Plan {
        anon_pages: anon,
        file_pages: data,
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
    use crate::workload::{Access, Skew, Workload, WorkloadConfig};
    use memtide_model::Pages;

    fn oltp(data_mb: f64, anon_mb: f64, file_fraction: f64, skew: Skew) -> WorkloadConfig {
        WorkloadConfig::Oltp {
            data_mb,
            anon_mb,
            file_fraction,
            skew,
            cpu_us_per_access: None,
            accesses_per_op: None,
            max_accesses_per_s: None,
        }
    }

    #[test]
    fn accesses_stay_in_range_with_the_configured_file_fraction() {
        let mut w = Workload::new(
            &oltp(64.0, 8.0, 0.8, Skew::Zipf { theta: 0.9 }),
            &CostModel::default(),
        )
        .unwrap();
        let mut rng = SimRng::new(1);
        let mut out = Vec::new();
        w.fill(&mut rng, &mut out, 100_000);
        let mut files = 0;
        for a in &out {
            match a {
                Access::File { block } => {
                    files += 1;
                    assert!(*block < 64 * 256);
                }
                Access::Anon { page, .. } => assert!(*page < 8 * 256),
            }
        }
        assert!((79_000..81_000).contains(&files), "{files}");
    }

    #[test]
    fn working_set_is_anon_plus_hot_data() {
        let w = Workload::new(
            &oltp(1024.0, 32.0, 0.8, Skew::Zipf { theta: 0.9 }),
            &CostModel::default(),
        )
        .unwrap();
        let data_ws = w.working_set().0 - 32 * 256;
        // Zipf 0.9 over 2^18 blocks: ~47% of the table gets 90% of the accesses.
        assert!((100_000..140_000).contains(&data_ws), "{data_ws}");

        // The hot set measured from samples receives ~90% of file accesses.
        let mut w = w;
        let mut out = Vec::new();
        w.fill(&mut SimRng::new(2), &mut out, 400_000);
        let mut counts = vec![0u32; 1 << 18];
        for a in &out {
            if let Access::File { block } = a {
                counts[*block as usize] += 1;
            }
        }
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let hot: u64 = counts[..data_ws as usize]
            .iter()
            .map(|&c| u64::from(c))
            .sum();
        let share = hot as f64 / total as f64;
        assert!(share >= 0.88, "{share}");

        let uniform = Workload::new(
            &oltp(100.0, 10.0, 0.8, Skew::Uniform),
            &CostModel::default(),
        )
        .unwrap();
        assert_eq!(uniform.working_set(), Pages(110 * 256));
        let only_file = Workload::new(
            &oltp(100.0, 10.0, 1.0, Skew::Uniform),
            &CostModel::default(),
        )
        .unwrap();
        assert_eq!(only_file.working_set(), Pages(100 * 256));
    }

    #[test]
    fn bad_fraction_is_rejected_naming_the_field() {
        let err =
            Workload::new(&oltp(10.0, 1.0, 1.5, Skew::Uniform), &CostModel::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "workload oltp: file_fraction = 1.5 must be in [0, 1]"
        );
        let err = Workload::new(
            &oltp(10.0, 1.0, 0.5, Skew::Zipf { theta: -1.0 }),
            &CostModel::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "workload oltp: skew.theta = -1 must be > 0"
        );
    }
}
