//! `--set KEY=VALUE` overrides: a dotted path into the scenario's TOML document and a TOML value to put there.
//!
//! Path steps are table keys; inside an array a step is an index (`tenants.0`), the `name`
//! of an element (`tenants.vm1`) or `*` for every element. Missing intermediate tables are
//! created (`tenants.vm1.estimator.kind=tws` works without an `[tenants.estimator]` table).
//! VALUE is read as a TOML value (number, bool, string, array, inline table) and taken as a
//! plain string when it is not one (`kind=tws` is the string `"tws"`).

use crate::error::FieldPath;
use toml::Value;

/// Top-level arrays of tables: a path into one of them never creates it.
const ARRAYS: &[&str] = &["tenants", "events", "variants"];

/// One parsed override.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Override {
    /// The override as given, for messages.
    pub(crate) text: String,
    key: Vec<String>,
    value: Value,
}

/// A bad override: its text and what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OverrideError {
    pub(crate) text: String,
    pub(crate) message: String,
}

impl Override {
    pub(crate) fn parse(text: &str) -> Result<Override, OverrideError> {
        let err = |message: String| OverrideError {
            text: text.to_string(),
            message,
        };
        let Some((key, value)) = text.split_once('=') else {
            return Err(err("expected KEY=VALUE".to_string()));
        };
        let key: Vec<String> = key
            .trim()
            .split('.')
            .map(|s| s.trim().to_string())
            .collect();
        if key.iter().any(String::is_empty) {
            return Err(err(
                "the key has an empty step (expected e.g. tenants.vm1.max_mb)".into(),
            ));
        }
        Ok(Override {
            text: text.to_string(),
            key,
            value: parse_value(value),
        })
    }

    /// Puts the value into `doc`; returns the paths it set (one per element for `*`).
    pub(crate) fn apply(&self, doc: &mut toml::Table) -> Result<Vec<FieldPath>, OverrideError> {
        let mut set = Vec::new();
        set_in_table(doc, &self.key, &self.value, &Walk::root(), &mut set).map_err(|message| {
            OverrideError {
                text: self.text.clone(),
                message,
            }
        })?;
        Ok(set)
    }
}

/// VALUE as TOML when it is a single TOML value, else the text itself as a string.
fn parse_value(text: &str) -> Value {
    let trimmed = text.trim();
    if let Ok(mut table) = format!("v = {trimmed}").parse::<toml::Table>() {
        if table.len() == 1 {
            if let Some(v) = table.remove("v") {
                return v;
            }
        }
    }
    Value::String(text.to_string())
}

/// Where the walk is: the path as the user wrote it (for messages) and as indices (for
/// locating fields in the file).
#[derive(Clone)]
struct Walk {
    written: Vec<String>,
    path: FieldPath,
}

impl Walk {
    fn root() -> Walk {
        Walk {
            written: Vec::new(),
            path: FieldPath::root(),
        }
    }

    fn key(&self, key: &str) -> Walk {
        let mut written = self.written.clone();
        written.push(key.to_string());
        Walk {
            written,
            path: self.path.key(key),
        }
    }

    fn element(&self, step: &str, index: usize) -> Walk {
        let mut written = self.written.clone();
        written.push(step.to_string());
        Walk {
            written,
            path: self.path.index(index),
        }
    }

    fn shown(&self) -> String {
        self.written.join(".")
    }

    fn is_root(&self) -> bool {
        self.path.0.is_empty()
    }
}

fn kind_of(v: &Value) -> &'static str {
    crate::reader::type_name(v)
}

