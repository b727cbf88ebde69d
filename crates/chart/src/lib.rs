//! memtide's charts as inline SVG: line charts and stacked area charts with axes, ticks, legend and event markers, heat maps with a search's path, a colored band of reclamation states, and the series they draw kept in bounded memory; no scripts, no external references, so report.html and a dashboard draw the same charts.
//!
//! Written here rather than with a plotting crate: the output must be byte-stable for the same
//! data (the simulator's outputs are compared byte for byte) and small enough to inline in one
//! HTML file, and the few hundred lines below need no dependency beyond memtide-model.
//!
//! - here: `line_chart` (axes, ticks, a legend that wraps into rows, event markers),
//!   `stacked_chart` (areas with lines over them), `state_band`, `nice_ticks`, `escape`;
//! - `heat.rs`: [`heat_map`], a grid of cells on a sequential, optionally logarithmic scale,
//!   with paths through cells and labelled marks;
//! - `bounded.rs`: [`BoundedSeries`] (at most a fixed number of buckets that merge pairwise
//!   when full, each keeping its lowest and highest point), [`BoundedMeans`] (columns sampled
//!   together kept as bucket means, for stacks), [`StateRuns`] (runs of equal state, merged
//!   into the worse state beyond a fixed number).

mod bounded;
mod heat;

pub use bounded::{BoundedMeans, BoundedSeries, StateRuns};
pub use heat::{heat_map, CellMark, CellPath, HeatMap};
use memtide_model::ReclamationState;
use std::fmt::Write;

const WIDTH: f64 = 820.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 38.0;

/// One line of a chart.
pub struct Series {
    pub label: String,
    pub color: &'static str,
    pub dashed: bool,
    /// `(x, y)` in data units, x increasing.
    pub points: Vec<(f64, f64)>,
}

/// A vertical line at `x` (an event), numbered and explained by a tooltip.
pub struct Marker {
    pub x: f64,
    pub number: usize,
    pub label: String,
}

/// A line chart: y from zero to the largest value, or over `y_range`.
pub struct LineChart<'a> {
    pub y_label: &'a str,
    /// The x axis's label (`time (s)` on every chart over a run).
    pub x_label: &'a str,
    pub x_range: (f64, f64),
    /// y's range when not from zero to the data's largest value: a chart of values that all
    /// lie near 100% reads only when its axis starts near them. A point outside it is drawn
    /// on the plot's edge.
    pub y_range: Option<(f64, f64)>,
    /// A dot on every point of the solid series: data measured at a few x (one trial per N),
    /// where a series of one point would draw no line.
    pub dots: bool,
    /// Height with a one-row legend; each further legend row adds to it.
    pub height: f64,
    pub series: Vec<Series>,
    pub markers: &'a [Marker],
}

/// One layer of a stacked area chart: its own values (not summed with the layers below), one
/// per x of the chart.
pub struct Area {
    pub label: String,
    pub color: &'static str,
    pub values: Vec<f64>,
}

/// Areas stacked from zero (the first at the bottom) with lines drawn over them, not stacked:
/// y from zero to the largest top or line.
pub struct StackedChart<'a> {
    pub y_label: &'a str,
    pub x_range: (f64, f64),
    /// Height with a one-row legend; each further legend row adds to it.
    pub height: f64,
    /// Where the areas' values lie, increasing.
    pub x: Vec<f64>,
    pub areas: Vec<Area>,
    pub lines: Vec<Series>,
    pub markers: &'a [Marker],
}

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Round tick values covering `[lo, hi]`: steps of 1, 2 or 5 times a power of ten, about
/// `count` of them.
pub fn nice_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo || count == 0 {
        return vec![lo];
    }
    let step = nice_step((hi - lo) / count as f64);
    let first = (lo / step).ceil();
    (0..100)
        .map(|k| (first + k as f64) * step)
        .take_while(|v| *v <= hi + step * 1e-9)
        .collect()
}

fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// A tick label with as many decimals as the step needs.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil().clamp(0.0, 6.0) as usize
    };
    format!("{v:.decimals$}")
}

struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    /// Where the plot starts, under the legend.
    top: f64,
    height: f64,
}

