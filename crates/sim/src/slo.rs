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
//! Cost: `O(1)` per access recorded (a GET's latency is worked out when its last access is
//! recorded: the tick's GETs due are known when it begins); per tick a sort of the second's
//! latencies; per window a sort of its latencies. Memory: the open window's latencies (2
//! bytes a GET, 4 for one of 65 ms or more; let go when it closes), every closed report
//! window (32 bytes: its counts and percentiles; its start and length follow from its
//! place) and 4 bytes a tick from the load's start to the last tick with GETs due (the p99
//! of the second's GETs, or that none was due or one failed; its start follows from its
//! place), reserved for the load's length. That was 16 bytes a second with GETs due, an
//! 88-byte [`Window`] a window and 8 bytes a GET of the tick until it ended: 18 MiB more at
//! the peak of density-2000's 10 minutes with all 2,000 servers running; the latencies at 4
//! bytes and the seconds' doubling cost about 10 MiB more.
//!
//! A second's p99 over `u32::MAX - 2` µs (71 minutes) is kept as that: no objective reaches
//! it.

use std::time::Duration;

use memtide_demand::{Second, Window};

/// Bytes a meter keeps per tick of the load.
pub const SECOND_BYTES: u64 = std::mem::size_of::<u32>() as u64;
/// Bytes a meter keeps per closed report window.
pub const WINDOW_BYTES: u64 = std::mem::size_of::<Closed>() as u64;

/// A tick of the load with no GETs due.
const NO_GETS: u32 = u32::MAX;
/// A tick of the load in which a GET failed.
const FAILED: u32 = u32::MAX - 1;
/// The highest p99 a tick keeps.
const MAX_P99: u32 = u32::MAX - 2;

/// A closed report window: its requests, failures and the percentiles of the answered ones
/// (there are `requests - errors`; none, and no percentiles, when that is 0).
#[derive(Copy, Clone, Debug, PartialEq)]
struct Closed {
    requests: u64,
    errors: u64,
    p50_us: u32,
    p99_us: u32,
    max_us: u32,
}

/// The windows of one server's run (see the module docs).
#[derive(Clone, Debug)]
pub struct SloMeter {
    window_s: f64,
    per_get: usize,
    /// When the load starts, in seconds of workload time.
    start_s: f64,
    /// The GET under way: the cost of its accesses so far, and how many.
    get_ns: u64,
    get_accesses: usize,
    /// How far into this tick the server is still busy with the last tick's GETs, in ns.
    backlog_ns: u64,
    /// This tick: whether it is in the load, its length, the GETs due and answered so far,
    /// when the server is free (ns from the tick's start) and where its latencies begin in
    /// `open`.
    loaded: bool,
    tick_ns: u64,
    due: u64,
    done: u64,
    free_ns: u64,
    second_from: Mark,
    /// Latencies of the open report window, this tick's last.
    open: Latencies,
    /// The open report window: its start (seconds of the load), requests and failures.
    open_start: f64,
    open_requests: u64,
    open_errors: u64,
    /// The workload time of the load's first tick and the length of a tick (the same every
    /// tick).
    first: Option<Duration>,
    tick: Duration,
    /// This tick's place from `first`, and how long the load lasts in seconds.
    at: usize,
    length_s: f64,
    /// Per tick from `first` to the last with GETs due: the p99 of its GETs in µs,
    /// [`NO_GETS`] or [`FAILED`].
    seconds: Vec<u32>,
    windows: Vec<Closed>,
}

impl SloMeter {
    /// A meter for GETs of `pages_per_get` accesses, judged in windows of `window_s` from
    /// `start_s` seconds of workload time, when the load starts, for `length_s` seconds.
    pub fn new(pages_per_get: u32, window_s: f64, start_s: f64, length_s: f64) -> SloMeter {
        SloMeter {
            window_s,
            per_get: pages_per_get.max(1) as usize,
            start_s,
            get_ns: 0,
            get_accesses: 0,
            backlog_ns: 0,
            loaded: false,
            tick_ns: 0,
            due: 0,
            done: 0,
            free_ns: 0,
            second_from: Mark::default(),
            open: Latencies::default(),
            open_start: 0.0,
            open_requests: 0,
            open_errors: 0,
            first: None,
            tick: Duration::ZERO,
            at: 0,
            length_s,
            seconds: Vec::new(),
            windows: Vec::new(),
        }
    }

