//! A guest's balloon driver: its target, and how far it may move in one tick (rate limit, size limit).
//!
//! The driver polls its target once per tick (ESX: once a second) and moves toward it by at
//! most `rate_per_s` pages per second, never beyond `limit`. Inflation itself (allocating
//! guest pages through the guest's reclaim, freeing their machine memory) is done by the
//! VM; the guest may refuse part of a step when nothing more can be freed. The pages held
//! are the guest's to keep (`Guest::give_to_balloon`): the driver only knows how many.

use crate::config::BalloonConfig;
use memtide_model::{BalloonDriverInfo, Pages};
use std::time::Duration;

const NS_PER_S: u128 = 1_000_000_000;

/// What the driver wants to do this tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Hold,
    /// Allocate this many more guest pages into the balloon.
    Inflate(u32),
    /// Give this many pages back to the guest.
    Deflate(u32),
}

/// The balloon driver of one VM. Without a driver the balloon only holds its initial pages,
/// forever.
#[derive(Clone, Debug)]
pub struct Balloon {
    driver: Option<BalloonConfig>,
    /// Last polled target (`None` before the first decision: hold).
    target: Option<u64>,
    /// Rate credit in page-nanoseconds, so fractional rates add up across ticks.
    credit: u128,
}

impl Balloon {
    /// A driver (or none) that holds until its first target.
    pub fn new(driver: Option<BalloonConfig>) -> Balloon {
        Balloon {
            driver,
            target: None,
            credit: 0,
        }
    }

    /// The driver as the host reports it.
    pub fn info(&self) -> Option<BalloonDriverInfo> {
        self.driver.as_ref().map(|d| BalloonDriverInfo {
            rate_per_s: d.rate_per_s,
            limit: d.limit,
        })
    }

    /// True if the guest has a driver.
    pub fn has_driver(&self) -> bool {
        self.driver.is_some()
    }

    /// The target the driver will poll next; ignored without a driver.
    pub fn set_target(&mut self, target: Option<Pages>) {
        if self.driver.is_some() {
            if let Some(t) = target {
                self.target = Some(t.0);
            }
        }
    }

    /// The target last set.
    pub fn target(&self) -> Option<Pages> {
        self.target.map(Pages)
    }

    /// Polls the target: how far a balloon of `size` pages moves during a tick of length
    /// `tick`.
    pub fn poll(&mut self, tick: Duration, size: u32) -> Step {
        let (Some(driver), Some(target)) = (&self.driver, self.target) else {
            return Step::Hold;
        };
        let wanted = target.min(driver.limit.0);
        let size = u64::from(size);
        if wanted == size {
            self.credit = 0;
            return Step::Hold;
        }
        self.credit += u128::from(driver.rate_per_s.0) * tick.as_nanos();
        let allowed = (self.credit / NS_PER_S).min(u128::from(u32::MAX)) as u64;
        if allowed == 0 {
            return Step::Hold;
        }
        // Only the fraction of a page carries over: unused whole pages do not pile up.
        self.credit %= NS_PER_S;
        let n = allowed.min(wanted.abs_diff(size)) as u32;
        if wanted > size {
            Step::Inflate(n)
        } else {
            Step::Deflate(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(rate: u64, limit: u64) -> Option<BalloonConfig> {
        Some(BalloonConfig {
            starts_after: Duration::ZERO,
            rate_per_s: Pages(rate),
            limit: Pages(limit),
        })
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn holds_until_a_target_is_set() {
        let mut b = Balloon::new(driver(10, 100));
        assert_eq!(b.poll(SECOND, 0), Step::Hold);
    }

    #[test]
    fn moves_at_most_the_rate_per_tick() {
        let mut b = Balloon::new(driver(10, 100));
        b.set_target(Some(Pages(25)));
        assert_eq!(b.poll(SECOND, 0), Step::Inflate(10));
    }

    #[test]
    fn never_inflates_beyond_the_limit() {
        let mut b = Balloon::new(driver(1000, 5));
        b.set_target(Some(Pages(25)));
        assert_eq!(b.poll(SECOND, 0), Step::Inflate(5));
    }

    #[test]
    fn deflates_toward_a_lower_target() {
        let mut b = Balloon::new(driver(2, 100));
        b.set_target(Some(Pages(0)));
        assert_eq!(b.poll(SECOND, 5), Step::Deflate(2));
    }

    #[test]
    fn fractional_rates_add_up_over_ticks() {
        let mut b = Balloon::new(driver(1, 100));
        b.set_target(Some(Pages(10)));
        let half = Duration::from_millis(500);
        assert_eq!(b.poll(half, 0), Step::Hold);
        assert_eq!(b.poll(half, 0), Step::Inflate(1));
    }

    #[test]
    fn without_a_driver_targets_are_ignored() {
        let mut b = Balloon::new(None);
        b.set_target(Some(Pages(0)));
        assert_eq!(b.poll(SECOND, 1), Step::Hold);
        assert_eq!(b.info(), None);
    }
}
