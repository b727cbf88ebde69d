//! report.html: a self-contained page (inline CSS and SVG, no scripts, no links out) with the summary table, the host's reclamation states, free memory and the memory of all tenants stacked, the compared tenants in one chart, and per-tenant charts of allocated, target, active estimate and working set over time.
//!
//! Like the ESX paper's figures: the host's memory of all tenants summed and stacked —
//! allocated, ballooned, host-swapped, with the active estimate and machine memory over them —
//! as Fig. 8(b) (whose fifth metric, shared memory, and what sharing reclaims are drawn over it
//! when the world shares pages), each tenant's balloon, host-swapped and shared memory with its
//! allocation as Fig. 8(c, d); and the
//! tenants a scenario compares, when it has two to four, in one chart, each tenant one colour,
//! its allocation solid and its estimate dashed, as Fig. 7.
//!
//! The charts' data is gathered as the run goes ([`Charts`]) in bounded memory: every series
//! is a [`BoundedSeries`] of at most [`BUCKETS`] buckets (so at most twice as many points
//! drawn) and the states a [`StateRuns`], whatever the run's length; and only the first
//! [`CHARTED_TENANTS`] tenants get charts of their own, so a run of thousands of tenants keeps
//! a few megabytes of chart data and gives a page a browser can open (the summary table lists
//! every tenant, timeline.csv has every row).

use super::headline::HeadlineSummary;
use super::summary::{Summary, TenantSummary};
use crate::record::{Run, RunRecord, TickRecord};
use memtide_chart::{
    self as chart, escape, Area, BoundedMeans, BoundedSeries, LineChart, Marker, Series,
    StackedChart, StateRuns,
};
use memtide_model::{Bytes, ReclamationState, TenantId};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// Buckets per series: a chart draws at most twice as many points per line.
pub const BUCKETS: usize = 512;

/// Tenants with charts of their own, the first in the scenario's order.
pub const CHARTED_TENANTS: usize = 32;

/// Runs of reclamation state kept for the band.
const STATE_RUNS: usize = 1024;

/// The most tenants drawn together in one chart, each in its own colour.
const COMPARED: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// The columns of the memory of all tenants, summed over them each tick.
const ALLOCATED: usize = 0;
const BALLOON: usize = 1;
const HOST_SWAPPED: usize = 2;
const ESTIMATE: usize = 3;
const MACHINE: usize = 4;
/// Of `ALLOCATED`, memory on shared frames; and what sharing reclaims host-wide.
const SHARED: usize = 5;
const RECLAIMED: usize = 6;
const HOST_COLUMNS: usize = 7;

/// What the charts draw, gathered tick by tick in bounded memory.
pub struct Charts {
    states: StateRuns,
    free: BoundedSeries,
    budget: BoundedSeries,
    /// The memory of all tenants (columns `ALLOCATED` ... `MACHINE`).
    all: BoundedMeans,
    tick_s: f64,
    /// The charted tenants' series.
    tenants: BTreeMap<TenantId, TenantSeries>,
    /// Some tick reported page sharing: the shared lines are drawn.
    sharing: bool,
    /// Hot I/O page remapping's lifetime copies and copies avoided (ESX §7), when modelled.
    remap_copies: BoundedSeries,
    remap_avoided: BoundedSeries,
    last_remap: Option<memtide_model::IoRemapping>,
}

/// One tenant's lines.
struct TenantSeries {
    allocated: BoundedSeries,
    target: BoundedSeries,
    estimate: BoundedSeries,
    working_set: BoundedSeries,
    throughput: BoundedSeries,
    /// ESX Fig. 8(c, d)'s other lines, drawn only for a tenant that had any.
    balloon: BoundedSeries,
    host_swapped: BoundedSeries,
    shared: BoundedSeries,
    any_balloon: bool,
    any_host_swapped: bool,
    any_shared: bool,
}

impl TenantSeries {
    fn new() -> TenantSeries {
        TenantSeries {
            allocated: BoundedSeries::new(BUCKETS),
            target: BoundedSeries::new(BUCKETS),
            estimate: BoundedSeries::new(BUCKETS),
            working_set: BoundedSeries::new(BUCKETS),
            throughput: BoundedSeries::new(BUCKETS),
            balloon: BoundedSeries::new(BUCKETS),
            host_swapped: BoundedSeries::new(BUCKETS),
            shared: BoundedSeries::new(BUCKETS),
            any_balloon: false,
            any_host_swapped: false,
            any_shared: false,
        }
    }
}

