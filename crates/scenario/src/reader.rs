//! Reads the fields of one TOML table one at a time, checking each value on its own; every error names the field's path and value, and keys nobody asked for are errors.

use crate::error::{render_number, render_value, FieldError, FieldPath};
use toml::Value;

pub(crate) type Result<T> = std::result::Result<T, FieldError>;

/// Largest memory size a scenario may give, in MiB (1 TiB).
pub(crate) const MAX_MB: f64 = 1024.0 * 1024.0;
/// Longest time a scenario may give, in seconds (about 115 days).
pub(crate) const MAX_S: f64 = 1.0e7;

/// A check on one number; [`Rule::violated`] says what is wrong, if anything.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Rule {
    /// > 0
    Positive,
    /// >= 0
    NonNegative,
    /// <= the bound
    AtMost(f64),
    /// in [0, 1)
    HalfOpenUnit,
    /// in (0, 1]
    OpenClosedUnit,
    /// a whole number of seconds (the tick is 1 s)
    WholeSeconds,
}

impl Rule {
    /// `v` is finite (see [`Fields::number`]).
    fn violated(self, v: f64) -> Option<String> {
        let bad = match self {
            Rule::Positive => v <= 0.0,
            Rule::NonNegative => v < 0.0,
            Rule::AtMost(max) => v > max,
            Rule::HalfOpenUnit => !(0.0..1.0).contains(&v),
            Rule::OpenClosedUnit => v <= 0.0 || v > 1.0,
            Rule::WholeSeconds => v.fract() != 0.0,
        };
        bad.then(|| match self {
            Rule::Positive => "must be > 0".to_string(),
            Rule::NonNegative => "must be >= 0".to_string(),
            Rule::AtMost(max) if max == MAX_MB => {
                format!("must be at most {} (1 TiB)", render_number(max))
            }
            Rule::AtMost(max) => format!("must be at most {}", render_number(max)),
            Rule::HalfOpenUnit => "must be in [0, 1)".to_string(),
            Rule::OpenClosedUnit => "must be in (0, 1]".to_string(),
            Rule::WholeSeconds => "must be a whole number of seconds (the tick is 1 s)".to_string(),
        })
    }
}

/// Rules for a memory size in MiB that may be zero.
pub(crate) const SIZE: &[Rule] = &[Rule::NonNegative, Rule::AtMost(MAX_MB)];
/// Rules for a memory size in MiB that must be positive.
pub(crate) const POSITIVE_SIZE: &[Rule] = &[Rule::Positive, Rule::AtMost(MAX_MB)];
/// Rules for a time in seconds that may be zero.
pub(crate) const TIME: &[Rule] = &[Rule::NonNegative, Rule::AtMost(MAX_S)];
/// Rules for a time in seconds that must be positive.
pub(crate) const POSITIVE_TIME: &[Rule] = &[Rule::Positive, Rule::AtMost(MAX_S)];
/// Rules for a time that must fall on a tick.
pub(crate) const TICK_TIME: &[Rule] = &[Rule::NonNegative, Rule::AtMost(MAX_S), Rule::WholeSeconds];

/// The name of a TOML value's type, for "must be a number, not a string".
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

/// The fields of one table, read by key; remembers the keys asked for so [`Fields::finish`]
/// can reject the others.
pub(crate) struct Fields<'a> {
    path: FieldPath,
    table: &'a toml::Table,
    known: Vec<&'static str>,
    ignored: Vec<&'a str>,
}

