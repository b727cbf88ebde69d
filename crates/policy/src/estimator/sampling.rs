//! ESX statistical sampling of active memory (Waldspurger 2002, section 5.3): slow, fast and partial-period EWMAs of the touched fraction, with upper confidence bounds for the idle tax and the cap.
//!
//! **The estimate.** Each period the world samples `n` random pages of the tenant's configured
//! memory (its max) and counts the `t` of them that are touched; `f = t / n`. A slow EWMA gives
//! a stable estimate, a fast EWMA adapts quickly, and a version of the fast EWMA that includes
//! the current period's counts so far reacts within a period. The estimate is the maximum of
//! the three times the tenant's max: it follows increases quickly and decreases slowly (ESX).
//!
//! **The bound the idle tax charges.** `f` is a binomial proportion and each average a weighted
//! sum of such proportions: an average with weights `w_i` over periods of `n_i` pages varies
//! as a proportion measured on `n_eff = 1 / sum(w_i^2 / n_i)` pages (Kish's effective sample
//! size; for an EWMA of gain `g`, `n (2 - g) / g` in the long run: 12 periods' worth for the
//! slow average at 0.15, 1.9 for the fast one at 0.7). [`SamplingEstimator::active_bound`] is
//! the largest of the three averages' upper Wilson bounds at their `n_eff`, one-sided 95%
//! (`Z`), times max: the most memory the samples allow the tenant to be touching. The idle
//! memory tax charges for that, not for the point estimate. The point estimate of a tenant
//! touching all it holds falls short of it in a quarter of the ticks (100 samples per period
//! at 80%, in the tests), and the tax (an idle page costs 4 times an active one at
//! tau = 0.75) read the shortfall as idle pages: the 1:1:2 shares scenario gave 1:1:1.84 to
//! 2.01 across seeds. The bound falls short in at most 5% of the ticks (none in the tests), so
//! a tenant whose samples are consistent with touching all it holds pays no tax, while an
//! idle one still pays for nearly all its idle pages (a fast average at 5% of 100 samples per
//! period is bounded at 8%). The bound is never below the estimate.
//!
//! **The ceiling** (what caps the target when the tenant's `cap_at_estimate` is on). Sampling
//! cannot see demand beyond what a tenant holds: a tenant short of memory touches all it holds
//! and looks exactly as big as its allocation. Faults can: a tenant that swaps in or refaults
//! while it holds its ceiling wants memory it does not hold. So sampling brings the ceiling
//! down and faults take it up:
//! - at the first tick of a period that is the second in a row at which the tenant faults
//!   ([`RISE_LEAST`] pages or more each: a shrink step's refaults last a tick; the kernel's LRU
//!   takes a page of an active set with the idle ones now and then) while holding (99% of) its
//!   ceiling, the ceiling rises to what it holds plus a step: a quarter of `headroom`, then
//!   half, then all of it in consecutive periods with such a rise (12.5%, 25%, 50% at the
//!   default): a tenant squeezed a little below its working set by the noise gets a little
//!   back, one short of much memory grows by half of what it holds per period from the
//!   third;
//! - at the end of a period without such a rise, the ceiling falls to the completed periods'
//!   upper bound (the larger of the slow and fast averages' bounds) if that is lower; it never
//!   rises without faults. So a tenant with memory to spare comes down to what it touches, as
//!   fast as the slow average lets the estimate fall, and stays there: its target ends just
//!   above its working set plus the unseen memory it needs (a guest kernel; 0-12% above that
//!   in `scenarios/sampling-convergence.toml`), rising a step where the bound's noise cuts
//!   into that. Estimate + 50% regardless kept a tenant whose working set had shrunk at 1.4
//!   to 1.6 times it for good.
//!
//! - where the configuration asks for it (`SamplingConfig::wake`: the daemon does; the
//!   simulator's scenarios reproduce ESX and do not), a tenant that wakes from swap gets at
//!   once a ceiling of what it holds plus what it has in swap (the memory it had before it was
//!   shrunk), whatever rose before in the period and whether or not it holds its ceiling yet.
//!   It wakes when it faults at `SWAP_IN_FAULTS_PER_S` (256) a second or more, and at
//!   1/[`WAKE_SHARE`] of its swap a second or more, at every observation over [`WAKE_FOR`] or
//!   more and at two observations in a row at least. Stepping 12.5%, 25%, 50% a period, a
//!   server woken at a third of its set (Redis at its 100 MiB min, 171 MiB of values read at
//!   random) took three periods, 60-90 s of refaults, to get it back; the limit planner then
//!   reads the swap back ahead of its faults (`mechanism::limit`, rule 5). One observation is
//!   not enough: a shrink step that takes a tenant's active pages with its idle ones (the
//!   kernel's LRU does not know which is which at once) makes it fault them back in the next
//!   tick or two, and then stop. The wake also restarts the averages at that fraction (as a
//!   resumed estimate does): without it, the next quiet period's end brought the ceiling down
//!   to averages that still read the idle spell (a woken Redis was squeezed 58 s after its
//!   wake, 150 ms of stall), where they now fall at the slow average's pace.
//!
//! Where the world counts no faults at all, the ceiling is as before: the completed periods'
//! estimate times `1 + headroom`, set once per completed period. Before the first completed
//! period (and any rise) it is what the tenant holds.
//!
//! **Cost.** O(1) per update: one square root per tick for the partial average's bound, two
//! more per completed period.

