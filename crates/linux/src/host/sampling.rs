//! ESX-style sampling counts for a Linux tenant: DAMON's accessed bytes, as a fraction of the tenant's max, gathered into the sampling estimator's periods.
//!
//! ESX samples 100 random pages of a VM's configured memory each period and counts those
//! touched. Here DAMON checks (itself by sampling one address per region) which parts of the
//! tenant's address spaces were accessed in each aggregation window; the period's touched
//! fraction is the largest accessed/max seen in its windows, reported in thousandths.

use crate::damon::{AccessMonitor, DamonConfig};
use memtide_model::{Bytes, CompletedSample, SampleCounts};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The resolution of the reported fraction: `sampled` in every period.
pub const RESOLUTION: u32 = 1000;

/// Periods of touched fractions, independent of where the fractions come from.
#[derive(Clone, Debug, PartialEq)]
pub struct PeriodCounter {
    period_len: Duration,
    period: u64,
    started: Option<Duration>,
    touched: u32,
    completed: Option<CompletedSample>,
}

impl PeriodCounter {
    pub fn new(period_len: Duration) -> PeriodCounter {
        PeriodCounter {
            period_len,
            period: 0,
            started: None,
            touched: 0,
            completed: None,
        }
    }

    /// Folds in one window's fraction (accessed / max) at `now`; returns the counts to report.
    /// A period that ended is reported as `completed` once, on the first call after it.
    pub fn record(&mut self, now: Duration, fraction: Option<f64>) -> SampleCounts {
        let started = *self.started.get_or_insert(now);
        let mut completed = None;
        if now.saturating_sub(started) >= self.period_len {
            completed = Some(CompletedSample {
                sampled: RESOLUTION,
                touched: self.touched,
            });
            self.period += 1;
            self.started = Some(now);
            self.touched = 0;
        }
        if let Some(f) = fraction {
            let t = (f.clamp(0.0, 1.0) * f64::from(RESOLUTION)).round() as u32;
            self.touched = self.touched.max(t);
        }
        self.completed = completed;
        SampleCounts {
            period: self.period,
            sampled: RESOLUTION,
            touched: self.touched,
            completed,
        }
    }
}

/// A tenant's DAMON monitor and its periods.
#[derive(Debug)]
pub struct AccessSampler {
    damon_root: PathBuf,
    config: DamonConfig,
    monitor: Option<AccessMonitor>,
    pids: Vec<u32>,
    periods: PeriodCounter,
    max: Bytes,
}

impl AccessSampler {
    pub fn new(
        damon_root: &Path,
        config: DamonConfig,
        period: Duration,
        max: Bytes,
    ) -> AccessSampler {
        AccessSampler {
            max,
            damon_root: damon_root.to_path_buf(),
            config,
            monitor: None,
            pids: Vec::new(),
            periods: PeriodCounter::new(period),
        }
    }

    /// One observation: follows the tenant's processes, reads the latest window and returns
    /// the counts, or an error line (the counts are then `None` for this tick: never zero).
    pub fn observe(&mut self, now: Duration, pids: &[u32]) -> Result<SampleCounts, String> {
        let max = self.max;
        let mut pids = pids.to_vec();
        pids.sort_unstable();
        if pids.is_empty() {
            self.monitor = None;
            self.pids.clear();
            return Err("no processes to monitor".to_string());
        }
        if pids != self.pids || self.monitor.is_none() {
            self.monitor = None;
            self.monitor = Some(
                AccessMonitor::start(&self.damon_root, &pids, &self.config)
                    .map_err(|e| e.to_string())?,
            );
            self.pids = pids;
        }
        let monitor = self.monitor.as_mut().expect("started above");
        match monitor.read() {
            Ok(window) => {
                let fraction = if max.0 == 0 {
                    None
                } else {
                    Some(window.accessed.0 as f64 / max.0 as f64)
                };
                Ok(self.periods.record(now, fraction))
            }
            Err(e) => {
                // A monitor whose processes changed under it restarts next tick.
                self.monitor = None;
                self.pids.clear();
                Err(e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_keeps_its_largest_window_and_completes_once() {
        let mut p = PeriodCounter::new(Duration::from_secs(10));
        let s = |t| Duration::from_secs(t);
        assert_eq!(p.record(s(0), Some(0.2)).touched, 200);
        assert_eq!(p.record(s(4), Some(0.5)).touched, 500);
        let mid = p.record(s(8), Some(0.1));
        assert_eq!((mid.period, mid.touched, mid.completed), (0, 500, None));
        let next = p.record(s(10), Some(0.3));
        assert_eq!(next.period, 1);
        assert_eq!(next.touched, 300);
        assert_eq!(
            next.completed,
            Some(CompletedSample {
                sampled: RESOLUTION,
                touched: 500
            })
        );
        assert_eq!(p.record(s(11), None).completed, None);
    }

    #[test]
    fn fractions_outside_zero_to_one_are_clamped() {
        let mut p = PeriodCounter::new(Duration::from_secs(10));
        assert_eq!(p.record(Duration::ZERO, Some(1.7)).touched, RESOLUTION);
        let mut p = PeriodCounter::new(Duration::from_secs(10));
        assert_eq!(p.record(Duration::ZERO, Some(-0.5)).touched, 0);
    }
}
