//! Reclamation states high/soft/hard/low from free machine memory, with hysteresis (ESX section 6.3).
//!
//! Thresholds are fractions of machine memory; ESX's defaults are high 6%, soft 4%, hard 2%,
//! low 1%. [`ReclamationTracker::update`] moves between the states as follows:
//!
//! - **Down** (more pressure), from any state and as many states at once as needed:
//!   free < low => `Low`; else free < hard => at least `Hard`; else free < soft => at least
//!   `Soft`. This rule never moves the state up.
//! - **Up** (less pressure), only when the down rule did not apply and only one state per
//!   update, after clearly exceeding the next higher threshold by `hysteresis` (default 1%
//!   of machine memory): `Low -> Hard` when free >= hard + h; `Hard -> Soft` when
//!   free >= soft + h; `Soft -> High` when free >= high + h.
//!
//! So with the defaults `Soft` is entered below 4% and left at 7%, `Hard` entered below 2%
//! and left at 5%, `Low` entered below 1% and left at 3%: free memory between two thresholds
//! keeps whatever state the host was in (5% free stays `Soft` after `Soft`, and `High` after
//! `High`). Targets aim free memory at the high threshold, so a host that dipped into soft
//! stays there (ballooning, paging only what balloons cannot) until demand falls below the
//! targets: no flapping between high and soft while a tenant presses against its target.
//! With no machine memory (`machine == 0`) the state does not change.

use memtide_model::{Pages, ReclamationState};

/// Thresholds as fractions of machine memory (ESX: 6%, 4%, 2%, 1%).
#[derive(Clone, Debug, PartialEq)]
pub struct ReclamationThresholds {
    pub high: f64,
    pub soft: f64,
    pub hard: f64,
    pub low: f64,
    /// How far (fraction of machine memory) free memory must exceed the next higher threshold
    /// before the state moves back up: ESX goes up "only after significantly exceeding" it.
    pub hysteresis: f64,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("reclamation thresholds must satisfy 0 < low < hard < soft < high < 1 and 0 <= hysteresis < 1 - high, got high={high} soft={soft} hard={hard} low={low} hysteresis={hysteresis}")]
pub struct ThresholdError {
    pub high: f64,
    pub soft: f64,
    pub hard: f64,
    pub low: f64,
    pub hysteresis: f64,
}

impl Default for ReclamationThresholds {
    fn default() -> Self {
        ReclamationThresholds {
            high: 0.06,
            soft: 0.04,
            hard: 0.02,
            low: 0.01,
            hysteresis: 0.01,
        }
    }
}

impl ReclamationThresholds {
    /// Checks `0 < low < hard < soft < high < 1` and `0 <= hysteresis < 1 - high` (NaN and
    /// infinities fail).
    pub fn validate(&self) -> Result<(), ThresholdError> {
        let ordered = 0.0 < self.low
            && self.low < self.hard
            && self.hard < self.soft
            && self.soft < self.high
            && self.high < 1.0
            && (0.0..1.0 - self.high).contains(&self.hysteresis);
        if ordered {
            Ok(())
        } else {
            Err(ThresholdError {
                high: self.high,
                soft: self.soft,
                hard: self.hard,
                low: self.low,
                hysteresis: self.hysteresis,
            })
        }
    }
}

/// The current reclamation state and its transitions.
#[derive(Clone, Debug, PartialEq)]
pub struct ReclamationTracker {
    thresholds: ReclamationThresholds,
    state: ReclamationState,
}

impl ReclamationTracker {
    pub fn new(thresholds: ReclamationThresholds) -> ReclamationTracker {
        ReclamationTracker {
            thresholds,
            state: ReclamationState::High,
        }
    }

    pub fn state(&self) -> ReclamationState {
        self.state
    }

    pub fn thresholds(&self) -> &ReclamationThresholds {
        &self.thresholds
    }

    /// Moves to the state `free` memory calls for, with hysteresis, and returns it.
    ///
    /// See the module documentation for the rules.
    pub fn update(&mut self, free: Pages, machine: Pages) -> ReclamationState {
        if machine.0 == 0 {
            return self.state;
        }
        let free = free.0 as f64;
        let machine = machine.0 as f64;
        let below = |fraction: f64| free < fraction * machine;
        let at_least = |fraction: f64| free >= (fraction + self.thresholds.hysteresis) * machine;
        let t = &self.thresholds;

        // Down: the state free memory calls for on the way down; ReclamationState orders
        // High < Soft < Hard < Low, so "at least" is a max.
        let pressure = if below(t.low) {
            ReclamationState::Low
        } else if below(t.hard) {
            ReclamationState::Hard
        } else if below(t.soft) {
            ReclamationState::Soft
        } else {
            ReclamationState::High
        };
        if pressure > self.state {
            self.state = pressure;
            return self.state;
        }

        // Up: one state at a time, after exceeding the next higher threshold.
        self.state = match self.state {
            ReclamationState::Low if at_least(t.hard) => ReclamationState::Hard,
            ReclamationState::Hard if at_least(t.soft) => ReclamationState::Soft,
            ReclamationState::Soft if at_least(t.high) => ReclamationState::High,
            unchanged => unchanged,
        };
        self.state
    }
}

/// One resource's reclamation state: the worse of the host's (free over all of it) and, where
/// a budget bounds what some tenants hold, the budget's own (free = budget - what they hold).
/// Each resource the controller divides has one, with its own hysteresis.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceTracker {
    host: ReclamationTracker,
    budget: ReclamationTracker,
    state: ReclamationState,
}

