//! Issue 28's two databases in short (scripts/alb-two-dbs.sh is the full run): two MariaDB servers with warm pools over one budget, the busy one under sysbench throughout, the idle one woken late; memtide with limits only (b) and memtide with the mariadb adapters (c) side by side on one timeline, so that what else the machine runs weighs on both alike. Asserts the shape: (c) serves the busy database at least 0.8 × as well as (b) before the wake-up, window by window (the target is at least as well: measured side by side 1.08-1.12 here, and one after the other 0.98 here and 1.07 in the full run; 0.88 before a missing pool's free list counted as its own, 0.41 before the first fix), gives the pools back at exit, pages in and out no pool (a server's cold memory may sit in swap, as under limits), resizes a pool at most 16 times, and nothing is killed.

use crate::host::mariadb;
use crate::host::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Issue 28's setup (9 × 200,000 rows, 392 MiB of clustered index per server, 512 MiB warm
/// pools, ~475 MiB of cgroup usage each, under an 800 MiB budget) on a shorter timeline. The
/// sizes are the issue's, not scaled: scaled down (256 MiB pools under 400 or 480 MiB) the
/// server's ~90 MiB outside its pool weighs more, the busy database's data no longer fits
/// beside the idle one's minimum, and limits only, its pool paged to zram outside the budget
/// at microseconds a page, served 1.25–2.5 × better than the adapters (measured).
const SETUP: &[(&str, &str)] = &[
    ("TABLES", "9"),
    ("ROWS", "200000"),
    ("POOL", "512M"),
    ("BUDGET", "800M"),
    ("STATIC", "398M"),
    ("APP_MIN", "128M"),
    ("TENANT_MIN", "160M"),
    ("T_DAEMON", "20"),
    ("T_WAKE", "80"),
    ("T_END", "120"),
    ("CONDITIONS", "b c"),
    // Side by side: run one after the other on CI's shared 2 vCPUs, (c)'s median was 0.78 ×
    // (b)'s in one run and 0.89 × before memtide even started in another.
    ("PARALLEL", "1"),
];

/// The most a database may swap in under the adapters, from memtide's start to the end. The
/// full runs measured 8-22 MiB (docs/reproducing.md), and a run of the whole test suite 25 MiB
/// for the busy database, whose pool gives up its share to the woken one; a pool paged in and
/// out instead swaps in what limits only does, 71-108 MiB for the woken database.
const SWAPIN_MOST: u64 = 32 * MIB;
const PAGE: u64 = 4096;

/// What the script reported for one condition: its `RESULT <tag> key=value` lines.
struct Outcome(BTreeMap<String, String>);

impl Outcome {
    fn get(&self, key: &str) -> &str {
        self.0
            .get(key)
            .unwrap_or_else(|| panic!("no {key} in the script's results"))
    }

    fn num(&self, key: &str) -> u64 {
        let v = self.get(key);
        v.parse()
            .unwrap_or_else(|_| panic!("{key}={v} is not a number"))
    }

    /// The busy database's TPS windows ending in (from, to] seconds, with their ends.
    fn busy_windows(&self, from: u64, to: u64) -> Vec<(u64, f64)> {
        self.get("busy_windows")
            .split(',')
            .filter_map(|w| {
                let (end, tps) = w.split_once(':')?;
                let end: u64 = end.parse().ok()?;
                (end > from && end <= to).then(|| Some((end, tps.parse().ok()?)))?
            })
            .collect()
    }

    /// The busy database's TPS windows ending in (from, to] seconds.
    fn busy_tps(&self, from: u64, to: u64) -> Vec<f64> {
        self.busy_windows(from, to)
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }
}

