//! index.html, and its text for stdout: a scenario's variants side by side on the scenario's own axes, its headline figure per variant and tenant in each window and over the run, so a paper's comparison (ALB Fig. 1's three set-ups, TWS Table 1's estimators) reads from one page; each variant's report.html is a link away.
//!
//! Without a headline the variants are compared on each tenant's mean allocation over the
//! run. Self-contained like report.html (inline CSS and SVG, no scripts): the charts, one per
//! tenant shown with a line per variant, are `memtide-chart`'s.

use super::headline::HeadlineSummary;
use super::summary::Summary;
use memtide_chart::{self as chart, escape, LineChart, Series};
use std::fmt::Write;
use std::path::Path;

/// The variants' colours, in order (a fifth and later reuse them dashed).
const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// One variant's row of a comparison: its name and, per tenant shown, its means.
struct Compared<'a> {
    variant: &'a str,
    summary: &'a Summary,
}

impl<'a> Compared<'a> {
    fn headline(&self) -> Option<&'a HeadlineSummary> {
        self.summary.headline.as_ref()
    }
}

/// A row of the comparison: variant, tenant and a cell per column.
type Row = (String, String, Vec<String>);

/// The comparison's column headings and, per variant and tenant, its cells.
fn table(variants: &[Compared]) -> (Vec<String>, Vec<Row>) {
    let cell = |m: Option<f64>| m.map_or("-".to_string(), |v| format!("{v:.1}"));
    let first = &variants[0];
    match first.headline() {
        Some(h) => {
            let heads = (0..h.windows.len().max(1))
                .map(|i| h.window_label(i))
                .collect();
            let rows = variants
                .iter()
                .flat_map(|v| {
                    v.headline().into_iter().flat_map(move |h| {
                        h.tenants.iter().map(move |t| {
                            (
                                v.variant.to_string(),
                                t.tenant.clone(),
                                t.means.iter().map(|&m| cell(m)).collect(),
                            )
                        })
                    })
                })
                .collect();
            (heads, rows)
        }
        None => {
            let rows = variants
                .iter()
                .flat_map(|v| {
                    v.summary.tenants.iter().map(move |t| {
                        (
                            v.variant.to_string(),
                            t.name.clone(),
                            vec![cell(t.figures.as_ref().map(|f| f.mean_allocated_mb))],
                        )
                    })
                })
                .collect();
            (vec!["whole run".to_string()], rows)
        }
    }
}

/// What the comparison's figure is: the headline's heading, or mean allocation.
fn heading(variants: &[Compared]) -> String {
    variants[0]
        .headline()
        .map_or_else(|| "mean allocated MB".to_string(), HeadlineSummary::heading)
}

/// The comparison as text lines for stdout.
pub fn render_text(scenario: &str, runs: &[(String, Summary)]) -> String {
    let variants = compared(runs);
    if variants.is_empty() {
        return String::new();
    }
    let (heads, rows) = table(&variants);
    let mut out = format!("== {scenario}: the variants compared");
    if let Some(h) = variants[0].headline() {
        let _ = write!(out, ": {}", h.text);
    }
    out.push('\n');
    let mut cells: Vec<Vec<String>> = vec![std::iter::once(heading(&variants))
        .chain(std::iter::once(String::new()))
        .chain(heads)
        .collect()];
    cells.extend(
        rows.into_iter()
            .map(|(v, t, c)| [v, t].into_iter().chain(c).collect()),
    );
    super::text::indented_table(&mut out, &cells);
    out
}

fn compared(runs: &[(String, Summary)]) -> Vec<Compared<'_>> {
    runs.iter()
        .map(|(variant, summary)| Compared { variant, summary })
        .collect()
}

