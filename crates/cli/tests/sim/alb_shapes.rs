//! Shape tests of the application-level ballooning scenarios (ALB, issue 10): each holds for seeds 1-6, read off the runs' records (latency, and the application balloon's steps in each decision's reason).

use crate::common::*;
use memtide_cli::record::RunRecord;
use memtide_model::{AppStep, Pages};

/// One resize an agent finished: the pool before and after, how long from the first target
/// to the `done` memtide read, in seconds.
#[derive(Debug)]
struct Resize {
    from: Pages,
    to: Pages,
    seconds: f64,
    /// When memtide read the `done`, seconds into the run.
    done_at: f64,
}

/// The resizes of `name`'s agent, in order.
fn resizes(r: &RunRecord, name: &str) -> Vec<Resize> {
    let mut out = Vec::new();
    let mut asked: Option<(f64, Pages)> = None;
    for (t, row) in rows(r, name, 0.0, f64::INFINITY) {
        let Some(note) = row.reason.mechanism.app_balloon else {
            continue;
        };
        match note.step {
            AppStep::Asks { .. } if asked.is_none() => asked = Some((t, note.pool)),
            AppStep::Done { .. } => {
                if let Some((at, from)) = asked.take() {
                    out.push(Resize {
                        from,
                        to: note.pool,
                        seconds: t - at,
                        done_at: t,
                    });
                }
            }
            AppStep::Asks { .. } => {}
            _ => asked = None,
        }
    }
    out
}

/// One application of alb-table2: its tenants' prefix, the paper's times for 0.5 / 1 / 2 GiB
/// each way, and how far off ours may be (seconds below, above).
struct Table2Row {
    prefix: &'static str,
    shrink: [f64; 3],
    grow: [f64; 3],
    slack: (f64, f64),
}

#[test]
fn alb_table2_resize_time_grows_with_size_as_in_the_paper() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // InnoDB: the agent's costs are the lines fitted to the paper's, so within a second of
    // each, and memtide reads done at the tick after it happens. JVM: a full collection
    // (simulated, 3.25 GiB marked at 10 us a page) then the kernel's part (fitted), read a
    // tick or two after (the collection ends at a tick, the pages move from the next).
    let rows = [
        Table2Row {
            prefix: "innodb",
            shrink: [3.99, 7.57, 16.07],
            grow: [0.77, 1.51, 3.02],
            slack: (1.0, 1.5),
        },
        Table2Row {
            prefix: "jvm",
            shrink: [11.28, 16.34, 18.92],
            grow: [9.48, 9.96, 10.91],
            slack: (2.0, 4.0),
        },
    ];
    for (seed, r) in run_seeds("alb-table2.toml", None, &[], &SEEDS) {
        for row in &rows {
            let mut last = (0.0, 0.0);
            for (i, size) in ["0.5", "1", "2"].into_iter().enumerate() {
                let name = format!("{}-{size}", row.prefix);
                let moves = resizes(&r, &name);
                let [down, up] = &moves[..] else {
                    panic!("seed {seed}: {name}: {moves:?}");
                };
                let gib = |p: Pages| p.to_bytes().0 as f64 / f64::from(1u32 << 30);
                let moved = gib(down.from) - gib(down.to);
                assert!(
                    (moved - [0.5, 1.0, 2.0][i]).abs() < 0.01,
                    "seed {seed}: {name} gave back {moved:.3} GiB"
                );
                assert!(up.to > up.from, "seed {seed}: {name}: {up:?}");
                let near =
                    |s: f64, paper: f64| s >= paper - row.slack.0 && s <= paper + row.slack.1;
                assert!(
                    near(down.seconds, row.shrink[i]),
                    "seed {seed}: {name} shrank in {} s, paper {} s",
                    down.seconds,
                    row.shrink[i]
                );
                assert!(
                    near(up.seconds, row.grow[i]),
                    "seed {seed}: {name} grew in {} s, paper {} s",
                    up.seconds,
                    row.grow[i]
                );
                // Time grows with size, and giving back is the slower way.
                assert!(
                    down.seconds > last.0 && up.seconds >= last.1,
                    "seed {seed}: {name}: {} s and {} s after {last:?}",
                    down.seconds,
                    up.seconds
                );
                assert!(down.seconds > up.seconds, "seed {seed}: {name}");
                // End to end, from the cap raised at 90 s to the pool grown: an InnoDB pool is
                // asked once the guest balloon has deflated the room (128 MiB/s); an idle JVM
                // is asked 60 s after its shrink was done (as the scenario's header says).
                let gib_moved = [0.5, 1.0, 2.0][i];
                let waited = if row.prefix == "innodb" {
                    gib_moved * 8.0
                } else {
                    down.done_at + 60.0 - 90.0
                };
                let end_to_end = up.done_at - 90.0;
                assert!(
                    (end_to_end - (waited + up.seconds)).abs() <= 1.0,
                    "seed {seed}: {name} grew {end_to_end} s after its cap was raised: \
                     {waited} s waiting and {} s the agent's",
                    up.seconds
                );
                last = (down.seconds, up.seconds);
            }
        }
        // InnoDB gives back five times slower than it takes back (the kernel's LRU lock);
        // the JVM's full collection makes both ways alike.
        let innodb = resizes(&r, "innodb-2");
        assert!(
            innodb[0].seconds > 3.0 * innodb[1].seconds,
            "seed {seed}: {innodb:?}"
        );
        let jvm = resizes(&r, "jvm-2");
        assert!(
            jvm[0].seconds < 2.0 * jvm[1].seconds,
            "seed {seed}: {jvm:?}"
        );
    }
}

