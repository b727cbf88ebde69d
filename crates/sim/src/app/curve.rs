//! The miss-ratio curve an application's agent samples from its pool's requests, for Gemini's cache quotas: SHARDS (fixed size, `memtide_cache::Shards`) over the pages the pool is asked for, one curve per window, reported in the agent's statistics.
//!
//! The agent sees every request to its pool (it is linked into the application), hashes each
//! page and keeps the distances of a sample of at most
//! [`WindowedShards::SAMPLE_BLOCKS`] of them: a few hundred kilobytes whatever the pool's
//! size. At the end of each `window` the curve of the
//! window's requests becomes the one reported, read at [`MissCurve::POINTS`] sizes evenly up
//! to the pool's largest; the sample's blocks and their stack carry over, so a page asked for
//! in the window before keeps its distance. The first window only fills the stack: every
//! page's first request in it is a miss at every size, which says nothing of the pool's size,
//! so no curve is reported until the second window ends.

use memtide_cache::WindowedShards;
use memtide_model::{MissCurve, Pages};
use std::time::Duration;

/// A pool's sampled curve (see the module docs).
#[derive(Clone, Debug)]
pub struct CurveSampler {
    shards: WindowedShards,
    window: Duration,
    /// When the window under way began (`None` before the first report).
    since: Option<Duration>,
    /// The largest pool, in pages: the curve's last point.
    pages: u32,
    /// The last full window's curve.
    last: Option<MissCurve>,
}

impl CurveSampler {
    /// A sampler reporting the curve of each `window` for a pool of at most `pages`.
    pub fn new(window: Duration, pages: u32) -> CurveSampler {
        CurveSampler {
            shards: WindowedShards::new(),
            window,
            since: None,
            pages,
            last: None,
        }
    }

    /// One request to `page`.
    #[inline]
    pub fn access(&mut self, page: u32) {
        self.shards.access(u64::from(page));
    }

    /// The curve to report at `now`: the last full window's (`None` until the second has
    /// ended, or for a window without requests).
    pub fn curve(&mut self, now: Duration) -> Option<MissCurve> {
        let since = *self.since.get_or_insert(now);
        if now.saturating_sub(since) >= self.window {
            self.since = Some(now);
            self.last = self
                .shards
                .end_window(u64::from(self.pages), MissCurve::POINTS as u64)
                .and_then(|points| {
                    MissCurve::new(points.into_iter().map(|(s, m)| (Pages(s), m))).ok()
                });
        }
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_curve_comes_at_each_window_s_end_from_that_window_s_requests() {
        let mut s = CurveSampler::new(Duration::from_secs(10), 1600);
        assert_eq!(s.curve(Duration::ZERO), None, "no window has ended");
        // The first window warms the stack: a loop over 800 pages.
        for p in 0..800 {
            s.access(p);
        }
        assert_eq!(
            s.curve(Duration::from_secs(10)),
            None,
            "the first window's is none"
        );
        // Then the same loop: every page's distance is 799, a hit in a pool of 800 pages and
        // a miss in any smaller (without the first window, all misses, cold).
        for p in 0..800 {
            s.access(p);
        }
        assert_eq!(s.curve(Duration::from_secs(15)), None);
        let c = s.curve(Duration::from_secs(20)).expect("a window ended");
        assert_eq!(c.points().count(), MissCurve::POINTS);
        assert_eq!(c.last_size(), Pages(1600));
        assert!((c.miss_ratio(Pages(700)) - 1.0).abs() < 1e-6);
        assert!(c.miss_ratio(Pages(800)) < 1e-6);
        assert_eq!(
            s.curve(Duration::from_secs(25)),
            Some(c),
            "the last full window's"
        );
    }
}
