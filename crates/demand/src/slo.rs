//! Service levels over a run: a load generator's windows, which of them a tenant was active in, which of those met its latency objective, and how long each wake-up took to meet it again.
//!
//! The density benchmark's rule (issue 31): a tenant meets its SLO in a window when the
//! window's 99th-percentile latency is at or under the objective and no request failed (an
//! error or a timeout); a window counts as *active* when at least `min_requests` requests
//! were due in it, so the few requests of a diurnal trough do not decide a percentile. A
//! policy carries N tenants when at least 99% of all their active windows met the objective.
//! Latency is measured from when a request was *due*, not when it was sent, so a stalled
//! server's backlog shows in the percentile (no coordinated omission).
//!
//! A wake-up (a burst's start, [`crate::Schedule::wake_ups`]) is back within its SLO at the
//! end of the first one-second window from its start on that met the objective; the
//! wake-up objective is that this takes at most `wake_s`.

use serde::{Deserialize, Serialize};

/// One window of a load generator's run: the requests due in `[start, start + length)`
/// seconds of the run and how they fared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Seconds from the run's start.
    pub start: f64,
    /// Seconds.
    pub length: f64,
    /// Requests due in the window.
    pub requests: u64,
    /// Of those, the ones that failed or timed out.
    pub errors: u64,
    /// Of those answered, the ones whose key the server no longer held (a cache that
    /// shrank evicted it; the client wrote it back, inside the request's latency).
    #[serde(default)]
    pub misses: u64,
    /// The 50th, 99th percentile and highest latency of the ones answered, in microseconds
    /// (absent when none was).
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub max_us: Option<u64>,
}

impl Window {
    /// Whether the window is active and met `slo`.
    pub fn met(&self, slo: &Slo) -> bool {
        self.requests >= slo.min_requests
            && self.errors == 0
            && self.p99_us.is_some_and(|p| p <= slo.p99_us)
    }
}

/// One second of a run as a wake-up is judged ([`wake_time`]): its span and the p99 latency
/// of its requests when some were due and every one was answered (a load generator's
/// one-second [`Window`] says more; this is all a wake-up needs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Second {
    /// Seconds from the run's start.
    pub start: f64,
    pub end: f64,
    /// Microseconds; `None` when a request failed or none was due.
    pub p99_us: Option<u64>,
}

impl From<&Window> for Second {
    fn from(w: &Window) -> Second {
        Second {
            start: w.start,
            end: w.start + w.length,
            p99_us: w.p99_us.filter(|_| w.requests > 0 && w.errors == 0),
        }
    }
}

/// A tenant's service-level objective.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// The highest 99th-percentile latency of a window that meets it, in microseconds.
    pub p99_us: u64,
    /// The longest a wake-up may take to meet it again, in seconds.
    pub wake_s: f64,
    /// The fewest requests due in a window for it to count as active.
    pub min_requests: u64,
}

/// Active windows and how many met the objective.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attainment {
    pub active: u64,
    pub met: u64,
}

impl Attainment {
    /// The share of active windows that met the objective (`None` without an active one).
    pub fn fraction(&self) -> Option<f64> {
        (self.active > 0).then(|| self.met as f64 / self.active as f64)
    }
}

impl std::ops::Add for Attainment {
    type Output = Attainment;

    /// Both counts added: the attainment of several tenants together.
    fn add(self, other: Attainment) -> Attainment {
        Attainment {
            active: self.active + other.active,
            met: self.met + other.met,
        }
    }
}

/// How `windows` fared against `slo`.
pub fn attainment(windows: &[Window], slo: &Slo) -> Attainment {
    windows
        .iter()
        .filter(|w| w.requests >= slo.min_requests)
        .fold(Attainment::default(), |a, w| Attainment {
            active: a.active + 1,
            met: a.met + u64::from(w.met(slo)),
        })
}

/// Seconds from the wake-up at `wake` until the end of the first window of `seconds` (one
/// second each, in order) ending after it whose requests all answered within the objective's
/// p99 (any number of requests: a second is too short to be "active"); `None` when none did
/// before `until`. The second the wake-up falls in counts, so a tenant that answers at once
/// is back within a second.
pub fn wake_time(wake: f64, until: f64, seconds: &[Second], slo: &Slo) -> Option<f64> {
    let first = seconds.partition_point(|s| s.end <= wake);
    seconds[first..]
        .iter()
        .take_while(|s| s.start < until)
        .find(|s| s.p99_us.is_some_and(|p| p <= slo.p99_us))
        .map(|s| s.end - wake)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLO: Slo = Slo {
        p99_us: 1000,
        wake_s: 5.0,
        min_requests: 100,
    };

    fn window(start: f64, length: f64, requests: u64, errors: u64, p99: Option<u64>) -> Window {
        Window {
            start,
            length,
            requests,
            errors,
            misses: 0,
            p50_us: p99.map(|p| p / 2),
            p99_us: p99,
            max_us: p99,
        }
    }

    #[test]
    fn a_window_meets_the_slo_when_active_error_free_and_fast_enough() {
        assert!(window(0.0, 10.0, 100, 0, Some(1000)).met(&SLO));
        assert!(!window(0.0, 10.0, 100, 0, Some(1001)).met(&SLO));
        assert!(!window(0.0, 10.0, 100, 1, Some(10)).met(&SLO));
        assert!(!window(0.0, 10.0, 99, 0, Some(10)).met(&SLO), "not active");
        assert!(
            !window(0.0, 10.0, 100, 0, None).met(&SLO),
            "nothing answered"
        );
    }

    #[test]
    fn attainment_counts_only_active_windows() {
        let ws = [
            window(0.0, 10.0, 5, 0, Some(9000)),
            window(10.0, 10.0, 500, 0, Some(400)),
            window(20.0, 10.0, 500, 0, Some(4000)),
            window(30.0, 10.0, 500, 0, Some(900)),
        ];
        let a = attainment(&ws, &SLO);
        assert_eq!(a, Attainment { active: 3, met: 2 });
        assert_eq!(a.fraction(), Some(2.0 / 3.0));
        assert_eq!(Attainment::default().fraction(), None);
        assert_eq!(a + a, Attainment { active: 6, met: 4 });
    }

    #[test]
    fn a_wake_up_is_back_at_the_end_of_its_first_good_second() {
        let secs: Vec<Second> = (0..10)
            .map(|i| {
                let p99 = if i < 4 { 50_000 } else { 300 };
                Second::from(&window(f64::from(i), 1.0, 500, 0, Some(p99)))
            })
            .collect();
        // Woken at 1.5: seconds 1 to 3 are slow, second 4 is good: back at 5.0.
        assert_eq!(wake_time(1.5, 10.0, &secs, &SLO), Some(3.5));
        // Woken at 6.5 into a good second: back at its end.
        assert_eq!(wake_time(6.5, 10.0, &secs, &SLO), Some(0.5));
        assert_eq!(
            wake_time(0.0, 4.0, &secs, &SLO),
            None,
            "not before the burst ended"
        );
        let failing = [
            Second::from(&window(0.0, 1.0, 10, 1, Some(10))),
            Second::from(&window(1.0, 1.0, 0, 0, None)),
        ];
        assert_eq!(wake_time(0.0, 2.0, &failing, &SLO), None);
    }

    #[test]
    fn windows_read_back_from_json() {
        let w = window(10.0, 10.0, 5000, 2, Some(812));
        let text = serde_json::to_string(&w).unwrap();
        assert_eq!(serde_json::from_str::<Window>(&text).unwrap(), w);
    }
}
