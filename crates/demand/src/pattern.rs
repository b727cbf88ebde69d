//! Demand patterns: how many requests a second a tenant's clients send at each moment of a run, as text (`bursty:every=120s,burst=30s,rate=500`) and as a schedule fixed by a seed.
//!
//! The density benchmark (issue 31) drives every tenant by one of three shapes, the same for
//! every policy it compares and the same in the simulator:
//!
//! - **bursty**: idle (no request at all) most of the time, with bursts of `burst` at `rate`
//!   requests a second. The idle gaps, the first one too, are drawn from an exponential
//!   distribution of mean `every` (memoryless arrivals), so tenants of different seeds wake at
//!   different times and a wake-up finds the tenant's memory as a manager left it.
//! - **diurnal**: a day compressed into `period`: `rate(t) = low + (high - low) (1 - cos(2π
//!   (t / period + phase))) / 2`, from `low` at the trough to `high` at the peak.
//! - **busy**: `rate` requests a second throughout.
//!
//! A [`Schedule`] is a pattern laid out over a run of a given length from a seed, once;
//! [`Schedule::rate_at`] is then a binary search over the bursts. Requests are paced evenly at
//! the rate of the moment ([`Schedule::next_send`]), so two runs of one seed send the same
//! requests at the same times (the load is open-loop: a slow answer does not delay the next).

use crate::DemandError;
use memtide_model::written::parse_duration;
use memtide_rng::SimRng;
use std::fmt;

/// The longest run a schedule lays out: a day. A bursty schedule holds one span per burst, at
/// most one a second: 86,400 spans, 1.4 MB.
pub const MAX_LENGTH_S: f64 = 86_400.0;
/// The highest rate a pattern may ask, in requests a second.
pub const MAX_RATE: f64 = 1_000_000.0;
/// The shortest burst, idle gap mean and diurnal period.
const MIN_SPAN_S: f64 = 1.0;

/// A tenant's demand pattern (see the module docs). Durations are in seconds, rates in
/// requests a second.
#[derive(Clone, Debug, PartialEq)]
pub enum Demand {
    Bursty {
        every: f64,
        burst: f64,
        rate: f64,
    },
    Diurnal {
        period: f64,
        low: f64,
        high: f64,
        phase: f64,
    },
    Busy {
        rate: f64,
    },
}

