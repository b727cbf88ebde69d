//! Scenario errors: the configuration layer's one-line error, said of a variant when building one, and a `--variant` the scenario does not define.

use memtide_config::ConfigError;
use std::path::{Path, PathBuf};

/// A scenario the user got wrong. Its `Display` is a single line:
/// `FILE[:LINE:COL]: [variant NAME: ]FIELD[ = VALUE]: WHAT`, for example
/// `scenarios/x.toml:9:7: tenants[1].min = "300M": must not exceed max = "256M"`
/// (see [`ConfigError`] for the other shapes).
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A problem that showed while building one of the scenario's variants.
    #[error("{}: variant {variant}: {}", error.place(), error.detail())]
    InVariant {
        variant: String,
        error: Box<ConfigError>,
    },
    /// `--variant NAME` names no variant of the scenario.
    #[error("{}: --variant {variant}: {message}", file.display())]
    NoSuchVariant {
        file: PathBuf,
        variant: String,
        message: String,
    },
}

impl ScenarioError {
    pub(crate) fn in_variant(self, variant: &str) -> ScenarioError {
        match self {
            ScenarioError::Config(error) => ScenarioError::InVariant {
                variant: variant.to_string(),
                error: Box::new(error),
            },
            other => other,
        }
    }

    fn config(&self) -> Option<&ConfigError> {
        match self {
            ScenarioError::Config(e) => Some(e),
            ScenarioError::InVariant { error, .. } => Some(error),
            ScenarioError::NoSuchVariant { .. } => None,
        }
    }

    /// The scenario file (or `<demo>` for the embedded one).
    pub fn file(&self) -> &Path {
        match self {
            ScenarioError::NoSuchVariant { file, .. } => file,
            ScenarioError::Config(e) => e.file(),
            ScenarioError::InVariant { error, .. } => error.file(),
        }
    }

    /// 1-based line and column in the file, when the problem can be pointed at.
    pub fn line_col(&self) -> Option<(usize, usize)> {
        self.config().and_then(ConfigError::line_col)
    }

    /// The variant being built when the problem showed, if any.
    pub fn variant(&self) -> Option<&str> {
        match self {
            ScenarioError::InVariant { variant, .. } => Some(variant),
            _ => None,
        }
    }

    /// The field path, when the error is about a field.
    pub fn field(&self) -> Option<&str> {
        self.config().and_then(ConfigError::field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid() -> ConfigError {
        ConfigError::Invalid {
            file: PathBuf::from("s.toml"),
            location: Some((14, 7)),
            field: "tenants[1].min".into(),
            value: Some("\"300M\"".into()),
            message: "must not exceed max = \"256M\"".into(),
        }
    }

    #[test]
    fn display_names_file_location_field_and_value() {
        let e = ScenarioError::from(invalid());
        assert_eq!(
            e.to_string(),
            "s.toml:14:7: tenants[1].min = \"300M\": must not exceed max = \"256M\""
        );
        assert_eq!(e.field(), Some("tenants[1].min"));
    }

    #[test]
    fn a_variant_is_named_after_the_place() {
        let e = ScenarioError::from(invalid()).in_variant("tws");
        assert_eq!(
            e.to_string(),
            "s.toml:14:7: variant tws: tenants[1].min = \"300M\": must not exceed max = \"256M\""
        );
        assert_eq!(e.variant(), Some("tws"));
        assert_eq!(e.line_col(), Some((14, 7)));
    }
}