impl Frame {
    fn plot_w(&self) -> f64 {
        WIDTH - LEFT - RIGHT
    }
    fn plot_h(&self) -> f64 {
        self.height - self.top - BOTTOM
    }
    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0) * self.plot_w()
    }
    fn py(&self, y: f64) -> f64 {
        self.top + self.plot_h() - ((y - self.y0) / (self.y1 - self.y0)) * self.plot_h()
    }
    /// [`Frame::py`] kept inside the plot.
    fn py_clamped(&self, y: f64) -> f64 {
        self.py(y.clamp(self.y0, self.y1))
    }
}

fn x_axis(svg: &mut String, f: &Frame, label: &str) {
    let base = f.top + f.plot_h();
    let _ = write!(
        svg,
        r##"<line x1="{LEFT:.1}" y1="{base:.1}" x2="{:.1}" y2="{base:.1}" stroke="#444"/>"##,
        LEFT + f.plot_w()
    );
    let ticks = nice_ticks(f.x0, f.x1, 8);
    let step = if ticks.len() > 1 {
        ticks[1] - ticks[0]
    } else {
        1.0
    };
    for t in ticks {
        let x = f.px(t);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{base:.1}" x2="{x:.1}" y2="{:.1}" stroke="#444"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            base + 4.0,
            base + 16.0,
            tick_label(t, step)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="axis-label">{}</text>"#,
        LEFT + f.plot_w() / 2.0,
        base + 32.0,
        escape(label)
    );
}

fn y_axis(svg: &mut String, f: &Frame, label: &str) {
    let _ = write!(
        svg,
        r##"<line x1="{LEFT:.1}" y1="{:.1}" x2="{LEFT:.1}" y2="{:.1}" stroke="#444"/>"##,
        f.top,
        f.top + f.plot_h()
    );
    let ticks = nice_ticks(f.y0, f.y1, 5);
    let step = if ticks.len() > 1 {
        ticks[1] - ticks[0]
    } else {
        1.0
    };
    for t in ticks {
        let y = f.py(t);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + f.plot_w(),
            LEFT - 6.0,
            y + 4.0,
            tick_label(t, step)
        );
    }
    let (cx, cy) = (14.0, f.top + f.plot_h() / 2.0);
    let _ = write!(
        svg,
        r#"<text x="{cx:.1}" y="{cy:.1}" transform="rotate(-90 {cx:.1} {cy:.1})" text-anchor="middle" class="axis-label">{}</text>"#,
        escape(label)
    );
}

/// Horizontal room one event label takes, in pixels: a label closer than this to the one
/// before it goes one row lower, so labels of events at (about) the same time do not overlap.
const LABEL_ROOM: f64 = 16.0;
const LABEL_ROW: f64 = 11.0;

fn markers(svg: &mut String, f: &Frame, markers: &[Marker]) {
    let mut placed: Vec<(f64, f64)> = Vec::new();
    for m in markers {
        if m.x < f.x0 || m.x > f.x1 {
            continue;
        }
        let x = f.px(m.x);
        // The first row whose labels all lie far enough left or right of this one.
        let mut row = 0.0;
        while placed
            .iter()
            .any(|&(px, prow)| prow == row && (px - x).abs() < LABEL_ROOM)
        {
            row += 1.0;
        }
        placed.push((x, row));
        let _ = write!(
            svg,
            r##"<g class="event"><title>{}</title><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#777" stroke-dasharray="3,3"/><text x="{:.1}" y="{:.1}" class="event-label">{}</text></g>"##,
            escape(&format!("event {} at {} s: {}", m.number, m.x, m.label)),
            f.top,
            f.top + f.plot_h(),
            x + 3.0,
            f.top + 10.0 + row * LABEL_ROW,
            m.number
        );
    }
}

/// What a legend entry shows: a line (solid or dashed) or an area's swatch.
enum Key<'a> {
    Line {
        label: &'a str,
        color: &'a str,
        dashed: bool,
    },
    Area {
        label: &'a str,
        color: &'a str,
    },
}

impl Key<'_> {
    fn label(&self) -> &str {
        match self {
            Key::Line { label, .. } | Key::Area { label, .. } => label,
        }
    }
}

fn line_keys(series: &[Series]) -> impl Iterator<Item = Key<'_>> {
    series.iter().map(|s| Key::Line {
        label: &s.label,
        color: s.color,
        dashed: s.dashed,
    })
}

