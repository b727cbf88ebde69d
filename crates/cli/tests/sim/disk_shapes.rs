//! Shape tests of Lai et al.'s experiments (disk sharing against isolation, issue 14) on the `lai-*` scenarios: each holds for seeds 1-12, read off the runs' records (each system's mean response time per load level, each writer's fsync latency).

use crate::common::*;
use memtide_cli::record::RunRecord;

/// The seeds the Lai shapes run with: 1-12, the seeds docs/reproducing.md's ranges are measured
/// over. Seeds 1-6 alone gave ranges too narrow (issue 33: seed 9 rises 11.8x where 1-6 gave
/// 13.4-18.3x); twelve seeds cost about 12 s more than six.
const LAI_SEEDS: [u64; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

/// Sys_Inc's load levels: 1,000 to 2,600 users, one a minute.
const LEVELS: usize = 9;

/// Sys_Inc's users at level `l`.
fn users(l: usize) -> usize {
    1000 + 200 * l
}

/// `name`'s mean response time (ms) at each load level, the first 15 s of a level left out.
fn levels(r: &RunRecord, name: &str) -> Vec<f64> {
    (0..LEVELS)
        .map(|l| {
            let start = 60.0 * l as f64;
            mean(r, name, start + 15.0, start + 60.0, |row| {
                row.latency_ms.unwrap_or(f64::NAN)
            })
        })
        .collect()
}

/// `name`'s mean throughput (requests a second) over a level.
fn throughput(r: &RunRecord, name: &str, l: usize) -> f64 {
    let start = 60.0 * l as f64;
    mean(r, name, start + 15.0, start + 60.0, |row| {
        row.throughput.unwrap_or(f64::NAN)
    })
}

fn sweep_mean(levels: &[f64]) -> f64 {
    levels.iter().sum::<f64>() / levels.len() as f64
}

/// `name`'s mean fsync latency (ms) over `[from, to)`.
fn fsync_ms(r: &RunRecord, name: &str, from: f64, to: f64) -> f64 {
    mean(r, name, from, to, |row| {
        row.disk
            .and_then(|d| d.sync_latency_us)
            .map_or(f64::NAN, |us| us / 1000.0)
    })
}

fn shown(levels: &[f64]) -> String {
    levels
        .iter()
        .map(|x| format!("{x:.0}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn sharing_beats_every_iops_cap_for_both_systems() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let shared = run_seeds("lai-caps.toml", Some("shared"), &[], &LAI_SEEDS);
    for cap in ["cap-400", "cap-450", "cap-500", "cap-550"] {
        let capped = run_seeds("lai-caps.toml", Some(cap), &[], &LAI_SEEDS);
        for ((seed, s), (_, c)) in shared.iter().zip(capped.iter()) {
            for name in ["sys-const", "sys-inc"] {
                let (s, c) = (levels(s, name), levels(c, name));
                println!(
                    "seed {seed} {name}: shared {} | {cap} {}",
                    shown(&s),
                    shown(&c)
                );
                // Over the sweep, and at every level from 2,000 users on, sharing answers
                // faster. (Below that a cap on the neighbour can help Sys_Inc, whose own load
                // is under the cap: the paper's figures start where the disk is contended.)
                // This holds at the scenario's load, Sys_Const at 2,100 users, whose ~640 IOPS
                // exceed every cap; at lower loads a cap can help Sys_Const (the next test).
                assert!(
                    sweep_mean(&s) < sweep_mean(&c),
                    "seed {seed} {name}: shared {:.0} ms against {cap} {:.0} ms",
                    sweep_mean(&s),
                    sweep_mean(&c)
                );
                for l in 5..LEVELS {
                    assert!(
                        s[l] < c[l],
                        "seed {seed} {name} at {} users: shared {:.0} ms, {cap} {:.0} ms",
                        users(l),
                        s[l],
                        c[l]
                    );
                }
            }
        }
    }
}

#[test]
fn a_cap_over_the_constant_systems_own_demand_helps_it_and_still_hurts_its_neighbour() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // Sys_Const at 1,500 users asks about 460 IOPS: under caps of 500 and 550 its own I/O is
    // never held back, while Sys_Inc's (300 -> 790 IOPS as it grows) is, so Sys_Const meets a
    // less loaded disk than when sharing. Caps of 400 and 450 hold Sys_Const back too, and
    // sharing wins again. Sys_Inc's demand passes every cap, so every cap is worse for it.
    let load = ["tenants.0.disk.users=1500"];
    let run = |v| run_seeds("lai-caps.toml", Some(v), &load, &LAI_SEEDS);
    let shared = run("shared");
    for (cap, helps) in [
        ("cap-400", false),
        ("cap-450", false),
        ("cap-500", true),
        ("cap-550", true),
    ] {
        for ((seed, s), (_, c)) in shared.iter().zip(run(cap).iter()) {
            let (sc, cc) = (
                sweep_mean(&levels(s, "sys-const")),
                sweep_mean(&levels(c, "sys-const")),
            );
            let (si, ci) = (
                sweep_mean(&levels(s, "sys-inc")),
                sweep_mean(&levels(c, "sys-inc")),
            );
            println!("seed {seed} {cap}: sys-const shared {sc:.0} / capped {cc:.0} ms, sys-inc {si:.0} / {ci:.0} ms");
            assert_eq!(
                cc < sc,
                helps,
                "seed {seed} sys-const at 1,500 users: shared {sc:.0} ms against {cap} {cc:.0} ms"
            );
            assert!(
                si < ci,
                "seed {seed} sys-inc: shared {si:.0} ms against {cap} {ci:.0} ms"
            );
        }
    }
}

#[test]
fn the_constant_system_slows_many_fold_as_its_neighbour_grows() {
    let _gate = memtide_testkit::file_gate(module_path!());
    for (seed, r) in run_seeds("lai-growth.toml", Some("paper"), &[], &LAI_SEEDS) {
        let rt = levels(&r, "sys-const");
        let rise = rt[LEVELS - 1] / rt[0];
        let fall = 1.0 - throughput(&r, "sys-const", LEVELS - 1) / throughput(&r, "sys-const", 0);
        println!(
            "seed {seed}: sys-const {} ms ({rise:.1}x), throughput -{:.1}%",
            shown(&rt),
            100.0 * fall
        );
        // The paper: response time +1,100% (12x), throughput down by less than 10%. Seeds
        // 1-12 rise 11.8-18.3x, so the bound is 8x, not the paper's 12x. The rise is not
        // monotone: the disk saturates near 2,000 users, and from there Sys_Const's response
        // time is a plateau (341-578 ms) that wanders from level to level; every level of it
        // is many times the first.
        assert!(rise > 8.0, "seed {seed}: {rise:.1}x");
        for l in 5..LEVELS {
            assert!(
                rt[l] > 8.0 * rt[0],
                "seed {seed} at {} users: {:.0} against {:.0} ms",
                users(l),
                rt[l],
                rt[0]
            );
        }
        assert!(fall < 0.10, "seed {seed}: throughput -{:.1}%", 100.0 * fall);
    }
}

#[test]
fn fsync_latency_grows_with_writers_and_with_threads() {
    let _gate = memtide_testkit::file_gate(module_path!());
    for file in ["lai-fsync.toml", "lai-fsync-threads.toml"] {
        for (seed, r) in run_seeds(file, None, &[], &LAI_SEEDS) {
            // A writer joins every 30 s: w1 alone, then with 1, 2 and 3 more.
            let by_writers: Vec<f64> = (0..4)
                .map(|k| fsync_ms(&r, "w1", 30.0 * k as f64 + 5.0, 30.0 * (k + 1) as f64))
                .collect();
            println!("{file} seed {seed}: fsync ms by writers {by_writers:.2?}");
            assert!(
                by_writers.windows(2).all(|w| w[1] > w[0]),
                "{file} seed {seed}: {by_writers:?}"
            );
            // The paper: more than 600% higher with 4 than with 1.
            let rise = by_writers[3] / by_writers[0];
            assert!(rise > 7.0, "{file} seed {seed}: {rise:.1}x");
        }
    }
}

#[test]
fn fewer_binlog_syncs_and_fewer_write_threads_lessen_the_interference() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let run = |v| run_seeds("lai-mitigations.toml", Some(v), &[], &LAI_SEEDS);
    let (paper, sync1, sync100, threads1) = (
        run("paper"),
        run("sync-binlog-1"),
        run("sync-binlog-100"),
        run("write-threads-1"),
    );
    for i in 0..LAI_SEEDS.len() {
        let seed = paper[i].0;
        let at = |r: &RunRecord, l: usize| levels(r, "sys-const")[l];
        // sync_binlog 1 -> 100, Sys_Inc at 2,000 users: the paper's "over 400% less".
        let binlog = at(&sync1[i].1, 5) / at(&sync100[i].1, 5);
        // write_io_threads 4 -> 1, Sys_Inc at 2,600 users: the paper's -57%.
        let threads = 1.0 - at(&threads1[i].1, 8) / at(&paper[i].1, 8);
        println!(
            "seed {seed}: sync_binlog 1 / 100 = {binlog:.1}x; 1 write thread: -{:.0}%",
            100.0 * threads
        );
        assert!(binlog > 4.0, "seed {seed}: {binlog:.1}x");
        assert!(threads > 0.4, "seed {seed}: -{:.0}%", 100.0 * threads);
    }
}

#[test]
fn a_latency_target_raises_the_constant_systems_weight_and_holds_its_response_time() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let paper = run_seeds("lai-growth.toml", Some("paper"), &[], &LAI_SEEDS);
    let target = run_seeds("lai-growth.toml", Some("target"), &[], &LAI_SEEDS);
    for ((seed, p), (_, t)) in paper.iter().zip(target.iter()) {
        let (without, with) = (levels(p, "sys-const"), levels(t, "sys-const"));
        println!(
            "seed {seed}: sys-const {} ms; with a 20 ms target {} ms",
            shown(&without),
            shown(&with)
        );
        // From 2,000 users on the disk is contended: the target's weight holds Sys_Const's
        // response time to a fraction of what equal weights give it.
        for l in 5..LEVELS {
            assert!(
                with[l] < without[l] / 2.0,
                "seed {seed} at {} users: {:.0} against {:.0} ms",
                users(l),
                with[l],
                without[l]
            );
        }
        // The weight is raised (8x) once Sys_Inc's load makes Sys_Const miss its target, and
        // the reason says so.
        let late = rows(t, "sys-const", 500.0, 540.0);
        assert!(
            late.iter()
                .all(|(_, row)| row.reason.disk.is_some_and(|d| d.weight == 800)),
            "seed {seed}"
        );
        let early = rows(p, "sys-const", 500.0, 540.0);
        assert!(
            early
                .iter()
                .all(|(_, row)| row.reason.disk.is_some_and(|d| d.weight == 100)),
            "seed {seed}"
        );
    }
}
