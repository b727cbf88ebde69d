//! The run's latency windows: each request is counted in the one-second window and the report window its *due* time falls in, and a window is written once a request due after it is recorded, or at the run's end.
//!
//! Latencies go into HdrHistograms (1 µs to 60 s, three significant digits: a percentile is
//! within 0.1% of the exact one), one per open window, so memory stays bounded however many
//! requests a window holds. One-second windows are written only when requests were due in
//! them (a bursty tenant sleeps for minutes); report windows always, so that the analysis
//! sees every window of the run.

use hdrhistogram::Histogram;
use memtide_demand::Window;

/// The highest latency a histogram holds, in microseconds; above it, the value is clamped.
const MAX_US: u64 = 60_000_000;

/// How one request fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answered, `us` microseconds after it was due; `miss` when the key was not there.
    Answered { us: u64, miss: bool },
    /// Failed or timed out.
    Failed,
}

/// One open window.
struct Open {
    start: f64,
    length: f64,
    requests: u64,
    errors: u64,
    misses: u64,
    latency: Histogram<u64>,
}

impl Open {
    fn new(start: f64, length: f64) -> Open {
        Open {
            start,
            length,
            requests: 0,
            errors: 0,
            misses: 0,
            latency: Histogram::new_with_bounds(1, MAX_US, 3).expect("constant bounds are valid"),
        }
    }

    fn record(&mut self, outcome: Outcome) {
        self.requests += 1;
        match outcome {
            Outcome::Answered { us, miss } => {
                self.misses += u64::from(miss);
                self.latency.saturating_record(us.clamp(1, MAX_US));
            }
            Outcome::Failed => self.errors += 1,
        }
    }

    /// The window's figures, and the window after it, empty.
    fn close(&mut self) -> Window {
        let answered = !self.latency.is_empty();
        let q = |p: f64| answered.then(|| self.latency.value_at_quantile(p));
        let window = Window {
            start: self.start,
            length: self.length,
            requests: self.requests,
            errors: self.errors,
            misses: self.misses,
            p50_us: q(0.5),
            p99_us: q(0.99),
            max_us: answered.then(|| self.latency.max()),
        };
        self.start += self.length;
        self.requests = 0;
        self.errors = 0;
        self.misses = 0;
        self.latency.reset();
        window
    }
}

/// Where closed windows go.
pub trait Sink {
    fn second(&mut self, w: Window);
    fn window(&mut self, w: Window);
}

/// The one-second and report windows of a run.
pub struct Recorder {
    second: Open,
    window: Open,
}

impl Recorder {
    /// Windows of one second and of `length` seconds, from the run's start.
    pub fn new(length: f64) -> Recorder {
        Recorder {
            second: Open::new(0.0, 1.0),
            window: Open::new(0.0, length),
        }
    }

    /// Records a request due `due` seconds into the run (`due` never decreasing), writing
    /// every window that ended before it.
    pub fn record(&mut self, due: f64, outcome: Outcome, sink: &mut impl Sink) {
        self.close_before(due, sink);
        self.second.record(outcome);
        self.window.record(outcome);
    }

    /// Writes every window that ended at or before `end` (the run's length, at its end).
    pub fn close_before(&mut self, end: f64, sink: &mut impl Sink) {
        while self.second.start + self.second.length <= end {
            let w = self.second.close();
            if w.requests > 0 {
                sink.second(w);
            }
        }
        while self.window.start + self.window.length <= end {
            sink.window(self.window.close());
        }
    }

    /// Writes the last windows, including a partial one ending at `end`, when requests were
    /// due in it.
    pub fn finish(mut self, end: f64, sink: &mut impl Sink) {
        self.close_before(end, sink);
        for (open, is_second) in [(&mut self.second, true), (&mut self.window, false)] {
            if open.requests > 0 {
                open.length = end - open.start;
                let w = open.close();
                if is_second {
                    sink.second(w);
                } else {
                    sink.window(w);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Kept {
        seconds: Vec<Window>,
        windows: Vec<Window>,
    }

    impl Sink for Kept {
        fn second(&mut self, w: Window) {
            self.seconds.push(w);
        }
        fn window(&mut self, w: Window) {
            self.windows.push(w);
        }
    }

    fn ok(us: u64) -> Outcome {
        Outcome::Answered { us, miss: false }
    }

    #[test]
    fn requests_fall_in_the_windows_of_their_due_time() {
        let mut r = Recorder::new(10.0);
        let mut k = Kept::default();
        for i in 0..100 {
            r.record(f64::from(i) * 0.01, ok(100), &mut k);
        }
        r.record(12.5, ok(5000), &mut k);
        r.record(12.6, Outcome::Failed, &mut k);
        r.record(
            12.7,
            Outcome::Answered {
                us: 300,
                miss: true,
            },
            &mut k,
        );
        r.finish(30.0, &mut k);
        assert_eq!(k.windows.len(), 3, "{:?}", k.windows);
        let w0 = &k.windows[0];
        assert_eq!(
            (w0.start, w0.length, w0.requests, w0.errors),
            (0.0, 10.0, 100, 0)
        );
        assert_eq!(w0.p99_us, Some(100));
        let w1 = &k.windows[1];
        assert_eq!(
            (w1.start, w1.requests, w1.errors, w1.misses),
            (10.0, 3, 1, 1)
        );
        assert_eq!(w1.max_us.map(|m| m / 10), Some(500), "within 0.1%");
        let w2 = &k.windows[2];
        assert_eq!((w2.start, w2.requests, w2.p99_us), (20.0, 0, None));
        // Seconds only where requests were due: 0 and 12.
        let starts: Vec<f64> = k.seconds.iter().map(|w| w.start).collect();
        assert_eq!(starts, vec![0.0, 12.0]);
    }

    #[test]
    fn the_99th_percentile_sees_the_slowest_one_percent() {
        let mut r = Recorder::new(10.0);
        let mut k = Kept::default();
        for i in 0..1000u32 {
            let us = if i % 100 < 2 { 50_000 } else { 200 };
            r.record(f64::from(i) * 0.005, ok(us), &mut k);
        }
        r.finish(10.0, &mut k);
        let w = &k.windows[0];
        assert_eq!(w.requests, 1000);
        assert!(w.p99_us.unwrap() >= 49_000, "{w:?}");
        assert!(w.p50_us.unwrap() <= 201, "{w:?}");
    }

    #[test]
    fn a_partial_last_window_is_written_with_its_length() {
        let mut r = Recorder::new(10.0);
        let mut k = Kept::default();
        r.record(21.0, ok(10), &mut k);
        r.finish(25.0, &mut k);
        let last = k.windows.last().unwrap();
        assert_eq!((last.start, last.length, last.requests), (20.0, 5.0, 1));
        assert_eq!(k.windows.len(), 3);
    }

    #[test]
    fn a_latency_beyond_a_minute_is_clamped_not_lost() {
        let mut r = Recorder::new(1.0);
        let mut k = Kept::default();
        r.record(0.0, ok(u64::MAX), &mut k);
        r.record(0.5, ok(0), &mut k);
        r.finish(1.0, &mut k);
        assert_eq!(k.windows[0].requests, 2);
        assert!(k.windows[0].max_us.unwrap() >= MAX_US * 999 / 1000);
    }
}
