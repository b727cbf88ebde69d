//! ESX statistical sampling of active memory (Waldspurger 2002, section 5.3): slow, fast and partial-period EWMAs of the touched fraction.
//!
//! Each period the world samples `n` random pages of the tenant's configured memory and counts
//! the `t` of them that are touched; `f = t / n`. A slow EWMA gives a stable estimate, a fast
//! EWMA adapts quickly, and a version of the fast EWMA that includes the current period's counts
//! so far reacts within a period. The estimate is the maximum of the three times the tenant's
//! max: it follows increases quickly and decreases slowly.

use super::EstimatorInput;
use memtide_model::{EstimateNote, Pages, SampleCounts, SamplingConfig};

/// One tenant's sampling estimator.
///
/// Before the world has reported any usable sampling counts the tenant cannot be measured and
/// is treated as fully active (estimate = max), so the idle memory tax never penalises a tenant
/// only because it is invisible. Once counts arrive the estimate follows them, starting from the
/// current period's touched fraction. Missing counts (`sample: None`) keep the previous
/// estimate; they are never read as zero. The estimate is not clamped to the tenant's min: it is
/// a measurement, and the policy applies min.
#[derive(Clone, Debug)]
pub struct SamplingEstimator {
    /// The configured EWMA gains, each within [0, 1] (see `sane_gain`).
    slow_gain: f64,
    fast_gain: f64,
    /// The ceiling's factor over the completed periods' estimate: 1 + headroom.
    headroom: f64,
    /// Slow EWMA of completed periods' fractions; `None` before the first completed period.
    slow: Option<f64>,
    /// Fast EWMA of completed periods' fractions; `None` before the first completed period.
    fast: Option<f64>,
    /// Fast EWMA including the current period's counts so far.
    partial: Option<f64>,
    /// `period` of the observation whose `completed` counts were last applied, so a completion
    /// reported twice is counted once.
    applied_completion: Option<u64>,
    estimate: Pages,
    ceiling: Pages,
}

impl SamplingEstimator {
    pub fn new(config: SamplingConfig) -> SamplingEstimator {
        // Only the gains and the headroom matter here (the world samples), read once: the
        // estimator is kept per tenant in the array a controller step walks.
        SamplingEstimator {
            slow_gain: sane_gain(config.slow_gain),
            fast_gain: sane_gain(config.fast_gain),
            headroom: 1.0 + sane_headroom(config.headroom),
            slow: None,
            fast: None,
            partial: None,
            applied_completion: None,
            estimate: Pages::ZERO,
            ceiling: Pages::ZERO,
        }
    }

    /// Seeds the slow and fast EWMAs with `estimate / max` (an estimate kept across a restart),
    /// as if one period had completed at that fraction.
    pub fn resume(&mut self, estimate: Pages, max: Pages) {
        if max.0 == 0 {
            return;
        }
        let f = (estimate.0 as f64 / max.0 as f64).clamp(0.0, 1.0);
        self.slow = Some(f);
        self.fast = Some(f);
    }

    /// Feeds one observation and returns the new estimate.
    pub fn update(&mut self, input: &EstimatorInput) -> Pages {
        if let Some(sample) = &input.obs.sample {
            self.absorb(sample);
        }
        let fraction = self.fraction();
        self.estimate = match fraction {
            Some(f) => input.max.scale(f),
            None => input.max,
        }
        .clamp_to(Pages::ZERO, input.max);
        // The ceiling moves once per completed period (slow and fast EWMAs only): letting the
        // partial average raise it would compound within a period as the tenant grows into
        // each new ceiling. Before the first completed period nothing is known: hold what the
        // tenant holds.
        self.ceiling = match larger(self.slow, self.fast) {
            Some(f) => input.max.scale(f * self.headroom),
            None if fraction.is_some() => input.obs.allocated,
            None => input.max,
        }
        .min(input.max);
        self.estimate
    }

    pub fn estimate(&self) -> Pages {
        self.estimate
    }

    /// The completed periods' estimate plus `headroom`, at most max: sampling cannot see demand
    /// beyond what the tenant holds, so a tenant capped at its estimate needs room to show more.
    /// Before the first completed period it is what the tenant holds.
    pub fn ceiling(&self) -> Pages {
        self.ceiling
    }

