//! Service levels of a simulated key-value server (`workload::kv`): per request a latency, per report window the requests due, the failures and the percentiles, as the real load generator writes them ([`memtide_demand::Window`]), and per second what a wake-up is judged by ([`memtide_demand::Second`]), so `attainment` and `wake_time` judge both the same way.
//!
//! The rule, within each one-second tick:
//!
//! - **Arrivals.** The tick's `due` GETs (the schedule's, `Kv::requests_due`) arrive evenly
//!   spaced, GET *j* at `(j + 1/2) / due` of the tick (the real generator paces them evenly at
//!   the rate of the moment too; within a second the two differ by at most one gap).
//! - **Service.** A GET's service time is what its page accesses cost under the cost model, as
//!   the VM's tick ran them: its work (`cpu_us_per_access` each) plus each access's stall (a
//!   zero-fill, a swap-in from the container's swap or the host's, the page-outs the host did
//!   to find a frame). The tick's accesses are taken in order, `pages_per_get` to a GET.
//! - **Queueing.** One server thread serves GETs first come first served (Redis is
//!   single-threaded), starting at the later of its arrival and the end of the GET before; a
//!   GET's latency is its end less its arrival, so a slow GET delays those behind it (no
//!   coordinated omission). Service that runs past the tick's end carries over as a backlog
//!   into the next tick.
//! - **Failures.** GETs due in the tick that the VM's tick did not complete (its time ran out,
//!   or nothing could be freed for a page: a stall) are failures, as a request the real
//!   generator times out on. So a server that cannot do a tick's work in the tick fails that
//!   window at once, where the real one would fall behind first: the simulator is harsher on
//!   overload than the host.
//! - **Percentiles** are exact, nearest rank (the real generator's HdrHistogram is within
//!   0.1% of them): the p99 of a window exceeds the objective exactly when more than 1% of its
//!   answered GETs took longer.
//!
//! What it leaves out: the network and the client (a real GET's round trip, 50 to 500 µs on
//! loopback, is not in the service time unless `cpu_us_per_access` holds it), and CPU shared
//! between tenants (the simulator gives every tenant its whole tick: docs/cost-model.md).
//!
//! Cost: `O(1)` per access recorded; per tick `O(GETs)` and a sort of the second's
//! latencies; per window a sort of its latencies. Memory: the tick's GETs (8 bytes each: a
//! GET's accesses are summed as they are recorded), the open window's latencies (4 bytes a
//! GET, let go when it closes), every closed report window (a [`Window`], 88 bytes) and, per
//! second with requests, 16 bytes: its start and, when every GET was answered, their p99 (a
//! [`Window`] a second had cost 40 MiB on density-2000's 10 minutes, 1,733 servers running).

use memtide_demand::{Second, Window};

/// Bytes a meter keeps per second of the run with GETs due.
pub const SECOND_BYTES: u64 = std::mem::size_of::<Tick>() as u64;

/// One second with GETs due, as a wake-up is judged: its start (seconds of the load) and the
/// p99 of its GETs in µs when every one was answered.
#[derive(Copy, Clone, Debug, PartialEq)]
struct Tick {
    start: f64,
    p99_us: Option<u32>,
}

/// The windows of one server's run (see the module docs).
#[derive(Clone, Debug)]
pub struct SloMeter {
    window_s: f64,
    per_get: usize,
    /// The cost of each whole GET of this tick (its accesses' work and stalls), in
    /// nanoseconds, in order.
    gets: Vec<u64>,
    /// The GET under way: the cost of its accesses so far, and how many.
    get_ns: u64,
    get_accesses: usize,
    /// How far into this tick the server is still busy with the last tick's GETs, in ns.
    backlog_ns: u64,
    /// Latencies in µs of the open report window, this tick's last.
    open: Vec<u32>,
    /// The open report window: its start (seconds of the load), requests and failures.
    open_start: f64,
    open_requests: u64,
    open_errors: u64,
    /// The length of a tick, in seconds (the same every tick).
    tick_s: f64,
    seconds: Vec<Tick>,
    windows: Vec<Window>,
}

impl SloMeter {
    /// A meter for GETs of `pages_per_get` accesses, judged in windows of `window_s`.
    pub fn new(pages_per_get: u32, window_s: f64) -> SloMeter {
        SloMeter {
            window_s,
            per_get: pages_per_get.max(1) as usize,
            gets: Vec::new(),
            get_ns: 0,
            get_accesses: 0,
            backlog_ns: 0,
            open: Vec::new(),
            open_start: 0.0,
            open_requests: 0,
            open_errors: 0,
            tick_s: 0.0,
            seconds: Vec::new(),
            windows: Vec::new(),
        }
    }