impl Demand {
    /// Parses `KIND:KEY=VALUE,...`: `bursty:every=120s,burst=30s,rate=500`,
    /// `diurnal:period=10m,low=20,high=400[,phase=0.25]`, `busy:rate=300`. Every key but
    /// `phase` is required, none may repeat, and each is checked against its bounds.
    pub fn parse(text: &str) -> Result<Demand, DemandError> {
        let bad = |why: String| DemandError::Pattern {
            text: text.to_string(),
            why,
        };
        let (kind, rest) = text
            .split_once(':')
            .ok_or_else(|| bad("expected KIND:KEY=VALUE,... (bursty, diurnal or busy)".into()))?;
        let mut fields: Vec<(&str, &str)> = Vec::new();
        for pair in rest.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("`{pair}` is not KEY=VALUE")))?;
            let k = k.trim();
            if fields.iter().any(|(seen, _)| *seen == k) {
                return Err(bad(format!("`{k}` is given twice")));
            }
            fields.push((k, v.trim()));
        }
        let allowed: &[&str] = match kind.trim() {
            "bursty" => &["every", "burst", "rate"],
            "diurnal" => &["period", "low", "high", "phase"],
            "busy" => &["rate"],
            other => {
                return Err(bad(format!(
                    "unknown kind `{other}` (bursty, diurnal or busy)"
                )))
            }
        };
        if let Some((k, _)) = fields.iter().find(|(k, _)| !allowed.contains(k)) {
            return Err(bad(format!(
                "unknown key `{k}` for {} (keys: {})",
                kind.trim(),
                allowed.join(", ")
            )));
        }
        let get = |k: &str| fields.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let need = |k: &str| get(k).ok_or_else(|| bad(format!("`{k}` is missing")));
        let seconds = |k: &str| -> Result<f64, DemandError> {
            let v = need(k)?;
            let d = parse_duration(v).map_err(|e| bad(format!("{k} = {v}: {e}")))?;
            let s = d.as_secs_f64();
            if !(MIN_SPAN_S..=MAX_LENGTH_S).contains(&s) {
                return Err(bad(format!(
                    "{k} = {v} must be from {MIN_SPAN_S} s to {MAX_LENGTH_S} s"
                )));
            }
            Ok(s)
        };
        let number = |k: &str, lo: f64, hi: f64| -> Result<f64, DemandError> {
            let v = need(k)?;
            let x: f64 = v
                .parse()
                .map_err(|_| bad(format!("{k} = {v} is not a number")))?;
            if !(x.is_finite() && (lo..=hi).contains(&x)) {
                return Err(bad(format!("{k} = {v} must be from {lo} to {hi}")));
            }
            Ok(x)
        };
        let rate = |k: &str| -> Result<f64, DemandError> {
            let x = number(k, 0.0, MAX_RATE)?;
            if x == 0.0 {
                return Err(bad(format!("{k} = 0: a pattern must send something")));
            }
            Ok(x)
        };
        let demand = match kind.trim() {
            "bursty" => Demand::Bursty {
                every: seconds("every")?,
                burst: seconds("burst")?,
                rate: rate("rate")?,
            },
            "diurnal" => {
                let (low, high) = (number("low", 0.0, MAX_RATE)?, rate("high")?);
                if low > high {
                    return Err(bad(format!("low = {low} is above high = {high}")));
                }
                Demand::Diurnal {
                    period: seconds("period")?,
                    low,
                    high,
                    phase: match get("phase") {
                        Some(_) => {
                            let p = number("phase", 0.0, 1.0)?;
                            if p == 1.0 {
                                0.0
                            } else {
                                p
                            }
                        }
                        None => 0.0,
                    },
                }
            }
            _ => Demand::Busy {
                rate: rate("rate")?,
            },
        };
        Ok(demand)
    }

    /// The highest rate the pattern reaches.
    pub fn peak_rate(&self) -> f64 {
        match *self {
            Demand::Bursty { rate, .. } | Demand::Busy { rate } => rate,
            Demand::Diurnal { high, .. } => high,
        }
    }
}

impl fmt::Display for Demand {
    /// The text [`Demand::parse`] reads back, durations in seconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Demand::Bursty { every, burst, rate } => {
                write!(f, "bursty:every={every}s,burst={burst}s,rate={rate}")
            }
            Demand::Diurnal {
                period,
                low,
                high,
                phase,
            } => write!(
                f,
                "diurnal:period={period}s,low={low},high={high},phase={phase}"
            ),
            Demand::Busy { rate } => write!(f, "busy:rate={rate}"),
        }
    }
}

/// The seed of tenant `index` of a run seeded `run`: independent streams for the tenants of
/// one run, the same in every run of that seed.
pub fn tenant_seed(run: u64, index: u64) -> u64 {
    SimRng::new(run).fork(index).next_u64()
}

/// The send after `t` on the grid `start + k / rate`.
fn grid_next(start: f64, t: f64, rate: f64) -> f64 {
    start + (((t - start) * rate).round() + 1.0) / rate
}

/// A pattern laid out over `[0, length)` seconds from a seed (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    demand: Demand,
    length: f64,
    /// A bursty pattern's bursts, `[start, end)`, in order, apart from each other.
    bursts: Vec<(f64, f64)>,
}

impl Schedule {
    /// Lays `demand` out over `length` seconds (at most [`MAX_LENGTH_S`]) from `seed`.
    pub fn new(demand: &Demand, seed: u64, length: f64) -> Result<Schedule, DemandError> {
        if !(length.is_finite() && length > 0.0 && length <= MAX_LENGTH_S) {
            return Err(DemandError::Length { length });
        }
        let mut bursts = Vec::new();
        if let Demand::Bursty { every, burst, .. } = *demand {
            let mut rng = SimRng::new(seed);
            let mut t = 0.0;
            loop {
                // Exponential with mean `every`; 1 - u is in (0, 1], so its log is finite.
                let gap = -every * (1.0 - rng.next_f64()).ln();
                let start = t + gap;
                if start >= length {
                    break;
                }
                let end = (start + burst).min(length);
                bursts.push((start, end));
                t = end;
            }
        }
        Ok(Schedule {
            demand: demand.clone(),
            length,
            bursts,
        })
    }

