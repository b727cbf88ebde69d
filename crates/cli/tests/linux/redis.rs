//! Two real redis-server 7.0 instances, each in its own test cgroup with ~400 MiB of data, share a 600 MiB budget under `memtide daemon` with its default estimator: the idle one must be reclaimed first, and the busy one, serving random GETs over its whole keyspace throughout, must keep its unsqueezed p99 (measured before the daemon starts and again after it stops) once the limits settle.
//!
//! The figures (p99 and rps before and after, limits, usage and swap over time, the order in
//! which limits went below usage, the convergence time) are printed: run with
//! `cargo test --release -p memtide-cli --test linux_redis -- --nocapture`.

use crate::host::redis::{
    self, bench_get, median, parse_csv, redis_programs, GetLoad, GetSpec, Outcome, RedisServer,
    Window,
};
use crate::host::*;
use std::time::{Duration, Instant};

/// How long after `memtide daemon` starts both limits must have settled (the start of a
/// `STABLE_FOR` stretch of stable limits whose sum is within the budget). docs/linux.md states
/// this bound; change both together.
const CONVERGE_WITHIN: Duration = Duration::from_secs(90);
/// How long both limits must stay within `STABLE_BAND` to count as settled.
const STABLE_FOR: Duration = Duration::from_secs(10);
/// A settled limit moves by at most this fraction of itself (or `STABLE_MIN_BAND`).
const STABLE_BAND: f64 = 0.10;
const STABLE_MIN_BAND: u64 = 16 * MIB;
const BUDGET: u64 = 600 * MIB;
/// The busy server's p99 after convergence may be at most this much above its unsqueezed p99,
/// plus one step of redis-benchmark's latency histogram (`P99_STEP_MS`).
const P99_TOLERANCE: f64 = 0.20;
/// redis-benchmark 7 reports latencies from an HDR histogram whose buckets below about 1 ms are
/// 8 µs wide (its p99s read 0.087, 0.095, 0.103 … ms).
/// At a p99 near 0.1 ms, 20% is under three steps, and two medians of the same unsqueezed
/// server on this shared machine have differed by two: a difference of one step is below what
/// the tool can resolve and is not charged to memtide.
const P99_STEP_MS: f64 = 0.008;
/// Each server holds `KEYS` values of `VALUE_BYTES` (jemalloc rounds each up to 4 KiB): about
/// 400 MiB.
const KEYS: u64 = 100_000;
const VALUE_BYTES: usize = 4000;
/// redis-benchmark clients of the busy load.
const CLIENTS: u32 = 4;
/// A measurement window lasts about this long unsqueezed (its request count is set from a
/// calibration run); a measurement is the median of `WINDOWS` windows.
const WINDOW: Duration = Duration::from_secs(10);
const WINDOWS: usize = 5;
/// Windows measured after convergence: more than before, since the daemon's windows are the
/// ones tested, and their median is less moved by one slow stretch of a shared machine.
const AFTER_WINDOWS: usize = 7;
/// A window still running after this is killed and recorded as timed out.
const WINDOW_LIMIT: Duration = Duration::from_secs(30);
/// Limits the cgroups have before the daemon starts; SIGTERM must put them back.
const BUSY_LIMIT0: u64 = 1024 * MIB;
const IDLE_LIMIT0: u64 = 1000 * MIB;
/// The idle server counts as reclaimed when its limit is below this fraction of its usage, and
/// the busy one as squeezed when its limit is below its usage at all. "Usage" is the usage just
/// before the daemon starts: a v1 limit is hard, so the current usage never exceeds it.
const WELL_BELOW: f64 = 0.75;
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
const PRINT_EVERY: Duration = Duration::from_secs(5);