/// ALB Fig. 1's three runs with `overrides` over `seeds`: for each seed and database, the mean
/// query time (ms, 900-1200 s) configured, OS-ballooned and app-ballooned.
fn alb_fig1(overrides: &[&str], seeds: &[u64]) -> Vec<(u64, &'static str, [f64; 3])> {
    let latency = |r: &RunRecord, name: &str| {
        mean(r, name, 900.0, 1200.0, |row| row.latency_ms.unwrap_or(0.0))
    };
    let runs = |variant| run_seeds("alb-fig1.toml", Some(variant), overrides, seeds);
    let (configured, os, app) = (runs("configured"), runs("os"), runs("app"));
    let mut out = Vec::new();
    for ((seed, c), ((_, o), (_, a))) in configured.iter().zip(os.iter().zip(app.iter())) {
        for name in ["db4", "db6", "db8"] {
            out.push((
                *seed,
                name,
                [latency(c, name), latency(o, name), latency(a, name)],
            ));
        }
    }
    out
}

#[test]
fn alb_fig1_os_ballooning_is_several_times_slower_and_the_app_balloon_matches_configured() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // Seeds 1-6 and two more: 3.13-3.37x over seeds 1-12 (docs/reproducing.md).
    for (seed, name, [c, o, a]) in alb_fig1(&[], &[1, 2, 3, 4, 5, 6, 7, 9]) {
        assert!(
            o >= 3.0 * c,
            "seed {seed}: {name}: OS-ballooned {o:.0} ms against configured {c:.0} ms"
        );
        assert!(
            (a - c).abs() <= 0.1 * c,
            "seed {seed}: {name}: app-ballooned {a:.0} ms against configured {c:.0} ms"
        );
    }
}

#[test]
fn alb_fig1_with_twice_the_data_os_ballooning_costs_less_but_still_twice() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // With data twice the largest pool the configured database reads from disk too, so the
    // OS balloon's penalty is a smaller multiple: 2.08-2.61x over seeds 1-12, the less the
    // more memory (db8 least). The application balloon stays within 3.5% of configured.
    for (seed, name, [c, o, a]) in alb_fig1(&["tenants.*.workload.data=2048M"], &[1, 9]) {
        assert!(
            o >= 2.0 * c && o < 3.0 * c,
            "seed {seed}: {name}: OS-ballooned {o:.0} ms against configured {c:.0} ms"
        );
        assert!(
            (a - c).abs() <= 0.05 * c,
            "seed {seed}: {name}: app-ballooned {a:.0} ms against configured {c:.0} ms"
        );
    }
}

