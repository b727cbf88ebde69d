//! Shape tests of the controller's cache quotas (Gemini, issue 13) on `scenarios/gemini-pools.toml`: each holds for seeds 1-6, read off the runs' records (each database's latency, and the quota in each decision's reason).

use crate::common::*;
use memtide_cli::record::RunRecord;
use memtide_model::{CacheNote, Pages};

/// The SLO as met: 500 µs and its 10% slack.
const MET_MS: f64 = 0.55;
/// Before and after TPC-W's queries turn hotter at 450 s, each once its quotas settled.
const BEFORE: (f64, f64) = (240.0, 450.0);
const AFTER: (f64, f64) = (600.0, 900.0);

fn latency_ms(r: &RunRecord, name: &str, (from, to): (f64, f64)) -> f64 {
    mean(r, name, from, to, |row| row.latency_ms.unwrap_or(f64::NAN))
}

/// `name`'s cache notes over `[from, to)`.
fn notes(r: &RunRecord, name: &str, (from, to): (f64, f64)) -> Vec<CacheNote> {
    rows(r, name, from, to)
        .into_iter()
        .map(|(t, row)| {
            row.reason
                .cache
                .unwrap_or_else(|| panic!("{name} at {t} s has no quota: {}", row.reason))
        })
        .collect()
}

fn mean_quota_mib(notes: &[CacheNote]) -> f64 {
    notes.iter().map(|n| n.quota.as_mib_f64()).sum::<f64>() / notes.len() as f64
}

#[test]
fn the_strict_database_meets_its_slo_under_quotas_and_misses_it_sized_by_memory_alone() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let quotas = run_seeds("gemini-pools.toml", Some("quotas"), &[], &SEEDS);
    let memory = run_seeds("gemini-pools.toml", Some("memory"), &[], &SEEDS);
    for ((seed, q), (_, m)) in quotas.iter().zip(memory.iter()) {
        for phase in [BEFORE, AFTER] {
            let met = latency_ms(q, "tpcw", phase);
            assert!(
                met <= MET_MS,
                "seed {seed} {phase:?}: tpcw {met:.3} ms under quotas"
            );
        }
        // Sized by memory alone, the two busy databases get alike and TPC-W misses.
        let missed = latency_ms(m, "tpcw", BEFORE);
        assert!(
            missed > MET_MS * 1.1,
            "seed {seed}: tpcw {missed:.3} ms by memory"
        );
        // Once TPC-W needs less, RUBiS gets what it no longer needs: lower latency than
        // memory's even split gives it.
        let (with, without) = (latency_ms(q, "rubis", AFTER), latency_ms(m, "rubis", AFTER));
        assert!(
            with < 0.85 * without,
            "seed {seed}: rubis {with:.3} ms under quotas, {without:.3} by memory"
        );
        // Memory alone never sizes by SLO: no quota in its reasons.
        assert!(rows(m, "tpcw", 0.0, 900.0)
            .iter()
            .all(|(_, row)| row.reason.cache.is_none()));
    }
}

#[test]
fn quotas_follow_the_curves_when_the_workload_changes_and_stay_within_the_budget() {
    let _gate = memtide_testkit::file_gate(module_path!());
    for (seed, r) in run_seeds("gemini-pools.toml", Some("quotas"), &[], &SEEDS) {
        let (tpcw_before, tpcw_after) = (notes(&r, "tpcw", BEFORE), notes(&r, "tpcw", AFTER));
        let (rubis_before, rubis_after) = (notes(&r, "rubis", BEFORE), notes(&r, "rubis", AFTER));
        let (tb, ta) = (mean_quota_mib(&tpcw_before), mean_quota_mib(&tpcw_after));
        let (rb, ra) = (mean_quota_mib(&rubis_before), mean_quota_mib(&rubis_after));
        // TPC-W needs more than half of the 128 MiB, then, its queries hotter, far less.
        assert!(
            tb > 64.0 && ta < 0.5 * tb,
            "seed {seed}: tpcw {tb:.0} -> {ta:.0} MiB"
        );
        assert!(ra > rb + 32.0, "seed {seed}: rubis {rb:.0} -> {ra:.0} MiB");
        for (t, n) in tpcw_before.iter().zip(&rubis_before) {
            assert!(t.quota + n.quota <= t.budget, "seed {seed}: {t:?} {n:?}");
            assert!(t.budget <= Pages::from_mib(128));
            // The strict quota is the one whose curve meets the SLO.
            assert!(t.latency_us <= 550.0, "seed {seed}: {t:?}");
            assert_eq!(t.utility, 0.0);
        }
        // The curve's prediction holds: the measured latency (95% pool reads) is within 15%
        // of what the quota's curve predicts.
        for (phase, notes) in [(BEFORE, &tpcw_before), (AFTER, &tpcw_after)] {
            let predicted = notes.iter().map(|n| f64::from(n.latency_us)).sum::<f64>()
                / notes.len() as f64
                / 1000.0;
            let measured = latency_ms(&r, "tpcw", phase) / 0.95;
            assert!(
                (measured - predicted).abs() <= 0.15 * predicted,
                "seed {seed} {phase:?}: predicted {predicted:.3} ms, measured {measured:.3}"
            );
        }
    }
}
