//! A configuration file being read: its TOML tree (which `--set` overrides may change) and the spans of the text as written; serde schemas are read out of it, and every problem becomes a [`ConfigError`] that shows the field's value and points at its line and column.

use crate::error::{render, ConfigError};
use crate::overrides::Override;
use crate::path::{FieldPath, Seg};
use crate::span::{self, line_col};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use toml::Value;

/// One file: the tree to read and the text it came from.
pub struct Document {
    file: PathBuf,
    /// The text as written, parsed with spans.
    written: toml_edit::ImDocument<String>,
    /// The values, with `--set` overrides applied.
    tree: Value,
    /// Paths that overrides wrote: errors there have no place in the file.
    overridden: Vec<FieldPath>,
}

impl Document {
    /// Parses `text`; `file` names it in errors.
    pub fn parse(file: &Path, text: &str) -> Result<Document, ConfigError> {
        let syntax = |span: Option<std::ops::Range<usize>>, message: &str| ConfigError::Syntax {
            file: file.to_path_buf(),
            location: span.map(|s| line_col(text, s.start)),
            message: message.to_string(),
        };
        let tree = text
            .parse::<toml::Table>()
            .map_err(|e| syntax(e.span(), e.message()))?;
        let written = toml_edit::ImDocument::parse(text.to_string())
            .map_err(|e| syntax(e.span(), e.message()))?;
        Ok(Document {
            file: file.to_path_buf(),
            written,
            tree: Value::Table(tree),
            overridden: Vec::new(),
        })
    }

    /// The file's name as shown in errors.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The value at `path`, overrides applied.
    pub fn get(&self, path: &FieldPath) -> Option<&Value> {
        lookup(&self.tree, path.segs())
    }

    /// Applies `overrides` (`KEY=VALUE`, see [`Override`]) in order.
    pub fn set(&mut self, overrides: &[String]) -> Result<(), ConfigError> {
        for text in overrides {
            let bad = |message: String| ConfigError::Override {
                file: self.file.clone(),
                text: text.clone(),
                message,
            };
            let o = Override::parse(text).map_err(bad)?;
            let Value::Table(tree) = &mut self.tree else {
                return Ok(());
            };
            let set = o.apply(tree).map_err(bad)?;
            self.overridden.extend(set);
        }
        Ok(())
    }

    /// Whether an override wrote the value at `path` (or a table holding it).
    pub fn is_overridden(&self, path: &FieldPath) -> bool {
        self.overridden.iter().any(|o| path.starts_with(o))
    }

    /// Reads the value at `path` (the root: the whole file) as a `T`.
    pub fn read<T: DeserializeOwned>(&self, path: &FieldPath) -> Result<T, ConfigError> {
        match self.get(path) {
            Some(v) => self.read_value(path, v.clone()),
            None => Err(self.error(path, "missing")),
        }
    }

    /// Reads `value`, found at `path`, as a `T`: a wrong type, an unknown field, a bad size
    /// names the field inside it.
    pub fn read_value<T: DeserializeOwned>(
        &self,
        path: &FieldPath,
        value: Value,
    ) -> Result<T, ConfigError> {
        serde_path_to_error::deserialize(value.clone()).map_err(|e| {
            let inner = FieldPath::from_serde(e.path());
            let shown = lookup(&value, inner.segs()).and_then(shown);
            let message = e.inner().message();
            let message = match renamed(message) {
                Some(hint) => format!("{message}; {hint}"),
                None => message.to_string(),
            };
            self.error_with_value(&path.join(&inner), shown, message)
        })
    }

    /// The `kind` of the table `value` at `path` (`default` when it has none) and the table
    /// without it: for tables whose fields depend on their kind, read by kind with
    /// [`Document::read_value`]. (serde's tagged enums buffer the table, and an error inside
    /// would lose its path.)
    pub fn kind(
        &self,
        path: &FieldPath,
        value: &Value,
        default: Option<&str>,
    ) -> Result<(String, Value), ConfigError> {
        let Value::Table(table) = value else {
            return Err(self.error(
                path,
                format!("invalid type: {}, expected a table", type_name(value)),
            ));
        };
        let mut rest = table.clone();
        let kind = match rest.remove("kind") {
            Some(Value::String(kind)) => kind,
            Some(other) => {
                return Err(self.error(
                    &path.key("kind"),
                    format!("invalid type: {}, expected a string", type_name(&other)),
                ))
            }
            None => match default {
                Some(d) => d.to_string(),
                None => return Err(self.error(path, "missing field `kind`")),
            },
        };
        Ok((kind, Value::Table(rest)))
    }

    /// The error for the field at `path`, showing its value (unless a table) and pointing at
    /// it: for checks made after deserializing, e.g. min <= max.
    pub fn error(&self, path: &FieldPath, message: impl Into<String>) -> ConfigError {
        let value = self.get(path).and_then(shown);
        self.error_with_value(path, value, message)
    }

