//! The clocks a service ticks on: the wall clock of a real host, the virtual clock of the simulator.

use std::time::{Duration, Instant};

/// Run time, and waiting for it.
pub trait Clock {
    /// Run time: how long since the clock started.
    fn now(&self) -> Duration;

    /// Waits until run time `at` (returns at once when it has passed).
    fn sleep_until(&mut self, at: Duration);

    /// The longest a service sleeps at a time between two ticks, looking at its inbox, its
    /// driver's flags and the world's work between ticks after every sleep; `None` when no
    /// time passes between ticks (a virtual clock), which jumps from one tick to the next.
    fn slice(&self) -> Option<Duration>;
}

/// The host's clock: run time since [`WallClock::new`]; between ticks it sleeps in slices of
/// at most 50 ms.
#[derive(Clone, Debug)]
pub struct WallClock {
    started: Instant,
}

impl WallClock {
    /// A clock whose run time starts now.
    pub fn new() -> WallClock {
        WallClock {
            started: Instant::now(),
        }
    }
}

impl Default for WallClock {
    fn default() -> WallClock {
        WallClock::new()
    }
}

impl Clock for WallClock {
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    fn sleep_until(&mut self, at: Duration) {
        std::thread::sleep(at.saturating_sub(self.now()));
    }

    fn slice(&self) -> Option<Duration> {
        Some(Duration::from_millis(50))
    }
}

/// The simulator's clock: starts at zero and moves only when the service waits for its next
/// tick, straight to it.
#[derive(Clone, Debug, Default)]
pub struct VirtualClock {
    now: Duration,
}

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        self.now
    }

    fn sleep_until(&mut self, at: Duration) {
        self.now = self.now.max(at);
    }

    fn slice(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_virtual_clock_jumps_to_the_time_it_waits_for_and_never_goes_back() {
        let mut clock = VirtualClock::default();
        assert_eq!(clock.now(), Duration::ZERO);
        clock.sleep_until(Duration::from_secs(3));
        assert_eq!(clock.now(), Duration::from_secs(3));
        clock.sleep_until(Duration::from_secs(1));
        assert_eq!(clock.now(), Duration::from_secs(3));
        assert_eq!(clock.slice(), None);
    }

    #[test]
    fn a_wall_clock_sleeps_until_the_time_and_not_for_a_time_passed() {
        let mut clock = WallClock::new();
        let at = clock.now() + Duration::from_millis(20);
        clock.sleep_until(at);
        assert!(clock.now() >= at);
        let before = clock.now();
        clock.sleep_until(Duration::ZERO);
        assert!(clock.now() - before < Duration::from_secs(1));
        assert_eq!(clock.slice(), Some(Duration::from_millis(50)));
    }
}