/// index.html for `runs` (variant name and summary, in the scenario's order).
pub fn render(scenario: &str, description: &str, runs: &[(String, Summary)]) -> String {
    let variants = compared(runs);
    let mut html = String::with_capacity(32 * 1024);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>memtide: {0} (variants)</title>\n<style>{1}</style>\n</head>\n<body>\n<h1>{0}: the variants compared</h1>\n",
        escape(scenario),
        super::report::STYLE
    );
    if !description.is_empty() {
        let _ = writeln!(html, "<p>{}</p>", escape(description));
    }
    html.push_str("<p class=\"meta\">Each variant's own report: ");
    for (i, (variant, _)) in runs.iter().enumerate() {
        if i > 0 {
            html.push_str(", ");
        }
        let v = escape(variant);
        let _ = write!(html, "<a href=\"{v}/report.html\">{v}</a>");
    }
    html.push_str("</p>\n");
    if variants.is_empty() {
        html.push_str("</body>\n</html>\n");
        return html;
    }
    if let Some(h) = variants[0].headline() {
        let _ = writeln!(html, "<h2>Headline</h2>\n<p><b>{}</b></p>", escape(&h.text));
    } else {
        html.push_str("<h2>Compared</h2>\n");
    }
    let (heads, rows) = table(&variants);
    let _ = write!(
        html,
        "<table><tr><th class=\"l\">variant</th><th class=\"l\">tenant</th>"
    );
    for h in &heads {
        let _ = write!(
            html,
            "<th>{}: {}</th>",
            escape(&heading(&variants)),
            escape(h)
        );
    }
    html.push_str("</tr>\n");
    for (variant, tenant, cells) in &rows {
        let _ = write!(
            html,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td>",
            escape(variant),
            escape(tenant)
        );
        for c in cells {
            let _ = write!(html, "<td>{c}</td>");
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n");
    charts(&mut html, &variants);
    html.push_str("</body>\n</html>\n");
    html
}

/// A chart per tenant the headline shows, a line per variant, over the run.
fn charts(html: &mut String, variants: &[Compared]) {
    let Some(first) = variants[0].headline() else {
        return;
    };
    let x_end = variants
        .iter()
        .map(|v| v.summary.duration_s)
        .fold(1.0, f64::max);
    for t in &first.tenants {
        let series: Vec<Series> = variants
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let h = v.headline()?;
                // A variant whose headline lacks the tenant draws no line for it.
                let k = h.tenants.iter().position(|r| r.tenant == t.tenant)?;
                Some(Series {
                    label: v.variant.to_string(),
                    color: COLOURS[i % COLOURS.len()],
                    dashed: i >= COLOURS.len(),
                    points: h.series.get(k)?.clone(),
                })
            })
            .collect();
        let _ = writeln!(
            html,
            "<h3>{}: {} over the run</h3>",
            escape(&t.tenant),
            escape(&first.figure.replace('_', " "))
        );
        html.push_str(&chart::line_chart(&LineChart {
            y_label: first.unit,
            x_label: "time (s)",
            x_range: (0.0, x_end),
            y_range: None,
            dots: false,
            height: 240.0,
            series,
            markers: &[],
        }));
        html.push('\n');
    }
    if !first.windows.is_empty() {
        html.push_str("<p class=\"note\">The table's columns are the means over the windows the scenario's [headline] names; the charts show the whole run.</p>\n");
    }
}

/// Writes index.html for `runs` into `dir`.
pub fn write(
    dir: &Path,
    scenario: &str,
    description: &str,
    runs: &[(String, Summary)],
) -> std::io::Result<()> {
    let path = dir.join("index.html");
    std::fs::write(&path, render(scenario, description, runs))
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::summary::summarize;
    use crate::output::test_record::record;
    use memtide_scenario::{Figure, Headline};
    use std::time::Duration;

    fn runs(headline: bool) -> Vec<(String, Summary)> {
        ["configured", "squeezed"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut r = record();
                if headline {
                    r.run.headline = Some(Headline {
                        text: "query time per set-up".into(),
                        figure: Figure::Latency,
                        windows: vec![(Duration::from_secs(1), Duration::from_secs(4))],
                        tenants: vec!["a".into()],
                    });
                }
                for t in &mut r.ticks {
                    for row in &mut t.rows {
                        row.latency_ms = row.latency_ms.map(|l| l * (i + 1) as f64);
                    }
                }
                (name.to_string(), summarize(&r))
            })
            .collect()
    }

    #[test]
    fn the_index_compares_every_variant_on_the_headline_s_figure() {
        let runs = runs(true);
        let html = render("alb-fig1", "three set-ups", &runs);
        assert!(html.contains("<b>query time per set-up</b>"));
        assert!(html.contains("<a href=\"configured/report.html\">configured</a>"));
        assert!(html.contains("mean latency ms: 1-4 s"));
        assert!(
            html.contains("<td class=\"l\">squeezed</td><td class=\"l\">a</td><td>4.0</td>"),
            "{html}"
        );
        assert!(html.contains("<td class=\"l\">configured</td><td class=\"l\">a</td><td>2.0</td>"));
        // One chart for the one tenant shown, a line per variant.
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 1);
        assert_eq!(html.matches("<polyline").count(), 2);
        let text = render_text("alb-fig1", &runs);
        assert!(text.starts_with("== alb-fig1: the variants compared: query time per set-up\n"));
        assert!(
            text.lines()
                .any(|l| l.contains("squeezed") && l.ends_with("4.0")),
            "{text}"
        );
    }

    #[test]
    fn without_a_headline_the_variants_are_compared_on_allocation() {
        let html = render("s", "", &runs(false));
        assert!(html.contains("mean allocated MB: whole run"));
        assert_eq!(html.matches("<svg").count(), 0);
        assert!(render_text("s", &runs(false)).contains("mean allocated MB"));
    }
}
