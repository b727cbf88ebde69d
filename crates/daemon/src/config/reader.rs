//! Reads the keys of one TOML table, checking each value on its own; every error names the field and its value and points at it.

use super::error::{list, quote, Problem};
use super::tree::{Entry, Node, Value};
use memtide_model::written::{parse_duration, parse_size, DURATION_FORMS, SIZE_FORMS};
use std::ops::Range;
use std::time::Duration;

pub(crate) type Result<T> = std::result::Result<T, Problem>;

/// One table of the document: its field path (`daemon`, `tenant[1]`, `tenant "db"`) and entries.
pub(crate) struct Table<'a> {
    path: String,
    entries: &'a [Entry],
    /// Where the table is written (its header), for fields that are missing.
    span: Option<Range<usize>>,
}

impl<'a> Table<'a> {
    /// The table `node` found at `path`; `what` says what was expected, for the error.
    pub(crate) fn of(path: impl Into<String>, node: &'a Node, what: &str) -> Result<Table<'a>> {
        let path = path.into();
        match &node.value {
            Value::Table(entries) => Ok(Table {
                path,
                entries,
                span: node.span.clone(),
            }),
            _ => Err(
                Problem::new(path, format!("is {}, expected {what}", node.type_name()))
                    .value(node.render())
                    .span(node.span.clone()),
            ),
        }
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Renames the table in messages (`tenant[1]` becomes `tenant "db"` once the name is known).
    pub(crate) fn rename(&mut self, path: impl Into<String>) {
        self.path = path.into();
    }

    pub(crate) fn span(&self) -> Option<Range<usize>> {
        self.span.clone()
    }

    /// The path of `key` in this table.
    pub(crate) fn field(&self, key: &str) -> String {
        let key = if !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            key.to_string()
        } else {
            quote(key)
        };
        if self.path.is_empty() {
            key
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Node> {
        self.entries.iter().find(|e| e.key == key).map(|e| &e.node)
    }

    /// The first key that is not in `known`, as an error; `hint` may add a sentence about it.
    pub(crate) fn check_keys(
        &self,
        known: &[&str],
        what: &str,
        hint: impl Fn(&str) -> Option<String>,
    ) -> Result<()> {
        let Some(entry) = self
            .entries
            .iter()
            .find(|e| !known.contains(&e.key.as_str()))
        else {
            return Ok(());
        };
        let names: Vec<String> = known.iter().map(|k| k.to_string()).collect();
        let mut message = format!("unknown key; the keys of {what} are {}", list(&names));
        if let Some(h) = hint(&entry.key) {
            message = format!("{message}; {h}");
        } else if let Some(near) = nearest(&entry.key, known) {
            message = format!("{message}; did you mean `{near}`?");
        }
        Err(Problem::new(self.field(&entry.key), message)
            .span(entry.key_span.clone().or_else(|| entry.node.span.clone())))
    }

    /// The error for `key` = `node`.
    pub(crate) fn bad(&self, key: &str, node: &Node, message: impl Into<String>) -> Problem {
        Problem::new(self.field(key), message)
            .value(node.render())
            .span(node.span.clone())
    }

    fn wrong_type(&self, key: &str, node: &Node, want: &str) -> Problem {
        self.bad(
            key,
            node,
            format!("is {}, expected {want}", node.type_name()),
        )
    }

    /// The error for a required `key` that is missing; `what` describes it.
    pub(crate) fn missing(&self, key: &str, what: &str) -> Problem {
        Problem::new(
            self.field(key),
            format!("is missing; it is required ({what})"),
        )
        .span(self.span.clone())
    }

    pub(crate) fn string(&self, key: &str, want: &str) -> Result<Option<(&'a str, &'a Node)>> {
        match self.get(key) {
            None => Ok(None),
            Some(node) => match &node.value {
                Value::String(s) => Ok(Some((s.as_str(), node))),
                _ => Err(self.wrong_type(key, node, want)),
            },
        }
    }

    pub(crate) fn boolean(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(node) => match node.value {
                Value::Boolean(b) => Ok(Some(b)),
                _ => Err(self.wrong_type(key, node, "true or false")),
            },
        }
    }

    /// A whole number in `min..=max`.
    pub(crate) fn integer(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>> {
        let Some(node) = self.get(key) else {
            return Ok(None);
        };
        let Value::Integer(i) = node.value else {
            return Err(self.wrong_type(key, node, "a whole number"));
        };
        if i < min || i > max {
            let range = if max == i64::MAX {
                format!("must be at least {min}")
            } else {
                format!("must be between {min} and {max}")
            };
            return Err(self.bad(key, node, format!("is out of range: {range}")));
        }
        Ok(Some(i))
    }

    /// A finite number (integer or float) for which `ok` holds; `range` says what is allowed.
    pub(crate) fn number(
        &self,
        key: &str,
        ok: impl Fn(f64) -> bool,
        range: &str,
    ) -> Result<Option<f64>> {
        let Some(node) = self.get(key) else {
            return Ok(None);
        };
        let v = match node.value {
            Value::Integer(i) => i as f64,
            Value::Float(f) => f,
            _ => return Err(self.wrong_type(key, node, "a number")),
        };
        if !v.is_finite() {
            return Err(self.bad(key, node, format!("is not a finite number: {range}")));
        }
        if !ok(v) {
            return Err(self.bad(key, node, format!("is out of range: {range}")));
        }
        Ok(Some(v))
    }

    /// A size in bytes: an integer, or a string such as `"512M"`.
    pub(crate) fn size(&self, key: &str) -> Result<Option<u64>> {
        let Some(node) = self.get(key) else {
            return Ok(None);
        };
        match &node.value {
            Value::Integer(i) => u64::try_from(*i)
                .map(Some)
                .map_err(|_| self.bad(key, node, "is negative; a size must be >= 0")),
            Value::String(s) => parse_size(s)
                .map(Some)
                .map_err(|why| self.bad(key, node, format!("is not a size: it {why}"))),
            _ => Err(self.bad(
                key,
                node,
                format!("is {}, expected a size; {SIZE_FORMS}", node.type_name()),
            )),
        }
    }

    /// A duration string in `min..=max`; `range` says what is allowed, e.g. `100ms and 60s`.
    pub(crate) fn duration(
        &self,
        key: &str,
        min: Duration,
        max: Duration,
        range: &str,
    ) -> Result<Option<Duration>> {
        let Some(node) = self.get(key) else {
            return Ok(None);
        };
        let Value::String(s) = &node.value else {
            return Err(self.bad(
                key,
                node,
                format!(
                    "is {}, expected a duration; {DURATION_FORMS}",
                    node.type_name()
                ),
            ));
        };
        let d = parse_duration(s)
            .map_err(|why| self.bad(key, node, format!("is not a duration: it {why}")))?;
        if d < min || d > max {
            return Err(self.bad(
                key,
                node,
                format!("is out of range: must be between {range}"),
            ));
        }
        Ok(Some(d))
    }

    /// A non-empty array of strings.
    pub(crate) fn strings(&self, key: &str, example: &str) -> Result<Option<Vec<String>>> {
        let Some(node) = self.get(key) else {
            return Ok(None);
        };
        let want = format!("an array of strings such as {example}");
        let Value::Array(items) = &node.value else {
            return Err(self.wrong_type(key, node, &want));
        };
        if items.is_empty() {
            return Err(self.bad(key, node, format!("is empty; expected {want}")));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match &item.value {
                Value::String(s) => Ok(s.clone()),
                _ => Err(Problem::new(
                    format!("{}[{i}]", self.field(key)),
                    format!("is {}, expected a string", item.type_name()),
                )
                .value(item.render())
                .span(item.span.clone())),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }
}

/// The known name closest to `key` (a small edit distance), if any is close.
fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let key = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4) && *d < k.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut row = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            row[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::super::tree::parse;
    use super::*;

    fn with_table<T>(text: &str, f: impl FnOnce(&Table) -> T) -> T {
        let doc = parse(text).unwrap();
        let t = Table::of("", &doc, "a table").unwrap();
        f(&t)
    }

    #[test]
    fn typed_reads_name_the_field_and_the_value() {
        with_table("a = 5\nb = \"x\"\nc = true\n", |t| {
            assert_eq!(t.integer("a", 0, 10).unwrap(), Some(5));
            let e = t.integer("a", 6, 10).unwrap_err();
            assert_eq!(
                e.to_string(),
                "a: 5 is out of range: must be between 6 and 10"
            );
            let e = t.boolean("b").unwrap_err();
            assert_eq!(
                e.to_string(),
                "b: \"x\" is a string, expected true or false"
            );
            assert_eq!(t.boolean("c").unwrap(), Some(true));
            assert_eq!(t.boolean("absent").unwrap(), None);
        });
    }

    #[test]
    fn unknown_keys_point_at_the_key_and_suggest_a_near_one() {
        let text = "tick = 1\ntikc = 2\n";
        with_table(text, |t| {
            let e = t
                .check_keys(&["tick", "listen"], "[daemon]", |_| None)
                .unwrap_err();
            assert_eq!(e.field, "tikc");
            assert!(e.message.contains("did you mean `tick`?"), "{}", e.message);
            assert_eq!(&text[e.span.unwrap()], "tikc");
        });
    }

    #[test]
    fn nearest_only_suggests_close_names() {
        assert_eq!(
            nearest("shrinkstep", &["shrink_step", "floor_margin"]),
            Some("shrink_step")
        );
        assert_eq!(nearest("zzz", &["tick", "listen"]), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn strings_names_the_bad_element() {
        with_table("c = [\"a\", 5]\nd = []\n", |t| {
            let e = t.strings("c", "[\"x\"]").unwrap_err();
            assert_eq!(e.field, "c[1]");
            assert!(t
                .strings("d", "[\"x\"]")
                .unwrap_err()
                .message
                .contains("empty"));
        });
    }

    #[test]
    fn quoted_keys_are_quoted_in_paths() {
        with_table("\"a b\" = 1\n", |t| {
            let e = t.check_keys(&["ab"], "x", |_| None).unwrap_err();
            assert_eq!(e.field, "\"a b\"");
        });
    }
}
