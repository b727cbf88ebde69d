//! A heat map as inline SVG: a grid of cells colored by value on a sequential scale with its legend, ticks on both axes, a path drawn through cells (a search's steps) and labelled marks on cells (where each scheme landed).

use crate::{escape, nice_ticks, tick_label};
use std::fmt::Write;

/// A path through cells, `(column, row)` indices, drawn as a line with a dot at each cell.
pub struct CellPath {
    pub label: String,
    pub color: &'static str,
    pub cells: Vec<(usize, usize)>,
}

/// A labelled mark on one cell.
pub struct CellMark {
    pub label: String,
    pub color: &'static str,
    pub cell: (usize, usize),
}

/// A heat map: `values[row * x.len() + column]` at (`x[column]`, `y[row]`).
pub struct HeatMap<'a> {
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// The legend's label (what the colors mean).
    pub value_label: &'a str,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub values: Vec<f64>,
    /// Colors by the logarithm of the value (for values spanning orders of magnitude, such as
    /// latencies from memory to disk); values must then be positive.
    pub log_scale: bool,
    /// Cells whose value is at most this are outlined (a target met), when given.
    pub outline_at_most: Option<f64>,
    pub paths: Vec<CellPath>,
    pub marks: Vec<CellMark>,
}

const SIZE: f64 = 360.0;
const LEFT: f64 = 64.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 42.0;
const LEGEND: f64 = 150.0;

/// Low values dark blue, high values light yellow (viridis' ends and middle, interpolated).
fn color(t: f64) -> String {
    const STOPS: [(f64, [f64; 3]); 5] = [
        (0.0, [68.0, 1.0, 84.0]),
        (0.25, [59.0, 82.0, 139.0]),
        (0.5, [33.0, 145.0, 140.0]),
        (0.75, [94.0, 201.0, 98.0]),
        (1.0, [253.0, 231.0, 37.0]),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        1.0
    };
    let i = STOPS.iter().rposition(|s| s.0 <= t).unwrap_or(0).min(3);
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let f = (t - a.0) / (b.0 - a.0);
    let c: Vec<u8> = (0..3)
        .map(|k| (a.1[k] + (b.1[k] - a.1[k]) * f).round() as u8)
        .collect();
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// Where the cells sit: the grid's columns and rows and each cell's width and height.
#[derive(Clone, Copy)]
struct Grid {
    cols: usize,
    rows: usize,
    cw: f64,
    ch: f64,
}

impl Grid {
    fn of(h: &HeatMap) -> Grid {
        let (cols, rows) = (h.x.len().max(1), h.y.len().max(1));
        Grid {
            cols,
            rows,
            cw: SIZE / cols as f64,
            ch: SIZE / rows as f64,
        }
    }

    /// The x of column `c`'s centre.
    fn cx(self, c: usize) -> f64 {
        LEFT + (c as f64 + 0.5) * self.cw
    }

    /// The y of row `r`'s centre: row 0 at the bottom.
    fn cy(self, r: usize) -> f64 {
        TOP + SIZE - (r as f64 + 0.5) * self.ch
    }

    /// The x of column `c`'s left edge.
    fn left(self, c: usize) -> f64 {
        LEFT + c as f64 * self.cw
    }

    /// The y of row `r`'s top edge.
    fn top(self, r: usize) -> f64 {
        TOP + SIZE - (r as f64 + 1.0) * self.ch
    }
}

/// The color scale: the finite values' range, linear or logarithmic.
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    span: f64,
}

impl Scale {
    /// The scale over `h`'s finite values; logarithmic when asked for and every value is
    /// positive.
    fn of(h: &HeatMap) -> Scale {
        let (lo, hi) = h
            .values
            .iter()
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, u), &v| {
                (l.min(v), u.max(v))
            });
        let log = h.log_scale && lo > 0.0;
        let mut scale = Scale {
            lo,
            hi,
            log,
            span: 1.0,
        };
        if hi > lo {
            scale.span = scale.scaled(hi) - scale.scaled(lo);
        }
        scale
    }

    fn scaled(&self, v: f64) -> f64 {
        if self.log {
            v.ln()
        } else {
            v
        }
    }

    /// The color of value `v`.
    fn shade(&self, v: f64) -> String {
        color((self.scaled(v) - self.scaled(self.lo)) / self.span)
    }
}

