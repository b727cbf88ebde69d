//! `--set KEY=VALUE` overrides: a dotted path into the TOML tree and a TOML value to put there.
//!
//! Path steps are table keys; inside an array a step is an index (`tenants.0`), the `name`
//! of an element (`tenants.vm1`) or `*` for every element. Missing intermediate tables are
//! created (`tenants.vm1.estimator.kind=tws` works without an `[tenants.estimator]` table),
//! but never a missing array (`events.0.at=5` with no events is an error). VALUE is read as a
//! TOML value (number, bool, string, array, inline table) and taken as a plain string when it
//! is not one (`kind=tws` is the string `"tws"`, `duration=60s` the string `"60s"`).

use crate::path::FieldPath;
use toml::Value;

/// One parsed override.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// The override as given, for messages.
    text: String,
    key: Vec<String>,
    value: Value,
}

impl Override {
    /// Parses `KEY=VALUE`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Override, String> {
        let Some((key, value)) = text.split_once('=') else {
            return Err("expected KEY=VALUE".to_string());
        };
        let key: Vec<String> = key
            .trim()
            .split('.')
            .map(|s| s.trim().to_string())
            .collect();
        if key.iter().any(String::is_empty) {
            return Err("the key has an empty step (expected e.g. tenants.vm1.max)".into());
        }
        Ok(Override {
            text: text.to_string(),
            key,
            value: parse_value(value)?,
        })
    }

    /// The override as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Puts the value into `doc`; returns the paths it set (one per element for `*`).
    pub fn apply(&self, doc: &mut toml::Table) -> Result<Vec<FieldPath>, String> {
        let mut set = Vec::new();
        set_in_table(doc, &self.key, &self.value, &Walk::root(), &mut set)?;
        Ok(set)
    }
}

/// VALUE as TOML when it is a single TOML value, else the text itself as a string.
/// A whole number TOML cannot hold (beyond 64-bit signed) is an error naming the range, not
/// a string that a number field would refuse as the wrong type.
fn parse_value(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if let Ok(mut table) = format!("v = {trimmed}").parse::<toml::Table>() {
        if table.len() == 1 {
            if let Some(v) = table.remove("v") {
                return Ok(v);
            }
        }
    }
    let digits = trimmed.strip_prefix(['+', '-']).unwrap_or(trimmed);
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return Err(format!(
            "{trimmed} is out of range: a whole number must be within [{}, {}]",
            i64::MIN,
            i64::MAX
        ));
    }
    Ok(Value::String(text.to_string()))
}

/// Where the walk is: the path as the user wrote it (for messages) and with indices.
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
}

fn type_name(v: &Value) -> &'static str {
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

/// A step that only makes sense inside an array.
fn is_element_step(step: &str) -> bool {
    step == "*" || step.parse::<usize>().is_ok()
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
    let Some(next) = rest.first() else {
        table.insert(first.clone(), value.clone());
        set.push(here.path);
        return Ok(());
    };
    if !table.contains_key(first.as_str()) {
        if is_element_step(next) {
            return Err(format!("{} has no element {next}", here.shown()));
        }
        table.insert(first.clone(), Value::Table(toml::Table::new()));
    }
    match table.get_mut(first.as_str()) {
        Some(Value::Table(t)) => set_in_table(t, rest, value, &here, set),
        Some(Value::Array(a)) => set_in_array(a, rest, value, &here, set),
        Some(other) => Err(format!(
            "{} is {}, not a table or array",
            here.shown(),
            type_name(other)
        )),
        None => Ok(()),
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
            None => return Err(format!("no element of {} is named {step}", at.shown())),
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
                    type_name(other)
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_number_beyond_64_bits_is_refused_naming_the_range() {
        let e = Override::parse("seed=18446744073709551616").unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        assert!(e.contains("9223372036854775807"), "{e}");
        // Not a number at all: still a plain string.
        assert!(Override::parse("kind=12ab").is_ok());
    }

    const DOC: &str = r#"
duration = "10s"
[[tenants]]
name = "vm1"
max = "256M"
[[tenants]]
name = "vm2"
max = "512M"
[tenants.estimator]
kind = "sampling"
"#;

    fn doc() -> toml::Table {
        DOC.parse().unwrap()
    }

    fn apply(doc: &mut toml::Table, text: &str) -> Result<Vec<String>, String> {
        Override::parse(text)
            .and_then(|o| o.apply(doc))
            .map(|paths| paths.iter().map(ToString::to_string).collect())
    }

    fn tenant(doc: &toml::Table, i: usize) -> &toml::Table {
        doc["tenants"].as_array().unwrap()[i].as_table().unwrap()
    }

    #[test]
    fn set_by_index_replaces_the_element_field() {
        let mut d = doc();
        assert_eq!(
            apply(&mut d, "tenants.1.max=1G").unwrap(),
            ["tenants[1].max"]
        );
        assert_eq!(tenant(&d, 1)["max"].as_str(), Some("1G"));
    }

    #[test]
    fn set_by_name_finds_the_element_whose_name_matches() {
        let mut d = doc();
        apply(&mut d, "tenants.vm1.max=4096").unwrap();
        assert_eq!(tenant(&d, 0)["max"].as_integer(), Some(4096));
    }

    #[test]
    fn star_sets_every_element_and_creates_missing_tables() {
        let mut d = doc();
        let set = apply(&mut d, "tenants.*.estimator.kind=tws").unwrap();
        assert_eq!(
            set,
            ["tenants[0].estimator.kind", "tenants[1].estimator.kind"]
        );
        for i in 0..2 {
            assert_eq!(tenant(&d, i)["estimator"]["kind"].as_str(), Some("tws"));
        }
    }

    #[test]
    fn values_that_are_not_toml_are_taken_as_strings() {
        let mut d = doc();
        apply(&mut d, "duration=60s").unwrap();
        assert_eq!(d["duration"].as_str(), Some("60s"));
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
        let e = apply(&mut d, "tenants.vm9.max=5").unwrap_err();
        assert_eq!(e, "no element of tenants is named vm9");
    }

    #[test]
    fn index_past_the_end_is_an_error() {
        let mut d = doc();
        let e = apply(&mut d, "tenants.2.max=5").unwrap_err();
        assert!(e.contains("no index 2"), "{e}");
    }

    #[test]
    fn a_missing_array_is_not_created() {
        let mut d = doc();
        let e = apply(&mut d, "events.0.at=5s").unwrap_err();
        assert!(e.contains("events has no element 0"), "{e}");
        assert!(!d.contains_key("events"));
    }

    #[test]
    fn stepping_into_a_scalar_is_an_error() {
        let mut d = doc();
        let e = apply(&mut d, "duration.x=5").unwrap_err();
        assert!(e.contains("duration is a string"), "{e}");
    }

    #[test]
    fn malformed_override_is_an_error() {
        assert!(Override::parse("duration").is_err());
        assert!(Override::parse("tenants..max=5").is_err());
        assert!(Override::parse("=5").is_err());
    }

    #[test]
    fn overrides_apply_in_order() {
        let mut d = doc();
        apply(&mut d, "seed=1").unwrap();
        apply(&mut d, "seed=2").unwrap();
        assert_eq!(d["seed"].as_integer(), Some(2));
    }
}
