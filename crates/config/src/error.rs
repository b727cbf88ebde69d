//! The one error of the configuration layer: a file that cannot be read, is not TOML, has a bad `--set` override, or a field that is wrong; its `Display` is one line naming file:line:col, the field and the value.

use std::path::{Path, PathBuf};

/// A configuration file the user got wrong. Its `Display` is a single line:
///
/// - `FILE: cannot read the file: OS ERROR`;
/// - `FILE:LINE:COL: invalid TOML: WHAT`;
/// - `FILE: --set KEY=VALUE: WHAT` for an override that cannot be applied;
/// - `FILE[:LINE:COL]: FIELD[ = VALUE]: WHAT` otherwise, for example
///   `scenarios/x.toml:9:7: tenants[1].min = "300M": must not exceed max = "256M"`.
///
/// `LINE:COL` (1-based, column in characters) points at the value, or at the table's header
/// when the problem is the table (a missing field). There is none when a `--set` override
/// wrote the value, or the field is not in the file (a default).
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", self.place(), self.detail())]
pub enum ConfigError {
    /// The file cannot be read (missing, unreadable, not UTF-8).
    Read {
        file: PathBuf,
        error: std::io::Error,
    },
    /// The text is not valid TOML.
    Syntax {
        file: PathBuf,
        location: Option<(usize, usize)>,
        message: String,
    },
    /// A `--set KEY=VALUE` override is malformed or names nothing.
    Override {
        file: PathBuf,
        text: String,
        message: String,
    },
    /// A field is missing, unknown, of the wrong type, out of range, or at odds with another.
    Invalid {
        file: PathBuf,
        location: Option<(usize, usize)>,
        /// `tenants[1].min`; empty for the file as a whole.
        field: String,
        /// The value as written (TOML syntax, shortened), when there is one.
        value: Option<String>,
        /// What is wrong and what is allowed.
        message: String,
    },
}

impl ConfigError {
    /// The file the error is about.
    pub fn file(&self) -> &Path {
        match self {
            ConfigError::Read { file, .. }
            | ConfigError::Syntax { file, .. }
            | ConfigError::Override { file, .. }
            | ConfigError::Invalid { file, .. } => file,
        }
    }

    /// 1-based line and column, when the problem can be pointed at.
    pub fn line_col(&self) -> Option<(usize, usize)> {
        match self {
            ConfigError::Syntax { location, .. } | ConfigError::Invalid { location, .. } => {
                *location
            }
            ConfigError::Read { .. } | ConfigError::Override { .. } => None,
        }
    }

    /// The field's path, when the error is about a field.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. } if !field.is_empty() => Some(field),
            _ => None,
        }
    }

    /// The value as written, when the error is about one.
    pub fn value(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { value, .. } => value.as_deref(),
            _ => None,
        }
    }

    /// `FILE` or `FILE:LINE:COL`: the part of the line before the first `": "`.
    pub fn place(&self) -> String {
        let file = one_line(&self.file().display().to_string());
        match self.line_col() {
            Some((line, col)) => format!("{file}:{line}:{col}"),
            None => file,
        }
    }

    /// The rest of the line: the field, its value and what is wrong.
    pub fn detail(&self) -> String {
        match self {
            ConfigError::Read { error, .. } => {
                format!("cannot read the file: {}", one_line(&error.to_string()))
            }
            ConfigError::Syntax { message, .. } => format!("invalid TOML: {}", one_line(message)),
            ConfigError::Override { text, message, .. } => {
                format!("--set {}: {}", one_line(text), one_line(message))
            }
            ConfigError::Invalid {
                field,
                value,
                message,
                ..
            } => {
                let mut s = one_line(field);
                if let Some(v) = value.as_deref().filter(|_| !field.is_empty()) {
                    s.push_str(" = ");
                    s.push_str(&one_line(v));
                }
                if !s.is_empty() {
                    s.push_str(": ");
                }
                s.push_str(&one_line(message));
                s
            }
        }
    }
}

/// Folds a possibly multi-line text into one line: lines are trimmed and joined with "; ",
/// other control characters become spaces.
pub(crate) fn one_line(text: &str) -> String {
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    parts
        .join("; ")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A string in TOML basic-string syntax.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value inline in TOML syntax, shortened when long.
pub(crate) fn render(value: &toml::Value) -> String {
    let full = inline(value);
    const MAX: usize = 80;
    if full.chars().count() > MAX {
        let short: String = full.chars().take(MAX).collect();
        format!("{short}...")
    } else {
        full
    }
}

fn inline(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => quote(s),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(inline).collect();
            format!("[{}]", items.join(", "))
        }
        toml::Value::Table(t) if t.is_empty() => "{}".to_string(),
        toml::Value::Table(t) => {
            let items: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", crate::path::FieldPath::root().key(k), inline(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        // Floats beyond 1e16 or below 1e-6 in exponent form (`1e300`, not 301 digits), as
        // TOML reads them.
        toml::Value::Float(x) if x.is_finite() && *x != 0.0 && !(1e-6..1e16).contains(&x.abs()) => {
            format!("{x:e}")
        }
        // Integers, floats (`1.0`, `nan`, `inf`) and booleans as TOML writes them.
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(field: &str, value: Option<&str>, message: &str) -> ConfigError {
        ConfigError::Invalid {
            file: PathBuf::from("s.toml"),
            location: Some((9, 7)),
            field: field.into(),
            value: value.map(String::from),
            message: message.into(),
        }
    }

    #[test]
    fn invalid_display_names_file_location_field_and_value() {
        let e = invalid(
            "tenants[1].min",
            Some("\"300M\""),
            "must not exceed max = \"256M\"",
        );
        assert_eq!(
            e.to_string(),
            "s.toml:9:7: tenants[1].min = \"300M\": must not exceed max = \"256M\""
        );
        assert_eq!(e.field(), Some("tenants[1].min"));
        assert_eq!(e.value(), Some("\"300M\""));
    }

    #[test]
    fn display_is_one_line_even_for_multi_line_parts() {
        let e = ConfigError::Syntax {
            file: PathBuf::from("a\nb.toml"),
            location: None,
            message: "first\n\n  second  \n".into(),
        };
        assert_eq!(e.to_string(), "a; b.toml: invalid TOML: first; second");
    }

    #[test]
    fn a_problem_with_the_whole_file_has_no_field() {
        let e = invalid("", Some("{}"), "missing field `duration`");
        assert_eq!(e.to_string(), "s.toml:9:7: missing field `duration`");
        assert_eq!(e.field(), None);
    }

    #[test]
    fn render_uses_toml_syntax_and_shortens_long_values() {
        assert_eq!(render(&toml::Value::String("a\"b".into())), "\"a\\\"b\"");
        assert_eq!(render(&toml::Value::Float(263.3)), "263.3");
        assert_eq!(render(&toml::Value::Float(1.0)), "1.0");
        assert_eq!(render(&toml::Value::Float(1e300)), "1e300");
        assert_eq!(render(&toml::Value::Float(-2.5e20)), "-2.5e20");
        assert_eq!(render(&toml::Value::Float(1e-300)), "1e-300");
        assert_eq!(render(&toml::Value::Float(0.001)), "0.001");
        let date: toml::Value = "d = 1979-05-27".parse::<toml::Table>().unwrap()["d"].clone();
        assert_eq!(render(&date), "1979-05-27");
        let t: toml::Table = "t = { a = [1, \"x\"] }".parse().unwrap();
        assert_eq!(render(&t["t"]), "{ a = [1, \"x\"] }");
        let long = toml::Value::String("x".repeat(200));
        assert!(render(&long).ends_with("..."));
    }
}
