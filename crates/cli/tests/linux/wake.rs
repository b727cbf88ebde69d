//! A real redis-server shrunk into zram while idle, then woken by random GETs over every key: memtide must give back at once what it holds and has in swap (the sampling ceiling's wake-up) and read the swap back ahead of its faults (`Moves::swap_in`), so the server takes few major faults for what it had swapped.
//!
//! Without the read-back each swapped value costs the server one major fault (a zram read in
//! its own time, counted in its cgroup's `pgmajfault`); with it, memtide's worker reads them
//! into the swap cache and the server finds them there (a minor fault). The figures are
//! printed: run with `cargo test --release -p memtide-cli --test linux -- wake:: --nocapture`.

use crate::host::redis::{bench_get, redis_programs, GetSpec, RedisServer};
use crate::host::*;
use std::time::{Duration, Instant};

/// The server holds `KEYS` values of `VALUE_BYTES` (jemalloc rounds each up to 4 KiB): about
/// 340 MiB.
const KEYS: u64 = 80_000;
const VALUE_BYTES: usize = 4000;
/// The idle server counts as shrunk once this much of it is in swap.
const SWAPPED_AT_LEAST: u64 = 128 * MIB;
/// At most this share of the pages it had in swap may come back as the server's own major
/// faults once it wakes (each costs one without the read-back, as the log line printed says).
const MAJOR_SHARE_AT_MOST: f64 = 0.5;

#[test]
fn a_redis_woken_from_swap_gets_it_read_back_ahead_of_its_faults() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_redis_woken_from_swap_gets_it_read_back_ahead_of_its_faults";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some((server_bin, bench_bin)) = redis_programs(test) else {
        return;
    };
    let Some(_swap) = zram(test, "1G") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cg = linux.cgroup("redis-wake");
    cg.set_limit_bytes(1024 * MIB);
    let server = RedisServer::start(&server_bin, &cg, tmp.path(), "wake", None);
    server
        .load(KEYS, VALUE_BYTES)
        .unwrap_or_else(|e| panic!("load the server: {e}"));
    let held0 = cg.sample().usage.0;
    println!(
        "wake: loaded {KEYS} keys, cgroup usage {:.0} MiB",
        mib(held0)
    );

    // Sampling in 5 s periods sizes the idle server down to its min, taking it to zram.
    let head = config_head("250ms", "self", "2G");
    let config = format!(
        r#"{head}
[policy]
sampling_period = "5s"
reclaim = "always"

[[tenant]]
name = "redis"
cgroup = "{}"
min = "32M"
max = "1G"
estimator = "sampling"
cap_at_estimate = true
"#,
        cg.path
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    let start = Instant::now();
    let mut shrunk = None;
    while start.elapsed() < Duration::from_secs(120) {
        let s = cg.sample();
        if s.swap.is_some_and(|b| b.0 >= SWAPPED_AT_LEAST) {
            shrunk = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let Some(before) = shrunk else {
        panic!(
            "the idle server never had {} MiB in swap within 120 s (now {:?}); log:\n{}",
            mib(SWAPPED_AT_LEAST),
            cg.sample().swap,
            daemon.log_text()
        );
    };
    // Let the shrink finish: the read-back must face all of what was taken.
    std::thread::sleep(Duration::from_secs(5));
    let before = {
        let s = cg.sample();
        if s.swap >= before.swap {
            s
        } else {
            before
        }
    };
    let swapped = before.swap.unwrap().0;
    // Read-backs before the load (a shrink step's refaults can earn a tenant a rise with room
    // for the little it has in swap) are not the wake-up's.
    let log_before = daemon.log_text().len();
    println!(
        "wake: after {:.0} s the idle server holds {:.0} MiB with {:.0} MiB in swap (limit {:?})",
        start.elapsed().as_secs_f64(),
        mib(before.usage.0),
        mib(swapped),
        limit_bytes(&before).map(mib)
    );

    // Woken: one client's random GETs over every key, three passes' worth.
    let spec = GetSpec {
        benchmark: bench_bin,
        port: server.port,
        keys: KEYS,
        clients: 1,
        cpu: None,
    };
    let woke = Instant::now();
    let bench = bench_get(&spec, 3 * KEYS, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("the GET load: {e}"));
    let load_took = woke.elapsed();
    let after = cg.sample();
    let majors = after.major_faults.unwrap() - before.major_faults.unwrap();
    let swapped_pages = swapped / 4096;
    let log = daemon.log_text();
    let woken: Vec<&str> = log[log_before..]
        .lines()
        .filter(|l| l.contains("swapped_in") && l.contains("tenant=redis"))
        .collect();
    let line = woken.first().copied().unwrap_or("(no swapped_in line)");
    println!(
        "wake: {} GETs in {:.1} s ({:.0}/s, p99 {:.3} ms); the server took {majors} major faults \
         for {swapped_pages} pages it had in swap; swap now {:.1} MiB, usage {:.0} MiB, limit {:?} MiB\n\
         wake: {line}",
        3 * KEYS,
        load_took.as_secs_f64(),
        bench.rps,
        bench.p99_ms,
        mib(after.swap.unwrap_or_default().0),
        mib(after.usage.0),
        limit_bytes(&after).map(mib),
    );

    let mut failures = Vec::new();
    if woken.is_empty() {
        failures.push("no swapped_in line for the server once it woke".to_string());
    }
    if (majors as f64) > MAJOR_SHARE_AT_MOST * swapped_pages as f64 {
        failures.push(format!(
            "the server took {majors} major faults for the {swapped_pages} pages it had in swap \
             (at most {:.0}% allowed): its swap was not read back ahead",
            MAJOR_SHARE_AT_MOST * 100.0
        ));
    }
    if after.swap.unwrap_or_default().0 > swapped / 10 {
        failures.push(format!(
            "{:.0} MiB still in swap after the load, of {:.0} MiB",
            mib(after.swap.unwrap_or_default().0),
            mib(swapped)
        ));
    }
    let kills = cg.cgroup.oom_kills().unwrap().unwrap_or(0);
    if kills > 0 {
        failures.push(format!("{kills} OOM kill(s) in the server's cgroup"));
    }
    let status = daemon.signal_and_wait(libc::SIGTERM);
    if !status.success() {
        failures.push(format!("the daemon exited {status} on SIGTERM"));
    }
    if limit_bytes(&cg.sample()) != Some(1024 * MIB) {
        failures.push(format!(
            "limit after SIGTERM {:?}, not its original 1024 MiB",
            limit_bytes(&cg.sample()).map(mib)
        ));
    }
    assert!(
        failures.is_empty(),
        "{}\nlog:\n{}",
        failures.join("\n"),
        daemon.log_text()
    );
}
