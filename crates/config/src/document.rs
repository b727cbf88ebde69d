//! A configuration file being read: its TOML tree (which `--set` overrides may change) and the spans of the text as written; serde schemas are read out of it, and every problem becomes a [`ConfigError`] that shows the field's value and points at its line and column.

use crate::error::{render, ConfigError};
use crate::overrides::Override;
use crate::path::{FieldPath, Seg};
use crate::span::{self, line_col};
use serde::de::DeserializeOwned;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use toml::Value;

/// One file: the tree to read and the text it came from.
#[derive(Clone)]
pub struct Document {
    file: PathBuf,
    /// The text as written, parsed with spans.
    written: toml_edit::ImDocument<String>,
    /// The values, with `--set` overrides applied.
    tree: Value,
    /// Paths that overrides wrote: errors there have no place in the file.
    overridden: Vec<FieldPath>,
    /// Keys of the old format that reads refused, in the order met (see [`Document::build`]).
    old_keys: RefCell<Vec<OldKey>>,
}

/// A key of the old format, which named its unit (`duration_s = 600`), refused by a read.
#[derive(Clone, Debug, PartialEq)]
struct OldKey {
    /// Where it is: `tenants[0].min_mb`.
    path: FieldPath,
    /// Its name now: `min`.
    new: String,
    /// Its value written the new way: `"64M"` for `min_mb = 64`; `None` when it is no number.
    value: Option<Value>,
    /// The refusal as the read made it: place, value shown and message.
    location: Option<(usize, usize)>,
    shown: Option<String>,
    message: String,
}

/// The most keys of the old format one error lists: each costs a build of the file.
const MAX_OLD_KEYS: usize = 64;

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
            old_keys: RefCell::new(Vec::new()),
        })
    }

    /// Runs `build` (which reads this document) and returns what it returns, but for one
    /// case: when it stopped at a key of the old format (serde stops at the first unknown
    /// field), the key is renamed in a copy, its unit moved into the value, and the copy
    /// built again, until no other such key turns up (at most 64), so that one error names
    /// every old key in the file with its line, column and new name, not only the first.
    pub fn build<T, E: From<ConfigError>>(
        &self,
        build: impl Fn(&Document) -> Result<T, E>,
    ) -> Result<T, E> {
        self.old_keys.borrow_mut().clear();
        let error = match build(self) {
            Ok(built) => return Ok(built),
            Err(e) => e,
        };
        let Some(first) = self.old_keys.borrow().first().cloned() else {
            return Err(error);
        };
        let mut copy = self.clone();
        let mut found = Vec::new();
        let mut next = Some(first);
        while let Some(key) = next.filter(|k| !found.iter().any(|f: &OldKey| f.path == k.path)) {
            copy.rename(&key);
            found.push(key);
            copy.old_keys.borrow_mut().clear();
            next = match build(&copy) {
                Err(_) if found.len() < MAX_OLD_KEYS => copy.old_keys.borrow().first().cloned(),
                _ => None,
            };
        }
        Err(E::from(old_keys_error(&self.file, &found)))
    }

    /// Renames `key` in the tree to its new name, the value written with its unit (unless
    /// the table already has the new name).
    fn rename(&mut self, key: &OldKey) {
        let Some((Seg::Key(old), parent)) = key.path.segs().split_last() else {
            return;
        };
        let Some(Value::Table(table)) = lookup_mut(&mut self.tree, parent) else {
            return;
        };
        if let Some(value) = table.remove(old) {
            if !table.contains_key(&key.new) {
                table.insert(key.new.clone(), key.value.clone().unwrap_or(value));
            }
        }
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
            let at = path.join(&inner);
            match renamed(message, lookup(&value, inner.segs())) {
                Some(old) => {
                    let message = format!("{message}; {}", old.hint);
                    self.old_keys.borrow_mut().push(OldKey {
                        location: self.locate(&at),
                        path: at.clone(),
                        new: old.stem,
                        value: old.value,
                        shown: shown.clone(),
                        message: message.clone(),
                    });
                    self.error_with_value(&at, shown, message)
                }
                None => self.error_with_value(&at, shown, message.to_string()),
            }
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

/// A key of the old format as serde met it.
struct Renamed {
    /// The name now: `duration` for `duration_s`.
    stem: String,
    /// The value written the new way, when it is a number: `"600s"` for `600`.
    value: Option<Value>,
    /// What the error adds: `` `duration_s` is now `duration`, its unit in the value: ... ``.
    hint: String,
}

/// For serde's "unknown field `X`, expected ..." where `X` is a field of the old format, which
/// named the unit in the key (`duration_s = 600`, `max_mb = 256`), and the table has `X`
/// without it: what it is now called and how it is written (`value`, the key's, when known).
fn renamed(message: &str, value: Option<&Value>) -> Option<Renamed> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once('`')?;
    let (stem, unit, example) = [
        ("_s", "s", "600"),
        ("_ms", "ms", "500"),
        ("_mb", "M", "256"),
        ("_gb", "G", "2"),
        ("_kb", "K", "64"),
        ("_bytes", "", "4096"),
    ]
    .into_iter()
    .find_map(|(suffix, unit, example)| Some((field.strip_suffix(suffix)?, unit, example)))?;
    if !expected.contains(&format!("`{stem}`")) {
        return None;
    }
    let number = match value {
        Some(Value::Integer(n)) => Some(n.to_string()),
        Some(Value::Float(x)) if x.is_finite() => Some(x.to_string()),
        _ => None,
    };
    // Bytes are written as a plain integer; the other units in a string after the number.
    let value = match value {
        Some(Value::Integer(n)) if unit.is_empty() => Some(Value::Integer(*n)),
        _ => number.map(|n| Value::String(format!("{n}{unit}"))),
    };
    let written = match &value {
        Some(v) => render(v),
        None => format!("\"{example}{unit}\""),
    };
    Some(Renamed {
        stem: stem.to_string(),
        value,
        hint: format!("`{field}` is now `{stem}`, its unit in the value: `{stem} = {written}`"),
    })
}