    /// The active fraction the estimate stands on: max(slow, fast, partial), or `None` before
    /// any usable sampling counts.
    pub fn fraction(&self) -> Option<f64> {
        larger(larger(self.slow, self.fast), self.partial)
    }

    /// The estimator's state for explanations.
    #[inline]
    pub fn note(&self) -> EstimateNote {
        EstimateNote::Sampling {
            estimate: self.estimate,
            measured: self.fraction().is_some(),
            slow: self.slow,
            fast: self.fast,
            partial: self.partial,
        }
    }

    fn absorb(&mut self, sample: &SampleCounts) {
        if let Some(done) = sample.completed {
            let fresh = self.applied_completion != Some(sample.period);
            if let (true, Some(f)) = (fresh, touched_fraction(done.sampled, done.touched)) {
                self.applied_completion = Some(sample.period);
                let (slow_gain, fast_gain) = (self.slow_gain, self.fast_gain);
                self.slow = Some(self.slow.map_or(f, |s| s + slow_gain * (f - s)));
                self.fast = Some(self.fast.map_or(f, |s| s + fast_gain * (f - s)));
                // The partial average belonged to the period that just ended.
                self.partial = None;
            }
        }
        if let Some(f) = touched_fraction(sample.sampled, sample.touched) {
            let fast_gain = self.fast_gain;
            self.partial = Some(self.fast.map_or(f, |s| s + fast_gain * (f - s)));
        }
    }
}

