//! `memtide cache partition SCENARIO`: runs a Gemini experiment (every scheme on the scenario's applications) and writes what it found — a table of quotas, latencies and utilities per scheme on stdout and as `partition.csv`, and `report.html` with each application's exact latency surface as a heat map, the hill climb's path across it and where each scheme landed.

use super::{write, CacheError};
use crate::progress::Progress;
use memtide_cache::experiment::{Division, Experiment, Outcome, Plan, Scheme};
use memtide_cache::partition::Slo;
use memtide_cache::scenario::CacheScenario;
use memtide_cache::Policy;
use memtide_chart::{escape, heat_map, CellMark, CellPath, HeatMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// What `memtide cache partition` was asked.
#[derive(Clone, Debug)]
pub struct PartitionOptions {
    pub scenario: PathBuf,
    pub out: PathBuf,
}

/// What one run found.
pub struct PartitionRun {
    pub scenario: CacheScenario,
    pub experiment: Experiment,
    pub outcome: Outcome,
    pub seconds: f64,
}

const MIB: f64 = (1u64 << 20) as f64;

/// Loads the scenario, runs it and writes `partition.csv` and `report.html` into `out`.
pub fn partition(o: &PartitionOptions) -> Result<PartitionRun, CacheError> {
    let scenario = CacheScenario::load(&o.scenario)?;
    let name = scenario_name(&scenario);
    let progress = Progress::steps(scenario.apps.len() as u64 + 3, &name);
    let started = Instant::now();
    let experiment = scenario.experiment(&|app| {
        progress.message(&format!("requests of {app}"));
        progress.inc(1);
    })?;
    let outcome = experiment.run(&|stage| {
        progress.message(stage);
        progress.inc(1);
    });
    progress.finish();
    let run = PartitionRun {
        scenario,
        experiment,
        outcome,
        seconds: started.elapsed().as_secs_f64(),
    };
    std::fs::create_dir_all(&o.out).map_err(|error| CacheError::Write {
        path: o.out.clone(),
        error,
    })?;
    write(&o.out.join("partition.csv"), &csv(&run))?;
    write(&o.out.join("report.html"), &html(&run))?;
    Ok(run)
}

fn scenario_name(s: &CacheScenario) -> String {
    s.file
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn policy_name(p: Policy) -> &'static str {
    match p {
        Policy::LruLru => "LRU/LRU",
        Policy::Demote => "LRU/DEMOTE",
    }
}

fn slo_text(slo: Slo) -> String {
    match slo {
        Slo::Strict { target_us, slack } if slack > 0.0 => {
            format!("strict, {target_us:.0} µs + {:.0}% slack", slack * 100.0)
        }
        Slo::Strict { target_us, .. } => format!("strict, {target_us:.0} µs"),
        Slo::BestEffort => "best effort".to_string(),
    }
}

/// A level's quota of app `i` under `d`, in MiB with `decimals`, or `shared`.
fn quota(run: &PartitionRun, d: &Division, total_blocks: u64, i: usize, decimals: usize) -> String {
    match d {
        Division::Shared => "shared".to_string(),
        Division::Steps(steps) => {
            let blocks = run.experiment.grid_blocks(total_blocks)[steps[i]];
            format!(
                "{:.*}",
                decimals,
                (blocks * run.scenario.block_bytes) as f64 / MIB
            )
        }
    }
}

/// The table printed on stdout.
pub fn table(run: &PartitionRun) -> String {
    let e = &run.experiment;
    let block = run.scenario.block_bytes;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {}, buffer pool {:.0} MiB + storage cache {:.0} MiB of {} KiB blocks, {} quota settings per level",
        scenario_name(&run.scenario),
        policy_name(e.policy),
        (e.buffer_blocks * block) as f64 / MIB,
        (e.storage_blocks * block) as f64 / MIB,
        block >> 10,
        e.grid
    );
    for (i, a) in e.apps.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {}: {}, {} requests; alone with both caches {:.0} µs",
            a.name,
            slo_text(a.slo),
            a.blocks.len(),
            run.outcome.isolated_us[i]
        );
    }
    let _ = writeln!(
        out,
        "\n{:<13} {:<10} {:>11} {:>11} {:>12} {:>8}",
        "scheme", "app", "buffer MiB", "storage MiB", "latency µs", "utility"
    );
    for plan in &run.outcome.plans {
        for (i, a) in e.apps.iter().enumerate() {
            let _ = writeln!(
                out,
                "{:<13} {:<10} {:>11} {:>11} {:>12.0} {:>8.1}",
                if i == 0 { plan.scheme.name() } else { "" },
                a.name,
                quota(run, &plan.buffer, e.buffer_blocks, i, 0),
                quota(run, &plan.storage, e.storage_blocks, i, 0),
                plan.latency_us[i],
                plan.utility[i]
            );
        }
        let _ = writeln!(
            out,
            "{:<13} {:<10} {:>11} {:>11} {:>12} {:>8.1}",
            "",
            "total",
            "",
            "",
            "",
            plan.total_utility()
        );
    }
    let (d, ideal) = (&run.outcome.dynamic, &run.outcome.ideal);
    let _ = writeln!(
        out,
        "\nDYNAMIC (hill climbing, {} random starts): utility {:.2} after {} configurations and {} surface samples (the answer found after {}), the winning climb {} moves long; IDEAL {:.2} from all {} configurations. {:.1} s.",
        e.restarts, d.utility, d.configurations, d.samples, d.samples_to_answer, d.path().len().saturating_sub(1), ideal.utility, ideal.configurations, run.seconds
    );
    for (name, s) in [
        ("greedy", &run.outcome.greedy),
        ("random", &run.outcome.random),
    ] {
        let _ = writeln!(
            out,
            "Gemini's search with {name} sampling (surfaces fitted to the points sampled): {}; the answer held after {} samples, utility {:.2} ({:.1}% of IDEAL's).",
            s.samples_within(ideal.utility, 0.01).map_or_else(
                || "never within 1% of IDEAL".to_string(),
                |k| format!("within 1% of IDEAL after {k} samples")
            ),
            s.samples(),
            s.utility(),
            100.0 * s.utility() / ideal.utility
        );
    }
    out
}