impl Charts {
    /// Nothing gathered yet, for `run`'s tenants.
    pub fn new(run: &Run) -> Charts {
        Charts {
            states: StateRuns::new(STATE_RUNS),
            free: BoundedSeries::new(BUCKETS),
            budget: BoundedSeries::new(BUCKETS),
            all: BoundedMeans::new(HOST_COLUMNS, BUCKETS),
            tick_s: run.tick_s,
            tenants: run
                .tenants
                .iter()
                .take(CHARTED_TENANTS)
                .map(|t| (t.id, TenantSeries::new()))
                .collect(),
            sharing: false,
            remap_copies: BoundedSeries::new(BUCKETS),
            remap_avoided: BoundedSeries::new(BUCKETS),
            last_remap: None,
        }
    }

    /// The charts of a whole record: every tick added.
    pub fn of(record: &RunRecord) -> Charts {
        let mut charts = Charts::new(record);
        for tick in &record.ticks {
            charts.add(tick);
        }
        charts
    }

    /// Adds one tick (after every earlier one).
    pub fn add(&mut self, tick: &TickRecord) {
        let x = tick.time_s;
        self.states.push(x, self.tick_s, tick.state);
        self.free.push(x, tick.free.as_mib_f64());
        self.budget.push(x, tick.budget.as_mib_f64());
        let mut all = [0.0; HOST_COLUMNS];
        all[MACHINE] = tick.machine.as_mib_f64();
        if let Some(r) = tick.remapping {
            self.remap_copies.push(x, r.copies as f64 / 1e6);
            self.remap_avoided.push(x, r.avoided as f64 / 1e6);
            self.last_remap = Some(r);
        }
        if let Some(s) = tick.sharing {
            self.sharing = true;
            all[RECLAIMED] = s.reclaimed().to_bytes().as_mib_f64();
        }
        for row in &tick.rows {
            let shared = row.sharing.map_or(0.0, |s| s.shared.as_mib_f64());
            all[SHARED] += shared;
            all[ALLOCATED] += row.allocated.as_mib_f64();
            all[BALLOON] += row.balloon_size().as_mib_f64();
            all[HOST_SWAPPED] += row.host_swapped().as_mib_f64();
            all[ESTIMATE] += row.active_estimate.as_mib_f64();
            if let Some(t) = self.tenants.get_mut(&row.tenant) {
                t.allocated.push(x, row.allocated.as_mib_f64());
                t.target.push(x, row.target.as_mib_f64());
                t.estimate.push(x, row.active_estimate.as_mib_f64());
                t.working_set
                    .push(x, row.working_set.map_or(0.0, Bytes::as_mib_f64));
                t.throughput.push(x, row.throughput.unwrap_or(0.0));
                t.balloon.push(x, row.balloon_size().as_mib_f64());
                t.host_swapped.push(x, row.host_swapped().as_mib_f64());
                t.shared.push(x, shared);
                t.any_balloon |= row.balloon_size() > Bytes::ZERO;
                t.any_host_swapped |= row.host_swapped() > Bytes::ZERO;
                t.any_shared |= shared > 0.0;
            }
        }
        self.all.push(x, &all);
    }
}

