//! Configuration errors: one line naming the file, the place in it, the field and the value.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A configuration the daemon cannot run with. Its `Display` is a single line:
///
/// - `FILE: cannot read the configuration: OS ERROR` when the file cannot be read;
/// - `FILE:LINE:COL: invalid TOML: WHAT` when it is not TOML;
/// - `FILE[:LINE:COL]: FIELD: [VALUE ]WHAT` otherwise, for example
///   `daemon.toml:14:10: tenant "db".cgroup: "/x/y" is outside the configured parent "/memtide"`.
///
/// `LINE:COL` (1-based, column in characters) points at the value, or at the key or table
/// header when the problem is a key or a missing field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read (missing, unreadable, not UTF-8).
    #[error("{}: cannot read the configuration: {}", one_line(&path.display().to_string()), one_line(&error.to_string()))]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("{}: invalid TOML: {message}", place(file, *location))]
    Syntax {
        file: PathBuf,
        /// 1-based line and column, when toml knows where.
        location: Option<(usize, usize)>,
        /// One line.
        message: String,
    },
    /// A field is missing, unknown, of the wrong type, out of range, or at odds with another.
    #[error("{}: {field}: {}", place(file, *location), with_value(value.as_deref(), message))]
    Invalid {
        file: PathBuf,
        /// 1-based line and column of the value (or key, or table header), when known.
        location: Option<(usize, usize)>,
        /// Where the field sits: `daemon.tick`, `tenant[1].name`, `tenant "db".max`.
        field: String,
        /// The offending value as written (TOML syntax), when there is one.
        value: Option<String>,
        /// What is wrong and what is allowed; one line.
        message: String,
    },
}

impl ConfigError {
    /// The configuration file the error is about.
    pub fn file(&self) -> &Path {
        match self {
            ConfigError::Read { path, .. } => path,
            ConfigError::Syntax { file, .. } | ConfigError::Invalid { file, .. } => file,
        }
    }

    /// 1-based line and column, when the problem can be pointed at.
    pub fn line_col(&self) -> Option<(usize, usize)> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { location, .. } | ConfigError::Invalid { location, .. } => {
                *location
            }
        }
    }

    /// The field path, when the error is about a field.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }
}

fn place(file: &Path, location: Option<(usize, usize)>) -> String {
    let file = one_line(&file.display().to_string());
    match location {
        Some((line, col)) => format!("{file}:{line}:{col}"),
        None => file,
    }
}

fn with_value(value: Option<&str>, message: &str) -> String {
    match value {
        Some(v) => format!("{v} {message}"),
        None => message.to_string(),
    }
}

/// A problem with one field, before the file it came from is known.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Problem {
    pub(crate) field: String,
    pub(crate) value: Option<String>,
    pub(crate) message: String,
    /// Byte range in the text to point at.
    pub(crate) span: Option<Range<usize>>,
}

impl Problem {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            field: field.into(),
            value: None,
            message: message.into(),
            span: None,
        }
    }

    pub(crate) fn value(mut self, value: impl Into<String>) -> Problem {
        self.value = Some(value.into());
        self
    }

    pub(crate) fn span(mut self, span: Option<Range<usize>>) -> Problem {
        self.span = span;
        self
    }

    /// The error for `file`, whose text is `text`.
    pub(crate) fn into_error(self, file: &Path, text: &str) -> ConfigError {
        ConfigError::Invalid {
            file: file.to_path_buf(),
            location: self.span.map(|s| line_col(text, s.start)),
            field: one_line(&self.field),
            value: self.value.map(|v| one_line(&v)),
            message: one_line(&self.message),
        }
    }
}

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

/// A string in TOML basic-string syntax, for messages.
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

/// A float as TOML would accept it back: `0.75`, `10.0`, `nan`, `inf`.
pub(crate) fn render_float(f: f64) -> String {
    if f.is_nan() {
        "nan".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

/// A list for messages: `a, b and c`.
pub(crate) fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            self.field,
            with_value(self.value.as_deref(), &self.message)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_display_names_file_location_field_and_value() {
        let e = Problem::new("tenant \"db\".cgroup", "is outside the configured parent")
            .value("\"/x/y\"")
            .span(Some(4..9))
            .into_error(Path::new("d.toml"), "abc\nd = \"/x/y\"\n");
        assert_eq!(
            e.to_string(),
            "d.toml:2:1: tenant \"db\".cgroup: \"/x/y\" is outside the configured parent"
        );
        assert_eq!(e.field(), Some("tenant \"db\".cgroup"));
        assert_eq!(e.line_col(), Some((2, 1)));
    }

    #[test]
    fn display_is_one_line_even_for_multi_line_parts() {
        let e = Problem::new("a\nb", "first\n\n  second  \n").into_error(Path::new("x\ny"), "");
        assert_eq!(e.to_string(), "x; y: a; b: first; second");
    }

    #[test]
    fn line_col_counts_lines_and_characters_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("é\nx", 3), (2, 1));
        assert_eq!(line_col("ab", 99), (1, 3));
    }

    #[test]
    fn quote_and_floats_use_toml_syntax() {
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(render_float(10.0), "10.0");
        assert_eq!(render_float(0.75), "0.75");
        assert_eq!(render_float(f64::NAN), "nan");
        assert_eq!(list(&["a".into(), "b".into(), "c".into()]), "a, b and c");
    }
}