fn csv(run: &PartitionRun) -> String {
    let e = &run.experiment;
    let mut out = String::from(
        "scheme,app,buffer_mib,storage_mib,buffer_hits,storage_hits,disk_reads,latency_us,utility\n",
    );
    for plan in &run.outcome.plans {
        for (i, a) in e.apps.iter().enumerate() {
            let c = plan.counts[i];
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{:.3},{:.4}",
                plan.scheme.name(),
                a.name,
                quota(run, &plan.buffer, e.buffer_blocks, i, 3),
                quota(run, &plan.storage, e.storage_blocks, i, 3),
                c.buffer,
                c.storage,
                c.disk,
                plan.latency_us[i],
                plan.utility[i]
            );
        }
    }
    out
}

/// Where each partitioned scheme put app `i`: (storage step, buffer step).
fn cell(plan: &Plan, i: usize) -> Option<(usize, usize)> {
    match (&plan.buffer, &plan.storage) {
        (Division::Steps(b), Division::Steps(s)) => Some((s[i], b[i])),
        _ => None,
    }
}

fn scheme_color(s: Scheme) -> &'static str {
    match s {
        Scheme::Shared => "#bbbbbb",
        Scheme::Conservative => "#ff7f0e",
        Scheme::Profile => "#8c564b",
        Scheme::Mrc => "#e377c2",
        Scheme::Dynamic => "#ffffff",
        Scheme::Ideal => "#d62728",
    }
}

