//! A pool's miss-ratio curve as its agent reports it, and the service-level objective a tenant's pool is held to (Gemini).
//!
//! An application's agent samples its pool's requests (SHARDS: a hash-chosen subset of the
//! blocks, their LRU stack distances scaled up) and reports the miss ratio an LRU pool would
//! have at a few sizes. Between two points the curve is read as the straight line through
//! them, and below the first from an empty pool (every request a miss): a chord of a convex
//! curve lies above it, so a curve read this way promises no more hits than the sample saw.
//! Above the last point the miss ratio stays at the last one's.
//!
//! Fixed-size and `Copy`: at most [`MissCurve::POINTS`] points, 200 bytes. A lever holds it
//! boxed, so the observation of a tenant without one (most of them) grows by a pointer only.

use crate::units::{Bytes, Pages};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Gemini's latency model and search as memtide configures them unless told otherwise (the
/// policy and the configuration files share these): a pool hit 2 µs, a miss 3500 µs (the
/// paper's D', its average disk read), the budget in 64 steps.
pub const DEFAULT_HIT_US: f64 = 2.0;
pub const DEFAULT_MISS_US: f64 = 3500.0;
pub const DEFAULT_QUOTA_STEPS: u32 = 64;

/// Parts per million: the curve's miss ratios, exact and ordered (`Eq`).
const PPM: f64 = 1e6;

/// A pool's miss ratio at a few sizes (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissCurve {
    len: u8,
    /// Pool sizes, strictly ascending; `len` of them are the curve's.
    sizes: [Pages; MissCurve::POINTS],
    /// The miss ratio at each size, in parts per million, never rising.
    miss_ppm: [u32; MissCurve::POINTS],
}

/// Why a list of points is not a curve.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CurveError {
    #[error("a curve has 1 to {max} points, not {len}", max = MissCurve::POINTS)]
    Points { len: usize },
    #[error("point {at}: size {size} is not above the previous point's {previous}")]
    NotAscending {
        at: usize,
        size: Pages,
        previous: Pages,
    },
    #[error("point {at}: miss ratio {ratio} is outside [0, 1]")]
    Ratio { at: usize, ratio: f64 },
    #[error("point {at}: miss ratio {ratio} is above the previous point's {previous}: an LRU pool never misses more when larger")]
    Rising {
        at: usize,
        ratio: f64,
        previous: f64,
    },
}

impl MissCurve {
    /// Most points a curve holds.
    pub const POINTS: usize = 16;

    /// A curve through `points` (size, miss ratio): 1 to [`MissCurve::POINTS`] of them, sizes
    /// strictly ascending from above zero, ratios in [0, 1] and never rising.
    pub fn new(points: impl IntoIterator<Item = (Pages, f64)>) -> Result<MissCurve, CurveError> {
        let mut curve = MissCurve {
            len: 0,
            sizes: [Pages::ZERO; MissCurve::POINTS],
            miss_ppm: [0; MissCurve::POINTS],
        };
        let mut previous = (Pages::ZERO, 1.0f64);
        let mut len = 0usize;
        for (at, (size, ratio)) in points.into_iter().enumerate() {
            len += 1;
            if at >= MissCurve::POINTS {
                continue;
            }
            if size <= previous.0 {
                return Err(CurveError::NotAscending {
                    at,
                    size,
                    previous: previous.0,
                });
            }
            if !(0.0..=1.0).contains(&ratio) {
                return Err(CurveError::Ratio { at, ratio });
            }
            if ratio > previous.1 {
                return Err(CurveError::Rising {
                    at,
                    ratio,
                    previous: previous.1,
                });
            }
            curve.sizes[at] = size;
            curve.miss_ppm[at] = (ratio * PPM).round() as u32;
            previous = (size, ratio);
        }
        if len == 0 || len > MissCurve::POINTS {
            return Err(CurveError::Points { len });
        }
        curve.len = len as u8;
        Ok(curve)
    }

    /// The curve of points given in bytes (as the balloon protocol carries them), each size
    /// rounded up to a page: `None` where they make no curve in pages (two sizes within one
    /// page, or any rule of [`MissCurve::new`] broken).
    pub fn of_bytes(points: impl IntoIterator<Item = (u64, f64)>) -> Option<MissCurve> {
        MissCurve::new(
            points
                .into_iter()
                .map(|(b, r)| (Bytes(b).to_pages_ceil(), r)),
        )
        .ok()
    }

    /// The curve's points, ascending by size.
    pub fn points(&self) -> impl Iterator<Item = (Pages, f64)> + '_ {
        (0..usize::from(self.len)).map(|i| (self.sizes[i], f64::from(self.miss_ppm[i]) / PPM))
    }

    /// The miss ratio of a pool of `size` (see the module docs for between the points).
    pub fn miss_ratio(&self, size: Pages) -> f64 {
        let mut below = (Pages::ZERO, PPM);
        for i in 0..usize::from(self.len) {
            let (s, m) = (self.sizes[i], f64::from(self.miss_ppm[i]));
            if size <= s {
                let span = (s.0 - below.0 .0) as f64;
                let into = (size.0 - below.0 .0) as f64;
                return (below.1 + (m - below.1) * into / span) / PPM;
            }
            below = (s, m);
        }
        below.1 / PPM
    }

    /// The largest size the curve knows.
    pub fn last_size(&self) -> Pages {
        self.sizes[usize::from(self.len) - 1]
    }
}

