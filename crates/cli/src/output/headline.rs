//! A scenario's headline (`[headline]`): the mean of one tenant figure in each window of the run the scenario names, per tenant shown, gathered tick by tick; printed first by `memtide sim`, at the top of report.html, in summary.json, and compared across variants in index.html.
//!
//! A window is `[start, end)` in run seconds; a tick counts in every window its time falls in.
//! Latency is averaged over the ticks the tenant served anything (as the summary's mean), any
//! other figure over every tick the tenant ran. A window the run never reached, or in which
//! the tenant did not run, has no mean (`null`, printed `-`). Besides the means it keeps the
//! figure over the whole run per tenant as a [`BoundedSeries`], for the variants' comparison
//! chart. Memory: a few numbers per window and tenant, and 512 buckets per tenant shown.

use super::round3;
use crate::record::{Run, TickRecord};
use memtide_chart::BoundedSeries;
use memtide_model::{Bytes, TenantId};
use memtide_runner::TenantRow;
use memtide_scenario::{Figure, Headline};
use serde::Serialize;

/// Buckets of each tenant's series.
const BUCKETS: usize = 512;

/// The headline's means, as summary.json holds them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeadlineSummary {
    pub text: String,
    pub figure: &'static str,
    pub unit: &'static str,
    /// `[start, end]` in seconds.
    pub windows: Vec<[f64; 2]>,
    pub tenants: Vec<HeadlineRow>,
    /// Each shown tenant's figure over the run, for the variants' chart (not in the JSON).
    #[serde(skip)]
    pub series: Vec<Vec<(f64, f64)>>,
}

/// One tenant's mean in each window (`None`: no tick of it there).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeadlineRow {
    pub tenant: String,
    pub means: Vec<Option<f64>>,
}

impl HeadlineSummary {
    /// A window's label: `300-600 s`, or `whole run`.
    pub fn window_label(&self, i: usize) -> String {
        match self.windows.get(i) {
            Some([a, b]) => format!("{a}-{b} s"),
            None => "whole run".to_string(),
        }
    }

    /// The column heading of the means: `mean allocated MB`.
    pub fn heading(&self) -> String {
        format!("mean {} {}", self.figure.replace('_', " "), self.unit)
    }
}

/// The headline in the making.
pub struct HeadlineAcc {
    headline: Headline,
    /// `(start, end)` in seconds; the whole run when the scenario names none.
    windows: Vec<(f64, f64)>,
    /// The shown tenants' ids, in the headline's order.
    tenants: Vec<(TenantId, String)>,
    /// Per tenant, per window: sum and count.
    sums: Vec<Vec<(f64, u64)>>,
    series: Vec<BoundedSeries>,
}

/// `figure` of `row`; `None` when the tick does not count toward its mean (latency in a tick
/// without operations, a working set the world does not know).
fn value(figure: Figure, row: &TenantRow) -> Option<f64> {
    match figure {
        Figure::Allocated => Some(row.allocated.as_mib_f64()),
        Figure::Target => Some(row.target.as_mib_f64()),
        Figure::Estimate => Some(row.active_estimate.as_mib_f64()),
        Figure::WorkingSet => row.working_set.map(Bytes::as_mib_f64),
        Figure::Balloon => Some(row.balloon_size().as_mib_f64()),
        Figure::Throughput => Some(row.throughput.unwrap_or(0.0)),
        Figure::Latency => row
            .latency_ms
            .filter(|_| row.throughput.unwrap_or(0.0) > 0.0),
    }
}

impl HeadlineAcc {
    /// For `run`'s headline; `None` when its scenario has none.
    pub fn new(run: &Run) -> Option<HeadlineAcc> {
        let headline = run.headline.clone()?;
        let windows: Vec<(f64, f64)> = if headline.windows.is_empty() {
            vec![(0.0, f64::INFINITY)]
        } else {
            headline
                .windows
                .iter()
                .map(|(a, b)| (a.as_secs_f64(), b.as_secs_f64()))
                .collect()
        };
        let tenants: Vec<(TenantId, String)> = if headline.tenants.is_empty() {
            run.tenants.iter().map(|t| (t.id, t.name.clone())).collect()
        } else {
            headline
                .tenants
                .iter()
                .filter_map(|n| run.tenants.iter().find(|t| t.name == *n))
                .map(|t| (t.id, t.name.clone()))
                .collect()
        };
        Some(HeadlineAcc {
            sums: vec![vec![(0.0, 0); windows.len()]; tenants.len()],
            series: tenants
                .iter()
                .map(|_| BoundedSeries::new(BUCKETS))
                .collect(),
            headline,
            windows,
            tenants,
        })
    }

