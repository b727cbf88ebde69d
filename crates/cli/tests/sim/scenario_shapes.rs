//! Shape tests: each scenario that reproduces a paper's experiment shows the paper's shape (who gets more, which state is reached, which estimator converges faster).

use crate::common::*;
use memtide_model::ReclamationState;

#[test]
fn esx_idle_tax_moves_idle_memory_to_the_active_vm() {
    let _gate = memtide_testkit::file_gate(module_path!());
    for (seed, r) in run_seeds("esx-idle-tax.toml", None, &[], &SEEDS) {
        let alloc = |n, a, b| mean(&r, n, a, b, |row| row.allocated.as_mib_f64());
        // Tax 0: pure shares, both about the same (paper: ~179 MB each).
        let (idle0, active0) = (
            alloc("idle-vm", 400.0, 600.0),
            alloc("dbench-vm", 400.0, 600.0),
        );
        assert!(
            (idle0 - active0).abs() < 0.15 * active0,
            "seed {seed}, tax 0: idle {idle0:.1} vs active {active0:.1} MB"
        );
        assert!(
            (150.0..=210.0).contains(&active0),
            "seed {seed}, tax 0: active VM holds {active0:.1} MB"
        );
        // Tax 0.75: the idle VM's memory moves to the active one.
        let (idle1, active1) = (
            alloc("idle-vm", 1000.0, 1200.0),
            alloc("dbench-vm", 1000.0, 1200.0),
        );
        assert!(
            active1 > active0 + 40.0,
            "seed {seed}, tax 0.75: active VM {active0:.1} -> {active1:.1} MB"
        );
        assert!(
            idle1 < idle0 - 40.0,
            "seed {seed}, tax 0.75: idle VM {idle0:.1} -> {idle1:.1} MB"
        );
        // ... and the active VM's throughput rises by at least 30%.
        let tp = |a, b| mean(&r, "dbench-vm", a, b, |row| row.throughput.unwrap_or(0.0));
        let (before, after) = (tp(400.0, 600.0), tp(1000.0, 1200.0));
        assert!(
            after >= 1.3 * before,
            "seed {seed}: throughput {before:.0} -> {after:.0} ops/s"
        );
    }
}

#[test]
fn esx_sampling_follows_increases_fast_and_decreases_slowly() {
    let _gate = memtide_testkit::file_gate(module_path!());
    for (seed, r) in run_seeds("esx-sampling.toml", None, &[], &SEEDS) {
        let est = |t| at(&r, "toucher-vm", t, |row| row.active_estimate.as_mib_f64());
        // Increases (50 -> 250 at 300 s, 100 -> 250 at 900 s) are followed within about one
        // period.
        for step in [300.0, 900.0] {
            let e = est(step + 45.0);
            assert!(
                e >= 0.8 * 250.0,
                "seed {seed}: estimate {e:.1} MB 45 s after a step up at {step} s"
            );
        }
        // Decreases (250 -> 100 at 600 s, 250 -> 50 at 1200 s) decay slowly...
        assert!(
            est(630.0) > 175.0,
            "seed {seed}: estimate {:.1} MB 30 s after the drop to 100 MB",
            est(630.0)
        );
        assert!(
            est(1230.0) > 150.0,
            "seed {seed}: estimate {:.1} MB 30 s after the drop to 50 MB",
            est(1230.0)
        );
        // ... but do get there.
        let settled = est(895.0);
        assert!(
            settled < 140.0,
            "seed {seed}: estimate {settled:.1} MB after 295 s at 100 MB"
        );
    }
}

