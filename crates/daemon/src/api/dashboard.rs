//! The live dashboard at `GET /`: one HTML page of the host and its tenants over a window of the recent past, drawn from the published snapshot and its history with the charts of report.html (`memtide-chart`).
//!
//! What it shows, top to bottom: warnings (the host in `hard` or `low`, a tenant whose limit
//! has stood at its floor for 10 minutes, a stalled balloon, an agent the OS holds or one taken over as
//! dishonest, failed restores: the alert rules' conditions, as they stand now); the host (its
//! figures, the reclamation state over the window and its memory chart); the tenants' table;
//! each tenant's chart (allocation, limit, target, estimate, and its swap, pool or balloon
//! where it has them; the legend gives each line's latest value, the newest point is the
//! latest snapshot's) with its decision's reason; agents; the last decisions with their
//! reasons. `?window=` picks the window (1 minute to the hour kept, 15 minutes by default),
//! `?tenant=` one tenant's charts.
//!
//! Self-contained: inline CSS and SVG, and one inline script that fetches the same page every
//! [`REFRESH_S`] seconds and swaps its `<main>` in (scroll position kept); nothing is fetched
//! from anywhere else, and the reply's Content-Security-Policy forbids it. With scripts off,
//! a `<noscript>` meta refresh reloads the page instead. Every name is escaped. Charts of at
//! most [`CHARTED`] tenants are drawn (the table lists all), so a page stays a few hundred
//! KiB on a host of thousands.

use crate::history::{History, HostPoint, TenantPoint, STEP_S};
use memtide_api::{DecisionRecord, Snapshot, TenantSnapshot};
use memtide_chart::{self as chart, escape, LineChart, Series};
use memtide_model::ReclamationState;
use std::collections::VecDeque;
use std::fmt::Write;

/// Seconds between updates of an open page.
pub const REFRESH_S: u32 = 5;

/// Tenants whose charts are drawn, in the snapshot's order (`?tenant=` draws any one).
pub const CHARTED: usize = 24;

/// How long a tenant's limit stands at its floor before the page warns of it: the alert
/// rule's `for: 10m`.
const AT_FLOOR_S: f64 = 600.0;

/// Decisions listed, newest first.
const DECISIONS: usize = 25;

/// The window shown when the query names none.
const DEFAULT_WINDOW_S: f64 = 15.0 * 60.0;

const MIB: f64 = (1u64 << 20) as f64;

/// `GET /`'s query (`body::parse_dashboard_query`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Query {
    pub(crate) window_s: f64,
    pub(crate) tenant: Option<String>,
}

