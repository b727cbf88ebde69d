//! Reads the sim's serde types (workload, cost model) out of a scenario table, turning serde's messages into errors that name the offending field and value.
//!
//! serde's messages ("invalid type: string \"x\", expected f64", "unknown field `y`") do not
//! say where the value sits; this module finds the one field in the table that the message is
//! about and names it.

use crate::error::{one_line, render_value, FieldError, FieldPath};
use serde::de::DeserializeOwned;
use toml::Value;

/// Deserializes `value` (found at `path`) as a `T`.
pub(crate) fn read<T: DeserializeOwned>(value: &Value, path: &FieldPath) -> Result<T, FieldError> {
    value.clone().try_into::<T>().map_err(|e| {
        let message = one_line(e.message());
        match culprit(value, &message, path) {
            Some((at, shown)) => FieldError::new(at, message).value(shown),
            None => FieldError::new(path.clone(), message),
        }
    })
}

/// The field of `value` that `message` is about, with its value as written.
fn culprit(value: &Value, message: &str, path: &FieldPath) -> Option<(FieldPath, String)> {
    // "unknown field `bogus`, expected ..." / "unknown variant `nope`, expected ...".
    if let Some(name) = quoted_after(message, "unknown field `") {
        let mut found = Vec::new();
        keys_named(value, path, &name, &mut found);
        return (found.len() == 1).then(|| found.remove(0));
    }
    if let Some(name) = quoted_after(message, "unknown variant `") {
        let mut found = Vec::new();
        leaves(value, path, &mut |p, v| {
            if v.as_str() == Some(name.as_str()) {
                found.push((p.clone(), render_value(v)));
            }
        });
        return (found.len() == 1).then(|| found.remove(0));
    }
    // "invalid type: string \"lots\", expected f64" and the like: find the one leaf whose
    // serde description appears in the message.
    let mut found = Vec::new();
    leaves(value, path, &mut |p, v| {
        if let Some(d) = serde_description(v) {
            if message.contains(&d) {
                found.push((p.clone(), render_value(v)));
            }
        }
    });
    (found.len() == 1).then(|| found.remove(0))
}

/// The text between `prefix` and the next backtick.
fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    let start = message.find(prefix)? + prefix.len();
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

/// How serde's `Unexpected` describes a leaf value in "invalid type" messages.
fn serde_description(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(format!("string {s:?}")),
        Value::Integer(i) => Some(format!("integer `{i}`")),
        Value::Float(f) if f.fract() == 0.0 && f.is_finite() => {
            Some(format!("floating point `{f:.1}`"))
        }
        Value::Float(f) => Some(format!("floating point `{f}`")),
        Value::Boolean(b) => Some(format!("boolean `{b}`")),
        _ => None,
    }
}

/// Calls `f` on every non-container value under `value`.
fn leaves(value: &Value, path: &FieldPath, f: &mut dyn FnMut(&FieldPath, &Value)) {
    match value {
        Value::Table(t) => {
            for (k, v) in t {
                leaves(v, &path.key(k), f);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                leaves(v, &path.index(i), f);
            }
        }
        leaf => f(path, leaf),
    }
}

/// Every key named `name` under `value`.
fn keys_named(value: &Value, path: &FieldPath, name: &str, out: &mut Vec<(FieldPath, String)>) {
    match value {
        Value::Table(t) => {
            for (k, v) in t {
                let p = path.key(k);
                if k == name {
                    out.push((p.clone(), render_value(v)));
                }
                keys_named(v, &p, name, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                keys_named(v, &path.index(i), name, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_sim::cost::CostModel;
    use memtide_sim::workload::WorkloadConfig;

    fn path() -> FieldPath {
        FieldPath::root().key("tenants").index(0).key("workload")
    }

    fn workload(text: &str) -> Result<WorkloadConfig, FieldError> {
        let v: Value = Value::Table(text.parse().unwrap());
        read(&v, &path())
    }

    #[test]
    fn good_workload_reads() {
        let w = workload("kind = \"idle\"\nresident_mb = 10\n").unwrap();
        assert_eq!(w.kind(), "idle");
    }

    #[test]
    fn wrong_type_names_the_field_and_value() {
        let e = workload("kind = \"idle\"\nresident_mb = \"lots\"\n").unwrap_err();
        assert_eq!(e.path.to_string(), "tenants[0].workload.resident_mb");
        assert_eq!(e.value.as_deref(), Some("\"lots\""));
    }

    #[test]
    fn unknown_field_names_the_field() {
        let e = workload("kind = \"idle\"\nbogus = 1\n").unwrap_err();
        assert_eq!(e.path.to_string(), "tenants[0].workload.bogus");
        assert!(e.message.contains("unknown field"), "{}", e.message);
    }

    #[test]
    fn unknown_kind_names_the_kind_field() {
        let e = workload("kind = \"nope\"\n").unwrap_err();
        assert_eq!(e.path.to_string(), "tenants[0].workload.kind");
        assert_eq!(e.value.as_deref(), Some("\"nope\""));
    }

    #[test]
    fn nested_wrong_type_names_the_element_field() {
        let e = workload("kind = \"toucher\"\nphases = [{ at_s = 0, working_set_mb = \"x\" }]\n")
            .unwrap_err();
        assert_eq!(
            e.path.to_string(),
            "tenants[0].workload.phases[0].working_set_mb"
        );
    }

    #[test]
    fn missing_field_stays_on_the_table() {
        let e = workload("kind = \"toucher\"\n").unwrap_err();
        assert_eq!(e.path.to_string(), "tenants[0].workload");
        assert!(e.message.contains("phases"), "{}", e.message);
    }

    #[test]
    fn cost_model_reads_with_defaults_and_rejects_unknown_fields() {
        let v = Value::Table("disk_read_us = 5000\n".parse().unwrap());
        let c: CostModel = read(&v, &FieldPath::root().key("cost")).unwrap();
        assert_eq!(c.disk_read_us, 5000.0);
        assert_eq!(c.minor_fault_us, CostModel::default().minor_fault_us);
        let v = Value::Table("disk_us = 5\n".parse().unwrap());
        let e = read::<CostModel>(&v, &FieldPath::root().key("cost")).unwrap_err();
        assert_eq!(e.path.to_string(), "cost.disk_us");
    }
}