/// `report.html`: the scenario, the schemes' table, Gemini's sampling and each app's
/// latency surface.
fn html(run: &PartitionRun) -> String {
    let e = &run.experiment;
    let out = &run.outcome;
    let block = run.scenario.block_bytes as f64;
    let rows = scheme_rows(run);
    let maps = latency_maps(run);
    let sampled = sampling_rows(out);
    let (d, ideal) = (&out.dynamic, &out.ideal);
    let name = scenario_name(&run.scenario);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>memtide: cache partitioning, {n}</title>\n<style>body{{font-family:system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}}table{{border-collapse:collapse;font-size:13px}}th,td{{border:1px solid #ddd;padding:3px 7px;text-align:right}}th.l,td.l{{text-align:left}}th{{background:#f4f4f4}}td.miss{{background:#fdd}}.maps{{display:flex;flex-wrap:wrap;gap:24px}}svg.chart{{display:block;font-size:11px}}svg .axis-label{{font-size:12px;fill:#444}}</style>\n</head>\n<body>\n<h1>Cache partitioning: {n}</h1>\n<p>{desc}</p>\n<p>{policy}; a buffer pool of {b:.0} MiB over a storage cache of {s:.0} MiB, {k} KiB blocks; quotas on a grid of {g} settings per level; latencies {lb} µs (buffer pool), {ls} µs (storage cache), {ld} µs (disk).</p>\n<h2>Schemes</h2>\n<table><tr><th class=\"l\">scheme</th><th class=\"l\">app</th><th>buffer MiB</th><th>storage MiB</th><th>latency µs</th><th>utility</th><th>total utility</th></tr>{rows}</table>\n<p>SHARED: no quotas at either level. CONSERVATIVE: the strict apps get everything but the others' minimum. PROFILE: each strict app the buffer pool it needs alone, the storage cache shared. MRC: each level split for the most hits. DYNAMIC: Gemini's hill climbing with {r} random starts on the exact surfaces: utility {du:.2} after {dc} configurations and {ds} surface samples (the answer found after {da}). IDEAL: every configuration ({ic}), utility {iu:.2}. A red latency misses its SLO.</p>\n<h2>Gemini's sampling</h2>\n<p>Gemini knew the surfaces only where it simulated them, and fitted the rest. Here each surface starts known at its corners and centre, the rest fitted by inverse-distance weighting; each round climbs the fitted surfaces and samples four more points per app, near the answer (greedy) or anywhere (random), until the answer holds five rounds. The paper converged after about 160 greedy and 352 random samples.</p>\n<table><tr><th class=\"l\">sampling</th><th>samples to within 1% of IDEAL</th><th>samples when the answer held</th><th>its utility</th></tr>{sampled}</table>\n<h2>Latency surfaces</h2>\n<p>Each app's mean data-access latency at every pair of quotas, computed exactly from stack distances (Gemini fitted an SVR to about 160 simulated samples). Grey lines are the hill climbs, each from its random start (a dot) to where it stopped; the white one won. Circles mark where the other partitioned schemes put the app.</p>\n<div class=\"maps\">{maps}</div>\n</body>\n</html>\n",
        n = escape(&name),
        desc = escape(&run.scenario.description),
        policy = policy_name(e.policy),
        b = e.buffer_blocks as f64 * block / MIB,
        s = e.storage_blocks as f64 * block / MIB,
        k = run.scenario.block_bytes >> 10,
        g = e.grid,
        lb = e.latencies.buffer_us,
        ls = e.latencies.storage_us,
        ld = e.latencies.disk_us,
        r = e.restarts,
        du = d.utility,
        dc = d.configurations,
        ds = d.samples,
        da = d.samples_to_answer,
        ic = ideal.configurations,
        iu = ideal.utility,
    )
}

/// The schemes' table body: a row per scheme and app, the scheme's name and total utility
/// spanning its apps, a latency that misses a strict SLO marked.
fn scheme_rows(run: &PartitionRun) -> String {
    let (e, out) = (&run.experiment, &run.outcome);
    let mut rows = String::new();
    for plan in &out.plans {
        for (i, a) in e.apps.iter().enumerate() {
            let strict_missed = matches!(a.slo, Slo::Strict { target_us, slack } if plan.latency_us[i] > target_us * (1.0 + slack));
            let _ = write!(
                rows,
                "<tr>{}<td class=\"l\">{}</td><td>{}</td><td>{}</td><td{}>{:.0}</td><td>{:.1}</td>{}</tr>",
                if i == 0 {
                    format!(
                        "<th class=\"l\" rowspan=\"{}\">{}</th>",
                        e.apps.len(),
                        plan.scheme.name()
                    )
                } else {
                    String::new()
                },
                escape(&a.name),
                quota(run, &plan.buffer, e.buffer_blocks, i, 0),
                quota(run, &plan.storage, e.storage_blocks, i, 0),
                if strict_missed { " class=\"miss\"" } else { "" },
                plan.latency_us[i],
                plan.utility[i],
                if i == 0 {
                    format!(
                        "<td rowspan=\"{}\">{:.1}</td>",
                        e.apps.len(),
                        plan.total_utility()
                    )
                } else {
                    String::new()
                }
            );
        }
    }
    rows
}

/// Block counts as MiB, for `block`-byte blocks.
fn mib(block: f64, blocks: &[u64]) -> Vec<f64> {
    blocks.iter().map(|&b| b as f64 * block / MIB).collect()
}

/// A heat map per app of its latency surface, with the hill climbs and where each scheme
/// put it.
fn latency_maps(run: &PartitionRun) -> String {
    let (e, out) = (&run.experiment, &run.outcome);
    let block = run.scenario.block_bytes as f64;
    let mut maps = String::new();
    for (i, a) in e.apps.iter().enumerate() {
        let s = &out.tenants[i].surface;
        let mut values = Vec::with_capacity(s.counts.len());
        for b in 0..s.buffer.len() {
            for t in 0..s.storage.len() {
                values.push(s.latency_us(b, t, &e.latencies));
            }
        }
        let target = match a.slo {
            Slo::Strict { target_us, slack } => Some(target_us * (1.0 + slack)),
            Slo::BestEffort => None,
        };
        let svg = heat_map(&HeatMap {
            x_label: "storage-cache quota (MiB)",
            y_label: "buffer-pool quota (MiB)",
            value_label: "mean data-access latency (µs)",
            x: mib(block, &s.storage),
            y: mib(block, &s.buffer),
            values,
            log_scale: true,
            outline_at_most: target,
            paths: climb_paths(out, i),
            marks: scheme_marks(out, i),
        });
        let _ = write!(
            maps,
            "<div class=\"map\"><h3>{} ({})</h3>{svg}<p>Alone with both caches: {:.0} µs.{}</p></div>",
            escape(&a.name),
            escape(&slo_text(a.slo)),
            out.isolated_us[i],
            if target.is_some() {
                " Outlined cells meet the SLO."
            } else {
                ""
            }
        );
    }
    maps
}

/// App `i`'s hill climbs across its surface: every climb faintly, the winning one over them.
fn climb_paths(out: &Outcome, i: usize) -> Vec<CellPath> {
    let mut paths: Vec<CellPath> = out
        .dynamic
        .climbs
        .iter()
        .map(|climb| CellPath {
            label: "a hill climb from its random start".into(),
            color: "#cccccc",
            cells: climb.iter().map(|q| (q.storage[i], q.buffer[i])).collect(),
        })
        .collect();
    paths.push(CellPath {
        label: "DYNAMIC: the winning hill climb".into(),
        color: "#ffffff",
        cells: out
            .dynamic
            .path()
            .iter()
            .map(|q| (q.storage[i], q.buffer[i]))
            .collect(),
    });
    paths
}

/// Where each partitioned scheme but DYNAMIC (drawn as a path) put app `i`.
fn scheme_marks(out: &Outcome, i: usize) -> Vec<CellMark> {
    out.plans
        .iter()
        .filter(|p| p.scheme != Scheme::Dynamic)
        .filter_map(|p| {
            Some(CellMark {
                label: p.scheme.name().to_string(),
                color: scheme_color(p.scheme),
                cell: cell(p, i)?,
            })
        })
        .collect()
}

/// The sampling table body: how many samples greedy and random sampling took to come within
/// 1% of IDEAL and to settle, and the utility they settled on.
fn sampling_rows(out: &Outcome) -> String {
    [("greedy", &out.greedy), ("random", &out.random)]
        .iter()
        .map(|(how, s)| {
            format!(
                "<tr><th class=\"l\">{how}</th><td>{}</td><td>{}</td><td>{:.2}</td></tr>",
                s.samples_within(out.ideal.utility, 0.01)
                    .map_or_else(|| "never".to_string(), |k| k.to_string()),
                s.samples(),
                s.utility()
            )
        })
        .collect()
}