impl Default for Query {
    fn default() -> Query {
        Query {
            window_s: DEFAULT_WINDOW_S,
            tenant: None,
        }
    }
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:16px auto;max-width:1380px;color:#222;padding:0 16px}\
h1{font-size:1.4em;margin-bottom:2px}h2{font-size:1.15em;margin-top:28px;border-bottom:1px solid #ddd}h3{font-size:1em;margin:18px 0 2px}\
p.meta{color:#666;margin-top:0}nav a{margin-right:10px}nav a.on{font-weight:bold;text-decoration:none;color:#222}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}th{background:#f4f4f4}\
td.l,th.l{text-align:left}td.why{text-align:left;max-width:60em;font-size:12px;color:#444}\
ul.warn{padding:8px 8px 8px 28px;background:#fff4e5;border:1px solid #ffb74d}ul.warn li{margin:2px 0}p.ok{color:#2e7d32}\
div.tenants{display:flex;flex-wrap:wrap;gap:0 24px}div.tenant{flex:0 0 auto}p.why{font-size:12px;color:#444;max-width:820px;margin:0 0 8px}\
svg.chart{display:block;font-size:11px;margin:4px 0 6px}svg .axis-label{font-size:12px;fill:#444}";

/// Fetches the page again and swaps its `<main>` in; on any failure the page stays as it is.
const SCRIPT: &str = "setInterval(function(){fetch(location.href,{cache:'no-store'}).then(function(r){return r.ok?r.text():null}).then(function(t){if(!t)return;var m=new DOMParser().parseFromString(t,'text/html').querySelector('main');if(m)document.querySelector('main').replaceWith(m)}).catch(function(){})},";

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB)
}

fn opt_mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "-".to_string(), mib)
}

/// `HH:MM:SS` UTC of a Unix time in milliseconds.
fn clock(unix_ms: u64) -> String {
    let s = unix_ms / 1000;
    format!("{:02}:{:02}:{:02}", (s / 3600) % 24, (s / 60) % 60, s % 60)
}

/// The page for `snapshot` and `history` over `q`.
pub(crate) fn render(snapshot: &Snapshot, history: &History, q: &Query) -> String {
    let mut html = String::with_capacity(128 * 1024);
    let h = &snapshot.host;
    let now_s = history.host().back().map_or(0.0, |p| p.at_s);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width\">\n\
         <title>memtide: {}</title>\n<noscript><meta http-equiv=\"refresh\" content=\"{REFRESH_S}\"></noscript>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<main>\n",
        escape(&h.parent)
    );
    let _ = writeln!(
        html,
        "<h1>memtide: {} ({} cgroups)</h1>\n<p class=\"meta\">version {}, up {}, tick {}, at {} UTC{}; \
         updates every {REFRESH_S} s; the <a href=\"/v1/status\">JSON</a> and \
         <a href=\"/metrics\">metrics</a> behind it</p>",
        escape(&h.parent),
        escape(&h.hierarchy),
        escape(&snapshot.version),
        duration(snapshot.uptime_s),
        snapshot.ticks,
        clock((now_s * 1000.0) as u64),
        if snapshot.dry_run {
            ", <b>dry run: nothing is written</b>"
        } else {
            ""
        }
    );
    nav(&mut html, q);
    warnings(&mut html, snapshot, history);
    host(&mut html, snapshot, history.host(), now_s, q.window_s);
    tenants_table(&mut html, snapshot);
    tenant_charts(&mut html, snapshot, history, now_s, q);
    agents(&mut html, snapshot);
    decisions(&mut html, &snapshot.decisions);
    let _ = write!(
        html,
        "</main>\n<script>{SCRIPT}{})</script>\n</body>\n</html>\n",
        REFRESH_S * 1000
    );
    html
}

fn duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{:.1} h", s as f64 / 3600.0),
    }
}

/// Links to the windows, the one shown in bold.
fn nav(html: &mut String, q: &Query) {
    html.push_str("<nav>window: ");
    for (label, s) in [("5m", 300.0), ("15m", 900.0), ("1h", 3600.0)] {
        let tenant = q.tenant.as_ref().map_or_else(String::new, |t| {
            format!(
                "&amp;tenant={}",
                escape(&memtide_api::body::percent_encode(t))
            )
        });
        let on = if (q.window_s - s).abs() < 0.5 {
            " class=\"on\""
        } else {
            ""
        };
        let _ = write!(html, "<a{on} href=\"/?window={label}{tenant}\">{label}</a>");
    }
    if q.tenant.is_some() {
        let _ = write!(html, "<a href=\"/?window={}s\">all tenants</a>", q.window_s);
    }
    html.push_str("</nav>\n");
}

/// Whether `ring`'s limit has stood at or under its floor at every point of the last
/// `span_s` seconds, and the ring covers them (the alert rule's 10 minutes: a tenant shrunk
/// to its floor for a moment is memtide at work, not a warning).
fn at_floor_for(ring: Option<&VecDeque<TenantPoint>>, span_s: f64) -> bool {
    let Some(last) = ring.and_then(|r| r.back()) else {
        return false;
    };
    let ring = ring.into_iter().flatten();
    let mut covered = false;
    for p in ring.rev() {
        if !(p.limit_mib <= p.floor_mib && p.floor_mib > 0.0) {
            return false;
        }
        if last.at_s - p.at_s >= span_s {
            covered = true;
            break;
        }
    }
    covered
}