#[test]
fn redis_benchmark_csv_parses() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"GET\",\"21815.01\",\"0.165\",\"0.032\",\"0.111\",\"0.191\",\"3.071\",\"7.263\"\n";
    let b = parse_csv(text, "GET").unwrap();
    assert_eq!(b.rps, 21815.01);
    assert_eq!(b.p99_ms, 3.071);
    assert_eq!(b.max_ms, 7.263);
    assert!(parse_csv(text, "SET").is_err());
    assert!(parse_csv("\"test\",\"rps\"\n\"GET\",\"5.0\"\n", "GET").is_err());
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0]), Some(2.5));
    assert_eq!(median(&[]), None);
    assert_eq!(redis::key(42), "key:000000000042");
}

/// One reading of a cgroup.
#[derive(Clone, Copy, Debug)]
struct Mem {
    limit: Option<u64>,
    usage: u64,
    swap: u64,
}

fn mem(cg: &TestCgroup) -> Mem {
    let s = cg.sample();
    Mem {
        limit: limit_bytes(&s),
        usage: s.usage.0,
        swap: s.swap.map_or(0, |b| b.0),
    }
}

#[derive(Clone, Copy, Debug)]
struct Row {
    at: Instant,
    busy: Mem,
    idle: Mem,
}

/// A limit going below a threshold for the first time.
#[derive(Clone, Debug)]
struct Below {
    tenant: &'static str,
    after: Duration,
    limit: u64,
    threshold: u64,
}

/// Samples both cgroups, prints them every `PRINT_EVERY` and each finished load window, and
/// records when each limit first goes below its threshold.
struct Watch<'a> {
    start: Instant,
    busy: &'a TestCgroup,
    idle: &'a TestCgroup,
    load: &'a GetLoad,
    rows: Vec<Row>,
    last_print: Option<Instant>,
    windows_printed: usize,
    /// The daemon's start, and the busy and idle thresholds for `order`.
    managed: Option<(Instant, u64, u64)>,
    order: Vec<Below>,
}

fn m(b: Option<u64>) -> String {
    b.map_or_else(|| "  max".to_string(), |b| format!("{:5.0}", mib(b)))
}

impl<'a> Watch<'a> {
    fn sample(&mut self, daemon: Option<&Daemon>) -> Row {
        let row = Row {
            at: Instant::now(),
            busy: mem(self.busy),
            idle: mem(self.idle),
        };
        self.rows.push(row);
        if let Some((t0, busy_at, idle_at)) = self.managed {
            for (tenant, m, threshold) in [("idle", row.idle, idle_at), ("busy", row.busy, busy_at)]
            {
                let limit = m.limit.unwrap_or(u64::MAX);
                if limit < threshold && !self.order.iter().any(|b| b.tenant == tenant) {
                    let b = Below {
                        tenant,
                        after: row.at - t0,
                        limit,
                        threshold,
                    };
                    println!(
                        "  {:6.1}s {tenant}'s limit went below {:.0} MiB: {:.0} MiB, {:.1} s after the daemon started",
                        self.secs(row.at),
                        mib(threshold),
                        mib(limit),
                        b.after.as_secs_f64()
                    );
                    self.order.push(b);
                }
            }
        }
        let windows = self.load.windows();
        for (i, w) in windows.iter().enumerate().skip(self.windows_printed) {
            println!("  {:6.1}s window {i}: {}", self.secs(w.ended), describe(w));
        }
        self.windows_printed = windows.len();
        if self.last_print.is_none_or(|t| t.elapsed() >= PRINT_EVERY) {
            self.last_print = Some(row.at);
            let mut line = format!(
                "  {:6.1}s busy limit {} usage {} swap {} | idle limit {} usage {} swap {} MiB",
                self.secs(row.at),
                m(row.busy.limit),
                m(Some(row.busy.usage)),
                m(Some(row.busy.swap)),
                m(row.idle.limit),
                m(Some(row.idle.usage)),
                m(Some(row.idle.swap)),
            );
            if let Some(s) = daemon.and_then(|d| d.try_status()) {
                for t in &s.tenants {
                    line.push_str(&format!(
                        " | {} target {:.0} estimate {:.0}",
                        t.name,
                        mib(t.target_bytes),
                        mib(t.active_estimate_bytes)
                    ));
                }
            }
            println!("{line}");
        }
        row
    }

