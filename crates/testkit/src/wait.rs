//! Waiting for a condition with a deadline and a failure that says what was awaited.

use std::time::{Duration, Instant};

/// Polls `check` every `every` until it gives a value; panics after `timeout` with `what` and
/// the text `context` gives then (a log, the last reading).
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut check: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}:\n{}",
            context()
        );
        std::thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_for_returns_the_first_value_the_check_gives() {
        let mut n = 0;
        let got = wait_for(
            "three calls",
            Duration::from_secs(5),
            Duration::from_millis(1),
            || {
                n += 1;
                (n == 3).then_some(n)
            },
            String::new,
        );
        assert_eq!(got, 3);
    }

    #[test]
    #[should_panic(expected = "waiting for never:\nthe context")]
    fn wait_for_fails_with_what_and_the_context_after_the_timeout() {
        wait_for::<()>(
            "never",
            Duration::from_millis(20),
            Duration::from_millis(1),
            || None,
            || "the context".into(),
        );
    }
}