/// What needs a person's eye now.
fn warnings(html: &mut String, s: &Snapshot, history: &History) {
    let mut w: Vec<String> = Vec::new();
    match s.host.state.as_str() {
        "hard" => w.push(
            "The host is in <b>hard</b>: free memory is short and memtide pages tenants out \
             (host swap) besides ballooning."
                .to_string(),
        ),
        "low" => w.push(
            "The host is in <b>low</b>: free memory is nearly gone; tenants are held at what \
             they have and pushed toward their floors."
                .to_string(),
        ),
        _ => {}
    }
    for t in &s.tenants {
        let name = escape(&t.name);
        if at_floor_for(history.tenant(&t.name), AT_FLOOR_S) {
            w.push(format!(
                "<b>{name}</b> has been held at its floor for {} min: limit {} &le; floor {} \
                 (min, or what it cannot give back and the margin); memtide can take nothing \
                 more from it.",
                AT_FLOOR_S / 60.0,
                opt_mib(t.limit_bytes),
                mib(t.floor_bytes)
            ));
        }
        if let Some(vm) = t.vm.as_ref().filter(|v| v.stalled) {
            w.push(format!(
                "<b>{name}</b>'s balloon is stalled at {}: its guest's driver does not move; \
                 host swap takes over.",
                mib(vm.balloon_bytes)
            ));
        }
        if let Some(app) = t.app.as_ref() {
            if app.held_by == "os" {
                w.push(format!(
                    "<b>{name}</b>'s agent ({}) does not hold it, the OS does: {}.",
                    escape(&app.app),
                    escape(app.why.as_deref().unwrap_or("no agent connected"))
                ));
            }
            if let Some(n) = app.takeovers.get("dishonest").filter(|&&n| n > 0) {
                w.push(format!(
                    "<b>{name}</b>'s agent was taken over {n} time{} as <b>dishonest</b>: \
                     it said it released memory the kernel did not see released.",
                    if *n == 1 { "" } else { "s" }
                ));
            }
        }
    }
    if s.counters.restore_failures > 0 {
        w.push(format!(
            "{} attempt{} to give a tenant back its own settings failed (retried each tick; \
             see the log).",
            s.counters.restore_failures,
            if s.counters.restore_failures == 1 {
                ""
            } else {
                "s"
            }
        ));
    }
    html.push_str("<h2>Warnings</h2>\n");
    if w.is_empty() {
        html.push_str("<p class=\"ok\">None: no tenant at its floor, no stalled balloon, every agent trusted.</p>\n");
    } else {
        html.push_str("<ul class=\"warn\">\n");
        for line in w {
            let _ = writeln!(html, "<li>{line}</li>");
        }
        html.push_str("</ul>\n");
    }
}

/// The points of `ring` inside the window, as x in minutes before now.
fn window<P>(ring: &VecDeque<P>, at: impl Fn(&P) -> f64, now_s: f64, window_s: f64) -> Vec<&P> {
    ring.iter()
        .filter(|p| at(p) >= now_s - window_s - STEP_S)
        .collect()
}

fn x_of(at_s: f64, now_s: f64) -> f64 {
    (at_s - now_s) / 60.0
}

/// A line of `f32` values, skipping `NaN`s; `None` when none is finite.
fn line<P>(
    points: &[&P],
    at: impl Fn(&P) -> f64,
    value: impl Fn(&P) -> f32,
    now_s: f64,
) -> Option<(Vec<(f64, f64)>, f64)> {
    let v: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| value(p).is_finite())
        .map(|p| (x_of(at(p), now_s), f64::from(value(p))))
        .collect();
    let last = v.last()?.1;
    Some((v, last))
}

fn series(label: &str, color: &'static str, dashed: bool, line: (Vec<(f64, f64)>, f64)) -> Series {
    Series {
        label: format!("{label} {:.1} MiB", line.1),
        color,
        dashed,
        points: line.0,
    }
}

fn x_label(window_s: f64) -> String {
    format!("minutes before now (the last {})", duration(window_s))
}