    /// Begins the tick `[now, now + tick)` of workload time, in which `due` GETs are due (a
    /// tick before the load starts records nothing).
    pub fn begin_tick(&mut self, now: Duration, tick: Duration, due: u64) {
        (self.get_ns, self.get_accesses) = (0, 0);
        self.loaded = now.as_secs_f64() - self.start_s >= 0.0;
        if !self.loaded {
            return;
        }
        if self.first.is_none() {
            self.first = Some(now);
            // A tick a second of the load, the last one's part included.
            let ticks = self.length_s / tick.as_secs_f64().max(1e-9);
            self.seconds
                .reserve_exact(ticks.ceil().min(1e7) as usize + 1);
        }
        let first = self.first.unwrap_or(now);
        self.tick = tick;
        // Ticks are of one length, one after the other: `now` is tick `at` from `first`.
        let at = (now - first).as_nanos() / tick.as_nanos().max(1);
        debug_assert_eq!(
            now,
            first + tick * at as u32,
            "ticks of one length in a row"
        );
        self.at = at as usize;
        self.tick_ns = (tick.as_secs_f64() * 1e9) as u64;
        self.due = due;
        self.done = 0;
        self.free_ns = self.backlog_ns;
        self.second_from = self.open.mark();
    }

    /// One access of a GET made this tick, costing `ns` (work and stall). A GET's last access
    /// answers it: GET *j* of the tick arrives at `(j + 1/2) / due` of it and is served after
    /// the GET before it.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.get_ns += ns;
        self.get_accesses += 1;
        if self.get_accesses < self.per_get {
            return;
        }
        let cost = self.get_ns;
        (self.get_ns, self.get_accesses) = (0, 0);
        if !self.loaded || self.done >= self.due {
            return;
        }
        let arrival = ((self.done as f64 + 0.5) / self.due as f64 * self.tick_ns as f64) as u64;
        let end = arrival.max(self.free_ns) + cost;
        self.free_ns = end;
        let us = (end - arrival).div_ceil(1000);
        self.open.push(u32::try_from(us).unwrap_or(u32::MAX));
        self.done += 1;
    }

    /// Ends the tick begun last: GETs due that were not answered failed.
    pub fn end_tick(&mut self) {
        // A GET whose accesses the tick did not finish is not done.
        (self.get_ns, self.get_accesses) = (0, 0);
        if !self.loaded {
            return;
        }
        self.loaded = false;
        self.backlog_ns = self.free_ns.saturating_sub(self.tick_ns);
        let (due, done) = (self.due, self.done);
        let errors = due - done;
        let p99 = if due == 0 {
            NO_GETS
        } else if errors > 0 {
            FAILED
        } else {
            // Every GET answered (`done == due > 0`): the p99 exists.
            self.open.sort_from(self.second_from);
            let rank = nearest_rank(0.99, done as usize);
            self.open.ranked(self.second_from, rank).min(MAX_P99)
        };
        if p99 != NO_GETS {
            self.seconds.resize(self.at, NO_GETS);
            self.seconds.push(p99);
        }
        self.open_requests += due;
        self.open_errors += errors;
        let tick_s = self.tick.as_secs_f64();
        let load_s = self.tick_start(self.at);
        if load_s + tick_s >= self.open_start + self.window_s - 1e-9 {
            // The window's latencies are let go, not kept for the next: a server holds them
            // only while GETs come (with a GET's accesses summed as they are recorded, this
            // saved 34 MiB on density-2000's 10 minutes, 1,733 servers running).
            let mut open = std::mem::take(&mut self.open);
            self.windows
                .push(close(self.open_requests, self.open_errors, &mut open));
            self.open_start += self.window_s;
            self.open_requests = 0;
            self.open_errors = 0;
        }
    }

    /// The start of tick `i` of the load, in seconds of the load: its workload time less
    /// the load's start, as it was when the tick ran.
    fn tick_start(&self, i: usize) -> f64 {
        let first = self.first.unwrap_or_default();
        (first + self.tick * i as u32).as_secs_f64() - self.start_s
    }

    /// The seconds (ticks) in which GETs were due, in order.
    pub fn seconds(&self) -> impl Iterator<Item = Second> + '_ {
        let tick_s = self.tick.as_secs_f64();
        self.seconds
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != NO_GETS)
            .map(move |(i, &p)| {
                let start = self.tick_start(i);
                Second {
                    start,
                    end: start + tick_s,
                    p99_us: (p != FAILED).then_some(u64::from(p)),
                }
            })
    }

    /// Report windows, every one from the load's start, in order.
    pub fn windows(&self) -> Vec<Window> {
        let mut start = 0.0;
        self.windows
            .iter()
            .map(|c| {
                let answered = c.requests > c.errors;
                let p = |v: u32| answered.then_some(u64::from(v));
                let w = Window {
                    start,
                    length: self.window_s,
                    requests: c.requests,
                    errors: c.errors,
                    misses: 0,
                    p50_us: p(c.p50_us),
                    p99_us: p(c.p99_us),
                    max_us: p(c.max_us),
                };
                start += self.window_s;
                w
            })
            .collect()
    }
}