/// Each of `c`'s windows over `b`'s window ending at the same second (the two runs started
/// together, so their windows saw the same machine).
fn paired_ratios(b: &[(u64, f64)], c: &[(u64, f64)]) -> Vec<f64> {
    c.iter()
        .filter_map(|(end, tc)| {
            let (_, tb) = b.iter().find(|(e, _)| e == end)?;
            (*tb > 0.0).then(|| tc / tb)
        })
        .collect()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    assert!(!v.is_empty(), "no windows");
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The `RESULT` lines of the script's output, by condition tag (`b1`, `c1`).
fn outcomes(text: &str) -> BTreeMap<String, Outcome> {
    let mut by_tag: BTreeMap<String, Outcome> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("RESULT ") else {
            continue;
        };
        let Some((tag, kv)) = rest.split_once(' ') else {
            continue;
        };
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        by_tag
            .entry(tag.to_string())
            .or_insert_with(|| Outcome(BTreeMap::new()))
            .0
            .insert(k.to_string(), v.to_string());
    }
    by_tag
}

fn setting(key: &str) -> u64 {
    let v = SETUP.iter().find(|(k, _)| *k == key).expect("a setting").1;
    v.trim_end_matches('M').parse::<u64>().expect("a number")
        * if v.ends_with('M') { MIB } else { 1 }
}