fn host(html: &mut String, s: &Snapshot, ring: &VecDeque<HostPoint>, now_s: f64, window_s: f64) {
    let h = &s.host;
    html.push_str("<h2>Host</h2>\n<table><tr><th>state</th><th>budget</th><th>free</th><th>machine</th><th>allocated to tenants</th><th>swap used</th><th>tax rate</th><th>pressure (some, 10 s)</th>");
    if h.sharing.is_some() {
        html.push_str("<th>shared (KSM)</th><th>saved by sharing</th>");
    }
    let _ = write!(
        html,
        "</tr>\n<tr><td class=\"l\"><span style=\"color:{}\">&#9632;</span> {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td>",
        ReclamationState::ALL
            .into_iter()
            .find(|st| st.name() == h.state)
            .map_or("#999", chart::state_color),
        escape(&h.state),
        mib(h.budget_bytes),
        mib(h.free_bytes),
        mib(h.machine_bytes),
        mib(s.tenants.iter().map(|t| t.allocated_bytes).sum()),
        mib(h.swap_total_bytes.saturating_sub(h.swap_free_bytes)),
        h.tax_rate,
        h.pressure_some_avg10
            .map_or_else(|| "-".to_string(), |p| format!("{p:.2}%"))
    );
    if let Some(sh) = &h.sharing {
        let _ = write!(
            html,
            "<td>{}</td><td>{}</td>",
            mib(sh.shared_bytes),
            mib(sh.reclaimed_bytes)
        );
    }
    html.push_str("</tr></table>\n");
    let points = window(ring, |p| p.at_s, now_s, window_s);
    let mut runs: Vec<(f64, ReclamationState)> = Vec::new();
    for p in &points {
        if runs.last().is_none_or(|r| r.1 != p.state) {
            runs.push((x_of(p.at_s, now_s), p.state));
        }
    }
    html.push_str("<h3>Reclamation state</h3>\n");
    html.push_str(&chart::state_band(
        &runs,
        0.0,
        (-window_s / 60.0, 0.0),
        &x_label(window_s),
        &[],
    ));
    html.push_str("\n<h3>Memory of the tenants</h3>\n");
    let mut lines = Vec::new();
    let at = |p: &HostPoint| p.at_s;
    for (label, color, dashed, value) in [
        (
            "allocated to tenants",
            "#1f77b4",
            false,
            (|p: &HostPoint| p.allocated_mib) as fn(&HostPoint) -> f32,
        ),
        ("budget", "#7f7f7f", true, |p| p.budget_mib),
        ("swap used", "#ff7f0e", false, |p| p.swap_used_mib),
        ("shared (KSM)", "#9467bd", false, |p| p.shared_mib),
    ] {
        if let Some(l) = line(&points, at, value, now_s) {
            lines.push(series(label, color, dashed, l));
        }
    }
    html.push_str(&window_chart("MiB", window_s, 220.0, lines));
    // Free machine memory on its own scale: beside a small budget it flattens every line.
    html.push_str("\n<h3>Free machine memory</h3>\n");
    let free: Vec<Series> = line(&points, at, |p| p.free_mib, now_s)
        .map(|l| series("free", "#2ca02c", false, l))
        .into_iter()
        .collect();
    html.push_str(&window_chart("MiB", window_s, 130.0, free));
    html.push('\n');
}

/// A chart of `series` over the last `window_s` seconds, x in minutes before now. A line of a
/// point or two draws nothing visible (a daemon just started): its points get dots.
fn window_chart(y_label: &str, window_s: f64, height: f64, series: Vec<Series>) -> String {
    chart::line_chart(&LineChart {
        y_label,
        x_label: &x_label(window_s),
        x_range: (-window_s / 60.0, 0.0),
        y_range: None,
        dots: series.iter().any(|s| s.points.len() < 3),
        height,
        series,
        markers: &[],
    })
}

fn tenants_table(html: &mut String, s: &Snapshot) {
    let _ = writeln!(html, "<h2>Tenants ({})</h2>", s.tenants.len());
    html.push_str("<table><tr><th class=\"l\">tenant</th><th class=\"l\">origin</th><th class=\"l\">estimator</th><th>allocated</th><th>limit</th><th>target</th><th>estimate</th><th>floor</th><th>min / max</th><th>swap</th><th>refaults/s</th><th class=\"l\">lever</th></tr>\n");
    for t in &s.tenants {
        let lever = lever(t);
        let _ = writeln!(
            html,
            "<tr><td class=\"l\"><a href=\"/?tenant={}\">{}</a></td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            escape(&memtide_api::body::percent_encode(&t.name)),
            escape(&t.name),
            escape(&t.origin),
            escape(&t.estimator),
            mib(t.allocated_bytes),
            opt_mib(t.limit_bytes),
            mib(t.target_bytes),
            mib(t.active_estimate_bytes),
            mib(t.floor_bytes),
            mib(t.min_bytes),
            mib(t.max_bytes),
            opt_mib(t.swap_bytes),
            t.refaults_per_s
                .map_or_else(|| "-".to_string(), |r| format!("{r:.0}")),
            escape(&lever)
        );
    }
    html.push_str("</table>\n");
}