#[test]
fn sampling_cap_grows_within_periods_and_comes_down_to_the_working_set() {
    let _gate = memtide_testkit::file_gate(module_path!());
    for (seed, r) in run_seeds("sampling-convergence.toml", None, &[], &SEEDS) {
        let band = (r.convergence_low, r.convergence_high);
        let within = |from, to| converged_between(&r, "vm", band, from, to);
        // 300 MB from the start: the VM holds what it touches at once.
        let t = within(0.0, 300.0).unwrap_or(f64::INFINITY);
        assert!(t <= 60.0, "seed {seed}: 300 MB reached at {t} s");
        // 800 MB from 300 s: the guest faults, the cap grows by half its estimate per
        // period, and the VM is there within five periods.
        let t = within(300.0, 600.0).unwrap_or(f64::INFINITY);
        assert!(t <= 300.0 + 150.0, "seed {seed}: 800 MB reached at {t} s");
        // 200 MB from 600 s: the memory goes slowly (the slow average)...
        let held = at(&r, "vm", 660.0, |row| row.allocated.as_mib_f64());
        assert!(held > 2.0 * 200.0, "seed {seed}: {held:.1} MB at 660 s");
        // ... but all of it: within [0.9, 1.3] x 200 MB from some time on to the end, where
        // estimate + 50% left it at 1.4-1.6 x.
        let t = within(600.0, f64::INFINITY).unwrap_or(f64::INFINITY);
        assert!(
            (600.0 + 180.0..=600.0 + 720.0).contains(&t),
            "seed {seed}: 200 MB reached at {t} s"
        );
    }
}

#[test]
fn tws_converges_in_seconds_where_esx_sampling_takes_minutes() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // Paper: TWS reaches the ideal allocation in about 10 s, ESXi's sampling in 136 s.
    // Converged = allocation and target both within [0.9, 1.3] x WS, to the end of the run.
    for (seed, tws) in run_seeds("tws-convergence.toml", Some("tws"), &[], &SEEDS) {
        for name in ["ws300", "ws1200"] {
            let t = converged_s(&tws, name).unwrap_or(f64::INFINITY);
            assert!(t <= 20.0, "seed {seed}: tws: {name} converged at {t} s");
        }
    }
    for (seed, esx) in run_seeds("tws-convergence.toml", Some("esx"), &[], &SEEDS) {
        let t_esx = converged_s(&esx, "ws1200").unwrap_or(f64::INFINITY);
        assert!(
            t_esx > 100.0,
            "seed {seed}: esx: ws1200 converged at {t_esx} s"
        );
    }
}

#[test]
fn tws_beats_committed_on_cpu_job_and_oltp() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let tws = run_seeds("tws-workloads.toml", Some("tws"), &[], &SEEDS);
    let com = run_seeds("tws-workloads.toml", Some("committed"), &[], &SEEDS);
    let target = |r, n| mean(r, n, 0.0, f64::INFINITY, |row| row.target.as_mib_f64());
    for ((seed, tws), (_, com)) in tws.iter().zip(&com) {
        // CPU job (paper: TWS 783.6 MB / 3.08%, committed 922.6 MB / 4.11%): TWS finds the
        // allocated-but-idle memory, and rises above committed memory when the job's demand
        // does, so it holds less on average and degrades less.
        let (t_tws, t_com) = (target(tws, "cpu-job"), target(com, "cpu-job"));
        assert!(
            t_tws < 0.97 * t_com,
            "seed {seed}: cpu-job target tws {t_tws:.1} vs committed {t_com:.1} MB"
        );
        let (d_tws, d_com) = (degradation(tws, "cpu-job"), degradation(com, "cpu-job"));
        assert!(
            d_tws < d_com,
            "seed {seed}: cpu-job degradation tws {d_tws:.3} vs committed {d_com:.3}"
        );
        // OLTP (paper: TWS 350.8 MB / 3.31%, committed 328.8 MB / 17.99%): committed memory
        // misses the page cache; TWS holds a little more (+6.7% in the paper) and degrades far
        // less.
        let (t_tws, t_com) = (target(tws, "oltp"), target(com, "oltp"));
        assert!(
            t_tws > t_com && t_tws < 1.25 * t_com,
            "seed {seed}: oltp target tws {t_tws:.1} vs committed {t_com:.1} MB"
        );
        let (d_tws, d_com) = (degradation(tws, "oltp"), degradation(com, "oltp"));
        assert!(
            d_tws < 0.05 && d_tws < 0.25 * d_com,
            "seed {seed}: oltp degradation tws {d_tws:.3} vs committed {d_com:.3}"
        );
        // Tiny web service: at its floor, no degradation, under both.
        for r in [tws, com] {
            let floor = r.tenants.iter().find(|t| t.name == "web").unwrap().min_mb;
            let t = target(r, "web");
            assert!(
                (t - floor).abs() < 0.05 * floor,
                "seed {seed}: web target {t:.1} MB vs floor {floor:.1}"
            );
            assert!(degradation(r, "web").abs() < 0.02);
        }
    }
}