/// Height of a legend row.
const LEGEND_ROW: f64 = 15.0;
/// The width a legend label's character takes, in pixels: the widest the charts' sans-serif
/// font draws on average (DejaVu Sans at 13 px, Chromium's default on Debian), so labels in a
/// row never run into the next key.
const LEGEND_CHAR: f64 = 8.0;

/// The legend drawn left to right from the top left, a new row before an entry that would
/// pass the right edge; returns its SVG and its rows.
fn legend(keys: &[Key]) -> (String, usize) {
    let mut svg = String::new();
    let (mut x, mut row) = (LEFT, 0usize);
    for key in keys {
        let width = 27.0 + LEGEND_CHAR * key.label().chars().count() as f64 + 18.0;
        if x > LEFT && x + width - 18.0 > WIDTH - RIGHT {
            x = LEFT;
            row += 1;
        }
        let y = 12.0 + row as f64 * LEGEND_ROW;
        match key {
            Key::Line { color, dashed, .. } => {
                let dash = if *dashed {
                    r#" stroke-dasharray="6,3""#
                } else {
                    ""
                };
                let _ = write!(
                    svg,
                    r#"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{color}" stroke-width="2.5"{dash}/>"#,
                    x + 22.0
                );
            }
            Key::Area { color, .. } => {
                let _ = write!(
                    svg,
                    r#"<rect x="{x:.1}" y="{:.1}" width="22" height="10" fill="{color}" fill-opacity="0.75"/>"#,
                    y - 5.0
                );
            }
        }
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            x + 27.0,
            y + 4.0,
            escape(key.label())
        );
        x += width;
    }
    (svg, row + 1)
}

/// The top of y's range for data up to `y_max`: a round number 5% or more above it.
fn y_top(y_max: f64) -> f64 {
    if y_max > 0.0 {
        let step = nice_step(y_max * 1.05 / 5.0);
        (y_max * 1.05 / step).ceil() * step
    } else {
        1.0
    }
}

/// A chart's frame over `y_range` (from zero to a round top over `y_max` when `None`) under
/// a legend of `rows` rows, and the SVG's opening tag.
fn open(
    x_range: (f64, f64),
    y_max: f64,
    y_range: Option<(f64, f64)>,
    height: f64,
    rows: usize,
) -> (Frame, String) {
    let (x0, x1) = x_span(x_range);
    let (y0, y1) = match y_range {
        Some((lo, hi)) if lo.is_finite() && hi.is_finite() && hi > lo => (lo, hi),
        _ => (0.0, y_top(y_max)),
    };
    let extra = (rows.max(1) - 1) as f64 * LEGEND_ROW;
    let height = height + extra;
    let f = Frame {
        x0,
        x1,
        y0,
        y1,
        top: TOP + extra,
        height,
    };
    let svg = format!(
        r#"<svg class="chart" width="{WIDTH:.0}" height="{height:.0}" viewBox="0 0 {WIDTH:.0} {height:.0}" role="img">"#
    );
    (f, svg)
}

/// A polyline through `points`, skipping any that is not finite.
fn polyline(svg: &mut String, f: &Frame, s: &Series) {
    let style = if s.dashed {
        r#" stroke-width="1.3" stroke-dasharray="6,3""#
    } else {
        r#" stroke-width="2.4" stroke-opacity="0.8""#
    };
    let _ = write!(
        svg,
        r#"<polyline fill="none" stroke="{}"{style} points=""#,
        s.color
    );
    let mut last = None;
    for &(x, y) in &s.points {
        if !(x.is_finite() && y.is_finite()) {
            continue;
        }
        if last.is_some() {
            svg.push(' ');
        }
        last = Some((x, y));
        let _ = write!(svg, "{:.1},{:.1}", f.px(x), f.py_clamped(y));
    }
    // The line's last point in its tooltip: what a reader checks a chart against.
    match last {
        Some((x, y)) => {
            let _ = write!(
                svg,
                r#""><title>{}: last {y:.1} at {x:.1}</title></polyline>"#,
                escape(&s.label)
            );
        }
        None => svg.push_str(r#""/>"#),
    }
}

/// A dot on each finite point of `s`, its value in a tooltip.
fn dots(svg: &mut String, f: &Frame, s: &Series) {
    for (x, y) in &s.points {
        if !(x.is_finite() && y.is_finite()) {
            continue;
        }
        let _ = write!(
            svg,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}"><title>{}</title></circle>"#,
            f.px(*x),
            f.py_clamped(*y),
            s.color,
            escape(&format!("{}: {x}, {y:.1}", s.label))
        );
    }
}