/// A closed window of `requests` due, `errors` of them failed, the others answered in
/// `latencies` (sorted here).
fn close(requests: u64, errors: u64, latencies: &mut Latencies) -> Closed {
    let all = Mark::default();
    latencies.sort_from(all);
    let n = latencies.len_from(all);
    let q = |p: f64| latencies.ranked(all, nearest_rank(p, n).min(n));
    let (p50_us, p99_us, max_us) = if n == 0 {
        (0, 0, 0)
    } else {
        (q(0.5), q(0.99), latencies.ranked(all, n))
    };
    Closed {
        requests,
        errors,
        p50_us,
        p99_us,
        max_us,
    }
}

/// A place in [`Latencies`]: how many short and long ones came before it.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
struct Mark {
    short: usize,
    long: usize,
}

/// Latencies in µs, 2 bytes each under 65,535 µs (nearly every one) and 4 bytes otherwise:
/// two lists, since every short one is below every long one, a span's sorted order is its
/// short ones sorted and then its long ones sorted.
#[derive(Clone, Debug, Default)]
struct Latencies {
    short: Vec<u16>,
    long: Vec<u32>,
}

impl Latencies {
    fn push(&mut self, us: u32) {
        match u16::try_from(us) {
            Ok(v) if v < u16::MAX => self.short.push(v),
            _ => self.long.push(us),
        }
    }

    /// The place after the last latency.
    fn mark(&self) -> Mark {
        Mark {
            short: self.short.len(),
            long: self.long.len(),
        }
    }

    /// Latencies since `from`.
    fn len_from(&self, from: Mark) -> usize {
        self.short.len() - from.short + self.long.len() - from.long
    }

    /// Sorts the latencies since `from`.
    fn sort_from(&mut self, from: Mark) {
        self.short[from.short..].sort_unstable();
        self.long[from.long..].sort_unstable();
    }

    /// The `rank`th smallest (from 1) of the latencies since `from`, sorted.
    fn ranked(&self, from: Mark, rank: usize) -> u32 {
        let short = &self.short[from.short..];
        match short.get(rank - 1) {
            Some(&v) => u32::from(v),
            None => self.long[from.long + rank - 1 - short.len()],
        }
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.short.is_empty() && self.long.is_empty()
    }
}