impl<'a> Fields<'a> {
    pub(crate) fn root(table: &'a toml::Table) -> Fields<'a> {
        Fields {
            path: FieldPath::root(),
            table,
            known: Vec::new(),
            ignored: Vec::new(),
        }
    }

    /// The table at `path`; an error when the value is not a table.
    pub(crate) fn of(path: FieldPath, value: &'a Value) -> Result<Fields<'a>> {
        match value {
            Value::Table(table) => Ok(Fields {
                path,
                table,
                known: Vec::new(),
                ignored: Vec::new(),
            }),
            other => Err(FieldError::new(
                path,
                format!("must be a table, not {}", type_name(other)),
            )
            .value(render_value(other))),
        }
    }

    pub(crate) fn path(&self) -> &FieldPath {
        &self.path
    }

    pub(crate) fn field(&self, key: &str) -> FieldPath {
        self.path.key(key)
    }

    /// The raw value of `key`, marking the key as known.
    pub(crate) fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        if !self.known.contains(&key) {
            self.known.push(key);
        }
        self.table.get(key)
    }

    fn wrong_type(&self, key: &str, want: &str, got: &Value) -> FieldError {
        FieldError::new(
            self.field(key),
            format!("must be {want}, not {}", type_name(got)),
        )
        .value(render_value(got))
    }

    /// A number (integer or float), finite.
    pub(crate) fn number(&mut self, key: &'static str) -> Result<Option<f64>> {
        let v = match self.get(key) {
            None => return Ok(None),
            Some(Value::Integer(i)) => *i as f64,
            Some(Value::Float(f)) => *f,
            Some(other) => return Err(self.wrong_type(key, "a number", other)),
        };
        if !v.is_finite() {
            return Err(
                FieldError::new(self.field(key), "must be a finite number").value(render_number(v))
            );
        }
        Ok(Some(v))
    }

    /// A number that passes every rule.
    pub(crate) fn number_with(&mut self, key: &'static str, rules: &[Rule]) -> Result<Option<f64>> {
        let Some(v) = self.number(key)? else {
            return Ok(None);
        };
        for rule in rules {
            if let Some(msg) = rule.violated(v) {
                return Err(FieldError::new(self.field(key), msg).value(render_number(v)));
            }
        }
        Ok(Some(v))
    }

    /// A whole number in `[min, max]` (an integral float such as `1000.0` is accepted).
    pub(crate) fn integer(&mut self, key: &'static str, min: i64, max: i64) -> Result<Option<i64>> {
        let raw = match self.get(key) {
            None => return Ok(None),
            Some(v) => v,
        };
        let i = match raw {
            Value::Integer(i) => *i,
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => *f as i64,
            Value::Float(_) => {
                return Err(FieldError::new(self.field(key), "must be a whole number")
                    .value(render_value(raw)))
            }
            other => return Err(self.wrong_type(key, "a whole number", other)),
        };
        if i < min || i > max {
            let rule = if max == i64::MAX {
                format!("must be >= {min}")
            } else {
                format!("must be in [{min}, {max}]")
            };
            return Err(FieldError::new(self.field(key), rule).value(render_value(raw)));
        }
        Ok(Some(i))
    }

    pub(crate) fn boolean(&mut self, key: &'static str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Boolean(b)) => Ok(Some(*b)),
            Some(other) => Err(self.wrong_type(key, "true or false", other)),
        }
    }