/// `--set`s that give tws-workloads' CPU job a 4 GB VM: 1,800 MB allocated, 300 MB of input,
/// working in `ws` MB and in `peak` MB from 320 to 460 s.
fn cpu_job_4g(ws: u32, peak: u32) -> Vec<String> {
    vec![
        "tenants.cpu-job.max=4096M".into(),
        "tenants.cpu-job.workload.allocated=1800M".into(),
        "tenants.cpu-job.workload.input=300M".into(),
        format!("tenants.cpu-job.workload.working_set={ws}M"),
        format!(
            "tenants.cpu-job.workload.phases=[{{ at = \"320s\", working_set = \"{peak}M\" }}, \
             {{ at = \"460s\", working_set = \"{ws}M\" }}]"
        ),
    ]
}

#[test]
fn tws_degrades_less_on_the_cpu_job_only_when_its_peak_outgrows_committed_memory() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // The domain of TWS Table 1's CPU-job row (docs/reproducing.md): committed-memory
    // ballooning holds the job's allocation; TWS degrades less only when the job's peak
    // demand (working set and input) needs more than that. At 4 GB, a peak of 1,600 + 300 MB
    // over 1,800 allocated: TWS wins both ways; a peak of 1,500 + 300 MB: committed memory
    // covers it, and TWS, probing below the working set, degrades more (10% against 7.5%).
    let target = |r: &memtide_cli::record::RunRecord, n: &str| {
        mean(r, n, 0.0, f64::INFINITY, |row| row.target.as_mib_f64())
    };
    for (ws, peak, tws_degrades_less, seed) in [(1200, 1600, true, 9), (1100, 1500, false, 7)] {
        let sets = cpu_job_4g(ws, peak);
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let tws = run_seeds("tws-workloads.toml", Some("tws"), &sets, &[seed]);
        let com = run_seeds("tws-workloads.toml", Some("committed"), &sets, &[seed]);
        let (tws, com) = (&tws[0].1, &com[0].1);
        let (t_tws, t_com) = (target(tws, "cpu-job"), target(com, "cpu-job"));
        assert!(
            t_tws < t_com,
            "seed {seed}, peak {peak}: target tws {t_tws:.1} vs committed {t_com:.1} MB"
        );
        let (d_tws, d_com) = (degradation(tws, "cpu-job"), degradation(com, "cpu-job"));
        assert_eq!(
            d_tws < d_com,
            tws_degrades_less,
            "seed {seed}, peak {peak}: degradation tws {d_tws:.3} vs committed {d_com:.3}"
        );
    }
}

#[test]
fn shares_divide_memory_in_ratio_among_active_tenants() {
    let _gate = memtide_testkit::file_gate(module_path!());
    for (seed, r) in run_seeds("shares.toml", None, &[], &SEEDS) {
        let alloc = |n| mean(&r, n, 200.0, 300.0, |row| row.allocated.as_mib_f64());
        let (a, b, c) = (alloc("a"), alloc("b"), alloc("c"));
        assert!(
            (a / b - 1.0).abs() < 0.05,
            "seed {seed}: a {a:.1} vs b {b:.1}"
        );
        assert!(
            (c / a - 2.0).abs() < 0.1,
            "seed {seed}: c {c:.1} vs a {a:.1}"
        );
    }
}

#[test]
fn overcommit_walks_down_through_the_states_and_back_with_hysteresis() {
    let _gate = memtide_testkit::file_gate(module_path!());
    for (seed, r) in run_seeds("overcommit-states.toml", None, &[], &SEEDS) {
        let states: Vec<ReclamationState> = r.ticks.iter().map(|t| t.state).collect();
        for s in [
            ReclamationState::Soft,
            ReclamationState::Hard,
            ReclamationState::Low,
        ] {
            assert!(states.contains(&s), "seed {seed}: never reached {s}");
        }
        assert_eq!(
            states.last(),
            Some(&ReclamationState::High),
            "seed {seed}: did not recover"
        );
        // Going back up is one state at a time.
        for w in states.windows(2) {
            assert!(
                w[1] >= w[0] || w[0] as u8 - w[1] as u8 == 1,
                "seed {seed}: jumped {} -> {}",
                w[0],
                w[1]
            );
        }
        let transitions = states.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(
            transitions < 30,
            "seed {seed}: {transitions} state transitions: flapping"
        );
        assert_eq!(r.refusals.len(), 1, "seed {seed}");
        assert_eq!(r.refusals[0].tenant, "too-big", "seed {seed}");
        // The others kept running to the end.
        assert!(
            !rows(&r, "grower-1", 470.0, 480.0).is_empty(),
            "seed {seed}"
        );
    }
}