impl fmt::Display for MissCurve {
    /// `miss 62% at 64 MiB .. 3% at 1 GiB`: the first and last points.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = usize::from(self.len) - 1;
        let pct = |i: usize| f64::from(self.miss_ppm[i]) / 1e4;
        write!(f, "miss {:.0}% at {}", pct(0), self.sizes[0])?;
        if last > 0 {
            write!(f, " .. {:.0}% at {}", pct(last), self.sizes[last])?;
        }
        Ok(())
    }
}

/// What a tenant's pool latency is held to (Gemini's utilities; the policy's
/// `cache::utility` gives what a latency is worth under each).
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Slo {
    /// Mean data-access latency at most `target_us` (D); up to `slack` over (0.1: 10%) still
    /// counts as met.
    Strict { target_us: f64, slack: f64 },
    /// As low as what is left over allows.
    BestEffort,
}

/// Why a strict SLO's figures are refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SloError {
    /// (Said of the field, which a configuration error shows with its value.)
    #[error("must be more than 0")]
    Target(f64),
    #[error("must be a fraction >= 0")]
    Slack(f64),
}

impl SloError {
    /// The field at fault, as configuration files name it.
    pub fn field(&self) -> &'static str {
        match self {
            SloError::Target(_) => "target_us",
            SloError::Slack(_) => "slack",
        }
    }
}

impl Slo {
    /// A strict SLO of `target_us` with `slack`, checked: a finite target above 0 and a
    /// finite slack of at least 0.
    pub fn strict(target_us: f64, slack: f64) -> Result<Slo, SloError> {
        if !(target_us.is_finite() && target_us > 0.0) {
            return Err(SloError::Target(target_us));
        }
        if !(slack.is_finite() && slack >= 0.0) {
            return Err(SloError::Slack(slack));
        }
        Ok(Slo::Strict { target_us, slack })
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slo::Strict { target_us, slack } => {
                write!(f, "SLO {target_us:.0} µs (+{:.0}%)", slack * 100.0)
            }
            Slo::BestEffort => f.write_str("best effort"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(points: &[(u64, f64)]) -> Result<MissCurve, CurveError> {
        MissCurve::new(points.iter().map(|&(s, r)| (Pages(s), r)))
    }

    #[test]
    fn between_points_the_curve_is_the_chord_and_below_the_first_it_starts_from_all_misses() {
        let c = curve(&[(100, 0.5), (300, 0.1)]).unwrap();
        assert_eq!(c.miss_ratio(Pages(0)), 1.0);
        assert!((c.miss_ratio(Pages(50)) - 0.75).abs() < 1e-9);
        assert!((c.miss_ratio(Pages(100)) - 0.5).abs() < 1e-9);
        assert!((c.miss_ratio(Pages(200)) - 0.3).abs() < 1e-9);
        assert!((c.miss_ratio(Pages(10_000)) - 0.1).abs() < 1e-9);
        assert_eq!(c.last_size(), Pages(300));
        assert_eq!(c.points().count(), 2);
    }

    #[test]
    fn a_curve_that_rises_goes_backwards_or_has_too_many_points_is_refused() {
        assert!(matches!(
            curve(&[(100, 0.2), (200, 0.3)]),
            Err(CurveError::Rising { at: 1, .. })
        ));
        assert!(matches!(
            curve(&[(100, 0.2), (100, 0.1)]),
            Err(CurveError::NotAscending { at: 1, .. })
        ));
        assert!(matches!(
            curve(&[(0, 1.0)]),
            Err(CurveError::NotAscending { at: 0, .. })
        ));
        assert!(matches!(
            curve(&[(100, 1.5)]),
            Err(CurveError::Ratio { at: 0, .. })
        ));
        assert!(matches!(curve(&[]), Err(CurveError::Points { len: 0 })));
        let many: Vec<(u64, f64)> = (1..=17).map(|i| (i * 10, 0.5)).collect();
        assert!(matches!(curve(&many), Err(CurveError::Points { len: 17 })));
        let e = curve(&[(100, 0.2), (200, 0.3)]).unwrap_err().to_string();
        assert!(e.contains("point 1") && e.contains("0.3"), "{e}");
    }

    #[test]
    fn slos_read_as_snake_case_tables() {
        let s: Slo = serde_json::from_str(r#"{"strict":{"target_us":500.0,"slack":0.1}}"#).unwrap();
        assert_eq!(
            s,
            Slo::Strict {
                target_us: 500.0,
                slack: 0.1
            }
        );
        assert_eq!(s.to_string(), "SLO 500 µs (+10%)");
        assert_eq!(Slo::strict(500.0, 0.1), Ok(s));
        assert_eq!(Slo::strict(0.0, 0.1).unwrap_err().field(), "target_us");
        assert_eq!(Slo::strict(500.0, -1.0).unwrap_err().field(), "slack");
    }
}
