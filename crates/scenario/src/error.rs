//! Scenario errors: one line naming the file, the field (or `--set` override, or variant) and the value.

use std::fmt;

/// One step of a field path: a table key or an array index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// Where a field sits in the scenario document, shown as `tenants[1].min_mb`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct FieldPath(pub(crate) Vec<Seg>);

impl FieldPath {
    pub(crate) fn root() -> FieldPath {
        FieldPath(Vec::new())
    }

    pub(crate) fn key(&self, key: &str) -> FieldPath {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_string()));
        FieldPath(segs)
    }

    pub(crate) fn index(&self, index: usize) -> FieldPath {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        FieldPath(segs)
    }

    /// True when `self` is `other` or lies inside it.
    pub(crate) fn starts_with(&self, other: &FieldPath) -> bool {
        self.0.starts_with(&other.0)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A problem with one field, before the file it came from is known.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FieldError {
    /// The field the message is about.
    pub(crate) path: FieldPath,
    /// The offending value as written (TOML syntax), when there is one.
    pub(crate) value: Option<String>,
    pub(crate) message: String,
    /// Where to point in the file, when not at `path` itself (e.g. an unknown key).
    pub(crate) at: Option<FieldPath>,
}

impl FieldError {
    pub(crate) fn new(path: FieldPath, message: impl Into<String>) -> FieldError {
        FieldError {
            path,
            value: None,
            message: message.into(),
            at: None,
        }
    }

    pub(crate) fn value(mut self, value: impl Into<String>) -> FieldError {
        self.value = Some(value.into());
        self
    }

    pub(crate) fn at(mut self, at: FieldPath) -> FieldError {
        self.at = Some(at);
        self
    }

    /// The path to look up in the file for a line and column.
    pub(crate) fn locate(&self) -> &FieldPath {
        self.at.as_ref().unwrap_or(&self.path)
    }
}

/// What a [`ScenarioError`] is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The file as a whole: it cannot be read, or is not valid TOML.
    File,
    /// A field, e.g. `tenants[1].min_mb`, with its value as written when there is one.
    Field { path: String, value: Option<String> },
    /// A `--set KEY=VALUE` override (from the command line or a variant's `set`).
    Override(String),
    /// A `--variant NAME` that the scenario does not define.
    Variant(String),
}

/// A scenario the user got wrong. Its `Display` is a single line:
/// `FILE[:LINE:COL]: [variant NAME: ]SUBJECT: MESSAGE`, for example
/// `scenarios/x.toml:14:1: tenants[1].min_mb = 300: must not exceed max_mb = 256`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ScenarioError(Box<Inner>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Inner {
    file: String,
    location: Option<(usize, usize)>,
    variant: Option<String>,
    subject: Subject,
    message: String,
}

impl ScenarioError {
    pub(crate) fn new(file: &str, subject: Subject, message: impl Into<String>) -> ScenarioError {
        ScenarioError(Box::new(Inner {
            file: one_line(file),
            location: None,
            variant: None,
            subject,
            message: one_line(&message.into()),
        }))
    }

    pub(crate) fn with_location(mut self, location: Option<(usize, usize)>) -> ScenarioError {
        self.0.location = location;
        self
    }

    pub(crate) fn in_variant(mut self, variant: &str) -> ScenarioError {
        self.0.variant = Some(one_line(variant));
        self
    }

    /// The scenario file (or `<demo>` for the embedded one).
    pub fn file(&self) -> &str {
        &self.0.file
    }

    /// 1-based line and column in the file, when the problem can be pointed at.
    pub fn line_col(&self) -> Option<(usize, usize)> {
        self.0.location
    }

    /// The variant being built when the problem showed, if any.
    pub fn variant(&self) -> Option<&str> {
        self.0.variant.as_deref()
    }

    pub fn subject(&self) -> &Subject {
        &self.0.subject
    }

    /// The field path, when the error is about a field.
    pub fn field(&self) -> Option<&str> {
        match &self.0.subject {
            Subject::Field { path, .. } => Some(path),
            _ => None,
        }
    }

