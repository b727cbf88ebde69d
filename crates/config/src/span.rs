//! Where a field is written: the span of a path in the document as toml_edit parsed it, and the line and column of a byte offset.

use crate::path::{FieldPath, Seg};
use std::ops::Range;
use toml_edit::{Item, Table, Value};

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

/// The span of the field at `path`: a value's own span, a table's header; the nearest
/// enclosing field that is written when `path` itself is not.
pub(crate) fn find(root: &Table, path: &FieldPath) -> Option<Range<usize>> {
    in_table(root, path.segs())
}

fn in_table(table: &Table, segs: &[Seg]) -> Option<Range<usize>> {
    let (Seg::Key(key), rest) = segs.split_first()? else {
        return None;
    };
    let item = table.get(key)?;
    let key_span = table.key(key).and_then(|k| k.span());
    let found = match item {
        Item::Value(v) => in_value(v, rest),
        Item::Table(t) if rest.is_empty() => t.span(),
        Item::Table(t) => in_table(t, rest).or_else(|| t.span()),
        Item::ArrayOfTables(a) => match rest.split_first() {
            Some((Seg::Index(i), more)) => a.get(*i).and_then(|t| {
                if more.is_empty() {
                    t.span()
                } else {
                    in_table(t, more).or_else(|| t.span())
                }
            }),
            _ => None,
        },
        Item::None => None,
    };
    found.or(key_span)
}

fn in_value(value: &Value, segs: &[Seg]) -> Option<Range<usize>> {
    let deeper = match (value, segs.split_first()) {
        (_, None) => None,
        (Value::InlineTable(t), Some((Seg::Key(key), rest))) => t
            .get(key)
            .and_then(|v| in_value(v, rest).or_else(|| t.key(key).and_then(|k| k.span()))),
        (Value::Array(a), Some((Seg::Index(i), rest))) => a.get(*i).and_then(|v| in_value(v, rest)),
        _ => None,
    };
    deeper.or_else(|| value.span())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "duration = \"10s\"\n\n[host]\nmemory = \"512M\"\n\n[[tenants]]\nname = \"a\"\n[[tenants]]\nname = \"b\"\n  max = 5\nworkload = { kind = \"toucher\", phases = [{ at = \"0s\" }] }\ndaemon.tick = \"1s\"\n";

    fn at(segs: &[&str]) -> Option<(usize, usize)> {
        let mut p = FieldPath::root();
        for s in segs {
            p = match s.parse::<usize>() {
                Ok(i) => p.index(i),
                Err(_) => p.key(s),
            };
        }
        let doc = toml_edit::ImDocument::parse(TEXT).unwrap();
        find(doc.as_table(), &p).map(|s| line_col(TEXT, s.start))
    }

    #[test]
    fn line_col_counts_lines_and_characters_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("é\nx", 3), (2, 1));
        assert_eq!(line_col("ab", 99), (1, 3));
    }

    #[test]
    fn values_are_pointed_at_themselves() {
        assert_eq!(at(&["duration"]), Some((1, 12)));
        assert_eq!(at(&["host", "memory"]), Some((4, 10)));
        assert_eq!(at(&["tenants", "1", "max"]), Some((10, 9)));
    }

    #[test]
    fn tables_are_pointed_at_their_header() {
        assert_eq!(at(&["host"]), Some((3, 1)));
        assert_eq!(at(&["tenants", "1"]), Some((8, 1)));
    }

    #[test]
    fn inline_tables_arrays_and_dotted_keys_are_followed() {
        let (line, col) = at(&["tenants", "1", "workload", "phases", "0", "at"]).unwrap();
        assert_eq!(line, 11);
        assert!(col > 40, "col {col}");
        assert_eq!(at(&["tenants", "1", "daemon", "tick"]), Some((12, 15)));
    }

    #[test]
    fn an_absent_field_falls_back_to_the_nearest_written_parent() {
        assert_eq!(at(&["host", "absent"]), Some((3, 1)));
        assert_eq!(at(&["tenants", "0", "absent"]), Some((6, 1)));
        assert_eq!(at(&["nothing"]), None);
    }
}