/// What moves the tenant besides its limit: its agent's pool, its VM's balloon, its disk
/// share, and a hold.
fn lever(t: &TenantSnapshot) -> String {
    let mut parts = Vec::new();
    if let Some(a) = &t.app {
        parts.push(format!(
            "{} pool {} ({})",
            a.kind,
            mib(a.pool_bytes),
            if a.held_by == "app" {
                "app"
            } else {
                "OS holds it"
            }
        ));
    }
    if let Some(vm) = &t.vm {
        parts.push(format!("balloon {}", mib(vm.balloon_bytes)));
    }
    if let Some(d) = &t.disk {
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1} ms"));
        parts.push(format!(
            "disk weight {}{}, latency {} (target {})",
            d.weight.map_or_else(|| "-".to_string(), |w| w.to_string()),
            d.cap_iops
                .map_or_else(String::new, |c| format!(", cap {c} IOPS")),
            ms(d.latency_ms),
            ms(d.target_ms)
        ));
    }
    if let Some(held) = &t.held {
        parts.push(format!("held: {held}"));
    }
    if parts.is_empty() {
        "limit".to_string()
    } else {
        parts.join("; ")
    }
}

fn tenant_charts(html: &mut String, s: &Snapshot, history: &History, now_s: f64, q: &Query) {
    let shown: Vec<&TenantSnapshot> = match &q.tenant {
        Some(name) => s.tenants.iter().filter(|t| t.name == *name).collect(),
        None => s.tenants.iter().take(CHARTED).collect(),
    };
    html.push_str("<h2>Each tenant</h2>\n");
    if let Some(name) = &q.tenant {
        if shown.is_empty() {
            let _ = writeln!(
                html,
                "<p class=\"note\">No tenant {:?} is managed now.</p>",
                escape(name)
            );
        }
    } else if s.tenants.len() > CHARTED {
        let _ = writeln!(
            html,
            "<p class=\"note\">The first {CHARTED} of {} tenants are drawn; pick one in the table for its chart.</p>",
            s.tenants.len()
        );
    }
    html.push_str("<div class=\"tenants\">\n");
    for t in shown {
        let empty = VecDeque::new();
        let ring = history.tenant(&t.name).unwrap_or(&empty);
        let points = window(ring, |p| p.at_s, now_s, q.window_s);
        let at = |p: &TenantPoint| p.at_s;
        let mut lines = Vec::new();
        type Value = fn(&TenantPoint) -> f32;
        for (label, color, dashed, value) in [
            (
                "allocated",
                "#1f77b4",
                false,
                (|p: &TenantPoint| p.allocated_mib) as Value,
            ),
            ("limit", "#7f7f7f", false, |p| p.limit_mib),
            ("target", "#d62728", true, |p| p.target_mib),
            ("estimate", "#2ca02c", true, |p| p.estimate_mib),
            ("pool", "#9467bd", false, |p| p.pool_mib),
            ("balloon", "#8c564b", false, |p| p.balloon_mib),
        ] {
            if let Some(l) = line(&points, at, value, now_s) {
                lines.push(series(label, color, dashed, l));
            }
        }
        // Swap only where there is some: a line at zero under every tenant says nothing.
        if let Some(l) =
            line(&points, at, |p| p.swap_mib, now_s).filter(|l| l.0.iter().any(|p| p.1 > 0.0))
        {
            lines.push(series("swap", "#ff7f0e", false, l));
        }
        let _ = writeln!(
            html,
            "<div class=\"tenant\" id=\"tenant-{}\"><h3>{}</h3>",
            escape(&memtide_api::body::percent_encode(&t.name)),
            escape(&t.name)
        );
        html.push_str(&window_chart("MiB", q.window_s, 200.0, lines));
        let faults = line(&points, at, |p| p.refaults_per_s, now_s)
            .filter(|l| l.0.iter().any(|p| p.1 > 0.0));
        if let Some((points, last)) = faults {
            html.push_str(&window_chart(
                "per s",
                q.window_s,
                110.0,
                vec![Series {
                    label: format!("refaults and swap-ins {last:.0}/s"),
                    color: "#d62728",
                    dashed: false,
                    points,
                }],
            ));
        }
        let _ = writeln!(
            html,
            "<p class=\"why\"><b>Why:</b> {}</p></div>",
            escape(if t.reason.is_empty() {
                "no tick yet"
            } else {
                &t.reason
            })
        );
    }
    html.push_str("</div>\n");
}