fn set_in_table(
    table: &mut toml::Table,
    steps: &[String],
    value: &Value,
    at: &Walk,
    set: &mut Vec<FieldPath>,
) -> Result<(), String> {
    let Some((first, rest)) = steps.split_first() else {
        return Ok(());
    };
    let here = at.key(first);
    if rest.is_empty() {
        table.insert(first.clone(), value.clone());
        set.push(here.path);
        return Ok(());
    }
    if !table.contains_key(first.as_str()) {
        if at.is_root() && ARRAYS.contains(&first.as_str()) {
            return Err(no_element(&here, &rest[0]));
        }
        table.insert(first.clone(), Value::Table(toml::Table::new()));
    }
    match table.get_mut(first.as_str()) {
        Some(Value::Table(t)) => set_in_table(t, rest, value, &here, set),
        Some(Value::Array(a)) => set_in_array(a, rest, value, &here, set),
        Some(other) => Err(format!(
            "{} is {}, not a table or array",
            here.shown(),
            kind_of(other)
        )),
        None => Ok(()),
    }
}

fn no_element(array: &Walk, step: &str) -> String {
    if step == "*" || step.parse::<usize>().is_ok() {
        format!("{} has no element {step}", array.shown())
    } else {
        format!("no element of {} is named {step}", array.shown())
    }
}

fn set_in_array(
    array: &mut [Value],
    steps: &[String],
    value: &Value,
    at: &Walk,
    set: &mut Vec<FieldPath>,
) -> Result<(), String> {
    let Some((step, rest)) = steps.split_first() else {
        return Ok(());
    };
    let indices: Vec<usize> = if step == "*" {
        (0..array.len()).collect()
    } else if let Ok(i) = step.parse::<usize>() {
        if i >= array.len() {
            return Err(format!(
                "{} has {} element(s), no index {i}",
                at.shown(),
                array.len()
            ));
        }
        vec![i]
    } else {
        let found = array.iter().position(|e| {
            matches!(e, Value::Table(t) if t.get("name").and_then(Value::as_str) == Some(step.as_str()))
        });
        match found {
            Some(i) => vec![i],
            None => return Err(no_element(at, step)),
        }
    };
    for i in indices {
        let here = at.element(step, i);
        if rest.is_empty() {
            array[i] = value.clone();
            set.push(here.path);
            continue;
        }
        match &mut array[i] {
            Value::Table(t) => set_in_table(t, rest, value, &here, set)?,
            Value::Array(a) => set_in_array(a, rest, value, &here, set)?,
            other => {
                return Err(format!(
                    "{} is {}, not a table or array",
                    here.shown(),
                    kind_of(other)
                ))
            }
        }
    }
    Ok(())
}

/// True when the field at `path` was put there (or replaced as a whole) by an override.
pub(crate) fn overridden(path: &FieldPath, set: &[FieldPath]) -> bool {
    set.iter().any(|s| path.starts_with(s))
}