/// The nearest rank (1-based, at least 1) of quantile `p` among `n` values.
fn nearest_rank(p: f64, n: usize) -> usize {
    ((p * n as f64).ceil() as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When the load starts in the tests' workloads, in seconds.
    const START: f64 = 10.0;

    /// A meter whose load starts at [`START`].
    fn meter(pages_per_get: u32, window_s: f64) -> SloMeter {
        SloMeter::new(pages_per_get, window_s, START, 100.0)
    }

    /// Begins the one-second tick `load_s` seconds into the load, with `due` GETs due.
    fn begin(m: &mut SloMeter, load_s: f64, due: u64) {
        let now = Duration::from_secs_f64(START + load_s);
        m.begin_tick(now, Duration::from_secs(1), due);
    }

    /// A tick of `due` GETs of one access each, costing `ns` apiece but the slow ones.
    fn tick(m: &mut SloMeter, load_s: f64, due: u64, ns: u64, slow: &[(usize, u64)]) {
        begin(m, load_s, due);
        for j in 0..due as usize {
            let cost = slow.iter().find(|s| s.0 == j).map_or(ns, |s| s.1);
            m.record(cost);
        }
        m.end_tick();
    }

    #[test]
    fn a_fast_server_answers_each_get_in_its_service_time() {
        let mut m = meter(1, 10.0);
        for s in 0..10 {
            tick(&mut m, f64::from(s), 100, 20_000, &[]);
        }
        assert_eq!(m.windows().len(), 1);
        let windows = m.windows();
        let w = &windows[0];
        assert_eq!(
            (w.requests, w.errors, w.p99_us, w.max_us),
            (1000, 0, Some(20), Some(20))
        );
        assert_eq!(m.seconds().count(), 10);
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
            let mut m = meter(1, 10.0);
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
        let mut m = meter(1, 1.0);
        // 10 GETs 100 ms apart; the first takes 250 ms: the next two wait for it.
        tick(&mut m, 0.0, 10, 1_000_000, &[(0, 250_000_000)]);
        let windows = m.windows();
        let w = &windows[0];
        assert_eq!(w.max_us, Some(250_000));
        // The second GET arrives at 150 ms and ends at 301 ms; the third at 250, ends at 302.
        assert_eq!(w.p50_us, Some(1000));
        assert_eq!(w.p99_us, Some(250_000));
        assert_eq!(m.seconds().next().unwrap().p99_us, Some(250_000));
    }

    #[test]
    fn gets_the_tick_did_not_complete_are_failures_and_service_past_the_tick_carries_over() {
        let mut m = meter(2, 2.0);
        // 4 GETs due, accesses for 3 made (6 accesses), the last GET 0.9 s late.
        begin(&mut m, 0.0, 4);
        for _ in 0..5 {
            m.record(10_000);
        }
        m.record(1_200_000_000);
        m.end_tick();
        assert_eq!(m.seconds().next().unwrap().p99_us, None, "a GET failed");
        // The backlog (the last GET ended at 1.825 s) delays the next tick's first GET.
        begin(&mut m, 1.0, 2);
        for _ in 0..4 {
            m.record(1_000);
        }
        m.end_tick();
        assert!(m.seconds().nth(1).unwrap().p99_us.unwrap() > 500_000);
        assert_eq!(m.windows()[0].requests, 6);
    }

    #[test]
    fn a_window_with_nothing_answered_has_no_percentiles() {
        let mut m = meter(1, 2.0);
        begin(&mut m, 0.0, 0);
        m.end_tick();
        begin(&mut m, 1.0, 3);
        m.end_tick();
        let windows = m.windows();
        let w = &windows[0];
        assert_eq!(
            (w.requests, w.errors, w.p99_us, w.max_us),
            (3, 3, None, None)
        );
        assert_eq!(m.seconds().count(), 1, "only seconds with requests due");
    }

    #[test]
    fn nothing_is_recorded_before_the_load_starts() {
        let mut m = meter(1, 10.0);
        tick(&mut m, -2.0, 3, 5, &[]);
        begin(&mut m, -1.0, 2);
        m.record(5);
        m.end_tick();
        assert!(m.seconds().count() == 0 && m.windows().is_empty());
        assert!(m.open.is_empty() && m.seconds.is_empty());
    }

    #[test]
    fn a_second_keeps_what_a_one_second_window_tells_a_wake_up() {
        let mut a = meter(1, 1.0);
        let slow = [(3, 4_000_000), (7, 900_000_000)];
        for s in 0..4 {
            tick(&mut a, f64::from(s), 50 * (s as u64 % 3), 30_000, &slow);
        }
        // Accesses for 2 of 3 GETs: one failure.
        begin(&mut a, 4.0, 3);
        a.record(10_000);
        a.record(10_000);
        a.end_tick();
        let from_windows: Vec<Second> = a
            .windows()
            .iter()
            .filter(|w| w.requests > 0)
            .map(Second::from)
            .collect();
        assert_eq!(a.seconds().collect::<Vec<_>>(), from_windows);
        assert_eq!((SECOND_BYTES, WINDOW_BYTES), (4, 32));
    }

    #[test]
    fn a_ticks_start_is_its_workload_time_less_the_loads_start_as_it_ran() {
        // Ticks of 0.1 s from 0.3 s before the load: the starts are what the ticks computed.
        let (tick, start) = (Duration::from_millis(100), 0.35);
        let mut m = SloMeter::new(1, 0.5, start, 2.65);
        let mut expected = Vec::new();
        for k in 0..30u32 {
            let now = tick * k;
            let due = u64::from(k % 4 != 0);
            m.begin_tick(now, tick, due);
            m.record(1_000);
            m.end_tick();
            let load_s = now.as_secs_f64() - start;
            if load_s >= 0.0 && due > 0 {
                expected.push((load_s, load_s + tick.as_secs_f64()));
            }
        }
        let got: Vec<(f64, f64)> = m.seconds().map(|s| (s.start, s.end)).collect();
        assert_eq!(got, expected);
        let starts: Vec<f64> = m.windows().iter().map(|w| w.start).collect();
        assert_eq!(starts, [0.0, 0.5, 1.0, 1.5, 2.0]);
    }

    #[test]
    fn long_latencies_rank_after_short_ones_as_one_sorted_list() {
        let mut l = Latencies::default();
        let values = [70_000, 5, u32::MAX, 65_535, 65_534, 3, 1_000_000, 7];
        for v in values {
            l.push(v);
        }
        let from = Mark { short: 1, long: 1 };
        l.sort_from(from);
        let mut rest: Vec<u32> = values
            .into_iter()
            .filter(|&v| v != 5 && v != 70_000)
            .collect();
        rest.sort_unstable();
        assert_eq!(l.len_from(from), rest.len());
        for (rank, v) in rest.iter().enumerate() {
            assert_eq!(l.ranked(from, rank + 1), *v, "rank {}", rank + 1);
        }
        assert_eq!((l.short.len(), l.long.len()), (4, 4));
    }
}
