//! Helpers shared by the scenario shape tests: load a scenario file, run it, read figures off the record.

#![allow(dead_code)]

use memtide_cli::record::{RunRecord, TenantRow};
use memtide_cli::run;
use memtide_model::Bytes;
use std::path::PathBuf;

pub fn scenario_path(file: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios")).join(file)
}

/// Runs a scenario file (optionally one variant of it) with extra overrides.
pub fn run_file(file: &str, variant: Option<&str>, overrides: &[&str]) -> RunRecord {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let path = scenario_path(file);
    let scenario = match variant {
        Some(v) => memtide_scenario::load_variant(&path, &overrides, v),
        None => memtide_scenario::load(&path, &overrides),
    }
    .unwrap_or_else(|e| panic!("{file}: {e}"));
    run::run_quiet(&scenario).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The seeds a shape test runs its scenario with: a shape must hold for each of them, not for
/// one seed that happens to show it.
pub const SEEDS: [u64; 6] = [1, 2, 3, 4, 5, 6];

/// [`run_file`] once per seed (the `seed=` override after `overrides`), each seed on a thread
/// of its own; the records come back in the order of `seeds`, each with its seed.
pub fn run_seeds(
    file: &str,
    variant: Option<&str>,
    overrides: &[&str],
    seeds: &[u64],
) -> Vec<(u64, RunRecord)> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = seeds
            .iter()
            .map(|&seed| {
                scope.spawn(move || {
                    let seed_override = format!("seed={seed}");
                    let mut all = overrides.to_vec();
                    all.push(&seed_override);
                    (seed, run_file(file, variant, &all))
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| {
                run.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

pub fn tenant_id(record: &RunRecord, name: &str) -> memtide_model::TenantId {
    record
        .tenants
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tenant {name}"))
        .id
}

/// Rows of one tenant with time in [from_s, to_s).
pub fn rows<'a>(
    record: &'a RunRecord,
    name: &str,
    from_s: f64,
    to_s: f64,
) -> Vec<(f64, &'a TenantRow)> {
    let id = tenant_id(record, name);
    record
        .ticks
        .iter()
        .filter(|t| t.time_s >= from_s && t.time_s < to_s)
        .flat_map(|t| {
            t.rows
                .iter()
                .filter(move |r| r.tenant == id)
                .map(move |r| (t.time_s, r))
        })
        .collect()
}

/// Mean of a row figure for one tenant over [from_s, to_s).
pub fn mean(
    record: &RunRecord,
    name: &str,
    from_s: f64,
    to_s: f64,
    f: impl Fn(&TenantRow) -> f64,
) -> f64 {
    let rows = rows(record, name, from_s, to_s);
    assert!(!rows.is_empty(), "{name} has no rows in [{from_s}, {to_s})");
    rows.iter().map(|(_, r)| f(r)).sum::<f64>() / rows.len() as f64
}

/// A row figure of one tenant at time `at_s`.
pub fn at(record: &RunRecord, name: &str, at_s: f64, f: impl Fn(&TenantRow) -> f64) -> f64 {
    let rows = rows(record, name, at_s, at_s + record.tick_s);
    let (_, row) = rows
        .first()
        .unwrap_or_else(|| panic!("{name} has no row at {at_s}"));
    f(row)
}

/// The summary's `converged_s` for a tenant: the earliest time from which its allocation and
/// its target stay within the scenario's band around its working set.
pub fn converged_s(record: &RunRecord, name: &str) -> Option<f64> {
    memtide_cli::output::summary::summarize(record)
        .tenants
        .into_iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tenant {name}"))
        .figures
        .and_then(|f| f.converged_s)
}

/// Like the summary's `converged_s`, over [from_s, to_s) only: the earliest time in it from
/// which the tenant's allocation and target both stay within [low, high] x its working set
/// until `to_s`.
pub fn converged_between(
    record: &RunRecord,
    name: &str,
    (low, high): (f64, f64),
    from_s: f64,
    to_s: f64,
) -> Option<f64> {
    let mut since = None;
    for (t, r) in rows(record, name, from_s, to_s) {
        let ws = r.working_set.map_or(0.0, Bytes::as_mib_f64);
        let inside = |m: f64| m >= low * ws && m <= high * ws;
        match (
            inside(r.allocated.as_mib_f64()) && inside(r.target.as_mib_f64()),
            since,
        ) {
            (true, None) => since = Some(t),
            (false, _) => since = None,
            _ => {}
        }
    }
    since
}

/// Degradation of a tenant against the run's baseline: 1 - mean throughput / baseline throughput.
pub fn degradation(record: &RunRecord, name: &str) -> f64 {
    let id = tenant_id(record, name);
    let base = record
        .baseline
        .as_ref()
        .expect("scenario asks for a baseline")
        .iter()
        .find(|b| b.tenant == id)
        .expect("tenant ran in the baseline");
    let tp = mean(record, name, 0.0, f64::INFINITY, |r| {
        r.throughput.unwrap_or(0.0)
    });
    1.0 - tp / base.throughput
}