use super::EstimatorInput;
use crate::mechanism::limit::SWAP_IN_FAULTS_PER_S;
use memtide_model::{EstimateNote, Pages, SampleCounts, SamplingConfig};
use std::time::Duration;

/// The normal quantile of the one-sided 95% upper confidence bounds.
const Z: f64 = 1.645;

/// Fewer faults than this in one observation do not raise the ceiling: the kernel's LRU evicts
/// a page of an active set now and then, and 6 refaults in 210 s raised an idle toucher held at
/// its 100 MiB min by 12.5% (a wobble of 9 MiB a period for nothing).
const RISE_LEAST: u64 = 16;

/// A tenant wakes from swap when it faults at `SWAP_IN_FAULTS_PER_S` a second or more (the
/// rate at which the limit planner reads swap back) and at least this inverse fraction of what
/// it has in swap a second (1/64: 292 faults a second for 73 MiB swapped) ...
const WAKE_SHARE: f64 = 64.0;

/// ... at every observation over this long, and at two observations at least (two ticks at
/// the default 1 s tick, four at 250 ms).
const WAKE_FOR: Duration = Duration::from_secs(1);

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
    /// The configured headroom (see `sane_headroom`): the largest rise of the ceiling.
    headroom: f64,
    /// A tenant woken from swap gets its ceiling back at once (`SamplingConfig::wake`).
    wake: bool,
    /// Pages sampled per period: the sample size of an estimate resumed across a restart.
    sample_pages: u32,
    /// The latest observation carried fault counts (swap-ins or refaults).
    counts_faults: bool,
    /// The ceiling rose in the current period (it rises at most once a period).
    raised: bool,
    /// Consecutive periods, up to the one just completed, in which the ceiling rose.
    rises: u8,
    /// Consecutive observations (at most 2) at which the tenant faulted [`RISE_LEAST`] pages
    /// or more.
    faulting: u8,
    /// How long the tenant has faulted at the wake rate, at every observation since, and at
    /// how many observations (at most 2).
    waking: Duration,
    waking_seen: u8,
    /// When the last observation was taken, for fault rates.
    seen: Option<Duration>,
    /// The ceiling as a fraction of max; `None` before the first completed period and rise,
    /// when the ceiling is what the tenant holds (or max while it is unmeasured).
    cap: Option<f64>,
    /// The slow and fast EWMAs of completed periods' fractions; `None` before the first
    /// completed period.
    completed: Option<Completed>,
    /// Fast EWMA including the current period's counts so far, with its upper bound.
    partial: Option<Partial>,
    /// `period` of the observation whose `completed` counts were last applied, so a completion
    /// reported twice is counted once.
    applied_completion: Option<u64>,
    estimate: Pages,
    bound: Pages,
    ceiling: Pages,
}

/// An average of touched fractions and its sampling variance per unit of `f (1 - f)`:
/// `sum(w_i^2 / n_i)`, the inverse of its effective sample size.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Average {
    value: f64,
    weight: f64,
}

