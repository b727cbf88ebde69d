//! The density benchmark's report: a table (per policy: the N it carries and, at that N, SLO attainment, wake-ups, memory saved, swap traffic and the manager's CPU), a chart of SLO attainment against N (one line per policy, drawn by crates/chart), and every trial's figures as JSON.

use crate::density::config::{DensityConfig, Policy};
use crate::density::trial::{StolenWindow, TrialResult};
use crate::density::{carried, DensityError};
use memtide_chart::{line_chart, LineChart, Series};
use std::fmt::Write as _;
use std::path::Path;

const MIB: f64 = (1u64 << 20) as f64;

fn color(p: Policy) -> &'static str {
    match p {
        Policy::Static => "#7f7f7f",
        Policy::Kernel => "#d62728",
        Policy::Sampling => "#1f77b4",
        Policy::Tws => "#2ca02c",
        Policy::App => "#9467bd",
        Policy::Senpai => "#ff7f0e",
    }
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |f| format!("{:.1}%", f * 100.0))
}

/// The policies of `config` that `results` hold a trial of, in its order.
fn tried(config: &DensityConfig, results: &[TrialResult]) -> Vec<Policy> {
    config
        .policies
        .iter()
        .copied()
        .filter(|&p| results.iter().any(|r| r.policy == p))
        .collect()
}

/// The markdown table.
pub fn table(config: &DensityConfig, peaks: &[u64], results: &[TrialResult]) -> String {
    let mut s = String::new();
    let mut kinds: Vec<String> = Vec::new();
    for (k, p) in config.mix.iter().zip(peaks) {
        let text = format!(
            "{} of {} values of {} B: {:.0} MiB",
            k.server.name(),
            k.keys,
            k.value_bytes,
            *p as f64 / MIB
        );
        if !kinds.contains(&text) {
            kinds.push(text);
        }
    }
    let filled = if kinds.is_empty() {
        String::new()
    } else {
        format!("; each kind filled: {}", kinds.join(", "))
    };
    let _ = writeln!(
        s,
        "budget {:.0} MiB, {} s runs in {} s windows, SLO p99 <= {} us in 99% of active windows (>= {} requests), wake-up within {} s{filled}\n",
        config.budget as f64 / MIB,
        config.duration,
        config.window,
        config.slo.p99_us,
        config.slo.min_requests,
        config.slo.wake_s,
    );
    s.push_str("A window in which the hypervisor stole 2% or more of the machine's CPU is left out of the attainment that decides (it stalls every tenant whatever the policy); `all windows` counts it.\n\n");
    s.push_str("| policy | tenants carried | SLO attainment | all windows | wake-ups within SLO | wake-up p90 | memory used (mean) | saved vs static | swap in / out | manager CPU |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for p in tried(config, results) {
        let n = carried(results, p);
        let at = n.and_then(|n| results.iter().find(|r| r.policy == p && r.n == n));
        let row = match at {
            Some(r) => format!(
                "| {p} | {} | {} ({} of {}) | {} | {} of {} | {} | {:.0} MiB | {} | {:.0} / {:.0} MiB | {} |",
                r.n,
                pct(r.attainment.fraction()),
                r.attainment.met,
                r.attainment.active,
                pct(r.attainment_all.fraction()),
                r.wakes_within,
                r.wakes,
                r.wake_p90_s.map_or_else(|| "-".into(), |w| format!("{w:.1} s")),
                r.mean_usage as f64 / MIB,
                pct(r.saved()),
                r.swap_in_mib,
                r.swap_out_mib,
                r.manager_cpu_s
                    .map_or_else(|| "-".into(), |c| format!("{:.2}% of a core", c / r.run_s * 100.0)),
            ),
            None => format!("| {p} | none of the N tried | | | | | | | | |"),
        };
        s.push_str(&row);
        s.push('\n');
    }
    s.push_str("\nEvery trial:\n\n| policy | N | passed | SLO attainment | all windows | windows stolen from | OOM kills | died | wake-ups within | memory used | reserved by static |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in results {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} of {} | {:.0} MiB | {:.0} MiB |",
            r.policy,
            r.n,
            if !r.fits {
                "does not fit"
            } else if r.passed() {
                "yes"
            } else {
                "no"
            },
            pct(r.attainment.fraction()),
            pct(r.attainment_all.fraction()),
            stolen_text(&r.stolen, config.window),
            r.oom_kills,
            r.died.len(),
            r.wakes_within,
            r.wakes,
            r.mean_usage as f64 / MIB,
            r.reserved as f64 / MIB
        );
    }
    s
}