/// The one error for the keys of the old format `found` in `file`: the first refusal as it
/// was, then each other key with its place and new name.
fn old_keys_error(file: &Path, found: &[OldKey]) -> ConfigError {
    let first = &found[0];
    let mut message = first.message.clone();
    if found.len() > 1 {
        let others: Vec<String> = found[1..]
            .iter()
            .map(|k| {
                let place = k
                    .location
                    .map_or_else(String::new, |(l, c)| format!(" ({l}:{c})"));
                let value = k
                    .value
                    .as_ref()
                    .map_or_else(String::new, |v| format!(" = {}", render(v)));
                format!("`{}`{place} is now `{}{value}`", k.path, k.new)
            })
            .collect();
        let more = if found.len() >= MAX_OLD_KEYS {
            ", and maybe more"
        } else {
            ""
        };
        let n = found.len() - 1;
        let keys = if n == 1 { "key" } else { "keys" };
        message.push_str(&format!(
            "; {n} more {keys} of the old format: {}{more}",
            others.join(", ")
        ));
    }
    ConfigError::Invalid {
        file: file.to_path_buf(),
        location: first.location,
        field: first.path.to_string(),
        value: first.shown.clone(),
        message,
    }
}

fn lookup_mut<'v>(value: &'v mut Value, segs: &[Seg]) -> Option<&'v mut Value> {
    let Some((first, rest)) = segs.split_first() else {
        return Some(value);
    };
    let next = match (value, first) {
        (Value::Table(t), Seg::Key(k)) => t.get_mut(k)?,
        (Value::Array(a), Seg::Index(i)) => a.get_mut(*i)?,
        _ => return None,
    };
    lookup_mut(next, rest)
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
