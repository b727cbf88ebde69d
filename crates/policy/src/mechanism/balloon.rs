//! The guest balloon's planner (ESX): the balloon tracks the target in every state, and what it cannot take (no driver, a stalled driver, the guest's limit) is left to the levers after it.
//!
//! `balloon_target = min(memory - (target + covered), driver limit)`, where `memory` is the
//! guest's and `covered` is what sharing and the application balloon already take: the
//! balloon sizes the guest so that it holds its target (also when policy's max for the tenant
//! is set below the guest's memory). It is cheap and cooperative (the guest picks its own victims) and deflates
//! by itself when the target rises. Left for later levers: everything without a driver or with
//! a stalled one, else what lies beyond the guest's limit. A driver that was asked to grow and
//! did not move for `balloon_stall_ticks` ticks is stalled ([`BalloonWatch`]). Cost: O(1).

use super::Need;
use memtide_model::{BalloonLever, BalloonNote, Pages};

/// Plans the balloon and takes what it covers out of `need.left`.
pub(super) fn plan(need: &mut Need, lever: &BalloonLever, stalled: bool) -> BalloonNote {
    let sized_for = (need.target + need.covered()).min(lever.memory);
    let target = lever
        .driver
        .map(|d| lever.memory.saturating_sub(sized_for).min(d.limit));
    let beyond = match lever.driver {
        Some(d) if !stalled => need.left.saturating_sub(d.limit.saturating_sub(lever.size)),
        _ => need.left,
    };
    need.left = beyond;
    BalloonNote {
        size: lever.size,
        target,
        limit: lever.driver.map(|d| d.limit),
        stalled,
        beyond,
    }
}

/// Watches a balloon driver across ticks: the ticks in a row it was asked to grow and did not.
#[derive(Clone, Debug, Default)]
pub struct BalloonWatch {
    /// The balloon's size at the previous tick.
    last_size: Option<Pages>,
    /// The target asked at the previous tick.
    last_target: Option<Pages>,
    still_ticks: u32,
    stall_ticks: u32,
}

impl BalloonWatch {
    /// Takes this tick's balloon size; `stall_ticks` still ticks make a stall.
    pub fn observe(&mut self, size: Pages, stall_ticks: u32) {
        let wanted_more = matches!(self.last_target, Some(t) if t > size);
        let moved = self.last_size.is_none_or(|prev| size > prev);
        self.still_ticks = if wanted_more && !moved {
            self.still_ticks.saturating_add(1)
        } else {
            0
        };
        self.last_size = Some(size);
        self.stall_ticks = stall_ticks;
    }

    /// The target asked this tick (`None`: none).
    pub fn asked(&mut self, target: Option<Pages>) {
        self.last_target = target;
    }

    /// The driver made no progress toward a larger target for `stall_ticks` ticks.
    pub fn stalled(&self) -> bool {
        self.still_ticks >= self.stall_ticks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_that_does_not_grow_when_asked_stalls_after_the_given_ticks() {
        let mut w = BalloonWatch::default();
        w.observe(Pages(10), 2);
        w.asked(Some(Pages(50)));
        w.observe(Pages(10), 2);
        assert!(!w.stalled());
        w.asked(Some(Pages(50)));
        w.observe(Pages(10), 2);
        assert!(w.stalled());
        // Progress resets it.
        w.asked(Some(Pages(50)));
        w.observe(Pages(20), 2);
        assert!(!w.stalled());
    }

    #[test]
    fn a_balloon_asked_to_shrink_or_at_its_target_never_stalls() {
        let mut w = BalloonWatch::default();
        for _ in 0..5 {
            w.observe(Pages(10), 1);
            w.asked(Some(Pages(10)));
        }
        w.observe(Pages(10), 1);
        assert!(!w.stalled());
    }
}