/// The heat map as an `<svg>` element.
pub fn heat_map(h: &HeatMap) -> String {
    let grid = Grid::of(h);
    let scale = Scale::of(h);
    let width = LEFT + SIZE + 24.0 + LEGEND;
    let height = TOP + SIZE + BOTTOM;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"chart heat\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\">"
    );
    write_cells(&mut s, h, grid, &scale);
    if let Some(limit) = h.outline_at_most {
        write_outlines(&mut s, h, grid, limit);
    }
    write_axes(&mut s, h, grid);
    write_paths(&mut s, h, grid);
    write_marks(&mut s, h, grid);
    write_legend(&mut s, h, &scale);
    s.push_str("</svg>");
    s
}

/// Every cell, colored by its value, with a tooltip naming its place and value.
fn write_cells(s: &mut String, h: &HeatMap, grid: Grid, scale: &Scale) {
    for r in 0..grid.rows {
        for c in 0..grid.cols {
            let v = h.values.get(r * grid.cols + c).copied().unwrap_or(f64::NAN);
            let _ = write!(
                s,
                "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\"><title>{} {}, {} {}: {:.0}</title></rect>",
                grid.left(c),
                grid.top(r),
                grid.cw + 0.3,
                grid.ch + 0.3,
                scale.shade(v),
                escape(h.x_label),
                h.x.get(c).copied().unwrap_or(0.0),
                escape(h.y_label),
                h.y.get(r).copied().unwrap_or(0.0),
                v
            );
        }
    }
}

/// A faint outline on each cell whose value is at most `limit` (a target met).
fn write_outlines(s: &mut String, h: &HeatMap, grid: Grid, limit: f64) {
    for r in 0..grid.rows {
        for c in 0..grid.cols {
            if h.values.get(r * grid.cols + c).is_some_and(|&v| v <= limit) {
                let _ = write!(
                    s,
                    "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"none\" stroke=\"#fff\" stroke-opacity=\"0.35\" stroke-width=\"0.8\"/>",
                    grid.left(c) + 0.5,
                    grid.top(r) + 0.5,
                    grid.cw - 1.0,
                    grid.ch - 1.0
                );
            }
        }
    }
}

/// Where value `v` falls among the cells' `values`, in cells (fractional), by interpolating
/// between the two it lies between; `None` outside them.
fn place(values: &[f64], v: f64) -> Option<f64> {
    let i = values.windows(2).position(|w| w[0] <= v && v <= w[1])?;
    let (a, b) = (values[i], values[i + 1]);
    Some(i as f64 + if b > a { (v - a) / (b - a) } else { 0.0 })
}

/// Both axes: ticks at round values, placed by interpolating the cells' values, and the
/// axes' labels.
fn write_axes(s: &mut String, h: &HeatMap, grid: Grid) {
    for (values, horizontal) in [(&h.x, true), (&h.y, false)] {
        let (Some(&first), Some(&last)) = (values.first(), values.last()) else {
            continue;
        };
        let ticks = nice_ticks(first, last, 5);
        let step = if ticks.len() > 1 {
            ticks[1] - ticks[0]
        } else {
            1.0
        };
        for t in ticks {
            let Some(at) = place(values, t) else { continue };
            if horizontal {
                let x = LEFT + (at + 0.5) * grid.cw;
                let _ = write!(
                    s,
                    "<line x1=\"{x:.1}\" y1=\"{y0:.1}\" x2=\"{x:.1}\" y2=\"{y1:.1}\" stroke=\"#444\"/><text x=\"{x:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\">{}</text>",
                    tick_label(t, step),
                    y0 = TOP + SIZE,
                    y1 = TOP + SIZE + 4.0,
                    ty = TOP + SIZE + 16.0
                );
            } else {
                let y = TOP + SIZE - (at + 0.5) * grid.ch;
                let _ = write!(
                    s,
                    "<line x1=\"{x0:.1}\" y1=\"{y:.1}\" x2=\"{LEFT:.1}\" y2=\"{y:.1}\" stroke=\"#444\"/><text x=\"{tx:.1}\" y=\"{ty:.1}\" text-anchor=\"end\">{}</text>",
                    tick_label(t, step),
                    x0 = LEFT - 4.0,
                    tx = LEFT - 6.0,
                    ty = y + 4.0
                );
            }
        }
    }
    let _ = write!(
        s,
        "<text class=\"axis-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text><text class=\"axis-label\" transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        LEFT + SIZE / 2.0,
        TOP + SIZE + 34.0,
        escape(h.x_label),
        TOP + SIZE / 2.0,
        escape(h.y_label)
    );
}