/// Seconds `name` took to finish `ops` operations of work given at `start_s` (whole ticks).
fn job_seconds(r: &RunRecord, name: &str, start_s: f64, ops: f64) -> f64 {
    let mut done = 0.0;
    for (t, row) in rows(r, name, start_s, f64::INFINITY) {
        done += row.throughput.unwrap_or(0.0) * r.tick_s;
        if done >= ops - 1e-6 {
            return t - start_s + r.tick_s;
        }
    }
    panic!("{name}: {done} of {ops} operations done by the end of the run");
}

/// Seconds from `at_s` until every tenant's agent that was asked to resize then is done.
fn move_seconds(r: &RunRecord, at_s: f64) -> f64 {
    let mut last = at_s;
    for name in ["db", "jvm"] {
        let mut asked = false;
        for (t, row) in rows(r, name, at_s, at_s + 120.0) {
            match row.reason.mechanism.app_balloon.map(|a| a.step) {
                Some(AppStep::Asks { .. } | AppStep::AwaitsFence { .. }) => asked = true,
                Some(AppStep::Done { .. }) if asked => {
                    last = last.max(t);
                    break;
                }
                _ => {}
            }
        }
    }
    last - at_s
}

#[test]
fn alb_table1_moving_memory_between_the_tiers_cuts_the_total_by_three_or_more() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // Paper: static 2077 + 456 = 2533 s; dynamic 165 + 450 + 21.5 = 638 s (4x).
    let runs = |variant| run_seeds("alb-table1.toml", Some(variant), &[], &SEEDS);
    for ((seed, s), (_, d)) in runs("static").iter().zip(runs("dynamic").iter()) {
        let db = |r| job_seconds(r, "db", 1200.0, 5000.0);
        let xml = |r| job_seconds(r, "jvm", 2860.0, 37000.0);
        let (db_s, db_d, xml_s, xml_d) = (db(s), db(d), xml(s), xml(d));
        let moves = move_seconds(d, 1170.0) + move_seconds(d, 2800.0);
        assert_eq!(move_seconds(s, 1170.0) + move_seconds(s, 2800.0), 0.0);
        let (total_s, total_d) = (db_s + xml_s, db_d + xml_d + moves);
        assert!(
            total_s >= 3.0 * total_d,
            "seed {seed}: static {total_s} s (db {db_s}, xml {xml_s}) against dynamic \
             {total_d} s (db {db_d}, xml {xml_d}, moves {moves})"
        );
        // The database's queries gain most; the XML processing has its heap back.
        assert!(
            db_s >= 5.0 * db_d,
            "seed {seed}: db {db_s} s against {db_d} s"
        );
        assert!(
            (xml_s - xml_d).abs() <= 0.05 * xml_s,
            "seed {seed}: xml {xml_s} s against {xml_d} s"
        );
        assert!(
            (2.0..=60.0).contains(&moves),
            "seed {seed}: moves took {moves} s"
        );
    }
}