impl Average {
    /// One period's fraction `f` measured on `n` pages.
    fn first(f: f64, n: u32) -> Average {
        Average {
            value: f,
            weight: 1.0 / f64::from(n),
        }
    }

    /// The EWMA moved by `gain` towards `f` measured on `n` pages.
    fn step(self, gain: f64, f: f64, n: u32) -> Average {
        let keep = 1.0 - gain;
        Average {
            value: self.value + gain * (f - self.value),
            weight: keep * keep * self.weight + gain * gain / f64::from(n),
        }
    }

    /// The upper Wilson bound of the fraction at the effective sample size `1 / weight`.
    fn upper(self) -> f64 {
        wilson_upper(self.value, self.weight)
    }
}

/// The partial-period average's value and upper bound, the bound computed when the value
/// changes (a period's counts stop changing once the pages a tenant touches have been touched:
/// most ticks then need no square root).
#[derive(Clone, Copy, Debug)]
struct Partial {
    value: f64,
    upper: f64,
}

/// The completed periods' averages, and the larger of their upper bounds.
#[derive(Clone, Copy, Debug)]
struct Completed {
    slow: Average,
    fast: Average,
    upper: f64,
}

impl Completed {
    fn new(slow: Average, fast: Average) -> Completed {
        Completed {
            slow,
            fast,
            upper: slow.upper().max(fast.upper()),
        }
    }

    /// The completed periods' estimate: the larger of the slow and fast averages.
    fn value(&self) -> f64 {
        self.slow.value.max(self.fast.value)
    }
}

impl SamplingEstimator {
    pub fn new(config: SamplingConfig) -> SamplingEstimator {
        // Only the gains, the headroom and the sample size matter here (the world samples),
        // read once: the estimator is kept per tenant in the array a controller step walks.
        SamplingEstimator {
            slow_gain: sane_gain(config.slow_gain),
            fast_gain: sane_gain(config.fast_gain),
            headroom: sane_headroom(config.headroom),
            wake: config.wake,
            sample_pages: config.sample_pages.max(1),
            counts_faults: false,
            raised: false,
            rises: 0,
            faulting: 0,
            waking: Duration::ZERO,
            waking_seen: 0,
            seen: None,
            cap: None,
            completed: None,
            partial: None,
            applied_completion: None,
            estimate: Pages::ZERO,
            bound: Pages::ZERO,
            ceiling: Pages::ZERO,
        }
    }

    /// Seeds the slow and fast EWMAs with `estimate / max` (an estimate kept across a restart),
    /// as if one period of the configured sample size had completed at that fraction.
    pub fn resume(&mut self, estimate: Pages, max: Pages) {
        if max.0 == 0 {
            return;
        }
        let f = (estimate.0 as f64 / max.0 as f64).clamp(0.0, 1.0);
        let one = Average::first(f, self.sample_pages);
        self.completed = Some(Completed::new(one, one));
        self.cap = Some(f * (1.0 + self.headroom));
    }