    /// The run's length, in seconds.
    pub fn length(&self) -> f64 {
        self.length
    }

    /// A bursty pattern's bursts, `[start, end)` in seconds (none for the other shapes).
    pub fn bursts(&self) -> &[(f64, f64)] {
        &self.bursts
    }

    /// Requests a second at `t` (0 outside `[0, length)`).
    pub fn rate_at(&self, t: f64) -> f64 {
        if !(0.0..self.length).contains(&t) {
            return 0.0;
        }
        match self.demand {
            Demand::Busy { rate } => rate,
            Demand::Diurnal {
                period,
                low,
                high,
                phase,
            } => {
                let angle = std::f64::consts::TAU * (t / period + phase);
                low + (high - low) * (1.0 - angle.cos()) / 2.0
            }
            Demand::Bursty { rate, .. } => {
                let i = self.bursts.partition_point(|&(start, _)| start <= t);
                match i.checked_sub(1).map(|i| self.bursts[i]) {
                    Some((_, end)) if t < end => rate,
                    _ => 0.0,
                }
            }
        }
    }

    /// The time of the run's first request: 0 when the pattern is active from the start,
    /// else its first burst's start; `None` when it sends nothing in the run.
    pub fn first_send(&self) -> Option<f64> {
        if self.rate_at(0.0) > 0.0 {
            return Some(0.0);
        }
        self.next_send(0.0)
    }

    /// The time of the request after one sent at `t`: `1 / rate` later while the tenant is
    /// active, else the start of its next burst; `None` once the run is over. (A diurnal
    /// pattern whose `low` is 0 waits out its trough one slow request at a time, never more
    /// than a tenth of its period.)
    pub fn next_send(&self, t: f64) -> Option<f64> {
        let rate = self.rate_at(t);
        let next = match self.demand {
            Demand::Diurnal { period, .. } if rate > 0.0 => t + (1.0 / rate).min(period / 10.0),
            Demand::Diurnal { period, .. } => t + period / 10.0,
            // On the grid `start + k / rate` of the busy run or of the burst (no drift).
            Demand::Busy { .. } => grid_next(0.0, t, rate),
            Demand::Bursty { .. } => {
                let i = self.bursts.partition_point(|&(start, _)| start <= t);
                match i.checked_sub(1).map(|j| self.bursts[j]) {
                    Some((start, end)) if rate > 0.0 && grid_next(start, t, rate) < end => {
                        grid_next(start, t, rate)
                    }
                    // Past the end of a burst, or between bursts: the next burst's start.
                    _ => self.bursts.get(i)?.0,
                }
            }
        };
        (next < self.length).then_some(next)
    }

    /// The moments the tenant wakes from idle: its bursts' starts (a busy tenant's run start;
    /// a diurnal one never sleeps, so none).
    pub fn wake_ups(&self) -> Vec<f64> {
        match self.demand {
            Demand::Bursty { .. } => self.bursts.iter().map(|&(s, _)| s).collect(),
            Demand::Busy { .. } => vec![0.0],
            Demand::Diurnal { .. } => Vec::new(),
        }
    }