#[test]
fn containers_under_limits_keep_the_linux_safety_rails() {
    let _gate = memtide_testkit::file_gate(module_path!());
    use memtide_model::{LimitRail, Pages};
    for (seed, r) in run_seeds("containers.toml", None, &[], &SEEDS) {
        let names = ["web", "batch", "idle", "pinned"];
        let mut backoffs = [0usize; 4];
        for tick in &r.ticks {
            let mut limits = Pages::ZERO;
            for row in &tick.rows {
                let i = row.tenant.0 as usize;
                let name = names[i];
                let at_s = tick.time_s;
                let n = row.reason.mechanism.limit.unwrap_or_else(|| {
                    panic!(
                        "seed {seed}: {name} at {at_s} s has no limit: {}",
                        row.reason
                    )
                });
                // A container moves by its limit alone.
                assert!(row.reason.mechanism.balloon.is_none() && !row.blocked);
                // The floor: no limit below it, ever.
                assert!(
                    n.to >= n.floor,
                    "seed {seed}: {name} at {at_s} s: {}",
                    row.reason
                );
                // Bounded shrink: below what the tenant holds by at most one step (5% of what
                // it holds, at least 1 MiB).
                let held = Pages(row.allocated.0 / memtide_model::PAGE_SIZE);
                let step = held.scale(0.05).max(Pages::from_mib(1));
                if n.to < n.from {
                    assert!(
                        n.to + step + Pages(1) >= n.from.min(held),
                        "seed {seed}: {name} at {at_s} s: a shrink of more than one step: {}",
                        row.reason
                    );
                }
                // Back-off: a tenant faulting at or above 2000/s keeps its limit.
                if let LimitRail::BackoffFaults { faults_per_s } = n.rail {
                    assert!(
                        faults_per_s >= 2000.0 && n.to == n.from,
                        "seed {seed}: {}",
                        row.reason
                    );
                    backoffs[i] += 1;
                }
                limits += n.to;
            }
            // Once the first shrinks are done, the limits fit the 900 MB budget.
            if tick.time_s >= 60.0 {
                assert!(
                    limits <= Pages::from_mib(900),
                    "seed {seed}: at {} s the limits add up to {limits}",
                    tick.time_s
                );
            }
        }
        // The two busy containers, squeezed below their working sets, backed off; the pinned
        // one, idle at its floor, never faulted enough to.
        assert!(
            backoffs[0] > 20 && backoffs[1] > 5,
            "seed {seed}: back-offs {backoffs:?}"
        );
        assert_eq!(backoffs[3], 0, "seed {seed}: back-offs {backoffs:?}");
        // The idle container gave back most of the 266 MB it held at its peak, by steps.
        let idle = |t| at(&r, "idle", t, |row| row.allocated.as_mib_f64());
        assert!(
            idle(20.0) > 200.0 && idle(230.0) < 120.0,
            "seed {seed}: {} -> {}",
            idle(20.0),
            idle(230.0)
        );
        // The container whose anonymous memory has no swap is held at its floor (what it holds
        // + 32 MB) and keeps running: every tick it does work.
        for (t, row) in rows(&r, "pinned", 20.0, 240.0) {
            let n = row.reason.mechanism.limit.unwrap();
            assert_eq!(
                n.floor,
                Pages::from_mib(216 + 32),
                "seed {seed}: at {t} s: {}",
                row.reason
            );
            assert!(
                row.throughput.unwrap_or(0.0) > 0.0,
                "seed {seed}: pinned stalled at {t} s"
            );
        }
    }
}