/// `none`, or each stolen window's span and share: `100-110 s (15%)`.
fn stolen_text(stolen: &[StolenWindow], window: f64) -> String {
    if stolen.is_empty() {
        return "none".into();
    }
    stolen
        .iter()
        .map(|w| {
            format!(
                "{:.0}-{:.0} s ({:.0}%)",
                w.start,
                w.start + window,
                w.share * 100.0
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The chart: SLO attainment (%) against N, one line per policy, a dot per trial, x from 4
/// below the fewest tenants tried, y from a
/// multiple of 5 at or below the lowest trial (95% at most) to just over 100%: the trials
/// that decide lie between 95% and 100%, and over 0–100% their lines would lie on one another.
pub fn chart(config: &DensityConfig, results: &[TrialResult]) -> String {
    let mut series = Vec::new();
    let mut max_n: f64 = 1.0;
    let mut min_n: f64 = f64::INFINITY;
    let mut min_y: f64 = 95.0;
    for p in tried(config, results) {
        let mut points: Vec<(f64, f64)> = results
            .iter()
            .filter(|r| r.policy == p && r.fits)
            .filter_map(|r| Some((r.n as f64, r.attainment.fraction()? * 100.0)))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if let Some(last) = points.last() {
            max_n = max_n.max(last.0);
        }
        if let Some(first) = points.first() {
            min_n = min_n.min(first.0);
        }
        min_y = points.iter().map(|p| p.1).fold(min_y, f64::min);
        series.push(Series {
            label: format!(
                "{p} (carries {})",
                carried(results, p).map_or("none".into(), |n| n.to_string())
            ),
            color: color(p),
            // Solid, as every policy: only solid series get a dot per trial.
            dashed: false,
            points,
        });
    }
    // x from a little below the fewest tenants tried: the trials lie far from zero.
    let x0 = if min_n.is_finite() {
        (min_n - 4.0).max(0.0)
    } else {
        0.0
    };
    series.push(Series {
        label: "the SLO: 99% of active windows".into(),
        color: "#000000",
        dashed: true,
        points: vec![(x0, 99.0), (max_n + 1.0, 99.0)],
    });
    line_chart(&LineChart {
        y_label: "active windows meeting the SLO (%)",
        x_label: "tenants (N)",
        x_range: (x0, max_n + 1.0),
        y_range: Some(((min_y / 5.0).floor() * 5.0, 101.0)),
        dots: true,
        height: 320.0,
        series,
        markers: &[],
    })
}

/// Writes `density.md`, `density.svg` and `results.json` under `out`; `peaks` are what each
/// kind of the mix holds filled.
pub fn write(
    config: &DensityConfig,
    peaks: &[u64],
    results: &[TrialResult],
    out: &Path,
) -> Result<(), DensityError> {
    let files = [
        ("density.md", table(config, peaks, results)),
        // A file opened on its own needs the SVG namespace (a chart inline in HTML does not).
        (
            "density.svg",
            chart(config, results).replacen(
                "<svg ",
                "<svg xmlns=\"http://www.w3.org/2000/svg\" ",
                1,
            ),
        ),
        (
            "results.json",
            serde_json::to_string_pretty(&results).expect("results serialize"),
        ),
    ];
    for (name, text) in files {
        let path = out.join(name);
        std::fs::write(&path, text)
            .map_err(|e| DensityError::io(&path.display().to_string(), e))?;
    }
    Ok(())
}