/// The path segments, for tests.
#[cfg(test)]
fn shown(p: &FieldPath) -> String {
    p.0.iter()
        .map(|s| match s {
            crate::error::Seg::Key(k) => k.clone(),
            crate::error::Seg::Index(i) => i.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"
duration_s = 10
[[tenants]]
name = "vm1"
max_mb = 256
[[tenants]]
name = "vm2"
max_mb = 512
[tenants.estimator]
kind = "sampling"
"#;

    fn doc() -> toml::Table {
        DOC.parse().unwrap()
    }

    fn apply(doc: &mut toml::Table, text: &str) -> Result<Vec<String>, String> {
        Override::parse(text)
            .and_then(|o| o.apply(doc))
            .map(|paths| paths.iter().map(shown).collect())
            .map_err(|e| e.message)
    }

    fn tenant(doc: &toml::Table, i: usize) -> &toml::Table {
        doc["tenants"].as_array().unwrap()[i].as_table().unwrap()
    }

    #[test]
    fn set_by_index_replaces_the_element_field() {
        let mut d = doc();
        assert_eq!(
            apply(&mut d, "tenants.1.max_mb=1024").unwrap(),
            ["tenants.1.max_mb"]
        );
        assert_eq!(tenant(&d, 1)["max_mb"].as_integer(), Some(1024));
    }

    #[test]
    fn set_by_name_finds_the_element_whose_name_matches() {
        let mut d = doc();
        apply(&mut d, "tenants.vm1.max_mb=128.5").unwrap();
        assert_eq!(tenant(&d, 0)["max_mb"].as_float(), Some(128.5));
    }

    #[test]
    fn star_sets_every_element_and_creates_missing_tables() {
        let mut d = doc();
        let set = apply(&mut d, "tenants.*.estimator.kind=tws").unwrap();
        assert_eq!(
            set,
            ["tenants.0.estimator.kind", "tenants.1.estimator.kind"]
        );
        for i in 0..2 {
            assert_eq!(tenant(&d, i)["estimator"]["kind"].as_str(), Some("tws"));
        }
    }

    #[test]
    fn values_that_are_not_toml_are_taken_as_strings() {
        let mut d = doc();
        apply(&mut d, "name=my scenario").unwrap();
        assert_eq!(d["name"].as_str(), Some("my scenario"));
        apply(&mut d, "description=\"quoted\"").unwrap();
        assert_eq!(d["description"].as_str(), Some("quoted"));
        apply(&mut d, "baseline=true").unwrap();
        assert_eq!(d["baseline"].as_bool(), Some(true));
    }

    #[test]
    fn arrays_and_inline_tables_parse_as_toml() {
        let mut d = doc();
        apply(&mut d, "convergence={ low = 0.8, high = 1.2 }").unwrap();
        assert_eq!(d["convergence"]["low"].as_float(), Some(0.8));
        apply(&mut d, "variants=[]").unwrap();
        assert_eq!(d["variants"].as_array().map(Vec::len), Some(0));
    }

    #[test]
    fn intermediate_tables_are_created_at_any_depth() {
        let mut d = doc();
        apply(&mut d, "policy.thresholds.high=0.1").unwrap();
        assert_eq!(d["policy"]["thresholds"]["high"].as_float(), Some(0.1));
    }

    #[test]
    fn unknown_element_name_is_an_error_naming_it() {
        let mut d = doc();
        let e = apply(&mut d, "tenants.vm9.max_mb=5").unwrap_err();
        assert_eq!(e, "no element of tenants is named vm9");
    }

    #[test]
    fn index_past_the_end_is_an_error() {
        let mut d = doc();
        let e = apply(&mut d, "tenants.2.max_mb=5").unwrap_err();
        assert!(e.contains("no index 2"), "{e}");
    }

    #[test]
    fn missing_top_level_array_is_not_created() {
        let mut d = doc();
        let e = apply(&mut d, "events.0.at_s=5").unwrap_err();
        assert!(e.contains("events has no element 0"), "{e}");
        assert!(!d.contains_key("events"));
    }

    #[test]
    fn stepping_into_a_scalar_is_an_error() {
        let mut d = doc();
        let e = apply(&mut d, "duration_s.x=5").unwrap_err();
        assert!(e.contains("duration_s is an integer"), "{e}");
    }

    #[test]
    fn malformed_override_is_an_error() {
        assert!(Override::parse("duration_s").is_err());
        assert!(Override::parse("tenants..max_mb=5").is_err());
        assert!(Override::parse("=5").is_err());
    }

    #[test]
    fn overrides_apply_in_order() {
        let mut d = doc();
        apply(&mut d, "seed=1").unwrap();
        apply(&mut d, "seed=2").unwrap();
        assert_eq!(d["seed"].as_integer(), Some(2));
    }

    #[test]
    fn overridden_covers_the_set_path_and_everything_under_it() {
        let set = vec![FieldPath::root().key("tenants").index(0)];
        assert!(overridden(
            &FieldPath::root().key("tenants").index(0).key("max_mb"),
            &set
        ));
        assert!(!overridden(&FieldPath::root().key("tenants"), &set));
    }
}