    /// Feeds one observation and returns the new estimate.
    pub fn update(&mut self, input: &EstimatorInput) -> Pages {
        let obs = input.obs;
        let max = input.max;
        // The faults an observation reports happened in the tick before it, under the
        // ceiling then in force and in the period the observation may report completed: they
        // are weighed before the completion.
        self.counts_faults = obs.swap_ins.is_some() || obs.refaults.is_some();
        let faults = obs
            .swap_ins
            .unwrap_or(0)
            .saturating_add(obs.refaults.unwrap_or(0));
        let faulted = faults >= RISE_LEAST;
        let swapped = obs.swapped.unwrap_or(Pages::ZERO).0;
        let elapsed = self.seen.map(|at| input.now.saturating_sub(at));
        self.seen = Some(input.now);
        let per_s = elapsed
            .filter(|dt| !dt.is_zero())
            .map(|dt| faults as f64 / dt.as_secs_f64());
        let waking = swapped > 0
            && per_s.is_some_and(|r| r >= SWAP_IN_FAULTS_PER_S && r * WAKE_SHARE >= swapped as f64);
        (self.waking, self.waking_seen) = match (waking, elapsed) {
            (true, Some(dt)) => (
                (self.waking + dt).min(WAKE_FOR),
                self.waking_seen.saturating_add(1).min(2),
            ),
            _ => (Duration::ZERO, 0),
        };
        let woken = self.wake && self.waking >= WAKE_FOR && self.waking_seen >= 2;
        let back = (obs.allocated.0.saturating_add(swapped) as f64 / max.0.max(1) as f64).min(1.0);
        self.faulting = if faulted {
            self.faulting.saturating_add(1).min(2)
        } else {
            0
        };
        let rise = self.faulting >= 2 && !self.raised && max.0 > 0;
        let measured = self.fraction().is_some() && max.0 > 0;
        let measured_at_ceiling = measured && self.at_ceiling(obs.allocated);
        if woken && measured && self.cap.is_none_or(|cap| cap < back) {
            self.cap = Some(back);
            self.raised = true;
            // The wake measures what it touches: its averages restart there (as a resumed
            // estimate does), so they fall from it at the slow average's pace.
            let seed = Average::first(back, self.sample_pages);
            self.completed = Some(Completed::new(seed, seed));
            self.partial = None;
        } else if rise && measured_at_ceiling {
            let step = self.headroom * f64::from(1u8 << self.rises.min(2)) / 4.0;
            let held = obs.allocated.0 as f64 / max.0 as f64;
            self.cap = Some(held * (1.0 + step));
            self.raised = true;
        }
        if let Some(sample) = &obs.sample {
            self.absorb(sample);
        }
        let fraction = self.fraction();
        (self.estimate, self.bound) = match fraction {
            Some(f) => (max.scale(f), max.scale(self.upper())),
            None => (max, max),
        };
        self.estimate = self.estimate.min(max);
        self.bound = self.bound.min(max);
        self.ceiling = match self.cap {
            Some(f) => max.scale(f),
            None if fraction.is_some() => obs.allocated,
            None => max,
        }
        .min(max);
        self.estimate
    }

    pub fn estimate(&self) -> Pages {
        self.estimate
    }

    /// The tenant holds (99% of) its ceiling, or more.
    fn at_ceiling(&self, held: Pages) -> bool {
        held.0 as f64 >= 0.99 * self.ceiling.0 as f64
    }

    /// The most active memory the samples allow at the stated confidence (see the module
    /// documentation): what the idle memory tax charges. At least the estimate, at most max;
    /// max while the tenant is unmeasured.
    pub fn active_bound(&self) -> Pages {
        self.bound
    }

    /// What caps the target under `cap_at_estimate`, at most max: raised by faults at the
    /// ceiling, lowered to the completed periods' upper bound after a period without a rise
    /// (see the module documentation). Before the first completed period and rise it is what
    /// the tenant holds.
    pub fn ceiling(&self) -> Pages {
        self.ceiling
    }

    /// The active fraction the estimate stands on: max(slow, fast, partial), or `None` before
    /// any usable sampling counts.
    pub fn fraction(&self) -> Option<f64> {
        let completed = self.completed.as_ref().map(Completed::value);
        larger(completed, self.partial.map(|p| p.value))
    }

    /// The largest upper bound of the three averages (0 before any counts).
    fn upper(&self) -> f64 {
        let completed = self.completed.as_ref().map_or(0.0, |c| c.upper);
        completed.max(self.partial.map_or(0.0, |p| p.upper))
    }

    /// The estimator's state for explanations.
    #[inline]
    pub fn note(&self) -> EstimateNote {
        EstimateNote::Sampling {
            estimate: self.estimate,
            bound: self.bound,
            measured: self.fraction().is_some(),
            slow: self.completed.map(|c| c.slow.value),
            fast: self.completed.map(|c| c.fast.value),
            partial: self.partial.map(|p| p.value),
        }
    }

    /// The ceiling at the end of a period: it falls to the completed periods' upper bound
    /// unless it rose in the period; without fault counts it is their estimate + headroom.
    fn end_period(&mut self) {
        let Some(c) = self.completed else {
            return;
        };
        if !self.counts_faults {
            self.cap = Some(c.value() * (1.0 + self.headroom));
        } else if self.raised {
            self.rises = self.rises.saturating_add(1);
        } else {
            self.rises = 0;
            // Before the first completed period the ceiling only stood in for a measurement.
            self.cap = Some(self.cap.map_or(c.upper, |cap| cap.min(c.upper)));
        }
        self.raised = false;
    }