    /// Adds one tick.
    pub fn add(&mut self, tick: &TickRecord) {
        for row in &tick.rows {
            let Some(i) = self.tenants.iter().position(|(id, _)| *id == row.tenant) else {
                continue;
            };
            let Some(v) = value(self.headline.figure, row).filter(|v| v.is_finite()) else {
                continue;
            };
            self.series[i].push(tick.time_s, v);
            for (w, &(a, b)) in self.windows.iter().enumerate() {
                if (a..b).contains(&tick.time_s) {
                    self.sums[i][w].0 += v;
                    self.sums[i][w].1 += 1;
                }
            }
        }
    }

    /// The means.
    pub fn finish(self) -> HeadlineSummary {
        let whole = self.headline.windows.is_empty();
        HeadlineSummary {
            text: self.headline.text,
            figure: self.headline.figure.name(),
            unit: self.headline.figure.unit(),
            windows: if whole {
                Vec::new()
            } else {
                self.windows.iter().map(|&(a, b)| [a, b]).collect()
            },
            tenants: self
                .tenants
                .into_iter()
                .zip(&self.sums)
                .map(|((_, tenant), sums)| HeadlineRow {
                    tenant,
                    means: sums
                        .iter()
                        .map(|&(sum, n)| (n > 0).then(|| round3(sum / n as f64)))
                        .collect(),
                })
                .collect(),
            series: self.series.iter().map(BoundedSeries::points).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::test_record::record;
    use std::time::Duration;

    fn headline(figure: Figure, windows: &[(u64, u64)]) -> Headline {
        Headline {
            text: "what the run shows".into(),
            figure,
            windows: windows
                .iter()
                .map(|&(a, b)| (Duration::from_secs(a), Duration::from_secs(b)))
                .collect(),
            tenants: Vec::new(),
        }
    }

    fn summarize(h: Headline) -> HeadlineSummary {
        let mut r = record();
        r.run.headline = Some(h);
        let mut acc = HeadlineAcc::new(&r.run).unwrap();
        for t in &r.ticks {
            acc.add(t);
        }
        acc.finish()
    }

    #[test]
    fn each_window_averages_only_its_own_ticks() {
        let r = record();
        let (a, b) = (r.ticks[0].time_s, r.ticks[r.ticks.len() - 1].time_s);
        let s = summarize(headline(Figure::Allocated, &[(0, 1), (0, 10_000)]));
        let first = r.ticks.iter().filter(|t| t.time_s < 1.0).count();
        assert!(
            first > 0 && a < 1.0 && b >= 1.0,
            "the record spans the first window"
        );
        let row = &s.tenants[0];
        let id = r.tenants[0].id;
        let mean = |ticks: &mut dyn Iterator<Item = &TickRecord>| {
            let v: Vec<f64> = ticks
                .filter_map(|t| t.row(id))
                .map(|row| row.allocated.as_mib_f64())
                .collect();
            round3(v.iter().sum::<f64>() / v.len() as f64)
        };
        assert_eq!(
            row.means[0],
            Some(mean(&mut r.ticks.iter().filter(|t| t.time_s < 1.0)))
        );
        assert_eq!(row.means[1], Some(mean(&mut r.ticks.iter())));
        assert_eq!(s.window_label(0), "0-1 s");
        assert_eq!(s.heading(), "mean allocated MB");
        assert_eq!(
            s.series[0].len(),
            r.ticks.iter().filter(|t| t.row(id).is_some()).count()
        );
    }

    #[test]
    fn a_window_past_the_run_has_no_mean_and_none_means_the_whole_run() {
        let s = summarize(headline(Figure::Target, &[(100_000, 200_000)]));
        assert!(s.tenants.iter().all(|t| t.means == vec![None]));
        let whole = summarize(headline(Figure::Target, &[]));
        assert!(whole.windows.is_empty());
        assert_eq!(whole.window_label(0), "whole run");
        assert!(whole.tenants[..2].iter().all(|t| t.means[0].is_some()));
        assert_eq!(whole.tenants[2].means, vec![None], "c never ran");
    }
}