/// The larger of two fractions (`f64::max`), the one present, or `None`.
fn larger(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// `f = touched / sampled`, at most 1; `None` when nothing was sampled.
pub fn touched_fraction(sampled: u32, touched: u32) -> Option<f64> {
    if sampled == 0 {
        return None;
    }
    Some((f64::from(touched) / f64::from(sampled)).min(1.0))
}

/// An EWMA gain in [0, 1]; a non-finite gain means "take the new value".
fn sane_gain(gain: f64) -> f64 {
    if gain.is_finite() {
        gain.clamp(0.0, 1.0)
    } else {
        1.0
    }
}

fn sane_headroom(headroom: f64) -> f64 {
    if headroom.is_finite() {
        headroom.max(0.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::{CompletedSample, TenantId, TenantObservation};
    use std::time::Duration;

    /// Ticks per 30 s ESX period at the controller's 1 s tick.
    const TICKS: u32 = 30;

    fn max() -> Pages {
        Pages::from_mib(256)
    }

    fn feed(est: &mut SamplingEstimator, now: Duration, sample: Option<SampleCounts>) -> Pages {
        let mut obs = TenantObservation::new(TenantId(0), max());
        obs.sample = sample;
        est.update(&EstimatorInput {
            now,
            min: Pages::from_mib(128),
            max: max(),
            obs: &obs,
            probe: true,
        })
    }

    /// ESX's 100 pages per 30 s with round gains (slow 0.1, fast 0.5), so expected values are easy to read.
    fn test_gains() -> SamplingConfig {
        SamplingConfig {
            slow_gain: 0.1,
            fast_gain: 0.5,
            ..SamplingConfig::default()
        }
    }

    /// A world sampling 100 pages every 30 s, ticked once a second.
    struct World {
        est: SamplingEstimator,
        period: u64,
        now: Duration,
        previous: Option<CompletedSample>,
    }

    impl World {
        fn new() -> World {
            World {
                est: SamplingEstimator::new(test_gains()),
                period: 0,
                now: Duration::ZERO,
                previous: None,
            }
        }

        /// One tick in the current period with `touched` of 100 pages touched so far.
        fn tick(&mut self, tick: u32, touched: u32) -> Pages {
            self.now += Duration::from_secs(1);
            let completed = if tick == 0 { self.previous } else { None };
            let sample = SampleCounts {
                period: self.period,
                sampled: 100,
                touched,
                completed,
            };
            feed(&mut self.est, self.now, Some(sample))
        }

        /// A whole period in which `touched` of the 100 sampled pages end up touched, touched
        /// evenly over the period. Returns the estimate at its last tick.
        fn period(&mut self, touched: u32) -> Pages {
            let mut estimate = Pages::ZERO;
            for tick in 0..TICKS {
                estimate = self.tick(tick, touched * (tick + 1) / TICKS);
            }
            self.end_period(touched);
            estimate
        }

        fn end_period(&mut self, touched: u32) {
            self.previous = Some(CompletedSample {
                sampled: 100,
                touched,
            });
            self.period += 1;
        }
    }

    #[test]
    fn fraction_is_touched_over_sampled() {
        assert_eq!(touched_fraction(100, 40), Some(0.4));
        assert_eq!(touched_fraction(100, 0), Some(0.0));
        assert_eq!(touched_fraction(100, 150), Some(1.0));
        assert_eq!(touched_fraction(0, 5), None);
    }

    #[test]
    fn partial_counts_set_the_estimate_before_any_completed_period() {
        let mut est = SamplingEstimator::new(SamplingConfig::default());
        let sample = SampleCounts {
            period: 0,
            sampled: 100,
            touched: 40,
            completed: None,
        };
        let got = feed(&mut est, Duration::from_secs(1), Some(sample));
        assert_eq!(got, max().scale(0.4));
        assert_eq!(est.fraction(), Some(0.4));
    }

    #[test]
    fn unmeasured_tenant_is_treated_as_fully_active() {
        let mut est = SamplingEstimator::new(SamplingConfig::default());
        assert_eq!(feed(&mut est, Duration::from_secs(1), None), max());
        assert_eq!(est.ceiling(), max());
        assert!(est.note().to_string().contains("unmeasured"));
    }

    #[test]
    fn zero_sampled_pages_do_not_update() {
        let mut est = SamplingEstimator::new(SamplingConfig::default());
        let empty = SampleCounts {
            period: 0,
            sampled: 0,
            touched: 0,
            completed: Some(CompletedSample {
                sampled: 0,
                touched: 0,
            }),
        };
        assert_eq!(feed(&mut est, Duration::from_secs(1), Some(empty)), max());
        assert_eq!(est.fraction(), None);
    }

    #[test]
    fn first_completed_period_initialises_both_averages() {
        let mut world = World::new();
        world.period(60);
        // First tick of the next period: nothing touched yet, the completed period arrives.
        let got = world.tick(0, 0);
        assert_eq!(world.est.slow, Some(0.6));
        assert_eq!(world.est.fast, Some(0.6));
        // partial = 0.6 + 0.5 * (0 - 0.6) = 0.3, below the averages.
        assert_eq!(world.est.partial, Some(0.3));
        assert_eq!(got, max().scale(0.6));
    }

    #[test]
    fn completed_period_is_counted_once() {
        let mut world = World::new();
        world.period(60);
        world.period(20);
        let slow = world.est.slow;
        let fast = world.est.fast;
        // The world repeats the completion on the second tick of the period.
        world.now += Duration::from_secs(1);
        let again = SampleCounts {
            period: world.period,
            sampled: 100,
            touched: 0,
            completed: world.previous,
        };
        world.tick(0, 0);
        feed(&mut world.est, world.now, Some(again));
        assert_eq!(world.est.slow, Some(0.6 + 0.1 * (0.2 - 0.6)));
        assert_ne!(world.est.slow, slow);
        assert_eq!(world.est.fast, Some(0.6 + 0.5 * (0.2 - 0.6)));
        assert_ne!(world.est.fast, fast);
    }

    #[test]
    fn follows_an_increase_within_one_period() {
        let mut world = World::new();
        for _ in 0..10 {
            world.period(20);
        }
        let before = world.tick(0, 0);
        assert!(before <= max().scale(0.21), "{before}");
        // The working set jumps to ~98% of memory: the partial average carries the estimate up
        // during the period, reaching the fast EWMA's next value by its end.
        let mut mid = Pages::ZERO;
        let mut last = Pages::ZERO;
        for tick in 1..TICKS {
            last = world.tick(tick, 98 * (tick + 1) / TICKS);
            if tick == TICKS / 2 {
                mid = last;
            }
        }
        world.end_period(98);
        // partial = 0.2 + 0.5 * (0.52 - 0.2) = 0.36 halfway through.
        assert!(mid > max().scale(0.35), "mid-period estimate {mid}");
        // partial = 0.2 + 0.5 * (0.98 - 0.2) = 0.59 at the period's last tick.
        assert!(last >= max().scale(0.58), "end-of-period estimate {last}");
        let after = world.tick(0, 0);
        // fast = 0.2 + 0.5 * (0.98 - 0.2) = 0.59
        assert!(after >= max().scale(0.58), "after one period {after}");
    }

    #[test]
    fn decays_slowly_after_a_decrease() {
        let mut world = World::new();
        for _ in 0..20 {
            world.period(98); // ~250 MiB of 256 MiB active
        }
        assert!(world.tick(0, 0) >= Pages::from_mib(245));
        world.period(98);
        // The working set drops to ~50 MiB (20 of 100 pages).
        world.period(20);
        let one = world.tick(0, 0);
        // slow = 0.98 + 0.1 * (0.2 - 0.98) = 0.902, about 231 MiB.
        assert!(one >= Pages::from_mib(220), "after one period {one}");
        world.period(20);
        let mut periods_above_100_mib = 1;
        for _ in 0..60 {
            if world.period(20) > Pages::from_mib(100) {
                periods_above_100_mib += 1;
            }
        }
        assert!(periods_above_100_mib >= 5, "{periods_above_100_mib}");
        let end = world.tick(0, 0);
        assert!(end < Pages::from_mib(55), "eventually {end}");
        assert!(
            end >= Pages::from_mib(50),
            "never below the measurement {end}"
        );
    }

    #[test]
    fn missing_samples_keep_the_estimate() {
        let mut world = World::new();
        world.period(60);
        let est = world.tick(0, 10);
        let ceiling = world.est.ceiling();
        for _ in 0..5 {
            world.now += Duration::from_secs(1);
            assert_eq!(feed(&mut world.est, world.now, None), est);
        }
        assert_eq!(world.est.ceiling(), ceiling);
    }

    #[test]
    fn ceiling_moves_per_completed_period_with_headroom_up_to_max() {
        let mut est = SamplingEstimator::new(SamplingConfig::default());
        let sample = |period, touched, completed: Option<u32>| SampleCounts {
            period,
            sampled: 100,
            touched,
            completed: completed.map(|touched| CompletedSample {
                sampled: 100,
                touched,
            }),
        };
        // Before any completed period: what the tenant holds.
        let mut obs = TenantObservation::new(TenantId(0), Pages::from_mib(100));
        obs.sample = Some(sample(0, 40, None));
        est.update(&EstimatorInput {
            now: Duration::from_secs(1),
            min: Pages::from_mib(128),
            max: max(),
            obs: &obs,
            probe: true,
        });
        assert_eq!(est.ceiling(), Pages::from_mib(100));
        // A completed period at 40%: ceiling = 40% of max plus 50% headroom.
        feed(
            &mut est,
            Duration::from_secs(31),
            Some(sample(1, 0, Some(40))),
        );
        assert_eq!(est.ceiling(), max().scale(0.4 * 1.5));
        // Partial counts within the period do not move it.
        feed(&mut est, Duration::from_secs(32), Some(sample(1, 90, None)));
        assert_eq!(est.ceiling(), max().scale(0.4 * 1.5));
        // A fully touched period takes it to max (capped).
        feed(
            &mut est,
            Duration::from_secs(61),
            Some(sample(2, 0, Some(100))),
        );
        assert_eq!(est.ceiling(), max());
    }

    #[test]
    fn estimate_never_exceeds_max() {
        let mut est = SamplingEstimator::new(SamplingConfig::default());
        let sample = SampleCounts {
            period: 3,
            sampled: 100,
            touched: u32::MAX,
            completed: Some(CompletedSample {
                sampled: 1,
                touched: u32::MAX,
            }),
        };
        assert_eq!(feed(&mut est, Duration::from_secs(1), Some(sample)), max());
        assert_eq!(est.ceiling(), max());
    }
}