/// A usable x range: finite and not empty.
fn x_span((x0, x1): (f64, f64)) -> (f64, f64) {
    let x0 = if x0.is_finite() { x0 } else { 0.0 };
    if x1.is_finite() && x1 > x0 {
        (x0, x1)
    } else {
        (x0, x0 + 1.0)
    }
}

/// An SVG line chart.
pub fn line_chart(c: &LineChart) -> String {
    let y_max = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    let keys: Vec<Key> = line_keys(&c.series).collect();
    let (legend, rows) = legend(&keys);
    let (f, mut svg) = open(c.x_range, y_max, c.y_range, c.height, rows);
    y_axis(&mut svg, &f, c.y_label);
    x_axis(&mut svg, &f, c.x_label);
    markers(&mut svg, &f, c.markers);
    // Solid series first, wider and a little transparent, then the dashed ones on top and
    // thinner: a dashed target over the allocation it equals leaves both readable.
    let solid = c.series.iter().filter(|s| !s.dashed);
    let dashed = c.series.iter().filter(|s| s.dashed);
    for s in solid.chain(dashed) {
        polyline(&mut svg, &f, s);
    }
    if c.dots {
        for s in c.series.iter().filter(|s| !s.dashed) {
            dots(&mut svg, &f, s);
        }
    }
    svg.push_str(&legend);
    svg.push_str("</svg>");
    svg
}

/// An SVG chart of stacked areas with lines over them. Values that are not finite count as
/// zero in the stack.
pub fn stacked_chart(c: &StackedChart) -> String {
    let n = c.x.len();
    // The running sums: tops[i][j] is the top of area i at x[j].
    let mut tops: Vec<Vec<f64>> = Vec::with_capacity(c.areas.len());
    for area in &c.areas {
        let below = tops.last();
        let top: Vec<f64> = (0..n)
            .map(|j| {
                let v = area.values.get(j).copied().filter(|v| v.is_finite());
                below.map_or(0.0, |b| b[j]) + v.unwrap_or(0.0)
            })
            .collect();
        tops.push(top);
    }
    let y_max = tops
        .last()
        .into_iter()
        .flatten()
        .copied()
        .chain(c.lines.iter().flat_map(|s| s.points.iter().map(|p| p.1)))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    let keys: Vec<Key> = c
        .areas
        .iter()
        .map(|a| Key::Area {
            label: &a.label,
            color: a.color,
        })
        .chain(line_keys(&c.lines))
        .collect();
    let (legend, rows) = legend(&keys);
    let (f, mut svg) = open(c.x_range, y_max, None, c.height, rows);
    y_axis(&mut svg, &f, c.y_label);
    x_axis(&mut svg, &f, "time (s)");
    let x: Vec<f64> = c.x.iter().map(|x| f.px(*x)).collect();
    for (i, area) in c.areas.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<polygon fill="{}" fill-opacity="0.75" stroke="none" points=""#,
            area.color
        );
        for j in 0..n {
            if j > 0 {
                svg.push(' ');
            }
            let _ = write!(svg, "{:.1},{:.1}", x[j], f.py(tops[i][j]));
        }
        for j in (0..n).rev() {
            let bottom = if i == 0 { 0.0 } else { tops[i - 1][j] };
            let _ = write!(svg, " {:.1},{:.1}", x[j], f.py(bottom));
        }
        svg.push_str(r#""/>"#);
    }
    markers(&mut svg, &f, c.markers);
    for s in &c.lines {
        polyline(&mut svg, &f, s);
    }
    svg.push_str(&legend);
    svg.push_str("</svg>");
    svg
}

/// The color of a reclamation state in the band.
pub fn state_color(state: ReclamationState) -> &'static str {
    match state {
        ReclamationState::High => "#4caf50",
        ReclamationState::Soft => "#ffc107",
        ReclamationState::Hard => "#ff7f0e",
        ReclamationState::Low => "#d62728",
    }
}