    /// One access of a GET made this tick, costing `ns` (work and stall).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.get_ns += ns;
        self.get_accesses += 1;
        if self.get_accesses == self.per_get {
            self.gets.push(self.get_ns);
            (self.get_ns, self.get_accesses) = (0, 0);
        }
    }

    /// Ends the tick of `tick_s` seconds that started `load_s` seconds into the load (negative:
    /// before it, which records nothing) in which `due` GETs were due.
    pub fn end_tick(&mut self, load_s: f64, tick_s: f64, due: u64) {
        // A GET whose accesses the tick did not finish is not done.
        (self.get_ns, self.get_accesses) = (0, 0);
        if load_s < 0.0 {
            self.gets.clear();
            return;
        }
        let tick_ns = (tick_s * 1e9) as u64;
        let mut free = self.backlog_ns;
        let done = self.gets.len().min(due as usize);
        let first = self.open.len();
        for (j, &cost) in self.gets.iter().take(done).enumerate() {
            let arrival = ((j as f64 + 0.5) / due as f64 * tick_ns as f64) as u64;
            let end = arrival.max(free) + cost;
            free = end;
            let us = (end - arrival).div_ceil(1000);
            self.open.push(u32::try_from(us).unwrap_or(u32::MAX));
        }
        self.gets.clear();
        self.backlog_ns = free.saturating_sub(tick_ns);
        let errors = due - done as u64;
        self.tick_s = tick_s;
        if due > 0 {
            // Every GET answered (`done == due > 0`): the p99 exists.
            let second = &mut self.open[first..];
            second.sort_unstable();
            let p99_us = (errors == 0).then(|| second[nearest_rank(0.99, done) - 1]);
            self.seconds.push(Tick {
                start: load_s,
                p99_us,
            });
        }
        self.open_requests += due;
        self.open_errors += errors;
        if load_s + tick_s >= self.open_start + self.window_s - 1e-9 {
            // The window's latencies are let go, not kept for the next: a server holds them
            // only while GETs come (with a GET's accesses summed as they are recorded, this
            // saved 34 MiB on density-2000's 10 minutes, 1,733 servers running).
            let mut open = std::mem::take(&mut self.open);
            self.windows.push(window(
                self.open_start,
                self.window_s,
                self.open_requests,
                self.open_errors,
                &mut open,
            ));
            self.open_start += self.window_s;
            self.open_requests = 0;
            self.open_errors = 0;
        }
    }

    /// The seconds (ticks) in which GETs were due, in order.
    pub fn seconds(&self) -> impl ExactSizeIterator<Item = Second> + '_ {
        self.seconds.iter().map(|t| Second {
            start: t.start,
            end: t.start + self.tick_s,
            p99_us: t.p99_us.map(u64::from),
        })
    }

    /// Report windows, every one from the load's start, in order.
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }
}

/// A window of `requests` due from `start` for `length` seconds, `errors` of them failed, the
/// others answered in `latencies` (µs; sorted here).
fn window(start: f64, length: f64, requests: u64, errors: u64, latencies: &mut [u32]) -> Window {
    latencies.sort_unstable();
    let n = latencies.len();
    let q = |p: f64| {
        latencies
            .get(nearest_rank(p, n).min(n).wrapping_sub(1))
            .map(|&l| u64::from(l))
    };
    Window {
        start,
        length,
        requests,
        errors,
        misses: 0,
        p50_us: q(0.5),
        p99_us: q(0.99),
        max_us: latencies.last().map(|&l| u64::from(l)),
    }
}

