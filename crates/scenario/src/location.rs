//! Finds where a field is written in the scenario text (1-based line and column), so errors can point at it.

use crate::error::{FieldPath, Seg};
use std::ops::Range;
use toml_edit::{Item, Value};

/// Line and column (1-based, column in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = text[line_start..offset].chars().count() + 1;
    (line, col)
}

/// Line and column of the field at `path` in `text`: the key for a `key = value` field, the
/// header for a table; the nearest enclosing field that is written when `path` itself is not.
pub(crate) fn find(text: &str, path: &FieldPath) -> Option<(usize, usize)> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let span = span_of(doc.as_table(), &path.0)?;
    Some(line_col(text, span.start))
}

/// The span of the deepest written item along `segs`.
fn span_of(table: &toml_edit::Table, segs: &[Seg]) -> Option<Range<usize>> {
    let (first, rest) = segs.split_first()?;
    let Seg::Key(key) = first else {
        return None;
    };
    let item = table.get(key)?;
    let here = table
        .key(key)
        .and_then(|k| k.span())
        .or_else(|| item.span());
    let deeper = match item {
        Item::Table(t) if rest.is_empty() => t.span(),
        Item::Table(t) => span_of(t, rest),
        Item::ArrayOfTables(a) => match rest.split_first() {
            Some((Seg::Index(i), more)) => a.get(*i).and_then(|t| {
                if more.is_empty() {
                    t.span()
                } else {
                    span_of(t, more).or_else(|| t.span())
                }
            }),
            _ => None,
        },
        Item::Value(v) => value_span(v, rest),
        Item::None => None,
    };
    deeper.or(here)
}

fn value_span(value: &Value, segs: &[Seg]) -> Option<Range<usize>> {
    let (first, rest) = segs.split_first()?;
    match (value, first) {
        (Value::InlineTable(t), Seg::Key(key)) => {
            let v = t.get(key)?;
            let here = t.key(key).and_then(|k| k.span()).or_else(|| v.span());
            value_span(v, rest).or(here)
        }
        (Value::Array(a), Seg::Index(i)) => {
            let v = a.get(*i)?;
            value_span(v, rest).or_else(|| v.span())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "duration_s = 10\n\n[host]\nmemory_mb = 512\n\n[[tenants]]\nname = \"a\"\n[[tenants]]\nname = \"b\"\n  max_mb = 5\nworkload = { kind = \"toucher\", phases = [{ at_s = 0 }] }\n";

    fn path(segs: &[&str]) -> FieldPath {
        let mut p = FieldPath::root();
        for s in segs {
            p = match s.parse::<usize>() {
                Ok(i) => p.index(i),
                Err(_) => p.key(s),
            };
        }
        p
    }

    #[test]
    fn line_col_counts_lines_and_characters_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("é\nx", 3), (2, 1));
        assert_eq!(line_col("ab", 99), (1, 3));
    }

    #[test]
    fn find_points_at_keys_of_top_level_and_table_fields() {
        assert_eq!(find(TEXT, &path(&["duration_s"])), Some((1, 1)));
        assert_eq!(find(TEXT, &path(&["host", "memory_mb"])), Some((4, 1)));
    }

    #[test]
    fn find_points_into_arrays_of_tables_by_index() {
        assert_eq!(
            find(TEXT, &path(&["tenants", "1", "max_mb"])),
            Some((10, 3))
        );
        assert_eq!(find(TEXT, &path(&["tenants", "1", "name"])), Some((9, 1)));
    }

    #[test]
    fn find_points_into_inline_tables_and_arrays() {
        let (line, col) = find(
            TEXT,
            &path(&["tenants", "1", "workload", "phases", "0", "at_s"]),
        )
        .unwrap();
        assert_eq!(line, 11);
        assert!(col > 40, "col {col}");
    }

    #[test]
    fn find_falls_back_to_the_nearest_written_parent() {
        assert_eq!(find(TEXT, &path(&["host", "absent"])).map(|l| l.0), Some(3));
        assert_eq!(find(TEXT, &path(&["nothing"])), None);
    }
}