    fn secs(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }

    /// Samples every `SAMPLE_EVERY` until `done` holds or `timeout` passes; true if it held.
    fn wait(
        &mut self,
        daemon: Option<&Daemon>,
        timeout: Duration,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> bool {
        let start = Instant::now();
        loop {
            self.sample(daemon);
            if done(self) {
                return true;
            }
            if start.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(SAMPLE_EVERY);
        }
    }

    /// The start of the last `STABLE_FOR` of samples since `from` if, in all of them, both
    /// limits were set, their sum was within the budget, and each stayed within its band.
    fn stable_since(&self, from: Instant) -> Option<Instant> {
        let rows: Vec<&Row> = self.rows.iter().filter(|r| r.at >= from).collect();
        let last = rows.last()?;
        let first = rows.iter().rposition(|r| last.at - r.at >= STABLE_FOR)?;
        let stretch = &rows[first..];
        let mut ranges = [(u64::MAX, 0u64); 2];
        for r in stretch {
            let (b, i) = (r.busy.limit?, r.idle.limit?);
            if b.checked_add(i)? > BUDGET {
                return None;
            }
            for (range, l) in ranges.iter_mut().zip([b, i]) {
                *range = (range.0.min(l), range.1.max(l));
            }
        }
        let banded = ranges
            .iter()
            .all(|&(lo, hi)| hi - lo <= ((hi as f64 * STABLE_BAND) as u64).max(STABLE_MIN_BAND));
        banded.then_some(stretch[0].at)
    }
}

fn describe(w: &Window) -> String {
    let secs = (w.ended - w.started).as_secs_f64();
    let cpu = w.cpu.map_or(String::new(), |c| format!(" ({c})"));
    let what = match &w.outcome {
        Outcome::Done(b) => format!(
            "{secs:.1} s, {:.0} rps, p50 {:.3} p95 {:.3} p99 {:.3} max {:.3} ms",
            b.rps, b.p50_ms, b.p95_ms, b.p99_ms, b.max_ms
        ),
        Outcome::TimedOut => format!("timed out after {secs:.1} s"),
        Outcome::Stopped => "stopped".into(),
        Outcome::Failed(e) => format!("failed: {e}"),
    };
    format!("{what}{cpu}")
}

/// The CPU seconds (user + system) process `pid` has used, from /proc/PID/stat.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// The median p99 and rps of the finished windows, and why not when none finished.
fn measure(windows: &[Window]) -> Result<(f64, f64), String> {
    let done: Vec<_> = windows
        .iter()
        .filter_map(|w| match &w.outcome {
            Outcome::Done(b) => Some(b),
            _ => None,
        })
        .collect();
    let p99 = median(&done.iter().map(|b| b.p99_ms).collect::<Vec<_>>());
    let rps = median(&done.iter().map(|b| b.rps).collect::<Vec<_>>());
    match (p99, rps) {
        (Some(p), Some(r)) => Ok((p, r)),
        _ => Err(format!(
            "no window finished: {}",
            windows.iter().map(describe).collect::<Vec<_>>().join("; ")
        )),
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The major version of `redis-server --version` ("Redis server v=7.0.15 ...").
fn redis_major(server: &std::path::Path) -> Option<u32> {
    let out = std::process::Command::new(server)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    v.split('.').next()?.parse().ok()
}

#[test]
fn the_idle_redis_is_reclaimed_first_and_the_busy_one_keeps_its_p99() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "the_idle_redis_is_reclaimed_first_and_the_busy_one_keeps_its_p99";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some((server_bin, bench_bin)) = redis_programs(test) else {
        return;
    };
    match redis_major(&server_bin) {
        Some(v) if v >= 7 => {}
        v => {
            skip_or_fail(
                test,
                &format!("needs redis 7.0 or later for redis-benchmark's latency CSV; {} reports major version {v:?}", server_bin.display()),
            );
            return;
        }
    }
    let Some(_swap) = zram(test, "2G") else {
        return;
    };
    let start = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let busy_cg = linux.cgroup("redis-busy");
    let idle_cg = linux.cgroup("redis-idle");
    busy_cg.set_limit_bytes(BUSY_LIMIT0);
    idle_cg.set_limit_bytes(IDLE_LIMIT0);
    // The busy server on CPU 0 and its load on CPU 1 (see `pin`); the idle server, the daemon
    // and the kernel's work wherever the scheduler puts them.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (server_cpu, bench_cpu) = if cpus >= 2 {
        (Some(0), Some(1))
    } else {
        (None, None)
    };
    let mut busy = RedisServer::start(&server_bin, &busy_cg, tmp.path(), "busy", server_cpu);
    let mut idle = RedisServer::start(&server_bin, &idle_cg, tmp.path(), "idle", None);
    for (name, server, cg) in [("busy", &busy, &busy_cg), ("idle", &idle, &idle_cg)] {
        let t = Instant::now();
        server
            .load(KEYS, VALUE_BYTES)
            .unwrap_or_else(|e| panic!("load the {name} server: {e}"));
        let used = server.used_memory().unwrap();
        println!(
            "redis: {name} on port {} (pid {}) loaded {KEYS} keys of {VALUE_BYTES} bytes in {:.1} s: used_memory {:.0} MiB, cgroup usage {:.0} MiB",
            server.port,
            server.pid(),
            t.elapsed().as_secs_f64(),
            mib(used),
            mib(cg.sample().usage.0)
        );
    }

    // The busy load: random GETs over the whole keyspace, from now to the end of the test.
    let spec = GetSpec {
        benchmark: bench_bin,
        port: busy.port,
        keys: KEYS,
        clients: CLIENTS,
        cpu: bench_cpu,
    };
    let calibration =
        bench_get(&spec, 20_000, Duration::from_secs(60)).expect("a calibration run of 20000 GETs");
    let requests = ((calibration.rps * WINDOW.as_secs_f64()) as u64).max(20_000);
    println!(
        "redis: calibration {:.0} rps, p99 {:.3} ms: windows of {requests} GETs with {CLIENTS} clients",
        calibration.rps, calibration.p99_ms
    );
    let load = GetLoad::start(spec, requests, WINDOW_LIMIT);
    let mut watch = Watch {
        start,
        busy: &busy_cg,
        idle: &idle_cg,
        load: &load,
        rows: Vec::new(),
        last_print: None,
        windows_printed: 0,
        managed: None,
        order: Vec::new(),
    };

    // Unsqueezed: nothing manages the cgroups yet.
    let before_from = Instant::now();
    let got = watch.wait(None, WINDOW_LIMIT * WINDOWS as u32, |w| {
        w.load.windows_since(before_from).len() >= WINDOWS
    });
    let before_windows = load.windows_since(before_from);
    assert!(
        got && before_windows
            .iter()
            .all(|w| matches!(w.outcome, Outcome::Done(_))),
        "the unsqueezed measurement failed: {}",
        before_windows
            .iter()
            .map(describe)
            .collect::<Vec<_>>()
            .join("; ")
    );
    let (p99_before, rps_before) = measure(&before_windows).unwrap();
    println!("redis: unsqueezed p99 {p99_before:.3} ms, {rps_before:.0} rps (median of {WINDOWS} windows)");

    // Managed: both cgroups adopted, 600 MiB between them, the daemon's default estimator.
    let usage0 = watch.sample(None);
    let (busy_usage0, idle_usage0) = (usage0.busy.usage, usage0.idle.usage);
    let head = config_head("1s", "self", "600M");
    let config = format!(
        r#"{head}
[policy]
tax_rate = 0.75

[[tenant]]
name = "busy"
cgroup = "{}"
min = "32M"
max = "1G"

[[tenant]]
name = "idle"
cgroup = "{}"
min = "32M"
max = "1G"
"#,
        busy_cg.path, idle_cg.path
    );
    let split = |cg: &TestCgroup| {
        let s = cg.sample();
        format!(
            "anon {:.0} file {:.0}",
            mib(s.anon.map_or(0, |b| b.0)),
            mib(s.file.map_or(0, |b| b.0))
        )
    };
    let (busy_split, idle_split) = (split(&busy_cg), split(&idle_cg));
    let t0 = Instant::now();
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    println!(
        "redis: {:.1}s memtide daemon started (busy usage {:.0} MiB: {}; idle usage {:.0} MiB: {})",
        watch.secs(t0),
        mib(busy_usage0),
        busy_split,
        mib(idle_usage0),
        idle_split
    );
    watch.managed = Some((t0, busy_usage0, (idle_usage0 as f64 * WELL_BELOW) as u64));
    let mut converged_at = None;
    watch.wait(Some(&daemon), CONVERGE_WITHIN + STABLE_FOR, |w| {
        converged_at = w.stable_since(t0).map(|at| at - t0);
        converged_at.is_some()
    });
    match converged_at {
        Some(c) => println!(
            "redis: converged {:.1} s after the daemon started",
            c.as_secs_f64()
        ),
        None => println!(
            "redis: not converged {:.0} s after the daemon started; measuring anyway",
            t0.elapsed().as_secs_f64()
        ),
    }

    // Squeezed (or not): the same measurement.
    let after_from = Instant::now();
    let daemon_cpu0 = cpu_seconds(daemon.pid());
    let busy0 = busy_cg.sample();
    // The window running at convergence does not count: it started before.
    watch.wait(Some(&daemon), WINDOW_LIMIT * AFTER_WINDOWS as u32, |w| {
        w.load.windows_since(after_from).len() >= AFTER_WINDOWS
    });
    let after_windows = load.windows_since(after_from);
    let after = measure(&after_windows);
    let end = watch.sample(Some(&daemon));
    let busy1 = busy_cg.sample();
    let after_secs = after_from.elapsed().as_secs_f64();
    let daemon_cpu = daemon_cpu0
        .zip(cpu_seconds(daemon.pid()))
        .map(|(a, b)| b - a);
    let delta = |a: Option<u64>, b: Option<u64>| {
        a.zip(b)
            .map_or("-".to_string(), |(a, b)| b.saturating_sub(a).to_string())
    };
    println!(
        "redis: after convergence ({after_secs:.0} s): the daemon used {} CPU; the busy server had {} major faults, {} anon refaults",
        daemon_cpu.map_or("-".to_string(), |c| format!(
            "{c:.2} s ({:.2}%)",
            c / after_secs * 100.0
        )),
        delta(busy0.major_faults, busy1.major_faults),
        delta(busy0.refault_anon, busy1.refault_anon),
    );

    // The end: no OOM kill, both servers alive and answering, original limits restored.
    let mut failures = Vec::new();
    for (name, cg) in [("busy", &busy_cg), ("idle", &idle_cg)] {
        let kills = cg.cgroup.oom_kills().unwrap().unwrap_or(0);
        if kills > 0 {
            failures.push(format!("(d) {name}: {kills} OOM kill(s) in its cgroup"));
        }
    }
    let status = daemon.signal_and_wait(libc::SIGTERM);
    if !status.success() {
        failures.push(format!("(d) the daemon exited {status} on SIGTERM"));
    }
    for (name, cg, want) in [
        ("busy", &busy_cg, BUSY_LIMIT0),
        ("idle", &idle_cg, IDLE_LIMIT0),
    ] {
        let got = limit_bytes(&cg.sample());
        if got != Some(want) {
            failures.push(format!(
                "(d) {name}: limit after SIGTERM {} MiB, not its original {} MiB",
                m(got).trim(),
                m(Some(want)).trim()
            ));
        }
    }
    for (name, server) in [("busy", &mut busy), ("idle", &mut idle)] {
        if !server.is_running() {
            failures.push(format!("(d) the {name} redis-server exited"));
        } else if let Err(e) = server.ping() {
            failures.push(format!(
                "(d) the {name} redis-server does not answer PING: {e}"
            ));
        }
    }
    // Unsqueezed again, memtide's limits gone: the same machine minutes later. The reference
    // p99 is the median of every unsqueezed window, before and after, so that drift of a shared
    // machine over the test is not charged to memtide.
    let again_from = Instant::now();
    watch.wait(None, WINDOW_LIMIT * WINDOWS as u32, |w| {
        w.load.windows_since(again_from).len() >= WINDOWS
    });
    let again_windows = load.windows_since(again_from);
    let unsqueezed: Vec<Window> = before_windows
        .iter()
        .chain(&again_windows)
        .cloned()
        .collect();
    let p99_before = measure(&unsqueezed).map_or(p99_before, |(p, _)| p);
    println!(
        "redis: unsqueezed again after the daemon stopped: {}; reference p99 {p99_before:.3} ms (median of {} unsqueezed windows)",
        again_windows.iter().map(describe).collect::<Vec<_>>().join("; "),
        unsqueezed.len()
    );
    let order = watch.order.clone();
    let (busy_low, idle_low) =
        watch
            .rows
            .iter()
            .filter(|r| r.at >= t0)
            .fold((u64::MAX, u64::MAX), |(b, i), r| {
                (
                    b.min(r.busy.limit.unwrap_or(u64::MAX)),
                    i.min(r.idle.limit.unwrap_or(u64::MAX)),
                )
            });
    drop(watch);
    let mut load = load;
    load.stop();

    // (a) the idle server is reclaimed first.
    let when = |tenant: &str| order.iter().find(|b| b.tenant == tenant).map(|b| b.after);
    match (when("idle"), when("busy")) {
        (Some(i), Some(b)) if i < b => {}
        (Some(_), None) => {}
        (i, b) => failures.push(format!(
            "(a) the idle server was not reclaimed first: idle's limit below {:.0}% of its {:.0} MiB at {}, busy's below its {:.0} MiB at {}",
            WELL_BELOW * 100.0,
            mib(idle_usage0),
            i.map_or("never".to_string(), |d| format!("{:.1} s", d.as_secs_f64())),
            mib(busy_usage0),
            b.map_or("never".to_string(), |d| format!("{:.1} s", d.as_secs_f64())),
        )),
    }
    // (b) the busy server is not paged once the limits have settled, and keeps its p99.
    if let Some(faults) = busy0
        .major_faults
        .zip(busy1.major_faults)
        .map(|(a, b)| b.saturating_sub(a))
        .filter(|&f| f > 0)
    {
        failures.push(format!(
            "(b) the busy server had {faults} major faults in the {after_secs:.0} s after convergence (none expected: its limit stays above what it holds)"
        ));
    }
    // The p99 of its load, against the unsqueezed reference.
    let p99_bound = p99_before * (1.0 + P99_TOLERANCE) + P99_STEP_MS;
    match (&after, converged_at) {
        (Ok((p99, _)), Some(_)) if *p99 <= p99_bound => {}
        (Ok((p99, _)), Some(_)) => failures.push(format!(
            "(b) the busy server's p99 after convergence is {p99:.3} ms, {:+.0}% of its unsqueezed {p99_before:.3} ms (at most {p99_bound:.3} ms: +{:.0}% and one {P99_STEP_MS:.3} ms histogram step)",
            (p99 / p99_before - 1.0) * 100.0,
            P99_TOLERANCE * 100.0
        )),
        (Ok((p99, _)), None) => failures.push(format!(
            "(b) no p99 after convergence, since the limits never settled (after the deadline it was {p99:.3} ms, {:+.0}% of its unsqueezed {p99_before:.3} ms)",
            (p99 / p99_before - 1.0) * 100.0,
        )),
        (Err(e), _) => failures.push(format!(
            "(b) no p99 after {}: {e} (windows of {requests} GETs; unsqueezed {rps_before:.0} rps)",
            if converged_at.is_some() { "convergence" } else { "the convergence deadline" },
        )),
    }
    // (c) within the time bound.
    match converged_at {
        Some(c) if c <= CONVERGE_WITHIN => {}
        Some(c) => failures.push(format!(
            "(c) converged only {:.1} s after the daemon started (bound {} s)",
            c.as_secs_f64(),
            CONVERGE_WITHIN.as_secs()
        )),
        None => failures.push(format!(
            "(c) the limits did not settle (each within {:.0}% for {} s, sum within {:.0} MiB) within {} s",
            STABLE_BAND * 100.0,
            STABLE_FOR.as_secs(),
            mib(BUDGET),
            (CONVERGE_WITHIN + STABLE_FOR).as_secs()
        )),
    }

    println!("redis: summary");
    println!(
        "  unsqueezed: p99 {p99_before:.3} ms, {rps_before:.0} rps; windows: {}",
        before_windows
            .iter()
            .map(describe)
            .collect::<Vec<_>>()
            .join("; ")
    );
    let during: Vec<Window> = load
        .windows()
        .into_iter()
        .filter(|w| w.started >= t0 && w.started < after_from)
        .collect();
    let worst = during
        .iter()
        .filter_map(|w| match &w.outcome {
            Outcome::Done(b) => Some(b.p99_ms),
            _ => None,
        })
        .fold(None, |acc: Option<f64>, p| {
            Some(acc.map_or(p, |a| a.max(p)))
        });
    match (measure(&during), worst) {
        (Ok((p99, rps)), Some(worst)) => println!(
            "  while converging ({} windows): median p99 {p99:.3} ms ({:+.0}%), worst p99 {worst:.3} ms ({:+.0}%), median {rps:.0} rps",
            during.len(),
            (p99 / p99_before - 1.0) * 100.0,
            (worst / p99_before - 1.0) * 100.0,
        ),
        (Err(e), _) => println!("  while converging: {e}"),
        _ => {}
    }
    match &after {
        Ok((p99, rps)) => println!(
            "  after:      p99 {p99:.3} ms ({:+.0}%), {rps:.0} rps ({:+.0}%); windows: {}",
            (p99 / p99_before - 1.0) * 100.0,
            (rps / rps_before - 1.0) * 100.0,
            after_windows
                .iter()
                .map(describe)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Err(e) => println!("  after:      {e}"),
    }
    println!(
        "  limits below usage, in order: {}",
        if order.is_empty() {
            "none".to_string()
        } else {
            order
                .iter()
                .map(|b| {
                    format!(
                        "{} at {:.1} s ({:.0} MiB < {:.0} MiB)",
                        b.tenant,
                        b.after.as_secs_f64(),
                        mib(b.limit),
                        mib(b.threshold)
                    )
                })
                .collect::<Vec<_>>()
                .join(", then ")
        }
    );
    println!(
        "  lowest limits: busy {} MiB (usage {:.0} MiB before), idle {} MiB (usage {:.0} MiB before); at the end busy {} / idle {} MiB, swap busy {:.0} / idle {:.0} MiB",
        m(Some(busy_low)).trim(),
        mib(busy_usage0),
        m(Some(idle_low)).trim(),
        mib(idle_usage0),
        m(end.busy.limit).trim(),
        m(end.idle.limit).trim(),
        mib(end.busy.swap),
        mib(end.idle.swap)
    );
    println!(
        "  convergence: {}",
        converged_at.map_or("none".to_string(), |c| format!(
            "{:.1} s after the daemon started (bound {} s)",
            c.as_secs_f64(),
            CONVERGE_WITHIN.as_secs()
        ))
    );
    assert!(
        failures.is_empty(),
        "{}\nthe daemon's last log lines:\n{}",
        failures.join("\n"),
        tail(&daemon.log_text(), 40)
    );
}