pub(crate) const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}\
h1{font-size:1.5em;margin-bottom:4px}h2{font-size:1.2em;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:1.05em;margin:24px 0 4px}\
p.meta{color:#666;margin-top:0}table{border-collapse:collapse;font-size:13px;margin:8px 0}div.wide{overflow:auto;max-width:100%;max-height:40em}div.wide th{position:sticky;top:0;white-space:normal;min-width:3em;vertical-align:bottom}\
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right;white-space:nowrap}th{background:#f4f4f4}\
td.l,th.l{text-align:left}tr.idle td{color:#999}\
svg.chart{display:block;font-size:11px;margin:4px 0 8px}svg .axis-label{font-size:12px;fill:#444}\
svg .event-label{font-size:10px;fill:#555}.note{color:#666;font-size:13px}";

/// Writes the page to `path`.
pub fn write_report(
    path: &Path,
    run: &Run,
    summary: &Summary,
    charts: &Charts,
) -> std::io::Result<()> {
    std::fs::write(path, render(run, summary, charts))
}

/// The whole page.
pub fn render(run: &Run, summary: &Summary, charts: &Charts) -> String {
    let mut html = String::with_capacity(64 * 1024);
    let title = match &run.variant {
        Some(v) => format!("{} [{v}]", run.scenario),
        None => run.scenario.clone(),
    };
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>memtide: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    if !run.description.is_empty() {
        let _ = writeln!(html, "<p>{}</p>", escape(&run.description));
    }
    let _ = writeln!(
        html,
        "<p class=\"meta\">simulated host, {} MB machine memory; {} s in ticks of {} s; seed {}</p>",
        fmt(run.machine_mb, 0),
        fmt(run.duration_s, 0),
        run.tick_s,
        run.seed
    );

    let markers: Vec<Marker> = run
        .events
        .iter()
        .enumerate()
        .map(|(i, e)| Marker {
            x: e.time_s,
            number: i + 1,
            label: e.description.clone(),
        })
        .collect();
    let x_range = (0.0, run.duration_s.max(run.tick_s));

    if let Some(h) = &summary.headline {
        headline_section(&mut html, h);
    }
    html.push_str("<h2>Summary</h2>\n");
    summary_table(&mut html, summary);
    events_section(&mut html, &markers);

    html.push_str("<h2>Host</h2>\n");
    host_section(&mut html, charts, summary, &markers, x_range);

    html.push_str("<h2>Tenants</h2>\n");
    compared_section(&mut html, run, charts, &markers, x_range);
    html.push_str("<p class=\"note\">Each tenant's memory in MB over simulated seconds: allocated (machine memory held), target (the policy's), active estimate (the estimator's) and the workload's true working set. Dashed vertical lines are scenario events.</p>\n");
    for (meta, t) in run.tenants.iter().zip(&summary.tenants) {
        if let Some(series) = charts.tenants.get(&meta.id) {
            tenant_section(&mut html, series, t, &markers, x_range);
        }
    }
    let uncharted = run.tenants.len().saturating_sub(charts.tenants.len());
    if uncharted > 0 {
        let _ = writeln!(
            html,
            "<p class=\"note\">Charts are drawn for the first {} tenants only, so the page stays one a browser opens at once; the {uncharted} others are in the summary table above and every row of every tenant is in timeline.csv.</p>",
            charts.tenants.len()
        );
    }

    if !run.refusals.is_empty() {
        html.push_str("<h2>Refused by admission control</h2>\n<table><tr><th>time (s)</th><th class=\"l\">tenant</th><th class=\"l\">reason</th></tr>\n");
        for r in &run.refusals {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                fmt(r.time_s, 0),
                escape(&r.tenant),
                escape(&r.reason)
            );
        }
        html.push_str("</table>\n");
    }
    html.push_str("</body>\n</html>\n");
    html
}

/// The result the scenario exists to show, first: its text and a row per tenant, a column per
/// window.
fn headline_section(html: &mut String, h: &HeadlineSummary) {
    let _ = writeln!(
        html,
        "<h2>Headline</h2>\n<p><b>{}</b></p>\n<table><tr><th class=\"l\">{}</th>",
        escape(&h.text),
        escape(&h.heading())
    );
    for i in 0..h.windows.len().max(1) {
        let _ = write!(html, "<th>{}</th>", escape(&h.window_label(i)));
    }
    html.push_str("</tr>\n");
    for t in &h.tenants {
        let _ = write!(html, "<tr><td class=\"l\">{}</td>", escape(&t.tenant));
        for m in &t.means {
            let _ = write!(html, "<td>{}</td>", opt(*m, 1, ""));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n");
}

/// The events, numbered as the charts' dashed lines are: the legend of those lines.
fn events_section(html: &mut String, markers: &[Marker]) {
    if markers.is_empty() {
        return;
    }
    html.push_str("<h2>Events</h2>\n<p class=\"note\">Each is a numbered dashed line on the charts below.</p>\n<table><tr><th>#</th><th>time (s)</th><th class=\"l\">event</th></tr>\n");
    for m in markers {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            m.number,
            fmt(m.x, 0),
            escape(&m.label)
        );
    }
    html.push_str("</table>\n");
}

fn fmt(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

fn opt(x: Option<f64>, decimals: usize, suffix: &str) -> String {
    x.map_or("-".to_string(), |v| format!("{}{suffix}", fmt(v, decimals)))
}

fn summary_table(html: &mut String, summary: &Summary) {
    // Up to seventeen columns, their headings wrapped so the table fits the page; with
    // thousands of tenants taller than many screens, so it scrolls in its own box (its header
    // row stays in view) and the charts follow it at once. Degradation only where a baseline
    // ran, the time to converge only where the scenario sets a band.
    let degradation = summary
        .tenants
        .iter()
        .any(|t| t.figures.as_ref().is_some_and(|f| f.degradation.is_some()));
    let converged = summary.convergence.goal;
    html.push_str("<p class=\"note\">Means over the time each tenant ran");
    if degradation {
        html.push_str("; degradation: the throughput lost against the unconstrained baseline run");
    }
    if converged {
        let _ = write!(
            html,
            "; converged: when allocation and target entered {}-{} &times; the working set for good",
            fmt(summary.convergence.low, 2),
            fmt(summary.convergence.high, 2)
        );
    }
    html.push_str(".</p>\n<div class=\"wide\"><table>\n<tr><th class=\"l\">tenant</th><th class=\"l\">estimator</th><th>min MB</th><th>max MB</th><th>shares</th><th>mean alloc MB</th><th>mean target MB</th><th>mean estimate MB</th><th>mean WS MB</th><th>mean ops/s</th><th>mean latency ms</th>");
    if degradation {
        html.push_str("<th>degradation</th>");
    }
    if converged {
        html.push_str("<th>converged</th>");
    }
    html.push_str(
        "<th>swap-ins</th><th>refaults</th><th>host swap-ins</th><th>blocked ticks</th></tr>\n",
    );
    let columns = 10 + usize::from(degradation) + usize::from(converged);
    for t in &summary.tenants {
        let class = if t.ran { "" } else { " class=\"idle\"" };
        let _ = write!(
            html,
            "<tr{class}><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>",
            escape(&t.name),
            escape(&t.estimator),
            fmt(t.min_mb, 1),
            fmt(t.max_mb, 1),
            t.shares
        );
        match &t.figures {
            Some(f) => {
                let _ = write!(
                    html,
                    "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                    fmt(f.mean_allocated_mb, 1),
                    fmt(f.mean_target_mb, 1),
                    fmt(f.mean_active_estimate_mb, 1),
                    fmt(f.mean_working_set_mb, 1),
                    fmt(f.mean_throughput, 0),
                    opt(f.mean_latency_ms, 2, ""),
                );
                if degradation {
                    let _ = write!(
                        html,
                        "<td>{}</td>",
                        opt(f.degradation.map(|d| d * 100.0), 1, "%")
                    );
                }
                if converged {
                    let _ = write!(html, "<td>{}</td>", opt(f.converged_s, 0, " s"));
                }
                let _ = write!(
                    html,
                    "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                    f.swap_ins, f.refaults, f.host_swap_ins, f.blocked_ticks
                );
            }
            None => {
                let _ = write!(
                    html,
                    "<td class=\"l\" colspan=\"{columns}\">did not run</td>"
                );
            }
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table></div>\n");
}

fn host_section(
    html: &mut String,
    charts: &Charts,
    summary: &Summary,
    markers: &[Marker],
    x_range: (f64, f64),
) {
    let h = &summary.host;
    html.push_str("<table><tr>");
    for s in ReclamationState::ALL {
        let _ = write!(
            html,
            "<th><span style=\"color:{}\">&#9632;</span> {s}</th>",
            chart::state_color(s)
        );
    }
    html.push_str("<th>state changes</th><th>mean free MB</th><th>min free MB</th><th>mean budget MB</th></tr>\n<tr>");
    for s in ReclamationState::ALL {
        let _ = write!(html, "<td>{} s</td>", fmt(h.time_in_state_s.get(s), 0));
    }
    let _ = writeln!(
        html,
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
        h.state_transitions,
        fmt(h.mean_free_mb, 1),
        fmt(h.min_free_mb, 1),
        fmt(h.mean_budget_mb, 1)
    );

    html.push_str("<h3>Reclamation state</h3>\n");
    html.push_str(&chart::state_band(
        charts.states.runs(),
        charts.states.end(),
        x_range,
        "time (s)",
        markers,
    ));
    html.push('\n');

    html.push_str("<h3>Free machine memory</h3>\n");
    html.push_str(&chart::line_chart(&LineChart {
        y_label: "MB",
        x_label: "time (s)",
        x_range,
        y_range: None,
        dots: false,
        height: 220.0,
        series: vec![
            Series {
                label: "free".into(),
                color: "#2ca02c",
                dashed: false,
                points: charts.free.points(),
            },
            Series {
                label: "budget for tenants".into(),
                color: "#7f7f7f",
                dashed: true,
                points: charts.budget.points(),
            },
        ],
        markers,
    }));
    html.push('\n');
    all_tenants_section(html, charts, markers, x_range);
    if let Some(r) = charts.last_remap {
        remap_section(html, charts, &r, markers, x_range);
    }
}

/// The memory of all tenants, summed, stacked (ESX Fig. 8(b)).
fn all_tenants_section(
    html: &mut String,
    charts: &Charts,
    markers: &[Marker],
    x_range: (f64, f64),
) {
    html.push_str("<h3>Memory of all tenants</h3>\n");
    let all = &charts.all;
    let area = |label: &str, color, column| Area {
        label: label.into(),
        color,
        values: all.column(column),
    };
    html.push_str(&chart::stacked_chart(&StackedChart {
        y_label: "MB",
        x_range,
        height: 260.0,
        x: all.x(),
        areas: vec![
            area("allocated (in machine memory)", "#1f77b4", ALLOCATED),
            area("ballooned (not in it)", "#ff7f0e", BALLOON),
            area("host-swapped (on host swap)", "#d62728", HOST_SWAPPED),
        ],
        lines: {
            let mut lines = vec![
                Series {
                    label: "active estimate".into(),
                    color: "#2ca02c",
                    dashed: true,
                    points: all.points(ESTIMATE),
                },
                Series {
                    label: "machine memory".into(),
                    color: "#7f7f7f",
                    dashed: true,
                    points: all.points(MACHINE),
                },
            ];
            if charts.sharing {
                lines.push(Series {
                    label: "shared".into(),
                    color: "#8c564b",
                    dashed: false,
                    points: all.points(SHARED),
                });
                lines.push(Series {
                    label: "reclaimed by sharing".into(),
                    color: "#e377c2",
                    dashed: true,
                    points: all.points(RECLAIMED),
                });
            }
            lines
        },
        markers,
    }));
    html.push('\n');
    let sharing = if charts.sharing {
        "Shared memory, the figure's fifth metric, is drawn over them: the tenants' memory on shared frames (part of what they hold, each shared page counted in every tenant that maps it, as ESX counts it), and the memory sharing reclaims (shared less one copy per frame)."
    } else {
        "Shared memory, the figure's fifth metric, joins this chart when memtide shares pages."
    };
    let _ = writeln!(
        html,
        "<p class=\"note\">Summed over every running tenant and stacked, like the ESX paper's Fig. 8(b): machine memory the tenants hold, memory their balloons took back, and memory the host paged out to its swap; the sum of their active estimates and the host's machine memory drawn over them. Only the lowest layer occupies machine memory: the stack's top is the memory the tenants were configured with (what their guests believe they have), so where it rises above the machine memory line the host is overcommitted, not using more than it has. {sharing} In a run longer than {BUCKETS} ticks each point is the mean over the ticks it stands for.</p>"
    );
}

/// Hot I/O page remapping (ESX §7): copies made and avoided over the run.
fn remap_section(
    html: &mut String,
    charts: &Charts,
    r: &memtide_model::IoRemapping,
    markers: &[Marker],
    x_range: (f64, f64),
) {
    html.push_str("<h3>I/O page remapping</h3>\n");
    let _ = writeln!(
        html,
        "<table><tr><th>transfers</th><th>bounce copies</th><th>pages remapped</th><th>remaps refused</th><th>copies avoided</th></tr><tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
        r.transmits, r.copies, r.remaps, r.refused, r.avoided
    );
    html.push_str(&chart::line_chart(&LineChart {
        y_label: "millions",
        x_label: "time (s)",
        x_range,
        y_range: None,
        dots: false,
        height: 220.0,
        series: vec![
            Series {
                label: "bounce copies".into(),
                color: "#d62728",
                dashed: false,
                points: charts.remap_copies.points(),
            },
            Series {
                label: "copies avoided by remapping".into(),
                color: "#2ca02c",
                dashed: true,
                points: charts.remap_avoided.points(),
            },
        ],
        markers,
    }));
    html.push('\n');
    html.push_str("<p class=\"note\">Transfers from guest pages in high memory are copied through a bounce buffer in low memory; a page copied more than the threshold is remapped into low memory, and its later transfers need no copy (ESX §7). Counts since the run began.</p>\n");
}

/// The tenants compared: when two to four ran, their allocations (solid) and active
/// estimates (dashed) in one chart, a colour each (ESX Fig. 7).
fn compared_section(
    html: &mut String,
    run: &Run,
    charts: &Charts,
    markers: &[Marker],
    x_range: (f64, f64),
) {
    let ran: Vec<(&str, &TenantSeries)> = run
        .tenants
        .iter()
        .filter_map(|t| charts.tenants.get(&t.id).map(|s| (t.name.as_str(), s)))
        .filter(|(_, s)| !s.allocated.is_empty())
        .collect();
    if !(2..=COMPARED.len()).contains(&ran.len()) {
        return;
    }
    html.push_str("<h3>Compared</h3>\n");
    let mut series = Vec::with_capacity(2 * ran.len());
    for ((name, s), color) in ran.iter().zip(COMPARED) {
        series.push(Series {
            label: format!("{name} allocated"),
            color,
            dashed: false,
            points: s.allocated.points(),
        });
        series.push(Series {
            label: format!("{name} estimate"),
            color,
            dashed: true,
            points: s.estimate.points(),
        });
    }
    html.push_str(&chart::line_chart(&LineChart {
        y_label: "MB",
        x_label: "time (s)",
        x_range,
        y_range: None,
        dots: false,
        height: 260.0,
        series,
        markers,
    }));
    html.push('\n');
    html.push_str("<p class=\"note\">Every tenant in one chart, like the ESX paper's Fig. 7: each tenant's allocation (machine memory held) solid and its active estimate dashed, in the tenant's colour.</p>\n");
}

fn tenant_section(
    html: &mut String,
    series: &TenantSeries,
    t: &TenantSummary,
    markers: &[Marker],
    x_range: (f64, f64),
) {
    let _ = writeln!(
        html,
        "<h3>{} <span class=\"note\">({} estimator; min {} MB, max {} MB, shares {})</span></h3>",
        escape(&t.name),
        escape(&t.estimator),
        fmt(t.min_mb, 1),
        fmt(t.max_mb, 1),
        t.shares
    );
    let ran = !series.allocated.is_empty();
    if !ran {
        html.push_str("<p class=\"note\">did not run</p>\n");
    }
    html.push_str(&chart::line_chart(&LineChart {
        y_label: "MB",
        x_label: "time (s)",
        x_range,
        y_range: None,
        dots: false,
        height: 260.0,
        series: vec![
            Series {
                label: "allocated".into(),
                color: "#1f77b4",
                dashed: false,
                points: series.allocated.points(),
            },
            Series {
                label: "target".into(),
                color: "#ff7f0e",
                dashed: true,
                points: series.target.points(),
            },
            Series {
                label: "active estimate".into(),
                color: "#2ca02c",
                dashed: false,
                points: series.estimate.points(),
            },
            Series {
                label: "working set".into(),
                color: "#222222",
                dashed: true,
                points: series.working_set.points(),
            },
        ]
        .into_iter()
        .chain(tenant_extras(series))
        .collect(),
        markers,
    }));
    html.push('\n');
    if let Some(f) = t
        .figures
        .as_ref()
        .filter(|f| f.mean_active_estimate_mb < 0.25 * f.mean_working_set_mb)
    {
        let _ = writeln!(
            html,
            "<p class=\"note\">The active estimate ({} MB on average) is far below the working set ({} MB): the {} estimator measures the memory touched within each of its periods, not the memory a workload will read again. A workload that reads its data in slow passes (a scan of a large table, a cache read end to end) touches little of it per period, so its estimate stays low while its working set is all of it; here it counts toward the idle tax, not toward what the tenant is given.</p>",
            fmt(f.mean_active_estimate_mb, 1),
            fmt(f.mean_working_set_mb, 1),
            escape(&t.estimator)
        );
    }
    if ran {
        let mut points = series.throughput.points();
        let clipped = clip_warm_up(&mut points, x_range);
        html.push_str(&chart::line_chart(&LineChart {
            y_label: "ops/s",
            x_label: "time (s)",
            x_range,
            y_range: None,
            dots: false,
            height: 170.0,
            series: vec![Series {
                label: "throughput".into(),
                color: "#9467bd",
                dashed: false,
                points,
            }],
            markers,
        }));
        html.push('\n');
        if let Some(Clipped { cap, peak }) = clipped {
            let _ = writeln!(
                html,
                "<p class=\"meta\">Throughput axis scaled to the run after its warm-up: the start-up peak of {} ops/s is drawn at {} ops/s (timeline.csv has every value).</p>",
                fmt(peak, 0),
                fmt(cap, 0)
            );
        }
    }
}

/// A tenant's balloon, host-swapped and shared memory, each drawn only if it had any (ESX
/// Fig. 8(c, d) draw them per VM).
fn tenant_extras(series: &TenantSeries) -> Vec<Series> {
    let mut out = Vec::new();
    let mut add = |on: bool, label: &str, color, s: &BoundedSeries| {
        if on {
            out.push(Series {
                label: label.into(),
                color,
                dashed: false,
                points: s.points(),
            });
        }
    };
    add(series.any_balloon, "balloon", "#bcbd22", &series.balloon);
    add(
        series.any_host_swapped,
        "host-swapped",
        "#d62728",
        &series.host_swapped,
    );
    add(series.any_shared, "shared", "#8c564b", &series.shared);
    out
}

/// The warm-up of a run: its first 30 s, or its first tenth if that is shorter.
fn warm_up_end((x0, x1): (f64, f64)) -> f64 {
    x0 + ((x1 - x0) / 10.0).min(30.0)
}

/// Values of a warm-up drawn lower than they were.
#[derive(Debug, PartialEq)]
struct Clipped {
    /// Where they are drawn.
    cap: f64,
    /// The largest of them.
    peak: f64,
}

/// Draws the values of the warm-up that rise above everything after it at a cap (1.1 times
/// the largest value after the warm-up), so a start-up spike does not flatten the steady state
/// to a line on zero; says what it clipped, if anything.
fn clip_warm_up(points: &mut [(f64, f64)], x_range: (f64, f64)) -> Option<Clipped> {
    let end = warm_up_end(x_range);
    let steady = points
        .iter()
        .filter(|p| p.0 >= end && p.1.is_finite())
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let cap = steady * 1.1;
    let mut peak: Option<f64> = None;
    if cap > 0.0 {
        for p in points.iter_mut().filter(|p| p.0 < end && p.1 > cap) {
            peak = Some(peak.map_or(p.1, |m: f64| m.max(p.1)));
            p.1 = cap;
        }
    }
    peak.map(|peak| Clipped { cap, peak })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::summary::summarize;
    use crate::output::test_record::record;

    #[test]
    fn a_start_up_spike_is_drawn_at_the_steady_state_scale_and_said() {
        let mut points: Vec<(f64, f64)> = (0..600).map(|t| (f64::from(t), 500.0)).collect();
        points[0].1 = 50_000.0;
        points[3].1 = 20_000.0;
        let mut drawn = points.clone();
        let clipped = clip_warm_up(&mut drawn, (0.0, 600.0));
        assert_eq!(
            clipped,
            Some(Clipped {
                cap: 550.0,
                peak: 50_000.0
            })
        );
        assert_eq!(drawn[0].1, 550.0);
        assert_eq!(drawn[3].1, 550.0);
        assert_eq!(drawn[100], points[100]);
        // Without a spike nothing changes.
        let mut flat: Vec<(f64, f64)> = (0..600).map(|t| (f64::from(t), 500.0)).collect();
        assert_eq!(clip_warm_up(&mut flat, (0.0, 600.0)), None);
        assert!(flat.iter().all(|p| p.1 == 500.0));
    }

    fn page_of(r: &RunRecord) -> String {
        render(r, &summarize(r), &Charts::of(r))
    }

    fn page() -> String {
        page_of(&record())
    }

    #[test]
    fn report_has_a_memory_chart_per_tenant() {
        let html = page();
        // Host: state band, free memory, all tenants; a and b compared; a and b: memory +
        // throughput; c: memory only.
        assert_eq!(html.matches("<svg").count(), 3 + 1 + 2 + 2 + 1);
        for name in ["<h3>a ", "<h3>b, &lt;web&gt; ", "<h3>c "] {
            assert!(html.contains(name), "{name} missing");
        }
    }

    #[test]
    fn shared_memory_is_drawn_only_when_the_world_shares_pages() {
        let plain = page();
        assert!(!plain.contains("reclaimed by sharing"));
        let mut r = record();
        for tick in &mut r.ticks {
            tick.sharing = Some(memtide_model::HostSharing {
                shared: memtide_model::Pages::from_mib(40),
                frames: memtide_model::Pages::from_mib(10),
                ..Default::default()
            });
            for row in &mut tick.rows {
                row.sharing = Some(memtide_model::SharingLever {
                    shared: memtide_model::Pages::from_mib(20),
                    shareable: memtide_model::Pages::ZERO,
                    zero: None,
                    profit: None,
                });
            }
        }
        let html = page_of(&r);
        assert!(html.contains("reclaimed by sharing"), "the host's line");
        // The all-tenants chart and every tenant that ran draw a shared line.
        assert!(
            html.matches(">shared<").count() >= 2,
            "{}",
            html.matches(">shared<").count()
        );
        assert!(html.contains("is drawn over them"));
    }

    #[test]
    fn io_remapping_gets_its_section_only_when_modelled() {
        assert!(!page().contains("I/O page remapping"));
        let mut r = record();
        for (i, tick) in r.ticks.iter_mut().enumerate() {
            tick.remapping = Some(memtide_model::IoRemapping {
                transmits: 1000 * i as u64,
                copies: 10 * i as u64,
                avoided: 990 * i as u64,
                ..Default::default()
            });
        }
        let html = page_of(&r);
        assert!(html.contains("<h3>I/O page remapping</h3>"));
        assert!(html.contains("copies avoided by remapping"));
    }

    #[test]
    fn an_estimate_far_below_the_working_set_is_explained() {
        assert!(!page().contains("far below the working set"));
        let mut r = record();
        for t in &mut r.ticks {
            for row in &mut t.rows {
                row.active_estimate = Bytes(1 << 20);
            }
        }
        assert!(page_of(&r).contains("is far below the working set (100.0 MB)"));
    }

    #[test]
    fn report_is_self_contained() {
        let html = page();
        assert!(!html.contains("http"), "external reference");
        assert!(!html.contains("<script"));
        assert!(!html.contains("<link"));
        assert!(!html.contains("src="));
    }

    #[test]
    fn report_escapes_names_and_descriptions() {
        let html = page();
        assert!(html.contains("a &lt;small&gt; &amp; simple record"));
        assert!(!html.contains("<web>") && !html.contains("<small>"));
    }

    #[test]
    fn report_lists_events_and_refusals() {
        let html = page();
        assert!(html.contains("tax rate -&gt; 0.75"));
        assert!(html.contains("min exceeds unreserved memory"));
        assert!(html.contains("class=\"event\""), "event marker drawn");
    }

    /// The number of points of the longest line in `html` (an area's outline counts its two
    /// edges' points).
    fn longest_line(html: &str) -> usize {
        html.split("<polyline")
            .skip(1)
            .map(|s| {
                let points = &s[s.find("points=\"").unwrap() + 8..];
                points[..points.find('"').unwrap()].split(' ').count()
            })
            .max()
            .unwrap()
    }

    #[test]
    fn long_runs_are_drawn_with_a_bounded_number_of_points() {
        let mut r = record();
        let template = r.ticks[3].clone();
        r.ticks = (0..50_000)
            .map(|i| {
                let mut t = template.clone();
                t.time_s = i as f64;
                t.free = Bytes((i % 997) << 20);
                t
            })
            .collect();
        r.run.duration_s = 50_000.0;
        let html = page_of(&r);
        let longest = longest_line(&html);
        assert!(longest <= 2 * BUCKETS, "{longest} points in one series");
        // The stacked areas: a point per bucket along each edge.
        for area in html.split("<polygon").skip(1) {
            let points = &area[area.find("points=\"").unwrap() + 8..];
            let n = points[..points.find('"').unwrap()].split(' ').count();
            assert!(n <= 2 * BUCKETS, "{n} points in one area");
        }
        // A run shorter than the buckets is drawn point for point.
        r.ticks.truncate(300);
        r.run.duration_s = 300.0;
        assert_eq!(longest_line(&page_of(&r)), 300);
    }

    #[test]
    fn only_the_first_tenants_get_charts_and_the_page_says_so() {
        let mut r = record();
        let meta = r.tenants[0].clone();
        r.run.tenants = (0..CHARTED_TENANTS as u32 + 5)
            .map(|i| crate::record::TenantMeta {
                id: TenantId(i),
                name: format!("t{i}"),
                ..meta.clone()
            })
            .collect();
        let template = r.ticks[3].rows[0].clone();
        for tick in &mut r.ticks {
            tick.rows = r
                .run
                .tenants
                .iter()
                .map(|t| crate::record::TenantRow {
                    tenant: t.id,
                    ..template.clone()
                })
                .collect();
        }
        let charts = Charts::of(&r);
        assert_eq!(charts.tenants.len(), CHARTED_TENANTS);
        let html = render(&r, &summarize(&r), &charts);
        // Host: band, free, all tenants; no comparison of 37; each charted tenant: memory +
        // throughput.
        assert_eq!(html.matches("<svg").count(), 3 + 2 * CHARTED_TENANTS);
        assert!(html.contains("<h3>t31 ") && !html.contains("<h3>t32 "));
        assert!(html.contains("the 5 others are in the summary table"));
        // ... and the summary table has every tenant.
        assert!(html.contains("<td class=\"l\">t36</td>"));
    }

    #[test]
    fn same_record_gives_the_same_page() {
        assert_eq!(page(), page());
    }
}