#[test]
fn alb_fig8_the_giver_drops_at_once_and_the_receiver_warms_up_over_minutes() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // Paper: at each move the database that gives 4 GB drops at once; the one that receives
    // them climbs for about ten minutes, its new pages filled from disk.
    for (seed, r) in run_seeds("alb-fig8.toml", None, &[], &SEEDS) {
        let tp = |name: &str, from: f64, to: f64| {
            mean(&r, name, from, to, |row| row.throughput.unwrap_or(0.0))
        };
        for (at, giver, receiver) in [(1800.0, "db2", "db1"), (3600.0, "db1", "db2")] {
            let given = tp(giver, at - 600.0, at);
            let dropped = tp(giver, at + 60.0, at + 180.0);
            assert!(
                dropped <= 0.6 * given,
                "seed {seed}: {giver} at {at} s: {given:.2} -> {dropped:.2} ops/s"
            );
            let before = tp(receiver, at - 600.0, at);
            let settled = tp(receiver, at + 1200.0, at + 1800.0);
            assert!(
                settled >= 1.5 * before,
                "seed {seed}: {receiver} at {at} s: {before:.2} -> {settled:.2} ops/s"
            );
            // Two-minute bins, as the paper plots: the first is far below where it settles,
            // and 90% of it is reached after minutes, not seconds.
            let first = tp(receiver, at, at + 120.0);
            assert!(
                first <= 0.6 * settled,
                "seed {seed}: {receiver}: {first:.2} at once"
            );
            let warm = (0..15)
                .map(|bin| at + 120.0 * f64::from(bin))
                .find(|&from| tp(receiver, from, from + 120.0) >= 0.9 * settled)
                .expect("warm within half an hour")
                - at;
            assert!(
                (240.0..=1200.0).contains(&warm),
                "seed {seed}: {receiver} at {at} s: 90% after {warm} s"
            );
        }
    }
}

/// The pool sizes `name`'s agent was asked for, with when, in order.
fn asked(r: &RunRecord, name: &str) -> Vec<(f64, Pages, Pages)> {
    let mut out = Vec::new();
    for (t, row) in rows(r, name, 0.0, f64::INFINITY) {
        if let Some(note) = row.reason.mechanism.app_balloon {
            if let AppStep::Asks { pool, waited, .. } = note.step {
                if waited.is_zero() {
                    out.push((t, note.pool, pool));
                }
            }
        }
    }
    out
}

#[test]
fn alb_two_dbs_the_idle_pool_goes_first_the_busy_one_stays_warm_and_none_swings() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let mib = Pages::from_mib;
    for (seed, r) in run_seeds("alb-two-dbs.toml", None, &[], &SEEDS) {
        let pool = |name: &str, from: f64, to: f64| -> Vec<Pages> {
            rows(&r, name, from, to)
                .iter()
                .filter_map(|(_, row)| row.reason.mechanism.app_balloon.map(|n| n.pool))
                .collect()
        };
        // While the other idles (from 90 s, once the first moves are over, to the wake-up):
        // the busy pool is at its max, the idle one at its min. The busy pool reaches its max
        // at 74-81 s across the seeds (70 s before a pool behind a limit could count cold
        // memory in swap: the sim's database pages some of its other memory out at first).
        let (busy, idle) = (pool("busy", 90.0, 270.0), pool("idle", 90.0, 270.0));
        assert!(
            busy.iter().all(|&p| p >= mib(504)),
            "seed {seed}: busy {busy:?}"
        );
        assert!(
            idle.iter().all(|&p| p <= mib(136)),
            "seed {seed}: idle {idle:?}"
        );
        // After the wake-up the woken pool grows and the busy one gives back in paced moves
        // of at most an eighth of itself (and a granule's rounding).
        let woken = pool("idle", 330.0, 420.0);
        assert!(
            woken.iter().all(|&p| p >= mib(250)),
            "seed {seed}: woken {woken:?}"
        );
        for (t, from, to) in asked(&r, "busy").into_iter().filter(|a| a.0 >= 270.0) {
            assert!(
                to >= from || from - to <= mib(1) + Pages(from.0 / 8),
                "seed {seed}: at {t} s the busy pool was asked {from} -> {to}"
            );
        }
        // No pool swings: after the start (both pools fill from empty), each changes direction
        // at most twice (down while idle, up when woken; up, then down at the wake-up).
        for name in ["busy", "idle"] {
            let moves = asked(&r, name);
            let ups: Vec<bool> = moves
                .iter()
                .filter(|(t, ..)| *t >= 25.0)
                .map(|&(_, from, to)| to > from)
                .collect();
            let turns = ups.windows(2).filter(|w| w[0] != w[1]).count();
            assert!(
                turns <= 2 && moves.len() <= 24,
                "seed {seed}: {name}: {} resizes, {turns} turns: {moves:?}",
                moves.len()
            );
        }
    }
}