/// A band colored by the reclamation state over time: `runs` are `(start, state)`, starts
/// increasing, each lasting until the next starts and the last until `end`.
pub fn state_band(
    runs: &[(f64, ReclamationState)],
    end: f64,
    x_range: (f64, f64),
    x_label: &str,
    event_markers: &[Marker],
) -> String {
    let height = TOP + 36.0 + BOTTOM;
    let (x0, x1) = x_span(x_range);
    let f = Frame {
        x0,
        x1,
        y0: 0.0,
        y1: 1.0,
        top: TOP,
        height,
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart" width="{WIDTH:.0}" height="{height:.0}" viewBox="0 0 {WIDTH:.0} {height:.0}" role="img">"#
    );
    // Equal neighbours drawn as one.
    let mut i = 0;
    while i < runs.len() {
        let (start, state) = runs[i];
        let mut j = i + 1;
        while j < runs.len() && runs[j].1 == state {
            j += 1;
        }
        let stop = runs.get(j).map_or(end, |r| r.0).min(x1);
        let (a, b) = (f.px(start.max(x0)), f.px(stop));
        let _ = write!(
            svg,
            r#"<rect x="{a:.1}" y="{TOP:.1}" width="{:.1}" height="36" fill="{}"><title>{} from {} s to {} s</title></rect>"#,
            (b - a).max(0.5),
            state_color(state),
            state,
            start,
            stop
        );
        i = j;
    }
    x_axis(&mut svg, &f, x_label);
    markers(&mut svg, &f, event_markers);
    let mut x = LEFT;
    for s in ReclamationState::ALL {
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="4" width="14" height="12" fill="{}"/><text x="{:.1}" y="15">{s}</text>"#,
            state_color(s),
            x + 18.0
        );
        x += 70.0;
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_replaces_markup_characters() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn nice_ticks_are_round_numbers_inside_the_range() {
        let expected: Vec<f64> = (0..=6).map(|i| i as f64 * 200.0).collect();
        assert_eq!(nice_ticks(0.0, 1200.0, 8), expected);
        let t = nice_ticks(0.0, 1.0, 5);
        assert_eq!(t.len(), 6);
        assert!((t[3] - 0.6).abs() < 1e-9 && (t[5] - 1.0).abs() < 1e-9);
        assert_eq!(nice_ticks(5.0, 5.0, 5), vec![5.0]);
    }

    #[test]
    fn a_y_range_puts_its_ends_at_the_plot_s_edges_and_clamps_points_outside_it() {
        let c = LineChart {
            y_label: "%",
            x_label: "N",
            x_range: (0.0, 10.0),
            y_range: Some((90.0, 100.0)),
            dots: true,
            height: 200.0,
            series: vec![Series {
                label: "one trial".into(),
                color: "#2ca02c",
                dashed: false,
                points: vec![(2.0, 90.0), (4.0, 100.0), (6.0, 50.0)],
            }],
            markers: &[],
        };
        let svg = line_chart(&c);
        let (bottom, top) = (200.0 - BOTTOM, TOP);
        let circles: Vec<f64> = svg
            .split("<circle ")
            .skip(1)
            .map(|c| {
                let cy = c.split("cy=\"").nth(1).unwrap();
                cy[..cy.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(circles, vec![bottom, top, bottom], "{svg}");
        let y_tick = |v: &str| format!("text-anchor=\"end\">{v}<");
        assert!(
            svg.contains(&y_tick("90")) && svg.contains(&y_tick("100")),
            "ticks: {svg}"
        );
        assert!(
            !svg.contains(&y_tick("0")),
            "no tick below the range: {svg}"
        );
        let plain = line_chart(&LineChart {
            y_range: None,
            dots: false,
            ..c
        });
        assert!(
            !plain.contains("<circle") && plain.contains(&y_tick("0")),
            "{plain}"
        );
    }

    #[test]
    fn line_chart_draws_a_polyline_per_series_and_a_legend() {
        let c = LineChart {
            y_label: "MB",
            x_label: "time (s)",
            x_range: (0.0, 10.0),
            y_range: None,
            dots: false,
            height: 200.0,
            series: vec![
                Series {
                    label: "allocated".into(),
                    color: "#1f77b4",
                    dashed: false,
                    points: vec![(0.0, 1.0), (10.0, 2.0)],
                },
                Series {
                    label: "<ws>".into(),
                    color: "#000",
                    dashed: true,
                    points: vec![(0.0, 2.0)],
                },
            ],
            markers: &[Marker {
                x: 5.0,
                number: 1,
                label: "tax & more".into(),
            }],
        };
        let svg = line_chart(&c);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("allocated") && svg.contains("&lt;ws&gt;"));
        assert!(svg.contains("tax &amp; more"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    }

    /// The y of each event label in `svg`, in order.
    fn label_ys(svg: &str) -> Vec<f64> {
        svg.match_indices("<text x=\"")
            .filter_map(|(at, _)| {
                let rest = &svg[at..];
                let tag = &rest[..rest.find('>')?];
                tag.contains("event-label").then(|| {
                    let y = &tag[tag.find("y=\"")? + 3..];
                    y[..y.find('"')?].parse().ok()
                })?
            })
            .collect()
    }

    #[test]
    fn labels_of_events_at_the_same_time_go_one_row_lower_each() {
        let marker = |x: f64, number: usize| Marker {
            x,
            number,
            label: format!("e{number}"),
        };
        let markers = [
            marker(5.0, 1),
            marker(5.0, 2),
            marker(5.0, 3),
            marker(9.0, 4),
        ];
        let c = LineChart {
            y_label: "MB",
            x_label: "time (s)",
            x_range: (0.0, 10.0),
            y_range: None,
            dots: false,
            height: 200.0,
            series: Vec::new(),
            markers: &markers,
        };
        let ys = label_ys(&line_chart(&c));
        assert_eq!(ys.len(), 4, "{ys:?}");
        assert!(ys[0] < ys[1] && ys[1] < ys[2], "{ys:?}");
        // An event far from the others keeps the first row.
        assert_eq!(ys[3], ys[0]);
    }

    #[test]
    fn dashed_series_are_drawn_over_the_solid_ones() {
        let c = LineChart {
            y_label: "MB",
            x_label: "time (s)",
            x_range: (0.0, 10.0),
            y_range: None,
            dots: false,
            height: 200.0,
            series: vec![
                Series {
                    label: "target".into(),
                    color: "#111",
                    dashed: true,
                    points: vec![(0.0, 2.0), (10.0, 2.0)],
                },
                Series {
                    label: "allocated".into(),
                    color: "#222",
                    dashed: false,
                    points: vec![(0.0, 2.0), (10.0, 2.0)],
                },
            ],
            markers: &[],
        };
        let svg = line_chart(&c);
        let solid = svg.find("<polyline fill=\"none\" stroke=\"#222\"").unwrap();
        let dashed = svg.find("<polyline fill=\"none\" stroke=\"#111\"").unwrap();
        assert!(solid < dashed, "the dashed line must come later, on top");
    }

    fn series(label: &str, color: &'static str, dashed: bool) -> Series {
        Series {
            label: label.into(),
            color,
            dashed,
            points: vec![(0.0, 1.0), (10.0, 2.0)],
        }
    }

    /// The `height` attribute of the chart's `<svg>`.
    fn svg_height(svg: &str) -> f64 {
        let h = &svg[svg.find("height=\"").unwrap() + 8..];
        h[..h.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn a_long_legend_wraps_into_rows_and_the_chart_grows_to_keep_its_plot() {
        let short = line_chart(&LineChart {
            y_label: "MB",
            x_label: "time (s)",
            x_range: (0.0, 10.0),
            y_range: None,
            dots: false,
            height: 200.0,
            series: vec![series("a", "#111", false)],
            markers: &[],
        });
        let many: Vec<Series> = (0..8)
            .map(|i| series(&format!("tenant-number-{i} allocated"), "#222", i % 2 == 1))
            .collect();
        let long = line_chart(&LineChart {
            y_label: "MB",
            x_label: "time (s)",
            x_range: (0.0, 10.0),
            y_range: None,
            dots: false,
            height: 200.0,
            series: many,
            markers: &[],
        });
        assert_eq!(svg_height(&short), 200.0);
        // 8 entries of about 230 px in 740 px: 3 to a row, 3 rows.
        assert_eq!(svg_height(&long), 200.0 + 2.0 * LEGEND_ROW);
        // The y of each legend label.
        let text_ys: Vec<&str> = long
            .split("<text ")
            .skip(1)
            .filter(|t| t[t.find('>').unwrap()..].starts_with(">tenant-number"))
            .map(|t| {
                let y = &t[t.find("y=\"").unwrap() + 3..];
                &y[..y.find('"').unwrap()]
            })
            .collect();
        assert_eq!(text_ys.len(), 8);
        let mut rows = text_ys.clone();
        rows.dedup();
        assert_eq!(rows.len(), 3, "{text_ys:?}");
    }

    #[test]
    fn stacked_areas_sit_on_each_other_under_the_lines() {
        let c = StackedChart {
            y_label: "MB",
            x_range: (0.0, 2.0),
            height: 200.0,
            x: vec![0.0, 1.0, 2.0],
            areas: vec![
                Area {
                    label: "allocated".into(),
                    color: "#1f77b4",
                    values: vec![10.0, 10.0, 10.0],
                },
                Area {
                    label: "balloon".into(),
                    color: "#ff7f0e",
                    values: vec![0.0, 5.0, f64::NAN],
                },
            ],
            lines: vec![Series {
                label: "active".into(),
                color: "#2ca02c",
                dashed: true,
                points: vec![(0.0, 4.0), (2.0, 4.0)],
            }],
            markers: &[],
        };
        let svg = stacked_chart(&c);
        assert_eq!(svg.matches("<polygon").count(), 2);
        let polygon = |n: usize| {
            let p = svg.split("<polygon").nth(n).unwrap();
            let pts = &p[p.find("points=\"").unwrap() + 8..];
            pts[..pts.find('"').unwrap()]
                .split(' ')
                .map(|xy| xy.split(',').nth(1).unwrap().parse::<f64>().unwrap())
                .collect::<Vec<f64>>()
        };
        // The balloon's bottom edge (right to left) is the allocation's top edge (left to
        // right) reversed; a value that is not a number stacks as zero.
        let (low, high) = (polygon(1), polygon(2));
        let mut top_of_low = low[..3].to_vec();
        top_of_low.reverse();
        assert_eq!(high[3..], top_of_low[..]);
        assert_eq!(high[2], low[2]);
        assert!(
            high[1] < low[1],
            "5 MB of balloon above the allocation at x = 1"
        );
        let line = svg.find("<polyline").unwrap();
        assert!(
            svg.rfind("<polygon").unwrap() < line,
            "lines over the areas"
        );
        assert_eq!(
            svg.matches("<rect").count(),
            2,
            "a swatch in the legend per area"
        );
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn charts_of_empty_or_flat_data_do_not_divide_by_zero() {
        let c = LineChart {
            y_label: "MB",
            x_label: "time (s)",
            x_range: (0.0, 0.0),
            y_range: None,
            dots: false,
            height: 200.0,
            series: vec![],
            markers: &[],
        };
        assert!(!line_chart(&c).contains("NaN"));
        let stacked = StackedChart {
            y_label: "MB",
            x_range: (0.0, 0.0),
            height: 200.0,
            x: vec![],
            areas: vec![Area {
                label: "allocated".into(),
                color: "#000",
                values: vec![],
            }],
            lines: vec![],
            markers: &[],
        };
        assert!(!stacked_chart(&stacked).contains("NaN"));
        assert!(!state_band(&[], 0.0, (0.0, 0.0), "time (s)", &[]).contains("NaN"));
    }

    #[test]
    fn state_band_draws_one_rect_per_run_of_equal_state() {
        let runs = [
            (0.0, ReclamationState::High),
            (1.0, ReclamationState::High),
            (2.0, ReclamationState::Soft),
            (3.0, ReclamationState::High),
        ];
        let svg = state_band(&runs, 4.0, (0.0, 4.0), "time (s)", &[]);
        // 3 runs + 4 legend swatches.
        assert_eq!(svg.matches("<rect").count(), 7);
        assert!(svg.contains("high from 0 s to 2 s"));
        assert!(svg.contains("soft from 2 s to 3 s"));
        assert!(svg.contains("high from 3 s to 4 s"));
    }
}