impl ResourceTracker {
    pub fn new(thresholds: ReclamationThresholds) -> ResourceTracker {
        ResourceTracker {
            budget: ReclamationTracker::new(thresholds.clone()),
            host: ReclamationTracker::new(thresholds),
            state: ReclamationState::High,
        }
    }

    /// The state of the last update.
    pub fn state(&self) -> ReclamationState {
        self.state
    }

    /// Moves to the state `free` of `total` calls for and, with `held` (what the tenants
    /// counted against `budget` hold, and that budget), the worse of it and the budget's.
    pub fn update(
        &mut self,
        free: Pages,
        total: Pages,
        held: Option<(Pages, Pages)>,
    ) -> ReclamationState {
        let host = self.host.update(free, total);
        self.state = match held {
            Some((held, budget)) => {
                host.max(self.budget.update(budget.saturating_sub(held), budget))
            }
            None => host,
        };
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReclamationState::{Hard, High, Low, Soft};

    const MACHINE: Pages = Pages(10_000);

    /// Feeds free-memory percentages (of 10,000 pages) and checks the state after each.
    fn walk(steps: &[(f64, ReclamationState)]) {
        let mut tracker = ReclamationTracker::new(ReclamationThresholds::default());
        for (i, &(percent, expected)) in steps.iter().enumerate() {
            let free = Pages((percent * 100.0).round() as u64);
            let got = tracker.update(free, MACHINE);
            assert_eq!(got, expected, "step {i}: {percent}% free");
            assert_eq!(tracker.state(), expected);
        }
    }

    #[test]
    fn default_thresholds_are_esx_and_valid() {
        let t = ReclamationThresholds::default();
        assert_eq!((t.high, t.soft, t.hard, t.low), (0.06, 0.04, 0.02, 0.01));
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn validate_rejects_misordered_or_out_of_range_thresholds() {
        let bad = [
            (0.06, 0.04, 0.02, 0.0),
            (0.06, 0.04, 0.01, 0.02),
            (0.06, 0.06, 0.02, 0.01),
            (1.0, 0.04, 0.02, 0.01),
            (0.06, 0.04, f64::NAN, 0.01),
            (f64::INFINITY, 0.04, 0.02, 0.01),
        ];
        for (high, soft, hard, low) in bad {
            let t = ReclamationThresholds {
                high,
                soft,
                hard,
                low,
                hysteresis: 0.01,
            };
            assert!(t.validate().is_err(), "{t:?}");
        }
        for hysteresis in [-0.01, 0.94, f64::NAN] {
            let t = ReclamationThresholds {
                hysteresis,
                ..ReclamationThresholds::default()
            };
            assert!(t.validate().is_err(), "{t:?}");
        }
    }

    #[test]
    fn going_up_needs_the_threshold_plus_hysteresis() {
        walk(&[(3.0, Soft), (6.5, Soft), (7.0, High)]);
        let mut tracker = ReclamationTracker::new(ReclamationThresholds {
            hysteresis: 0.0,
            ..ReclamationThresholds::default()
        });
        tracker.update(Pages(30), Pages(1000));
        assert_eq!(tracker.update(Pages(60), Pages(1000)), High);
    }

    #[test]
    fn free_memory_walks_down_and_up_through_all_states() {
        walk(&[
            (10.0, High),
            (5.0, High),
            (3.9, Soft),
            (3.0, Soft),
            (1.9, Hard),
            (1.5, Hard),
            (0.9, Low),
            (0.5, Low),
            (1.5, Low),
            (2.0, Low),
            (3.0, Hard),
            (4.0, Hard),
            (5.0, Soft),
            (6.0, Soft),
            (7.0, High),
            (8.0, High),
        ]);
    }

    #[test]
    fn going_down_can_skip_states() {
        walk(&[(10.0, High), (0.5, Low)]);
        walk(&[(10.0, High), (1.5, Hard)]);
        walk(&[(3.0, Soft), (0.2, Low)]);
    }

    #[test]
    fn going_up_moves_one_state_per_update() {
        walk(&[
            (0.5, Low),
            (50.0, Hard),
            (50.0, Soft),
            (50.0, High),
            (50.0, High),
        ]);
    }

    #[test]
    fn between_thresholds_the_state_is_kept() {
        // 5% stays Soft after Soft, and High from High.
        walk(&[(3.0, Soft), (5.0, Soft), (5.9, Soft)]);
        walk(&[(5.0, High), (4.0, High)]);
        // 3% stays Hard after Hard; 1.5% stays Low after Low.
        walk(&[(1.0, Hard), (3.0, Hard), (3.99, Hard)]);
        walk(&[(0.5, Low), (1.5, Low), (1.99, Low)]);
    }

    #[test]
    fn zero_machine_memory_keeps_the_state() {
        let mut tracker = ReclamationTracker::new(ReclamationThresholds::default());
        assert_eq!(tracker.update(Pages(0), Pages(0)), High);
        assert_eq!(tracker.update(Pages(10), MACHINE), Low);
        assert_eq!(tracker.update(Pages(10_000), Pages(0)), Low);
    }

    #[test]
    fn a_resource_is_in_the_worse_of_the_hosts_state_and_its_budgets() {
        let mut r = ResourceTracker::new(ReclamationThresholds::default());
        let mib = Pages::from_mib;
        // Plenty free on the host, and 0.5% of a 1000 MiB budget left: low.
        let s = r.update(mib(4000), mib(8000), Some((mib(995), mib(1000))));
        assert_eq!(
            (s, r.state()),
            (ReclamationState::Low, ReclamationState::Low)
        );
        // Nothing held against a budget: the host's state alone.
        assert_eq!(r.update(mib(4000), mib(8000), None), ReclamationState::High);
    }
}