/// The nearest rank (1-based, at least 1) of quantile `p` among `n` values.
fn nearest_rank(p: f64, n: usize) -> usize {
    ((p * n as f64).ceil() as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tick of `due` GETs of one access each, costing `ns` apiece but the slow ones.
    fn tick(m: &mut SloMeter, load_s: f64, due: u64, ns: u64, slow: &[(usize, u64)]) {
        for j in 0..due as usize {
            let cost = slow.iter().find(|s| s.0 == j).map_or(ns, |s| s.1);
            m.record(cost);
        }
        m.end_tick(load_s, 1.0, due);
    }

    #[test]
    fn a_fast_server_answers_each_get_in_its_service_time() {
        let mut m = SloMeter::new(1, 10.0);
        for s in 0..10 {
            tick(&mut m, f64::from(s), 100, 20_000, &[]);
        }
        assert_eq!(m.windows().len(), 1);
        let w = &m.windows()[0];
        assert_eq!(
            (w.requests, w.errors, w.p99_us, w.max_us),
            (1000, 0, Some(20), Some(20))
        );
        assert_eq!(m.seconds().len(), 10);
    }

    #[test]
    fn a_window_misses_its_p99_only_when_more_than_one_percent_of_gets_are_slow() {
        let slo = memtide_demand::Slo {
            p99_us: 2000,
            wake_s: 5.0,
            min_requests: 100,
        };
        // 200 GETs a second, 10 s: 2,000 GETs; 20 slow ones (1%) keep the p99, 21 do not.
        for (slow_per_window, met) in [(20, true), (21, false)] {
            let mut m = SloMeter::new(1, 10.0);
            for s in 0..10usize {
                let slow: Vec<(usize, u64)> = (0..slow_per_window)
                    .filter(|k| k % 10 == s)
                    .map(|k| (k, 3_000_000))
                    .collect();
                tick(&mut m, s as f64, 200, 10_000, &slow);
            }
            assert_eq!(m.windows()[0].met(&slo), met, "{slow_per_window} slow");
        }
    }

    #[test]
    fn a_slow_get_delays_the_gets_queued_behind_it() {
        let mut m = SloMeter::new(1, 1.0);
        // 10 GETs 100 ms apart; the first takes 250 ms: the next two wait for it.
        tick(&mut m, 0.0, 10, 1_000_000, &[(0, 250_000_000)]);
        let w = &m.windows()[0];
        assert_eq!(w.max_us, Some(250_000));
        // The second GET arrives at 150 ms and ends at 301 ms; the third at 250, ends at 302.
        assert_eq!(w.p50_us, Some(1000));
        assert_eq!(w.p99_us, Some(250_000));
        assert_eq!(m.seconds().next().unwrap().p99_us, Some(250_000));
    }

    #[test]
    fn gets_the_tick_did_not_complete_are_failures_and_service_past_the_tick_carries_over() {
        let mut m = SloMeter::new(2, 2.0);
        // 4 GETs due, accesses for 3 made (6 accesses), the last GET 0.9 s late.
        for _ in 0..5 {
            m.record(10_000);
        }
        m.record(1_200_000_000);
        m.end_tick(0.0, 1.0, 4);
        assert_eq!(m.seconds().next().unwrap().p99_us, None, "a GET failed");
        // The backlog (the last GET ended at 1.825 s) delays the next tick's first GET.
        for _ in 0..4 {
            m.record(1_000);
        }
        m.end_tick(1.0, 1.0, 2);
        assert!(m.seconds().nth(1).unwrap().p99_us.unwrap() > 500_000);
        assert_eq!(m.windows()[0].requests, 6);
    }

    #[test]
    fn a_window_with_nothing_answered_has_no_percentiles() {
        let mut m = SloMeter::new(1, 2.0);
        m.end_tick(0.0, 1.0, 0);
        m.end_tick(1.0, 1.0, 3);
        let w = &m.windows()[0];
        assert_eq!(
            (w.requests, w.errors, w.p99_us, w.max_us),
            (3, 3, None, None)
        );
        assert_eq!(m.seconds().len(), 1, "only seconds with requests due");
    }

    #[test]
    fn nothing_is_recorded_before_the_load_starts() {
        let mut m = SloMeter::new(1, 10.0);
        tick(&mut m, -1.0, 0, 0, &[]);
        m.record(5);
        m.end_tick(-0.5, 1.0, 0);
        assert!(m.seconds().len() == 0 && m.windows().is_empty());
    }

    #[test]
    fn a_second_keeps_what_a_one_second_window_tells_a_wake_up() {
        let mut a = SloMeter::new(1, 1.0);
        let slow = [(3, 4_000_000), (7, 900_000_000)];
        for s in 0..4 {
            tick(&mut a, f64::from(s), 50 * (s as u64 % 3), 30_000, &slow);
        }
        // Accesses for 2 of 3 GETs: one failure.
        a.record(10_000);
        a.record(10_000);
        a.end_tick(4.0, 1.0, 3);
        let from_windows: Vec<Second> = a
            .windows()
            .iter()
            .filter(|w| w.requests > 0)
            .map(Second::from)
            .collect();
        assert_eq!(a.seconds().collect::<Vec<_>>(), from_windows);
        assert_eq!(SECOND_BYTES, 16);
    }
}