fn agents(html: &mut String, s: &Snapshot) {
    let apps: Vec<&TenantSnapshot> = s.tenants.iter().filter(|t| t.app.is_some()).collect();
    if apps.is_empty() {
        return;
    }
    html.push_str("<h2>Agents</h2>\n<table><tr><th class=\"l\">tenant</th><th class=\"l\">app</th><th class=\"l\">kind</th><th>pid</th><th>pool</th><th>wanted</th><th class=\"l\">held by</th><th class=\"l\">last resize</th><th class=\"l\">taken over</th><th class=\"l\">why</th></tr>\n");
    for t in apps {
        let Some(a) = &t.app else { continue };
        let resize = a.last_resize.as_ref().map_or_else(
            || "-".to_string(),
            |r| format!("{} to {} in {:.1} s", r.status, mib(r.pool_bytes), r.took_s),
        );
        let takeovers = if a.takeovers.is_empty() {
            "never".to_string()
        } else {
            a.takeovers
                .iter()
                .map(|(why, n)| format!("{why} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            html,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"why\">{}</td></tr>",
            escape(&t.name),
            escape(&a.app),
            escape(&a.kind),
            a.pid.map_or_else(|| "-".to_string(), |p| p.to_string()),
            mib(a.pool_bytes),
            opt_mib(a.wanted_bytes),
            escape(&a.held_by),
            escape(&resize),
            escape(&takeovers),
            escape(a.why.as_deref().unwrap_or("-"))
        );
    }
    html.push_str("</table>\n");
}

fn decisions(html: &mut String, decisions: &[DecisionRecord]) {
    let _ = writeln!(
        html,
        "<h2>Last decisions</h2>\n<p class=\"meta\">Newest first; the API keeps the last {} (<a href=\"/v1/decisions\">all of them</a>).</p>",
        decisions.len()
    );
    html.push_str("<table><tr><th>at (UTC)</th><th class=\"l\">tenant</th><th class=\"l\">outcome</th><th>limit from</th><th>to</th><th class=\"l\">reason</th></tr>\n");
    for d in decisions.iter().rev().take(DECISIONS) {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td class=\"why\">{}</td></tr>",
            clock(d.at_unix_ms),
            escape(&d.tenant),
            escape(&d.outcome),
            opt_mib(d.limit_from_bytes),
            opt_mib(d.limit_to_bytes),
            escape(&d.reason)
        );
    }
    html.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_api::{AppSnapshot, HostSnapshot, VmSnapshot};

    fn snapshot() -> Snapshot {
        Snapshot {
            version: "0.1.0".into(),
            ticks: 42,
            host: HostSnapshot {
                parent: "/memtide".into(),
                hierarchy: "v2".into(),
                state: "high".into(),
                budget_bytes: 1 << 30,
                free_bytes: 512 << 20,
                ..HostSnapshot::default()
            },
            tenants: vec![
                TenantSnapshot {
                    name: "db<1>".into(),
                    allocated_bytes: 300 << 20,
                    limit_bytes: Some(320 << 20),
                    target_bytes: 310 << 20,
                    floor_bytes: 64 << 20,
                    reason: "high: at target; estimate tws".into(),
                    ..TenantSnapshot::default()
                },
                TenantSnapshot {
                    name: "web".into(),
                    allocated_bytes: 100 << 20,
                    limit_bytes: Some(64 << 20),
                    floor_bytes: 64 << 20,
                    ..TenantSnapshot::default()
                },
            ],
            decisions: vec![DecisionRecord {
                tenant: "web".into(),
                outcome: "lower".into(),
                reason: "soft: idle tax".into(),
                ..DecisionRecord::default()
            }],
            ..Snapshot::default()
        }
    }

    fn history(s: &Snapshot, ticks: usize) -> History {
        let mut h = History::default();
        for i in 0..ticks {
            h.record(s, 1_000_000.0 + i as f64 * STEP_S);
        }
        h
    }

    #[test]
    fn the_page_names_every_tenant_escaped_and_draws_their_charts() {
        let s = snapshot();
        let page = render(&s, &history(&s, 10), &Query::default());
        assert!(page.contains("db&lt;1&gt;") && !page.contains("db<1>"));
        assert!(page.contains("<h3>web</h3>"));
        // Host band, tenants' memory, free memory, and one chart per tenant.
        assert_eq!(page.matches("<svg class=\"chart\"").count(), 5, "{page}");
        assert!(
            page.contains("allocated 300.0 MiB"),
            "the legend's latest value"
        );
        assert!(page.contains("allocated 300.0 MiB: last 300.0 at 0.0"));
        assert!(page.contains("high: at target; estimate tws"));
        assert!(page.contains("soft: idle tax"));
    }

    #[test]
    fn warnings_name_a_tenant_at_its_floor_a_stalled_balloon_and_a_dishonest_agent() {
        let mut s = snapshot();
        // "web" stands at its floor: for a moment, nothing to warn of; for 10 minutes, it is.
        let calm = render(&s, &history(&s, 10), &Query::default());
        assert!(calm.contains("class=\"ok\""), "no warning: {calm}");
        let held = history(&s, 1 + (AT_FLOOR_S / STEP_S) as usize);
        assert!(render(&s, &held, &Query::default())
            .contains("<b>web</b> has been held at its floor for 10 min"));
        s.tenants[1].limit_bytes = Some(200 << 20);
        let raised = history(&s, 1);
        let mut both = held.clone();
        both.record(&s, 1_000_000.0 + 200.0 * STEP_S);
        assert!(render(&s, &both, &Query::default()).contains("class=\"ok\""));
        assert!(render(&s, &raised, &Query::default()).contains("class=\"ok\""));
        s.tenants[1].limit_bytes = Some(64 << 20);
        s.host.state = "low".into();
        s.tenants[0].vm = Some(VmSnapshot {
            stalled: true,
            ..VmSnapshot::default()
        });
        s.tenants[1].app = Some(AppSnapshot {
            app: "redis".into(),
            held_by: "os".into(),
            why: Some("taken over: dishonest".into()),
            takeovers: [("dishonest".to_string(), 2)].into(),
            ..AppSnapshot::default()
        });
        let page = render(&s, &held, &Query::default());
        for needle in [
            "host is in <b>low</b>",
            "<b>web</b> has been held at its floor",
            "<b>db&lt;1&gt;</b>'s balloon is stalled",
            "the OS does: taken over: dishonest",
            "taken over 2 times as <b>dishonest</b>",
        ] {
            assert!(page.contains(needle), "{needle} in {page}");
        }
    }

    #[test]
    fn a_disk_tenant_s_share_and_latency_are_in_the_table() {
        let mut s = snapshot();
        s.tenants[0].disk = Some(memtide_api::DiskSnapshot {
            weight: Some(200),
            latency_ms: Some(3.0),
            target_ms: Some(5.0),
            ..memtide_api::DiskSnapshot::default()
        });
        let page = render(&s, &History::default(), &Query::default());
        assert!(
            page.contains("disk weight 200, latency 3.0 ms (target 5.0 ms)"),
            "{page}"
        );
    }

    #[test]
    fn one_tenant_is_drawn_when_asked_and_an_unknown_one_is_said() {
        let s = snapshot();
        let h = history(&s, 3);
        let q = Query {
            tenant: Some("web".into()),
            ..Query::default()
        };
        let page = render(&s, &h, &q);
        assert_eq!(page.matches("<svg class=\"chart\"").count(), 4);
        assert!(page.contains("id=\"tenant-web\"") && !page.contains("id=\"tenant-db"));
        let q = Query {
            tenant: Some("gone".into()),
            ..Query::default()
        };
        assert!(render(&s, &h, &q).contains("No tenant \"gone\" is managed now"));
    }

    #[test]
    fn the_window_keeps_only_its_points() {
        let s = snapshot();
        let h = history(&s, 400);
        let q = Query {
            window_s: 60.0,
            ..Query::default()
        };
        let page = render(&s, &h, &q);
        let tenant = &page[page.find("id=\"tenant-web\"").unwrap()..];
        let pts = &tenant[tenant.find("points=\"").unwrap() + 8..];
        let n = pts[..pts.find('"').unwrap()].split(' ').count();
        // A minute at 5 s a point, and the one just before it.
        assert!((12..=14).contains(&n), "{n} points");
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        let s = snapshot();
        let page = render(&s, &history(&s, 3), &Query::default());
        assert!(!page.contains("http://") && !page.contains("https://"));
        assert!(
            !page.contains(" src="),
            "no external script, image or frame"
        );
        assert!(page.contains("<noscript><meta http-equiv=\"refresh\""));
    }
}