    fn absorb(&mut self, sample: &SampleCounts) {
        if let Some(done) = sample.completed {
            let fresh = self.applied_completion != Some(sample.period);
            if let (true, Some(f)) = (fresh, touched_fraction(done.sampled, done.touched)) {
                self.applied_completion = Some(sample.period);
                let n = done.sampled;
                let (slow_gain, fast_gain) = (self.slow_gain, self.fast_gain);
                self.completed = Some(match self.completed {
                    Some(c) => {
                        Completed::new(c.slow.step(slow_gain, f, n), c.fast.step(fast_gain, f, n))
                    }
                    None => Completed::new(Average::first(f, n), Average::first(f, n)),
                });
                // The partial average belonged to the period that just ended.
                self.partial = None;
                self.end_period();
            }
        }
        if let Some(f) = touched_fraction(sample.sampled, sample.touched) {
            let n = sample.sampled;
            let average = match self.completed {
                Some(c) => c.fast.step(self.fast_gain, f, n),
                None => Average::first(f, n),
            };
            // Within a period `n` is fixed, so an unchanged value has an unchanged bound.
            if self.partial.map(|p| p.value) != Some(average.value) {
                self.partial = Some(Partial {
                    value: average.value,
                    upper: average.upper(),
                });
            }
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

/// The upper bound of the one-sided `Z` Wilson score interval of a proportion `p` measured on
/// `n = 1 / weight` trials, at most 1:
/// `(p + z^2/2n + z sqrt(p (1 - p)/n + z^2/4n^2)) / (1 + z^2/n)`.
/// Unlike `p + z sd`, it stays above `p` at `p = 0` (by about `z^2 / n`): no touched page out
/// of a few samples does not prove the tenant idle.
fn wilson_upper(p: f64, weight: f64) -> f64 {
    let z2w = Z * Z * weight;
    let centre = p + z2w / 2.0;
    let spread = Z * (p * (1.0 - p) * weight + z2w * weight / 4.0).sqrt();
    ((centre + spread) / (1.0 + z2w)).min(1.0)
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

    fn slow(est: &SamplingEstimator) -> Option<f64> {
        est.completed.map(|c| c.slow.value)
    }

    fn fast(est: &SamplingEstimator) -> Option<f64> {
        est.completed.map(|c| c.fast.value)
    }

    fn partial(est: &SamplingEstimator) -> Option<f64> {
        est.partial.map(|p| p.value)
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
        /// Swap-ins each tick reports (`None`: the world does not count them).
        swap_ins: Option<u64>,
        /// What the tenant holds.
        held: Pages,
        /// What it has in swap (`None`: the world does not say).
        swapped: Option<Pages>,
    }

    impl World {
        fn new() -> World {
            World {
                est: SamplingEstimator::new(test_gains()),
                period: 0,
                now: Duration::ZERO,
                previous: None,
                swap_ins: None,
                held: max(),
                swapped: None,
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
            let mut obs = TenantObservation::new(TenantId(0), self.held);
            obs.sample = Some(sample);
            obs.swap_ins = self.swap_ins;
            obs.swapped = self.swapped;
            self.est.update(&EstimatorInput {
                now: self.now,
                min: Pages::from_mib(128),
                max: max(),
                obs: &obs,
                probe: true,
            })
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
        assert_eq!(slow(&world.est), Some(0.6));
        assert_eq!(fast(&world.est), Some(0.6));
        // partial = 0.6 + 0.5 * (0 - 0.6) = 0.3, below the averages.
        assert_eq!(partial(&world.est), Some(0.3));
        assert_eq!(got, max().scale(0.6));
    }

    #[test]
    fn completed_period_is_counted_once() {
        let mut world = World::new();
        world.period(60);
        world.period(20);
        let slow_before = slow(&world.est);
        let fast_before = fast(&world.est);
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
        assert_eq!(slow(&world.est), Some(0.6 + 0.1 * (0.2 - 0.6)));
        assert_ne!(slow(&world.est), slow_before);
        assert_eq!(fast(&world.est), Some(0.6 + 0.5 * (0.2 - 0.6)));
        assert_ne!(fast(&world.est), fast_before);
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
    fn without_fault_counts_the_ceiling_is_the_estimate_plus_headroom_per_period() {
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

    #[test]
    fn wilson_upper_bound_is_the_one_sided_95_percent_score_bound() {
        // 50 of 100: (0.5 + z^2/200 + z sqrt(0.0025 + z^2/40000)) / (1 + z^2/100).
        let b = wilson_upper(0.5, 1.0 / 100.0);
        assert!((b - 0.5812).abs() < 1e-4, "{b}");
        // 0 of 100 still allows about z^2 / n.
        let b = wilson_upper(0.0, 1.0 / 100.0);
        assert!((b - 0.0263).abs() < 1e-4, "{b}");
        assert_eq!(wilson_upper(1.0, 1.0 / 100.0), 1.0);
        // Certainty (no variance) is the fraction itself.
        assert_eq!(wilson_upper(0.3, 0.0), 0.3);
    }

    #[test]
    fn an_ewma_counts_as_n_2_minus_g_over_g_samples() {
        let mut a = Average::first(0.5, 100);
        for _ in 0..200 {
            a = a.step(0.15, 0.5, 100);
        }
        let n_eff = 1.0 / a.weight;
        assert!((n_eff - 100.0 * 1.85 / 0.15).abs() < 1e-6, "{n_eff}");
        // The first period counts as its own samples.
        assert_eq!(Average::first(0.5, 100).weight, 0.01);
    }

    /// Periods of 100 pages of which each is touched with probability `p`, touched in the
    /// period's first tick (a busy tenant touches what it holds quickly), drawn from a fixed
    /// seed; the estimate and the bound at every tick after the first `warm_up` periods.
    fn sampled_run(p: f64, periods: u32, warm_up: u32) -> Vec<(Pages, Pages)> {
        use proptest::prelude::RngExt;
        use proptest::test_runner::{RngAlgorithm, TestRng};
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut world = World::new();
        world.est = SamplingEstimator::new(SamplingConfig::default());
        let mut seen = Vec::new();
        for period in 0..periods {
            let touched = (0..100).filter(|_| rng.random_bool(p)).count() as u32;
            for tick in 0..TICKS {
                world.tick(tick, touched);
                if period >= warm_up {
                    seen.push((world.est.estimate(), world.est.active_bound()));
                }
            }
            world.end_period(touched);
        }
        seen
    }

    #[test]
    fn a_tenant_touching_all_it_holds_is_rarely_bounded_below_it() {
        // The tenant holds 80% of max and touches all of it.
        let held = max().scale(0.8);
        let seen = sampled_run(0.8, 200, 5);
        let share = |f: &dyn Fn(&(Pages, Pages)) -> bool| {
            seen.iter().filter(|s| f(s)).count() as f64 / seen.len() as f64
        };
        // The point estimate falls short of what it holds often: the tax would read the
        // shortfall as idle pages...
        let estimate_short = share(&|&(e, _)| e < held);
        assert!(estimate_short > 0.1, "estimate short {estimate_short}");
        // ... the bound, at most the 5% of a one-sided 95% bound.
        let bound_short = share(&|&(_, b)| b < held);
        assert!(bound_short < 0.05, "bound short {bound_short}");
        assert!(seen.iter().all(|&(e, b)| e <= b && b <= max()));
    }

    #[test]
    fn an_idle_tenant_is_bounded_near_what_it_touches() {
        // 5% touched: the bound stays far below max, so the tax still takes its idle pages.
        let seen = sampled_run(0.05, 100, 5);
        let most = seen.iter().map(|&(_, b)| b).max().unwrap();
        assert!(most <= max().scale(0.15), "bound up to {most}");
    }

    #[test]
    fn unmeasured_tenant_is_bounded_at_max() {
        let mut est = SamplingEstimator::new(SamplingConfig::default());
        feed(&mut est, Duration::from_secs(1), None);
        assert_eq!(est.active_bound(), max());
    }

    #[test]
    fn the_ceiling_falls_to_the_bound_without_faults_and_never_rises_without_them() {
        let mut world = World::new();
        world.swap_ins = Some(0);
        world.held = Pages::from_mib(200);
        world.period(40);
        world.tick(0, 0);
        // The first completed period: its upper bound, above the 40% estimate.
        let first = world.est.ceiling();
        assert_eq!(first, max().scale(world.est.completed.unwrap().upper));
        assert!(
            first > max().scale(0.4) && first < max().scale(0.6),
            "{first}"
        );
        // Quiet periods with more touched: the bound rises, the ceiling does not.
        world.tick(1, 60);
        world.end_period(60);
        world.tick(0, 0);
        assert!(world.est.completed.unwrap().upper > first.0 as f64 / max().0 as f64);
        assert_eq!(world.est.ceiling(), first);
        // ... fewer: it falls with the bound.
        for _ in 0..20 {
            world.period(20);
        }
        world.tick(0, 0);
        let low = world.est.ceiling();
        assert_eq!(low, max().scale(world.est.completed.unwrap().upper));
        assert!(low < max().scale(0.3), "{low}");
    }

    #[test]
    fn faults_at_the_ceiling_raise_it_by_growing_steps_once_a_period() {
        let mut world = World::new();
        world.swap_ins = Some(0);
        world.period(20);
        world.tick(0, 0);
        let mut ceiling = world.est.ceiling();
        // Faults while the tenant holds less than its ceiling (it is growing into it): none.
        world.held = ceiling.scale(0.9);
        world.swap_ins = Some(RISE_LEAST);
        world.tick(1, 40);
        assert_eq!(world.est.ceiling(), ceiling);
        // A few faults at the ceiling: the LRU's noise, none.
        world.held = ceiling;
        world.swap_ins = Some(RISE_LEAST - 1);
        world.tick(1, 40);
        assert_eq!(world.est.ceiling(), ceiling);
        world.swap_ins = Some(RISE_LEAST);
        // Faults at the ceiling at one observation (a shrink step's own): none yet.
        world.tick(1, 40);
        assert_eq!(world.est.ceiling(), ceiling);
        // At the ceiling at the second in a row: what it holds + 12.5%, then no more rises in
        // that period.
        for (tick, step) in [(2, 0.125), (1, 0.25), (1, 0.5), (1, 0.5)] {
            world.held = ceiling;
            world.tick(tick, 40);
            let raised = world.est.ceiling();
            assert_eq!(
                raised,
                max().scale(ceiling.0 as f64 / max().0 as f64 * (1.0 + step))
            );
            world.held = raised;
            world.tick(tick + 1, 40);
            assert_eq!(world.est.ceiling(), raised, "a second rise in one period");
            for t in tick + 2..TICKS {
                world.tick(t, 40);
            }
            world.end_period(40);
            world.tick(0, 0);
            // The period ended with a rise: the ceiling stays.
            assert_eq!(world.est.ceiling(), raised);
            ceiling = raised;
        }
        // A quiet period: the steps start again from 12.5%, and the ceiling falls to the
        // bound.
        world.swap_ins = Some(0);
        world.period(40);
        world.tick(0, 0);
        let bound = max().scale(world.est.completed.unwrap().upper);
        assert_eq!(world.est.ceiling(), bound.min(ceiling));
        world.held = world.est.ceiling();
        world.swap_ins = Some(RISE_LEAST);
        world.tick(1, 40);
        world.tick(2, 40);
        assert_eq!(
            world.est.ceiling(),
            max().scale(world.held.0 as f64 / max().0 as f64 * 1.125)
        );
    }

    #[test]
    fn a_tenant_woken_from_swap_gets_back_what_it_holds_and_has_in_swap_at_once() {
        let mut world = World::new();
        world.est.wake = true;
        world.swap_ins = Some(0);
        world.period(10);
        world.tick(0, 0);
        let ceiling = world.est.ceiling();
        world.held = ceiling;
        world.swapped = Some(Pages::from_mib(73));
        let swapped = Pages::from_mib(73).0;
        let bar = (swapped as f64 / WAKE_SHARE).ceil() as u64;
        // Faulting under a 64th of its swap a second, in a row: the usual 12.5% step.
        world.swap_ins = Some(bar - 1);
        world.tick(1, 10);
        world.tick(2, 10);
        let stepped = world.est.ceiling();
        assert_eq!(
            stepped,
            max().scale(ceiling.0 as f64 / max().0 as f64 * 1.125)
        );
        // A 64th of it once (a shrink step's refaults): nothing more in this period.
        world.swap_ins = Some(bar);
        world.tick(3, 10);
        world.swap_ins = Some(0);
        world.tick(4, 10);
        assert_eq!(world.est.ceiling(), stepped);
        // Twice in a row, while it grows into its ceiling (it holds less): all it holds and
        // has in swap, at once.
        world.held = stepped.scale(0.9);
        world.swap_ins = Some(bar);
        world.tick(5, 10);
        assert_eq!(world.est.ceiling(), stepped);
        world.tick(6, 10);
        let back = max().scale((world.held.0 + swapped) as f64 / max().0 as f64);
        assert_eq!(world.est.ceiling(), back);
        assert_eq!(
            world.est.estimate(),
            back,
            "the averages restart at the wake"
        );
        // A quiet period touching less: the ceiling falls at the slow average's pace, not to
        // the 10% it touched before.
        world.swap_ins = Some(0);
        for t in 7..TICKS {
            world.tick(t, 10);
        }
        world.end_period(10);
        world.tick(0, 0);
        world.period(10);
        world.tick(0, 0);
        let first = world.est.ceiling();
        assert!(
            first > back.scale(0.8),
            "{first} of {back} after a quiet period"
        );
        for _ in 0..30 {
            world.period(10);
        }
        world.tick(0, 0);
        let fallen = world.est.ceiling();
        assert!(
            fallen < back.scale(0.5),
            "{fallen} of {back} after 30 quiet periods"
        );
        // ESX's rule (the configuration's default): only the step, once a period.
        let mut esx = World::new();
        esx.swap_ins = Some(0);
        esx.period(10);
        esx.tick(0, 0);
        esx.held = esx.est.ceiling();
        esx.swapped = Some(Pages::from_mib(73));
        esx.swap_ins = Some(bar);
        for t in 1..5 {
            esx.tick(t, 10);
        }
        assert_eq!(
            esx.est.ceiling(),
            max().scale(esx.held.0 as f64 / max().0 as f64 * 1.125)
        );
        // A few pages in swap, all of them faulted back over and over: under 256 a second,
        // not woken.
        let mut quiet = World::new();
        quiet.est.wake = true;
        quiet.swap_ins = Some(0);
        quiet.period(10);
        quiet.tick(0, 0);
        quiet.held = quiet.est.ceiling();
        quiet.swapped = Some(Pages(SWAP_IN_FAULTS_PER_S as u64 - 1));
        quiet.swap_ins = Some(SWAP_IN_FAULTS_PER_S as u64 - 1);
        for t in 1..5 {
            quiet.tick(t, 10);
        }
        assert_eq!(
            quiet.est.ceiling(),
            max().scale(quiet.held.0 as f64 / max().0 as f64 * 1.125)
        );
    }

    #[test]
    fn an_unmeasured_tenant_is_not_capped_by_its_faults() {
        let mut est = SamplingEstimator::new(SamplingConfig::default());
        let mut obs = TenantObservation::new(TenantId(0), Pages::from_mib(100));
        obs.swap_ins = Some(50);
        feed_obs(&mut est, &obs);
        feed_obs(&mut est, &obs);
        assert_eq!(est.ceiling(), max());
    }

    fn feed_obs(est: &mut SamplingEstimator, obs: &TenantObservation) -> Pages {
        est.update(&EstimatorInput {
            now: Duration::from_secs(1),
            min: Pages::from_mib(128),
            max: max(),
            obs,
            probe: true,
        })
    }

    #[test]
    fn a_resumed_estimate_counts_as_one_period_of_samples() {
        let mut est = SamplingEstimator::new(SamplingConfig::default());
        est.resume(max().scale(0.5), max());
        assert_eq!(slow(&est), Some(0.5));
        assert_eq!(fast(&est), Some(0.5));
        let c = est.completed.unwrap();
        assert_eq!(c.slow.weight, 1.0 / 100.0);
        assert_eq!(c.upper, wilson_upper(0.5, 0.01));
        // Without fault counts it keeps headroom over the resumed estimate, as before.
        feed(&mut est, Duration::from_secs(1), None);
        assert_eq!(est.ceiling(), max().scale(0.5 * 1.5));
    }
}