#[test]
fn the_adapters_keep_the_busy_database_as_fast_as_limits_and_give_the_pools_back() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "the_adapters_keep_the_busy_database_as_fast_as_limits_and_give_the_pools_back";
    let Some(_linux) = linux(test) else {
        return;
    };
    if let Some(why) = mariadb::missing() {
        skip_or_fail(test, &why);
        return;
    }
    if swap_total() > 0 {
        skip_or_fail(
            test,
            "this host already has swap; the script sets up its own zram",
        );
        return;
    }
    memtide_testkit::samples::build_binaries();
    let target = memtide_path()
        .parent()
        .expect("the binaries' folder")
        .to_path_buf();
    let repo = memtide_testkit::repo();
    let started = Instant::now();
    let out = Command::new("bash")
        .arg(repo.join("scripts/alb-two-dbs.sh"))
        .envs(SETUP.iter().copied())
        .env("TARGET_DIR", &target)
        .current_dir(&repo)
        .output()
        .expect("run scripts/alb-two-dbs.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "scripts/alb-two-dbs.sh failed ({}) after {:.0?}:\n{stderr}",
        out.status,
        started.elapsed()
    );
    let by_tag = outcomes(&stdout);
    let (b, c) = (&by_tag["b1"], &by_tag["c1"]);
    let (t_daemon, t_wake) = (setting("T_DAEMON"), setting("T_WAKE"));
    let pool = setting("POOL");

    for (name, o) in [("(b) limits only", b), ("(c) adapters", c)] {
        assert_eq!(
            (
                o.num("oom_kills"),
                o.get("servers_alive"),
                o.get("busy_ok"),
                o.get("woken_ok")
            ),
            (0, "1", "1", "1"),
            "{name}: nothing is OOM-killed, both servers and both sysbench runs live to the end"
        );
        assert_eq!(
            o.num("daemon_exit"),
            0,
            "{name}: the daemon exits cleanly on SIGTERM"
        );
    }
    for (name, o) in [("(b)", b), ("(c)", c)] {
        assert_eq!(
            o.get("parallel"),
            "1",
            "{name} ran side by side with the other condition"
        );
    }
    let busy = |o: &Outcome| median(&o.busy_tps(t_daemon + 10, t_wake));
    let (tps_b, tps_c) = (busy(b), busy(c));
    let window = |o: &Outcome| o.busy_windows(t_daemon + 10, t_wake);
    let ratios = paired_ratios(&window(b), &window(c));
    assert!(
        ratios.len() >= 4,
        "(b) and (c) have at most {} windows from {} to {t_wake} s ending at the same second",
        ratios.len(),
        t_daemon + 10
    );
    let ratio = median(&ratios);
    eprintln!(
        "busy database before the wake-up, window by window (c) / (b): {} (median {ratio:.2}); \
         median TPS per 10 s: (b) {tps_b:.0}, (c) {tps_c:.0} ({:.2} of b); \
         pool resizes (c) {} / {}; swap at the end (c) {:.0} / {:.0} MiB; swapped in (b) {:.1} / {:.1}, (c) {:.1} / {:.1} MiB; \
         pools after exit (c) {:.0} / {:.0} MiB",
        ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(" "),
        tps_c / tps_b,
        c.get("resizes_busy"),
        c.get("resizes_idle"),
        mib(c.num("swap_busy_bytes")),
        mib(c.num("swap_idle_bytes")),
        mib(b.num("swapins_busy") * PAGE),
        mib(b.num("swapins_idle") * PAGE),
        mib(c.num("swapins_busy") * PAGE),
        mib(c.num("swapins_idle") * PAGE),
        mib(c.num("pool_busy_exit_bytes")),
        mib(c.num("pool_idle_exit_bytes")),
    );
    // The shape, each claim checked and every one that fails named together.
    let mut broken = Vec::new();
    let exit = (c.num("pool_busy_exit_bytes"), c.num("pool_idle_exit_bytes"));
    if exit != (pool, pool) {
        broken.push(format!(
            "(c): after the daemon's SIGTERM both pools are back at the configured {:.0} MiB: \
             they are at {:.0} / {:.0} MiB",
            mib(pool),
            mib(exit.0),
            mib(exit.1)
        ));
    }
    // No pool is paged: a server's cold memory may sit in swap (limits only keeps 80 MiB of
    // each there), but what is in use is not paged in and out. What each database swaps in
    // from memtide's start to the end, in pages (major faults), against limits only.
    for side in ["busy", "idle"] {
        let key = format!("swapins_{side}");
        let (ins_b, ins_c) = (b.num(&key), c.num(&key));
        if ins_c * PAGE > SWAPIN_MOST {
            broken.push(format!(
                "(c): the {side} database's pool is shrunk, not paged: it swapped in {:.1} MiB \
                 from memtide's start ({:.1} MiB with limits only), more than {:.0} MiB",
                mib(ins_c * PAGE),
                mib(ins_b * PAGE),
                mib(SWAPIN_MOST)
            ));
        }
    }
    // No swings: before issue 28's fix, 41 and 45 resizes in the full run.
    for side in ["busy", "idle"] {
        let n = c.num(&format!("resizes_{side}"));
        if n > 16 {
            broken.push(format!(
                "(c): the {side} pool resized {n} times, more than 16"
            ));
        }
    }
    // Issue 28's target is "at least as well" (measured here 1.08-1.12 side by side, 0.98 one
    // after the other); 0.8 leaves room for a shared 2-vCPU machine's noise and still fails
    // the policy before the first fix (0.41).
    // Window by window: each (c) window against the (b) window the machine ran beside it.
    if ratio < 0.8 {
        broken.push(format!(
            "(c) serves the busy database at least 0.8 × as well as (b) before the wake-up, \
             window by window: median {ratio:.2} (medians {tps_c:.0} against {tps_b:.0} TPS)"
        ));
    }
    assert!(
        broken.is_empty(),
        "issue 28's shape does not hold:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_script_reads_its_results() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let text = "noise\nRESULT c1 busy_windows=10:100.5,20:200,30:300,40:50\nRESULT c1 oom_kills=0\nRESULT b1 oom_kills=2\n";
    let o = outcomes(text);
    assert_eq!(o["c1"].busy_tps(10, 40), vec![200.0, 300.0, 50.0]);
    assert_eq!(median(&o["c1"].busy_tps(0, 40)), 150.25);
    let b = [(10, 100.0), (20, 200.0), (30, 0.0)];
    let c = [(10, 50.0), (20, 300.0), (30, 10.0), (40, 9.0)];
    assert_eq!(
        paired_ratios(&b, &c),
        vec![0.5, 1.5],
        "only windows ending together, never over an empty one"
    );
    assert_eq!((o["c1"].num("oom_kills"), o["b1"].num("oom_kills")), (0, 2));
    assert_eq!(setting("POOL"), 512 * MIB);
    assert!(Path::new(&memtide_testkit::repo().join("scripts/alb-two-dbs.sh")).is_file());
}