    /// Like [`Document::error`], with the value to show given (e.g. a default that is not
    /// in the file).
    pub fn error_with_value(
        &self,
        path: &FieldPath,
        value: Option<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.clone(),
            location: self.locate(path),
            field: path.to_string(),
            value,
            message: message.into(),
        }
    }

    /// Line and column of the field at `path` in the text, unless an override wrote it.
    pub fn locate(&self, path: &FieldPath) -> Option<(usize, usize)> {
        if self.is_overridden(path) {
            return None;
        }
        let span = span::find(self.written.as_table(), path)?;
        Some(line_col(self.written.raw(), span.start))
    }
}

/// A value as shown in an error: TOML syntax; tables are not shown (they are long, and the
/// line and column point at them).
fn shown(value: &Value) -> Option<String> {
    (!value.is_table()).then(|| render(value))
}

/// For serde's "unknown field `X`, expected ..." where `X` is a field of the old format, which
/// named the unit in the key (`duration_s = 600`, `max_mb = 256`), and the table has `X`
/// without it: what it is now called and how it is written.
fn renamed(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once('`')?;
    let (stem, example) = [
        ("_s", "\"600s\""),
        ("_ms", "\"500ms\""),
        ("_mb", "\"256M\""),
        ("_gb", "\"2G\""),
        ("_kb", "\"64K\""),
        ("_bytes", "\"4K\""),
    ]
    .into_iter()
    .find_map(|(suffix, example)| Some((field.strip_suffix(suffix)?, example)))?;
    expected
        .contains(&format!("`{stem}`"))
        .then(|| format!("`{field}` is now `{stem}`, its unit in the value: `{stem} = {example}`"))
}

fn lookup<'v>(value: &'v Value, segs: &[Seg]) -> Option<&'v Value> {
    let Some((first, rest)) = segs.split_first() else {
        return Some(value);
    };
    let next = match (value, first) {
        (Value::Table(t), Seg::Key(k)) => t.get(k)?,
        (Value::Array(a), Seg::Index(i)) => a.get(*i)?,
        _ => return None,
    };
    lookup(next, rest)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Integer(_) => "integer",
        Value::Float(_) => "floating point",
        Value::Boolean(_) => "boolean",
        Value::Datetime(_) => "date-time",
        Value::Array(_) => "sequence",
        Value::Table(_) => "map",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Size;
    use serde::Deserialize;

    const TEXT: &str = "[host]\nmemory = \"1G\"\n\n[[tenants]]\nname = \"a\"\nmin = \"2G\"\nmax = \"1G\"\nworkload = { kind = \"idle\", resident = \"x\" }\n";

    fn doc() -> Document {
        Document::parse(Path::new("x.toml"), TEXT).unwrap()
    }

    fn tenant_min() -> FieldPath {
        FieldPath::root().key("tenants").index(0).key("min")
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Idle {
        resident: Option<Size>,
    }

    #[test]
    fn relation_error_points_at_the_field_it_names_and_shows_its_value() {
        let e = doc().error(&tenant_min(), "must not exceed max = \"1G\"");
        assert_eq!(e.line_col(), Some((6, 7)));
        assert_eq!(
            e.to_string(),
            "x.toml:6:7: tenants[0].min = \"2G\": must not exceed max = \"1G\""
        );
    }

    #[test]
    fn an_overridden_field_has_no_place_in_the_file() {
        let mut d = doc();
        d.set(&["tenants.a.min=3G".to_string()]).unwrap();
        assert!(d.is_overridden(&tenant_min()));
        let e = d.error(&tenant_min(), "must not exceed max");
        assert_eq!(
            e.to_string(),
            "x.toml: tenants[0].min = \"3G\": must not exceed max"
        );
    }

    #[test]
    fn override_errors_name_the_override() {
        let mut d = doc();
        let e = d.set(&["tenants.b.min=1G".to_string()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.toml: --set tenants.b.min=1G: no element of tenants is named b"
        );
        let e = d.set(&["min".to_string()]).unwrap_err();
        assert_eq!(e.to_string(), "x.toml: --set min: expected KEY=VALUE");
    }

    #[test]
    fn tables_read_by_kind_keep_the_path_of_an_error_inside() {
        let d = doc();
        let path = FieldPath::root().key("tenants").index(0).key("workload");
        let (kind, rest) = d.kind(&path, d.get(&path).unwrap(), None).unwrap();
        assert_eq!(kind, "idle");
        let e = d.read_value::<Idle>(&path, rest).unwrap_err();
        assert_eq!(e.field(), Some("tenants[0].workload.resident"));
        assert_eq!(e.value(), Some("\"x\""));
        assert_eq!(e.line_col().map(|l| l.0), Some(8));
    }

    #[test]
    fn a_table_without_its_kind_is_an_error_unless_there_is_a_default() {
        let d = doc();
        let path = FieldPath::root().key("host");
        let e = d.kind(&path, d.get(&path).unwrap(), None).unwrap_err();
        assert_eq!(e.to_string(), "x.toml:1:1: host: missing field `kind`");
        let (kind, _) = d.kind(&path, d.get(&path).unwrap(), Some("x")).unwrap();
        assert_eq!(kind, "x");
    }
}