/// What `churn_1000_walks_every_state_and_back_with_floors_and_maxima_held` checks, tick by
/// tick as the run streams (keeping 1,000 tenants' rows for ten minutes would hold about
/// 400 MB): the states replayed, tenants' bounds, who ran.
struct ChurnCheck {
    seed: u64,
    /// Each tenant's (min, max).
    bounds: std::collections::BTreeMap<
        memtide_model::TenantId,
        (memtide_model::Bytes, memtide_model::Bytes),
    >,
    /// The policy's rule replayed over each tick's free memory.
    replay: memtide_policy::ReclamationTracker,
    states: Vec<ReclamationState>,
    /// Tenants running at each tick.
    running: Vec<usize>,
}

impl memtide_cli::record::Ticks for ChurnCheck {
    fn tick(&mut self, tick: memtide_runner::TickRecord) -> std::io::Result<()> {
        use memtide_model::{Bytes, Pages};
        let seed = self.seed;
        let at = tick.time_s;
        let page = memtide_model::PAGE_SIZE;
        // No flapping: every change is the one the thresholds and their hysteresis call for
        // (down as far as free memory fell, up one state once it clears the next threshold by
        // the gap), and no change happens without one.
        let replayed = self
            .replay
            .update(Pages(tick.free.0 / page), Pages(tick.machine.0 / page));
        assert_eq!(
            tick.state, replayed,
            "seed {seed} at {at} s: free {}",
            tick.free
        );
        self.states.push(tick.state);
        self.running.push(tick.rows.len());
        for row in &tick.rows {
            let (min, max) = self.bounds[&row.tenant];
            let name = row.tenant.0;
            assert!(
                row.allocated <= max,
                "seed {seed} at {at} s: t{name:04} holds {} > max {max}",
                row.allocated
            );
            assert!(
                row.target >= min,
                "seed {seed} at {at} s: t{name:04} target {} < min {min}",
                row.target
            );
            // The balloon never takes a guest below its floor.
            let balloon = row
                .balloon
                .as_ref()
                .map_or(Bytes::ZERO, |b| b.size.to_bytes());
            assert!(
                balloon.0 <= max.0 - min.0,
                "seed {seed} at {at} s: t{name:04} balloon {balloon} > max - min"
            );
        }
        Ok(())
    }
}

#[test]
fn churn_1000_walks_every_state_and_back_with_floors_and_maxima_held() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // Two seeds, not six: each run is 1,000 tenants for ten minutes (docs/benchmarks.md has
    // its time and memory), and the suite runs in CI near its time limit.
    for seed in [1, 2] {
        let path = scenario_path("churn-1000.toml");
        let scenario = memtide_scenario::load(&path, &[format!("seed={seed}")]).unwrap();
        assert_eq!(scenario.tenants.len(), 1000);
        let mut check = ChurnCheck {
            seed,
            bounds: scenario
                .tenants
                .iter()
                .map(|t| (t.spec.id, (t.spec.min.to_bytes(), t.spec.max.to_bytes())))
                .collect(),
            replay: memtide_policy::ReclamationTracker::new(scenario.controller.thresholds.clone()),
            states: Vec::new(),
            running: Vec::new(),
        };
        let run = memtide_cli::run::run(
            &scenario,
            &memtide_cli::progress::Progress::hidden(),
            &mut check,
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(run.refusals.is_empty(), "seed {seed}: {:?}", run.refusals);
        let states = &check.states;
        assert_eq!(states.len(), 600, "seed {seed}");
        // Each state below high entered and left, and the run ends in high.
        for s in [
            ReclamationState::Soft,
            ReclamationState::Hard,
            ReclamationState::Low,
        ] {
            let entered = states.windows(2).filter(|w| w[1] == s && w[0] != s).count();
            let left = states.windows(2).filter(|w| w[0] == s && w[1] != s).count();
            assert!(
                entered >= 1 && left == entered,
                "seed {seed}: {s} entered {entered}, left {left}"
            );
        }
        assert_eq!(states.last(), Some(&ReclamationState::High), "seed {seed}");
        let changes = states.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(changes < 30, "seed {seed}: {changes} state changes");
        // Churn: 500 at first, all 1,000 once the late ones arrive, 600 after the leavers.
        assert_eq!(check.running[0], 500, "seed {seed}");
        assert_eq!(check.running.iter().max(), Some(&1000), "seed {seed}");
        assert_eq!(check.running.last(), Some(&600), "seed {seed}");
    }
}