/// Each path: a line through its cells' centres (when it has two or more) and a dot on each.
fn write_paths(s: &mut String, h: &HeatMap, grid: Grid) {
    for p in &h.paths {
        if p.cells.len() > 1 {
            let points: Vec<String> = p
                .cells
                .iter()
                .map(|&(c, r)| format!("{:.1},{:.1}", grid.cx(c), grid.cy(r)))
                .collect();
            let _ = write!(
                s,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"><title>{}</title></polyline>",
                points.join(" "),
                p.color,
                escape(&p.label)
            );
        }
        for &(c, r) in &p.cells {
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{}\"/>",
                grid.cx(c),
                grid.cy(r),
                p.color
            );
        }
    }
}

/// Each mark: a ring on its cell and its label beside it, kept inside the map.
fn write_marks(s: &mut String, h: &HeatMap, grid: Grid) {
    for m in &h.marks {
        let (x, y) = (grid.cx(m.cell.0), grid.cy(m.cell.1));
        // Labels right of the mark, or left of it in the map's right half, inside the map.
        let (tx, anchor) = if x > LEFT + SIZE / 2.0 {
            (x - 6.0, "end")
        } else {
            (x + 6.0, "start")
        };
        let ty = if y < TOP + 14.0 { y + 14.0 } else { y - 6.0 };
        let _ = write!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" fill=\"{}\" stroke=\"#000\" stroke-width=\"0.3\" font-weight=\"bold\">{}</text>",
            m.color,
            tx,
            ty,
            m.color,
            escape(&m.label)
        );
    }
}

/// The legend right of the map: the color scale from low to high, its ends' values and its
/// label.
fn write_legend(s: &mut String, h: &HeatMap, scale: &Scale) {
    let lx = LEFT + SIZE + 24.0;
    for k in 0..40 {
        let t = k as f64 / 39.0;
        let _ = write!(
            s,
            "<rect x=\"{lx:.1}\" y=\"{:.2}\" width=\"14\" height=\"{:.2}\" fill=\"{}\"/>",
            TOP + SIZE - (k as f64 + 1.0) * SIZE / 40.0,
            SIZE / 40.0 + 0.3,
            color(t)
        );
    }
    let label = |v: f64| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.3}")
        }
    };
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\">{}</text><text x=\"{:.1}\" y=\"{:.1}\">{}</text><text class=\"axis-label\" transform=\"translate({:.1} {:.1}) rotate(-90)\" text-anchor=\"middle\">{}{}</text>",
        lx + 18.0,
        TOP + 10.0,
        label(scale.hi),
        lx + 18.0,
        TOP + SIZE,
        label(scale.lo),
        lx + 60.0,
        TOP + SIZE / 2.0,
        escape(h.value_label),
        if scale.log { " (log scale)" } else { "" }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_colored_low_dark_high_light_and_paths_and_marks_drawn() {
        let svg = heat_map(&HeatMap {
            x_label: "storage (MiB)",
            y_label: "buffer (MiB)",
            value_label: "latency (µs)",
            x: vec![0.0, 512.0, 1024.0],
            y: vec![0.0, 1024.0],
            values: vec![3500.0, 2000.0, 1000.0, 900.0, 500.0, 100.0],
            log_scale: true,
            outline_at_most: Some(500.0),
            paths: vec![CellPath {
                label: "hill climbing".into(),
                color: "#fff",
                cells: vec![(0, 0), (1, 1), (2, 1)],
            }],
            marks: vec![CellMark {
                label: "IDEAL".into(),
                color: "#f00",
                cell: (2, 1),
            }],
        });
        assert_eq!(svg.matches("<title>storage").count(), 6);
        assert!(
            svg.contains(&format!("fill=\"{}\"", color(0.0))),
            "the lowest, darkest"
        );
        assert!(
            svg.contains(&format!("fill=\"{}\"", color(1.0))),
            "the highest, lightest"
        );
        assert_eq!(color(0.0), "#440154");
        assert_eq!(color(1.0), "#fde725");
        assert_eq!(
            svg.matches("stroke-opacity").count(),
            2,
            "two cells within 500"
        );
        assert!(svg.contains("<polyline") && svg.contains(">IDEAL</text>"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    }
}