    /// The requests the pattern sends in `[a, b)`, as a real number (the integral of the
    /// rate).
    pub fn requests_between(&self, a: f64, b: f64) -> f64 {
        let (a, b) = (a.max(0.0), b.min(self.length));
        if b <= a {
            return 0.0;
        }
        match self.demand {
            Demand::Busy { rate } => rate * (b - a),
            Demand::Diurnal {
                period,
                low,
                high,
                phase,
            } => {
                let w = std::f64::consts::TAU / period;
                let sin = |t: f64| (w * t + std::f64::consts::TAU * phase).sin();
                let mean = (low + high) / 2.0;
                mean * (b - a) - (high - low) / 2.0 * (sin(b) - sin(a)) / w
            }
            Demand::Bursty { rate, .. } => {
                let first = self.bursts.partition_point(|&(_, end)| end <= a);
                self.bursts[first..]
                    .iter()
                    .take_while(|&&(start, _)| start < b)
                    .map(|&(start, end)| rate * (end.min(b) - start.max(a)).max(0.0))
                    .sum()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bursty() -> Demand {
        Demand::parse("bursty:every=120s,burst=30s,rate=500").unwrap()
    }

    #[test]
    fn each_shape_parses_and_prints_back() {
        for text in [
            "bursty:every=120s,burst=30s,rate=500",
            "diurnal:period=600s,low=20,high=400,phase=0.25",
            "busy:rate=300",
        ] {
            let d = Demand::parse(text).unwrap();
            assert_eq!(d.to_string(), text);
            assert_eq!(Demand::parse(&d.to_string()).unwrap(), d);
        }
        assert_eq!(
            Demand::parse("diurnal:period=10m,low=0,high=400").unwrap(),
            Demand::Diurnal {
                period: 600.0,
                low: 0.0,
                high: 400.0,
                phase: 0.0
            }
        );
    }

    #[test]
    fn bad_patterns_name_what_is_wrong() {
        for (text, says) in [
            ("bursty", "expected KIND:KEY=VALUE"),
            ("steady:rate=1", "unknown kind `steady`"),
            ("busy:rate=1,rate=2", "`rate` is given twice"),
            ("busy:speed=1", "unknown key `speed` for busy"),
            ("bursty:every=1s,rate=5", "`burst` is missing"),
            ("busy:rate=0", "rate = 0: a pattern must send something"),
            ("busy:rate=1e9", "rate = 1e9 must be from 0 to 1000000"),
            ("busy:rate=NaN", "rate = NaN must be from"),
            ("busy:rate", "`rate` is not KEY=VALUE"),
            (
                "bursty:every=0s,burst=1s,rate=1",
                "every = 0s must be from 1 s",
            ),
            ("bursty:every=2d,burst=1s,rate=1", "every = 2d"),
            ("bursty:every=x,burst=1s,rate=1", "every = x:"),
            (
                "diurnal:period=1m,low=9,high=3",
                "low = 9 is above high = 3",
            ),
            (
                "diurnal:period=1m,low=0,high=3,phase=2",
                "phase = 2 must be from 0 to 1",
            ),
        ] {
            let err = Demand::parse(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
            assert!(err.contains(text), "{text}: {err}");
        }
    }

    #[test]
    fn a_seed_fixes_the_bursts_and_another_seed_moves_them() {
        let d = bursty();
        let a = Schedule::new(&d, 7, 3600.0).unwrap();
        assert_eq!(a, Schedule::new(&d, 7, 3600.0).unwrap());
        assert_ne!(a.bursts(), Schedule::new(&d, 8, 3600.0).unwrap().bursts());
    }

    #[test]
    fn bursts_are_apart_within_the_run_and_as_long_as_asked() {
        let s = Schedule::new(&bursty(), 1, 36_000.0).unwrap();
        let b = s.bursts();
        // Mean cycle 150 s: about 240 bursts in 10 h.
        assert!((180..300).contains(&b.len()), "{}", b.len());
        for w in b.windows(2) {
            assert!(w[0].1 < w[1].0, "{w:?}");
        }
        for &(start, end) in &b[..b.len() - 1] {
            assert!((end - start - 30.0).abs() < 1e-9);
        }
        assert!(b.last().unwrap().1 <= 36_000.0);
        // The gaps average `every`.
        let mut prev = 0.0;
        let gaps: Vec<f64> = b
            .iter()
            .map(|&(s, e)| {
                let g = s - prev;
                prev = e;
                g
            })
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((100.0..140.0).contains(&mean), "{mean}");
    }

    #[test]
    fn the_rate_is_the_bursts_rate_inside_a_burst_and_zero_between() {
        let s = Schedule::new(&bursty(), 3, 3600.0).unwrap();
        let (start, end) = s.bursts()[0];
        assert_eq!(s.rate_at(start), 500.0);
        assert_eq!(s.rate_at((start + end) / 2.0), 500.0);
        assert_eq!(s.rate_at(end), 0.0);
        assert_eq!(s.rate_at(start - 0.001), 0.0);
        assert_eq!(s.rate_at(-1.0), 0.0);
        assert_eq!(s.rate_at(3600.0), 0.0);
    }

    #[test]
    fn sends_are_paced_at_the_rate_and_skip_to_the_next_burst() {
        let s = Schedule::new(&bursty(), 3, 3600.0).unwrap();
        let (start, end) = s.bursts()[0];
        assert_eq!(s.next_send(0.0), Some(start));
        assert_eq!(s.first_send(), Some(start));
        assert_eq!(
            Schedule::new(&Demand::Busy { rate: 1.0 }, 0, 5.0)
                .unwrap()
                .first_send(),
            Some(0.0)
        );
        let mut t = start;
        let mut sent = 0;
        while t < end {
            sent += 1;
            t = s.next_send(t).unwrap();
        }
        assert!((14_999..=15_001).contains(&sent), "{sent}");
        assert_eq!(
            t,
            s.bursts()[1].0,
            "after the burst, the next burst's start"
        );
        let busy = Schedule::new(&Demand::Busy { rate: 10.0 }, 0, 1.0).unwrap();
        let mut times = vec![0.0];
        while let Some(next) = busy.next_send(*times.last().unwrap()) {
            times.push(next);
        }
        assert_eq!(times.len(), 10);
    }

    #[test]
    fn a_diurnal_rate_goes_from_low_to_high_and_back_in_a_period() {
        let d = Demand::parse("diurnal:period=100s,low=10,high=110").unwrap();
        let s = Schedule::new(&d, 0, 1000.0).unwrap();
        assert!((s.rate_at(0.0) - 10.0).abs() < 1e-9);
        assert!((s.rate_at(50.0) - 110.0).abs() < 1e-9);
        assert!((s.rate_at(100.0) - 10.0).abs() < 1e-9);
        let shifted = Demand::parse("diurnal:period=100s,low=10,high=110,phase=0.5").unwrap();
        let s2 = Schedule::new(&shifted, 0, 1000.0).unwrap();
        assert!((s2.rate_at(0.0) - 110.0).abs() < 1e-9);
        // A trough at 0 is waited out a tenth of the period at most.
        let zero = Demand::parse("diurnal:period=100s,low=0,high=10").unwrap();
        let s3 = Schedule::new(&zero, 0, 1000.0).unwrap();
        assert_eq!(s3.next_send(0.0), Some(10.0));
        assert!(s3.wake_ups().is_empty());
    }

    #[test]
    fn requests_between_is_the_integral_of_the_rate() {
        for d in [
            bursty(),
            Demand::parse("diurnal:period=90s,low=5,high=300,phase=0.3").unwrap(),
            Demand::Busy { rate: 42.0 },
        ] {
            let s = Schedule::new(&d, 11, 2000.0).unwrap();
            for (a, b) in [(0.0, 2000.0), (13.0, 977.5), (400.0, 401.0), (-5.0, 3.0)] {
                let steps = 200_000;
                let h = (b - a) / steps as f64;
                let riemann: f64 = (0..steps)
                    .map(|i| s.rate_at(a + (i as f64 + 0.5) * h) * h)
                    .sum();
                let exact = s.requests_between(a, b);
                assert!(
                    (exact - riemann).abs() <= 1e-3 * riemann.max(1.0) + 1.0,
                    "{d}: [{a}, {b}): {exact} vs {riemann}"
                );
            }
            assert_eq!(s.requests_between(5.0, 5.0), 0.0);
        }
    }

    #[test]
    fn wake_ups_are_burst_starts_or_a_busy_tenants_start() {
        let s = Schedule::new(&bursty(), 5, 3600.0).unwrap();
        let starts: Vec<f64> = s.bursts().iter().map(|b| b.0).collect();
        assert_eq!(s.wake_ups(), starts);
        let busy = Schedule::new(&Demand::Busy { rate: 1.0 }, 5, 10.0).unwrap();
        assert_eq!(busy.wake_ups(), vec![0.0]);
    }

    #[test]
    fn a_run_longer_than_a_day_or_not_positive_is_refused() {
        for length in [0.0, -1.0, f64::NAN, f64::INFINITY, 86_401.0] {
            let err = Schedule::new(&bursty(), 0, length).unwrap_err().to_string();
            assert!(err.contains("run length"), "{err}");
        }
    }

    #[test]
    fn tenants_of_one_run_get_different_seeds_every_time_the_same() {
        let seeds: Vec<u64> = (0..100).map(|i| tenant_seed(7, i)).collect();
        let mut unique = seeds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 100);
        assert_eq!(
            seeds,
            (0..100).map(|i| tenant_seed(7, i)).collect::<Vec<_>>()
        );
        assert_ne!(tenant_seed(8, 0), seeds[0]);
    }
}
