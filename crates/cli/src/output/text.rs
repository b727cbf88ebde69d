//! The short plain-text summary `memtide sim` prints on stdout: a table per tenant, the host's time in each state, and refusals.

use super::headline::HeadlineSummary;
use super::summary::Summary;
use memtide_model::ReclamationState;
use std::fmt::Write;

/// Renders the summary as a few lines of text (newline-terminated).
pub fn render(summary: &Summary) -> String {
    let mut out = String::new();
    let variant = summary
        .variant
        .as_deref()
        .map(|v| format!(" [variant {v}]"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "scenario {}{variant}: {} s, seed {}, {} MB machine memory",
        summary.scenario,
        num(summary.duration_s, 0),
        summary.seed,
        num(summary.machine_mb, 0)
    );

    if let Some(h) = &summary.headline {
        headline(&mut out, h);
    }

    // Means over each tenant's whole run, so named; degradation where a baseline ran, the time
    // to converge where the scenario sets a band to converge to.
    let degradation = summary
        .tenants
        .iter()
        .any(|t| t.figures.as_ref().is_some_and(|f| f.degradation.is_some()));
    let converged = summary.convergence.goal;
    let mut header = vec![
        "tenant",
        "estimator",
        "alloc MB",
        "target MB",
        "estimate MB",
        "WS MB",
        "ops/s",
    ];
    if degradation {
        header.push("degradation");
    }
    if converged {
        header.push("converged");
    }
    let _ = writeln!(
        out,
        "each tenant, means over the time it ran{}{}:",
        if degradation {
            "; degradation: throughput lost against the unconstrained baseline run"
        } else {
            ""
        },
        if converged {
            format!(
                "; converged: when allocation and target entered {}-{} x the working set for good",
                num(summary.convergence.low, 2),
                num(summary.convergence.high, 2)
            )
        } else {
            String::new()
        }
    );
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for t in &summary.tenants {
        let mut row = vec![t.name.clone(), t.estimator.clone()];
        match &t.figures {
            Some(f) => {
                row.extend([
                    num(f.mean_allocated_mb, 1),
                    num(f.mean_target_mb, 1),
                    num(f.mean_active_estimate_mb, 1),
                    num(f.mean_working_set_mb, 1),
                    num(f.mean_throughput, 0),
                ]);
                if degradation {
                    row.push(
                        f.degradation
                            .map_or("-".to_string(), |d| format!("{:.1}%", d * 100.0)),
                    );
                }
                if converged {
                    row.push(
                        f.converged_s
                            .map_or("never".to_string(), |c| format!("{} s", num(c, 0))),
                    );
                }
            }
            None => row.extend(["did not run".to_string()]),
        }
        rows.push(row);
    }
    table(&mut out, &rows);

    let h = &summary.host;
    let states: Vec<String> = ReclamationState::ALL
        .iter()
        .map(|s| format!("{s} {} s", num(h.time_in_state_s.get(*s), 0)))
        .collect();
    let _ = writeln!(
        out,
        "host: {}; {} state change(s); free memory mean {} MB, min {} MB",
        states.join(", "),
        h.state_transitions,
        num(h.mean_free_mb, 1),
        num(h.min_free_mb, 1)
    );
    for r in &h.refusals {
        let _ = writeln!(
            out,
            "refused: {} at {} s: {}",
            r.tenant,
            num(r.time_s, 0),
            r.reason
        );
    }
    out
}

/// The headline, then its table: a row per tenant, a column per window.
fn headline(out: &mut String, h: &HeadlineSummary) {
    let _ = writeln!(out, "headline: {}", h.text);
    let columns = h.windows.len().max(1);
    let mut rows: Vec<Vec<String>> = vec![std::iter::once(h.heading())
        .chain(std::iter::once(String::new()))
        .chain((0..columns).map(|i| h.window_label(i)))
        .collect()];
    for t in &h.tenants {
        rows.push(
            [t.tenant.clone(), String::new()]
                .into_iter()
                .chain(
                    t.means
                        .iter()
                        .map(|m| m.map_or("-".to_string(), |v| num(v, 1))),
                )
                .collect(),
        );
    }
    indented_table(out, &rows);
}

/// [`table`], each line indented by two spaces: a table under a heading line.
pub(crate) fn indented_table(out: &mut String, rows: &[Vec<String>]) {
    let mut text = String::new();
    table(&mut text, rows);
    for line in text.lines() {
        let _ = writeln!(out, "  {line}");
    }
}

fn num(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    // No "-0" / "-0.0".
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// Left-aligns the first two columns, right-aligns the rest, two spaces apart.
fn table(out: &mut String, rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter(|r| r.len() > 1 || c == 0)
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = widths[c].saturating_sub(cell.chars().count());
            let last = c + 1 == row.len();
            if c < 2 || last && row.len() < columns {
                line.push_str(cell);
                if !last {
                    line.push_str(&" ".repeat(pad));
                }
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::summary::summarize;
    use crate::output::test_record::record;

    #[test]
    fn render_names_the_scenario_and_every_tenant() {
        let text = render(&summarize(&record()));
        assert!(
            text.starts_with("scenario hand-made [variant v1]: 4 s, seed 3"),
            "{text}"
        );
        for name in ["a", "b, <web>", "c"] {
            assert!(
                text.lines().any(|l| l.starts_with(name)),
                "{name} missing:\n{text}"
            );
        }
        assert!(text.contains("did not run"));
        assert!(text.contains("25.0%"), "{text}");
    }

    #[test]
    fn render_shows_host_states_and_refusals() {
        let text = render(&summarize(&record()));
        assert!(
            text.contains("host: high 2 s, soft 2 s, hard 0 s, low 0 s; 2 state change(s)"),
            "{text}"
        );
        assert!(
            text.contains("refused: c at 1 s: min exceeds unreserved memory"),
            "{text}"
        );
    }

    #[test]
    fn table_columns_line_up() {
        let text = render(&summarize(&record()));
        let lines: Vec<&str> = text.lines().skip(2).take(3).collect();
        let end = |l: &str, word: &str| l.find(word).map(|i| i + word.len());
        // Header "alloc MB" right-aligned over the numbers.
        let header_end = end(lines[0], "alloc MB").unwrap();
        assert_eq!(end(lines[1], "112.5"), Some(header_end), "{text}");
    }

    #[test]
    fn the_headline_comes_first_and_columns_say_what_they_are() {
        let mut r = record();
        r.run.headline = Some(memtide_scenario::Headline {
            text: "a holds more after the tax".into(),
            figure: memtide_scenario::Figure::Allocated,
            windows: vec![(std::time::Duration::ZERO, std::time::Duration::from_secs(2))],
            tenants: vec!["a".into()],
        });
        r.run.convergence_goal = false;
        let text = render(&summarize(&r));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "headline: a holds more after the tax", "{text}");
        assert!(lines[2].contains("mean allocated MB") && lines[2].contains("0-2 s"));
        assert!(lines[3].trim_start().starts_with('a') && lines[3].ends_with("125.0"));
        assert!(text.contains("each tenant, means over the time it ran; degradation:"));
        // No band set: convergence is not this run's goal, and not shown.
        assert!(
            !text.contains("converged") && !text.contains("never"),
            "{text}"
        );
    }

    #[test]
    fn num_never_prints_negative_zero() {
        assert_eq!(num(-0.01, 1), "0.0");
        assert_eq!(num(-1.26, 1), "-1.3");
    }
}