    pub(crate) fn string(&mut self, key: &'static str) -> Result<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.wrong_type(key, "a string", other)),
        }
    }

    /// An array of strings.
    pub(crate) fn strings(&mut self, key: &'static str) -> Result<Option<Vec<String>>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let Value::Array(items) = v else {
            return Err(self.wrong_type(key, "an array of strings", v));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(FieldError::new(
                    self.field(key).index(i),
                    format!("must be a string, not {}", type_name(other)),
                )
                .value(render_value(other))),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// A sub-table.
    pub(crate) fn table(&mut self, key: &'static str) -> Result<Option<Fields<'a>>> {
        let path = self.field(key);
        self.get(key).map(|v| Fields::of(path, v)).transpose()
    }

    /// An array of tables (`[[key]]`); absent means empty.
    pub(crate) fn tables(&mut self, key: &'static str) -> Result<Vec<Fields<'a>>> {
        let Some(v) = self.get(key) else {
            return Ok(Vec::new());
        };
        let Value::Array(items) = v else {
            return Err(self.wrong_type(key, "an array of tables", v));
        };
        let path = self.field(key);
        items
            .iter()
            .enumerate()
            .map(|(i, item)| Fields::of(path.index(i), item))
            .collect()
    }

    /// The raw value of `key` and its path, for types read by serde.
    pub(crate) fn raw(&mut self, key: &'static str) -> Option<(&'a Value, FieldPath)> {
        let path = self.field(key);
        self.get(key).map(|v| (v, path))
    }

    /// The error for a required field that is missing.
    pub(crate) fn missing(&self, key: &str, what: &str) -> FieldError {
        FieldError::new(
            self.field(key),
            format!("missing; this field is required ({what})"),
        )
        .at(self.path.clone())
    }

    /// Accepts `key` without reading it.
    pub(crate) fn ignore(&mut self, key: &str) {
        if let Some((k, _)) = self.table.get_key_value(key) {
            if !self.ignored.contains(&k.as_str()) {
                self.ignored.push(k.as_str());
            }
        }
    }

    /// Keys present in the table that nobody asked for, in file order.
    pub(crate) fn unknown(&self) -> impl Iterator<Item = (&'a String, &'a Value)> + '_ {
        self.table.iter().filter(|(k, _)| {
            !self.known.contains(&k.as_str()) && !self.ignored.contains(&k.as_str())
        })
    }

    /// Ends reading: the first key nobody asked for is an error.
    pub(crate) fn finish(self) -> Result<()> {
        match self.unknown().next() {
            None => Ok(()),
            Some((key, _)) => Err(FieldError::new(
                self.path.clone(),
                format!(
                    "unknown field `{key}` (known fields: {})",
                    self.known.join(", ")
                ),
            )
            .at(self.path.key(key))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn number_accepts_integers_and_floats_and_rejects_strings() {
        let t = table("a = 5\nb = 2.5\nc = \"big\"\n");
        let mut f = Fields::root(&t);
        assert_eq!(f.number("a").unwrap(), Some(5.0));
        assert_eq!(f.number("b").unwrap(), Some(2.5));
        let e = f.number("c").unwrap_err();
        assert_eq!(e.path.to_string(), "c");
        assert_eq!(e.value.as_deref(), Some("\"big\""));
        assert!(e.message.contains("a number"), "{}", e.message);
        assert_eq!(f.number("absent").unwrap(), None);
    }

    #[test]
    fn number_with_reports_the_first_broken_rule() {
        let t = table("max_mb = -5\nt = 1.5\nnan = nan\n");
        let mut f = Fields::root(&t);
        let e = f.number_with("max_mb", POSITIVE_SIZE).unwrap_err();
        assert_eq!(
            (e.value.as_deref(), e.message.as_str()),
            (Some("-5"), "must be > 0")
        );
        let e = f.number_with("t", TICK_TIME).unwrap_err();
        assert!(e.message.contains("whole number of seconds"));
        assert!(f.number("nan").unwrap_err().message.contains("finite"));
    }

    #[test]
    fn integer_checks_range_and_accepts_integral_floats() {
        let t = table("a = 1000.0\nb = -1\nc = 1.5\n");
        let mut f = Fields::root(&t);
        assert_eq!(f.integer("a", 1, i64::MAX).unwrap(), Some(1000));
        assert_eq!(
            f.integer("b", 0, i64::MAX).unwrap_err().message,
            "must be >= 0"
        );
        assert!(f.integer("c", 0, 10).is_err());
    }

    #[test]
    fn finish_rejects_keys_nobody_asked_for_and_points_at_the_key() {
        let t = table("[host]\nmemory_mb = 1\nbogus = 2\n");
        let mut root = Fields::root(&t);
        let mut host = root.table("host").unwrap().unwrap();
        host.number("memory_mb").unwrap();
        let e = host.finish().unwrap_err();
        assert_eq!(e.path.to_string(), "host");
        assert!(e.message.contains("unknown field `bogus`"), "{}", e.message);
        assert!(e.message.contains("memory_mb"));
        assert_eq!(e.locate().to_string(), "host.bogus");
        assert!(root.finish().is_ok());
    }

    #[test]
    fn tables_reads_arrays_of_tables_and_rejects_other_values() {
        let t = table("[[x]]\na = 1\n[[x]]\na = 2\n");
        let mut f = Fields::root(&t);
        let xs = f.tables("x").unwrap();
        assert_eq!(xs[1].path().to_string(), "x[1]");
        let t = table("x = 5\n");
        let e = Fields::root(&t).tables("x").err().unwrap();
        assert!(e.message.contains("an array of tables"));
    }

    #[test]
    fn strings_names_the_bad_element() {
        let t = table("set = [\"a=1\", 5]\n");
        let e = Fields::root(&t).strings("set").unwrap_err();
        assert_eq!(e.path.to_string(), "set[1]");
    }
}