    /// What is wrong, without file, field or value.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    fn render(&self) -> String {
        let e = &self.0;
        let mut s = e.file.clone();
        if let Some((line, col)) = e.location {
            s.push_str(&format!(":{line}:{col}"));
        }
        s.push_str(": ");
        if let Some(v) = &e.variant {
            s.push_str(&format!("variant {v}: "));
        }
        match &self.0.subject {
            Subject::File => {}
            Subject::Field { path, value } => {
                if !path.is_empty() {
                    s.push_str(path);
                    if let Some(value) = value {
                        s.push_str(" = ");
                        s.push_str(value);
                    }
                    s.push_str(": ");
                }
            }
            Subject::Override(o) => s.push_str(&format!("--set {o}: ")),
            Subject::Variant(v) => s.push_str(&format!("--variant {v}: ")),
        }
        s.push_str(&self.0.message);
        s
    }
}

/// Folds a possibly multi-line text into one line: lines are trimmed and joined with "; ".
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

/// Renders a TOML value inline (TOML syntax) for a message, shortened when long.
pub(crate) fn render_value(value: &toml::Value) -> String {
    let full = render_inline(value);
    const MAX: usize = 80;
    if full.chars().count() > MAX {
        let short: String = full.chars().take(MAX).collect();
        format!("{short}...")
    } else {
        full
    }
}

fn render_inline(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => render_string(s),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.1}"),
        toml::Value::Float(f) => render_number(*f),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Array(a) => {
            let items: Vec<String> = a.iter().map(render_inline).collect();
            format!("[{}]", items.join(", "))
        }
        toml::Value::Table(t) => {
            if t.is_empty() {
                return "{}".to_string();
            }
            let items: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{k} = {}", render_inline(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
    }
}

/// A string in TOML basic-string syntax.
pub(crate) fn render_string(s: &str) -> String {
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

/// A number as a person would write it: `256`, `263.3`, `-5`, `nan`.
pub(crate) fn render_number(f: f64) -> String {
    if f.is_nan() {
        "nan".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if f != 0.0 && !(1e-6..1e15).contains(&f.abs()) {
        format!("{f:e}")
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_path_displays_keys_and_indices() {
        let p = FieldPath::root().key("tenants").index(1).key("min_mb");
        assert_eq!(p.to_string(), "tenants[1].min_mb");
        assert!(p.starts_with(&FieldPath::root().key("tenants").index(1)));
        assert!(!p.starts_with(&FieldPath::root().key("tenants").index(0)));
    }

    #[test]
    fn error_display_names_file_location_field_and_value() {
        let e = ScenarioError::new(
            "s.toml",
            Subject::Field {
                path: "tenants[1].min_mb".into(),
                value: Some("300".into()),
            },
            "must not exceed max_mb = 256",
        )
        .with_location(Some((14, 1)));
        assert_eq!(
            e.to_string(),
            "s.toml:14:1: tenants[1].min_mb = 300: must not exceed max_mb = 256"
        );
    }

    #[test]
    fn error_display_is_one_line_even_for_multi_line_messages() {
        let e = ScenarioError::new("a\nb.toml", Subject::File, "first\n\n  second  \n");
        assert_eq!(e.to_string(), "a; b.toml: first; second");
    }

    #[test]
    fn render_value_uses_toml_syntax_and_shortens_long_values() {
        assert_eq!(
            render_value(&toml::Value::String("a\"b".into())),
            "\"a\\\"b\""
        );
        assert_eq!(render_value(&toml::Value::Integer(-5)), "-5");
        assert_eq!(render_value(&toml::Value::Float(263.3)), "263.3");
        let long = toml::Value::String("x".repeat(200));
        assert!(render_value(&long).ends_with("..."));
        assert!(render_value(&long).len() < 100);
    }

    #[test]
    fn render_number_writes_whole_floats_without_decimals() {
        assert_eq!(render_number(1.0), "1");
        assert_eq!(render_number(1.2), "1.2");
        assert_eq!(render_number(f64::NAN), "nan");
        assert_eq!(render_number(1e300), "1e300");
    }
}
