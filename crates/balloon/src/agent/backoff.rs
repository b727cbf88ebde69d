//! The wait between connections: doubling from a first delay up to a largest, each wait a random time between half and all of the delay, so agents that lost memtide together do not all come back at once.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

pub(super) struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(super) fn new(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            max,
            next: first,
        }
    }

    /// The wait before the next connection; the delay after it doubles.
    pub(super) fn wait(&mut self) -> Duration {
        let delay = self.next;
        self.next = (delay * 2).min(self.max);
        let half = delay / 2;
        let spread = u64::try_from((delay - half).as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(random() % spread.saturating_add(1))
    }

    /// Back to the first delay, after memtide welcomed the agent.
    pub(super) fn reset(&mut self) {
        self.next = self.first;
    }
}

/// A random number from the standard library's randomly keyed hasher: enough for jitter,
/// without a dependency.
fn random() -> u64 {
    RandomState::new().build_hasher().finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_largest_with_jitter_of_at_most_half() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(30));
        let mut delay = Duration::from_millis(100);
        for _ in 0..12 {
            let wait = backoff.wait();
            assert!(wait >= delay / 2 && wait <= delay, "{wait:?} for {delay:?}");
            delay = (delay * 2).min(Duration::from_secs(30));
        }
        assert_eq!(delay, Duration::from_secs(30));
        assert!(backoff.wait() >= Duration::from_secs(15));
    }

    #[test]
    fn a_reset_starts_again_at_the_first_delay() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(30));
        for _ in 0..5 {
            backoff.wait();
        }
        backoff.reset();
        assert!(backoff.wait() <= Duration::from_millis(100));
    }

    #[test]
    fn waits_are_spread() {
        let mut waits: Vec<Duration> = (0..16)
            .map(|_| Backoff::new(Duration::from_secs(1), Duration::from_secs(1)).wait())
            .collect();
        waits.sort();
        waits.dedup();
        assert!(waits.len() > 8, "{waits:?}");
    }
}
